//! Theorem 1 (000 §3.4) on random traces: over any interval in which the phantom queues do not
//! all go empty, PQP accepts (r·Δt ± ΣB_i)⁺ bytes. Checked through the identity behind it,
//! A(t1, t2) = L(t2) − L(t1) + r·Δt, which must hold to the nano-byte: the policy tree is
//! work-conserving, so while anything is queued the aggregate is served at exactly r.
//! Also single-queue PQP against the token bucket (algorithms.md §1: one phantom queue of size
//! B drained at r *is* a bucket of B tokens): same verdicts, occupancy = B − tokens.

use proptest::prelude::*;
use ratekit_core::pqp::{FlowQueuing, Pqp, PqpConfig};
use ratekit_core::token_bucket::{TokenBucket, TokenBucketConfig};
use ratekit_core::{Bytes, Classify, Instant, Packet, Policer, Rate};

const POLICIES: &[&str] = &["fair", "weighted", "priority", "priority(0, weighted(1:1, 2:3))", "fair(0, weighted(1:2, 2:1))"];

fn arrivals() -> impl Strategy<Value = Vec<(u64, u16, u32)>> {
    prop::collection::vec((0u64..3_000_000, 0u16..3, 40u32..1500), 20..300)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn accepted_bytes_within_r_dt_plus_minus_b(
        policy in 0..POLICIES.len(),
        rate in 50_000u64..3_000_000,
        size in 1_500u64..40_000,
        trace in arrivals(),
    ) {
        let cfg = PqpConfig {
            rate: Rate(rate),
            queues: 3,
            queue_size: Bytes(size),
            classify: Classify::Class,
            policy: POLICIES[policy].into(),
            weights: (POLICIES[policy] == "weighted").then(|| vec![1, 2, 5]),
            flows: FlowQueuing::Hashed,
            max_flows: None,
            fair_classes: None,
        };
        cfg.validate().unwrap();
        let mut pqp = Pqp::new(&cfg);
        let total_b = 3 * size as i128 * 1_000_000_000;
        // (time, backlog after the arrival, cumulative accepted nano-bytes), per busy period.
        let mut period: Vec<(u64, i128, i128)> = Vec::new();
        let (mut t, mut accepted) = (0u64, 0i128);
        for (gap, class, len) in trace {
            t += gap;
            let pkt = Packet { len, class, ..Packet::default() };
            let pass = pqp.on_arrival(Instant(t), &pkt).is_pass();
            let backlog: i128 = (0..3).map(|q| pqp.occupancy_nb(q) as i128).sum();
            let before = backlog - if pass { len as i128 * 1_000_000_000 } else { 0 };
            if before == 0 {
                period.clear();
            }
            accepted += if pass { len as i128 * 1_000_000_000 } else { 0 };
            period.push((t, backlog, accepted));
            let (t2, l2, a2) = *period.last().unwrap();
            for &(t1, l1, a1) in &period[..period.len() - 1] {
                let served = rate as i128 * (t2 - t1) as i128;
                let a = a2 - a1;
                prop_assert_eq!(a, l2 - l1 + served, "identity over ({}, {}]", t1, t2);
                prop_assert!(a <= served + total_b && a >= (served - total_b).max(0));
            }
        }
    }

    #[test]
    fn single_queue_pqp_is_the_token_bucket(
        rate in 1_000u64..10_000_000,
        size in 64u64..100_000,
        trace in prop::collection::vec((0u64..2_000_000, 1u32..3000), 1..400),
    ) {
        let cfg = PqpConfig {
            rate: Rate(rate),
            queues: 1,
            queue_size: Bytes(size),
            classify: Classify::Flow,
            policy: "fair".into(),
            weights: None,
            flows: FlowQueuing::Hashed,
            max_flows: None,
            fair_classes: None,
        };
        cfg.validate().unwrap();
        let mut pqp = Pqp::new(&cfg);
        let mut tb = TokenBucket::new(&TokenBucketConfig::new(Rate(rate), size));
        let mut t = 0;
        for (i, (gap, len)) in trace.into_iter().enumerate() {
            t += gap;
            let pkt = Packet { len, flow: i as u64, ..Packet::default() };
            prop_assert_eq!(pqp.on_arrival(Instant(t), &pkt), tb.on_arrival(Instant(t), &pkt), "packet {} at {}", i, t);
            prop_assert_eq!(pqp.occupancy_nb(0), size * 1_000_000_000 - tb.tokens_nanobytes());
        }
    }
}
