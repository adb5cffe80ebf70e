#!/usr/bin/env bash
# Installs what ratekit needs on a fresh machine of this kind (idempotent). Each part of the
# project that needs system packages owns one file in scripts/setup.d/, run here in name order.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found; install Rust with rustup first" >&2
    exit 1
fi
for part in scripts/setup.d/*.sh; do
    [ -e "$part" ] || continue
    bash "$part"
done
