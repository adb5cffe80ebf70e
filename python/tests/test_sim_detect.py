"""simulate and detect against `ratekit sim` and `ratekit detect` on the same inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

import ratekit
from ratekit import _native
from conftest import run_cli

ENGINE_TIMING = {"wall_seconds", "events_per_second"}


def test_simulate_equals_cli(tmp_path: Path, cli: Path, scenario_file: Path) -> None:
    out = tmp_path / "cli"
    run_cli(cli, "sim", scenario_file, "--out", out, "--quiet", "--seed", 5)
    got = ratekit.simulate(scenario_file, seed=5)
    pd.testing.assert_frame_equal(got.flows, pd.read_csv(out / "flows.csv"))
    pd.testing.assert_frame_equal(got.aggregates, pd.read_csv(out / "aggregates.csv"))
    expected = json.loads((out / "summary.json").read_text())
    summary = got.summary.attrs["summary"]
    for s in (expected, summary):
        for k in ENGINE_TIMING:
            s["engine"].pop(k)
    assert summary == expected
    pd.testing.assert_frame_equal(got.summary, pd.DataFrame(expected["aggregates"]), check_like=False)
    assert len(got.flows) > 0 and got.summary["mean_normalized_throughput"].gt(0.5).all()


def make_traces(root: Path) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed, rate in ((1, "2mbit"), (2, "5mbit"), (3, None)):
        p = root / f"trace-{seed}.pcap"
        _native.synth_trace(p, seed, rate, chunks=3)
        paths.append(p)
    return paths


def test_detect_equals_cli(tmp_path: Path, cli: Path) -> None:
    traces = make_traces(tmp_path / "traces")
    bad = tmp_path / "traces" / "broken.pcap"
    bad.write_bytes(b"not a pcap at all")
    out = tmp_path / "cli.csv"
    run_cli(cli, "detect", tmp_path / "traces", "--out", out)
    got = ratekit.detect(tmp_path / "traces")
    pd.testing.assert_frame_equal(got, ratekit.detect.__globals__["read_results"](out))
    # The policed traces are found policed near their rate; the drop-tail one is not.
    seg = got[(got["direction"] != "aggregate") & got["error"].isna()]
    policed = seg.groupby("file")["policed"].any()
    assert policed[str(traces[0])] and policed[str(traces[1])] and not policed[str(traces[2])]
    assert (got["reason"] == "read_error").sum() == 1
    clusters = ratekit.rate_clusters(got)
    expected_clusters = tmp_path / "cli-clusters.csv"
    run_cli(cli, "detect", "--clusters", out, "--out", expected_clusters)
    pd.testing.assert_frame_equal(clusters, pd.read_csv(expected_clusters))
