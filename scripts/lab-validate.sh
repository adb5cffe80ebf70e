#!/usr/bin/env bash
# The detector's lab validation in one command (issue 6 item 4): the full grid of
# scripts/lab-traces.sh (tbf and tc-BPF policers, htb+bfifo bottlenecks alone and with cross
# traffic, a bucket shared by three connections, random loss; five 2 MB chunks, 100 ms RTT
# through ratekit's middlebox), split into JOBS lanes that run at once (each lane its own
# namespaces), then `ratekit detect` over all traces and scripts/lab-table.py for the tables.
#
# usage: scripts/lab-validate.sh OUT_DIR [SPEC...]     (as root; no SPEC: the default grid)
# Environment: JOBS (lanes, default 4), CHUNK_BYTES (2000000), CHUNKS (5), and whatever
# lab-traces.sh reads (DELAY, CASE_TIMEOUT, ...).
# Writes OUT_DIR/traces/*.pcap (+ the middlebox's counters), OUT_DIR/results.csv,
# OUT_DIR/accuracy.md, OUT_DIR/accuracy.csv, OUT_DIR/cases.csv; progress on stderr and in
# OUT_DIR/lane-N.log.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/lab-validate.sh OUT_DIR [SPEC...]}
shift
JOBS=${JOBS:-4}
SPECS=("$@")
if [ ${#SPECS[@]} -eq 0 ]; then
    # The default grid of lab-traces.sh, spelled out so that it can be dealt into lanes.
    for r in 0.5mbit 1.5mbit 3mbit 10mbit; do
        for b in 8kb 100kb 1mb 2mb; do SPECS+=("policer:$r:$b" "bpf:$r:$b"); done
        for q in 8kb 32kb 100kb 1mb; do SPECS+=("droptail:$r:$q" "cross:$r:$q"); done
    done
    for r in 1.5mbit 3mbit 10mbit; do for b in 100kb 1mb; do SPECS+=("shared:$r:$b"); done; done
    for p in 1 2; do for s in 1 2 3; do SPECS+=("loss:$p:$s"); done; done
fi
if [ -z "${RATEKIT:-}" ]; then
    cargo build --release -q -p ratekit-cli
    export RATEKIT=$PWD/target/release/ratekit
fi
mkdir -p "$OUT/traces"
LANE_PIDS=()
trap 'for p in "${LANE_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT INT TERM
start=$(date +%s)
for ((lane = 0; lane < JOBS; lane++)); do
    mine=()
    for ((i = lane; i < ${#SPECS[@]}; i += JOBS)); do mine+=("${SPECS[i]}"); done
    [ ${#mine[@]} -gt 0 ] || continue
    echo "lane $lane: ${#mine[@]} cases" >&2
    LAB_DETECT=0 bash scripts/lab-traces.sh "$OUT/traces" "${CHUNK_BYTES:-2000000}" "${CHUNKS:-5}" "${mine[@]}" \
        >"$OUT/lane-$lane.log" 2>&1 &
    LANE_PIDS+=($!)
done
failed=0
total=${#SPECS[@]}
while :; do
    running=0
    for p in "${LANE_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && running=$((running + 1)); done
    done_cases=$(cat "$OUT"/lane-*.log 2>/dev/null | grep -c ' s -> ' || true)
    echo "lab-validate: $done_cases/$total cases, $(( $(date +%s) - start )) s" >&2
    [ "$running" -gt 0 ] || break
    sleep 30
done
for p in "${LANE_PIDS[@]}"; do wait "$p" || failed=1; done
LANE_PIDS=()
[ "$failed" = 0 ] || echo "lab-validate: a lane failed (see $OUT/lane-*.log); tabulating what was captured" >&2
"$RATEKIT" detect "$OUT/traces" --out "$OUT/results.csv"
python3 scripts/lab-table.py "$OUT" "$OUT/results.csv"
echo "lab-validate: $(( $(date +%s) - start )) s; tables in $OUT/accuracy.md" >&2
