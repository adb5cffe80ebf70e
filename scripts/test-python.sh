#!/usr/bin/env bash
# Runs the Python package's tests (python/tests): the Python API against the `ratekit` CLI on the
# same inputs, and sweeps / detect batches on a two-worker Dask LocalCluster. Expects
# scripts/setup.d/80-python.sh to have run (scripts/setup.sh does). Exits non-zero on any failure,
# including "no tests collected" (pytest's exit 5).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
cargo build --release -p ratekit-cli
export RATEKIT_BIN="$PWD/target/release/ratekit"
status=0
"$PY" -m pytest -q python/tests "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "test-python: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
