"""``simulate``: one simulation scenario, results as DataFrames."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, NamedTuple, Optional

import pandas as pd

from ratekit import _native
from ratekit._text import PathOrText, read_text


class SimResult(NamedTuple):
    """``summary``: one row per aggregate (summary.json's ``aggregates``), with the whole summary
    (flows, engine speed, seed) in ``summary.attrs["summary"]``. ``flows`` and ``aggregates``: the
    per-window time series (flows.csv and aggregates.csv of ``ratekit sim``)."""

    summary: pd.DataFrame
    flows: pd.DataFrame
    aggregates: pd.DataFrame


def simulate(scenario: PathOrText, seed: Optional[int] = None, out: Optional[PathOrText] = None) -> SimResult:
    """Runs a scenario (a TOML path or text, without ``[sweep]``; see docs/simulator.md) exactly
    as ``ratekit sim SCENARIO --out OUT [--seed SEED]`` does. With ``out`` the CSVs and
    summary.json are kept there; otherwise they go to a temporary directory."""
    text, name = read_text(scenario, "scenario")
    if out is not None:
        return _run(text, name, Path(out), seed)
    with tempfile.TemporaryDirectory(prefix="ratekit-sim-") as d:
        return _run(text, name, Path(d), seed)


def _run(text: str, name: str, out: Path, seed: Optional[int]) -> SimResult:
    summary: dict[str, Any] = json.loads(_native.simulate(text, name, out, seed))
    return SimResult(summary_frame(summary), pd.read_csv(out / "flows.csv"), pd.read_csv(out / "aggregates.csv"))


def summary_frame(summary: dict[str, Any]) -> pd.DataFrame:
    """summary.json's per-aggregate rows, the full summary in ``attrs["summary"]``."""
    frame = pd.DataFrame(summary["aggregates"])
    frame.attrs["summary"] = summary
    return frame
