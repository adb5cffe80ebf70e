"""A policing-detection batch on Dask with 002 §3.2's rate-cluster table.

    python examples/python/detect_batch.py [TRACES_DIR] [--dask ADDRESS] [--out detect-batch]

Without TRACES_DIR a small set of synthetic server-side traces is generated first (downloads
through token-bucket policers of 2, 5 and 8 Mbit/s, and through a drop-tail bottleneck).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

import ratekit
from ratekit import _native

SYNTHETIC = [("2mbit", 2), ("5mbit", 2), ("8mbit", 2), (None, 2)]


def synthesize(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    seed = 0
    for rate, copies in SYNTHETIC:
        for _ in range(copies):
            seed += 1
            _native.synth_trace(root / f"{rate or 'droptail'}-{seed}.pcap", seed, rate, chunks=3)
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="?", type=Path)
    ap.add_argument("--dask", metavar="ADDRESS")
    ap.add_argument("--out", type=Path, default=Path("detect-batch"))
    args = ap.parse_args()

    traces = args.traces or synthesize(args.out / "traces")
    index = ratekit.detect_many(traces, client=args.dask, out=args.out / "parquet", progress=True)
    print(index[["file", "status", "rows", "error"]].to_string(index=False))
    results = pd.read_parquet(args.out / "parquet" / "results").drop(columns="file_id")
    segments = results[(results["direction"] != "aggregate") & results["error"].isna()]
    print(f"{len(segments)} segments, {int(segments['policed'].sum())} policed")
    # 002 §3.2: group by whatever identifies a policer's owner; here each trace names its rate.
    results["group"] = results["file"].map(lambda f: Path(f).name.split("-")[0])
    table = ratekit.rate_clusters(results, group_by="group")
    table.to_csv(args.out / "clusters.csv", index=False)
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
