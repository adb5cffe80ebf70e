//! `ratekit demo`: BC-PQP against the policers of the same family on one open-loop overload trace.
//!
//! Three aggregates, each enforced at 10 Mbit/s, each with four flows in classes 0..3 (one queue
//! per class, `classify = "class"`):
//! - `mixed`: 1, 3, 6 and 12 Mbit/s offered (22 Mbit/s): one flow below its fair share, three above;
//! - `equal`: four flows of 5 Mbit/s (20 Mbit/s): shows weighted, priority and nested policies;
//! - `light`: 2, 2, 2 and 3 Mbit/s (9 Mbit/s): under the rate, so nothing should be dropped.
//!
//! Arrivals are Poisson per flow (seeded), so the trace is open-loop: the senders never react to
//! drops, as in a trace replay. Every enforcer sees the same trace. Each flow's passed rate is
//! compared with its *target*, the share the enforcer's policy would give it: the weighted
//! max-min (water-filling) allocation of 10 Mbit/s over the offered rates. Jain's index per
//! aggregate is taken over passed / target, so 1.0 means "exactly the policy" for every policy
//! (Jain's normalised form); a plain policer is held to max-min fairness, which is what per-flow
//! fairness means. Jain's index leaves out flows the policy (nearly) starves, so a second
//! figure, the policy error Σ|passed − target| ÷ rate, catches bandwidth given where the policy
//! gives none. Passed rates count bytes that left within the trace (a shaper's departures),
//! per 250 ms window; the largest window ÷ rate shows bursts. Sizes follow the BC-PQP
//! evaluation (000 §6.1) for RTT = 100 ms (see `enforcers`).

use crate::arrivals::poisson_times;
use crate::csv_io::write_atomic;
use crate::replay::{Arrival, Engine, Outcome};
use crate::progress::Progress;
use crate::replay_summary::{fmt_bps, Accounting, Summary};
use anyhow::Context;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use ratekit_core::metrics::jain;
use ratekit_core::sizing::{self, EvaluationSizes, DEFAULT_MSS};
use ratekit_core::{Duration, EnforcerConfig, Instant, PolicyNode, Rate};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Directory for trace.csv, flows.csv, aggregates.csv, table.txt and demo.json.
    pub out: PathBuf,
    /// Seed of the trace's arrival process.
    pub seed: u64,
    /// Trace length in seconds.
    pub seconds: f64,
}

/// The rate every aggregate is enforced at, bits/s.
const RATE_BPS: f64 = 10e6;
const QUEUES: usize = 4;
const PACKET_BYTES: u32 = 1500;

/// (aggregate, offered Mbit/s of the flows in classes 0..3).
const AGGREGATES: [(&str, [f64; QUEUES]); 3] =
    [("mixed", [1.0, 3.0, 6.0, 12.0]), ("equal", [5.0, 5.0, 5.0, 5.0]), ("light", [2.0, 2.0, 2.0, 3.0])];

/// One enforcer of the comparison: its name, the policy its targets follow, and its config.
struct DemoEnforcer {
    name: &'static str,
    policy: &'static str,
    toml: String,
}

const FAIR: &str = "fair";
const WEIGHTED: &str = "weighted(0:1, 1:2, 2:3, 3:4)";
const PRIORITY: &str = "priority(0, 1, 2, 3)";
const NESTED: &str = "priority(0, weighted(1:1, 2:2, 3:3))";

/// Sizes from the BC-PQP evaluation (000 §6.1, `sizing::EvaluationSizes::paper`) for
/// 10 Mbit/s and a 100 ms maximum RTT (BDP = 125 kB): Policer = one BDP; PQP queue = BDP²/18·MSS
/// (000 §3.5); BC-PQP queue = 10 × the FairPolicer size; FairPolicer = max(BDP²/18·MSS,
/// 2G/D·(R·D)^{4/3}) (001 Eq. 16); each shaper queue (DRR shaper and FIFO shaper) = one BDP.
/// The shapers are the ground truth BC-PQP approximates without holding packets.
fn enforcers() -> Vec<DemoEnforcer> {
    let rate = Rate::from_bits_per_sec(RATE_BPS as u64);
    let rtt = Duration::from_millis(100);
    let sizes = EvaluationSizes::paper(rate, rtt, DEFAULT_MSS);
    let pqp_size = sizing::phantom_queue_bytes(rate, rtt, DEFAULT_MSS);
    let phantom = |kind: &str, policy: &str, size: u64| {
        format!("kind = \"{kind}\"\nrate = \"{rate}\"\nqueues = {QUEUES}\nqueue_size = {size}\nclassify = \"class\"\npolicy = \"{policy}\"\n")
    };
    vec![
        DemoEnforcer {
            name: "token_bucket",
            policy: FAIR,
            toml: format!("kind = \"token_bucket\"\nrate = \"{rate}\"\nburst = {}\n", sizes.policer),
        },
        DemoEnforcer {
            name: "fifo_shaper",
            policy: FAIR,
            toml: format!("kind = \"fifo\"\nrate = \"{rate}\"\nburst = {DEFAULT_MSS}\nlimit = {}\n", sizes.shaper_queue),
        },
        DemoEnforcer {
            name: "fair_policer",
            policy: FAIR,
            toml: format!("kind = \"fair_policer\"\nrate = \"{rate}\"\nbucket = {}\n", sizes.fair_policer),
        },
        DemoEnforcer { name: "pqp_fair", policy: FAIR, toml: phantom("pqp", FAIR, pqp_size) },
        DemoEnforcer { name: "bcpqp_fair", policy: FAIR, toml: phantom("bcpqp", FAIR, sizes.bcpqp) },
        // One phantom queue per flow, found by the flow key instead of the class.
        DemoEnforcer {
            name: "bcpqp_exact",
            policy: FAIR,
            toml: format!("kind = \"bcpqp\"\nrate = \"{rate}\"\nflows = \"exact\"\nqueue_size = {}\nclassify = \"flow\"\n", sizes.bcpqp),
        },
        DemoEnforcer { name: "bcpqp_weighted", policy: WEIGHTED, toml: phantom("bcpqp", WEIGHTED, sizes.bcpqp) },
        DemoEnforcer { name: "bcpqp_priority", policy: PRIORITY, toml: phantom("bcpqp", PRIORITY, sizes.bcpqp) },
        DemoEnforcer { name: "bcpqp_nested", policy: NESTED, toml: phantom("bcpqp", NESTED, sizes.bcpqp) },
        DemoEnforcer { name: "shaper_fair", policy: FAIR, toml: phantom("shaper", FAIR, sizes.shaper_queue) },
        DemoEnforcer { name: "shaper_nested", policy: NESTED, toml: phantom("shaper", NESTED, sizes.shaper_queue) },
    ]
}

/// One generated packet, with the names the tables use.
struct TracePacket {
    time_ns: u64,
    aggregate: u32,
    class: u16,
}

/// Poisson arrivals of 1500-byte packets for every flow, merged in time order.
fn generate(seed: u64, seconds: f64) -> Vec<TracePacket> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let end_ns = (seconds * 1e9) as u64;
    let mut trace = Vec::new();
    for (a, (_, rates)) in AGGREGATES.iter().enumerate() {
        for (class, &mbps) in rates.iter().enumerate() {
            let mean_gap_ns = PACKET_BYTES as f64 * 8.0 / (mbps * 1e6) * 1e9;
            for t in poisson_times(&mut rng, mean_gap_ns, end_ns as f64) {
                trace.push(TracePacket { time_ns: t as u64, aggregate: a as u32, class: class as u16 });
            }
        }
    }
    trace.sort_by_key(|p| (p.time_ns, p.aggregate, p.class));
    trace
}

fn flow_name(class: usize) -> String {
    format!("f{class}")
}

/// The allocation `policy` gives `capacity` over queues with `demand`s: strict priority in
/// child order, weighted (and fair) by water-filling, so what a child does not use goes to its
/// siblings (algorithms.md §0).
pub fn allocate(node: &PolicyNode, capacity: f64, demand: &[f64], out: &mut [f64]) {
    fn total(node: &PolicyNode, demand: &[f64]) -> f64 {
        let mut sum = 0.0;
        let _ = node.visit_leaves::<()>(&mut |q| {
            sum += demand[q];
            Ok(())
        });
        sum
    }
    match node {
        PolicyNode::Queue(q) => out[*q] = capacity.min(demand[*q]),
        PolicyNode::Priority(children) => {
            let mut left = capacity;
            for c in children {
                let take = left.min(total(c, demand));
                allocate(c, take, demand, out);
                left -= take;
            }
        }
        PolicyNode::Fair(children) => {
            let weighted: Vec<(PolicyNode, u32)> = children.iter().map(|c| (c.clone(), 1)).collect();
            allocate(&PolicyNode::Weighted(weighted), capacity, demand, out)
        }
        PolicyNode::Weighted(children) => {
            let mut left = capacity;
            let mut open: Vec<usize> = (0..children.len()).collect();
            // Children whose whole demand fits in their weighted share are satisfied and leave;
            // the rest is shared again among the others until nobody else fits.
            loop {
                let weight_sum: f64 = open.iter().map(|&i| children[i].1 as f64).sum();
                let (fits, rest): (Vec<usize>, Vec<usize>) = open
                    .iter()
                    .partition(|&&i| total(&children[i].0, demand) <= left * children[i].1 as f64 / weight_sum);
                if fits.is_empty() {
                    for &i in &rest {
                        allocate(&children[i].0, left * children[i].1 as f64 / weight_sum, demand, out);
                    }
                    break;
                }
                for &i in &fits {
                    let d = total(&children[i].0, demand);
                    allocate(&children[i].0, d, demand, out);
                    left -= d;
                }
                open = rest;
                if open.is_empty() {
                    break;
                }
            }
        }
    }
}

#[derive(Serialize)]
struct FlowRow {
    enforcer: &'static str,
    policy: &'static str,
    aggregate: &'static str,
    flow: String,
    class: usize,
    offered_bps: f64,
    target_bps: f64,
    passed_bps: f64,
    drop_rate: f64,
}

#[derive(Serialize)]
struct AggregateRow {
    enforcer: &'static str,
    policy: &'static str,
    aggregate: &'static str,
    offered_bps: f64,
    passed_bps: f64,
    drop_rate: f64,
    /// Jain's index over passed / target of the flows with a target of at least 1 % of the rate.
    jain_index: Option<f64>,
    /// Σ |passed − target| over the flows, as a fraction of the rate: 0 is exactly the policy;
    /// unlike Jain's index it also sees a starved class that gets bandwidth.
    policy_error: f64,
    /// The largest passed rate over any whole 250 ms window, as a multiple of the aggregate rate
    /// (000 §6.1's burst measure: 1.0 is perfect enforcement).
    peak_window: Option<f64>,
}

#[derive(Serialize)]
struct DemoReport {
    seed: u64,
    seconds: f64,
    rate_bps: f64,
    packets: usize,
    flows: Vec<FlowRow>,
    aggregates: Vec<AggregateRow>,
    summaries: Vec<Summary>,
}

/// Measurement window for the aggregate's burstiness, as the BC-PQP evaluation (000 §6.1).
const WINDOW_NS: u64 = 250_000_000;

/// Replays the trace; besides the summary, returns per flow (aggregate × 4 + class) the bytes
/// passed in each whole 250 ms window of the trace, by departure time for a queueing enforcer
/// (so bytes a shaper still holds when the trace ends do not count as passed within it).
fn replay(cfg: EnforcerConfig, trace: &[TracePacket], seconds: f64) -> anyhow::Result<(Summary, Vec<Vec<u64>>)> {
    let kind = cfg.kind();
    let mut acc = Accounting::default();
    for (name, _) in AGGREGATES {
        let a = acc.aggregate(name);
        for class in 0..QUEUES {
            acc.flow(a, &flow_name(class));
        }
    }
    let windows = ((seconds * 1e9) as u64 / WINDOW_NS) as usize;
    let mut window_bytes = vec![vec![0u64; windows]; AGGREGATES.len() * QUEUES];
    // Aggregates and flows were numbered in order above, so (aggregate, class) finds the flow.
    let mut engine: Engine<(u32, u32, u64)> = Engine::new(cfg, None)?;
    let mut record = |acc: &mut Accounting, (agg, flow, arrival_ns): (u32, u32, u64), outcome: Outcome| {
        acc.record(agg, flow, PACKET_BYTES, outcome);
        if let Outcome::Pass { departure } = outcome {
            let w = (departure.map_or(arrival_ns, |d| d.0) / WINDOW_NS) as usize;
            if let Some(b) = window_bytes[flow as usize].get_mut(w) {
                *b += PACKET_BYTES as u64;
            }
        }
        Ok(())
    };
    for p in trace {
        acc.saw_arrival(p.time_ns);
        let flow_index = p.aggregate * QUEUES as u32 + p.class as u32;
        let arrival = Arrival {
            time: Instant(p.time_ns),
            aggregate: p.aggregate,
            flow: flow_index as u64,
            bytes: PACKET_BYTES,
            class: p.class,
        };
        engine.push(arrival, (p.aggregate, flow_index, p.time_ns))?;
        engine.take_decided(|x, o| record(&mut acc, x, o))?;
    }
    engine.finish(|x, o| record(&mut acc, x, o))?;
    Ok((acc.finish(kind), window_bytes))
}

/// Flows whose target is below this fraction of the aggregate rate are left out of Jain's
/// index: passed / target is meaningless for a flow the policy (nearly) starves.
const MIN_TARGET_FRACTION: f64 = 0.01;

fn csv_of<T: Serialize>(rows: &[T]) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r)?;
    }
    Ok(w.into_inner()?)
}

/// Runs the comparison, writes its files into `args.out` and returns the table (table.txt).
pub fn run(args: &DemoOptions, progress: &dyn Progress) -> anyhow::Result<String> {
    anyhow::ensure!(args.seconds > 0.0 && args.seconds <= 600.0, "--seconds: must be in (0, 600], got {}", args.seconds);
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let trace = generate(args.seed, args.seconds);

    let mut flows = Vec::new();
    let mut aggregates = Vec::new();
    let mut summaries = Vec::new();
    let mut skipped = Vec::new();
    for e in enforcers() {
        let cfg = match EnforcerConfig::from_toml(&e.toml) {
            Ok(cfg) => cfg,
            Err(err) => {
                progress.note(&format!("demo: skipping {}: {err}", e.name));
                skipped.push(e.name);
                continue;
            }
        };
        let (summary, window_bytes) =
            replay(cfg, &trace, args.seconds).with_context(|| format!("replaying through {}", e.name))?;
        let policy = PolicyNode::resolve(e.policy, QUEUES, None).expect("demo policies are valid");
        let measured_s = window_bytes[0].len() as f64 * WINDOW_NS as f64 * 1e-9;
        let bps = |bytes: u64| bytes as f64 * 8.0 / measured_s;
        for (a, (agg_name, _)) in AGGREGATES.iter().enumerate() {
            let s = &summary.aggregates[a];
            let flow_windows = &window_bytes[a * QUEUES..(a + 1) * QUEUES];
            let offered: Vec<f64> = s.flows.iter().map(|f| f.counts.offered_bytes as f64 * 8.0 / args.seconds).collect();
            let mut target = vec![0.0; QUEUES];
            allocate(&policy, RATE_BPS, &offered, &mut target);
            let mut normalised = Vec::new();
            let mut policy_error = 0.0;
            for (class, f) in s.flows.iter().enumerate() {
                let passed = bps(flow_windows[class].iter().sum());
                if target[class] >= MIN_TARGET_FRACTION * RATE_BPS {
                    normalised.push(passed / target[class]);
                }
                policy_error += (passed - target[class]).abs() / RATE_BPS;
                flows.push(FlowRow {
                    enforcer: e.name,
                    policy: e.policy,
                    aggregate: agg_name,
                    flow: f.flow.clone(),
                    class,
                    offered_bps: offered[class],
                    target_bps: target[class],
                    passed_bps: passed,
                    drop_rate: f.drop_rate,
                });
            }
            aggregates.push(AggregateRow {
                enforcer: e.name,
                policy: e.policy,
                aggregate: agg_name,
                offered_bps: offered.iter().sum(),
                passed_bps: bps(flow_windows.iter().flatten().sum()),
                drop_rate: s.drop_rate,
                jain_index: jain(&normalised),
                policy_error,
                peak_window: (0..flow_windows[0].len())
                    .map(|w| flow_windows.iter().map(|f| f[w]).sum::<u64>() as f64 * 8e9 / WINDOW_NS as f64 / RATE_BPS)
                    .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
            });
        }
        summaries.push(summary);
    }
    anyhow::ensure!(!summaries.is_empty(), "no enforcer could be built: {}", skipped.join(", "));

    let text = render(&flows, &aggregates);
    let mut trace_csv = String::from("time_ns,aggregate,flow,bytes,class\n");
    for p in &trace {
        let _ = writeln!(
            trace_csv,
            "{},{},{},{PACKET_BYTES},{}",
            p.time_ns,
            AGGREGATES[p.aggregate as usize].0,
            flow_name(p.class as usize),
            p.class
        );
    }
    write_atomic(&args.out.join("trace.csv"), trace_csv.as_bytes())?;
    write_atomic(&args.out.join("flows.csv"), &csv_of(&flows)?)?;
    write_atomic(&args.out.join("aggregates.csv"), &csv_of(&aggregates)?)?;
    write_atomic(&args.out.join("table.txt"), text.as_bytes())?;
    let report = DemoReport { seed: args.seed, seconds: args.seconds, rate_bps: RATE_BPS, packets: trace.len(), flows, aggregates, summaries };
    write_atomic(&args.out.join("demo.json"), &serde_json::to_vec_pretty(&report)?)?;
    Ok(text)
}

/// Per flow: offered, then target and passed for each enforcer, grouped by the policy they
/// enforce; then per aggregate: passed rate, drop rate and Jain's index against the target.
fn render(flows: &[FlowRow], aggregates: &[AggregateRow]) -> String {
    let mut s = String::new();
    let mut policies: Vec<&str> = Vec::new();
    for f in flows {
        if !policies.contains(&f.policy) {
            policies.push(f.policy);
        }
    }
    let _ = writeln!(s, "Each aggregate is enforced at {}; passed rates per flow (Mbit/s) against the policy's target.", fmt_bps(Some(RATE_BPS)));
    for policy in policies {
        let names: Vec<&str> = {
            let mut v: Vec<&str> = Vec::new();
            for f in flows.iter().filter(|f| f.policy == policy) {
                if !v.contains(&f.enforcer) {
                    v.push(f.enforcer);
                }
            }
            v
        };
        let _ = writeln!(s, "\npolicy {policy}");
        let _ = write!(s, "{:<8} {:<5} {:>8} {:>8}", "aggr", "flow", "offered", "target");
        for n in &names {
            let _ = write!(s, " {n:>15}");
        }
        let _ = writeln!(s);
        let first = flows.iter().filter(|f| f.policy == policy && f.enforcer == names[0]);
        for f in first {
            let _ = write!(s, "{:<8} {:<5} {:>8.2} {:>8.2}", f.aggregate, f.flow, f.offered_bps / 1e6, f.target_bps / 1e6);
            for n in &names {
                let g = flows
                    .iter()
                    .find(|g| g.enforcer == *n && g.aggregate == f.aggregate && g.class == f.class)
                    .expect("every enforcer saw every flow");
                let _ = write!(s, " {:>15.2}", g.passed_bps / 1e6);
            }
            let _ = writeln!(s);
        }
    }
    let _ = writeln!(
        s,
        "\nper aggregate: passed rate, drop rate, peak 250 ms window ÷ rate (burst), Jain's index of passed÷target \
         (1 = exactly the policy) and policy error Σ|passed − target| ÷ rate (0 = exactly the policy)"
    );
    let _ = writeln!(
        s,
        "{:<8} {:<16} {:>8} {:>7} {:>6} {:>6} {:>7}",
        "aggr", "enforcer", "passed", "drop%", "peak", "jain", "error"
    );
    for (name, _) in AGGREGATES {
        for a in aggregates.iter().filter(|a| a.aggregate == name) {
            let _ = writeln!(
                s,
                "{:<8} {:<16} {:>8.2} {:>7.1} {:>6} {:>6} {:>7.3}",
                a.aggregate,
                a.enforcer,
                a.passed_bps / 1e6,
                100.0 * a.drop_rate,
                a.peak_window.map(|p| format!("{p:.2}")).unwrap_or_else(|| "-".into()),
                a.jain_index.map(|j| format!("{j:.3}")).unwrap_or_else(|| "-".into()),
                a.policy_error
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(spec: &str, demand: [f64; 4]) -> Vec<f64> {
        let node = PolicyNode::resolve(spec, 4, None).unwrap();
        let mut out = vec![0.0; 4];
        allocate(&node, 10.0, &demand, &mut out);
        out.iter().map(|v| (v * 1000.0).round() / 1000.0).collect()
    }

    #[test]
    fn targets_follow_each_policy() {
        assert_eq!(alloc(FAIR, [1.0, 3.0, 6.0, 12.0]), vec![1.0, 3.0, 3.0, 3.0]);
        assert_eq!(alloc(FAIR, [1.0, 2.0, 6.0, 12.0]), vec![1.0, 2.0, 3.5, 3.5]);
        assert_eq!(alloc(WEIGHTED, [5.0; 4]), vec![1.0, 2.0, 3.0, 4.0]);
        // Queue 0 wants less than its 1/10: the rest is shared 2:3:4.
        assert_eq!(alloc(WEIGHTED, [0.1, 5.0, 5.0, 5.0]), vec![0.1, 2.2, 3.3, 4.4]);
        assert_eq!(alloc(PRIORITY, [5.0; 4]), vec![5.0, 5.0, 0.0, 0.0]);
        assert_eq!(alloc(NESTED, [4.0, 5.0, 5.0, 5.0]), vec![4.0, 1.0, 2.0, 3.0]);
        assert_eq!(alloc(FAIR, [2.0, 2.0, 2.0, 3.0]), vec![2.0, 2.0, 2.0, 3.0]);
    }

    #[test]
    fn trace_is_seeded_and_near_its_rates() {
        let a = generate(7, 2.0);
        let b = generate(7, 2.0);
        assert_eq!(a.len(), b.len());
        assert!(a.iter().zip(&b).all(|(x, y)| x.time_ns == y.time_ns && x.class == y.class));
        assert!(a.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        let bits = |agg: u32, class: u16| {
            a.iter().filter(|p| p.aggregate == agg && p.class == class).count() as f64 * PACKET_BYTES as f64 * 8.0 / 2.0
        };
        assert!((bits(0, 3) / 12e6 - 1.0).abs() < 0.05, "{}", bits(0, 3));
        assert!((bits(2, 0) / 2e6 - 1.0).abs() < 0.1, "{}", bits(2, 0));
    }
}
