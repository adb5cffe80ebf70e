//! The policy-tree shaper (000 §2.1): pacing, long-run shares, per-packet delay bounds.

use proptest::prelude::*;
use ratekit_core::shaper::{Shaper, ShaperConfig};
use ratekit_core::{Bytes, Classify, DropReason, EnforcerConfig, Instant, Packet, QueueDiscipline, Rate};

const RATE: u64 = 1_250_000; // 10 Mbit/s

fn config(queues: u32, policy: &str, weights: Option<Vec<u32>>) -> ShaperConfig {
    ShaperConfig {
        rate: Rate(RATE),
        queues,
        queue_size: Bytes(10_000_000),
        classify: Classify::Class,
        policy: policy.into(),
        weights,
        mss: Bytes(1500),
        wheel_slot: None,
        wheel_slots: 4096,
    }
}

fn pkt(id: u64, class: u16, len: u32) -> Packet {
    Packet { id, len, class, ..Default::default() }
}

/// Calls the shaper exactly at its wake-ups until `end`; returns (packet, departure ns).
fn run_until(s: &mut Shaper, end: u64) -> Vec<(Packet, u64)> {
    let mut out = Vec::new();
    let mut drops = Vec::new();
    let mut now = 0;
    while now <= end {
        while let Some(p) = s.dequeue(Instant(now), &mut drops) {
            out.push((p, now));
        }
        match s.next_wakeup() {
            Some(t) => now = t.0,
            None => break,
        }
    }
    out
}

/// Bytes sent per queue over the run.
fn shares(out: &[(Packet, u64)], queues: usize) -> Vec<f64> {
    let mut b = vec![0u64; queues];
    for (p, _) in out {
        b[p.class as usize] += p.len as u64;
    }
    let total: u64 = b.iter().sum();
    b.iter().map(|&x| x as f64 / total as f64).collect()
}

fn backlog(s: &mut Shaper, per_queue: &[(u16, u32, usize)]) {
    let mut drops = Vec::new();
    let mut id = 0;
    for &(class, len, n) in per_queue {
        for _ in 0..n {
            s.enqueue(Instant::ZERO, pkt(id, class, len), &mut drops);
            id += 1;
        }
    }
    assert!(drops.is_empty());
}

#[test]
fn paces_at_the_rate_and_never_early() {
    let mut s = Shaper::new(&config(1, "fair", None), None).unwrap();
    backlog(&mut s, &[(0, 1000, 10), (0, 333, 10)]);
    let mut drops = Vec::new();
    assert!(s.dequeue(Instant(0), &mut drops).is_some());
    // The second packet is due 1000 B / 1.25 MB/s = 800 µs later, not a nanosecond before.
    assert_eq!(s.next_wakeup(), Some(Instant(800_000)));
    assert!(s.dequeue(Instant(799_999), &mut drops).is_none());
    assert!(s.dequeue(Instant(800_000), &mut drops).is_some());
    let out = run_until(&mut s, u64::MAX);
    // Departures follow Σ len / r exactly (333 B → 266 400 ns; no rounding drift).
    let last = out.last().unwrap().1;
    assert_eq!(last, (10 * 1000 + 9 * 333) * 1_000_000_000 / RATE);
}

#[test]
fn fair_shares_are_equal_with_unequal_packet_sizes() {
    let mut s = Shaper::new(&config(4, "fair", None), None).unwrap();
    backlog(&mut s, &[(0, 1500, 4000), (1, 600, 10_000), (2, 64, 90_000), (3, 1000, 6000)]);
    let out = run_until(&mut s, 2_000_000_000);
    for (q, share) in shares(&out, 4).into_iter().enumerate() {
        assert!((share - 0.25).abs() < 0.005, "queue {q}: {share}");
    }
}

#[test]
fn weighted_shares_follow_the_weights() {
    let mut s = Shaper::new(&config(4, "weighted", Some(vec![1, 2, 3, 4])), None).unwrap();
    backlog(&mut s, &[(0, 1500, 5000), (1, 1000, 10_000), (2, 700, 14_000), (3, 1500, 6_000)]);
    let out = run_until(&mut s, 3_000_000_000);
    for (q, share) in shares(&out, 4).into_iter().enumerate() {
        let want = (q + 1) as f64 / 10.0;
        assert!((share - want).abs() < 0.005, "queue {q}: {share} vs {want}");
    }
}

#[test]
fn priority_over_nested_weighted() {
    // Queue 0 (top priority) offers 20 % of r; queues 1 and 2 split the rest 1:2.
    let mut s = Shaper::new(&config(3, "priority(0, weighted(1:1, 2:2))", None), None).unwrap();
    backlog(&mut s, &[(1, 1500, 5000), (2, 1500, 5000)]);
    let mut drops = Vec::new();
    let period = 1500 * 1_000_000_000 / (RATE / 5); // one packet per period = r/5
    let (mut now, end) = (0u64, 2_000_000_000u64);
    let mut next_hi = 0u64;
    let mut out = Vec::new();
    let mut id = 1_000_000;
    let mut hi_delay_max = 0;
    let mut hi_arrivals = std::collections::HashMap::new();
    while now < end {
        while next_hi <= now {
            s.enqueue(Instant(next_hi), pkt(id, 0, 1500), &mut drops);
            hi_arrivals.insert(id, next_hi);
            id += 1;
            next_hi += period;
        }
        while let Some(p) = s.dequeue(Instant(now), &mut drops) {
            if p.class == 0 {
                hi_delay_max = hi_delay_max.max(now - hi_arrivals[&p.id]);
            }
            out.push((p, now));
        }
        now = s.next_wakeup().unwrap().0.min(next_hi).max(now + 1);
    }
    let sh = shares(&out, 3);
    assert!((sh[0] - 0.2).abs() < 0.005, "{sh:?}");
    assert!((sh[1] - 0.8 / 3.0).abs() < 0.005, "{sh:?}");
    assert!((sh[2] - 1.6 / 3.0).abs() < 0.005, "{sh:?}");
    // Strict priority: a top packet waits at most for the packet in transmission.
    assert!(hi_delay_max <= 1500 * 1_000_000_000 / RATE, "{hi_delay_max}");
}

#[test]
fn nested_fair_inside_weighted() {
    let mut s = Shaper::new(&config(3, "weighted(fair(0, 1):3, 2:1)", None), None).unwrap();
    backlog(&mut s, &[(0, 1500, 5000), (1, 500, 15_000), (2, 1500, 5000)]);
    let out = run_until(&mut s, 2_000_000_000);
    let sh = shares(&out, 3);
    for (q, want) in [(0, 0.375), (1, 0.375), (2, 0.25)] {
        assert!((sh[q] - want).abs() < 0.005, "{sh:?}");
    }
}

#[test]
fn drop_tail_per_queue() {
    let mut cfg = config(2, "fair", None);
    cfg.queue_size = Bytes(3000);
    let mut s = Shaper::new(&cfg, None).unwrap();
    let mut drops = Vec::new();
    for i in 0..3 {
        s.enqueue(Instant::ZERO, pkt(i, 0, 1500), &mut drops);
    }
    s.enqueue(Instant::ZERO, pkt(9, 1, 1500), &mut drops);
    assert_eq!(drops.len(), 1);
    assert_eq!((drops[0].pkt.id, drops[0].reason), (2, DropReason::QueueFull));
    assert_eq!(s.backlog_bytes(), 4500);
}

#[test]
fn bad_configs_name_the_field() {
    let base = "kind = \"shaper\"\nrate = \"10mbit\"\nqueue_size = \"64kb\"\n";
    for (extra, field) in [
        ("queues = 0", "queues"),
        ("policy = \"fair(0, 1)\"\nqueues = 3", "policy"),
        ("policy = \"weighted\"\nqueues = 2\nweights = [1]", "weights"),
        ("mss = 70000", "mss"),
        ("wheel_slots = 1", "wheel_slots"),
    ] {
        let e = EnforcerConfig::from_toml(&format!("{base}{extra}")).unwrap_err();
        assert_eq!(e.field, field, "{extra}: {e}");
    }
    assert!(EnforcerConfig::from_toml(&format!("{base}flavour = 1")).is_err());
    assert!(EnforcerConfig::from_toml(base).unwrap().build(None).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// DRR latency (Shreedhar & Varghese, Lemma 2 adapted): with every queue backlogged from 0,
    /// a round serves at most Σ_j (Q_j + L) bytes, and queue i has been served ≥ k·Q_i − L bytes
    /// after k rounds. So a packet with B_i bytes of its queue up to and including it leaves by
    /// ⌈(B_i + L)/Q_i⌉·Σ_j (Q_j + L)/r.
    #[test]
    fn every_packet_meets_the_drr_delay_bound(
        weights in prop::collection::vec(1u32..8, 2..6),
        sizes in prop::collection::vec(64u32..1500, 64),
        seed in any::<u64>(),
    ) {
        let n = weights.len();
        let mut s = Shaper::new(&config(n as u32, "weighted", Some(weights.clone())), None).unwrap();
        let mut drops = Vec::new();
        let mut cum = vec![0u64; n];
        let mut bound_bytes = std::collections::HashMap::new();
        let quanta: Vec<u64> = weights.iter().map(|&w| w as u64 * 1500).collect();
        let max_len = 1500u64;
        let round: u64 = quanta.iter().map(|q| q + max_len).sum();
        let mut x = seed;
        for id in 0..(n as u64 * 40) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let q = (id as usize) % n;
            let len = sizes[(x >> 33) as usize % sizes.len()];
            cum[q] += len as u64;
            let rounds = (cum[q] + max_len).div_ceil(quanta[q]);
            bound_bytes.insert(id, rounds * round);
            s.enqueue(Instant::ZERO, pkt(id, q as u16, len), &mut drops);
        }
        for (p, t) in run_until(&mut s, u64::MAX) {
            let bound_ns = bound_bytes[&p.id] * 1_000_000_000 / RATE;
            prop_assert!(t <= bound_ns, "packet {} of queue {} left at {} > bound {}", p.id, p.class, t, bound_ns);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Long-run shares of always-backlogged queues follow the weights, whatever the sizes.
    #[test]
    fn backlogged_shares_follow_random_weights(
        weights in prop::collection::vec(1u32..8, 2..7),
        sizes in prop::collection::vec(64u32..1500, 7),
    ) {
        let n = weights.len();
        let mut s = Shaper::new(&config(n as u32, "weighted", Some(weights.clone())), None).unwrap();
        let total: u32 = weights.iter().sum();
        // Enough packets that no queue empties within the 1 s run (r·1 s = 1.25 MB).
        let per_queue: Vec<(u16, u32, usize)> =
            (0..n).map(|q| (q as u16, sizes[q], (1_300_000 * weights[q] as usize / total as usize) / sizes[q] as usize + 10)).collect();
        backlog(&mut s, &per_queue);
        let out = run_until(&mut s, 1_000_000_000);
        for (q, share) in shares(&out, n).into_iter().enumerate() {
            let want = weights[q] as f64 / total as f64;
            prop_assert!((share - want).abs() < 0.01, "queue {} share {} want {}", q, share, want);
        }
    }
}
