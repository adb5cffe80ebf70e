#!/usr/bin/env bash
# Writes everything a refactor must leave unchanged, as produced by one `ratekit` binary, into one
# folder; two snapshots (before and after a change) are then compared with `diff -r`:
#   demo/        the demo's overload trace and every enforcer's result on it (`ratekit demo`)
#   replay/      that trace replayed through every config in examples/enforcers/ (verdicts + summary)
#   validate/    summary.json and time series of every scenario in scenarios/validate/ (seed 1)
#   reproduce/   claims.json of `ratekit reproduce --quick`
# Wall-clock fields (run times, events per second) are removed so that equal behaviour diffs empty.
#
#   scripts/behaviour-snapshot.sh BIN OUT        e.g. target/release/ratekit /tmp/snap-before
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 RATEKIT_BINARY OUT_DIR" >&2; exit 2; }
bin=$(realpath "$1")
out=$(realpath -m "$2")
cd "$(dirname "$0")/.."
rm -rf "$out"
mkdir -p "$out"/{replay,validate}

# Wall-clock figures differ run to run; everything else must not.
strip_clock='
import json, sys
CLOCK = {"wall_s", "wall_seconds", "elapsed_s", "events_per_s", "events_per_second", "runtime_s", "run_time_s"}
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items() if k not in CLOCK}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v
for path in sys.argv[1:]:
    with open(path) as f:
        doc = json.load(f)
    with open(path, "w") as f:
        json.dump(clean(doc), f, indent=1, sort_keys=True)
'

"$bin" demo --out "$out/demo" >/dev/null
trace="$out/demo/trace.csv"
for cfg in examples/enforcers/*.toml; do
    name=$(basename "$cfg" .toml)
    # Queueing enforcers that need a link get one; policers ignore the flag.
    # A config the trace does not fit (classes beyond its queues) must keep failing with the same error.
    "$bin" replay --config "$cfg" --input "$trace" --output "$out/replay/$name.csv" --link-rate 20mbit \
        >/dev/null 2>"$out/replay/$name.stderr" || true
    sed -i "s|$out|OUT|g" "$out/replay/$name.stderr"
done

for sc in scenarios/validate/*.toml; do
    "$bin" sim "$sc" --out "$out/validate/$(basename "$sc" .toml)" --seed 1 >/dev/null 2>&1
done

"$bin" reproduce --quick --out "$out/reproduce-run" >/dev/null 2>&1
mkdir -p "$out/reproduce"
cp "$out/reproduce-run/claims.json" "$out/reproduce/claims.json"
rm -rf "$out/reproduce-run"

find "$out" -name '*.json' -print0 | xargs -0 -r python3 -c "$strip_clock"
echo "snapshot of $bin in $out: $(find "$out" -type f | wc -l) files"
