#!/usr/bin/env bash
# Installs what ratekit needs on a fresh machine of this kind (idempotent).
set -euo pipefail
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found; install Rust with rustup first" >&2
    exit 1
fi
