//! The metrics a claim can name, computed from one simulation's summary and per-window series
//! with the BC-PQP evaluation's method (000 §6.1, algorithms.md §9): 250 ms windows, the
//! aggregate's throughput normalised by its rate over the non-zero windows, Jain's index per
//! window over the flows with a non-zero rate (as the authors' harness does).

use super::selector::Selector;
use crate::scenario::{AppConfig, Resolved};
use crate::series::Series;
use crate::summary::{ClassSummary, EngineSummary, SimulatedTime, Summary};
use anyhow::bail;
use ratekit_core::metrics::{self, jain};

/// One finished simulation, with what the metrics need to know about its flows.
pub struct RunResult {
    pub summary: Summary,
    pub series: Series,
    /// Explicit class of each flow, by flow id.
    pub classes: Vec<u16>,
    pub window_s: f64,
    pub warmup_s: f64,
    /// UDP payload bytes each constant-bit-rate flow sent during the run (`None` for other flows).
    pub udp_offered: Vec<Option<f64>>,
    /// Set for a `kind = "sketch"` run (sketch.rs), which has no flows or windows.
    pub sketch: Option<SketchStats>,
    /// Set for a `kind = "detect"` run (detect.rs): one verdict per judged segment.
    pub detect: Option<Vec<DetectVerdict>>,
    /// Set for a `kind = "cost"` run (cost.rs): ns per packet over the token bucket's, and the ns.
    pub cost: Option<(f64, f64)>,
}

/// What a sketch-accuracy run measured, per packet arrival.
#[derive(Debug, Clone, Default)]
pub struct SketchStats {
    /// |ô − o| / B of the arriving flow, one per arrival.
    pub errors: Vec<f64>,
    /// Arrivals with ô ≠ o.
    pub misestimated_fraction: f64,
}

/// The detector's verdict on one segment of a generated trace that had enough losses to judge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DetectVerdict {
    pub policed: bool,
    /// The detector's estimate of the policing rate (IP bits/s), where it made one.
    pub rate_bps: Option<f64>,
    /// The rate (IP bits/s) of the policer that made the trace, when a policer did.
    pub policer_bps: Option<f64>,
}

/// A statistic over window samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    Mean,
    /// Nearest-rank quantile in [0, 1].
    Quantile(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// Normalised aggregate throughput over the non-zero windows: `throughput_mean`, `throughput_p99`.
    Throughput(Stat),
    /// Normalised throughput above the rate, max(0, x − 1), the burst: `burst_p99.9`.
    Burst(Stat),
    /// As `Throughput` but from the payload bytes that *arrived* at the receivers per window
    /// (in order or not), what a capture at the receiver measures; goodput counts bytes when
    /// they are delivered in order, so a repaired loss releases a burst into one window.
    Wire(Stat),
    /// max(0, wire − 1): `wire_burst_p99.9`.
    WireBurst(Stat),
    /// Jain's index per window and aggregate: `jain_mean`, `jain_p10`.
    Jain(Stat),
    /// Jain's index per window and aggregate over every selected flow, those without goodput
    /// included (001 §V-B counts all n flows, so a starved flow lowers the index):
    /// `jain_all_mean`. Select the flows active in the span.
    JainAll(Stat),
    /// 1 − Jain's index: `unfairness_mean`.
    Unfairness(Stat),
    /// 1 − Jain's index over the selected flows' mean goodput over the whole run (001 Fig. 9b).
    FlowUnfairness,
    /// 1 − delivered / sent payload of the selected constant-bit-rate UDP flows (packets still in
    /// flight at the end count as lost: about one per flow).
    UdpLoss,
    /// Enforcer drops / packets that reached the enforcer.
    DropRate,
    /// Goodput of the selected flows / goodput of the `over` flows (default: all), same windows.
    Share,
    /// Goodput of the selected flows / the selected aggregates' rate, same windows.
    Goodput,
    /// Mean per-flow goodput of the selected flows / that of the `over` flows (whole run, each
    /// flow from its start: finite transfers).
    Ratio,
    /// As `Ratio`, over the windows of the span (default: after the warm-up), so a start-up the
    /// paper discards is left out (004 §V-A2 drops the first 15 s): backlogged flows.
    SpanRatio,
    /// Latest / earliest completion time of the selected finite flows (an unfinished flow
    /// counts as finishing at the end of the run, so the figure is then a lower bound).
    FctSpread,
    /// Completion time (s) of the selected finite flows, their mean or a nearest-rank
    /// percentile: `fct_mean`, `fct_p99` (001 Fig. 10's page load times). An unfinished flow
    /// counts as finishing at the end of the run (the figure is then a lower bound).
    Fct(Stat),
    /// Mean over the selected aggregates of their link's utilisation (summary.json's
    /// `link_utilization`).
    Utilization,
    /// Sojourn (ms) at the enforcer of the selected class (`select.class`, default 0) and
    /// aggregates, after the warm-up: `delay_mean`, `delay_p50`, `delay_p95`, `delay_p99`,
    /// `delay_p100` (the maximum). A percentile needs exactly one matching (aggregate, class).
    /// With `over`, divided by the same statistic of the `over` class.
    Delay(Stat),
    /// Drops / arrivals of the selected class at the selected aggregates' enforcers (with
    /// `over`, divided by that class's).
    ClassLoss,
    /// |ô − o| / B per arrival in a sketch run (001 Fig. 11a): `sketch_error_mean`, `_pNN`.
    SketchError(Stat),
    /// Fraction of arrivals whose occupancy the sketch misestimated (001 Fig. 11b).
    SketchMisestimation,
    /// Fraction of a detect run's judged segments found policed (002 Table 3's accuracy for
    /// the policing classes A-C).
    DetectPoliced,
    /// Fraction of a detect run's judged segments not found policed (Table 3's accuracy for
    /// the classes D-H, where nothing polices).
    DetectNotPoliced,
    /// A cost run's time per packet over the token bucket's on the same arrivals (000 Table 1,
    /// Fig. 7); with `over_run`, one enforcer's over another's.
    CostPerPacket,
    /// |estimated / configured rate − 1| over the segments found policed of traces a policer
    /// made: `rate_error_mean`, `rate_error_p50`.
    RateError(Stat),
    /// |the queueing enforcer's estimate of its link's rate / the link's rate − 1| at the end of
    /// every window of the span, per selected aggregate whose enforcer estimates it (DSCD's
    /// Algorithm 4, 004 Figs. 6-8): `estimate_error_mean`, `estimate_error_p95`.
    EstimateError(Stat),
    /// Over the selected flows' video sessions (a `video` app), their mean or a nearest-rank
    /// percentile: `video_join_STAT` (s from the flow's start to playback; a session that never
    /// started counts as starting at the run's end), `video_rebuffer_STAT` (s of stalls after the
    /// start), `video_bitrate_STAT` (mean bitrate of its segments, bit/s), `video_rung_STAT`
    /// (mean rung of its segments, 0 = the ladder's lowest).
    Video(VideoField, Stat),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VideoField {
    Join,
    Rebuffer,
    Bitrate,
    Rung,
}

impl Metric {
    pub fn parse(s: &str) -> anyhow::Result<Metric> {
        let stat = |rest: &str| -> anyhow::Result<Stat> {
            if rest == "mean" {
                return Ok(Stat::Mean);
            }
            match rest.strip_prefix('p').and_then(|p| p.parse::<f64>().ok()) {
                Some(p) if (0.0..=100.0).contains(&p) => Ok(Stat::Quantile(p / 100.0)),
                _ => bail!("'{s}': the statistic must be `mean` or `pNN` (a percentile)"),
            }
        };
        if let Some(r) = s.strip_prefix("sketch_error_") {
            return Ok(Metric::SketchError(stat(r)?));
        }
        if let Some(r) = s.strip_prefix("rate_error_") {
            return Ok(Metric::RateError(stat(r)?));
        }
        if let Some(r) = s.strip_prefix("estimate_error_") {
            return Ok(Metric::EstimateError(stat(r)?));
        }
        for (prefix, field) in [
            ("video_join_", VideoField::Join),
            ("video_rebuffer_", VideoField::Rebuffer),
            ("video_bitrate_", VideoField::Bitrate),
            ("video_rung_", VideoField::Rung),
        ] {
            if let Some(r) = s.strip_prefix(prefix) {
                return Ok(Metric::Video(field, stat(r)?));
            }
        }
        if let Some(r) = s.strip_prefix("jain_all_") {
            return Ok(Metric::JainAll(stat(r)?));
        }
        if let Some(r) = s.strip_prefix("wire_burst_") {
            return Ok(Metric::WireBurst(stat(r)?));
        }
        Ok(match s {
            "drop_rate" => Metric::DropRate,
            "class_loss" => Metric::ClassLoss,
            "sketch_misestimation" => Metric::SketchMisestimation,
            "detect_policed" => Metric::DetectPoliced,
            "detect_not_policed" => Metric::DetectNotPoliced,
            "cost_per_packet" => Metric::CostPerPacket,
            "flow_unfairness" => Metric::FlowUnfairness,
            "udp_loss" => Metric::UdpLoss,
            "share" => Metric::Share,
            "goodput" => Metric::Goodput,
            "ratio" => Metric::Ratio,
            "span_ratio" => Metric::SpanRatio,
            "fct_spread" => Metric::FctSpread,
            "utilization" => Metric::Utilization,
            _ => match s.split_once('_') {
                Some(("throughput", r)) => Metric::Throughput(stat(r)?),
                Some(("burst", r)) => Metric::Burst(stat(r)?),
                Some(("wire", r)) => Metric::Wire(stat(r)?),
                Some(("jain", r)) => Metric::Jain(stat(r)?),
                Some(("unfairness", r)) => Metric::Unfairness(stat(r)?),
                Some(("fct", r)) => Metric::Fct(stat(r)?),
                Some(("delay", r)) => match stat(r)? {
                    Stat::Quantile(q) if ![0.5, 0.95, 0.99, 1.0].contains(&q) => {
                        bail!("'{s}': the enforcer reports delay_mean, delay_p50, delay_p95, delay_p99 and delay_p100")
                    }
                    st => Metric::Delay(st),
                },
                _ => bail!(
                    "unknown metric '{s}' (throughput_STAT, burst_STAT, wire_STAT, wire_burst_STAT, jain_STAT, jain_all_STAT, unfairness_STAT, flow_unfairness, udp_loss, drop_rate, share, goodput, ratio, span_ratio, fct_spread, fct_STAT, utilization, delay_STAT, class_loss, sketch_error_STAT, sketch_misestimation, detect_policed, detect_not_policed, cost_per_packet, rate_error_STAT, estimate_error_STAT, video_join_STAT, video_rebuffer_STAT, video_bitrate_STAT, video_rung_STAT)"
                ),
            },
        })
    }
}

/// The summary of a run that is not a network simulation (a sketch or detect run): what it
/// covered and how many events (arrivals, packets) it took, for the report's table of runs.
pub fn offline_summary(name: &str, seed: u64, simulated_s: f64, events: u64, wall_seconds: f64) -> Summary {
    Summary {
        name: name.to_string(),
        seed,
        duration_s: simulated_s,
        simulated: Some(SimulatedTime { simulated_s, interrupted: false }),
        testbed: None,
        flows: Vec::new(),
        aggregates: Vec::new(),
        engine: Some(EngineSummary { events, wall_seconds, events_per_second: events as f64 / wall_seconds.max(1e-9) }),
    }
}

fn apply_stat(stat: Stat, mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    match stat {
        Stat::Mean => metrics::mean(&xs),
        Stat::Quantile(q) => {
            xs.sort_by(f64::total_cmp);
            metrics::percentile(&xs, q)
        }
    }
}

/// Window range of a claim or figure, in seconds of simulated time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Span {
    pub from: Option<f64>,
    pub to: Option<f64>,
}

impl RunResult {
    /// A simulation of `r`, with what the metrics need to know about its flows.
    pub fn simulated(r: &Resolved, summary: Summary, series: Series) -> Self {
        let flows = || r.aggregates.iter().flat_map(|a| a.flows.iter());
        let classes = flows().map(|f| f.class).collect();
        let end_ns = summary.covered_s() * 1e9;
        // A CBR source sends at start, then every packet/rate (truncated to whole ns, as the
        // simulator's UdpSource does); a random start is not known here, so such flows get None.
        let udp_offered = flows()
            .map(|f| match f.app {
                AppConfig::Cbr { rate, packet } if f.start_jitter.0 == 0 && end_ns > f.start.0 as f64 => {
                    let gap = ((packet.0 as f64 * 1e9 / rate.0 as f64) as u64).max(1) as f64;
                    let sent = ((end_ns - f.start.0 as f64) / gap).ceil();
                    Some(sent * packet.0.saturating_sub(28) as f64)
                }
                _ => None,
            })
            .collect();
        RunResult {
            summary,
            series,
            classes,
            window_s: r.scenario.measure.window.as_secs_f64(),
            warmup_s: r.scenario.measure.warmup.as_secs_f64(),
            udp_offered,
            sketch: None,
            detect: None,
            cost: None,
        }
    }

    pub fn sketch(summary: Summary, stats: SketchStats) -> Self {
        RunResult { sketch: Some(stats), ..Self::offline(summary) }
    }

    pub fn detected(summary: Summary, verdicts: Vec<DetectVerdict>) -> Self {
        RunResult { detect: Some(verdicts), ..Self::offline(summary) }
    }

    pub fn costed(summary: Summary, over_token_bucket: f64, ns: f64) -> Self {
        RunResult { cost: Some((over_token_bucket, ns)), ..Self::offline(summary) }
    }

    /// A run without flows or windows, whose network metrics have no samples.
    fn offline(summary: Summary) -> Self {
        RunResult {
            summary,
            series: Series::default(),
            classes: Vec::new(),
            window_s: 0.25,
            warmup_s: 0.0,
            udp_offered: Vec::new(),
            sketch: None,
            detect: None,
            cost: None,
        }
    }

    /// Fraction of the judged segments found policed (NaN outside a detect run or without any).
    fn policed_fraction(&self) -> f64 {
        match self.detect.as_deref() {
            Some(vs) if !vs.is_empty() => vs.iter().filter(|v| v.policed).count() as f64 / vs.len() as f64,
            _ => f64::NAN,
        }
    }

    fn rate_errors(&self) -> Vec<f64> {
        let verdicts = self.detect.iter().flatten().filter(|v| v.policed);
        verdicts.filter_map(|v| Some((v.rate_bps? / v.policer_bps? - 1.0).abs())).collect()
    }

    /// The selected class (default 0) at each selected aggregate's enforcer.
    fn class_stats(&self, sel: &Selector) -> impl Iterator<Item = &ClassSummary> + '_ {
        let class = sel.class.unwrap_or(0);
        let agg = sel.aggregate;
        let aggs = self.summary.aggregates.iter().filter(move |a| agg.is_none_or(|x| x == a.id));
        aggs.flat_map(move |a| a.path.iter().flat_map(|p| &p.classes).filter(move |c| c.class == class))
    }

    fn class_delay(&self, stat: Stat, sel: &Selector) -> f64 {
        let cs: Vec<&ClassSummary> = self.class_stats(sel).filter(|c| c.sent > 0).collect();
        match (stat, cs.as_slice()) {
            (_, []) => f64::NAN,
            (Stat::Mean, _) => {
                let sent: u64 = cs.iter().map(|c| c.sent).sum();
                cs.iter().map(|c| c.delay_mean_ms * c.sent as f64).sum::<f64>() / sent as f64
            }
            (Stat::Quantile(q), [c]) => {
                if q == 0.5 {
                    c.delay_p50_ms
                } else if q == 0.95 {
                    c.delay_p95_ms
                } else if q == 0.99 {
                    c.delay_p99_ms
                } else {
                    c.delay_max_ms
                }
            }
            (Stat::Quantile(_), _) => f64::NAN,
        }
    }

    fn class_loss(&self, sel: &Selector) -> f64 {
        let (d, n) = self.class_stats(sel).fold((0u64, 0u64), |(d, n), c| (d + c.drops, n + c.arrivals));
        if n == 0 {
            f64::NAN
        } else {
            d as f64 / n as f64
        }
    }

    pub fn flow_matches(&self, id: usize, sel: &Selector) -> bool {
        let f = &self.summary.flows[id];
        sel.cc.as_ref().is_none_or(|c| *c == f.cc)
            && sel.class.is_none_or(|c| self.classes[id] == c)
            && sel.flows.as_ref().is_none_or(|l| l.contains(&(id as u32)))
            && sel.aggregate.is_none_or(|a| a == f.aggregate)
    }

    fn agg_matches(&self, a: usize, sel: &Selector) -> bool {
        sel.aggregate.is_none_or(|x| x as usize == a)
    }

    /// Indices of the windows in the span (default: those starting after the warm-up).
    pub fn windows(&self, span: Span) -> impl Iterator<Item = usize> + '_ {
        let from = span.from.unwrap_or(self.warmup_s);
        let to = span.to.unwrap_or(f64::INFINITY);
        let w = self.window_s;
        (0..self.series.goodput_bps.len()).filter(move |&i| {
            let start = i as f64 * w;
            start + 1e-9 >= from && start + w <= to + 1e-9
        })
    }

    /// Normalised throughput of every selected aggregate in every window of the span, zeros left out.
    pub fn throughput_samples(&self, sel: &Selector, span: Span) -> Vec<f64> {
        let mut out = Vec::new();
        for w in self.windows(span) {
            for (a, &x) in self.series.normalized[w].iter().enumerate() {
                if x > 0.0 && self.agg_matches(a, sel) {
                    out.push(x);
                }
            }
        }
        out
    }

    /// Normalised wire throughput (payload arrived at the receivers) of every selected aggregate
    /// in every window of the span, zeros left out.
    pub fn wire_samples(&self, sel: &Selector, span: Span) -> Vec<f64> {
        let aggs = &self.summary.aggregates;
        let mut out = Vec::new();
        for w in self.windows(span) {
            let mut bytes = vec![0u64; aggs.len()];
            for (id, &b) in self.series.wire_bytes[w].iter().enumerate() {
                bytes[self.summary.flows[id].aggregate as usize] += b;
            }
            for (a, &b) in bytes.iter().enumerate() {
                if b > 0 && self.agg_matches(a, sel) {
                    out.push(b as f64 * 8.0 / self.window_s / aggs[a].rate_bps);
                }
            }
        }
        out
    }

    /// |estimate / link rate − 1| of every selected aggregate whose enforcer estimates its link,
    /// at the end of every window of the span.
    fn estimate_errors(&self, sel: &Selector, span: Span) -> Vec<f64> {
        let mut out = Vec::new();
        for w in self.windows(span) {
            for (a, &(link, estimate)) in self.series.link_bps.get(w).into_iter().flatten().enumerate() {
                if let (Some(e), true) = (estimate, self.agg_matches(a, sel)) {
                    out.push((e / link - 1.0).abs());
                }
            }
        }
        out
    }

    /// Jain's index of every selected aggregate in every window, over flows with a non-zero rate.
    pub fn jain_samples(&self, sel: &Selector, span: Span) -> Vec<f64> {
        self.jain_windows(sel, span, false)
    }

    /// Jain's index of every selected aggregate in every window where one of its selected flows
    /// has goodput; over those flows only, or with `zeros` over all selected flows.
    fn jain_windows(&self, sel: &Selector, span: Span, zeros: bool) -> Vec<f64> {
        let naggs = self.summary.aggregates.len();
        let mut out = Vec::new();
        for w in self.windows(span) {
            let mut per_agg: Vec<Vec<f64>> = vec![Vec::new(); naggs];
            for (id, &g) in self.series.goodput_bps[w].iter().enumerate() {
                if (zeros || g > 0.0) && self.flow_matches(id, sel) {
                    per_agg[self.summary.flows[id].aggregate as usize].push(g);
                }
            }
            out.extend(per_agg.iter().filter_map(|xs| jain(xs)));
        }
        out
    }

    /// Completion times (s) of the selected finite flows, an unfinished one at the end of the run.
    fn fcts(&self, sel: &Selector) -> Vec<f64> {
        (0..self.summary.flows.len())
            .filter(|&i| self.flow_matches(i, sel) && self.summary.flows[i].completed.is_some())
            .map(|i| self.summary.flows[i].fct_s.unwrap_or(self.summary.covered_s()))
            .collect()
    }

    /// One value per selected flow that streamed video.
    fn video_values(&self, field: VideoField, sel: &Selector) -> Vec<f64> {
        let end = self.summary.covered_s();
        let flows = self.summary.flows.iter().enumerate().filter(|(i, _)| self.flow_matches(*i, sel));
        flows
            .filter_map(|(_, f)| {
                let v = f.video?;
                Some(match field {
                    VideoField::Join => v.join_s.unwrap_or(end - f.start_s),
                    VideoField::Rebuffer => v.rebuffer_s,
                    VideoField::Bitrate => v.mean_bitrate_bps,
                    VideoField::Rung => v.mean_rung,
                })
            })
            .collect()
    }

    fn goodput_sum(&self, sel: &Selector, span: Span) -> (f64, usize) {
        let mut sum = 0.0;
        let mut n = 0;
        for w in self.windows(span) {
            n += 1;
            sum += self.series.goodput_bps[w]
                .iter()
                .enumerate()
                .filter(|(id, _)| self.flow_matches(*id, sel))
                .map(|(_, g)| g)
                .sum::<f64>();
        }
        (sum, n)
    }

    pub fn value(&self, metric: Metric, sel: &Selector, over: Option<&Selector>, span: Span) -> f64 {
        let all = Selector::default();
        match metric {
            Metric::Throughput(s) => apply_stat(s, self.throughput_samples(sel, span)),
            Metric::Burst(s) => {
                apply_stat(s, self.throughput_samples(sel, span).into_iter().map(|x| (x - 1.0).max(0.0)).collect())
            }
            Metric::Wire(s) => apply_stat(s, self.wire_samples(sel, span)),
            Metric::EstimateError(s) => apply_stat(s, self.estimate_errors(sel, span)),
            Metric::WireBurst(s) => {
                apply_stat(s, self.wire_samples(sel, span).into_iter().map(|x| (x - 1.0).max(0.0)).collect())
            }
            Metric::Jain(s) => apply_stat(s, self.jain_samples(sel, span)),
            Metric::JainAll(s) => apply_stat(s, self.jain_windows(sel, span, true)),
            Metric::Unfairness(s) => apply_stat(s, self.jain_samples(sel, span).into_iter().map(|j| 1.0 - j).collect()),
            Metric::FlowUnfairness => {
                let xs: Vec<f64> = (0..self.summary.flows.len())
                    .filter(|&i| self.flow_matches(i, sel))
                    .map(|i| self.summary.flows[i].mean_goodput_bps)
                    .collect();
                jain(&xs).map_or(f64::NAN, |j| 1.0 - j)
            }
            Metric::UdpLoss => {
                let (mut sent, mut got) = (0.0, 0.0);
                for i in (0..self.summary.flows.len()).filter(|&i| self.flow_matches(i, sel)) {
                    if let Some(o) = self.udp_offered[i] {
                        sent += o;
                        got += self.summary.flows[i].delivered_bytes as f64;
                    }
                }
                if sent > 0.0 {
                    1.0 - got / sent
                } else {
                    f64::NAN
                }
            }
            Metric::DropRate => {
                let aggs = self.summary.aggregates.iter().filter(|a| self.agg_matches(a.id as usize, sel));
                let (d, n) = aggs.fold((0u64, 0u64), |(d, n), a| (d + a.enforcer_drops, n + a.arrivals));
                if n == 0 {
                    f64::NAN
                } else {
                    d as f64 / n as f64
                }
            }
            Metric::Share => {
                let (num, _) = self.goodput_sum(sel, span);
                let (den, _) = self.goodput_sum(over.unwrap_or(&all), span);
                num / den
            }
            Metric::Goodput => {
                let (num, n) = self.goodput_sum(sel, span);
                let rate: f64 =
                    self.summary.aggregates.iter().filter(|a| self.agg_matches(a.id as usize, sel)).map(|a| a.rate_bps).sum();
                num / n as f64 / rate
            }
            Metric::Ratio => {
                let mean = |s: &Selector| {
                    let xs: Vec<f64> = (0..self.summary.flows.len())
                        .filter(|&i| self.flow_matches(i, s))
                        .map(|i| self.summary.flows[i].mean_goodput_bps)
                        .collect();
                    xs.iter().sum::<f64>() / xs.len() as f64
                };
                mean(sel) / mean(over.unwrap_or(&all))
            }
            Metric::SpanRatio => {
                let per_flow = |s: &Selector| {
                    let n = (0..self.summary.flows.len()).filter(|&i| self.flow_matches(i, s)).count();
                    self.goodput_sum(s, span).0 / n as f64
                };
                per_flow(sel) / per_flow(over.unwrap_or(&all))
            }
            Metric::Delay(stat) => {
                let v = self.class_delay(stat, sel);
                over.map_or(v, |o| v / self.class_delay(stat, o))
            }
            Metric::ClassLoss => {
                let v = self.class_loss(sel);
                over.map_or(v, |o| v / self.class_loss(o))
            }
            Metric::SketchError(stat) => self.sketch.as_ref().map_or(f64::NAN, |s| apply_stat(stat, s.errors.clone())),
            Metric::SketchMisestimation => self.sketch.as_ref().map_or(f64::NAN, |s| s.misestimated_fraction),
            Metric::CostPerPacket => self.cost.map_or(f64::NAN, |(ratio, _)| ratio),
            Metric::Fct(stat) => apply_stat(stat, self.fcts(sel)),
            Metric::Video(field, stat) => apply_stat(stat, self.video_values(field, sel)),
            Metric::DetectPoliced => self.policed_fraction(),
            Metric::DetectNotPoliced => 1.0 - self.policed_fraction(),
            Metric::RateError(stat) => apply_stat(stat, self.rate_errors()),
            Metric::Utilization => {
                let us: Vec<f64> = self
                    .summary
                    .aggregates
                    .iter()
                    .filter(|a| self.agg_matches(a.id as usize, sel))
                    .filter_map(|a| a.path.as_ref().map(|p| p.link_utilization))
                    .collect();
                if us.is_empty() {
                    f64::NAN
                } else {
                    metrics::mean(&us)
                }
            }
            Metric::FctSpread => {
                let fcts = self.fcts(sel);
                let max = fcts.iter().cloned().fold(f64::NAN, f64::max);
                let min = fcts.iter().cloned().fold(f64::NAN, f64::min);
                max / min
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names() {
        let Metric::Throughput(Stat::Quantile(q)) = Metric::parse("throughput_p99.9").unwrap() else { panic!() };
        assert!((q - 0.999).abs() < 1e-12);
        let xs: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(apply_stat(Stat::Quantile(q), xs.clone()), 999.0);
        assert_eq!(apply_stat(Stat::Quantile(0.0), xs.clone()), 1.0);
        assert_eq!(apply_stat(Stat::Quantile(1.0), xs), 1000.0);
        assert_eq!(Metric::parse("jain_mean").unwrap(), Metric::Jain(Stat::Mean));
        assert_eq!(Metric::parse("jain_all_p10").unwrap(), Metric::JainAll(Stat::Quantile(0.1)));
        assert!(Metric::parse("jain_p200").is_err());
        assert!(Metric::parse("speed").is_err());
        assert_eq!(Metric::parse("delay_p99").unwrap(), Metric::Delay(Stat::Quantile(0.99)));
        assert!(Metric::parse("delay_p90").is_err(), "the enforcer does not report p90");
        assert_eq!(Metric::parse("sketch_error_mean").unwrap(), Metric::SketchError(Stat::Mean));
        assert_eq!(Metric::parse("class_loss").unwrap(), Metric::ClassLoss);
        assert_eq!(Metric::parse("rate_error_p50").unwrap(), Metric::RateError(Stat::Quantile(0.5)));
        assert_eq!(Metric::parse("detect_not_policed").unwrap(), Metric::DetectNotPoliced);
        assert_eq!(Metric::parse("wire_p50").unwrap(), Metric::Wire(Stat::Quantile(0.5)));
        assert_eq!(Metric::parse("wire_burst_mean").unwrap(), Metric::WireBurst(Stat::Mean));
        assert_eq!(apply_stat(Stat::Quantile(0.5), vec![3.0, 1.0, 2.0]), 2.0);
        assert!(apply_stat(Stat::Mean, vec![]).is_nan());
        assert_eq!(Metric::parse("fct_p99").unwrap(), Metric::Fct(Stat::Quantile(0.99)));
        assert_eq!(Metric::parse("fct_mean").unwrap(), Metric::Fct(Stat::Mean));
        assert_eq!(Metric::parse("fct_spread").unwrap(), Metric::FctSpread);
    }

    /// Finite flows of class 1 completing in 1..=100 ms, one unfinished, a class-0 backlogged flow.
    fn page_loads() -> RunResult {
        use crate::summary::FlowSummary;
        let flow = |id: u32, fct_s: Option<f64>, completed: Option<bool>| FlowSummary {
            id,
            aggregate: 0,
            cc: "cubic".into(),
            rtt_ms: 10.0,
            start_s: 1.0,
            mean_goodput_bps: 0.0,
            fct_s,
            completed,
            delivered_bytes: 0,
            counts: None,
            video: None,
        };
        let mut flows = vec![flow(0, None, None)];
        flows.extend((1..=100).map(|i| flow(i, Some(i as f64 / 1000.0), Some(true))));
        flows.push(flow(101, None, Some(false)));
        let n = flows.len();
        RunResult {
            summary: Summary { name: String::new(), seed: 1, duration_s: 10.0, simulated: None, testbed: None, flows, aggregates: vec![], engine: None },
            series: Series::default(),
            classes: (0..n).map(|i| u16::from(i > 0)).collect(),
            window_s: 0.25,
            warmup_s: 0.0,
            udp_offered: vec![None; n],
            sketch: None,
            detect: None,
            cost: None,
        }
    }

    /// Three video sessions (class 1; one never started) beside a bulk flow (class 0): the
    /// metrics read the sessions of the selected flows only, an unstarted one joining at the end.
    #[test]
    fn video_metrics_read_the_selected_sessions() {
        use crate::summary::VideoSummary;
        let mut r = page_loads();
        r.summary.flows.truncate(4);
        r.classes.truncate(4);
        let session = |join_s, rebuffer_s, rung: f64| VideoSummary {
            join_s,
            rebuffer_s,
            stalls: 1,
            mean_bitrate_bps: 1e6 * (rung + 1.0),
            mean_rung: rung,
            segments: 5,
            of_segments: 5,
        };
        r.summary.flows[1].video = Some(session(Some(0.5), 2.0, 1.0));
        r.summary.flows[2].video = Some(session(Some(1.5), 4.0, 3.0));
        r.summary.flows[3].video = Some(session(None, 0.0, 0.0));
        let v = |m: &str, sel: &Selector| r.value(Metric::parse(m).unwrap(), sel, None, Span::default());
        let videos = Selector { class: Some(1), ..Selector::default() };
        assert_eq!(v("video_rebuffer_mean", &videos), 2.0);
        assert_eq!(v("video_rebuffer_p100", &videos), 4.0);
        assert_eq!(v("video_join_p100", &videos), 9.0, "the unstarted session (start 1 s) joins at the run's end, 10 s");
        assert_eq!(v("video_join_p0", &videos), 0.5);
        assert_eq!(v("video_rung_mean", &Selector { flows: Some(vec![1, 2]), ..Selector::default() }), 2.0);
        assert_eq!(v("video_bitrate_mean", &Selector { flows: Some(vec![2]), ..Selector::default() }), 4e6);
        assert!(v("video_join_mean", &Selector { class: Some(0), ..Selector::default() }).is_nan(), "no session");
        assert!(Metric::parse("video_stall_mean").is_err());
    }

    #[test]
    fn completion_time_percentiles_count_finite_flows_and_the_unfinished_at_the_end() {
        let r = page_loads();
        let web = Selector { class: Some(1), ..Selector::default() };
        let v = |m: &str, sel: &Selector| r.value(Metric::parse(m).unwrap(), sel, None, Span::default());
        // 101 finite flows: 1..=100 ms and one unfinished at the run's end (10 s), which is the largest.
        assert_eq!(v("fct_p50", &web), 0.051);
        assert_eq!(v("fct_p99", &web), 0.1);
        assert_eq!(v("fct_p100", &web), 10.0);
        assert_eq!(v("fct_p0", &web), 0.001);
        assert!((v("fct_mean", &web) - (5.05 + 10.0) / 101.0).abs() < 1e-12);
        // The backlogged flow has no completion time; selecting it alone gives no sample.
        assert!(v("fct_p99", &Selector { class: Some(0), ..Selector::default() }).is_nan());
        assert_eq!(v("fct_spread", &Selector { flows: Some(vec![1, 10]), ..Selector::default() }), 10.0);
    }
}
