#!/usr/bin/env bash
# Sets up everything the tests need on a fresh machine, then runs every test: the Rust workspace
# (unit, property, scenario, namespace and BPF tests) and the Python package's pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace --release --no-fail-fast 2>&1
bash scripts/test-python.sh
