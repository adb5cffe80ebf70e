//! The event loop: drives the components, measures every window and writes the time series.

use super::measure::WindowSamples;
use super::{Comp, World};
use crate::engine::ComponentId;
use crate::packet::{Kind, Pkt, HEADER};
use crate::stats::AggCounters;
use ratekit_lab::scenario::Resolved;
use ratekit_lab::series::Series;
use ratekit_lab::summary::{self, Summary};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// How a run is driven from outside.
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Where flows.csv, aggregates.csv and summary.json go; `None` keeps results in memory.
    pub out_dir: Option<&'a Path>,
    /// Set from another thread (Ctrl-C) to stop at the next window boundary.
    pub stop: Option<&'a AtomicBool>,
    /// Called at each window boundary with the fraction of simulated time done.
    pub progress: Option<&'a mut dyn FnMut(f64)>,
    /// Per-flow cwnd samples at every window boundary are kept in memory for tests.
    pub keep_series: bool,
    /// Sees every packet where the testbed's captures see it (`[testbed] pcap`).
    pub tap: Option<&'a mut Tap<'a>>,
}

/// Where a capture sees a packet: the testbed's taps on the sender's and the receiver's veth
/// peers (docs/testbed.md, "Captures").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapPoint {
    /// Data and SYNs as they leave the sender's NIC, ACKs as they reach the sender.
    Sender,
    /// Data as it reaches the receiver (after every enforcer and delay), ACKs as they leave it.
    Receiver,
}

/// Called with the time (ns) and the packet at each tap point it passes.
pub type Tap<'a> = dyn FnMut(TapPoint, u64, &Pkt) + 'a;

/// Which tap, if any, sees a packet about to arrive at hop `hop` of its route.
fn tap_point(p: &Pkt, at_endpoint: bool) -> Option<TapPoint> {
    match (p.kind.is_reverse(), p.hop) {
        (false, 1) => Some(TapPoint::Sender),
        (false, _) if at_endpoint => Some(TapPoint::Receiver),
        (true, 0) => Some(TapPoint::Receiver),
        (true, _) if at_endpoint => Some(TapPoint::Sender),
        _ => None,
    }
}

impl World {
    fn handle(&mut self, target: ComponentId, tap: &mut Option<&mut Tap<'_>>) {
        match &mut self.comps[target as usize] {
            Comp::Sender(s) => s.on_timer(&mut self.ctx),
            Comp::Udp(u) => u.on_timer(&mut self.ctx),
            Comp::Receiver(r) => r.on_timer(&mut self.ctx),
            Comp::Link(l) => l.on_timer(&mut self.ctx),
            Comp::Pipe(p) => p.on_timer(&mut self.ctx),
            Comp::Sink { .. } | Comp::Enf(_) => {}
        }
        self.drain(tap);
    }

    /// Delivers every packet handed on during the last handler, in order, through zero-delay
    /// hops (which may hand on more).
    fn drain(&mut self, tap: &mut Option<&mut Tap<'_>>) {
        let mut i = 0;
        while i < self.ctx.out.len() {
            let idx = self.ctx.out[i];
            i += 1;
            let p = *self.ctx.pool.get(idx);
            let start = self.route_start[2 * p.flow as usize + p.kind.is_reverse() as usize];
            let target = self.route_hops[start as usize + p.hop as usize];
            if let Some(tap) = tap {
                let at_endpoint = matches!(self.comps[target as usize], Comp::Receiver(_) | Comp::Sink { .. } | Comp::Sender(_));
                if let Some(point) = tap_point(&p, at_endpoint) {
                    tap(point, self.ctx.ev.now(), &p);
                }
            }
            self.ctx.pool.get_mut(idx).hop += 1;
            let ctx = &mut self.ctx;
            match &mut self.comps[target as usize] {
                Comp::Link(l) => l.arrive(ctx, idx),
                Comp::Pipe(pp) => pp.arrive(ctx, idx),
                Comp::Enf(e) => e.arrive(ctx, idx),
                Comp::Receiver(r) => {
                    ctx.pool.release(idx);
                    if p.kind == Kind::Data {
                        self.wire_window[p.flow as usize] += (p.len - HEADER) as u64;
                    }
                    r.on_packet(ctx, &p);
                    if p.kind == Kind::Data && r.video {
                        let delivered = r.delivered_bytes;
                        if let Comp::Sender(s) = &mut self.comps[self.flows[p.flow as usize].sender as usize] {
                            let request = s.app.player_mut().and_then(|pl| pl.on_delivered(ctx.ev.now(), delivered));
                            // The sender's wake-up (named for its first use, the SYN): it polls the
                            // app, which hands the requested segment to TCP.
                            if let Some(at) = request {
                                s.schedule_start(ctx, at);
                            }
                        }
                    }
                }
                Comp::Sink { bytes, window_bytes } => {
                    ctx.pool.release(idx);
                    let payload = p.len.saturating_sub(28) as u64;
                    self.wire_window[self.owner[p.flow as usize] as usize] += payload;
                    *bytes += payload;
                    *window_bytes += payload;
                }
                Comp::Sender(s) => {
                    ctx.pool.release(idx);
                    s.on_packet(ctx, &p);
                }
                Comp::Udp(_) => unreachable!("nothing is routed to a UDP source"),
            }
        }
        self.ctx.out.clear();
    }

    /// Runs the scenario to its end (or until `stop`), measuring every window.
    pub fn run(mut self, r: &Resolved, seed: u64, mut opts: RunOptions) -> std::io::Result<(Summary, Series)> {
        let wall = std::time::Instant::now();
        let end = r.scenario.duration.0;
        let window = r.scenario.measure.window.0;
        let warmup = r.scenario.measure.warmup.0;
        let mut writers = match opts.out_dir {
            Some(d) => {
                std::fs::create_dir_all(d)?;
                let mut f = BufWriter::new(std::fs::File::create(d.join("flows.csv"))?);
                writeln!(f, "time_s,flow,aggregate,goodput_bps,cwnd_segments,srtt_ms,bbr_bw_mbps,bbr_min_rtt_ms,bbr_pacing_gain")?;
                let mut a = BufWriter::new(std::fs::File::create(d.join("aggregates.csv"))?);
                writeln!(a, "time_s,aggregate,throughput_bps,normalized_throughput,arrivals,enforcer_drops,queue_drops,jain,link_rate_bps,rate_estimate_bps")?;
                Some((f, a))
            }
            None => None,
        };
        let nflows = self.flows.len();
        let naggs = self.agg_rates_bps.len();
        let mut samples = WindowSamples::new(naggs);
        let mut series = Series::default();
        let mut prev = vec![AggCounters::default(); naggs];
        let mut window_start = 0u64;
        let mut interrupted = false;
        loop {
            let tick = (window_start + window).min(end);
            while let Some(target) = self.ctx.ev.pop_until(tick) {
                self.handle(target, &mut opts.tap);
            }
            self.ctx.ev.advance_to(tick);
            let dt = (tick - window_start) as f64 * 1e-9;
            let t_s = tick as f64 * 1e-9;
            let mut agg_bytes = vec![0u64; naggs];
            let mut agg_active: Vec<Vec<f64>> = vec![Vec::new(); naggs];
            let mut gp_row = Vec::with_capacity(if opts.keep_series { nflows } else { 0 });
            let mut cwnd_row = Vec::with_capacity(gp_row.capacity());
            let wire_row = std::mem::replace(&mut self.wire_window, vec![0; nflows]);
            for (fid, m) in self.flows.iter().enumerate() {
                let (cwnd, srtt_ms, bbr) = match &self.comps[m.sender as usize] {
                    Comp::Sender(tx) => (tx.cwnd(), tx.srtt_ns() as f64 / 1e6, tx.cc.bbr_model()),
                    _ => (0, 0.0, None),
                };
                let (bytes, done_before) = match &mut self.comps[m.receiver as usize] {
                    Comp::Receiver(rx) => {
                        (std::mem::take(&mut rx.window_bytes), rx.completed_ns.is_some_and(|t| t <= window_start))
                    }
                    Comp::Sink { window_bytes, .. } => (std::mem::take(window_bytes), false),
                    _ => unreachable!(),
                };
                let gp = bytes as f64 * 8.0 / dt;
                let a = m.aggregate as usize;
                agg_bytes[a] += bytes;
                let started = m.start_ns < tick;
                let stopped = m.stop_ns <= window_start;
                if bytes > 0 || (m.continuous && started && !done_before && !stopped && m.start_ns <= window_start) {
                    agg_active[a].push(gp);
                }
                if let Some((f, _)) = writers.as_mut() {
                    write!(f, "{t_s:.3},{fid},{a},{gp:.0},{cwnd},{srtt_ms:.3},")?;
                    match bbr.filter(|b| b.min_rtt_ns != u64::MAX) {
                        Some(b) => writeln!(f, "{:.4},{:.3},{:.2}", b.bw_bytes_per_sec * 8e-6, b.min_rtt_ns as f64 / 1e6, b.pacing_gain)?,
                        None => writeln!(f, ",,")?,
                    }
                }
                if opts.keep_series {
                    gp_row.push(gp);
                    cwnd_row.push(cwnd);
                }
            }
            let mut norm_row = Vec::new();
            let mut link_row = Vec::with_capacity(naggs);
            for a in 0..naggs {
                let (link_bps, estimate_bps) = match &self.comps[self.agg_links[a] as usize] {
                    Comp::Link(l) => (l.rate().bits_per_sec() as f64, l.rate_estimate().map(|b| b * 8.0)),
                    _ => unreachable!("an aggregate's link is a link"),
                };
                link_row.push((link_bps, estimate_bps));
                let thr = agg_bytes[a] as f64 * 8.0 / dt;
                let norm = thr / self.agg_rates_bps[a];
                let j = ratekit_core::metrics::jain(&agg_active[a]);
                let c = self.ctx.aggs[a];
                let p = prev[a];
                if let Some((_, w)) = writers.as_mut() {
                    writeln!(
                        w,
                        "{t_s:.3},{a},{thr:.0},{norm:.4},{},{},{},{},{link_bps:.0},{}",
                        c.arrivals - p.arrivals,
                        c.enforcer_drops - p.enforcer_drops,
                        c.queue_drops - p.queue_drops,
                        j.map_or(String::new(), |j| format!("{j:.4}")),
                        estimate_bps.map_or(String::new(), |e| format!("{e:.0}"))
                    )?;
                }
                prev[a] = c;
                if window_start >= warmup {
                    if norm > 0.0 {
                        samples.norm[a].push(norm);
                    }
                    if let Some(j) = j {
                        samples.jain[a].push(j);
                    }
                }
                norm_row.push(norm);
            }
            if opts.keep_series {
                series.goodput_bps.push(gp_row);
                series.cwnd.push(cwnd_row);
                series.normalized.push(norm_row);
                series.wire_bytes.push(wire_row);
                series.link_bps.push(link_row);
            }
            if let Some((f, a)) = writers.as_mut() {
                f.flush()?;
                a.flush()?;
            }
            if let Some(p) = opts.progress.as_mut() {
                p(tick as f64 / end as f64);
            }
            window_start = tick;
            if tick >= end {
                break;
            }
            if opts.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                interrupted = true;
                break;
            }
        }
        let sim_end = window_start;
        let wall_s = wall.elapsed().as_secs_f64();
        let summary = self.summary(r, seed, sim_end, wall_s, interrupted, &mut samples);
        if let Some(d) = opts.out_dir {
            summary::write(&summary, &d.join("summary.json"))?;
            write_video_csv(&summary, d)?;
        }
        Ok((summary, series))
    }
}

/// video.csv: one row per video flow's session (summary.json's `video`), when there are any.
fn write_video_csv(summary: &Summary, dir: &Path) -> std::io::Result<()> {
    let sessions: Vec<_> = summary.flows.iter().filter_map(|f| f.video.map(|v| (f, v))).collect();
    if sessions.is_empty() {
        return Ok(());
    }
    let mut w = BufWriter::new(std::fs::File::create(dir.join("video.csv"))?);
    writeln!(w, "flow,aggregate,join_s,rebuffer_s,stalls,mean_bitrate_bps,mean_rung,segments,of_segments")?;
    for (f, v) in sessions {
        let join = v.join_s.map_or(String::new(), |j| format!("{j:.3}"));
        writeln!(
            w,
            "{},{},{join},{:.3},{},{:.0},{:.3},{},{}",
            f.id, f.aggregate, v.rebuffer_s, v.stalls, v.mean_bitrate_bps, v.mean_rung, v.segments, v.of_segments
        )?;
    }
    w.flush()
}
