"""Scale-out on Dask: ``sweep`` (simulation points) and ``detect_many`` (trace files).

Each point or file is one Dask task; its results go to Parquet partitions under ``out``
(``summary/point=ID``, ``flows/point=ID``, ``aggregates/point=ID``, with the whole summary.json as
``points/ID.summary.json``; ``results/file_id=ID``), and a small JSON record (``points/ID.json`` or
``files/ID.json``) is written last, saying ``ok`` or the
error. A rerun skips what is recorded ``ok`` and retries the rest; a failing point is recorded
and never stops the others. IDs hash the point's assignments (or the file's absolute path), so a
grown grid reuses the points already done.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

import pandas as pd

from ratekit import _native
from ratekit._text import PathOrText, read_text
from ratekit.detect import Paths, _paths, read_results
from ratekit.sim import simulate

ClientLike = Union[None, str, Any]
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap")


@contextlib.contextmanager
def dask_client(client: ClientLike = None, workers: Optional[int] = None) -> Iterator[Any]:
    """A Dask client: ``client`` itself; a ``Client`` of the scheduler at an address string; or,
    with ``None``, a ``LocalCluster`` on this machine (``workers`` processes, default one per
    core, one thread each), closed on exit."""
    from dask.distributed import Client, LocalCluster

    if client is None:
        n = workers or os.cpu_count() or 1
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            with Client(cluster) as c:
                yield c
    elif isinstance(client, str):
        with Client(client) as c:
            yield c
    else:
        yield client


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def _write_json(path: Path, record: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(path)


def _write_part(frame: pd.DataFrame, table: Path) -> None:
    table.mkdir(parents=True, exist_ok=True)
    tmp = table / "part.parquet.tmp"
    frame.to_parquet(tmp, index=False)
    tmp.replace(table / "part.parquet")


def _done(record_path: Path) -> Optional[dict[str, Any]]:
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError):
        return None
    return record if record.get("status") == "ok" else None


def _run_point(point: str, assignments: str, text: str, out: str, seed: Optional[int]) -> dict[str, Any]:
    """One sweep point on a worker: simulate, write its partitions, then its record."""
    root = Path(out)
    record: dict[str, Any] = {"point": point, "assignments": json.loads(assignments)}
    start = time.perf_counter()
    try:
        result = simulate(text, seed=seed)
        summary = result.summary.attrs["summary"]
        for name, frame in (("summary", result.summary), ("flows", result.flows), ("aggregates", result.aggregates)):
            _write_part(frame, root / name / f"point={point}")
        _write_json(root / "points" / f"{point}.summary.json", summary)
        record.update(status="ok", error=None, interrupted=summary["interrupted"])
    except Exception as e:  # a failing point is recorded, never raised: the sweep goes on
        record.update(status="error", error=f"{type(e).__name__}: {e}")
    record["seconds"] = round(time.perf_counter() - start, 3)
    _write_json(root / "points" / f"{point}.json", record)
    return record


def _submit(
    client: ClientLike,
    workers: Optional[int],
    fn: Callable[..., dict[str, Any]],
    jobs: Sequence[tuple[Any, ...]],
    progress: bool,
) -> list[dict[str, Any]]:
    from dask.distributed import as_completed

    if not jobs:
        return []
    records = []
    with dask_client(client, workers) as c:
        futures = [c.submit(fn, *job, pure=False, key=f"ratekit-{fn.__name__}-{job[0]}-{_short_hash(str(time.time()))}") for job in jobs]
        owner = {f.key: job for f, job in zip(futures, jobs)}
        for i, fut in enumerate(as_completed(futures), 1):
            try:
                records.append(fut.result())
            except Exception as e:  # the worker itself died: record what we know
                records.append({"id": owner[fut.key][0], "status": "error", "error": f"{type(e).__name__}: {e}"})
            if progress:
                print(f"\r{i}/{len(futures)} done", end="", flush=True)
        if progress:
            print()
    return records


def sweep(
    scenario: PathOrText,
    grid: Optional[Mapping[str, Sequence[Any]]] = None,
    client: ClientLike = None,
    out: Union[str, "os.PathLike[str]"] = "sweep-out",
    seed: Optional[int] = None,
    mode: str = "product",
    workers: Optional[int] = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Runs every point of ``grid`` over ``scenario`` on Dask and returns one row per point
    (``point``, ``status`` "ok"/"error"/"skipped", ``error``, then one column per swept field).

    ``grid`` maps dotted scenario fields to value lists, as a scenario's ``[sweep]`` table (e.g.
    ``{"enforcer.theta_plus": [0.5, 1.0], "duration": ["2s"]}``); ``None`` uses the scenario's own
    ``[sweep]``. ``mode="zip"`` pairs the i-th values instead of the product. Results:
    ``pd.read_parquet(out / "summary")`` (and ``flows``, ``aggregates``), with a ``point`` column.
    ``client``: ``None`` starts a LocalCluster, a string is a scheduler address, or a Client.
    """
    text, _ = read_text(scenario, "scenario")
    grid_json = None
    if grid is not None:
        grid_json = json.dumps({**grid, "mode": mode})
    points = _native.sweep_points(text, grid_json)
    if not points:
        raise ValueError("nothing to sweep: give a grid or a scenario with a [sweep] table")
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    rows, jobs = [], []
    for assignments, point_text in points:
        point = _short_hash(assignments)
        record = _done(root / "points" / f"{point}.json")
        if record is not None:
            rows.append({**record, "status": "skipped"})
        else:
            jobs.append((point, assignments, point_text, os.fspath(root.resolve()), seed))
    rows += _submit(client, workers, _run_point, jobs, progress)
    return _index(rows, "point", [_short_hash(a) for a, _ in points])


def _index(rows: list[dict[str, Any]], key: str, order: list[str]) -> pd.DataFrame:
    for r in rows:
        r.setdefault(key, r.pop("id", None))
        for a in r.pop("assignments", None) or []:
            r[a["field"]] = a["value"]
    frame = pd.DataFrame(rows)
    rank = {k: i for i, k in enumerate(order)}
    return frame.sort_values(key, key=lambda s: s.map(rank)).reset_index(drop=True)


def capture_files(paths: Paths) -> list[str]:
    """Files as given, and directories walked recursively for capture names (.pcap, .pcapng, .cap,
    optionally .gz), sorted: the files ``ratekit detect`` would read."""
    files = []
    for p in _paths(paths):
        if os.path.isdir(p):
            for d, _, names in os.walk(p):
                files += [os.path.join(d, n) for n in names if n.lower().removesuffix(".gz").endswith(CAPTURE_SUFFIXES)]
        else:
            files.append(p)
    return sorted(files)


def _run_file(file_id: str, path: str, out: str, all_directions: bool, aggregate: bool) -> dict[str, Any]:
    """One capture file on a worker: detect, write its partition, then its record."""
    root = Path(out)
    record: dict[str, Any] = {"file_id": file_id, "file": path}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ratekit-detect-") as d:
        csv = Path(d) / "results.csv"
        try:
            try:
                _native.detect_files([path], csv, all_directions, aggregate, 1)
                error = None
            except ValueError as e:  # unreadable file: the CSV still holds its read_error row
                if not csv.exists():
                    raise
                error = str(e)
            results = read_results(csv)
            read_errors = results["error"].dropna()
            if error is not None and len(read_errors):
                error = read_errors.iloc[0]
            _write_part(results, root / "results" / f"file_id={file_id}")
            record.update(status="ok" if error is None else "error", error=error, rows=len(results))
        except Exception as e:
            record.update(status="error", error=f"{type(e).__name__}: {e}", rows=0)
    record["seconds"] = round(time.perf_counter() - start, 3)
    _write_json(root / "files" / f"{file_id}.json", record)
    return record


def detect_many(
    paths: Paths,
    client: ClientLike = None,
    out: Union[str, "os.PathLike[str]"] = "detect-out",
    all_directions: bool = False,
    aggregate: bool = True,
    workers: Optional[int] = None,
    progress: bool = False,
) -> pd.DataFrame:
    """``ratekit detect`` over many capture files, one Dask task per file. Returns one row per
    file (``file_id``, ``file``, ``status``, ``error``, ``rows``); the results, with the same
    columns as ``detect``, are ``pd.read_parquet(out / "results")``. A file that cannot be read
    keeps its ``read_error`` row and is recorded with its error (and retried on a rerun)."""
    files = capture_files(paths)
    if not files:
        raise ValueError("no capture files found in the given inputs")
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    rows, jobs = [], []
    ids = []
    for f in files:
        file_id = _short_hash(os.path.abspath(f))
        ids.append(file_id)
        record = _done(root / "files" / f"{file_id}.json")
        if record is not None:
            rows.append({**record, "status": "skipped"})
        else:
            jobs.append((file_id, f, os.fspath(root.resolve()), all_directions, aggregate))
    rows += _submit(client, workers, _run_file, jobs, progress)
    return _index(rows, "file_id", ids)
