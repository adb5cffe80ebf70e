//! summary.json, one shape for the simulator and the testbed: per flow and per aggregate
//! (000 §6.1's metrics over the measurement windows), plus what only one of them can report as
//! optional sections left out when absent (the simulator's engine and enforcement-point
//! statistics, the testbed's placement and kernel counters).

mod testbed;

pub use testbed::{FlowTcpInfo, LinkCounts, RttClass, TestbedSection};

use ratekit_core::metrics::{mean, percentile};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub name: String,
    pub seed: u64,
    pub duration_s: f64,
    #[serde(flatten)]
    pub simulated: Option<SimulatedTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testbed: Option<TestbedSection>,
    pub flows: Vec<FlowSummary>,
    pub aggregates: Vec<AggSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineSummary>,
}

impl Summary {
    /// Seconds the run covered: its duration, unless a simulation was interrupted.
    pub fn covered_s(&self) -> f64 {
        self.simulated.map_or(self.duration_s, |t| t.simulated_s)
    }
}

/// How far a simulation got: a run stopped from outside still writes its summary.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SimulatedTime {
    /// Less than `duration_s` when the run was interrupted.
    pub simulated_s: f64,
    pub interrupted: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowSummary {
    pub id: u32,
    pub aggregate: u32,
    pub cc: String,
    pub rtt_ms: f64,
    /// When the flow began, in s from the run's start: its `start` plus the jitter drawn from the
    /// seed (the simulator's schedule; in the testbed, when its sender woke to connect).
    pub start_s: f64,
    /// Payload bits delivered in order per second, from the flow's start to its completion
    /// (finite) or the end of the run.
    pub mean_goodput_bps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_s: Option<f64>,
    /// Present for finite flows: whether the transfer finished within the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<bool>,
    pub delivered_bytes: u64,
    /// Per-flow TCP and enforcer counts, which the simulator sees and the testbed does not
    /// (Linux counts per namespace: `TestbedSection::sender_tcp`).
    #[serde(flatten)]
    pub counts: Option<FlowCounts>,
    /// A `video` app's session (the simulator's player).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub video: Option<VideoSummary>,
}

/// One video session as its player saw it (docs/simulator.md, "Video").
#[derive(Debug, Clone, Copy, Serialize)]
pub struct VideoSummary {
    /// From the flow's start to playback's start (`None`: it never started within the run).
    pub join_s: Option<f64>,
    /// Time playback waited on an empty buffer after it started, up to the run's end.
    pub rebuffer_s: f64,
    pub stalls: u32,
    /// Mean over the segments that arrived: their bitrate, and their rung in the ladder (0 = lowest).
    pub mean_bitrate_bps: f64,
    pub mean_rung: f64,
    /// Segments that arrived, of the video's.
    pub segments: u32,
    pub of_segments: u32,
}

/// How CUBIC's HyStart ended slow start: how many times each detector ended it, and the windows
/// it ended at, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HystartCounts {
    pub train: u32,
    pub train_cwnd: u64,
    pub delay: u32,
    pub delay_cwnd: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowCounts {
    pub retransmits: u64,
    pub timeouts: u64,
    pub recoveries: u64,
    /// Tail loss probes sent (Linux's TCPLossProbes).
    pub loss_probes: u64,
    /// How HyStart ended slow start, CUBIC flows only: Linux's TCPHystartTrainDetect,
    /// TCPHystartTrainCwnd, TCPHystartDelayDetect and TCPHystartDelayCwnd for this flow (the
    /// testbed has them summed over its flows in `testbed.sender_tcp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hystart: Option<HystartCounts>,
    /// Time the receive window held back data the congestion window allowed, over the whole run
    /// (TCP_INFO's `tcpi_rwnd_limited`, which the testbed records as `flow_tcp.rwnd_limited_ms`).
    pub rwnd_limited_ms: f64,
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
    /// The enforcer's drops by reason (`DropReason` names), as replay, the middlebox and
    /// `ratekit tc stats` report them.
    pub drops_by_reason: BTreeMap<&'static str, u64>,
    #[serde(flatten)]
    pub path: Option<PathCounts>,
    /// Testbed: each flow's share of the aggregate's delivered bytes after warm-up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shares: Option<Vec<f64>>,
    /// Testbed: Jain's index over the flows' goodputs after warm-up (over `shares`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jain_of_flow_means: Option<f64>,
}

/// What the simulator counts along an aggregate's modelled path.
#[derive(Debug, Clone, Serialize)]
pub struct PathCounts {
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

/// The enforcer's counts over the whole run.
#[derive(Debug, Clone, Default)]
pub struct EnforcerCounts {
    pub arrivals: u64,
    pub drops: u64,
    pub drops_by_reason: BTreeMap<&'static str, u64>,
}

impl AggSummary {
    /// The window statistics (`norm`: normalised throughput of the windows where it was
    /// non-zero, sorted here; `jain`: Jain's index of the windows with active flows) and the
    /// enforcer's counts; the optional sections start empty.
    pub fn from_windows(id: u32, rate_bps: f64, enforcer: String, norm: &mut [f64], jain: &[f64], counts: EnforcerCounts) -> Self {
        norm.sort_by(f64::total_cmp);
        AggSummary {
            id,
            rate_bps,
            enforcer,
            mean_normalized_throughput: mean(norm),
            p99_normalized_throughput: percentile(norm, 0.99),
            p999_normalized_throughput: percentile(norm, 0.999),
            drop_rate: if counts.arrivals > 0 { counts.drops as f64 / counts.arrivals as f64 } else { 0.0 },
            mean_jain: mean(jain),
            arrivals: counts.arrivals,
            enforcer_drops: counts.drops,
            drops_by_reason: counts.drops_by_reason,
            path: None,
            shares: None,
            jain_of_flow_means: None,
        }
    }
}

/// Writes `s` to `path` through a temporary file, so a reader never sees half of it.
pub fn write(s: &Summary, path: &Path) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(s).map_err(std::io::Error::other)? + "\n")?;
    std::fs::rename(tmp, path)
}
