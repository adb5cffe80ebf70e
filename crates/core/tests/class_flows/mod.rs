//! Traffic and checks shared by the tests of exact flows inside classes (PQP and BC-PQP).

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::pqp_class_flows::ClassFlows;
use ratekit_core::{Instant, Packet, Policer};

pub const NANOS: u64 = 1_000_000_000;

/// A `kind` policer over `classes` classes of exact flows under `policy`.
pub fn config(kind: &str, rate: u64, size: u64, classes: usize, policy: &str, extra: &str) -> String {
    format!(
        "kind = \"{kind}\"\nrate = \"{rate}bps\"\nqueue_size = {size}\nqueues = {classes}\nclassify = \"class\"\npolicy = \"{policy}\"\nflows = \"exact\"\n{extra}"
    )
}

/// A flow: its class and the rate it offers (bytes/s).
pub struct Source {
    pub class: u16,
    pub offered: u64,
}

/// Each source a packet train at its offered rate (packets of 200-1500 B, gaps jittered ±50 %),
/// merged in time order, over `seconds`.
pub fn trains(seed: u64, sources: &[Source], seconds: u64) -> Vec<(u64, Packet)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let end = seconds * NANOS;
    let mut out = Vec::new();
    for (flow, s) in sources.iter().enumerate() {
        let mut t = rng.gen_range(0..NANOS / 100);
        while t < end {
            let len = rng.gen_range(200..=1500u32);
            out.push((t, Packet { len, flow: flow as u64, class: s.class, ..Packet::default() }));
            let gap = len as u64 * NANOS / s.offered;
            t += rng.gen_range(gap / 2..=gap * 3 / 2);
        }
    }
    out.sort_by_key(|&(t, p)| (t, p.flow));
    out
}

/// Bytes each flow passed after `warmup` ns, and the run's end.
pub fn passed_per_flow(p: &mut impl Policer, arrivals: &[(u64, Packet)], flows: usize, warmup: u64) -> Vec<u64> {
    let mut passed = vec![0u64; flows];
    for (t, pkt) in arrivals {
        if p.on_arrival(Instant(*t), pkt).is_pass() && *t >= warmup {
            passed[pkt.flow as usize] += pkt.len as u64;
        }
    }
    passed
}

/// Every flow's long-run rate within `tolerance` (relative) of `expected[flow]` bytes/s.
pub fn assert_rates(passed: &[u64], seconds: f64, expected: &[f64], tolerance: f64) {
    for (flow, (&bytes, &want)) in passed.iter().zip(expected).enumerate() {
        let got = bytes as f64 / seconds;
        assert!((got - want).abs() <= tolerance * want, "flow {flow}: {got:.0} B/s, expected {want:.0} (all: {passed:?})");
    }
}


pub const RATE: u64 = 1_250_000; // 10 Mbit/s
const SECONDS: u64 = 30;
const WARMUP: u64 = 5;

/// Weights 3:1, 50 flows in the first class and 5 in the second, every flow backlogged: the
/// classes get 3/4 and 1/4 of the rate, and inside each class every flow the same (within 5 %).
/// `build(rate, queue_size, classes, policy, extra)` makes the policer under test; it is returned.
pub fn weighted_3_to_1_with_50_and_5_flows<P: Policer>(build: impl FnOnce(u64, u64, usize, &str, &str) -> P) -> P {
    let sources: Vec<Source> = (0..55).map(|f| Source { class: (f >= 50) as u16, offered: RATE / 8 }).collect();
    let mut p = build(RATE, 20_000, 2, "weighted", "weights = [3, 1]");
    let passed = passed_per_flow(&mut p, &trains(1, &sources, SECONDS), sources.len(), WARMUP * NANOS);
    let expected: Vec<f64> =
        sources.iter().map(|s| if s.class == 0 { RATE as f64 * 0.75 / 50.0 } else { RATE as f64 * 0.25 / 5.0 }).collect();
    assert_rates(&passed, (SECONDS - WARMUP) as f64, &expected, 0.05);
    p
}

/// Strict priority: the first class's 10 flows offer 40 % of the rate together and get all of it;
/// the second class's 20 flows share the remaining 60 % equally.
pub fn priority_with_10_and_20_flows<P: Policer>(build: impl FnOnce(u64, u64, usize, &str, &str) -> P) -> P {
    let sources: Vec<Source> = (0..30)
        .map(|f| if f < 10 { Source { class: 0, offered: RATE / 25 } } else { Source { class: 1, offered: RATE / 5 } })
        .collect();
    let mut p = build(RATE, 20_000, 2, "priority", "");
    let passed = passed_per_flow(&mut p, &trains(2, &sources, SECONDS), sources.len(), WARMUP * NANOS);
    let expected: Vec<f64> = sources.iter().map(|s| if s.class == 0 { RATE as f64 / 25.0 } else { RATE as f64 * 0.6 / 20.0 }).collect();
    assert_rates(&passed, (SECONDS - WARMUP) as f64, &expected, 0.05);
    p
}

/// Nested: class 0 over weighted(1:1, 2:2); class 0 idle, class 1's 8 flows get 1/3 of the rate
/// between them and class 2's 3 flows 2/3.
pub fn nested_with_8_and_3_flows<P: Policer>(build: impl FnOnce(u64, u64, usize, &str, &str) -> P) -> P {
    let sources: Vec<Source> = (0..11).map(|f| Source { class: if f < 8 { 1 } else { 2 }, offered: RATE / 2 }).collect();
    let mut p = build(RATE, 20_000, 3, "priority(0, weighted(1:1, 2:2))", "");
    let passed = passed_per_flow(&mut p, &trains(3, &sources, SECONDS), sources.len(), WARMUP * NANOS);
    let expected: Vec<f64> =
        sources.iter().map(|s| if s.class == 1 { RATE as f64 / 3.0 / 8.0 } else { RATE as f64 * 2.0 / 3.0 / 3.0 }).collect();
    assert_rates(&passed, (SECONDS - WARMUP) as f64, &expected, 0.05);
    p
}

/// What the checks below read from PQP or BC-PQP over classes of exact flows.
pub trait ClassFlowPolicer: Policer {
    type Flow: Default + Clone;
    fn classes(&self) -> &ClassFlows<Self::Flow>;
    /// Nano-bytes of magic added to and removed from the class queues so far.
    fn magic_totals_nb(&self) -> (u128, u128) {
        (0, 0)
    }
}

/// Arrivals (gap ns, flow, class, bytes) for [`check_bound_and_flows_match`]: bursts, ties and silences.
pub fn bursty_arrivals() -> impl Strategy<Value = Vec<(u64, u64, u16, u32)>> {
    prop::collection::vec(
        (prop_oneof![8 => 0u64..20_000, 1 => Just(0u64), 1 => 1_000_000u64..10_000_000], 0u64..300, 0u16..3, 40u32..1600),
        1..2000,
    )
}

/// Over every window (t1, t2]: bytes passed + magic added − magic removed ≤ r·Δt + Q(t2) −
/// Q(t1), Q the classes' queues (the tree's service is at most r·Δt); and after each arrival the
/// flows of its class hold what the class's queue holds, plus less than one nano-byte per flow
/// (the lazy service caught up). `p` runs 3 classes at `rate` bytes/s.
pub fn check_bound_and_flows_match<P: ClassFlowPolicer>(p: &mut P, rate: u64, arrivals: &[(u64, u64, u16, u32)]) -> Result<(), TestCaseError> {
    let state = |p: &P| {
        let queued: u128 = (0..3).map(|c| p.classes().class_occupancy_nb(c) as u128).sum();
        let (added, removed) = p.magic_totals_nb();
        (queued, added, removed)
    };
    let mut starts: Vec<(u64, u128, (u128, u128, u128))> = vec![(0, 0, (0, 0, 0))];
    let (mut t, mut passed) = (0u64, 0u128);
    for (i, &(gap, flow, class, len)) in arrivals.iter().enumerate() {
        t += gap;
        let c = class as usize;
        if p.on_arrival(Instant(t), &Packet { len, flow, class, ..Packet::default() }).is_pass() {
            passed += len as u128 * NANOS as u128;
        }
        let classes = p.classes();
        let (class_q, flows_q) = (classes.class_occupancy_nb(c) as u128, classes.class_flows_backlog_nb(c));
        prop_assert!(flows_q >= class_q && flows_q < class_q + classes.class_flows(c) as u128 + 1,
            "packet {}: class {} holds {} nb, its flows {} nb", i, c, class_q, flows_q);
        let (queued, added, removed) = state(p);
        for &(t1, passed1, (queued1, added1, removed1)) in &starts {
            let service = rate as u128 * (t - t1) as u128;
            prop_assert!(passed - passed1 + added - added1 + queued1 <= service + queued + removed - removed1,
                "packet {}: passed {} nb over ({}, {}], r·Δt {} nb, queued {} → {} nb", i, passed - passed1, t1, t, service, queued1, queued);
        }
        if i % 97 == 0 {
            starts.push((t, passed, (queued, added, removed)));
        }
    }
    Ok(())
}

/// 100,000 flows seen one packet each, 1 ms apart, spread over 4 classes: checks every one was
/// created and all but `live` reclaimed; the most flows held at once.
pub fn one_packet_flows<P: ClassFlowPolicer>(p: &mut P, live: u64) -> usize {
    let mut most = 0;
    for f in 0..100_000u64 {
        p.on_arrival(Instant(f * 1_000_000), &Packet { len: 1000, flow: f, class: (f % 4) as u16, ..Packet::default() });
        most = most.max(p.classes().flows());
    }
    let stats = p.classes().flow_stats();
    assert_eq!(stats.flows_created, 100_000);
    assert!(stats.flows_reclaimed >= 100_000 - live, "{stats:?}");
    most
}

/// `fair_classes = [1]` under weights 3:1, both classes overloaded twice, each by three flows and
/// one offering three times as much: the classes still get 3/4 and 1/4 of the rate; in class 0,
/// whose flows share one queue as in class-queued PQP, the heavy flow takes about three times
/// what each light one does (drops fall on every flow alike), while class 1 shares equally.
pub fn fair_switch_per_class<P: Policer>(build: impl FnOnce(u64, u64, usize, &str, &str) -> P) -> P {
    let offered = |class: u16, heavy: bool| {
        let light = if class == 0 { RATE / 4 } else { RATE / 10 };
        Source { class, offered: if heavy { 3 * light } else { light } }
    };
    let sources: Vec<Source> = (0..8).map(|f| offered((f >= 4) as u16, f % 4 == 3)).collect();
    let mut p = build(RATE, 20_000, 2, "weighted", "weights = [3, 1]\nfair_classes = [1]");
    let passed = passed_per_flow(&mut p, &trains(4, &sources, SECONDS), sources.len(), WARMUP * NANOS);
    let seconds = (SECONDS - WARMUP) as f64;
    let class0: u64 = passed[..4].iter().sum();
    let want0 = RATE as f64 * 0.75;
    assert!((class0 as f64 / seconds - want0).abs() <= 0.05 * want0, "class 0: {class0} B over {seconds} s (all: {passed:?})");
    let light = passed[..3].iter().sum::<u64>() as f64 / 3.0;
    let ratio = passed[3] as f64 / light;
    assert!((2.5..=3.5).contains(&ratio), "class 0 shares one queue: heavy/light {ratio:.2}, expected about 3 (all: {passed:?})");
    let expected = vec![RATE as f64 * 0.25 / 4.0; 4];
    assert_rates(&passed[4..], seconds, &expected, 0.05);
    p
}
