//! Turning what the run counted into the summary: per flow, per aggregate and the engine's speed.

use super::{Comp, World};
use std::collections::BTreeMap;
use ratekit_lab::scenario::Resolved;
use ratekit_lab::summary::{AggSummary, EngineSummary, FlowCounts, FlowSummary, SimulatedTime, Summary};

/// Per aggregate, what the windows after the warm-up contributed.
pub(super) struct WindowSamples {
    /// Normalised throughput of the windows where it was non-zero.
    pub norm: Vec<Vec<f64>>,
    /// Jain's index among the active flows, of the windows that had any.
    pub jain: Vec<Vec<f64>>,
}

impl WindowSamples {
    pub fn new(naggs: usize) -> Self {
        WindowSamples { norm: vec![Vec::new(); naggs], jain: vec![Vec::new(); naggs] }
    }
}

impl World {
    /// Each aggregate's enforcer drops by reason, from the drivers of its enforcement point and
    /// of its link's queue (only one of the two holds an enforcer).
    fn drops_by_reason(&self, naggs: usize) -> Vec<BTreeMap<&'static str, u64>> {
        let mut out = vec![BTreeMap::new(); naggs];
        for c in &self.comps {
            let (agg, stats) = match c {
                Comp::Enf(e) => (e.agg, e.enforcer_stats()),
                Comp::Link(l) => (l.agg, l.enforcer_stats()),
                _ => continue,
            };
            for (reason, n) in stats.map(|s| s.drops_named()).unwrap_or_default() {
                *out[agg as usize].entry(reason).or_default() += n;
            }
        }
        out
    }

    /// `sim_end`: where simulated time stopped (before the scenario's end when interrupted).
    pub(super) fn summary(
        &self,
        r: &Resolved,
        seed: u64,
        sim_end: u64,
        wall_s: f64,
        interrupted: bool,
        samples: &mut WindowSamples,
    ) -> Summary {
        let end = r.scenario.duration.0;
        let warmup = r.scenario.measure.warmup.0;
        let naggs = self.agg_rates_bps.len();
        let events = self.ctx.ev.executed();
        let flows = self
            .flows
            .iter()
            .enumerate()
            .map(|(id, m)| {
                let (bytes, fct, retx, rto, recoveries, loss_probes, rwnd_limited_ns) = match (&self.comps[m.receiver as usize], &self.comps[m.sender as usize]) {
                    (Comp::Receiver(rx), Comp::Sender(tx)) => (
                        rx.delivered_bytes,
                        rx.completed_ns.map(|t| (t - m.start_ns) as f64 * 1e-9),
                        tx.stats.retransmits,
                        tx.stats.timeouts,
                        tx.stats.recoveries,
                        tx.stats.loss_probes,
                        tx.rwnd_limited_ns(sim_end),
                    ),
                    (Comp::Sink { bytes, .. }, _) => (*bytes, None, 0, 0, 0, 0, 0),
                    _ => unreachable!(),
                };
                let (video, hystart) = match &self.comps[m.sender as usize] {
                    Comp::Sender(tx) => (
                        tx.app.player().map(|p| p.summary(sim_end)),
                        tx.cc.hystart_exits(),
                    ),
                    _ => (None, None),
                };
                let active_end = fct.map_or(sim_end.min(m.stop_ns), |f| m.start_ns + (f * 1e9) as u64);
                let active = active_end.saturating_sub(m.start_ns) as f64 * 1e-9;
                FlowSummary {
                    id: id as u32,
                    aggregate: m.aggregate,
                    cc: m.cc.map_or("udp", |c| c.as_str()).to_string(),
                    rtt_ms: m.rtt_ms,
                    start_s: m.start_ns as f64 * 1e-9,
                    mean_goodput_bps: if active > 0.0 { bytes as f64 * 8.0 / active } else { 0.0 },
                    fct_s: fct,
                    completed: m.finite.then_some(fct.is_some()),
                    delivered_bytes: bytes,
                    counts: Some(FlowCounts {
                        retransmits: retx,
                        timeouts: rto,
                        recoveries,
                        loss_probes,
                        hystart,
                        rwnd_limited_ms: rwnd_limited_ns as f64 * 1e-6,
                        enforcer_arrivals: self.ctx.enf.flows[id].arrivals,
                        enforcer_drops: self.ctx.enf.flows[id].drops,
                        queue_delay_mean_ms: self.ctx.enf.flows[id].delay.mean_ms(),
                        queue_delay_p99_ms: self.ctx.enf.flows[id].delay.percentile_ms(0.99),
                    }),
                    video,
                }
            })
            .collect();
        let drops_by_reason = self.drops_by_reason(naggs);
        let aggregates = (0..naggs)
            .zip(drops_by_reason)
            .map(|(a, drops_by_reason)| {
                let c = self.ctx.aggs[a];
                let capacity = r.aggregates[a].cfg.link_capacity_bytes(warmup.min(sim_end), sim_end);
                let utilization = if capacity > 0.0 { c.link_bytes as f64 / capacity } else { 0.0 };
                let (norm, jain) = (&mut samples.norm[a], &samples.jain[a]);
                AggSummary {
                    path: Some(c.path_counts(utilization, self.ctx.enf.class_summaries(a))),
                    ..AggSummary::from_windows(a as u32, self.agg_rates_bps[a], self.agg_kinds[a].to_string(), norm, jain, c.enforcer_counts(drops_by_reason))
                }
            })
            .collect();
        Summary {
            name: r.scenario.name.clone(),
            seed,
            duration_s: end as f64 * 1e-9,
            simulated: Some(SimulatedTime { simulated_s: sim_end as f64 * 1e-9, interrupted }),
            testbed: None,
            flows,
            aggregates,
            engine: Some(EngineSummary {
                events,
                wall_seconds: wall_s,
                events_per_second: if wall_s > 0.0 { events as f64 / wall_s } else { 0.0 },
            }),
        }
    }
}
