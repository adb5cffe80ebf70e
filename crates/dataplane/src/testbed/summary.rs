//! summary.json in the shape `ratekit sim` writes (flows[] and aggregates[] with the same
//! fields and meanings: 000 §6.1's metrics over the measurement windows), plus windows.csv with
//! every flow's bytes per window.

use super::scenario::Resolved;
use super::traffic::Recorder;
use super::EnforcerCounts;
use crate::middlebox::MiddleboxReport;
use ratekit_core::metrics::{jain, mean, percentile};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub name: String,
    pub seed: u64,
    pub duration_s: f64,
    pub testbed: TestbedInfo,
    pub flows: Vec<FlowSummary>,
    pub aggregates: Vec<AggSummary>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TestbedInfo {
    pub enforcer_at: String,
    pub rtt_ms: f64,
    pub kernel: String,
    pub middlebox_forwarded: [u64; 2],
    pub middlebox_random_losses: u64,
    pub middlebox_overflow_drops: u64,
    /// The sender namespace's TCP counters over the run (`tcp_counters`), summed over its flows.
    pub sender_tcp: super::tcp_counters::Counters,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowSummary {
    pub id: u32,
    pub aggregate: u32,
    pub cc: String,
    pub rtt_ms: f64,
    /// Payload bits per second delivered from the flow's start to its completion (finite) or the end.
    pub mean_goodput_bps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<bool>,
    pub delivered_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AggSummary {
    pub id: u32,
    pub rate_bps: f64,
    pub enforcer: String,
    /// Mean over windows (after warm-up) with non-zero throughput of throughput / rate.
    pub mean_normalized_throughput: f64,
    pub p99_normalized_throughput: f64,
    pub p999_normalized_throughput: f64,
    /// Packets the enforcer dropped / packets that reached it.
    pub drop_rate: f64,
    /// Mean over windows of Jain's index among the aggregate's active flows.
    pub mean_jain: f64,
    pub arrivals: u64,
    pub enforcer_drops: u64,
    /// Each flow's share of the aggregate's delivered bytes after warm-up.
    pub shares: Vec<f64>,
}

pub fn build(sc: &Resolved, rec: &Recorder, counts: &[EnforcerCounts], mb: &MiddleboxReport, sender_tcp: super::tcp_counters::Counters) -> Summary {
    let s = &sc.scenario;
    let win_s = rec.window.as_secs_f64();
    let n_windows = (s.duration.0 / s.measure.window.0) as usize;
    let first_window = s.measure.warmup.0.div_ceil(s.measure.window.0) as usize;
    let bytes = |f: usize, w: usize| rec.bytes[f][w].load(Ordering::Relaxed) as f64;
    let duration_s = s.duration.as_secs_f64();
    let flows = sc
        .flows
        .iter()
        .map(|f| {
            let i = f.id as usize;
            let delivered = rec.delivered[i].load(Ordering::Relaxed);
            let done = rec.done_ns[i].load(Ordering::Relaxed);
            let start = f.start.as_secs_f64();
            let finite = matches!(f.app, super::scenario::App::Finite { .. });
            let completed = finite && done > 0;
            let end = if completed { done as f64 * 1e-9 } else { duration_s };
            FlowSummary {
                id: f.id,
                aggregate: f.aggregate,
                cc: f.cc.linux_name().to_string(),
                rtt_ms: f.rtt.as_secs_f64() * 1e3,
                mean_goodput_bps: if end > start { delivered as f64 * 8.0 / (end - start) } else { 0.0 },
                fct_s: completed.then(|| end - start),
                completed: finite.then_some(completed),
                delivered_bytes: delivered,
            }
        })
        .collect();
    let aggregates = sc
        .aggregates
        .iter()
        .zip(counts)
        .map(|(a, c)| {
            let members: Vec<usize> = sc.flows.iter().filter(|f| f.aggregate == a.id).map(|f| f.id as usize).collect();
            let rate_bps = a.rate.bits_per_sec() as f64;
            let mut norm = Vec::new();
            let mut jains = Vec::new();
            for w in first_window..n_windows {
                let per_flow: Vec<f64> = members.iter().map(|&f| bytes(f, w)).collect();
                let total: f64 = per_flow.iter().sum();
                if total > 0.0 {
                    norm.push(total * 8.0 / win_s / rate_bps);
                }
                // Flows with no bytes in the window are left out (the simulator instead keeps
                // started, unfinished backlogged flows, so its Jain can be lower: docs/testbed.md).
                let active: Vec<f64> = per_flow.iter().copied().filter(|x| *x > 0.0).collect();
                if let Some(j) = jain(&active) {
                    jains.push(j);
                }
            }
            norm.sort_by(f64::total_cmp);
            let per_flow_total: Vec<f64> =
                members.iter().map(|&f| (first_window..n_windows).map(|w| bytes(f, w)).sum()).collect();
            let sum: f64 = per_flow_total.iter().sum();
            AggSummary {
                id: a.id,
                rate_bps,
                enforcer: format!("{} ({:?})", a.enforcer.kind(), s.testbed.enforcer_at).to_lowercase(),
                mean_normalized_throughput: mean(&norm),
                p99_normalized_throughput: percentile(&norm, 0.99),
                p999_normalized_throughput: percentile(&norm, 0.999),
                drop_rate: if c.arrivals > 0 { c.drops as f64 / c.arrivals as f64 } else { 0.0 },
                mean_jain: mean(&jains),
                arrivals: c.arrivals,
                enforcer_drops: c.drops,
                shares: per_flow_total.iter().map(|x| if sum > 0.0 { x / sum } else { 0.0 }).collect(),
            }
        })
        .collect();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    Summary {
        name: s.name.clone(),
        seed: s.seed,
        duration_s,
        testbed: TestbedInfo {
            enforcer_at: format!("{:?}", s.testbed.enforcer_at).to_lowercase(),
            rtt_ms: sc.rtt.as_secs_f64() * 1e3,
            kernel,
            middlebox_forwarded: mb.stats.sent,
            middlebox_random_losses: mb.stats.random_losses,
            middlebox_overflow_drops: mb.stats.overflow_drops,
            sender_tcp,
        },
        flows,
        aggregates,
    }
}

/// Writes summary.json and windows.csv atomically (temporary file, then rename).
pub fn write(summary: &Summary, rec: &Recorder, sc: &Resolved, dir: &Path) -> std::io::Result<()> {
    let put = |name: &str, bytes: &[u8]| -> std::io::Result<()> {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(tmp, dir.join(name))
    };
    let mut csv = Vec::new();
    writeln!(csv, "window_start_s,flow,aggregate,bytes,goodput_bps")?;
    let n_windows = (sc.scenario.duration.0 / sc.scenario.measure.window.0) as usize;
    let win_s = rec.window.as_secs_f64();
    for w in 0..n_windows {
        for f in &sc.flows {
            let b = rec.bytes[f.id as usize][w].load(Ordering::Relaxed);
            writeln!(csv, "{:.3},{},{},{},{:.0}", w as f64 * win_s, f.id, f.aggregate, b, b as f64 * 8.0 / win_s)?;
        }
    }
    put("windows.csv", &csv)?;
    put("summary.json", (serde_json::to_string_pretty(summary).map_err(std::io::Error::other)? + "\n").as_bytes())
}
