//! PQP with exact per-flow queues inside classes (`flows = "exact"`, `classify = "class"`, issue 17
//! item 1): the policy's shares between classes (weighted, priority, nested) and equal shares
//! among the flows of a class in the long run; the rate bound over every window with the flows'
//! lazily served queues kept equal to their class's; flows reclaimed; config errors.

use proptest::prelude::*;
use ratekit_core::pqp_class_flows::ClassFlowPqp;
use ratekit_core::{AnyPolicer, EnforcerConfig, Instant, Packet, Policer};

mod class_flows;
use class_flows::{
    assert_rates, config, nested_with_8_and_3_flows, passed_per_flow, priority_with_10_and_20_flows, trains,
    weighted_3_to_1_with_50_and_5_flows, Source, NANOS, RATE,
};

fn build(rate: u64, size: u64, classes: usize, policy: &str, extra: &str) -> ClassFlowPqp {
    match EnforcerConfig::from_toml(&config("pqp", rate, size, classes, policy, extra)).unwrap().build_policer().unwrap() {
        AnyPolicer::PqpClassFlows(p) => p,
        other => panic!("built {other:?}"),
    }
}

#[test]
fn weighted_classes_share_by_weight_and_flows_equally_inside() {
    weighted_3_to_1_with_50_and_5_flows(build);
}

#[test]
fn priority_class_gets_its_demand_and_the_rest_is_shared_per_flow() {
    priority_with_10_and_20_flows(build);
}

#[test]
fn nested_policy_shares_by_tree_then_per_flow() {
    nested_with_8_and_3_flows(build);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Any two weights and flow counts, every flow backlogged: per-flow rates w_c/(w_0 + w_1)·r/n_c.
    #[test]
    fn weighted_shares_hold_for_any_weights_and_flow_counts(
        w0 in 1u32..6, w1 in 1u32..6, n0 in 1usize..40, n1 in 1usize..12, seed in 0u64..1000,
    ) {
        let wsum = (w0 + w1) as f64;
        let share = |c: u16| RATE as f64 * if c == 0 { w0 as f64 / wsum / n0 as f64 } else { w1 as f64 / wsum / n1 as f64 };
        let sources: Vec<Source> = (0..n0 + n1).map(|f| {
            let class = (f >= n0) as u16;
            Source { class, offered: (share(class) * 2.0) as u64 }
        }).collect();
        let mut p = build(RATE, 20_000, 2, "weighted", &format!("weights = [{w0}, {w1}]"));
        let passed = passed_per_flow(&mut p, &trains(seed, &sources, 20), sources.len(), 4 * NANOS);
        let expected: Vec<f64> = sources.iter().map(|s| share(s.class)).collect();
        assert_rates(&passed, 16.0, &expected, 0.06);
    }

    /// Over every window (t1, t2]: bytes passed ≤ r·Δt + Q(t2) − Q(t1), Q the classes' queues
    /// (the tree's service is at most r·Δt); and after each arrival the flows of its class hold
    /// what the class's queue holds, plus less than one nano-byte per flow (the lazy service
    /// caught up). Bursty arrivals over 3 classes and 300 flows, under a nested policy.
    #[test]
    fn rate_bound_over_every_window_and_flows_match_their_class(
        rate in 200_000u64..20_000_000,
        size in 1_600u64..40_000,
        arrivals in prop::collection::vec(
            (prop_oneof![8 => 0u64..20_000, 1 => Just(0u64), 1 => 1_000_000u64..10_000_000], 0u64..300, 0u16..3, 40u32..1600),
            1..2000),
    ) {
        let mut p = build(rate, size, 3, "priority(0, weighted(1:1, 2:3))", "");
        let mut starts: Vec<(u64, u128, u128)> = vec![(0, 0, 0)];
        let (mut t, mut passed) = (0u64, 0u128);
        for (i, &(gap, flow, class, len)) in arrivals.iter().enumerate() {
            t += gap;
            let c = class as usize;
            if p.on_arrival(Instant(t), &Packet { len, flow, class, ..Packet::default() }).is_pass() {
                passed += len as u128 * NANOS as u128;
            }
            let (class_q, flows_q) = (p.class_occupancy_nb(c) as u128, p.class_flows_backlog_nb(c));
            prop_assert!(flows_q >= class_q && flows_q < class_q + p.class_flows(c) as u128 + 1,
                "packet {}: class {} holds {} nb, its flows {} nb", i, c, class_q, flows_q);
            let queued: u128 = (0..3).map(|c| p.class_occupancy_nb(c) as u128).sum();
            for &(t1, passed1, queued1) in &starts {
                let service = rate as u128 * (t - t1) as u128;
                prop_assert!(passed - passed1 + queued1 <= service + queued,
                    "packet {}: passed {} nb over ({}, {}], r·Δt {} nb, queued {} → {} nb", i, passed - passed1, t1, t, service, queued1, queued);
            }
            if i % 97 == 0 {
                starts.push((t, passed, queued));
            }
        }
    }
}

/// 100,000 flows seen one packet each, spread over the classes, at most a few live at once: the
/// state follows the live flows, not the flows seen.
#[test]
fn drained_flows_are_reclaimed() {
    let mut p = build(1_250_000, 20_000, 4, "weighted", "weights = [1, 2, 3, 4]");
    let mut most = 0;
    for f in 0..100_000u64 {
        // 1 ms apart: a 1,000-byte packet drains in 0.8 ms at the full rate.
        p.on_arrival(Instant(f * 1_000_000), &Packet { len: 1000, flow: f, class: (f % 4) as u16, ..Packet::default() });
        most = most.max(p.flows());
    }
    let stats = p.flow_stats();
    assert_eq!(stats.flows_created, 100_000);
    assert!(stats.flows_reclaimed >= 99_990, "{stats:?}");
    assert!(most <= 8, "{most} flows held at once");
    assert!(p.memory_bytes() < 8_000, "{} bytes", p.memory_bytes());
}

#[test]
fn config_errors_name_the_field() {
    let err = |text: String| EnforcerConfig::from_toml(&text).and_then(|c| c.build_policer().map(|_| ())).unwrap_err().to_string();
    // Flat exact flows by flow key take only `fair`.
    let flat = config("pqp", RATE, 20_000, 2, "weighted", "").replace("classify = \"class\"", "classify = \"flow\"");
    assert!(err(flat).contains("policy"));
    // Every class may hold max_flows flows of B each: the total must fit an aggregate.
    let big = config("pqp", RATE, 10_000_000, 4, "fair", "max_flows = 1000");
    let e = err(big);
    assert!(e.contains("queue_size") && e.contains("max_flows"), "{e}");
}
