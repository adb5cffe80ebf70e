#!/usr/bin/env python3
"""Writes 000-fig6-8a-mix.toml: 31 runs (5 enforcers x 6 rates, and BC-PQP at 2r as a control) over the authors' 6-group mix."""
import os
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "000-fig6-8a-mix.toml")
ccs = ["reno", "cubic", "bbr", "vegas"]
rtts = ["2ms", "5ms", "10ms", "25ms", "50ms"]
def rot(l, k): return l[k:] + l[:k]
def q(l): return "[" + ", ".join(f'"{x}"' for x in l) + "]"
# The authors' bursty flow (testbed/scripts/configs.py): 100 KB written every 6 s, 5 times, on one connection.
BURSTY = '{ kind = "periodic", size = 100000, period = "6s", count = 5 }'
def long_transfer(mbit):
    # The authors' 3 MB at their published 1.5 Mbit/s, scaled with the rate (decision 3 above).
    return f'{{ kind = "finite", size = {round(3_000_000 * mbit / 1.5)} }}'
# Six groups of 3-flow aggregates in the authors' order: "b" a long transfer, "o" a bursty flow.
# Homogeneous: the flows of copy s share cc[s] and rtt[s] (pick = "aggregate"); mixed: flow k of
# copy s takes cc[s + k + o] and rtt[s + k + o] (o = 0 backlogged, 1 otherwise, as the script).
GROUPS = [("mixed, backlogged", False, "bbb", 0), ("mixed, bursty", False, "ooo", 1), ("mixed, both", False, "bbo", 1),
          ("homogeneous, backlogged", True, "bbb", 0), ("homogeneous, bursty", True, "ooo", 1), ("homogeneous, both", True, "bbo", 2)]
def group_flows(homogeneous, kinds, o, mbit):
    fl = []
    for k, kind in enumerate(kinds):
        shift = o if homogeneous else o + k
        app = long_transfer(mbit) if kind == "b" else BURSTY
        fl.append(f'  {{ cc = {q(rot(ccs, shift % 4))}, rtt = {q(rot(rtts, shift % 5))}, pick = "aggregate", class = {k}, start_jitter = "1ms", app = {app} }},')
    return fl

# (Mbit/s, BDP, FairPolicer/Policer+ B, BC-PQP queue) at max RTT 50 ms, MSS 1500 (000 §6.1).
sizes = [(1.5, 9375, 24867, 248672), (7.5, 46875, 212612, 2126117), (25, 156250, 1058666, 10586655),
         (50, 312500, 3616898, 36168981), (100, 625000, 14467593, 144675926), (200, 1250000, 57870370, 578703704)]
counts = {100: 10, 200: 5}  # 60 and 30 aggregates (000 §6.1)
QUEUES = 3  # one per flow of an aggregate
out = []
w = out.append
w('''# 000 §6.1-6.2 and §6.4.1: Fig. 6 (aggregate throughput over 250 ms windows normalised by the
# rate: CDF, tail, mean of non-zero windows, drop rate) and Fig. 8a (Jain's index per window)
# for Shaper, Policer, Policer+, FairPolicer (FP) and BC-PQP on §6.1's traffic mix.
#
# The authors' setup (github.com/PhantomQueuePolicer/BCPQP, read 2026-11-27; facts, not code):
# - testbed/scripts/configs.py: 30 aggregates in six groups of five, 3 flows each, in this order:
#   mixed CC/RTT backlogged, mixed bursty, mixed both (2 backlogged + 1 bursty), then the same
#   three homogeneous (one CC and one RTT per aggregate); groups start 0, 60, ..., 300 s.
#   Mixed: flow k of aggregate s runs cc[(s+k+o) mod 4], RTT class (s+k+o) mod 3 (o = 0 in the
#   backlogged group, 1 in the others); homogeneous: cc[s mod 4], RTT class s mod 3.
#   Backlogged flow: one 3 MB write; bursty flow: 100 KB written every 6 s, 5 times. Both sizes
#   carry a `multipler` (the bursty one also an `m2`) set to 1; plot_all.py reads rates = [1.5]
#   from logs-1_5mbps, so the published sizes are those of the 1.5 Mbit/s run; the multipliers
#   of the other rates are not published.
# - run.py, traffic_generator.py: one TCP connection per flow, opened before the schedule; the
#   i-th transfer is written at start + i*period whether or not the one before has finished.
# - rtt-qdisc.py: netem 5, 15 or 25 ms on the sender's egress per RTT class (§6.1: 2-50 ms).
# - traffic_server.py: the receiver counts the bytes its application reads per connection
#   (in-order goodput) and samples them every 0.25 s; plot_all.py sums a source-port block's
#   flows (aggregate = port / 64) per 0.25 s bin from the first sample, divides by r, leaves
#   out bins where the aggregate read nothing, and has no warm-up: every non-zero bin of the
#   experiment counts, slow starts included. Jain per bin over the flows with a non-zero rate.
#   Fig. 6c's bars are that mean over all aggregates divided by the shaper's same mean.
#   process_machnet_logs.py: drop rate = (RX - TX packets) / RX packets at the middlebox.
# - parameters.py: BDP at the max RTT; Policer 2 BDP and shaper queues 2 BDP (§6.1: BDP);
#   FP and Policer+ max(Reno BDP^2/18 MSS, (0.072/RTT) BDP^(4/3)); BC-PQP 10x that. The
#   middlebox (machnet apps) gives every source port its own queue (port mod num_queues).
#
# Decisions (made before any run of this mix; §6.1's text wins where it speaks):
# 1. §6.1: 100 aggregates (60 at 100 Mbit/s, 30 at 200), not the script's 30; RTTs from
#    {2, 5, 10, 25, 50} ms, not the script's 5/15/25; enforcers sized at max RTT 50 ms, Policer
#    and shaper queues = BDP (§6.1), not the script's 2 BDP.
# 2. The script where §6.1 is silent: 3 flows per aggregate, its six groups (17, 17, 16 copies
#    per half; 10 or 5 at 100 and 200 Mbit/s) and its CC/RTT rotation (over 5 RTTs instead of
#    3 classes). One queue per flow (explicit class), 3 per aggregate, as the middlebox's
#    queue per port gives.
# 3. Backlogged flows: one transfer of 3 MB x r / 1.5 Mbit/s (50 MB at 25 Mbit/s). The script's
#    3 MB is its 1.5 Mbit/s size; unscaled it would last 3 s at 25 Mbit/s, against §6.1's "flow
#    completion time in minutes" and "flow sizes ... to 100s of MBs" (400 MB at 200 Mbit/s).
#    Scaled, three flows at a fair share finish at 48 s at every rate, as at 1.5 Mbit/s.
# 4. Bursty flows: 100 KB every 6 s, 5 times, on one connection (`periodic` app), at every
#    rate: §6.1 calls them "short on-and-off flows (10s of KBs)", so they are not scaled.
# 5. Start: every group at 0 s. The authors space groups 60 s apart to spare the sender (§6.1
#    cites netem at the sender); our aggregates share no enforcer, link or host. The flows of an
#    aggregate start together (one scheduled instant in the script): 1 ms start jitter.
# 6. Measurement as the authors' harness: no warm-up (every non-zero window counts, slow starts
#    included; §6.2 blames Policer+'s and FP's drops and bursts on slow-start overshoot). The
#    claims and tolerances are unchanged, and so are the controls but one, replaced after the
#    first run because it passed too (see the 2r run below); "BC-PQP: mean rate close to r" stays
#    normalised by r although Fig. 6c divides by the shaper's mean (found while reading the
#    harness, after that claim had been run on the earlier mix).
# Sizes (000 §6.1, core::sizing::EvaluationSizes::paper, max RTT 50 ms, MSS 1500): Policer =
# BDP; FP and Policer+ = max(Reno BDP²/18·MSS, CUBIC Eq. 16); BC-PQP = 10 × that; shaper
# queues = BDP. Goodput counts payload only, so a perfect enforcer reads ≈ 1448/1500 ≈ 0.965.
# This file is generated by a short script (see docs/reproduce.md); edit the generator's tables.
# Negative controls (issue 16), chosen before the run that judged them: Policer+ (a bursty
# policer) for the tail claims, the shaper for "X bursts more than BC-PQP" and for "less fair
# than BC-PQP" claims, the Policer for BC-PQP's fairness (and its mean until the authors' mix,
# now BC-PQP at 2r, below), FP for "the Policer's
# mean below the shaper's", BC-PQP for "the shaper drops least", Policer+ for "FP fairer than the Policer". "BC-PQP's drop rate comparable to the BDP
# policer's" was at most 2x the policer's, which no run here could fail (every policer drops about
# as much); "comparable" is now within 2x either way (the lower bound added after the quick run on
# the earlier 10-flow mix read 0.88), and the shaper, which barely drops, is its control. "FP: mean
# skewed above BC-PQP's by its bursts" (≥ 1.0) was removed: its control, the Policer, passed too
# (1.002 of BC-PQP's mean, quick mode, earlier mix), so a bound at 1.0 could not tell a bursty
# enforcer from any other.
# The abstract's "up to 2.5× lower drop rates and up to 18× smaller burst than a policer" (issue 16;
# the policer read as Policer+, §6.2's "correctly sized policer"): only 25 Mbit/s has claims, so
# the abstract's "up to", a best case over rates, is judged at one rate; the full-mode rates are
# in the figures.
# Current verdicts and values: docs/reproduce.md ("000-fig6-8a-mix"), or ratekit reproduce --quick --only 000-fig6 --out DIR.
paper = "000"
figure = "Fig. 6, Fig. 8a"
title = "Aggregate rate enforcement and per-flow fairness on the authors' 3-flow mix, 100 aggregates, 1.5-200 Mbit/s"
quick_note = "25 Mbit/s only (100 aggregates), 30 s instead of 60 s"

[quick]
duration = "30s"''')
w('''
[base]
duration = "60s"
seed = 1
[base.measure]
window = "250ms"
warmup = "0s"
[base.enforcer]
kind = "token_bucket"
rate = "25mbit"
burst = "156250"''')
for name, homogeneous, kinds, o in GROUPS:
    w(f"\n# {name}\n[[base.aggregates]]\ncount = {16 if 'both' in name else 17}\nflows = [")
    out.extend(group_flows(homogeneous, kinds, o, 25))
    w("]")
for mbit, bdp, fp, bc in sizes:
    rate = f'"{mbit}mbit"'
    ens = [
        ("shaper", f'{{ kind = "shaper", rate = {rate}, queues = {QUEUES}, classify = "class", queue_size = {bdp} }}'),
        ("policer", f'{{ kind = "token_bucket", rate = {rate}, burst = {bdp} }}'),
        ("policer_plus", f'{{ kind = "token_bucket", rate = {rate}, burst = {fp} }}'),
        ("fair_policer", f'{{ kind = "fair_policer", rate = {rate}, bucket = {fp} }}'),
        ("bcpqp", f'{{ kind = "bcpqp", rate = {rate}, queues = {QUEUES}, classify = "class", queue_size = {bc} }}'),
    ]
    for label, en in ens:
        w(f'\n[[runs]]\nlabel = "{label}@{mbit}"\nx = {mbit}')
        if mbit != 25:
            w("full_only = true")
        w(f"[runs.set]\nenforcer = {en}")
        if mbit in counts:
            for i in range(6):
                w(f'"aggregates.{i}.count" = {counts[mbit]}')
        if mbit != 25:
            for i, (_, _, kinds, _) in enumerate(GROUPS):
                for k, kind in enumerate(kinds):
                    if kind == "b":
                        w(f'"aggregates.{i}.flows.{k}.app" = {long_transfer(mbit)}')
# Control for "BC-PQP: mean rate close to r" (issue 16's rule: a control that passes too is
# replaced or the claim removed): BC-PQP enforcing 2r while the aggregates stay entitled to r,
# the broken rate parameter 000-fig3-delta-t.toml uses. Its first control, the BDP Policer, passed
# too on this mix (0.932 against 1.0 ± 0.07, quick mode), as Policer+ (0.954) and FP (0.958)
# would: every enforcer's mean of non-zero windows lies within 0.07 of r here.
w('\n[[runs]]\nlabel = "bcpqp_2r@25"\n[runs.set]\nenforcer = { kind = "bcpqp", rate = "50mbit", queues = %d, classify = "class", queue_size = 10586655 }' % QUEUES)
for i in range(len(GROUPS)):
    w(f'"aggregates.{i}.rate" = "25mbit"')
open(OUT, "w").write("\n".join(out) + "\n")
claims = '''
[[claims]]
name = "Shaper: accurate enforcement at short time scales (tail)"
metric = "throughput_p99.9"
run = "shaper@25"
control = "policer_plus@25"
paper_text = "the shaper's CDF is a near-vertical line at r (Fig. 6a/6b)"
tolerance = { max = 1.05 }
note = "normalised goodput; payload only, so r itself reads ≈ 0.965"

[[claims]]
name = "BC-PQP: small deviation even at the tail"
metric = "throughput_p99.9"
run = "bcpqp@25"
control = "policer_plus@25"
paper_text = "close to the shaper at the tails (Fig. 6b)"
tolerance = { max = 1.3 }
note = "the paper's policers mostly stay within 0.8r-1.2r; 1.3 allows the p99.9 point"

[[claims]]
name = "FP's burst is ≈ 10× BC-PQP's"
metric = "burst_p99.9"
run = "fair_policer@25"
control = "shaper@25"
over_run = "bcpqp@25"
paper = 10.0
paper_text = "10× smaller burst compared with FP (§6.2)"
tolerance = { min = 5.0 }
note = "burst = p99.9 of max(0, normalised throughput − 1); an order-of-magnitude claim, ≥ 5× accepted"

[[claims]]
name = "Policer+'s burst is ≈ 10× BC-PQP's"
metric = "burst_p99.9"
run = "policer_plus@25"
control = "shaper@25"
over_run = "bcpqp@25"
paper = 10.0
paper_text = "10× smaller burst compared with a correctly sized policer (§6.2)"
tolerance = { min = 5.0 }
note = "as above"

[[claims]]
name = "Shaper tail, wire throughput"
metric = "wire_p99.9"
run = "shaper@25"
control = "policer_plus@25"
paper_text = "the shaper's CDF is a near-vertical line at r (Fig. 6a/6b)"
tolerance = { max = 1.05 }
note = "as the goodput claim above, from payload bytes arriving at the receivers (docs/reproduce.md mismatch 1)"

[[claims]]
name = "BC-PQP tail, wire throughput"
metric = "wire_p99.9"
run = "bcpqp@25"
control = "policer_plus@25"
paper_text = "close to the shaper at the tails (Fig. 6b)"
tolerance = { max = 1.3 }
note = "as the goodput claim above, from payload bytes arriving at the receivers"

[[claims]]
name = "FP's burst ≈ 10× BC-PQP's, wire throughput"
metric = "wire_burst_p99.9"
run = "fair_policer@25"
control = "shaper@25"
over_run = "bcpqp@25"
paper = 10.0
paper_text = "10× smaller burst compared with FP (§6.2)"
tolerance = { min = 5.0 }
note = "as the goodput claim above, from payload bytes arriving at the receivers"

[[claims]]
name = "Policer+'s burst ≈ 10× BC-PQP's, wire throughput"
metric = "wire_burst_p99.9"
run = "policer_plus@25"
control = "shaper@25"
over_run = "bcpqp@25"
paper = 10.0
paper_text = "10× smaller burst compared with a correctly sized policer (§6.2)"
tolerance = { min = 5.0 }
note = "as above"

[[claims]]
name = "BC-PQP: mean rate close to r"
metric = "throughput_mean"
run = "bcpqp@25"
control = "bcpqp_2r@25"
paper = 1.0
tolerance = { abs = 0.07 }
note = "mean of non-zero windows (Fig. 6c); goodput reads ≈ 0.965 at exactly r. Control changed after a run: the BDP Policer, its first control, passed too on the authors' 3-flow mix (0.932), as every enforcer here would, so this claim says BC-PQP holds r on average, not that it beats a baseline; the Policer's lower mean is the next claim's. Its control is now BC-PQP set to 2r (aggregates entitled to r). Fig. 6c divides by the shaper's mean, not by r (the authors' plot_all.py)"

[[claims]]
name = "Policer (BDP): mean below the shaper's"
metric = "throughput_mean"
run = "policer@25"
control = "fair_policer@25"
over_run = "shaper@25"
paper_text = "Policer's line is shifted left (Fig. 6a, 6c)"
tolerance = { max = 0.99 }
note = "ratio of means"

[[claims]]
name = "BC-PQP's drop rate comparable to the BDP policer's"
metric = "drop_rate"
run = "bcpqp@25"
over_run = "policer@25"
control = "shaper@25"
paper_text = "comparable with BDP-sized policer (Fig. 6d)"
tolerance = { min = 0.5, max = 2.0 }
note = "ratio of drop rates; 'comparable' read as within 2× either way (min 0.5 added with issue 16, after this ratio read 0.88, so that a shaper's few drops fail)"

[[claims]]
name = "Shaper drops least"
metric = "drop_rate"
run = "shaper@25"
control = "bcpqp@25"
over_run = "policer@25"
paper_text = "policing schemes drop more than the shaper (Fig. 6d)"
tolerance = { max = 0.5 }
note = "ratio of drop rates"

[[claims]]
name = "Fig. 8a: BC-PQP's fairness comparable to the shaper's"
metric = "jain_mean"
run = "bcpqp@25"
control = "policer@25"
over_run = "shaper@25"
paper_text = "BC-PQP achieves fairness comparable to the shaper (Fig. 8a)"
tolerance = { min = 0.95 }
note = "ratio of mean Jain's index per 250 ms window and aggregate (flows with a non-zero rate)"

[[claims]]
name = "Fig. 8a: Policer less fair than BC-PQP"
metric = "jain_mean"
run = "policer@25"
control = "shaper@25"
over_run = "bcpqp@25"
paper_text = "Policer and Policer+ are unable to share fairly (Fig. 8a)"
tolerance = { max = 0.95 }
note = "ratio of mean Jain's index"

[[claims]]
name = "Fig. 8a: FP falls short of BC-PQP"
metric = "jain_mean"
run = "fair_policer@25"
over_run = "bcpqp@25"
control = "shaper@25"
paper_text = "FP does better than policers but falls a bit short (Fig. 8a)"
tolerance = { max = 0.95 }
note = "ratio of mean Jain's index; was 'FP between the policers and BC-PQP' at ≤ 1.0, one side only, which the Policer met too (issue 16); now the two sides as two claims, each with the 0.95 the policy claims above use"

[[claims]]
name = "Fig. 8a: FP fairer than the Policer"
metric = "jain_mean"
run = "fair_policer@25"
over_run = "policer@25"
control = "policer_plus@25"
paper_text = "FP does better than policers but falls a bit short (Fig. 8a)"
tolerance = { min = 1.05 }
note = "ratio of mean Jain's index; the other side of 'FP between the policers and BC-PQP' (issue 16)"

[[claims]]
name = "Abstract: BC-PQP drops up to 2.5× less than a policer (Policer+)"
metric = "drop_rate"
run = "bcpqp@25"
over_run = "policer_plus@25"
control = "fair_policer@25"
paper = 0.4
paper_text = "up to 2.5× lower drop rates than a policer (abstract)"
tolerance = { min = 0.4, max = 0.8 }
note = "BC-PQP's drop rate / Policer+'s (the 'correctly sized policer' of §6.2); 'up to 2.5×' at one rate read as 1.25-2.5× fewer drops. Bounds set with issue 16 from the abstract, knowing that this file's runs had read 12-14 % drops for every policer at 25 Mbit/s. Control: FairPolicer, Policer+'s bucket without burst control, which §6.2 says drops as a large policer does"

[[claims]]
name = "Abstract: BC-PQP's bursts up to 18× smaller than a policer's (Policer+)"
metric = "burst_p99.9"
run = "policer_plus@25"
over_run = "bcpqp@25"
control = "shaper@25"
paper = 18.0
paper_text = "up to 18× smaller burst (tail throughput deviation) than a policer (abstract)"
tolerance = { min = 9.0, max = 18.0 }
note = "Policer+'s p99.9 burst / BC-PQP's; 'up to 18×' at one rate read as 9-18× (at least half the best case, §6.2 gives 10×). Bounds set with issue 16 from the abstract before this claim's first run. Control: the shaper in Policer+'s place, which barely bursts"

[[figures]]
kind = "cdf"
title = "Fig. 6a: normalised aggregate throughput, 25 Mbit/s"
data = "throughput"
runs = ["shaper@25", "policer@25", "policer_plus@25", "fair_policer@25", "bcpqp@25"]

[[figures]]
kind = "cdf"
title = "Fig. 8a: Jain's index per window, 25 Mbit/s"
data = "jain"
runs = ["shaper@25", "policer@25", "policer_plus@25", "fair_policer@25", "bcpqp@25"]

[[figures]]
kind = "metric"
title = "Fig. 6d: drop rate by enforced rate"
metric = "drop_rate"
xlabel = "enforced rate (Mbit/s)"
groups = ["shaper@", "policer@", "policer_plus@", "fair_policer@", "bcpqp@"]

[[figures]]
kind = "metric"
title = "Fig. 6b (wire): p99.9 of normalised arrival throughput at the receivers by enforced rate"
metric = "wire_p99.9"
xlabel = "enforced rate (Mbit/s)"
groups = ["shaper@", "policer@", "policer_plus@", "fair_policer@", "bcpqp@"]

[[figures]]
kind = "metric"
title = "Fig. 6b: p99.9 of normalised throughput by enforced rate"
metric = "throughput_p99.9"
xlabel = "enforced rate (Mbit/s)"
groups = ["shaper@", "policer@", "policer_plus@", "fair_policer@", "bcpqp@"]
'''
# Full mode judges six of the claims above at every other rate too (issue 16), with the same
# tolerances and controls as at 25 Mbit/s, written before the full run that judged them. Seed 1:
# 22 of 29 hold. The shaper's wire tail holds at every rate (0.98-1.02), the Policer's mean below
# the shaper's (0.87-0.98), BC-PQP's drops within 2× the Policer's (0.90-1.18) and its fairness
# the shaper's (0.974-1.0); BC-PQP's wire tail fails at every rate (1.42-1.82: slow starts into
# empty phantom queues, as at 25 Mbit/s), and Policer+'s burst is 5.1×, 10.1× and 9.1× BC-PQP's at
# 50, 100 and 200 Mbit/s (holds) but 0.55 and 1.48× at 1.5 and 7.5 Mbit/s. The Policer's mean at
# 1.5 Mbit/s has no claim: its control, FP, read 0.81 of the shaper's mean, inside ≤ 0.99.
CONTROL_PASSES = {(1.5, "Policer (BDP): mean below the shaper's")}
PER_RATE = [
    ("Shaper tail, wire throughput", "wire_p99.9", "shaper", None, "policer_plus", "{ max = 1.05 }", "the shaper's CDF is a near-vertical line at r (Fig. 6a/6b)"),
    ("BC-PQP tail, wire throughput", "wire_p99.9", "bcpqp", None, "policer_plus", "{ max = 1.3 }", "close to the shaper at the tails (Fig. 6b)"),
    ("Policer+'s burst ≈ 10× BC-PQP's, wire throughput", "wire_burst_p99.9", "policer_plus", "bcpqp", "shaper", "{ min = 5.0 }", "10× smaller burst compared with a correctly sized policer (§6.2)"),
    ("Policer (BDP): mean below the shaper's", "throughput_mean", "policer", "shaper", "fair_policer", "{ max = 0.99 }", "Policer's line is shifted left (Fig. 6a, 6c)"),
    ("BC-PQP's drop rate comparable to the BDP policer's", "drop_rate", "bcpqp", "policer", "shaper", "{ min = 0.5, max = 2.0 }", "comparable with BDP-sized policer (Fig. 6d)"),
    ("Fig. 8a: BC-PQP's fairness comparable to the shaper's", "jain_mean", "bcpqp", "shaper", "policer", "{ min = 0.95 }", "BC-PQP achieves fairness comparable to the shaper (Fig. 8a)"),
]
for mbit, *_ in sizes:
    if mbit == 25:
        continue
    for name, metric, run, over, control, tol, text in PER_RATE:
        if (mbit, name) in CONTROL_PASSES:
            continue
        over_line = f'\nover_run = "{over}@{mbit}"' if over else ""
        claims += f"""
[[claims]]
name = "{name}, {mbit} Mbit/s"
metric = "{metric}"
run = "{run}@{mbit}"{over_line}
control = "{control}@{mbit}"
full_only = true
paper_text = "{text}"
tolerance = {tol}
note = "as at 25 Mbit/s, full mode only"
"""
with open(OUT, "a") as f:
    f.write(claims)
