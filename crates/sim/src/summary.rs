//! summary.json: per flow, per aggregate (000 §6.1's metrics over the measurement windows) and
//! the engine's speed.

use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub name: String,
    pub seed: u64,
    pub duration_s: f64,
    /// Less than `duration_s` when the run was interrupted.
    pub simulated_s: f64,
    pub interrupted: bool,
    pub flows: Vec<FlowSummary>,
    pub aggregates: Vec<AggSummary>,
    pub engine: EngineSummary,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowSummary {
    pub id: u32,
    pub aggregate: u32,
    pub cc: String,
    pub rtt_ms: f64,
    /// Payload bits delivered in order per second, from the flow's start to its completion
    /// (finite) or the end of the run.
    pub mean_goodput_bps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_s: Option<f64>,
    /// Present for finite flows: whether the transfer finished within the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<bool>,
    pub delivered_bytes: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    /// At the flow's own aggregate's enforcer, after the warm-up: packets that reached it and
    /// packets it dropped.
    pub enforcer_arrivals: u64,
    pub enforcer_drops: u64,
    /// Sojourn in that enforcer (dequeue − enqueue; 0 through a policer) of the packets it sent
    /// after the warm-up.
    pub queue_delay_mean_ms: f64,
    pub queue_delay_p99_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AggSummary {
    pub id: u32,
    pub rate_bps: f64,
    pub enforcer: String,
    /// Mean over windows with non-zero throughput (after warm-up) of throughput / rate.
    pub mean_normalized_throughput: f64,
    /// Nearest-rank percentiles over the same windows.
    pub p99_normalized_throughput: f64,
    pub p999_normalized_throughput: f64,
    /// Packets the enforcer dropped / packets that reached it.
    pub drop_rate: f64,
    /// Mean over windows of Jain's index among the aggregate's active flows.
    pub mean_jain: f64,
    pub arrivals: u64,
    pub enforcer_drops: u64,
    pub queue_drops: u64,
    pub random_losses: u64,
    /// IP bytes the aggregate's link sent after the warm-up / what it could have sent.
    pub link_utilization: f64,
    /// Per class at the aggregate's enforcer (every packet through it, including flows of other
    /// aggregates routed `via` it), after the warm-up, by ascending class.
    pub classes: Vec<ClassSummary>,
}

/// One class at one enforcer: events counted when they happen after the warm-up (a packet that
/// arrived before it and left after counts as sent, not as an arrival).
#[derive(Debug, Clone, Serialize)]
pub struct ClassSummary {
    pub class: u16,
    pub arrivals: u64,
    pub sent: u64,
    pub drops: u64,
    pub delay_mean_ms: f64,
    pub delay_p50_ms: f64,
    pub delay_p95_ms: f64,
    pub delay_p99_ms: f64,
    pub delay_max_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct EngineSummary {
    pub events: u64,
    pub wall_seconds: f64,
    pub events_per_second: f64,
}

pub fn write(s: &Summary, path: &Path) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(s).map_err(std::io::Error::other)? + "\n")?;
    std::fs::rename(tmp, path)
}
