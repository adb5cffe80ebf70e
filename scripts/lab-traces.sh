#!/usr/bin/env bash
# Lab traces for the policing detector (issue 6 item 4) with real Linux TCP: three network
# namespaces (server, middlebox, client) it creates and always deletes, a chunked download
# (request, N-byte response, pause), a server-side capture with snaplen 96, and on the
# middlebox's egress towards the client either
#   policer  RATE BURST : tbf with a one-packet queue (a policer: excess is dropped, not held)
#   droptail RATE QUEUE : htb at RATE with a bfifo of QUEUE bytes
#   none                : no enforcer
# Then `ratekit detect` over the traces. Touches only the namespaces and veths it makes.
#
# usage: scripts/lab-traces.sh OUT_DIR [CHUNK_BYTES] [CHUNKS] [SPEC...]
#   SPEC = policer:RATE:BURST | droptail:RATE:QUEUE | none, e.g. policer:3mbit:100kb
# Default grid: the issue's policing rates and bursts, and drop-tail queues, five 2 MB chunks.
# Limits: this kernel has no netem, so the RTT is the namespaces' (well under 1 ms) and there is
# no random-loss case; both need ratekit's userspace middlebox (docs/detector.md).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/lab-traces.sh OUT_DIR [CHUNK_BYTES] [CHUNKS] [SPEC...]}
CHUNK=${2:-2000000}
CHUNKS=${3:-5}
shift $(( $# < 3 ? $# : 3 ))
SPECS=("$@")
if [ ${#SPECS[@]} -eq 0 ]; then
    for r in 0.5mbit 1.5mbit 3mbit 10mbit; do
        for b in 8kb 100kb 1mb 2mb; do SPECS+=("policer:$r:$b"); done
        for q in 8kb 32kb 100kb 1mb; do SPECS+=("droptail:$r:$q"); done
    done
fi
[ "$(id -u)" -eq 0 ] || { echo "lab-traces: needs root for network namespaces" >&2; exit 1; }
for tool in ip tc tcpdump ethtool python3; do
    command -v "$tool" >/dev/null || { echo "lab-traces: $tool not found (scripts/setup.sh installs it)" >&2; exit 1; }
done
mkdir -p "$OUT"
P="rkl$$"
S="${P}s"; M="${P}m"; C="${P}c"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for ns in "$S" "$M" "$C"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

ip netns add "$S"; ip netns add "$M"; ip netns add "$C"
ip link add "${P}a" netns "$S" type veth peer name "${P}b" netns "$M"
ip link add "${P}d" netns "$M" type veth peer name "${P}e" netns "$C"
ip -n "$S" addr add 10.77.1.1/24 dev "${P}a"
ip -n "$M" addr add 10.77.1.2/24 dev "${P}b"
ip -n "$M" addr add 10.77.2.1/24 dev "${P}d"
ip -n "$C" addr add 10.77.2.2/24 dev "${P}e"
for pair in "$S ${P}a" "$M ${P}b" "$M ${P}d" "$C ${P}e"; do
    set -- $pair
    ip -n "$1" link set "$2" up
    # Without this the server's capture holds 64 kB super-frames, not the packets the policer sees.
    ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null 2>&1 || true
done
for ns in "$S" "$M" "$C"; do ip -n "$ns" link set lo up; done
ip -n "$S" route add default via 10.77.1.2
ip -n "$C" route add default via 10.77.2.1
ip netns exec "$M" sysctl -qw net.ipv4.ip_forward=1

SERVER='
import socket, threading
def serve(c):
    f = c.makefile("rb")
    for line in f:
        n = int(line.split()[1]); c.sendall(b"x" * n)
    c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.1.1", 8000)); s.listen(8)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
'
CLIENT='
import socket, sys, time
size, chunks = int(sys.argv[1]), int(sys.argv[2])
c = socket.create_connection(("10.77.1.1", 8000), timeout=600)
for i in range(chunks):
    c.sendall(b"GET %d\n" % size); got = 0
    while got < size:
        d = c.recv(1 << 16)
        if not d: sys.exit("server closed")
        got += len(d)
    time.sleep(1)
c.close()
'
ip netns exec "$S" python3 -c "$SERVER" & PIDS+=($!)
sleep 0.5

for spec in "${SPECS[@]}"; do
    IFS=: read -r kind rate size <<<"$spec"
    tc -n "$M" qdisc del dev "${P}d" root 2>/dev/null || true
    case "$kind" in
        policer) tc -n "$M" qdisc add dev "${P}d" root tbf rate "$rate" burst "$size" limit 1514 ;;
        droptail)
            tc -n "$M" qdisc add dev "${P}d" root handle 1: htb default 1
            tc -n "$M" class add dev "${P}d" parent 1: classid 1:1 htb rate "$rate" ceil "$rate"
            tc -n "$M" qdisc add dev "${P}d" parent 1:1 bfifo limit "$size" ;;
        none) ;;
        *) echo "lab-traces: unknown spec $spec" >&2; exit 1 ;;
    esac
    name="$OUT/${kind}_${rate}_${size:-na}.pcap"
    ip netns exec "$S" tcpdump -i "${P}a" -s 96 -U -w "$name" tcp port 8000 2>/dev/null & dump=$!
    PIDS+=("$dump")
    sleep 1
    start=$(date +%s)
    timeout 900 ip netns exec "$C" python3 -c "$CLIENT" "$CHUNK" "$CHUNKS" || echo "lab-traces: $spec: client failed or timed out" >&2
    sleep 0.5
    kill "$dump"; wait "$dump" 2>/dev/null || true
    echo "$spec: $(( $(date +%s) - start )) s -> $name" >&2
done
# RATEKIT: a built binary (the tests pass theirs); otherwise build and run through cargo.
if [ -n "${RATEKIT:-}" ]; then
    "$RATEKIT" detect "$OUT" --out "$OUT/results.csv"
else
    cargo run --release -q -p ratekit-cli -- detect "$OUT" --out "$OUT/results.csv"
fi
