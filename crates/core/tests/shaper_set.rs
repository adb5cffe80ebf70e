//! Many aggregates on the hashed timing wheel: every packet leaves within one slot after its
//! exact departure (never before), cross-checked against one exactly-driven shaper per aggregate.

use proptest::prelude::*;
use ratekit_core::shaper::{Shaper, ShaperConfig};
use ratekit_core::shaper_set::ShaperSet;
use ratekit_core::{Bytes, Classify, Dropped, Duration, Instant, Packet, QueueDiscipline, Rate};
use std::collections::HashMap;

fn config(rate: u64, slot: Option<Duration>, slots: u32) -> ShaperConfig {
    ShaperConfig {
        rate: Rate(rate),
        queues: 1,
        queue_size: Bytes(100_000_000),
        classify: Classify::Flow,
        policy: "fair".into(),
        weights: None,
        mss: Bytes(1500),
        wheel_slot: slot,
        wheel_slots: slots,
    }
}

/// Drives `q` with `arrivals` (sorted by time), calling it at every wake-up; an arrival at the
/// same instant as a wake-up goes first. Returns departure time by packet id.
fn drive(q: &mut impl QueueDiscipline, arrivals: &[(u64, Packet)]) -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    let mut drops: Vec<Dropped> = Vec::new();
    let mut i = 0;
    loop {
        let wake = q.next_wakeup().map(|t| t.0);
        let arrival = arrivals.get(i).map(|a| a.0);
        match (arrival, wake) {
            (None, None) => break,
            (Some(a), w) if w.is_none_or(|w| a <= w) => {
                q.enqueue(Instant(a), arrivals[i].1, &mut drops);
                i += 1;
            }
            (_, Some(w)) => {
                while let Some(p) = q.dequeue(Instant(w), &mut drops) {
                    out.insert(p.id, w);
                }
            }
            _ => unreachable!(),
        }
    }
    assert!(drops.is_empty());
    out
}

fn arrivals(aggregates: u64, rate: u64, span_ns: u64, seed: u64) -> Vec<(u64, Packet)> {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut v = Vec::new();
    let mut id = 0;
    for agg in 0..aggregates {
        // Each aggregate offers ≈ 1.3× its rate in bursts of 1-8 packets.
        let mut t = next() % 1_000_000;
        while t < span_ns {
            let burst = 1 + next() % 8;
            let mut bytes = 0;
            for _ in 0..burst {
                let len = 64 + (next() % 1437) as u32;
                bytes += len as u64;
                v.push((t, Packet { id, len, flow: agg, aggregate: agg, ..Default::default() }));
                id += 1;
            }
            t += bytes * 1_000_000_000 / (rate * 13 / 10) * (next() % 200 + 1) / 100;
        }
    }
    v.sort_by_key(|&(t, p)| (t, p.id));
    v
}

fn check(cfg: &ShaperConfig, aggregates: u64, span_ns: u64, seed: u64) {
    let arr = arrivals(aggregates, cfg.rate.0, span_ns, seed);
    let mut set = ShaperSet::new(cfg).unwrap();
    let got = drive(&mut set, &arr);
    assert_eq!(got.len(), arr.len());
    assert_eq!(set.backlog_bytes(), 0);
    let g = set.slot_width().0;
    for agg in 0..aggregates {
        let mine: Vec<_> = arr.iter().copied().filter(|(_, p)| p.aggregate == agg).collect();
        let mut exact = Shaper::new(cfg, None).unwrap();
        let want = drive(&mut exact, &mine);
        for (_, p) in &mine {
            let (w, s) = (want[&p.id], got[&p.id]);
            assert!(s >= w && s <= w + g, "aggregate {agg} packet {}: set {s}, exact {w}, slot {g}", p.id);
        }
    }
}

#[test]
fn default_slots_follow_the_exact_schedule() {
    let cfg = config(1_250_000, None, 4096);
    assert_eq!(cfg.wheel_slot_width(), Duration(600_000)); // 750 B at 10 Mbit/s
    check(&cfg, 50, 300_000_000, 7);
}

#[test]
fn entries_many_rotations_ahead_wait_for_their_turn() {
    // 8 slots of 10 µs: a 1500 B packet at 10 Mbit/s is due 1.2 ms = 15 rotations ahead.
    check(&config(1_250_000, Some(Duration::from_micros(10)), 8), 20, 100_000_000, 11);
}

#[test]
fn ten_thousand_aggregates_share_the_wheel() {
    let cfg = config(187_500, None, 4096); // 1.5 Mbit/s each
    let mut set = ShaperSet::new(&cfg).unwrap();
    let mut drops = Vec::new();
    for agg in 0..10_000u64 {
        for k in 0..3 {
            set.enqueue(Instant(agg), Packet { id: agg * 3 + k, len: 1500, aggregate: agg, ..Default::default() }, &mut drops);
        }
    }
    assert_eq!(set.aggregates(), 10_000);
    let mut now = 0;
    let mut sent = 0;
    while let Some(t) = set.next_wakeup() {
        now = t.0.max(now);
        while set.dequeue(Instant(now), &mut drops).is_some() {
            sent += 1;
        }
    }
    assert_eq!(sent, 30_000);
    // Each aggregate's third packet is due 2 × 8 ms after its first; the wheel adds ≤ one slot.
    assert!(now >= 16_000_000 && now <= 16_000_000 + 10_000 + set.slot_width().0, "{now}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    #[test]
    fn any_slot_width_keeps_departures_within_one_slot(
        slot_us in 1u64..2000, slots in 2u32..300, seed in any::<u64>(),
    ) {
        check(&config(625_000, Some(Duration::from_micros(slot_us)), slots), 6, 40_000_000, seed);
    }
}
