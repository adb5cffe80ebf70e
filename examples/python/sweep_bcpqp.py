"""Sweep BC-PQP's θ+ and T over 000 §6.1's 100-aggregate mix (reduced: shorter runs) on Dask and
plot the tail of the normalised aggregate throughput and the mean Jain index per point.

    python examples/python/sweep_bcpqp.py [--dask ADDRESS] [--duration 6s] [--out sweep-bcpqp]

Without --dask a LocalCluster with one worker per core is started. A rerun skips points done.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import ratekit  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MIX = REPO / "scenarios" / "validate" / "speed-100-aggregates.toml"
THETA_PLUS = [1.1, 1.5, 2.0, 3.0]
WINDOW = ["50ms", "100ms", "200ms"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dask", metavar="ADDRESS")
    ap.add_argument("--duration", default="6s", help="simulated time per point (the paper: 60s)")
    ap.add_argument("--warmup", default="2s")
    ap.add_argument("--out", type=Path, default=Path("sweep-bcpqp"))
    args = ap.parse_args()

    grid = {
        "duration": [args.duration],
        "measure.warmup": [args.warmup],
        "enforcer.theta_plus": THETA_PLUS,
        "enforcer.window": WINDOW,
    }
    index = ratekit.sweep(MIX, grid, client=args.dask, out=args.out, progress=True)
    print(index[["point", "status", "enforcer.theta_plus", "enforcer.window", "error"]].to_string(index=False))
    summary = pd.read_parquet(args.out / "summary")
    points = index.set_index("point")[["enforcer.theta_plus", "enforcer.window"]]
    per_point = (
        summary.groupby("point")
        .agg(
            p99_norm=("p99_normalized_throughput", "mean"),
            mean_norm=("mean_normalized_throughput", "mean"),
            jain=("mean_jain", "mean"),
            drop_rate=("drop_rate", "mean"),
        )
        .join(points)
    )
    per_point.to_csv(args.out / "per-point.csv")
    print(per_point.sort_values(["enforcer.window", "enforcer.theta_plus"]).to_string())

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for window, rows in per_point.groupby("enforcer.window"):
        rows = rows.sort_values("enforcer.theta_plus")
        axes[0].plot(rows["enforcer.theta_plus"], rows["p99_norm"], marker="o", label=f"T = {window}")
        axes[1].plot(rows["enforcer.theta_plus"], rows["jain"], marker="o", label=f"T = {window}")
    axes[0].set(xlabel="θ+", ylabel="mean p99 normalised throughput", title="burst tail")
    axes[1].set(xlabel="θ+", ylabel="mean Jain index", title="per-flow fairness")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(args.out / "theta-window.png", dpi=120)
    fig.savefig(args.out / "theta-window.svg")
    print(f"figure: {args.out / 'theta-window.png'}")


if __name__ == "__main__":
    main()
