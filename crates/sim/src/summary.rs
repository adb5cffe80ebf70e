//! summary.json: per flow, per aggregate (000 §6.1's metrics over the measurement windows) and
//! the engine's speed.

use crate::world::AggCounters;
use ratekit_core::metrics::{mean, percentile};
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
}

#[derive(Debug, Clone, Serialize)]
pub struct EngineSummary {
    pub events: u64,
    pub wall_seconds: f64,
    pub events_per_second: f64,
}

impl AggSummary {
    pub fn new(id: u32, rate_bps: f64, enforcer: &str, norm: &mut [f64], jain: &[f64], c: AggCounters) -> Self {
        norm.sort_by(f64::total_cmp);
        AggSummary {
            id,
            rate_bps,
            enforcer: enforcer.to_string(),
            mean_normalized_throughput: mean(norm),
            p99_normalized_throughput: percentile(norm, 0.99),
            p999_normalized_throughput: percentile(norm, 0.999),
            drop_rate: if c.arrivals > 0 { c.enforcer_drops as f64 / c.arrivals as f64 } else { 0.0 },
            mean_jain: mean(jain),
            arrivals: c.arrivals,
            enforcer_drops: c.enforcer_drops,
            queue_drops: c.queue_drops,
            random_losses: c.random_losses,
        }
    }
}

pub fn write(s: &Summary, path: &Path) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(s).map_err(std::io::Error::other)? + "\n")?;
    std::fs::rename(tmp, path)
}
