//! BC-PQP with exact per-flow queues inside classes (`kind = "bcpqp"`, `flows = "exact"`,
//! `classify = "class"`, issue 17 item 1): the policy's shares between classes and equal shares
//! among a class's flows with burst control on; the rate bound over every window with magic
//! counted; burst control judged per flow against its class's share; flows reclaimed; config.

use proptest::prelude::*;
use ratekit_core::bcpqp_class_flows::ClassFlowBcPqp;
use ratekit_core::bcpqp_flows::FlowBurst;
use ratekit_core::pqp_class_flows::ClassFlows;
use ratekit_core::{AnyPolicer, DropReason, EnforcerConfig, Instant, Packet, Policer, Verdict};

mod class_flows;
use class_flows::{
    bursty_arrivals, check_bound_and_flows_match, config, fair_switch_per_class, nested_with_8_and_3_flows, one_packet_flows,
    priority_with_10_and_20_flows, trains, weighted_3_to_1_with_50_and_5_flows, ClassFlowPolicer, Source, NANOS, RATE,
};

impl ClassFlowPolicer for ClassFlowBcPqp {
    type Flow = FlowBurst;
    fn classes(&self) -> &ClassFlows<FlowBurst> {
        self.classes()
    }
    fn magic_totals_nb(&self) -> (u128, u128) {
        self.magic_totals_nb()
    }
}

fn build(rate: u64, size: u64, classes: usize, policy: &str, extra: &str) -> ClassFlowBcPqp {
    match EnforcerConfig::from_toml(&config("bcpqp", rate, size, classes, policy, extra)).unwrap().build_policer().unwrap() {
        AnyPolicer::BcpqpClassFlows(p) => *p,
        other => panic!("built {other:?}"),
    }
}

/// The three share scenarios of `exact_class_flows.rs`, with every backlogged flow filled with magic.
#[test]
fn weighted_classes_share_by_weight_and_flows_equally_inside() {
    let p = weighted_3_to_1_with_50_and_5_flows(build);
    assert!(p.burst_events().0 > 0, "backlogged flows are filled with magic");
}

#[test]
fn priority_class_gets_its_demand_and_the_rest_is_shared_per_flow() {
    priority_with_10_and_20_flows(build);
}

#[test]
fn nested_policy_shares_by_tree_then_per_flow() {
    nested_with_8_and_3_flows(build);
}

/// Burst control judges each flow against its class's share: weights 3:1, class 0 backlogged, and
/// in class 1 one steady flow (10 kB per 100 ms window, under θ+·X_i) beside one that sends 50 kB
/// per window. Class 1's share is r/4 (31.25 kB per window), X_i = 15.6 kB for its 2 flows, so
/// the burst crosses θ+·X_i = 23.4 kB and is filled with magic and held back by it; under the flat
/// r·T/n (62.5 kB, θ+·X = 94 kB) it never would be. The steady flow is never filled and loses nothing.
#[test]
fn a_flow_bursting_above_its_class_share_gets_magic_and_its_neighbour_does_not() {
    let (steady, bursty) = (5u64, 6u64);
    let mut sources: Vec<Source> = (0..5).map(|_| Source { class: 0, offered: RATE / 2 }).collect();
    sources.push(Source { class: 1, offered: 100_000 });
    sources.push(Source { class: 1, offered: 500_000 });
    let mut p = build(RATE, 200_000, 2, "weighted", "weights = [3, 1]");
    let (mut steady_dropped, mut bursty_held, mut bursty_magic) = (0, 0, 0u64);
    for (t, pkt) in trains(4, &sources, 10) {
        let verdict = p.on_arrival(Instant(t), &pkt);
        if pkt.flow == steady {
            steady_dropped += !verdict.is_pass() as u64;
            assert_eq!(p.flow_magic_nb(1, steady), 0, "the steady flow was filled at {t} ns");
        }
        if pkt.flow == bursty {
            bursty_held += (verdict == Verdict::Drop(DropReason::BurstControl)) as u64;
            bursty_magic = bursty_magic.max(p.flow_magic_nb(1, bursty));
        }
    }
    assert_eq!(steady_dropped, 0);
    assert!(bursty_magic > 0 && bursty_held > 100, "bursty flow: magic {bursty_magic} nb, {bursty_held} packets held back");
}

/// Priority: a flow of the second class fills with magic while it is alone, then the first
/// class's flows take the whole rate. The fluid policy serves the second class nothing, so its
/// flow's magic stays (θ− takes X_i = 0 while outranked, as class-queued BC-PQP does) and it
/// passes less than one queue of B from then on.
#[test]
fn an_outranked_class_keeps_its_flows_magic() {
    const B: u64 = 200_000;
    let mut sources: Vec<Source> = (0..10).map(|_| Source { class: 0, offered: RATE / 5 }).collect();
    sources.push(Source { class: 1, offered: RATE / 20 });
    let lone = trains(5, &[Source { class: 1, offered: 3 * RATE }], 1);
    let mut p = build(RATE, B, 2, "priority", "");
    for (t, pkt) in &lone {
        p.on_arrival(Instant(*t), &Packet { flow: 10, ..*pkt });
    }
    assert!(p.flow_magic_nb(1, 10) > 0, "the lone burst is filled with magic");
    let mut starved = 0;
    for (t, pkt) in trains(6, &sources, 20) {
        let t = t + NANOS;
        if p.on_arrival(Instant(t), &pkt).is_pass() && pkt.class == 1 && t >= 2 * NANOS {
            starved += pkt.len as u64;
        }
    }
    assert!(starved < B, "the outranked class passed {starved} bytes");
    assert!(p.flow_magic_nb(1, 10) > 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The rate bound over every window, magic counted, and the flows' lazily served queues
    /// equal to their class's (class_flows::check_bound_and_flows_match), under a nested policy
    /// with a short window and low θ+ so that magic comes and goes.
    #[test]
    fn rate_bound_over_every_window_and_flows_match_their_class(
        rate in 200_000u64..20_000_000,
        size in 1_600u64..40_000,
        arrivals in bursty_arrivals(),
    ) {
        let mut p = build(rate, size, 3, "priority(0, weighted(1:1, 2:3))", "window = \"5ms\"\ntheta_plus = 1.1\ntheta_minus = 0.9");
        check_bound_and_flows_match(&mut p, rate, &arrivals)?;
        let (fills, removals) = p.burst_events();
        prop_assert!(removals <= fills);
    }
}

/// The magic of the bound test above does come and go, so the bound is tested with it.
#[test]
fn the_bound_tests_traffic_fills_and_removes_magic() {
    let mut p = build(1_000_000, 20_000, 3, "priority(0, weighted(1:1, 2:3))", "window = \"5ms\"\ntheta_plus = 1.1\ntheta_minus = 0.9");
    for i in 0..20_000u64 {
        // 40 flows in bursts of 50 packets, 2 ms of silence between bursts.
        let t = i * 5_000 + (i / 50) * 2_000_000;
        p.on_arrival(Instant(t), &Packet { len: 800, flow: i % 40, class: (i % 3) as u16, ..Packet::default() });
    }
    let (fills, removals) = p.burst_events();
    assert!(fills > 10 && removals > 10, "fills {fills}, removals {removals}");
}

/// 100,000 flows seen one packet each, spread over the classes: a flow is held until its window
/// ends (100 ms, 100 flows at 1 ms apart), then reclaimed; the state follows the live flows.
#[test]
fn drained_flows_are_reclaimed_once_their_window_ends() {
    let mut p = build(1_250_000, 20_000, 4, "weighted", "weights = [1, 2, 3, 4]");
    let most = one_packet_flows(&mut p, 110);
    assert!(most <= 104, "{most} flows held at once");
    assert!(p.memory_bytes() < 24_000, "{} bytes", p.memory_bytes());
}

#[test]
fn config_is_accepted_and_errors_name_the_field() {
    let err = |text: String| EnforcerConfig::from_toml(&text).and_then(|c| c.build_policer().map(|_| ())).unwrap_err();
    let ok = config("bcpqp", RATE, 20_000, 2, "priority", "");
    assert!(matches!(EnforcerConfig::from_toml(&ok).unwrap().build_policer().unwrap(), AnyPolicer::BcpqpClassFlows(_)));
    // Every class may hold max_flows flows of B each: the total must fit an aggregate.
    assert_eq!(err(config("bcpqp", RATE, 10_000_000, 4, "fair", "max_flows = 1000")).field, "queue_size");
    assert_eq!(err(config("bcpqp", RATE, 20_000, 2, "weighted", "theta_minus = 3")).field, "theta_minus");
    assert_eq!(err(config("bcpqp", RATE, 20_000, 2, "weighted", "weights = [1]")).field, "weights");
}

#[test]
fn a_class_not_in_fair_classes_shares_one_queue() {
    let p = fair_switch_per_class(build);
    assert!(p.burst_events().0 > 0, "backlogged flows are filled with magic");
}

/// With `fair_classes = []` each class's flows hold one queue with one window: class-queued
/// BC-PQP (`flows = "hashed"`) on the same arrivals, up to the two differences of exact flows
/// that docs/bcpqp.md names (magic clamped at every touch, windows closed in order of end).
#[test]
fn classes_not_in_fair_classes_are_class_queued_bcpqp() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
    let (mut t, mut same, mut total) = (0u64, 0u64, 0u64);
    let extra = "weights = [3, 1, 2]\nwindow = \"5ms\"\ntheta_plus = 1.1\ntheta_minus = 0.9";
    let mut exact = build(RATE, 6_000, 3, "weighted", &format!("{extra}\nfair_classes = []"));
    let hashed = config("bcpqp", RATE, 6_000, 3, "weighted", extra).replace("flows = \"exact\"", "flows = \"hashed\"");
    let mut hashed = EnforcerConfig::from_toml(&hashed).unwrap().build_policer().unwrap();
    for _ in 0..200_000 {
        t += if rng.gen_bool(0.01) { rng.gen_range(1_000_000..20_000_000) } else { rng.gen_range(0..4_000) };
        let pkt = Packet { len: rng.gen_range(40..1500), flow: rng.gen_range(0..300), class: rng.gen_range(0..3u16), ..Packet::default() };
        let (a, b) = (exact.on_arrival(Instant(t), &pkt), hashed.on_arrival(Instant(t), &pkt));
        same += (a == b) as u64;
        total += 1;
    }
    // Measured: 199,994 of 200,000 (the rest after the two differences change a magic clamp).
    assert!(total - same <= total / 1000, "{same} of {total} verdicts equal");
}
