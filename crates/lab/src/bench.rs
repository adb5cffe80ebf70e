//! `ratekit bench`: nanoseconds per packet of every policer at 1, 10k and 1M aggregates of 16
//! queues, all measured in one run so that the ratios between them mean something.
//!
//! Method: for each aggregate count one arrival array is generated up front (seeded): each packet
//! goes to an aggregate chosen uniformly at random, to one of 64 flows and 16 classes, with sizes
//! mixing 1500 B and smaller packets, at twice the aggregates' total rate (so about half of the
//! packets are dropped and both paths run). Every enforcer gets fresh state per repetition (built
//! untimed), then the timed loop feeds the whole array through `on_arrival`; the figure is the
//! median over repetitions of elapsed time / packets. Aggregates live in core's container
//! (`aggregates::Aggregates`: one hash probe per packet plus per-aggregate counters), as a
//! deployment runs them, so every figure includes that lookup (≈ the token bucket's whole cost
//! at one aggregate); the paper's cycle counts exclude classification.

use crate::bench_floor::FairPqpFloor;
use crate::csv_io::write_atomic;
use crate::progress::Progress;
use anyhow::Context;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::sizing::{self, EvaluationSizes, DEFAULT_MSS};
use ratekit_core::aggregates::Aggregates;
use ratekit_core::bcpqp::BcPqp;
use ratekit_core::bcpqp_class_flows::ClassFlowBcPqp;
use ratekit_core::bcpqp_flows::FlowBcPqp;
use ratekit_core::pqp::FlowQueuing;
use ratekit_core::fair_policer::FairPolicer;
use ratekit_core::pqp::Pqp;
use ratekit_core::shaper::ShaperConfig;
use ratekit_core::shaper_set::ShaperSet;
use ratekit_core::srtcm::SrTcm;
use ratekit_core::token_bucket::TokenBucket;
use ratekit_core::trtcm::TrTcm;
use ratekit_core::{Classify, Duration, EnforcerConfig, Instant, Packet, Policer, QueueDiscipline, Rate};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct BenchOptions {
    /// A few seconds instead of minutes: fewer packets, 1 and 10k aggregates only. For smoke
    /// tests; the figures are noisier.
    pub quick: bool,
    /// Markdown file the results table is also written to.
    pub out: Option<PathBuf>,
    /// Seed of the arrival arrays.
    pub seed: u64,
    /// Measure only these enforcers (names from the table, `shaper` for the shaper). The token
    /// bucket is always kept as the baseline.
    pub only: Vec<String>,
    /// Aggregate counts to measure instead of the default 1, 10k (and 1M without `quick`).
    pub aggregates: Vec<u32>,
}

const QUEUES: u32 = 16;
const FLOWS_PER_AGGREGATE: u64 = 64;
/// Offered load as a multiple of the aggregates' total rate.
const OVERLOAD: f64 = 2.0;
/// Per-aggregate state beyond this is not built: the cell is reported as skipped.
const MEMORY_BUDGET_BYTES: u64 = 8 << 30;

/// The reference row (bench_floor.rs): the cheapest fair phantom-queue policer, on pqp_fair's config.
const FLOOR: &str = "fair_pqp_floor";

struct Contender {
    name: &'static str,
    toml: String,
    /// Flows per aggregate in its arrivals (the exact-flow rows vary it).
    flows: u64,
    /// How its arrivals pick a packet's class.
    classes: Classes,
}

/// A packet's class in the arrivals.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Classes {
    /// Drawn per packet from `QUEUES`, so every flow spreads over every class.
    PerPacket,
    /// The flow's number modulo this: a flow stays in one class, as a DSCP-marked flow does,
    /// which classes of exact flows need for per-flow fairness inside a class to mean anything.
    PerFlow(u16),
}

/// Every policer, configured as in the BC-PQP evaluation (000 §6.1) for a 10 Mbit/s aggregate
/// and a 100 ms maximum RTT.
fn contenders() -> Vec<Contender> {
    let rate = Rate::from_bits_per_sec(10_000_000);
    let rtt = Duration::from_millis(100);
    let sizes = EvaluationSizes::paper(rate, rtt, DEFAULT_MSS);
    let pqp = sizing::phantom_queue_bytes(rate, rtt, DEFAULT_MSS);
    let phantom = |kind: &str, classify: &str, policy: &str, size: u64| {
        format!(
            "kind = \"{kind}\"\nrate = \"{rate}\"\nqueues = {QUEUES}\nqueue_size = {size}\nclassify = \"{classify}\"\npolicy = \"{policy}\"\n"
        )
    };
    let weighted = format!(
        "weighted({})",
        (0..QUEUES).map(|q| format!("{q}:{}", q + 1)).collect::<Vec<_>>().join(", ")
    );
    let nested = format!(
        "priority(0, weighted({}))",
        (1..QUEUES).map(|q| format!("{q}:{q}")).collect::<Vec<_>>().join(", ")
    );
    [
        Contender { flows: FLOWS_PER_AGGREGATE, classes: Classes::PerPacket, name: "token_bucket", toml: format!("kind = \"token_bucket\"\nrate = \"{rate}\"\nburst = {}\n", sizes.policer) },
        Contender {
            flows: FLOWS_PER_AGGREGATE,
            classes: Classes::PerPacket,
            name: "srtcm",
            toml: format!("kind = \"srtcm\"\ncir = \"{rate}\"\ncbs = {}\nebs = {}\n", sizes.policer, sizes.policer),
        },
        Contender { flows: FLOWS_PER_AGGREGATE, classes: Classes::PerPacket, name: "pqp_fair", toml: phantom("pqp", "flow", "fair", pqp) },
        Contender { flows: FLOWS_PER_AGGREGATE, classes: Classes::PerPacket, name: FLOOR, toml: phantom("pqp", "flow", "fair", pqp) },
        Contender { flows: FLOWS_PER_AGGREGATE, classes: Classes::PerPacket, name: "bcpqp_fair", toml: phantom("bcpqp", "flow", "fair", sizes.bcpqp) },
        Contender { flows: FLOWS_PER_AGGREGATE, classes: Classes::PerPacket, name: "bcpqp_weighted", toml: phantom("bcpqp", "class", &weighted, sizes.bcpqp) },
        Contender { flows: FLOWS_PER_AGGREGATE, classes: Classes::PerPacket, name: "bcpqp_nested", toml: phantom("bcpqp", "class", &nested, sizes.bcpqp) },
        Contender {
            flows: FLOWS_PER_AGGREGATE,
            classes: Classes::PerPacket,
            name: "fair_policer",
            toml: format!("kind = \"fair_policer\"\nrate = \"{rate}\"\nbucket = {}\n", sizes.fair_policer),
        },
    ]
    .into_iter()
    .chain(EXACT_FLOWS.iter().map(|&(name, flows)| Contender {
        name,
        toml: format!("kind = \"bcpqp\"\nrate = \"{rate}\"\nqueue_size = {}\nflows = \"exact\"\n", sizes.bcpqp),
        flows,
        classes: Classes::PerPacket,
    }))
    .chain(CLASS_EXACT_FLOWS.iter().map(|&(name, flows)| Contender {
        name,
        toml: format!(
            "kind = \"bcpqp\"\nrate = \"{rate}\"\nqueue_size = {}\nflows = \"exact\"\nclassify = \"class\"\nqueues = 2\npolicy = \"weighted\"\nweights = [3, 1]\n",
            sizes.bcpqp
        ),
        flows,
        classes: Classes::PerFlow(2),
    }))
    .collect()
}

/// BC-PQP with exact per-flow queues at these numbers of flows per aggregate (issue 17).
const EXACT_FLOWS: [(&str, u64); 3] = [("bcpqp_exact_16", 16), ("bcpqp_exact_256", 256), ("bcpqp_exact_1024", 1024)];

/// BC-PQP over two classes of exact flows weighted 3:1, half of the flows in each (issue 17
/// item 1), at these numbers of flows per aggregate in all.
const CLASS_EXACT_FLOWS: [(&str, u64); 2] = [("bcpqp_class_exact_16", 16), ("bcpqp_class_exact_1024", 1024)];

/// The shaper baseline of 000 §6.1: 16 queues of one BDP each, DRR (fair), flow hashing.
fn shaper_config() -> anyhow::Result<ShaperConfig> {
    let rate = Rate::from_bits_per_sec(10_000_000);
    let sizes = EvaluationSizes::paper(rate, Duration::from_millis(100), DEFAULT_MSS);
    let toml = format!("kind = \"shaper\"\nrate = \"{rate}\"\nqueues = {QUEUES}\nqueue_size = {}\npolicy = \"fair\"\n", sizes.shaper_queue);
    match EnforcerConfig::from_toml(&toml)? {
        EnforcerConfig::Shaper(c) => Ok(c),
        _ => unreachable!("kind is shaper"),
    }
}

/// Arrival times and packets for `aggregates` aggregates of `rate` each, `flows` flows each.
fn arrivals(seed: u64, aggregates: u32, flows: u64, classes: Classes, packets: usize, rate: Rate) -> Vec<(Instant, Packet)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ aggregates as u64);
    let sizes: Vec<u32> = (0..packets).map(|_| if rng.gen_bool(0.7) { 1500 } else { rng.gen_range(40..1500) }).collect();
    let mean = sizes.iter().map(|&s| s as f64).sum::<f64>() / packets.max(1) as f64;
    let gap_ns = mean / (rate.as_f64() * OVERLOAD * aggregates as f64) * 1e9;
    sizes
        .into_iter()
        .enumerate()
        .map(|(i, len)| {
            let aggregate = rng.gen_range(0..aggregates) as u64;
            let flow = aggregate * flows + rng.gen_range(0..flows);
            // Drawn in either case, so that rows differing only in `classes` see the same
            // packets, flows and times.
            let drawn = rng.gen_range(0..QUEUES) as u16;
            let class = match classes {
                Classes::PerPacket => drawn,
                Classes::PerFlow(k) => (flow % u64::from(k)) as u16,
            };
            let pkt = Packet { id: i as u64, len, flow, class, aggregate };
            (Instant((i as f64 * gap_ns) as u64), pkt)
        })
        .collect()
}

/// Counts live heap bytes, so the bench can report the state each aggregate costs. The binary
/// that runs the bench installs it (`#[global_allocator]`); a library must not impose one on
/// every program that links it. Without it the memory column reads 0.
pub struct CountingAlloc;

static LIVE_BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        LIVE_BYTES.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

/// Measures one policer type: `n` fresh aggregates (built untimed) in core's multi-aggregate
/// container (`Aggregates`, pre-sized, so the timed loop never allocates), then timed passes of
/// `arr`. Concrete types, not `AnyPolicer`, so each algorithm's state has its own size.
struct Bench<'a> {
    n: u32,
    arr: &'a [(Instant, Packet)],
    /// Untimed passes over `arr` before the timed one, each later in time by the array's span,
    /// so the timed pass sees state in use (buckets drained, queues occupied) rather than the
    /// start-up transient.
    warmup_laps: u64,
}

/// One pass of `arr` through `ps`, `offset` ns later; returns how many passed. Never inlined, so
/// that `valgrind --tool=callgrind` reports its inclusive instruction count (the data path and
/// the container's lookup, nothing else): run one enforcer at a time with `--only`, and
/// subtract the token-bucket-only run, which every run includes.
#[inline(never)]
fn feed(ps: &mut impl Policer, arr: &[(Instant, Packet)], offset: u64) -> u64 {
    let mut passed = 0u64;
    for (t, pkt) in arr {
        passed += ps.on_arrival(Instant(t.0 + offset), black_box(pkt)).is_pass() as u64;
    }
    passed
}

/// Time between the start of one lap over `arr` and the next: the array's span plus one gap.
fn lap_ns(arr: &[(Instant, Packet)]) -> u64 {
    match arr {
        [first, .., last] => {
            let span = last.0 .0 - first.0 .0;
            span + span / (arr.len() as u64 - 1)
        }
        _ => 1,
    }
}

impl Bench<'_> {
    /// (ns per packet, passed fraction).
    fn time<P: Policer>(&self, make: impl Fn() -> P) -> (f64, f64) {
        let mut ps = Aggregates::with_capacity(self.n as usize, |_| make());
        for a in 0..self.n as u64 {
            ps.entry(a);
        }
        let lap = lap_ns(self.arr);
        for l in 0..self.warmup_laps {
            black_box(feed(&mut ps, self.arr, l * lap));
        }
        let start = std::time::Instant::now();
        let passed = feed(&mut ps, self.arr, self.warmup_laps * lap);
        let ns = start.elapsed().as_nanos() as f64 / self.arr.len() as f64;
        black_box(&ps);
        (ns, passed as f64 / self.arr.len() as f64)
    }

    /// Heap bytes per aggregate (its slot in the container included), from building `n`.
    fn bytes_each<P: Policer>(&self, make: impl Fn() -> P) -> u64 {
        let before = LIVE_BYTES.load(Ordering::Relaxed);
        let mut ps = Aggregates::with_capacity(self.n as usize, |_| make());
        for a in 0..self.n as u64 {
            ps.entry(a);
        }
        let after = LIVE_BYTES.load(Ordering::Relaxed);
        drop(black_box(ps));
        after.saturating_sub(before) / self.n.max(1) as u64
    }
}

/// Calls `$f` on a `Bench` with a maker of `$cfg`'s concrete policer type: clones of one fresh
/// prototype, as `aggregates::ConfigFactory` makes them (parameters built once and shared); the
/// contender named `FLOOR` gets the floor reference instead of core's PQP.
macro_rules! with_policer {
    ($name:expr, $cfg:expr, $bench:expr, $f:ident) => {
        match $cfg {
            EnforcerConfig::Pqp(c) if $name == FLOOR => Ok({ let p = FairPqpFloor::new(c)?; $bench.$f(|| p.clone()) }),
            EnforcerConfig::TokenBucket(c) => Ok({ let p = TokenBucket::new(c); $bench.$f(|| p.clone()) }),
            EnforcerConfig::Srtcm(c) => Ok({ let p = SrTcm::new(c); $bench.$f(|| p.clone()) }),
            EnforcerConfig::Trtcm(c) => Ok({ let p = TrTcm::new(c); $bench.$f(|| p.clone()) }),
            EnforcerConfig::Pqp(c) => Ok({ let p = Pqp::new(c); $bench.$f(|| p.clone()) }),
            EnforcerConfig::Bcpqp(c) if c.flows == FlowQueuing::Exact && c.classify == Classify::Class => Ok({ let p = ClassFlowBcPqp::new(c); $bench.$f(|| p.clone()) }),
            EnforcerConfig::Bcpqp(c) if c.flows == FlowQueuing::Exact => Ok({ let p = FlowBcPqp::new(c); $bench.$f(|| p.clone()) }),
            EnforcerConfig::Bcpqp(c) => Ok({ let p = BcPqp::new(c); $bench.$f(|| p.clone()) }),
            EnforcerConfig::FairPolicer(c) => Ok({ let p = FairPolicer::new(c); $bench.$f(|| p.clone()) }),
            other => Err(anyhow::anyhow!("'{}' is not a policer", other.kind())),
        }
    };
}

/// Arrivals per shaper wake-up: a batching data plane (32, enqueue and dequeue timed apart,
/// the clock read twice per batch), and a shaper that wakes on every arrival as a per-packet
/// timer would (1; enqueue + dequeue timed together over the whole pass, as the policers are).
const SHAPER_BATCHES: [usize; 2] = [32, 1];

/// The 16-queue DRR shaper of every aggregate on one timing wheel (`ShaperSet`), driven as a
/// data plane would: each batch of arrivals is enqueued, then everything due by the batch's last
/// arrival is dequeued.
fn time_shaper(cfg: &ShaperConfig, arr: &[(Instant, Packet)], warmup_laps: u64, batch: usize) -> anyhow::Result<ShaperCell> {
    const BATCH: usize = 32;
    if batch == 1 {
        return time_shaper_per_arrival(cfg, arr, warmup_laps);
    }
    let mut set = ShaperSet::new(cfg)?;
    let mut drops = Vec::with_capacity(BATCH);
    let lap = lap_ns(arr);
    for l in 0..warmup_laps {
        for batch in arr.chunks(BATCH) {
            for (t, pkt) in batch {
                set.enqueue(Instant(t.0 + l * lap), *pkt, &mut drops);
            }
            let now = Instant(batch[batch.len() - 1].0 .0 + l * lap);
            while set.dequeue(now, &mut drops).is_some() {}
            drops.clear();
        }
    }
    let offset = warmup_laps * lap;
    let (mut enq, mut deq) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    let (mut sent, mut dropped) = (0u64, 0u64);
    for batch in arr.chunks(BATCH) {
        let t0 = std::time::Instant::now();
        for (t, pkt) in batch {
            set.enqueue(Instant(t.0 + offset), *black_box(pkt), &mut drops);
        }
        let t1 = std::time::Instant::now();
        let now = Instant(batch[batch.len() - 1].0 .0 + offset);
        while let Some(p) = set.dequeue(now, &mut drops) {
            black_box(p);
            sent += 1;
        }
        let t2 = std::time::Instant::now();
        enq += t1 - t0;
        deq += t2 - t1;
        dropped += drops.len() as u64;
        drops.clear();
    }
    black_box(&set);
    Ok(ShaperCell {
        enqueue_ns: enq.as_nanos() as f64 / arr.len() as f64,
        dequeue_ns: deq.as_nanos() as f64 / sent.max(1) as f64,
        per_arrival_ns: (enq + deq).as_nanos() as f64 / arr.len() as f64,
        sent: sent as f64 / arr.len() as f64,
        dropped: dropped as f64 / arr.len() as f64,
    })
}

/// The shaper woken after every arrival: dequeue everything due at that arrival's time.
fn time_shaper_per_arrival(cfg: &ShaperConfig, arr: &[(Instant, Packet)], warmup_laps: u64) -> anyhow::Result<ShaperCell> {
    let mut set = ShaperSet::new(cfg)?;
    let mut drops = Vec::with_capacity(4);
    let lap = lap_ns(arr);
    let pass = |set: &mut ShaperSet, offset: u64, drops: &mut Vec<_>| {
        let (mut sent, mut dropped) = (0u64, 0u64);
        for (t, pkt) in arr {
            let now = Instant(t.0 + offset);
            set.enqueue(now, *black_box(pkt), drops);
            while let Some(p) = set.dequeue(now, drops) {
                black_box(p);
                sent += 1;
            }
            dropped += drops.len() as u64;
            drops.clear();
        }
        (sent, dropped)
    };
    for l in 0..warmup_laps {
        pass(&mut set, l * lap, &mut drops);
    }
    let start = std::time::Instant::now();
    let (sent, dropped) = pass(&mut set, warmup_laps * lap, &mut drops);
    let ns = start.elapsed().as_nanos() as f64 / arr.len() as f64;
    black_box(&set);
    Ok(ShaperCell {
        enqueue_ns: f64::NAN,
        dequeue_ns: f64::NAN,
        per_arrival_ns: ns,
        sent: sent as f64 / arr.len() as f64,
        dropped: dropped as f64 / arr.len() as f64,
    })
}

#[derive(Clone, Copy)]
struct ShaperCell {
    /// Per enqueue call (every arrival, including those dropped on a full queue).
    enqueue_ns: f64,
    /// Dequeue time per packet sent (unproductive calls included).
    dequeue_ns: f64,
    /// Enqueue + dequeue time over arrivals: comparable with a policer's ns per packet.
    per_arrival_ns: f64,
    sent: f64,
    dropped: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One measured cell: ns per packet and passed fraction, or why it was skipped.
enum Cell {
    Measured { ns: f64, passed: f64 },
    Skipped(String),
}

struct Plan {
    aggregates: Vec<u32>,
    shaper_aggregates: Vec<u32>,
    packets: usize,
    reps: usize,
    warmup_laps: u64,
}

/// Measures every contender and returns the Markdown table (also written to `args.out`).
pub fn run(args: &BenchOptions, progress: &dyn Progress) -> anyhow::Result<String> {
    let mut plan = if args.quick {
        Plan { aggregates: vec![1, 10_000], shaper_aggregates: vec![1, 10_000], packets: 200_000, reps: 3, warmup_laps: 1 }
    } else {
        Plan { aggregates: vec![1, 10_000, 1_000_000], shaper_aggregates: vec![1, 10_000], packets: 2_000_000, reps: 3, warmup_laps: 2 }
    };
    if !args.aggregates.is_empty() {
        if args.aggregates.contains(&0) {
            anyhow::bail!("--aggregates: counts must be at least 1");
        }
        plan.aggregates = args.aggregates.clone();
    }
    let wanted = |name: &str| args.only.is_empty() || name == "token_bucket" || args.only.iter().any(|o| o == name);
    let contenders: Vec<Contender> = contenders().into_iter().filter(|c| wanted(c.name)).collect();
    let with_shaper = wanted("shaper");
    let configs: Vec<EnforcerConfig> = contenders
        .iter()
        .map(|c| EnforcerConfig::from_toml(&c.toml).with_context(|| format!("bench config for {}", c.name)))
        .collect::<anyhow::Result<_>>()?;

    // Memory per aggregate, from building 10k of each.
    let sizing_bench = Bench { n: 10_000, arr: &[], warmup_laps: 0 };
    let per_aggregate: Vec<u64> =
        configs.iter().zip(&contenders).map(|(cfg, c)| with_policer!(c.name, cfg, sizing_bench, bytes_each)).collect::<anyhow::Result<_>>()?;

    let shaper_cfg = shaper_config()?;
    let total_steps = (plan.aggregates.len() * plan.reps * (configs.len() + 1)) as u64;
    progress.start(total_steps, "bench");
    let rate = Rate::from_bits_per_sec(10_000_000);
    let mut cells: Vec<Vec<Cell>> = Vec::new();
    let mut shaper_cells: Vec<(u32, usize, ShaperCell)> = Vec::new();
    for &n in &plan.aggregates {
        // One arrival array per flow count and class assignment, shared by the contenders that use it.
        let mut kinds: Vec<(u64, Classes)> = Vec::new();
        for c in &contenders {
            if !kinds.contains(&(c.flows, c.classes)) {
                kinds.push((c.flows, c.classes));
            }
        }
        let arrs: Vec<_> = kinds.iter().map(|&(f, k)| arrivals(args.seed, n, f, k, plan.packets, rate)).collect();
        let arr_of = |want: (u64, Classes)| &arrs[kinds.iter().position(|&kind| kind == want).expect("an array per kind")];
        let arr = arr_of((FLOWS_PER_AGGREGATE, Classes::PerPacket));
        let mut samples: Vec<Vec<(f64, f64)>> = vec![Vec::new(); configs.len()];
        let mut skipped: Vec<Option<String>> = vec![None; configs.len()];
        let mut shaper_samples: Vec<Vec<ShaperCell>> = vec![Vec::new(); SHAPER_BATCHES.len()];
        for (i, per) in per_aggregate.iter().enumerate() {
            let need = per * n as u64;
            if need > MEMORY_BUDGET_BYTES {
                skipped[i] = Some(format!("needs ~{:.1} GB", need as f64 / 1e9));
            }
        }
        // Repetitions outermost, so machine noise spreads over every enforcer alike.
        for _ in 0..plan.reps {
            for (i, cfg) in configs.iter().enumerate() {
                progress.message(&format!("{} × {n}", contenders[i].name));
                if skipped[i].is_none() {
                    let bench = Bench { n, arr: arr_of((contenders[i].flows, contenders[i].classes)), warmup_laps: plan.warmup_laps };
                    samples[i].push(with_policer!(contenders[i].name, cfg, bench, time)?);
                }
                progress.advance(1);
            }
            if with_shaper && plan.shaper_aggregates.contains(&n) {
                for (b, &batch) in SHAPER_BATCHES.iter().enumerate() {
                    shaper_samples[b].push(time_shaper(&shaper_cfg, arr, plan.warmup_laps, batch)?);
                }
            }
            progress.advance(1);
        }
        for (samples, &batch) in shaper_samples.iter().zip(&SHAPER_BATCHES) {
            if samples.is_empty() {
                continue;
            }
            let m = |f: fn(&ShaperCell) -> f64| median(samples.iter().map(f).collect());
            shaper_cells.push((
                n,
                batch,
                ShaperCell {
                    enqueue_ns: m(|c| c.enqueue_ns),
                    dequeue_ns: m(|c| c.dequeue_ns),
                    per_arrival_ns: m(|c| c.per_arrival_ns),
                    sent: samples[0].sent,
                    dropped: samples[0].dropped,
                },
            ));
        }
        cells.push(
            samples
                .into_iter()
                .zip(skipped)
                .map(|(s, skip)| match skip {
                    Some(why) => Cell::Skipped(why),
                    None => Cell::Measured {
                        ns: median(s.iter().map(|x| x.0).collect()),
                        passed: s[0].1,
                    },
                })
                .collect(),
        );
    }
    progress.finish();

    let mut table = render(&args, &plan, &contenders, &per_aggregate, &cells);
    render_shaper(&mut table, &plan, &contenders, &cells, &shaper_cells);
    if let Some(out) = &args.out {
        write_atomic(out, table.as_bytes())?;
    }
    Ok(table)
}

/// The enforcers [`relative_cost`] measures: every contender of the table and `shaper` (the
/// 16-queue DRR shaper on its timing wheel, woken every 32 arrivals as a batching data plane is).
pub fn cost_enforcers() -> Vec<&'static str> {
    contenders().iter().map(|c| c.name).chain(["shaper"]).collect()
}

/// One enforcer's cost per packet against the token bucket's on the same arrivals, for a claim
/// judged by `ratekit reproduce` (000 Table 1 and Fig. 7 count CPU cycles per packet, a policer's
/// among them). The two are timed back to back in every repetition, so a machine that slows down
/// slows both; the figure is the median of the per-repetition ratios.
pub struct RelativeCost {
    pub ratio: f64,
    pub ns: f64,
    pub token_bucket_ns: f64,
}

pub fn relative_cost(enforcer: &str, aggregates: u32, packets: usize, reps: usize, seed: u64) -> anyhow::Result<RelativeCost> {
    let all = contenders();
    let find = |name: &str| all.iter().find(|c| c.name == name);
    let token_bucket = find("token_bucket").expect("the baseline is a contender");
    let contender = match enforcer {
        "shaper" => None,
        name => Some(find(name).ok_or_else(|| anyhow::anyhow!("enforcer: '{name}' is not one of {}", cost_enforcers().join(", ")))?),
    };
    let rate = Rate::from_bits_per_sec(10_000_000);
    let time_one = |c: &Contender| -> anyhow::Result<f64> {
        let cfg = EnforcerConfig::from_toml(&c.toml).with_context(|| format!("bench config for {}", c.name))?;
        let arr = arrivals(seed, aggregates, c.flows, c.classes, packets, rate);
        let bench = Bench { n: aggregates, arr: &arr, warmup_laps: 1 };
        Ok(with_policer!(c.name, &cfg, bench, time)?.0)
    };
    let shaper_cfg = shaper_config()?;
    let shaper_arr = arrivals(seed, aggregates, FLOWS_PER_AGGREGATE, Classes::PerPacket, packets, rate);
    let (mut ratios, mut ns, mut tb) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps.max(1) {
        let base = time_one(token_bucket)?;
        let x = match contender {
            Some(c) => time_one(c)?,
            None => time_shaper(&shaper_cfg, &shaper_arr, 1, SHAPER_BATCHES[0])?.per_arrival_ns,
        };
        ratios.push(x / base);
        ns.push(x);
        tb.push(base);
    }
    Ok(RelativeCost { ratio: median(ratios), ns: median(ns), token_bucket_ns: median(tb) })
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    format!("{cpu}, {cores} cores available")
}

fn fmt_count(n: u32) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

fn render(args: &BenchOptions, plan: &Plan, contenders: &[Contender], per_aggregate: &[u64], cells: &[Vec<Cell>]) -> String {
    let mut s = String::new();
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let _ = writeln!(
        s,
        "Command: `ratekit bench{}{}{}{}` (seed {}; {} packets per cell timed after {} untimed warm-up pass(es) over them; median of {} repetitions)  ",
        if args.quick { " --quick" } else { "" },
        args.out.as_ref().map(|o| format!(" --out {}", o.display())).unwrap_or_default(),
        if args.only.is_empty() { String::new() } else { format!(" --only {}", args.only.join(",")) },
        if args.aggregates.is_empty() {
            String::new()
        } else {
            format!(" --aggregates {}", args.aggregates.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(","))
        },
        args.seed,
        plan.packets,
        plan.warmup_laps,
        plan.reps
    );
    let _ = writeln!(s, "Machine: {}; date: {} (Unix time {secs})  ", machine(), civil_date(secs));
    let _ = writeln!(s, "Policers: 10 Mbit/s per aggregate, 16 queues, offered at {OVERLOAD}× the rate; ns per packet (× the token bucket's).\n");
    let _ = write!(s, "| enforcer | state / aggregate |");
    for &n in &plan.aggregates {
        let _ = write!(s, " {} aggregate{} | passed |", fmt_count(n), if n == 1 { "" } else { "s" });
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "|---|---:|{}", "---:|---:|".repeat(plan.aggregates.len()));
    for (i, c) in contenders.iter().enumerate() {
        let _ = write!(s, "| {} | {} B |", c.name, per_aggregate[i]);
        for row in cells {
            let base = match &row[0] {
                Cell::Measured { ns, .. } => Some(*ns),
                Cell::Skipped(_) => None,
            };
            match &row[i] {
                Cell::Measured { ns, passed } => {
                    let ratio = base.map(|b| format!(" ({:.2}×)", ns / b)).unwrap_or_default();
                    let _ = write!(s, " {ns:.1}{ratio} | {:.0}% |", 100.0 * passed);
                }
                Cell::Skipped(why) => {
                    let _ = write!(s, " skipped: {why} | - |");
                }
            }
        }
        let _ = writeln!(s);
    }
    s
}

/// The shaper's table, with its cost against BC-PQP (fair) at the same aggregate count.
fn render_shaper(s: &mut String, plan: &Plan, contenders: &[Contender], cells: &[Vec<Cell>], shaper: &[(u32, usize, ShaperCell)]) {
    if shaper.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nShaper: 16-queue DRR per aggregate, all aggregates on one hashed timing wheel (ShaperSet), same arrivals; \
         woken after every 32 arrivals (enqueue ns per arrival and dequeue ns per packet sent, timed apart) or after \
         every arrival (timed together); total (enqueue + dequeue) ns per arrival.\n"
    );
    let _ = writeln!(s, "| aggregates | wakes every | enqueue | dequeue | total per arrival | × bcpqp_fair | × {FLOOR} | sent | dropped |");
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let ns = |x: f64| if x.is_nan() { "-".to_string() } else { format!("{x:.1}") };
    for (n, batch, c) in shaper {
        let col = plan.aggregates.iter().position(|a| a == n);
        let ratio_to = |name: &str| match (col, contenders.iter().position(|c| c.name == name)) {
            (Some(col), Some(i)) => match &cells[col][i] {
                Cell::Measured { ns, .. } => format!("{:.2}×", c.per_arrival_ns / ns),
                Cell::Skipped(_) => "-".into(),
            },
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {batch} | {} | {} | {:.1} | {} | {} | {:.0}% | {:.0}% |",
            fmt_count(*n),
            ns(c.enqueue_ns),
            ns(c.dequeue_ns),
            c.per_arrival_ns,
            ratio_to("bcpqp_fair"),
            ratio_to(FLOOR),
            100.0 * c.sent,
            100.0 * c.dropped
        );
    }
}

/// YYYY-MM-DD for Unix seconds (UTC), without a date-time dependency (Howard Hinnant's
/// days-from-civil inverse).
fn civil_date(secs: u64) -> String {
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(951_782_400), "2000-02-29");
        assert_eq!(civil_date(1_795_000_000), "2026-11-18");
    }

    #[test]
    fn arrivals_overload_every_aggregate_evenly() {
        let rate = Rate::from_bits_per_sec(10_000_000);
        let arr = arrivals(1, 4, FLOWS_PER_AGGREGATE, Classes::PerPacket, 40_000, rate);
        assert!(arr.windows(2).all(|w| w[0].0 <= w[1].0));
        let span = arr.last().unwrap().0 .0 as f64 * 1e-9;
        for a in 0..4 {
            let bytes: u64 = arr.iter().filter(|(_, p)| p.aggregate == a).map(|(_, p)| p.len as u64).sum();
            let load = bytes as f64 / span / rate.as_f64();
            assert!((load - OVERLOAD).abs() < 0.1, "aggregate {a}: {load}");
        }
    }

    #[test]
    fn classes_per_flow_change_only_the_class() {
        let rate = Rate::from_bits_per_sec(10_000_000);
        let per_packet = arrivals(1, 4, 16, Classes::PerPacket, 20_000, rate);
        let per_flow = arrivals(1, 4, 16, Classes::PerFlow(2), 20_000, rate);
        for ((t1, a), (t2, b)) in per_packet.iter().zip(&per_flow) {
            assert_eq!((t1, a.flow, a.len, a.aggregate), (t2, b.flow, b.len, b.aggregate));
            assert_eq!(b.class as u64, b.flow % 2);
        }
        assert!(per_packet.iter().any(|(_, p)| p.class >= 2), "per-packet classes span all queues");
    }
}
