#!/usr/bin/env bash
# Sets up and runs the main job: BC-PQP against the baselines.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo run --release -q -p ratekit-cli -- demo --out out/demo
