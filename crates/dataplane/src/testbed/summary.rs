//! The testbed's summary.json, in the shape `ratekit sim` writes (ratekit_lab::summary: flows[]
//! and aggregates[] with the same fields and meanings, 000 §6.1's metrics over the measurement
//! windows) with its own `testbed` section and per-aggregate `shares`, plus windows.csv with
//! every flow's bytes per window and each TCP sender's cwnd and smoothed RTT as the window closed.

use super::plan::Plan;
use super::tcp_counters::Counters;
use super::traffic::{Recorder, WindowSample};
use crate::middlebox::MiddleboxReport;
use ratekit_core::metrics::jain;
use ratekit_lab::summary::{self, AggSummary, EnforcerCounts, FlowSummary, FlowTcpInfo, LinkCounts, RttClass, Summary, TestbedSection};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;

pub fn build(
    plan: &Plan,
    rec: &Recorder,
    counts: &[EnforcerCounts],
    mb: &MiddleboxReport,
    sender_tcp: Counters,
    flow_tcp: Vec<FlowTcpInfo>,
    secondary_link: Option<LinkCounts>,
) -> Summary {
    let sc = &plan.resolved;
    let s = &sc.scenario;
    let win_s = rec.window.as_secs_f64();
    let n_windows = (s.duration.0 / s.measure.window.0) as usize;
    let first_window = s.measure.warmup.0.div_ceil(s.measure.window.0) as usize;
    let bytes = |f: usize, w: usize| rec.bytes[f][w].load(Ordering::Relaxed) as f64;
    let duration_s = s.duration.as_secs_f64();
    let after_warmup = |f: usize| (first_window..n_windows).map(|w| bytes(f, w)).sum::<f64>();
    let placement = s.testbed.enforcer_at.as_str();
    let flows = plan
        .flows
        .iter()
        .map(|f| {
            let i = f.id as usize;
            let delivered = rec.delivered[i].load(Ordering::Relaxed);
            let done = rec.done_ns[i].load(Ordering::Relaxed);
            // From the flow's own start (its connect), jitter included, as the simulator counts.
            let started = rec.started_ns[i].load(Ordering::Relaxed);
            let start = if started > 0 { started as f64 * 1e-9 } else { f.start.as_secs_f64() };
            let finite = f.app.is_finite();
            // A transfer finishing in the drain after the run did not finish in it (nor would
            // the simulator's).
            let completed = finite && done > 0 && done <= s.duration.0;
            let end = if completed { done as f64 * 1e-9 } else { duration_s };
            FlowSummary {
                id: f.id,
                aggregate: f.aggregate,
                cc: if f.app.is_udp() { "udp" } else { f.cc.as_str() }.to_string(),
                rtt_ms: millis(f.rtt),
                start_s: started as f64 * 1e-9,
                mean_goodput_bps: if end > start { delivered as f64 * 8.0 / (end - start) } else { 0.0 },
                fct_s: completed.then(|| end - start),
                completed: finite.then_some(completed),
                delivered_bytes: delivered,
                counts: None,
                video: None,
            }
        })
        .collect();
    let aggregates = sc
        .aggregates
        .iter()
        .zip(counts)
        .map(|(a, c)| {
            let members: Vec<usize> = plan.flows.iter().filter(|f| f.aggregate == a.id).map(|f| f.id as usize).collect();
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
            let per_flow_total: Vec<f64> = members.iter().map(|&f| after_warmup(f)).collect();
            let sum: f64 = per_flow_total.iter().sum();
            let enforcer = format!("{} ({placement})", a.enforcer.kind());
            AggSummary {
                shares: Some(per_flow_total.iter().map(|x| if sum > 0.0 { x / sum } else { 0.0 }).collect()),
                jain_of_flow_means: jain(&per_flow_total),
                ..AggSummary::from_windows(a.id, rate_bps, enforcer, &mut norm, &jains, c.clone())
            }
        })
        .collect();
    let measured_s = (n_windows.saturating_sub(first_window)) as f64 * win_s;
    let rtt_classes = plan
        .rtts
        .iter()
        .enumerate()
        .map(|(c, rtt)| {
            let members: Vec<u32> = plan.flows.iter().filter(|f| f.rtt_class == c).map(|f| f.id).collect();
            let goodput: f64 = members.iter().map(|&f| after_warmup(f as usize) * 8.0 / measured_s).sum();
            let tcp: Vec<&FlowTcpInfo> = flow_tcp.iter().filter(|t| members.contains(&t.flow)).collect();
            let mut min_rtts: Vec<f64> = tcp.iter().map(|t| t.min_rtt_ms).collect();
            min_rtts.sort_by(f64::total_cmp);
            let spread = match (min_rtts.first(), min_rtts.last()) {
                (Some(&lo), Some(&hi)) => [lo, min_rtts[min_rtts.len() / 2], hi],
                _ => [f64::NAN; 3],
            };
            let sent: u64 = tcp.iter().map(|t| t.data_segs_out).sum();
            let retransmitted: u64 = tcp.iter().map(|t| t.retransmits).sum();
            RttClass {
                rtt_ms: millis(*rtt),
                sender: super::plan::sender_addr(c).to_string(),
                flows: members.len(),
                mean_goodput_bps: goodput / members.len() as f64,
                measured_min_rtt_ms: spread,
                retransmit_rate: if sent > 0 { retransmitted as f64 / sent as f64 } else { 0.0 },
            }
        })
        .collect();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    Summary {
        name: s.name.clone(),
        seed: s.seed,
        duration_s,
        simulated: None,
        testbed: Some(TestbedSection {
            traffic_generator: super::traffic::GENERATOR,
            enforcer_at: placement.to_string(),
            rtt_classes,
            kernel,
            middlebox_forwarded: mb.stats.sent,
            middlebox_random_losses: mb.stats.random_losses,
            middlebox_overflow_drops: mb.stats.overflow_drops,
            middlebox_late_frames: mb.stats.late_frames,
            middlebox_max_late_us: mb.stats.max_late_us,
            middlebox_late_reads: mb.stats.late_reads,
            middlebox_max_read_lag_us: mb.stats.max_read_lag_us,
            sender_tcp,
            flow_tcp,
            secondary_link,
        }),
        flows,
        aggregates,
        engine: None,
    }
}

/// In ms without the rounding error of seconds × 1e3 (60 ms, not 60.00000000000001).
fn millis(d: ratekit_core::Duration) -> f64 {
    d.0 as f64 / 1e6
}

/// Writes summary.json and windows.csv atomically (temporary file, then rename).
pub fn write(summary: &Summary, rec: &Recorder, plan: &Plan, dir: &Path) -> std::io::Result<()> {
    let mut csv = Vec::new();
    writeln!(csv, "window_start_s,flow,aggregate,bytes,goodput_bps,cwnd_segments,srtt_ms,bbr_bw_mbps,bbr_min_rtt_ms,bbr_pacing_gain")?;
    let s = &plan.resolved.scenario;
    let n_windows = (s.duration.0 / s.measure.window.0) as usize;
    let win_s = rec.window.as_secs_f64();
    let samples: Vec<Vec<WindowSample>> = rec.samples.iter().map(|f| f.lock().map(|s| s.clone()).unwrap_or_default()).collect();
    for w in 0..n_windows {
        for f in &plan.flows {
            let i = f.id as usize;
            let b = rec.bytes[i][w].load(Ordering::Relaxed);
            write!(csv, "{:.3},{},{},{},{:.0},", w as f64 * win_s, f.id, f.aggregate, b, b as f64 * 8.0 / win_s)?;
            let sample = samples[i].get(w).copied().unwrap_or_default();
            match sample.cwnd_srtt_us {
                Some((cwnd, srtt_us)) if cwnd > 0 => write!(csv, "{cwnd},{:.3},", srtt_us as f64 / 1e3)?,
                _ => write!(csv, ",,")?,
            }
            match sample.bbr {
                Some(b) if b.pacing_gain_x256 > 0 => {
                    let (bw_mbps, min_rtt_ms) = (b.bw_bytes_per_sec as f64 * 8e-6, b.min_rtt_us as f64 / 1e3);
                    writeln!(csv, "{bw_mbps:.4},{min_rtt_ms:.3},{:.2}", b.pacing_gain_x256 as f64 / 256.0)?
                }
                _ => writeln!(csv, ",,")?,
            }
        }
    }
    let tmp = dir.join(".windows.csv.tmp");
    std::fs::write(&tmp, csv)?;
    std::fs::rename(tmp, dir.join("windows.csv"))?;
    summary::write(summary, &dir.join("summary.json"))
}
