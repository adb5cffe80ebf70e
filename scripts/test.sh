#!/usr/bin/env bash
# Sets up everything the tests need on a fresh machine, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace --release 2>&1
