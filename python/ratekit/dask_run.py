"""Command-line entry points for the CLI's ``--dask ADDRESS``:

    python -m ratekit.dask_run sim SCENARIO.toml --out DIR [--seed N] [--dask ADDRESS]
    python -m ratekit.dask_run detect PATH... --out DIR [--all-directions] [--no-aggregate] [--dask ADDRESS]

``sim`` runs the points of the scenario's ``[sweep]`` (see ``ratekit.sweep``); ``detect`` one task
per capture file (see ``ratekit.detect_many``). Without ``--dask`` a LocalCluster is started.
Results are Parquet partitions under DIR; the exit status is 1 if any point or file failed
(each is listed on stderr), 2 on bad arguments or input.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from ratekit.scale import detect_many, sweep


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ratekit.dask_run", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("sim", help="run a scenario's [sweep] points on Dask")
    sim.add_argument("scenario")
    sim.add_argument("--seed", type=int)
    det = sub.add_parser("detect", help="find policers in capture files on Dask")
    det.add_argument("inputs", nargs="+")
    det.add_argument("--all-directions", action="store_true")
    det.add_argument("--no-aggregate", action="store_true")
    for p in (sim, det):
        p.add_argument("--out", required=True, help="output directory (Parquet partitions)")
        p.add_argument("--dask", metavar="ADDRESS", help="scheduler address (default: a LocalCluster)")
    args = parser.parse_args(argv)
    try:
        if args.command == "sim":
            index = sweep(args.scenario, client=args.dask, out=args.out, seed=args.seed, progress=True)
            what = "points"
        else:
            index = detect_many(
                args.inputs,
                client=args.dask,
                out=args.out,
                all_directions=args.all_directions,
                aggregate=not args.no_aggregate,
                progress=True,
            )
            what = "files"
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    failed = index[index["status"] == "error"]
    for _, row in failed.iterrows():
        print(f"failed: {row.iloc[0]}: {row['error']}", file=sys.stderr)
    print(f"{len(index)} {what} ({len(failed)} failed) -> {args.out}", file=sys.stderr)
    return 1 if len(failed) else 0


if __name__ == "__main__":
    sys.exit(main())
