#!/usr/bin/env bash
# Lab traces for the policing detector (issue 6 item 4) with real Linux TCP. Three network
# namespaces it creates and always deletes (even on failure or a signal):
#
#   server ns                  middlebox ns                                  client ns
#   10.77.0.1 ──veth── mb-s [ratekit middlebox: loss, DELAY each way] mb-c ──veth── 10.77.0.2 (+ .3)
#                                               (policer / bottleneck on mb-c's egress)
#
# The middlebox's veths have no address and the kernel does not forward: ratekit's userspace
# middlebox (AF_PACKET) is the only path, so every packet gets its delay (this kernel has no
# netem) and the data direction its random loss. Its transmissions on mb-c pass that device's
# clsact and root qdisc, where the enforcer sits:
#   policer:RATE:BURST  the kernel's tbf with a one-packet queue (excess dropped, not held)
#   bpf:RATE:BURST      ratekit's tc-BPF token bucket (`ratekit tc attach --egress`)
#   shared:RATE:BURST   the tc-BPF bucket shared by three concurrent connections to one client
#                       (002 Table 3 C; all three captured)
#   pair:RATE:BURST     the same with two connections
#   droptail:RATE:QUEUE htb at RATE with a bfifo of QUEUE bytes
#   cross:RATE:QUEUE    the same, plus one uncaptured bulk TCP flow to 10.77.0.3 through it
#   loss:PERCENT[:SEED] random loss in the middlebox (data direction), no rate limit
#   none                nothing but the delay
# The captured traffic is a chunked download (request, CHUNK_BYTES response, 1 s pause, CHUNKS
# times) from a small Python server to 10.77.0.2, recorded at the server with tcpdump -s 96.
# Sizes use tc's units (kb = 1024 B, mb = 1024² B); both enforcers get the same byte counts.
#
# usage: scripts/lab-traces.sh OUT_DIR [CHUNK_BYTES] [CHUNKS] [SPEC...]
# Default grid: every policer (tbf and tc-BPF) at 0.5/1.5/3/10 Mbit/s x 8kb/100kb/1mb/2mb,
# every bottleneck at the same rates x 8kb/32kb/100kb/1mb queues, alone and with cross
# traffic, the shared bucket at 1.5/3/10 Mbit/s x 100kb/1mb, and loss:1 and loss:2 with seeds
# 1-3; five 2 MB chunks. scripts/lab-validate.sh runs it in lanes.
# Environment: CC (the server's congestion control, default cubic: Linux's default and the
# paper's era; this machine's global default is bbr), DELAY (one way, default 50ms: RTT 100 ms),
# SEED (of the loss, default 1),
# QUICKACK=1 (the client ACKs every segment at once: no delayed ACKs, whose 40 ms can make the
# RTT sample before a loss burst look inflated; crates/cli/tests/detect_lab.rs sets it),
# CASE_TIMEOUT (seconds per case, default 600), RATEKIT (a built binary; default: build it),
# LAB_DETECT=0 (only write traces; otherwise `ratekit detect` writes OUT_DIR/results.csv).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/lab-traces.sh OUT_DIR [CHUNK_BYTES] [CHUNKS] [SPEC...]}
CHUNK=${2:-2000000}
CHUNKS=${3:-5}
shift $(( $# < 3 ? $# : 3 ))
SPECS=("$@")
CC=${CC:-cubic}
DELAY=${DELAY:-50ms}
SEED=${SEED:-1}
CASE_TIMEOUT=${CASE_TIMEOUT:-600}
if [ ${#SPECS[@]} -eq 0 ]; then
    for r in 0.5mbit 1.5mbit 3mbit 10mbit; do
        for b in 8kb 100kb 1mb 2mb; do SPECS+=("policer:$r:$b" "bpf:$r:$b"); done
        for q in 8kb 32kb 100kb 1mb; do SPECS+=("droptail:$r:$q" "cross:$r:$q"); done
    done
    for r in 1.5mbit 3mbit 10mbit; do for b in 100kb 1mb; do SPECS+=("shared:$r:$b"); done; done
    for p in 1 2; do for s in 1 2 3; do SPECS+=("loss:$p:$s"); done; done
fi
[ "$(id -u)" -eq 0 ] || { echo "lab-traces: needs root for network namespaces" >&2; exit 1; }
for tool in ip tc tcpdump ethtool python3; do
    command -v "$tool" >/dev/null || { echo "lab-traces: $tool not found (scripts/setup.sh installs it)" >&2; exit 1; }
done
if [ -z "${RATEKIT:-}" ]; then
    cargo build --release -q -p ratekit-cli
    RATEKIT=$PWD/target/release/ratekit
fi
mkdir -p "$OUT"

# tc's size units, so that tbf and the tc-BPF bucket get the same burst.
bytes() {
    local n=${1%[kKmM][bB]}
    case "${1,,}" in
        *kb) echo $(( n * 1024 )) ;;
        *mb) echo $(( n * 1024 * 1024 )) ;;
        *) echo "$1" ;;
    esac
}

P="rkl$$"
S="${P}s"; M="${P}m"; C="${P}c"
SA=10.77.0.1; CA=10.77.0.2; XA=10.77.0.3
PIDS=()
BPF_ON=0
TMP=$(mktemp -d)
detach_bpf() {
    if [ "$BPF_ON" = 1 ]; then
        "$RATEKIT" tc detach --netns "$M" --dev "${P}d" --egress >/dev/null || true
        BPF_ON=0
    fi
}
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    detach_bpf
    for ns in "$S" "$M" "$C"; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip netns add "$S"; ip netns add "$M"; ip netns add "$C"
ip link add "${P}a" netns "$S" type veth peer name "${P}b" netns "$M"
ip link add "${P}d" netns "$M" type veth peer name "${P}e" netns "$C"
ip -n "$S" addr add "$SA/24" dev "${P}a"
ip -n "$C" addr add "$CA/24" dev "${P}e"
ip -n "$C" addr add "$XA/24" dev "${P}e"
for pair in "$S ${P}a" "$M ${P}b" "$M ${P}d" "$C ${P}e"; do
    set -- $pair
    ip -n "$1" link set "$2" up
    # Offloads off: the capture must hold the packets the policer sees (not 64 kB
    # super-frames), and the middlebox forwards frames as read, so checksums must be filled in.
    ip netns exec "$1" ethtool -K "$2" tso off gso off gro off tx off rx off >/dev/null
done
for ns in "$S" "$M" "$C"; do ip -n "$ns" link set lo up; done
if [ "${QUICKACK:-0}" = 1 ]; then
    ip -n "$C" route replace 10.77.0.0/24 dev "${P}e" proto kernel scope link src "$CA" quickack 1
fi

# args: congestion control. Per socket: a namespace may not make a restricted CC its default.
SERVER='
import socket, sys, threading
CC = sys.argv[1].encode()
BLOCK = memoryview(b"x" * 65536)
def serve(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, CC)
    try:
        for line in c.makefile("rb"):
            n = int(line.split()[1])
            while n > 0:
                k = min(n, len(BLOCK)); c.sendall(BLOCK[:k]); n -= k
    except OSError:
        pass  # the cross-traffic client is killed mid-transfer
    c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, CC)
s.bind(("10.77.0.1", 8000)); s.listen(8)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
'
# args: bytes per chunk, chunks, source address
CLIENT='
import socket, sys, time
size, chunks, src = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = socket.create_connection(("10.77.0.1", 8000), timeout=600, source_address=(src, 0))
for i in range(chunks):
    c.sendall(b"GET %d\n" % size); got = 0
    while got < size:
        d = c.recv(1 << 16)
        if not d: sys.exit("server closed")
        got += len(d)
    time.sleep(1)
c.close()
'
ip netns exec "$S" python3 -c "$SERVER" "$CC" & PIDS+=($!)
sleep 0.5

for spec in "${SPECS[@]}"; do
    IFS=: read -r kind rate size <<<"$spec"
    tc -n "$M" qdisc del dev "${P}d" root 2>/dev/null || true
    detach_bpf
    loss=0; seed=$SEED
    case "$kind" in
        policer) tc -n "$M" qdisc add dev "${P}d" root tbf rate "$rate" burst "$(bytes "$size")" limit 1514 ;;
        bpf|shared|pair)
            printf 'kind = "token_bucket"\nrate = "%s"\nburst = %s\n' "$rate" "$(bytes "$size")" >"$TMP/bucket.toml"
            "$RATEKIT" tc attach --netns "$M" --dev "${P}d" --egress --config "$TMP/bucket.toml" >/dev/null
            BPF_ON=1 ;;
        droptail|cross)
            tc -n "$M" qdisc add dev "${P}d" root handle 1: htb default 1
            tc -n "$M" class add dev "${P}d" parent 1: classid 1:1 htb rate "$rate" ceil "$rate"
            tc -n "$M" qdisc add dev "${P}d" parent 1:1 bfifo limit "$(bytes "$size")" ;;
        loss) loss=$(python3 -c "print($rate / 100)"); seed=${size:-$SEED}; rate="${rate}pct"; size="seed$seed" ;;
        none) ;;
        *) echo "lab-traces: unknown spec $spec" >&2; exit 1 ;;
    esac
    name="$OUT/${kind}_${rate:-na}_${size:-na}"
    # nice -20: the middlebox is the wire's delay line. At normal priority a loaded machine
    # delays its wake-ups by tens of ms, RTT samples above 1.3 x the base RTT appear before
    # the policer's losses, and the detector (rightly) rules the segment out as RTT inflation.
    nice -n -20 ip netns exec "$M" "$RATEKIT" middlebox --in "${P}b" --out "${P}d" --delay "$DELAY" --loss "$loss" \
        --seed "$seed" --report "$name.middlebox.json" & mbox=$!
    PIDS+=("$mbox")
    ip netns exec "$S" tcpdump -i "${P}a" -s 96 -U -w "$name.pcap" "tcp port 8000 and host $CA" 2>/dev/null & dump=$!
    PIDS+=("$dump")
    sleep 1
    cross_pid=
    if [ "$kind" = cross ]; then
        ip netns exec "$C" python3 -c "$CLIENT" 1000000000000 1 "$XA" 2>/dev/null & cross_pid=$!
        PIDS+=("$cross_pid")
        sleep 2 # the cross flow is past slow start when the measured one begins
    fi
    start=$(date +%s)
    clients=()
    case "$kind" in shared) conns=3 ;; pair) conns=2 ;; *) conns=1 ;; esac
    for ((k = 0; k < conns; k++)); do
        timeout "$CASE_TIMEOUT" ip netns exec "$C" python3 -c "$CLIENT" "$CHUNK" "$CHUNKS" "$CA" & clients+=($!); PIDS+=($!)
        sleep 0.3 # staggered, so the connections' chunks overlap without starting in lockstep
    done
    for pid in "${clients[@]}"; do
        wait "$pid" || echo "lab-traces: $spec: client failed or timed out after $CASE_TIMEOUT s" >&2
    done
    [ -n "$cross_pid" ] && { kill "$cross_pid" 2>/dev/null || true; wait "$cross_pid" 2>/dev/null || true; }
    sleep 0.5
    kill "$dump" "$mbox"; wait "$dump" "$mbox" 2>/dev/null || true
    echo "$spec: $(( $(date +%s) - start )) s -> $name.pcap" >&2
done
if [ "${LAB_DETECT:-1}" != 0 ]; then
    "$RATEKIT" detect "$OUT" --out "$OUT/results.csv"
fi
