//! Config builders shared by the BC-PQP integration tests.

use ratekit_core::bcpqp::BcPqpConfig;
use ratekit_core::pqp::FlowQueuing;
use ratekit_core::{Bytes, Classify, Duration, Rate};

/// BC-PQP with `queues` queues under `policy` (a bare `weighted` gets weights 1..=queues) and
/// `theta` = (θ+, θ−).
pub fn bcpqp_config(policy: &str, queues: u32, rate: u64, queue_size: u64, classify: Classify, theta: (f64, f64), window: Duration) -> BcPqpConfig {
    BcPqpConfig {
        rate: Rate(rate),
        queues,
        queue_size: Bytes(queue_size),
        classify,
        policy: policy.into(),
        weights: (policy == "weighted").then(|| (1..=queues).collect()),
        flows: FlowQueuing::Hashed,
        max_flows: None,
        fair_classes: None,
        theta_plus: theta.0,
        theta_minus: theta.1,
        window,
    }
}
