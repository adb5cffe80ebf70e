"""The figures of docs/python.md: Python batch replay against `ratekit replay`, and sweep
throughput on a two-worker LocalCluster against the same points run one after another.

    python examples/python/bench.py [--rows 2000000] [--points 8] [--ratekit target/release/ratekit]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import ratekit

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "enforcers" / "bcpqp-fair.toml"
SCENARIO = """
name = "bench-point"
duration = "{duration}"
seed = 3
[measure]
window = "250ms"
warmup = "1s"
[enforcer]
kind = "bcpqp"
rate = "10mbit"
queues = 16
queue_size = "1mb"
theta_plus = 1.5
window = "100ms"
[[aggregates]]
count = 16
flows = [{{ cc = ["cubic", "bbr", "reno"], rtt = ["10ms", "20ms", "50ms"], pick = "flow", count = 6 }}]
"""


def best(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_replay(binary: Path, rows: int, reps: int, d: Path) -> None:
    rng = np.random.default_rng(1)
    df = pd.DataFrame(
        {
            "time_ns": np.cumsum(rng.exponential(2_000.0, rows)).astype(np.uint64),
            "aggregate": rng.integers(0, 1000, rows),
            "flow": rng.integers(0, 16, rows),  # 16 flows per aggregate
            "bytes": rng.choice([64, 576, 1500], rows),
        }
    )
    src = d / "arrivals.csv"
    df.to_csv(src, index=False)
    cli = best(lambda: subprocess.run([str(binary), "replay", "--config", str(CONFIG), "--input", str(src), "--output", str(d / "out.csv")], check=True, capture_output=True), reps)
    py_csv = best(lambda: ratekit.replay(CONFIG, src), reps)
    py_df = best(lambda: ratekit.replay(CONFIG, df), reps)
    e = ratekit.Enforcer(CONFIG)
    cols = [df[c].to_numpy() for c in ("time_ns", "aggregate", "flow", "bytes")]
    arrays = best(lambda: e.run(*cols), reps)
    print(f"replay, {rows} packets, 1000 aggregates x 16 flows, bcpqp-fair.toml, best of {reps}:")
    print("| path | seconds | M packets/s | speed vs CLI |\n|---|---|---|---|")
    for name, t in (("`ratekit replay` CSV -> CSV", cli), ("`ratekit.replay(config, csv_path)`", py_csv), ("`ratekit.replay(config, DataFrame)`", py_df), ("`Enforcer.run` on numpy arrays", arrays)):
        print(f"| {name} | {t:.2f} | {rows / t / 1e6:.2f} | {cli / t:.2f}x |")


def bench_sweep(points: int, duration: str, d: Path) -> None:
    from dask.distributed import Client, LocalCluster

    text = SCENARIO.format(duration=duration)
    thetas = [1.1 + 0.2 * i for i in range(points)]
    start = time.perf_counter()
    for t in thetas:
        ratekit.simulate(text.replace("theta_plus = 1.5", f"theta_plus = {t}"))
    sequential = time.perf_counter() - start
    start = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as c:
        up = time.perf_counter() - start
        index = ratekit.sweep(text, {"enforcer.theta_plus": thetas}, client=c, out=d / "sweep")
    on_dask = time.perf_counter() - start
    busy = index["seconds"].sum()  # per-point time inside the workers: contention shows here
    print(f"\nsweep, {points} points of 16 aggregates x 6 flows, {duration} simulated each:")
    print("| run | seconds | points/s | vs sequential |\n|---|---|---|---|")
    print(f"| one after another (`ratekit.simulate` loop) | {sequential:.2f} | {points / sequential:.2f} | 1.00x |")
    print(f"(per point: {sequential / points:.2f} s alone, {busy / points:.2f} s inside a Dask worker; load average {os.getloadavg()[0]:.1f})")
    print(f"| `ratekit.sweep`, 2-worker LocalCluster incl. {up:.1f} s start-up and Parquet | {on_dask:.2f} | {points / on_dask:.2f} | {sequential / on_dask:.2f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--duration", default="20s")
    ap.add_argument("--ratekit", type=Path, default=REPO / "target" / "release" / "ratekit")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        bench_replay(args.ratekit, args.rows, args.reps, Path(d))
        bench_sweep(args.points, args.duration, Path(d))


if __name__ == "__main__":
    main()
