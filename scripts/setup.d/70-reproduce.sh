#!/usr/bin/env bash
# `ratekit reproduce` (issue 7) draws its figures with matplotlib (PNG and SVG from one plot
# script, fonts bundled with the package). Debian's python3-matplotlib rather than pip: no
# virtualenv, no network index beyond apt's, and it is idempotent through dpkg.
set -euo pipefail
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# /usr/bin/python3: PATH may lead to a pyenv interpreter that cannot see Debian's packages.
if have python3-matplotlib && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "setup.d/70-reproduce: python3-matplotlib missing; run as root (or install it) for the reproduce figures" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends python3 python3-matplotlib >/tmp/ratekit-setup-reproduce.log 2>&1 \
    || { cat /tmp/ratekit-setup-reproduce.log >&2; exit 1; }
