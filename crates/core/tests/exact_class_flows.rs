//! PQP with exact per-flow queues inside classes (`flows = "exact"`, `classify = "class"`, issue 17
//! item 1): the policy's shares between classes (weighted, priority, nested) and equal shares
//! among the flows of a class in the long run; the rate bound over every window with the flows'
//! lazily served queues kept equal to their class's; flows reclaimed; config errors.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::pqp::Pqp;
use ratekit_core::pqp_class_flows::{ClassFlowPqp, ClassFlows};
use ratekit_core::{AnyPolicer, EnforcerConfig, Instant, Packet, Policer};

mod class_flows;
use class_flows::{
    assert_rates, bursty_arrivals, check_bound_and_flows_match, config, fair_switch_per_class, nested_with_8_and_3_flows, one_packet_flows,
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
    // ... but a class outside fair_classes holds one queue.
    let one_fair = config("pqp", RATE, 10_000_000, 4, "fair", "max_flows = 1000\nfair_classes = [0]");
    assert!(EnforcerConfig::from_toml(&one_fair).is_ok());
    // fair_classes: only over classes of exact flows, each a class once.
    let hashed = config("pqp", RATE, 20_000, 2, "fair", "fair_classes = [1]").replace("flows = \"exact\"", "flows = \"hashed\"");
    let by_flow = config("pqp", RATE, 20_000, 2, "fair", "fair_classes = [1]").replace("classify = \"class\"", "classify = \"flow\"");
    for text in [hashed, by_flow, config("pqp", RATE, 20_000, 2, "fair", "fair_classes = [2]"), config("pqp", RATE, 20_000, 2, "fair", "fair_classes = [1, 1]")] {
        let e = err(text);
        assert!(e.starts_with("fair_classes"), "{e}");
    }
}

#[test]
fn a_class_not_in_fair_classes_shares_one_queue() {
    fair_switch_per_class(build);
}

/// Arrivals to 3 classes, many flows in classes 0 and 1, one flow in class 2; with `fair_classes`
/// empty or naming only class 2 every class holds one queue's worth of flows, so the verdicts
/// and the class queues must be those of class-queued PQP (`flows = "hashed"`) at every arrival.
#[test]
fn classes_not_in_fair_classes_are_class_queued_pqp() {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let mut arrivals = Vec::new();
    let mut t = 0u64;
    for _ in 0..200_000 {
        t += if rng.gen_bool(0.01) { rng.gen_range(1_000_000..20_000_000) } else { rng.gen_range(0..4_000) };
        let class = rng.gen_range(0..3u16);
        let flow = if class == 2 { 7 } else { rng.gen_range(0..300) };
        arrivals.push((t, Packet { len: rng.gen_range(40..1500), flow, class, ..Packet::default() }));
    }
    for (policy, weights) in [("weighted", "weights = [3, 1, 2]"), ("priority", ""), ("priority(0, weighted(1:1, 2:3))", "")] {
        for fair in ["[]", "[2]"] {
            let mut exact = build(RATE, 6_000, 3, policy, &format!("{weights}\nfair_classes = {fair}"));
            let hashed = config("pqp", RATE, 6_000, 3, policy, weights).replace("flows = \"exact\"", "flows = \"hashed\"");
            let EnforcerConfig::Pqp(hashed) = EnforcerConfig::from_toml(&hashed).unwrap() else { panic!() };
            let mut pqp = Pqp::new(&hashed);
            let mut drops = 0;
            for (i, (t, pkt)) in arrivals.iter().enumerate() {
                let (a, b) = (exact.on_arrival(Instant(*t), pkt), pqp.on_arrival(Instant(*t), pkt));
                assert_eq!(a, b, "{policy}, fair_classes = {fair}: packet {i}");
                drops += !a.is_pass() as u32;
                let c = pkt.class as usize;
                assert_eq!(exact.classes().class_occupancy_nb(c), pqp.occupancy_nb(c), "{policy}, {fair}: packet {i}");
            }
            assert!(drops > 10_000, "{policy}, {fair}: {drops} drops");
        }
    }
}
