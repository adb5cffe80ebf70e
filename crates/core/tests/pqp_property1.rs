//! Property 1 (000 §3.3): fed the same packets, PQP's phantom queues hold exactly what the
//! analogous shaper's queues hold at every instant, so every phantom copy leaves when the
//! shaper's packet does; and with equal drop-tail sizes both accept the same packets.
//!
//! Reference: the fluid H-GPS shaper in `pqp_reference` (f64, event driven).
//! Tolerance, derived rather than tuned: PQP splits each batch exactly except for the
//! remainder of one integer division per `fair`/`weighted` node, under W nano-bytes (W = the
//! node's active weight), which it hands out in list order rather than by weight. So after k
//! batches a queue may differ by < k·ΣW nano-bytes; the max-min service map is non-expansive,
//! so these errors add rather than grow. The reference adds f64 round-off (≤ DUST per step,
//! at most one step per arrival per queue).

mod pqp_reference;

use pqp_reference::{FluidShaper, DUST};
use proptest::prelude::*;
use ratekit_core::pqp::{FlowQueuing, Pqp, PqpConfig};
use ratekit_core::{Bytes, Classify, Instant, Packet, Policer, PolicyNode, Rate};

const POLICIES: &[(&str, usize, Option<&[u32]>, u64)] = &[
    ("fair", 4, None, 4),
    ("weighted", 4, Some(&[1, 2, 3, 4]), 10),
    ("priority", 3, None, 1),
    ("priority(0, weighted(1:1, 2:2))", 3, None, 4),
    ("weighted(fair(0, 1):3, priority(2, 3):1)", 4, None, 6),
    ("fair(priority(0, 1), weighted(2:5, 3:1), 4)", 5, None, 9),
];

fn check(policy_ix: usize, rate: u64, size: u64, arrivals: Vec<(u64, usize, u32)>) -> Result<(), TestCaseError> {
    let (spec, queues, weights, wsum) = POLICIES[policy_ix];
    let cfg = PqpConfig {
        rate: Rate(rate),
        queues: queues as u32,
        queue_size: Bytes(size),
        classify: Classify::Class,
        policy: spec.to_string(),
        weights: weights.map(<[u32]>::to_vec),
        flows: FlowQueuing::Hashed,
        max_flows: None,
        fair_classes: None,
    };
    cfg.validate().unwrap();
    let mut pqp = Pqp::new(&cfg);
    let tree = PolicyNode::resolve(spec, queues, weights).unwrap();
    let mut shaper = FluidShaper::new(tree, queues, rate, size);
    let mut t = 0u64;
    let (mut batches, mut ties, mut passed) = (0u64, 0, 0);
    for (gap, q, len) in arrivals {
        t += gap;
        batches += (gap > 0) as u64;
        let tol = batches as f64 * wsum as f64 * 1e-9 + DUST * (1.0 + batches as f64);
        let pkt = Packet { len, class: q as u16, ..Packet::default() };
        let verdict = pqp.on_arrival(Instant(t), &pkt);
        let reference = shaper.arrive(t as f64, q, len as u64, 2.0 * tol);
        for j in 0..queues {
            let before = pqp.occupancy_nb(j) as f64 / 1e9 - if j == q && verdict.is_pass() { len as f64 } else { 0.0 };
            prop_assert!(
                (before - shaper.backlog(j)).abs() <= tol,
                "{spec}: queue {j} at t={t}: PQP {before} vs shaper {} (tol {tol})",
                shaper.backlog(j)
            );
        }
        match reference {
            Some(pass) => prop_assert_eq!(pass, verdict.is_pass(), "{}: verdict of a {}-byte packet in queue {} at t={}", spec, len, q, t),
            None => ties += 1,
        }
        if verdict.is_pass() {
            shaper.enqueue(q, len as u64);
            passed += 1;
        }
    }
    prop_assert!(ties <= 1, "too many float ties ({ties}) to judge");
    prop_assert!(passed > 0);
    Ok(())
}

fn case() -> impl Strategy<Value = (usize, u64, u64, Vec<(u64, usize, u32)>)> {
    (0..POLICIES.len(), 100_000u64..5_000_000, 2_000u64..60_000, 50u64..300).prop_flat_map(|(ix, rate, size, load_pct)| {
        let queues = POLICIES[ix].1;
        // Mean gap so that the offered load is about load_pct % of the rate (mean packet ≈ 770 B).
        let mean_gap = (770 * 1_000_000_000 / rate * 100 / load_pct).max(1);
        // Gaps of 0 (simultaneous arrivals) are included on purpose.
        let arrivals = prop::collection::vec((0..2 * mean_gap, 0..queues, 40u32..1500), 50..400);
        (Just(ix), Just(rate), Just(size), arrivals)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn phantom_queues_track_the_fluid_shaper((ix, rate, size, arrivals) in case()) {
        check(ix, rate, size, arrivals)?;
    }
}
