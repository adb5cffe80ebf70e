#!/usr/bin/env bash
# The main job: sets up, then shows BC-PQP against the baselines twice over:
#   1. `ratekit demo`: an open-loop overload trace replayed through every policer and shaper
#      (seconds; out/demo/table.txt, flows.csv, aggregates.csv, demo.json);
#   2. `ratekit reproduce --quick`: the papers' evaluations in the simulator with real TCP models,
#      each claim against the paper's number (a few minutes; out/reproduce/report.md and .html).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release -q -p ratekit-cli
./target/release/ratekit demo --out out/demo
./target/release/ratekit reproduce --quick --out out/reproduce
echo
echo "demo:   out/demo/table.txt (per-flow passed rates vs the policy's targets)"
echo "report: out/reproduce/report.md (every paper claim, ratekit's number, pass/fail; figures in out/reproduce/figures/)"
