"""sweep and detect_many on a two-worker LocalCluster: results, reruns, failures."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import ratekit
from ratekit import dask_run
from conftest import SCENARIO, run_cli
from test_sim_detect import make_traces

distributed = pytest.importorskip("dask.distributed")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


def test_sweep_partitions_reruns_and_failures(tmp_path: Path, cli: Path, client) -> None:
    out = tmp_path / "sweep"
    grid = {"enforcer.theta_plus": [1.2, 2.0], "enforcer.window": ["50ms", "100ms"]}
    first = ratekit.sweep(SCENARIO, grid, client=client, out=out)
    assert list(first["status"]) == ["ok"] * 4
    assert list(first["enforcer.window"]) == ["50ms", "100ms", "50ms", "100ms"]
    summary = pd.read_parquet(out / "summary")
    assert summary["point"].nunique() == 4 and len(summary) == 4 * 2

    # A point equals `ratekit sim` run on that point's scenario.
    point_dir = tmp_path / "cli-point"
    scenario = tmp_path / "p.toml"
    scenario.write_text(SCENARIO.replace("theta_plus = 1.5", "theta_plus = 2.0").replace('window = "100ms"', 'window = "50ms"'))
    run_cli(cli, "sim", scenario, "--out", point_dir, "--quiet")
    row = first[(first["enforcer.theta_plus"] == 2.0) & (first["enforcer.window"] == "50ms")].iloc[0]
    aggs = pd.read_parquet(out / "aggregates" / f"point={row['point']}")
    pd.testing.assert_frame_equal(aggs, pd.read_csv(point_dir / "aggregates.csv"))

    # A grown grid with one bad value: the four done points are skipped, the bad one is recorded.
    grid["enforcer.window"].append("-5ms")
    second = ratekit.sweep(SCENARIO, grid, client=client, out=out)
    assert (second["status"] == "skipped").sum() == 4
    failed = second[second["status"] == "error"]
    assert len(failed) == 2 and failed["error"].str.contains("window").all()
    record = json.loads((out / "points" / f"{failed.iloc[0]['point']}.json").read_text())
    assert record["status"] == "error"


def test_detect_many_matches_detect(tmp_path: Path, client) -> None:
    traces = make_traces(tmp_path / "traces")
    (tmp_path / "traces" / "broken.pcap").write_bytes(b"garbage")
    out = tmp_path / "detect"
    index = ratekit.detect_many(tmp_path / "traces", client=client, out=out)
    assert sorted(index["status"]) == ["error", "ok", "ok", "ok"]
    results = pd.read_parquet(out / "results").drop(columns="file_id")
    expected = ratekit.detect(tmp_path / "traces")
    key = ["file", "flow", "segment", "direction"]
    pd.testing.assert_frame_equal(
        results.sort_values(key).reset_index(drop=True).astype(expected.dtypes.to_dict()),
        expected.sort_values(key).reset_index(drop=True),
    )
    again = ratekit.detect_many(tmp_path / "traces", client=client, out=out)
    assert sorted(again["status"]) == ["error", "skipped", "skipped", "skipped"]
    assert len(traces) == 3


def test_dask_run_entry_point(tmp_path: Path, client) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO + '\n[sweep]\n"enforcer.theta_plus" = [1.2, 2.0]\n')
    address = client.scheduler.address
    assert dask_run.main(["sim", str(scenario), "--out", str(tmp_path / "o"), "--dask", address]) == 0
    assert pd.read_parquet(tmp_path / "o" / "summary")["point"].nunique() == 2
    plain = tmp_path / "plain.toml"
    plain.write_text(SCENARIO)
    assert dask_run.main(["sim", str(plain), "--out", str(tmp_path / "p"), "--dask", address]) == 2


def test_cli_dask_flag_runs_on_the_cluster(tmp_path: Path, cli: Path, client) -> None:
    """`ratekit sim --dask` and `ratekit detect --dask` hand the work to this cluster."""
    address = client.scheduler.address
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO + '\n[sweep]\n"enforcer.theta_plus" = [1.2, 2.0]\n')
    run_cli(cli, "sim", scenario, "--out", tmp_path / "sim", "--dask", address)
    summary = pd.read_parquet(tmp_path / "sim" / "summary")
    assert summary["point"].nunique() == 2
    traces = make_traces(tmp_path / "traces")
    run_cli(cli, "detect", tmp_path / "traces", "--out", tmp_path / "det", "--dask", address)
    statuses = [json.loads(p.read_text())["status"] for p in (tmp_path / "det" / "files").glob("*.json")]
    assert statuses == ["ok"] * len(traces)
    assert len(pd.read_parquet(tmp_path / "det" / "results")) > 0
