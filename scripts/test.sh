#!/usr/bin/env bash
# Sets up everything the tests need on a fresh machine, then runs every test: the Rust workspace
# (unit, property, scenario, namespace and BPF tests) and the Python package's pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The structure issue 13 set: crates depend only on lower layers, and no module imports a
# module that imports it back. Checked first, reported at the end with everything else.
structure=0
python3 scripts/check-crate-layers.py || structure=1
python3 scripts/check-module-cycles.py --self-test && python3 scripts/check-module-cycles.py || structure=1
# Tests that need root (namespaces, tc-BPF, AF_PACKET) are marked ignored with their reason, so a
# run without root lists them as ignored. As root they all run (--include-ignored) and one whose
# prerequisite is missing fails. CI runs as root and must run them: there, not being root fails.
if [ "$(id -u)" -eq 0 ]; then
    cargo test --workspace --release --no-fail-fast -- --include-ignored 2>&1
elif [ "${CI:-}" = "true" ]; then
    echo "test.sh: CI must run as root: the root tests (namespaces, tc-BPF) would not run" >&2
    exit 1
else
    echo "test.sh: not root: the tests that need root are listed as ignored below, with their reason" >&2
    cargo test --workspace --release --no-fail-fast 2>&1
fi
bash scripts/test-python.sh
if [ "$structure" -ne 0 ]; then
    echo "test.sh: the crate layering or module-cycle check failed (see its lines at the top)" >&2
    exit 1
fi
