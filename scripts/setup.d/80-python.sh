#!/usr/bin/env bash
# The Python package (pyproject.toml, crates/py, python/ratekit) and what its tests and examples
# need. Idempotent: pip skips what is installed; the package is rebuilt from this tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
"$PY" -m pip install --quiet --disable-pip-version-check \
    "maturin>=1.5,<2" numpy pandas pyarrow "dask[distributed]" pytest matplotlib
# Builds crates/py in the workspace's target/ (release profile, shared with cargo) and installs it.
"$PY" -m pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps .
