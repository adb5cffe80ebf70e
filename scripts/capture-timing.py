#!/usr/bin/env python3
"""How a run's packets are spaced in time, from its captures: the same measures for a testbed run
(real Linux TCP) and a simulated run of the same scenario file, so the two can be set side by side.

usage: scripts/capture-timing.py DIR [DIR ...] [--from S] [--out FILE]

Each DIR holds sender.pcap (and, if captured, receiver.pcap) and summary.json, as `ratekit
testbed run` and `ratekit sim` write them for a scenario with `[testbed] pcap = true` (and
`pcap_receiver = true`; docs/testbed.md, "Captures"). Flows are matched to summary.json's flows by
the order of their SYNs. Per flow, over the packets captured from --from seconds after the first
SYN (default: the scenario's warm-up, from summary.json, else 0):

  send_burst3    share of data segments that leave in a run of three or more, each within 50 us of
                 the one before (the sender's capture)
  send_after_ack median us from the last ACK's arrival to a data segment's departure (sender)
  ack_gap_ms     median ms between consecutive ACKs leaving the receiver (receiver's capture)
  ack_cover3     share of the receiver's ACKs that newly acknowledge three segments or more
  fwd_excess_us  p50 / p90 of a segment's forward delay beyond the flow's least (segments sent once)
  spread_pairs   of segments sent within 50 us of the one before, with both delivered, the share
                 whose arrivals are more than 50 us apart: how much the path spreads a burst
  rev_excess_us  p50 / p90 of an ACK's reverse delay beyond the flow's least
  clumps_per_round  mean number of clumps (runs of segments less than 200 us apart) a flow sends
                 per round of its RTT, over rounds without a retransmission in them or the one
                 before: how far a window is split up (sender)
  loop_excess_us median of (the first ACK that covers a clump's last segment - that segment's
                 departure - the RTT) for clumps of two or more segments sent within 3 ms of the flow's previous one, and
                 for clumps after 10 ms or more of its silence: whether a burst after silence
                 comes back later than one that follows another closely (sender)
  loop_drift_us  near / far: median |difference| between the loop delays (the ACK's arrival less
                 the departure of the segment it acknowledges up to) of two ACK-clocked clumps
                 (each sent within 50 us of an ACK, for a segment sent once and acknowledged
                 within 5 ms of the RTT) 20-150 ms apart, and 0.5-8 s apart: how much of the ACK
                 path's noise nearby ACKs share (sender)

Writes FILE (default: DIR/capture-timing.json for one DIR) and prints a table.
"""
import argparse
import bisect
import json
import os
import statistics
import struct
import sys

from classic_pcap import read_pcap

BURST_NS = 50_000
CLUMP_GAP_NS = 200_000
BUSY_NS = 3_000_000
SILENT_NS = 10_000_000
MSS = 1448


def read_tcp(path):
    """Yields (t_ns, src, sport, dst, dport, seq, ack, flags, payload) for each TCP/IPv4 frame."""
    header, endian, nanos, records = read_pcap(path)
    linktype = struct.unpack_from(endian + "I", header, 20)[0]
    if linktype != 1:
        raise ValueError(f"{path}: link type {linktype}, only Ethernet (1) is read")
    for sec, frac, _, _, frame in records:
        t_ns = sec * 1_000_000_000 + (frac if nanos else frac * 1000)
        if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
            continue
        ihl = (frame[14] & 15) * 4
        ip_len = struct.unpack_from(">H", frame, 16)[0]
        tcp = 14 + ihl
        if len(frame) < tcp + 20:
            continue
        sport, dport, seq, ack = struct.unpack_from(">HHII", frame, tcp)
        doff = (frame[tcp + 12] >> 4) * 4
        flags = frame[tcp + 13]
        yield t_ns, frame[26:30], sport, frame[30:34], dport, seq, ack, flags, ip_len - ihl - doff


def flows_of(path):
    """Per flow (keyed by its data direction's endpoints): SYN time, data sends, ACKs."""
    flows = {}
    for t, src, sport, dst, dport, seq, ack, flags, payload in read_tcp(path):
        fwd = (src, sport, dst, dport)
        rev = (dst, dport, src, sport)
        if flags & 0x02 and not flags & 0x10:
            flows.setdefault(fwd, {"syn": t, "data": [], "acks": []})
        elif fwd in flows and payload > 0:
            flows[fwd]["data"].append((t, seq, payload))
        elif rev in flows and payload == 0 and flags & 0x10:
            flows[rev]["acks"].append((t, ack))
    return flows


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def first_times(events, key):
    seen = {}
    for e in events:
        seen.setdefault(key(e), e[0])
    return seen


def clumps(data):
    """The sender's clumps: [first send, last send, end seq, retransmits?, silence before, segments]."""
    out, top, last = [], None, None
    for t, seq, length in data:
        retx = top is not None and seq < top
        top = seq + length if top is None else max(top, seq + length)
        if out and t - last < CLUMP_GAP_NS:
            c = out[-1]
            c[1], c[2], c[3], c[5] = t, max(c[2], seq + length), c[3] or retx, c[5] + 1
        else:
            out.append([t, t, seq + length, retx, t - last if last is not None else None, 1])
        last = t
    return out


def round_structure(sender, t0, rtt_ns):
    """clumps_per_round and loop_excess_us (see the module's doc)."""
    sent = clumps(sender["data"])
    rounds = {}
    for first, _, _, retx, _, _ in sent:
        r = rounds.setdefault((first - t0) // rtt_ns, [0, False])
        r[0] += 1
        r[1] = r[1] or retx
    clean = [n for k, (n, dirty) in rounds.items() if k >= 0 and not dirty and not rounds.get(k - 1, [0, False])[1]]
    acks = sender["acks"]
    ack_times = [a[0] for a in acks]
    busy, silent = [], []
    for first, last, end, retx, silence, segments in sent:
        # A lone segment may wait for the delayed-ACK timer; two or more are acknowledged when read.
        if retx or first < t0 or silence is None or segments < 2:
            continue
        k = bisect.bisect_left(ack_times, last + rtt_ns // 2)
        while k < len(acks) and (acks[k][1] - end) % 2**32 >= 2**31:
            k += 1
        if k == len(acks) or acks[k][0] - last > rtt_ns * 3 // 2:
            continue
        excess = (acks[k][0] - last - rtt_ns) / 1e3
        if silence < BUSY_NS:
            busy.append(excess)
        elif silence >= SILENT_NS:
            silent.append(excess)
    return {
        "clumps_per_round": statistics.mean(clean) if clean else None,
        "loop_excess_us": [statistics.median(busy) if busy else None, statistics.median(silent) if silent else None],
    }


LOOP_NEAR_NS = (20_000_000, 150_000_000)
LOOP_FAR_NS = (500_000_000, 8_000_000_000)
FAR_PAIRS = 20
LOOP_MAX_EXCESS_NS = 5_000_000


def loop_drift(sender, t0, rtt_ns):
    """loop_drift_us (see the module's doc), over segments sent once whose ACK came within
    LOOP_MAX_EXCESS_NS of the RTT (a delayed ACK or a repair is not the path's noise)."""
    sends = {}
    for t, seq, length in sender["data"]:
        sends.setdefault((seq + length) % 2**32, []).append(t)
    first = {end: ts[0] for end, ts in sends.items() if len(ts) == 1}
    ack_times = [a[0] for a in sender["acks"]]
    loops = []
    for t, *_ in clumps(sender["data"]):
        if t < t0:
            continue
        k = bisect.bisect_right(ack_times, t) - 1
        if k < 0 or t - ack_times[k] > BURST_NS:
            continue
        sent = first.get(sender["acks"][k][1])
        if sent is not None and 0 <= ack_times[k] - sent - rtt_ns < LOOP_MAX_EXCESS_NS:
            loops.append((t, ack_times[k] - sent))
    times = [t for t, _ in loops]

    def median_change(lo, hi, most=None):
        changes = []
        for i, (t, loop) in enumerate(loops):
            j, end = bisect.bisect_left(times, t + lo, i + 1), bisect.bisect_left(times, t + hi, i + 1)
            step = max(1, (end - j) // most) if most else 1
            changes += [abs(loops[m][1] - loop) / 1e3 for m in range(j, end, step)]
        return statistics.median(changes) if changes else None

    return [median_change(*LOOP_NEAR_NS), median_change(*LOOP_FAR_NS, FAR_PAIRS)]


def measure(sender, receiver, t0, rtt_ns):
    out = {}
    data = [d for d in sender["data"] if d[0] >= t0]
    acks_in = [a for a in sender["acks"] if a[0] >= t0]
    if data:
        runs, run = [], 1
        for a, b in zip(data, data[1:]):
            if b[0] - a[0] < BURST_NS:
                run += 1
            else:
                runs.append(run)
                run = 1
        runs.append(run)
        out["send_burst3"] = sum(r for r in runs if r >= 3) / len(data)
        ack_times = [a[0] for a in sender["acks"]]
        waits, k = [], 0
        for t, _, _ in data:
            while k < len(ack_times) and ack_times[k] <= t:
                k += 1
            if k:
                waits.append((t - ack_times[k - 1]) / 1e3)
        out["send_after_ack_us"] = statistics.median(waits) if waits else None
        out["segments_sent"] = len(data)
        out.update(round_structure(sender, t0, rtt_ns))
        out["loop_drift_us"] = loop_drift(sender, t0, rtt_ns)
    if receiver is None:
        return out
    acks_out = [a for a in receiver["acks"] if a[0] >= t0]
    gaps = [(b[0] - a[0]) / 1e6 for a, b in zip(acks_out, acks_out[1:])]
    out["ack_gap_ms"] = statistics.median(gaps) if gaps else None
    covers, prev = [], None
    for _, ack in acks_out:
        if prev is not None and ack != prev:
            covers.append(((ack - prev) % 2**32) / MSS)
        prev = ack
    out["ack_cover3"] = sum(c >= 2.5 for c in covers) / len(covers) if covers else None
    sends = {}
    for t, seq, _ in sender["data"]:
        sends.setdefault(seq, []).append(t)
    arrivals = first_times(receiver["data"], key=lambda d: d[1])
    delay = {seq: arrivals[seq] - ts[0] for seq, ts in sends.items() if len(ts) == 1 and seq in arrivals and ts[0] >= t0}
    if delay:
        least = min(delay.values())
        excess = [(d - least) / 1e3 for d in delay.values()]
        out["fwd_excess_us"] = [quantile(excess, 0.5), quantile(excess, 0.9)]
        pairs = spread = 0
        for a, b in zip(data, data[1:]):
            if b[0] - a[0] < BURST_NS and a[1] in delay and b[1] in delay:
                pairs += 1
                spread += (b[0] + delay[b[1]]) - (a[0] + delay[a[1]]) > BURST_NS
        out["spread_pairs"] = spread / pairs if pairs else None
    left = first_times(receiver["acks"], key=lambda a: a[1])
    came = first_times(acks_in, key=lambda a: a[1])
    rdelay = [came[a] - left[a] for a in came if a in left]
    if rdelay:
        least = min(rdelay)
        rex = [(d - least) / 1e3 for d in rdelay]
        out["rev_excess_us"] = [quantile(rex, 0.5), quantile(rex, 0.9)]
    return out


def analyse(directory, from_s):
    summary = json.load(open(os.path.join(directory, "summary.json")))
    sender = flows_of(os.path.join(directory, "sender.pcap"))
    rpath = os.path.join(directory, "receiver.pcap")
    receiver = flows_of(rpath) if os.path.exists(rpath) else None
    if not sender:
        raise ValueError(f"{directory}/sender.pcap: no TCP connection starts in it")
    keys = sorted(sender, key=lambda k: sender[k]["syn"])
    flows = sorted(summary.get("flows", []), key=lambda f: f.get("start_s", 0.0))
    if len(flows) != len(keys):
        raise ValueError(f"{directory}: {len(keys)} connections captured, summary.json has {len(flows)} flows")
    origin = sender[keys[0]]["syn"] - int(flows[0].get("start_s", 0.0) * 1e9)
    if from_s is None:
        from_s = summary.get("warmup_s", 0.0)
    rows = []
    for key, flow in zip(keys, flows):
        rtt_ns = int(flow.get("rtt_ms", 0.0) * 1e6)
        if rtt_ns <= 0:
            raise ValueError(f"{directory}: flow {flow.get('id')} has no rtt_ms in summary.json")
        r = measure(sender[key], receiver.get(key) if receiver else None, origin + int(from_s * 1e9), rtt_ns)
        rows.append({"flow": flow["id"], "cc": flow.get("cc"), **r})
    return {"dir": directory, "from_s": from_s, "flows": rows}


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, list):
        return "/".join(fmt(x) for x in v)
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--from", dest="from_s", type=float, default=None)
    ap.add_argument("--out")
    a = ap.parse_args()
    try:
        results = [analyse(d, a.from_s) for d in a.dirs]
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        sys.exit(f"capture-timing: {e}")
    out = a.out or (os.path.join(a.dirs[0], "capture-timing.json") if len(a.dirs) == 1 else None)
    if out is None:
        sys.exit("capture-timing: with several DIRs, name the output with --out FILE")
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    cols = ["send_burst3", "send_after_ack_us", "clumps_per_round", "loop_excess_us", "loop_drift_us", "ack_gap_ms", "ack_cover3", "fwd_excess_us", "spread_pairs", "rev_excess_us"]
    print("| run | flow | cc | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 3) + "|")
    for r in results:
        for row in r["flows"]:
            print(f"| {r['dir']} | {row['flow']} | {row['cc']} | " + " | ".join(fmt(row.get(c)) for c in cols) + " |")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
