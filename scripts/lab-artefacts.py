#!/usr/bin/env python3
"""Capture-point artefacts for the detector's lab (issue 15): rewrites the lab's pcaps as real
capture points would have written them, seeded, so that a run can be repeated.

usage: scripts/lab-artefacts.py IN_DIR OUT_DIR [--seed N]
For every IN_DIR/*.pcap (classic pcap, as tcpdump -w writes) it writes
  OUT_DIR/reorder/NAME.pcap      about 3 % of the records are written after the records captured
                                 up to 20-500 us later, each keeping its timestamp, so the file
                                 steps back in time as busy capture points' files do;
  OUT_DIR/snaplen/NAME.pcap      every record cut to 64 bytes: Ethernet, IP, the TCP header and
                                 10 bytes of options (the SACK blocks are lost);
  OUT_DIR/nohandshake/NAME.pcap  the records before the first data packet removed (the capture
                                 began mid-connection), so no SYN tells the direction.
The names keep scripts/lab-traces.sh's KIND_RATE_SIZE, the ground truth of scripts/lab-table.py.
"""
import argparse
import os
import random
import struct
import sys

from classic_pcap import read_pcap, write_pcap

SNAPLEN = 64
ETH, IPV4 = 14, 0x0800


def tcp_payload_len(frame):
    """TCP payload bytes of an Ethernet/IPv4 frame (0 for anything else)."""
    if len(frame) < ETH + 20 or struct.unpack("!H", frame[12:14])[0] != IPV4:
        return 0
    ihl = (frame[ETH] & 0x0F) * 4
    total = struct.unpack("!H", frame[ETH + 2:ETH + 4])[0]
    if frame[ETH + 9] != 6 or len(frame) < ETH + ihl + 13:
        return 0
    doff = (frame[ETH + ihl + 12] >> 4) * 4
    return max(0, total - ihl - doff)


def reorder(records, nanos, rng):
    """Writes about 3 % of the records after those captured up to 20-500 us later."""
    scale = 1 if nanos else 1000
    t = [r[0] * 1_000_000_000 + r[1] * scale for r in records]
    order = list(range(len(records)))
    late = {}
    for i in range(len(records)):
        if rng.random() < 0.03:
            late[i] = t[i] + rng.randint(20_000, 500_000)
    order.sort(key=lambda i: (late.get(i, t[i]), i))
    return [records[i] for i in order]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("in_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    names = sorted(n for n in os.listdir(args.in_dir) if n.endswith(".pcap"))
    if not names:
        sys.exit(f"lab-artefacts: no .pcap in {args.in_dir}")
    for kind in ("reorder", "snaplen", "nohandshake"):
        os.makedirs(os.path.join(args.out_dir, kind), exist_ok=True)
    for n, name in enumerate(names):
        header, endian, nanos, records = read_pcap(os.path.join(args.in_dir, name))
        rng = random.Random(args.seed * 1_000_003 + n)
        write_pcap(os.path.join(args.out_dir, "reorder", name), header, endian, reorder(records, nanos, rng))
        cut = [[s, f, i, o, frame[:SNAPLEN]] for s, f, i, o, frame in records]
        snap_header = header[:16] + struct.pack(endian + "I", SNAPLEN) + header[20:]
        write_pcap(os.path.join(args.out_dir, "snaplen", name), snap_header, endian, cut)
        first = next((k for k, r in enumerate(records) if tcp_payload_len(r[4]) > 0), len(records))
        write_pcap(os.path.join(args.out_dir, "nohandshake", name), header, endian, records[first:])
    print(f"lab-artefacts: {len(names)} traces x 3 artefacts -> {args.out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
