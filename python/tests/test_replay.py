"""replay and the array API against `ratekit replay` on the same input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ratekit
from conftest import REPO, arrivals, run_cli

CASES = [
    ("policer.toml", None),
    ("srtcm.toml", None),
    ("fairpolicer.toml", None),
    ("pqp-fair.toml", None),
    ("bcpqp-fair.toml", None),
    ("bcpqp-priority.toml", None),
    ("shaper-fair.toml", None),
    ("fifo.toml", "10mbit"),
    ("red.toml", "10mbit"),
    ("dscd.toml", "10mbit"),
]


@pytest.mark.parametrize("config,link_rate", CASES)
@pytest.mark.parametrize("text_ids", [False, True])
def test_replay_equals_cli(tmp_path: Path, cli: Path, config: str, link_rate: str, text_ids: bool) -> None:
    config_path = REPO / "examples" / "enforcers" / config
    source = tmp_path / "in.csv"
    arrivals(seed=len(config), text_ids=text_ids).to_csv(source, index=False)
    out = tmp_path / "out.csv"
    args = ["replay", "--config", config_path, "--input", source, "--output", out]
    run_cli(cli, *args, *(["--link-rate", link_rate] if link_rate else []))
    expected = pd.read_csv(out, dtype={"departure_ns": "Int64"} if "departure_ns" in pd.read_csv(out, nrows=1) else None)

    got = ratekit.replay(config_path, source, link_rate=link_rate)
    pd.testing.assert_frame_equal(got, expected)
    # The DataFrame form gives the same rows; the config may also be given as text.
    from_frame = ratekit.replay(config_path.read_text(), pd.read_csv(source), link_rate=link_rate)
    pd.testing.assert_frame_equal(from_frame, expected)
    # An overloaded trace: both verdicts occur, so a constant answer could not pass.
    assert {"pass", "drop"} <= set(expected["verdict"])


def test_array_api_matches_and_is_deterministic() -> None:
    df = arrivals(seed=7)
    e = ratekit.Enforcer(REPO / "examples" / "enforcers" / "bcpqp-fair.toml")
    cols = [df[c].to_numpy() for c in ("time_ns", "aggregate", "flow", "bytes", "class")]
    a, b = e.run(*cols), e.run(*cols)
    assert a.verdict.dtype == np.uint8 and len(a.verdict) == len(df)
    assert np.array_equal(a.verdict, b.verdict)
    assert not a.queueing and (a.departure_ns == -1).all()
    assert list(a.names()) == list(ratekit.replay(REPO / "examples" / "enforcers" / "bcpqp-fair.toml", df)["verdict"])


def test_policer_rate_is_enforced() -> None:
    """A 10 Mbit/s token bucket passes about 10 Mbit/s of an overload: the arrays carry real verdicts."""
    n = 50_000
    time_ns = np.arange(n, dtype=np.uint64) * 600_000  # 1500 B every 0.6 ms = 20 Mbit/s
    e = ratekit.Enforcer('kind = "token_bucket"\nrate = "10mbit"\nburst = 15000\n')
    v = e.run(time_ns, np.zeros(n, np.uint64), np.arange(n, dtype=np.uint64) % 8, np.full(n, 1500, np.uint32))
    passed_bps = (v.verdict == 0).sum() * 1500 * 8 / (time_ns[-1] / 1e9)
    assert 9.5e6 < passed_bps < 10.5e6


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    e = ratekit.Enforcer(REPO / "examples" / "enforcers" / "policer.toml")
    one = np.ones(2, np.uint64)
    with pytest.raises(ValueError, match="sorted by time"):
        e.run(np.array([5, 1], np.uint64), one, one, np.array([100, 100], np.uint32))
    with pytest.raises(ValueError, match="bytes"):
        e.run(np.array([1, 5], np.uint64), one, one, np.array([0, 100], np.uint32))
    with pytest.raises(ValueError, match="0mbit"):
        ratekit.Enforcer('kind = "token_bucket"\nrate = "0mbit"\nburst = 1500\n')
    with pytest.raises(ValueError, match="link-rate is required"):
        ratekit.Enforcer(REPO / "examples" / "enforcers" / "red.toml").run(one, one, one, np.ones(2, np.uint32))
    with pytest.raises(FileNotFoundError):
        ratekit.Enforcer(tmp_path / "missing.toml")


def test_class_out_of_range_is_rejected_like_the_cli(tmp_path: Path, cli: Path) -> None:
    config = REPO / "examples" / "enforcers" / "bcpqp-priority.toml"
    df = arrivals(seed=3, n=100).assign(**{"class": 5})
    with pytest.raises(ValueError, match="'class': 5 is out of range"):
        ratekit.replay(config, df)


def test_empty_class_is_class_zero_like_the_cli(tmp_path: Path, cli: Path) -> None:
    config = REPO / "examples" / "enforcers" / "bcpqp-priority.toml"
    df = arrivals(seed=4, n=3000).astype({"class": "float64"})
    df.loc[::3, "class"] = np.nan
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    df.to_csv(source, index=False, float_format="%.0f")
    run_cli(cli, "replay", "--config", config, "--input", source, "--output", out)
    pd.testing.assert_frame_equal(ratekit.replay(config, source), pd.read_csv(out))
