//! PQP with exact per-flow queues inside classes (`flows = "exact"`, `classify = "class"`, issue 17
//! item 1): the policy's shares between classes (weighted, priority, nested) and equal shares
//! among the flows of a class in the long run; the rate bound over every window with the flows'
//! lazily served queues kept equal to their class's; flows reclaimed; config errors.

use proptest::prelude::*;
use ratekit_core::pqp_class_flows::{ClassFlowPqp, ClassFlows};
use ratekit_core::{AnyPolicer, EnforcerConfig};

mod class_flows;
use class_flows::{
    assert_rates, bursty_arrivals, check_bound_and_flows_match, config, nested_with_8_and_3_flows, one_packet_flows,
    passed_per_flow, priority_with_10_and_20_flows, trains, weighted_3_to_1_with_50_and_5_flows, ClassFlowPolicer,
    Source, NANOS, RATE,
};

impl ClassFlowPolicer for ClassFlowPqp {
    type Flow = ();
    fn classes(&self) -> &ClassFlows<()> {
        self.classes()
    }
}

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

    /// The rate bound over every window and the flows' lazily served queues equal to their
    /// class's (class_flows::check_bound_and_flows_match), under a nested policy.
    #[test]
    fn rate_bound_over_every_window_and_flows_match_their_class(
        rate in 200_000u64..20_000_000,
        size in 1_600u64..40_000,
        arrivals in bursty_arrivals(),
    ) {
        let mut p = build(rate, size, 3, "priority(0, weighted(1:1, 2:3))", "");
        check_bound_and_flows_match(&mut p, rate, &arrivals)?;
    }
}

/// 100,000 flows seen one packet each, spread over the classes, at most a few live at once: the
/// state follows the live flows, not the flows seen (a 1,000-byte packet drains in 0.8 ms).
#[test]
fn drained_flows_are_reclaimed() {
    let mut p = build(1_250_000, 20_000, 4, "weighted", "weights = [1, 2, 3, 4]");
    let most = one_packet_flows(&mut p, 10);
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
