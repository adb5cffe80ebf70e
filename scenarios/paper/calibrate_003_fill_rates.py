#!/usr/bin/env python3
"""Calibrates 003 Table I's congestion-token fill rates F for our link, the way 003 §V-A says the
authors did ("after some calibration experiments"; "the bucket fill rate has to be aligned to the way
the algorithm accounts congestion to a customer, so we identified one parameter for drop-based and one
for probability-based algorithms"). Table I's 550 / 300 B/s are absolute and fit the paper's unstated
link, not our 10 Mbit/s one (docs/simulator.md, "003 Tables II-IV").

The procedure, fixed before any claim was judged with its result:
- Calibration load: the extreme case the paper studies, two customers, each at its fair share: one
  greedy CUBIC flow each, on Table II's bottleneck (link rate, RTT, RED and start jitter read from
  003-table2-aggressiveness.toml), 5020 s (the paper's run length), seeds 1, 2, 3. No claim of any
  003 file is read.
- F of one accounting kind is the smallest fill rate at which neither fair-share customer is ever
  policed (no `congestion_policer` drop in the whole run), with Table I's bucket size S for that kind:
  the fill rate at which a customer sending its fair share just stays inside its allowance. While a
  customer is not policed the run is exactly plain RED's (same seed, same packets), so "policed at
  all" is monotone in F and found by bisection (geometric, to 1 %).
- Drop-based (ICP: every packet the queue drops drains its size) is measured with ICP step;
  probability-based (AFCP, AICP: size × RED's p_b per packet) with AFCP-b, whose drain is AICP's.
  ICP polices below the knee (a quarter of S) and AFCP only when a packet's drain exceeds the
  tokens, so each kind's threshold includes its own policing rule.
- F of a kind = the mean over the three seeds, rounded to 10 B/s. Bucket sizes stay Table I's
  (350 000 B drop-based, 225 000 B probability-based): 003 sizes them "rather small to reach a stable
  state fast", which does not depend on the link.

usage: scenarios/paper/calibrate_003_fill_rates.py [--out DIR] [--seeds 1,2,3] [--duration 5020s]
Writes DIR/calibration.toml (the base scenario), DIR/calibration.json (every bisection step) and
prints the two F values. Environment: RATEKIT (a built binary; default target/release/ratekit).
"""
import argparse
import json
import os
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TABLE_II = os.path.join(HERE, "003-table2-aggressiveness.toml")
# (accounting kind, instrument variant, Table I bucket size in bytes)
KINDS = [("drop-based (ICP)", "icp_step", 350_000), ("probability-based (AFCP, AICP)", "afcp_b", 225_000)]
LO, HI = 1.0, 1_000_000.0  # B/s: always policed / never policed at 10 Mbit/s


def scenario(duration, variant, bucket, fill):
    with open(TABLE_II, "rb") as f:
        base = tomllib.load(f)["base"]
    red = base["enforcer"]["red"]
    agg = base["aggregates"][0]
    flow = agg["flows"][0]
    red_toml = ", ".join(f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}" for k, v in red.items())
    one = f'cc = "{flow["cc"]}", rtt = "{flow["rtt"]}", start_jitter = "{flow["start_jitter"]}"'
    return f'''# 003 Table I calibration (calibrate_003_fill_rates.py): two fair-share customers under {variant}
duration = "{duration}"
seed = 1
[measure]
window = "250ms"
warmup = "{base["measure"]["warmup"]}"
[enforcer]
kind = "cpq"
variant = "{variant}"
bucket_size = {bucket}
fill_rate = "{fill:.3f}bps"
red = {{ {red_toml} }}
[[aggregates]]
rate = "{agg["rate"]}"
link_rate = "{agg["link_rate"]}"
flows = [
  {{ {one}, customer = 1 }},
  {{ {one}, customer = 2 }},
]
'''


def policed(ratekit, out, seed, duration, variant, bucket, fill):
    path = os.path.join(out, f"{variant}-s{seed}.toml")
    with open(path, "w") as f:
        f.write(scenario(duration, variant, bucket, fill))
    run_dir = os.path.join(out, f"{variant}-s{seed}")
    subprocess.run([ratekit, "sim", path, "--out", run_dir, "--seed", str(seed), "--quiet"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    return sum(a["drops_by_reason"].get("congestion_policer", 0) for a in summary["aggregates"])


def threshold(ratekit, out, seed, duration, variant, bucket, steps):
    lo, hi = LO, HI
    assert policed(ratekit, out, seed, duration, variant, bucket, lo) > 0, "not policed at the lower bound"
    assert policed(ratekit, out, seed, duration, variant, bucket, hi) == 0, "policed at the upper bound"
    while hi / lo > 1.01:
        mid = (lo * hi) ** 0.5
        n = policed(ratekit, out, seed, duration, variant, bucket, mid)
        steps.append({"variant": variant, "seed": seed, "fill_rate": mid, "policer_drops": n})
        print(f"  {variant} seed {seed}: F = {mid:9.1f} B/s -> {n} policer drops", file=sys.stderr)
        if n > 0:
            lo = mid
        else:
            hi = mid
    return hi


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/tmp/calibrate-003")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--duration", default="5020s")
    args = ap.parse_args()
    ratekit = os.environ.get("RATEKIT", os.path.join(ROOT, "target", "release", "ratekit"))
    os.makedirs(args.out, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    with open(os.path.join(args.out, "calibration.toml"), "w") as f:
        f.write(scenario(args.duration, "red", 225_000, 300))
    steps, result = [], {}
    for kind, variant, bucket in KINDS:
        per_seed = [threshold(ratekit, args.out, s, args.duration, variant, bucket, steps) for s in seeds]
        fill = round(sum(per_seed) / len(per_seed), -1)
        result[variant] = {"kind": kind, "bucket_size": bucket, "per_seed": per_seed, "fill_rate": fill}
        print(f"{kind}: F = {fill:.0f} B/s (seeds {seeds}: {', '.join(f'{x:.0f}' for x in per_seed)}), "
              f"S = {bucket} B")
    with open(os.path.join(args.out, "calibration.json"), "w") as f:
        json.dump({"duration": args.duration, "seeds": seeds, "result": result, "steps": steps}, f, indent=1)


if __name__ == "__main__":
    main()
