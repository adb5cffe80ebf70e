#!/usr/bin/env bash
# Data plane and testbed (issue 5): clang for `-target bpf`, libbpf headers for the C programs,
# libelf for the loader, iproute2 for netns/veth/tc, bpftool to inspect, iperf3/tcpdump for manual
# checks. Idempotent and quiet: installs only what is missing, runs apt-get update at most once.
set -euo pipefail
need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for pkg in clang llvm libbpf-dev libelf-dev zlib1g-dev pkg-config iproute2 bpftool iperf3 tcpdump ethtool; do
    have "$pkg" || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "setup.d/10-dataplane: missing ${need[*]}; run as root (or install them) to build the BPF programs" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/tmp/ratekit-setup-dataplane.log 2>&1 || { cat /tmp/ratekit-setup-dataplane.log >&2; exit 1; }
