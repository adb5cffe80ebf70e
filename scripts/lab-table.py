#!/usr/bin/env python3
"""Accuracy tables of the detector's lab validation (scripts/lab-validate.sh).

usage: scripts/lab-table.py OUT_DIR RESULTS.csv [RESULTS.csv...]   (several runs are pooled)
The ground truth is the trace's name, KIND_RATE_SIZE.pcap, as scripts/lab-traces.sh writes it.
As in 002 Table 3, only segments with at least 15 losses count. Writes OUT_DIR/accuracy.md,
OUT_DIR/accuracy.csv (per scenario class) and OUT_DIR/cases.csv (per trace).
"""
import csv
import os
import statistics
import sys
from collections import Counter, defaultdict

MIN_LOSSES = 15
# 002 Table 3 (lab accuracy of the authors' detector), by its letters.
PAPER = {"A": "93.1 %", "B": "48.0 %", "C": "12.3 %", "E": "100 %", "F": "99.7 %", "G": "93.2 %", "H": "96.9 %"}
ENFORCER = {"policer": "tbf", "bpf": "tc-BPF", "shared": "tc-BPF", "pair": "tc-BPF"}
MULTI = {"shared": ("C", 3), "pair": ("D", 2)}


def paper(key):
    """002's figure for a class (none for ours beyond the paper)."""
    return "—" if key.endswith(" agg") or key[0] == "D" else PAPER.get(key[0], "")


def rate_bps(text):
    for unit, mult in (("mbit", 1e6), ("kbit", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * mult
    return None


def classify(kind, size):
    """(class key, label, policed truth) for a trace, or None if it is no test case."""
    if kind in MULTI:
        letter, n = MULTI[kind]
        return letter, f"{letter} policing, tc-BPF bucket shared by {n} connections to one client: per-flow rows", True
    if kind in ENFORCER:
        letter = "B" if size == "8kb" else "A"
        what = "8 kB bucket" if letter == "B" else "buckets 100 kB-2 MB"
        return f"{letter} {ENFORCER[kind]}", f"{letter} policing, {ENFORCER[kind]}, {what}", True
    if kind == "droptail":
        if size == "8kb":
            return "G", "G congestion, htb+bfifo, minimum (8 kB) queue", False
        return "E", "E congestion, htb+bfifo, queues 32 kB-1 MB, single flow", False
    if kind == "cross":
        return "H", "H congestion, htb+bfifo (all queues), with an uncaptured bulk cross flow", False
    if kind == "loss":
        return "F", "F random loss 1 %, 2 % (middlebox)", False
    return None


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def fmt_err(errs):
    if not errs:
        return ""
    return f"{100 * statistics.median(errs):.1f} % / {100 * pct(errs, 0.9):.1f} % (max {100 * max(errs):.1f} %)"


def tally(classes, cases, matrix, name, key, label, truth, kind, rate, size, rows):
    """Adds one trace's segments (`rows`) to class `key`, the per-trace list and the policing matrix."""
    cls = classes[key]
    cls["label"] = label
    lossy = [r for r in rows if int(r["losses"]) >= MIN_LOSSES]
    correct, errs, reasons = 0, [], Counter()
    for r in lossy:
        policed = r["policed"] == "true"
        reasons[r["reason"]] += 1
        if policed == truth:
            correct += 1
        else:
            cls["misses"][r["reason"]] += 1
        if policed and truth:
            e = float(r["rate_bps"]) / rate_bps(rate) - 1
            errs.append(abs(e))
            cls["signed_err"].append(e)
    cls["correct"] += correct
    cls["total"] += len(lossy)
    cls["abs_err"] += errs
    if truth and matrix is not None and kind not in MULTI:
        m = matrix[(ENFORCER[kind], rate, size)]
        m[0] += correct
        m[1] += len(lossy)
    cases.append({
        "trace": name, "class": key, "segments": len(rows), "lossy": len(lossy), "correct": correct,
        "median_abs_rate_error": f"{statistics.median(errs):.4f}" if errs else "",
        "reasons": " ".join(f"{k}:{v}" for k, v in sorted(reasons.items())),
    })


def main():
    out, rows = sys.argv[1], []
    for results in sys.argv[2:]:
        with open(results, newline="") as f:
            rows += list(csv.DictReader(f))
    classes = defaultdict(lambda: {"label": "", "correct": 0, "total": 0, "abs_err": [], "signed_err": [], "misses": Counter()})
    cases = []
    matrix = defaultdict(lambda: [0, 0])  # (enforcer, rate, burst) -> [found, lossy]
    for name in sorted({r["file"] for r in rows}):
        base = os.path.basename(name)
        base = base[: -len(".pcap")] if base.endswith(".pcap") else base
        parts = base.split("_")
        if len(parts) != 3:
            continue
        kind, rate, size = parts
        c = classify(kind, size)
        mine = [r for r in rows if r["file"] == name]
        if c is None or any(r["reason"] == "read_error" for r in mine):
            cases.append({"trace": name, "class": "", "segments": len(mine), "lossy": 0, "correct": 0, "median_abs_rate_error": "", "reasons": "read_error" if mine else ""})
            continue
        key, label, truth = c
        groups = [(key, label, [r for r in mine if r["direction"] != "aggregate"])]
        if kind in MULTI:
            agg = MULTI[kind][0] + " agg"
            groups.append((agg, f"{agg[0]}, the same: per-client aggregate rows (beyond 002)", [r for r in mine if r["direction"] == "aggregate"]))
        for key, label, subset in groups:
            tally(classes, cases, None if key.endswith(" agg") else matrix, name, key, label, truth, kind, rate, size, subset)

    order = ["A tbf", "A tc-BPF", "B tbf", "B tc-BPF", "C", "C agg", "D", "D agg", "E", "G", "H", "F"]
    keys = [k for k in order if k in classes] + sorted(k for k in classes if k not in order)
    with open(os.path.join(out, "accuracy.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["class", "paper", "correct", "lossy_segments", "accuracy", "rate_err_median", "rate_err_p90", "rate_err_max", "signed_rate_err_median"])
        for k in keys:
            c = classes[k]
            acc = c["correct"] / c["total"] if c["total"] else ""
            e = c["abs_err"]
            w.writerow([k, paper(k), c["correct"], c["total"], acc,
                        statistics.median(e) if e else "", pct(e, 0.9) if e else "", max(e) if e else "",
                        statistics.median(c["signed_err"]) if e else ""])
    with open(os.path.join(out, "cases.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["trace", "class", "segments", "lossy", "correct", "median_abs_rate_error", "reasons"])
        w.writeheader()
        w.writerows(cases)

    md = ["| scenario (002 Table 3 letter) | 002 | lab, real Linux TCP | rate error of policed verdicts: median / p90 (max); signed median |",
          "|---|---|---|---|"]
    for k in keys:
        c = classes[k]
        acc = f"**{100 * c['correct'] / c['total']:.1f} %** ({c['correct']}/{c['total']})" if c["total"] else "no lossy segment"
        signed = f"; {100 * statistics.median(c['signed_err']):+.2f} %" if c["signed_err"] else ""
        md.append(f"| {c['label']} | {paper(k)} | {acc} | {fmt_err(c['abs_err'])}{signed} |")
    md += ["", "Reasons of the wrong verdicts (segments):", ""]
    for k in keys:
        if classes[k]["misses"]:
            md.append(f"- {k}: " + ", ".join(f"`{r}` {n}" for r, n in classes[k]["misses"].most_common()))
    if matrix:
        rates = sorted({r for _, r, _ in matrix}, key=rate_bps)
        bursts = sorted({b for _, _, b in matrix}, key=lambda b: float(b[:-2]) * (1024 if b.endswith("mb") else 1))
        md += ["", "Policed segments found / lossy segments, by rate and bucket:", "",
               "| enforcer, rate | " + " | ".join(bursts) + " |", "|---|" + "---|" * len(bursts)]
        for enf in ("tbf", "tc-BPF"):
            for r in rates:
                cells = [f"{matrix[(enf, r, b)][0]}/{matrix[(enf, r, b)][1]}" if (enf, r, b) in matrix else "" for b in bursts]
                md.append(f"| {enf}, {r} | " + " | ".join(cells) + " |")
    with open(os.path.join(out, "accuracy.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
