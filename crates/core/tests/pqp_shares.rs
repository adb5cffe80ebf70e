//! Long-run shares under open-loop overload (000 §3.3, algorithms.md §2): max-min fair,
//! weighted, strict priority and nested policies, for PQP and BC-PQP.
//!
//! Tolerance (derived): a greedy queue is full at every arrival once it has filled (it is
//! offered more than its share), so between two arrivals its occupancy differs by less than a
//! packet plus what is served in one inter-arrival gap. Over [from, to) it then passes what the
//! policy serves it, share·r·(to − from), within 2 packets + share·r·gap. Under BC-PQP the
//! magic sits behind the real bytes of a full queue and is never served, so the same holds.
//! A queue offered less than its share passes everything.

mod pqp_reference;

use pqp_reference::load::{run, Source, PKT};
use ratekit_core::bcpqp::{BcPqp, BcPqpConfig};
use ratekit_core::pqp::{FlowQueuing, Pqp, PqpConfig};
use ratekit_core::{Bytes, Classify, Duration, Policer, Rate};

const R: u64 = 1_250_000; // 10 Mbit/s
const SEC: u64 = 1_000_000_000;

struct Case {
    policy: &'static str,
    weights: Option<Vec<u32>>,
    /// Offered rate per flow (= class = queue), as a fraction of R.
    offered: Vec<f64>,
    /// Expected long-run share of R per flow.
    expected: Vec<f64>,
}

fn cases() -> Vec<Case> {
    vec![
        Case { policy: "fair", weights: None, offered: vec![0.1, 0.5, 1.0, 2.0], expected: vec![0.1, 0.3, 0.3, 0.3] },
        Case {
            policy: "weighted",
            weights: Some(vec![1, 2, 3, 4]),
            offered: vec![1.0, 1.0, 1.0, 1.0],
            expected: vec![0.1, 0.2, 0.3, 0.4],
        },
        Case {
            // Weighted max-min: queue 0 wants less than its 1/6, the rest splits 2:3.
            policy: "weighted",
            weights: Some(vec![1, 2, 3]),
            offered: vec![0.05, 1.0, 1.0],
            expected: vec![0.05, 0.38, 0.57],
        },
        Case { policy: "priority", weights: None, offered: vec![0.6, 2.0], expected: vec![0.6, 0.4] },
        Case {
            policy: "priority(0, weighted(1:1, 2:2))",
            weights: None,
            offered: vec![0.4, 1.0, 1.0],
            expected: vec![0.4, 0.2, 0.4],
        },
        Case {
            policy: "weighted(fair(0, 1):3, priority(2, 3):1)",
            weights: None,
            offered: vec![1.0, 1.0, 0.1, 1.0],
            expected: vec![0.375, 0.375, 0.1, 0.15],
        },
    ]
}

fn check(name: &str, p: &mut impl Policer, case: &Case) {
    let sources: Vec<Source> = case.offered.iter().map(|f| Source::steady((f * R as f64) as u64)).collect();
    let (from, to) = (3 * SEC, 10 * SEC);
    let tally = run(p, &sources, 7, from, to, |_, _, _| {});
    let span = (to - from) as f64 / SEC as f64;
    for (i, t) in tally.iter().enumerate() {
        let want = case.expected[i] * R as f64 * span;
        if case.expected[i] >= case.offered[i] {
            assert_eq!(t.passed, t.offered, "{name} {}: flow {i} offered less than its share", case.policy);
            continue;
        }
        let gap = PKT as f64 / case.offered[i] / R as f64;
        let tol = 2.0 * PKT as f64 + case.expected[i] * R as f64 * gap;
        assert!(
            (t.passed as f64 - want).abs() <= tol,
            "{name} {}: flow {i} passed {} bytes, policy share {want:.0} ± {tol:.0}",
            case.policy,
            t.passed
        );
    }
}

#[test]
fn pqp_long_run_shares() {
    for case in cases() {
        let cfg = PqpConfig {
            rate: Rate(R),
            queues: case.offered.len() as u32,
            queue_size: Bytes(64 * 1024),
            classify: Classify::Class,
            policy: case.policy.into(),
            weights: case.weights.clone(),
            flows: FlowQueuing::Hashed,
            max_flows: None,
            fair_classes: None,
        };
        cfg.validate().unwrap();
        check("pqp", &mut Pqp::new(&cfg), &case);
    }
}

#[test]
fn bcpqp_long_run_shares() {
    for case in cases() {
        let cfg = BcPqpConfig {
            rate: Rate(R),
            queues: case.offered.len() as u32,
            queue_size: Bytes(2 << 20),
            classify: Classify::Class,
            policy: case.policy.into(),
            weights: case.weights.clone(),
            flows: FlowQueuing::Hashed,
            max_flows: None,
            fair_classes: None,
            theta_plus: 1.5,
            theta_minus: 0.5,
            window: Duration::from_millis(100),
        };
        cfg.validate().unwrap();
        check("bcpqp", &mut BcPqp::new(&cfg), &case);
    }
}
