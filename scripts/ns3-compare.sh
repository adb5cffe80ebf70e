#!/usr/bin/env bash
# Side-by-side speed and goodput of ratekit's simulator and ns-3 on the same small dumbbell
# (scenarios/examples/tbf-dumbbell.toml vs scripts/ns3_dumbbell.py). Run by hand, not in CI:
# it installs the `ns3` wheel from PyPI into a virtualenv ($NS3_VENV, default
# /tmp/ratekit-ns3-venv). Usage: bash scripts/ns3-compare.sh [DURATION_S]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-60}"
VENV="${NS3_VENV:-/tmp/ratekit-ns3-venv}"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import ns" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q ns3
fi
cargo build --release -q -p ratekit-cli
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
sed "s/^duration = .*/duration = \"${DURATION}s\"/" scenarios/examples/tbf-dumbbell.toml > "$OUT/scenario.toml"
taskset -c 0 ./target/release/ratekit sim "$OUT/scenario.toml" --out "$OUT/ratekit" --quiet
taskset -c 0 "$VENV/bin/python" scripts/ns3_dumbbell.py "$DURATION" 2>/dev/null | tail -1 > "$OUT/ns3.json"
python3 - "$OUT/ratekit/summary.json" "$OUT/ns3.json" "$DURATION" <<'PY'
import json, sys
rk = json.load(open(sys.argv[1]))
n3 = json.load(open(sys.argv[2]))
rk_gp = {f["cc"]: f["mean_goodput_bps"] for f in rk["flows"]}
print(f"| {sys.argv[3]} s simulated | ratekit | ns-3 | ratio ns-3 / ratekit |")
print("|---|---|---|---|")
w_rk, w_n3 = rk["engine"]["wall_seconds"], n3["wall_seconds"]
print(f"| wall time (s) | {w_rk:.3f} | {w_n3:.3f} | {w_n3 / w_rk:.1f} |")
for cc in ("bbr", "cubic"):
    a, b = rk_gp[cc] / 1e6, n3["goodput_bps"][cc] / 1e6
    print(f"| {cc} goodput (Mbit/s) | {a:.2f} | {b:.2f} | {b / a:.2f} |")
print(f"| ratekit events | {rk['engine']['events']} | | |")
PY
