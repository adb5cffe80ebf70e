//! Traffic and checks shared by the tests of exact flows inside classes (PQP and BC-PQP).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
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
