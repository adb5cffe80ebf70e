//! The shipped PQP / BC-PQP configs (examples/enforcers/) parse, validate, and are what
//! issue 2 item 3 says they are; and their queues follow the sizing rules they cite.

use ratekit_core::sizing::phantom_queue_bytes;
use ratekit_core::{Duration, EnforcerConfig, Rate};

fn load(name: &str) -> EnforcerConfig {
    let path = format!("{}/../../examples/enforcers/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    EnforcerConfig::from_toml(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn examples_are_what_the_issue_describes() {
    let reno = phantom_queue_bytes(Rate::from_bits_per_sec(10_000_000), Duration::from_millis(100), 1500);
    let EnforcerConfig::Pqp(c) = load("pqp-fair.toml") else { panic!("pqp-fair is not pqp") };
    assert_eq!((c.rate, c.queue_size.0, c.policy.as_str()), (Rate(1_250_000), reno, "fair"));

    let expect = [
        ("bcpqp-fair.toml", 16, "fair", None),
        ("bcpqp-weighted.toml", 4, "weighted", Some(vec![1, 2, 3, 4])),
        ("bcpqp-priority.toml", 2, "priority", None),
        ("bcpqp-nested.toml", 3, "priority(0, weighted(1:1, 2:2))", None),
        ("bcpqp-class-exact.toml", 3, "priority(0, weighted(1:3, 2:1))", None),
    ];
    for (file, queues, policy, weights) in expect {
        let EnforcerConfig::Bcpqp(c) = load(file) else { panic!("{file} is not bcpqp") };
        assert_eq!((c.rate, c.queues, c.policy.as_str(), c.weights), (Rate(1_250_000), queues, policy, weights), "{file}");
        assert!(c.queue_size.0.abs_diff(10 * reno) <= 10, "{file}: 10 x the Reno rule (000 §6.1)");
        assert_eq!((c.theta_plus, c.theta_minus, c.window), (1.5, 0.5, Duration::from_millis(100)));
    }
    let EnforcerConfig::Bcpqp(c) = load("bcpqp-class-exact.toml") else { panic!("bcpqp-class-exact is not bcpqp") };
    assert_eq!((c.fair_classes, c.max_flows), (Some(vec![1, 2]), Some(512)));
}
