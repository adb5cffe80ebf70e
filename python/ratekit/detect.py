"""``detect``: find policers in packet traces (002 §2) and their rate clusters (§3.2)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable, Optional, Union

import pandas as pd

from ratekit import _native

Paths = Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]]

#: Column types of the results, so empty columns keep one type across files (and Parquet parts).
RESULT_DTYPES = {
    "file": "string",
    "flow": "string",
    "segment": "string",
    "direction": "string",
    "client": "string",
    "pattern": "string",
    "reason": "string",
    "error": "string",
    "data_packets": "Int64",
    "losses": "Int64",
    "burst_bytes": "Int64",
    "loss_rate": "float64",
    "rate_bps": "float64",
    "burst_throughput_bps": "float64",
    "median_rtt_ms": "float64",
    "policed": "boolean",
    "pass": "boolean",
}


def _paths(paths: Paths) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def read_results(path: Union[str, "os.PathLike[str]"]) -> pd.DataFrame:
    """Reads a ``ratekit detect`` results CSV with the column types of ``RESULT_DTYPES``."""
    return pd.read_csv(path, dtype=RESULT_DTYPES, keep_default_na=False, na_values={c: [""] for c in RESULT_DTYPES})


def detect(
    paths: Paths,
    all_directions: bool = False,
    aggregate: bool = True,
    jobs: Optional[int] = None,
    out: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> pd.DataFrame:
    """``ratekit detect PATHS --out OUT``: one row per analysed segment (plus per-client aggregate
    rows unless ``aggregate=False``, and a ``read_error`` row for a file that could not be read).
    Directories are walked for .pcap/.pcapng/.cap (optionally .gz). Raises ValueError when no
    file could be read at all."""
    files = _paths(paths)
    if out is not None:
        _native.detect_files(files, Path(out), all_directions, aggregate, jobs)
        return read_results(out)
    with tempfile.TemporaryDirectory(prefix="ratekit-detect-") as d:
        results = Path(d) / "results.csv"
        _native.detect_files(files, results, all_directions, aggregate, jobs)
        return read_results(results)


def rate_clusters(results: pd.DataFrame, group_by: str = "file", coverage: float = 0.75) -> pd.DataFrame:
    """``ratekit detect --clusters``: the policing-rate clusters of each group of results (002 §3.2:
    the fewest clusters covering ``coverage`` of the group's policed rates)."""
    with tempfile.TemporaryDirectory(prefix="ratekit-clusters-") as d:
        src, dst = Path(d) / "results.csv", Path(d) / "clusters.csv"
        frame = results.copy()
        for c in ("policed", "pass"):
            if c in frame.columns:
                frame[c] = frame[c].map({True: "true", False: "false"})
        frame.to_csv(src, index=False)
        _native.rate_clusters(src, dst, group_by, coverage)
        return pd.read_csv(dst)
