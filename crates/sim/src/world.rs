//! The simulated network: builds components from a resolved scenario, runs the event loop,
//! measures per window and writes the time series and the summary.
//!
//! Topology per flow: sender → NIC link (host_rate) → the aggregate's enforcement point (random
//! loss, policer) → the aggregate's link (link_rate; drop-tail, or the queueing enforcer) → the
//! enforcement points and links of the aggregates named in its `via`, in order → optional
//! secondary bottleneck → forward pipe (RTT/2) → receiver; ACKs: reverse pipe (RTT/2)
//! → sender. Zero-delay hops are function calls in FIFO order; only timers and transmissions
//! are events.

use crate::app::{App, UdpSource};
use crate::cc::{Cc, CcKind};
use crate::engine::{ComponentId, EventList};
use crate::net::{EnforcementPoint, Link, LinkQueue, Pipe};
use crate::packet::{Kind, Pkt, Pool, HEADER};
use crate::scenario::Resolved;
use crate::summary::{self, AggSummary, EnfStats, EngineSummary, FlowEnf, FlowSummary, Summary};
use crate::tcp::{TcpReceiver, TcpSender};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::Enforcer;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Per-aggregate counters, shared by the elements that see the aggregate's packets.
#[derive(Debug, Clone, Copy, Default)]
pub struct AggCounters {
    pub arrivals: u64,
    pub enforcer_drops: u64,
    pub queue_drops: u64,
    pub random_losses: u64,
    /// IP bytes the aggregate's own link sent after the warm-up.
    pub link_bytes: u64,
}

/// What every component may touch while handling an event.
#[derive(Default)]
pub struct Ctx {
    pub ev: EventList,
    pub pool: Pool,
    /// Packets handed to their next hop, delivered in FIFO order after the handler returns.
    pub out: Vec<u32>,
    pub aggs: Vec<AggCounters>,
    /// Per flow: (flow key for the core's classifiers, explicit class, customer for
    /// `Packet::aggregate`).
    pub flow_keys: Vec<(u64, u16, u64)>,
    /// Per-flow and per-class statistics at the enforcers.
    pub enf: EnfStats,
}

impl Ctx {
    #[inline]
    pub fn send(&mut self, p: Pkt) {
        let i = self.pool.alloc(p);
        self.out.push(i);
    }
}

/// Small variants inline, big ones boxed: the component array is walked in event order, so
/// its footprint decides the cache misses per event.
enum Comp {
    Sender(Box<TcpSender>),
    Udp(Box<UdpSource>),
    Receiver(Box<TcpReceiver>),
    Sink { bytes: u64, window_bytes: u64 },
    Link(Box<Link>),
    Pipe(Pipe),
    Enf(Box<EnforcementPoint>),
}

struct FlowMeta {
    aggregate: u32,
    cc: Option<CcKind>,
    rtt_ms: f64,
    start_ns: u64,
    sender: ComponentId,
    receiver: ComponentId,
    continuous: bool,
    finite: bool,
    /// When the application stops offering data (u64::MAX: never).
    stop_ns: u64,
}

/// A flow's routes before the `via` hops are known: its data route, where the `via` hops go in
/// it, the `via` aggregate ids, and its ACK route.
type RoutePlan<'a> = (Vec<ComponentId>, usize, &'a [u32], [ComponentId; 2]);

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
}

/// Per-window samples, kept when `keep_series` is set.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// [window][flow] goodput in bits/s.
    pub goodput_bps: Vec<Vec<f64>>,
    /// [window][flow] cwnd in segments (0 for UDP).
    pub cwnd: Vec<Vec<u32>>,
    /// [window][aggregate] normalised throughput.
    pub normalized: Vec<Vec<f64>>,
    /// [window][flow] payload bytes that arrived at the receiver, in order or not, duplicates
    /// included (what a capture at the receiver counts; UDP: as goodput).
    pub wire_bytes: Vec<Vec<u64>>,
}

pub struct World {
    ctx: Ctx,
    comps: Vec<Comp>,
    flows: Vec<FlowMeta>,
    /// Every route's hops back to back: flow f's data route starts at `route_start[2f]`, its
    /// ACK route at `route_start[2f + 1]`.
    route_hops: Vec<ComponentId>,
    route_start: Vec<u32>,
    agg_rates_bps: Vec<f64>,
    agg_kinds: Vec<&'static str>,
    /// Per flow: payload bytes arrived at the receiver in the current window.
    wire_window: Vec<u64>,
    /// Per flow id, the scenario flow it belongs to: itself, or for the relabel ids after the
    /// scenario's flows (a UDP source's `class_fraction` datagrams), the source's flow.
    owner: Vec<u32>,
}

fn mix(seed: u64, salt: u64) -> u64 {
    // splitmix64: independent per-component streams from one scenario seed.
    let mut z = seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl World {
    pub fn build(r: &Resolved, seed: u64) -> Result<World, String> {
        let mut comps: Vec<Comp> = Vec::new();
        let mut flows = Vec::new();
        let mut ctx = Ctx {
            ev: EventList::default(),
            pool: Pool::default(),
            out: Vec::new(),
            aggs: vec![AggCounters::default(); r.aggregates.len()],
            flow_keys: Vec::new(),
            enf: EnfStats {
                from_ns: r.scenario.measure.warmup.0,
                classes: vec![Vec::new(); r.aggregates.len()],
                ..EnfStats::default()
            },
        };
        let mut agg_rates_bps = Vec::new();
        let mut agg_kinds = Vec::new();
        let mut starts = Vec::new();
        // Per aggregate: its enforcement point and link, the hops a `via` flow crosses.
        let mut agg_hops = Vec::new();
        // Per flow: (data route without the `via` hops, where they go, `via`), ACK route.
        let mut plans: Vec<RoutePlan> = Vec::new();
        // Datagrams of a UDP source's other class travel under an extra flow id after the
        // scenario's flows, with that class and the source's key, customer and route: the
        // enforcers look the class up by flow id. Per flow: the extra id's plan and keys.
        let nflows_total: usize = r.aggregates.iter().map(|a| a.flows.len()).sum();
        let mut relabels: Vec<(RoutePlan, (u64, u16, u64), u32)> = Vec::new();
        for a in &r.aggregates {
            agg_rates_bps.push(a.rate.bits_per_sec() as f64);
            agg_kinds.push(a.enforcer.kind());
            let built = a.enforcer.build(Some(a.cfg.link_rate)).map_err(|e| format!("aggregates[{}].enforcer.{}", a.id, e))?;
            let (policer, queue) = match built {
                Enforcer::Policer(p) => (Some(p), Link::drop_tail(a.cfg.buffer.0)),
                Enforcer::Queue(q) => (None, LinkQueue::Enforcer(Box::new(q))),
            };
            let enf_id = comps.len() as ComponentId;
            let rng = ChaCha8Rng::seed_from_u64(mix(seed, 0xE0F0_0000 + a.id as u64));
            comps.push(Comp::Enf(Box::new(EnforcementPoint::new(a.id, a.cfg.loss, rng, policer))));
            let link_id = comps.len() as ComponentId;
            comps.push(Comp::Link(Box::new(Link::new(link_id, a.id, a.cfg.link_rate, queue).measured())));
            agg_hops.push([enf_id, link_id]);
            let secondary = a.cfg.secondary.as_ref().map(|s| {
                let id = comps.len() as ComponentId;
                comps.push(Comp::Link(Box::new(Link::new(id, a.id, s.rate, Link::drop_tail(s.buffer.0)))));
                id
            });
            for f in &a.flows {
                let fid = flows.len() as u32;
                let mut rng = ChaCha8Rng::seed_from_u64(mix(seed, fid as u64));
                let jitter = if f.start_jitter.0 > 0 { rng.gen_range(0..f.start_jitter.0) } else { 0 };
                let start_ns = f.start.0 + jitter;
                let stop_ns = f.stop.map(|d| d.0);
                let nic = comps.len() as ComponentId;
                comps.push(Comp::Link(Box::new(Link::new(nic, a.id, a.cfg.host_rate, Link::drop_tail(u64::MAX)))));
                let half = f.rtt.0 / 2;
                let fwd = comps.len() as ComponentId;
                comps.push(Comp::Pipe(Pipe::new(fwd, half)));
                let rev = comps.len() as ComponentId;
                comps.push(Comp::Pipe(Pipe::new(rev, f.rtt.0 - half)));
                let sender = comps.len() as ComponentId;
                let receiver = sender + 1;
                let udp = f.app.is_udp();
                if udp {
                    let relabel_flow = f.app.class_fraction().map(|_| (nflows_total + relabels.len()) as u32);
                    comps.push(Comp::Udp(Box::new(UdpSource::new(sender, fid, &f.app, rng, stop_ns, relabel_flow))));
                    comps.push(Comp::Sink { bytes: 0, window_bytes: 0 });
                } else {
                    let app = App::new(&f.app, rng, stop_ns);
                    let finite = app.finite_shape();
                    let cc = Cc::new(f.cc, mix(seed, 0xCC00_0000 + fid as u64));
                    let mut tx = TcpSender::new(sender, fid, cc, app);
                    tx.set_pacing(f.pacing);
                    comps.push(Comp::Sender(Box::new(tx)));
                    comps.push(Comp::Receiver(Box::new(TcpReceiver::new(receiver, fid, finite))));
                }
                let mut data_route = vec![nic, enf_id, link_id];
                data_route.extend(secondary);
                data_route.extend([fwd, receiver]);
                // The flow key stands for the 5-tuple, whose ephemeral port differs from run to
                // run: drawn from the seed, so hashed queues and sketch cells collide per seed with
                // the real probability (a key fixed per flow id never made 4 flows share one of
                // 16 queues, where Linux runs do about one time in three).
                let keys = (mix(seed ^ 0xF10F, fid as u64), f.class, f.customer.unwrap_or(a.id) as u64);
                if let Some((_, class)) = f.app.class_fraction().filter(|_| udp) {
                    relabels.push(((data_route.clone(), 3, &f.via, [rev, sender]), (keys.0, class, keys.2), fid));
                }
                plans.push((data_route, 3, &f.via, [rev, sender]));
                starts.push((sender, start_ns));
                ctx.flow_keys.push(keys);
                ctx.enf.flow_agg.push(a.id);
                ctx.enf.flows.push(FlowEnf::default());
                flows.push(FlowMeta {
                    aggregate: a.id,
                    cc: (!udp).then_some(f.cc),
                    rtt_ms: f.rtt.0 as f64 / 1e6,
                    start_ns,
                    sender,
                    receiver,
                    continuous: matches!(f.app, crate::app::AppConfig::Backlogged | crate::app::AppConfig::Finite { .. }),
                    finite: f.app.is_finite(),
                    stop_ns: stop_ns.unwrap_or(u64::MAX),
                });
            }
        }
        let mut owner: Vec<u32> = (0..flows.len() as u32).collect();
        for (plan, keys, fid) in relabels {
            plans.push(plan);
            ctx.flow_keys.push(keys);
            // Never its aggregate's: the per-flow enforcer statistics count the source's own
            // class; the per-class ones count both.
            ctx.enf.flow_agg.push(u32::MAX);
            ctx.enf.flows.push(FlowEnf::default());
            owner.push(fid);
        }
        let mut route_hops = Vec::new();
        let mut route_start = Vec::new();
        for (mut data, at, via, ack) in plans {
            data.splice(at..at, via.iter().flat_map(|&v| agg_hops[v as usize]));
            for route in [&data[..], &ack[..]] {
                route_start.push(route_hops.len() as u32);
                route_hops.extend_from_slice(route);
            }
        }
        for (sender, at) in starts {
            match &mut comps[sender as usize] {
                Comp::Sender(s) => s.schedule_start(&mut ctx, at),
                Comp::Udp(u) => u.schedule_start(&mut ctx, at),
                _ => unreachable!(),
            }
        }
        let wire_window = vec![0; flows.len()];
        Ok(World { ctx, comps, flows, route_hops, route_start, agg_rates_bps, agg_kinds, wire_window, owner })
    }

    fn handle(&mut self, target: ComponentId) {
        match &mut self.comps[target as usize] {
            Comp::Sender(s) => s.on_timer(&mut self.ctx),
            Comp::Udp(u) => u.on_timer(&mut self.ctx),
            Comp::Receiver(r) => r.on_timer(&mut self.ctx),
            Comp::Link(l) => l.on_timer(&mut self.ctx),
            Comp::Pipe(p) => p.on_timer(&mut self.ctx),
            Comp::Sink { .. } | Comp::Enf(_) => {}
        }
        self.drain();
    }

    /// Delivers every packet handed on during the last handler, in order, through zero-delay
    /// hops (which may hand on more).
    fn drain(&mut self) {
        let mut i = 0;
        while i < self.ctx.out.len() {
            let idx = self.ctx.out[i];
            i += 1;
            let p = *self.ctx.pool.get(idx);
            let start = self.route_start[2 * p.flow as usize + (p.kind == Kind::Ack) as usize];
            let target = self.route_hops[start as usize + p.hop as usize];
            self.ctx.pool.get_mut(idx).hop += 1;
            let ctx = &mut self.ctx;
            match &mut self.comps[target as usize] {
                Comp::Link(l) => l.arrive(ctx, idx),
                Comp::Pipe(pp) => pp.arrive(ctx, idx),
                Comp::Enf(e) => e.arrive(ctx, idx),
                Comp::Receiver(r) => {
                    ctx.pool.release(idx);
                    self.wire_window[p.flow as usize] += (p.len - HEADER) as u64;
                    r.on_data(ctx, p.seq, p.len - HEADER);
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
                    s.on_ack(ctx, p.ack, p.sack);
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
                writeln!(f, "time_s,flow,aggregate,goodput_bps,cwnd_segments,srtt_ms")?;
                let mut a = BufWriter::new(std::fs::File::create(d.join("aggregates.csv"))?);
                writeln!(a, "time_s,aggregate,throughput_bps,normalized_throughput,arrivals,enforcer_drops,queue_drops,jain")?;
                Some((f, a))
            }
            None => None,
        };
        let nflows = self.flows.len();
        let naggs = self.agg_rates_bps.len();
        let mut norm_samples: Vec<Vec<f64>> = vec![Vec::new(); naggs];
        let mut jain_samples: Vec<Vec<f64>> = vec![Vec::new(); naggs];
        let mut series = Series::default();
        let mut prev = vec![AggCounters::default(); naggs];
        let mut window_start = 0u64;
        let mut interrupted = false;
        loop {
            let tick = (window_start + window).min(end);
            while let Some(target) = self.ctx.ev.pop_until(tick) {
                self.handle(target);
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
                let (cwnd, srtt_ms) = match &self.comps[m.sender as usize] {
                    Comp::Sender(tx) => (tx.cwnd(), tx.srtt_ns() as f64 / 1e6),
                    _ => (0, 0.0),
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
                    writeln!(f, "{t_s:.3},{fid},{a},{gp:.0},{cwnd},{srtt_ms:.3}")?;
                }
                if opts.keep_series {
                    gp_row.push(gp);
                    cwnd_row.push(cwnd);
                }
            }
            let mut norm_row = Vec::new();
            for a in 0..naggs {
                let thr = agg_bytes[a] as f64 * 8.0 / dt;
                let norm = thr / self.agg_rates_bps[a];
                let j = ratekit_core::metrics::jain(&agg_active[a]);
                let c = self.ctx.aggs[a];
                let p = prev[a];
                if let Some((_, w)) = writers.as_mut() {
                    writeln!(
                        w,
                        "{t_s:.3},{a},{thr:.0},{norm:.4},{},{},{},{}",
                        c.arrivals - p.arrivals,
                        c.enforcer_drops - p.enforcer_drops,
                        c.queue_drops - p.queue_drops,
                        j.map_or(String::new(), |j| format!("{j:.4}"))
                    )?;
                }
                prev[a] = c;
                if window_start >= warmup {
                    if norm > 0.0 {
                        norm_samples[a].push(norm);
                    }
                    if let Some(j) = j {
                        jain_samples[a].push(j);
                    }
                }
                norm_row.push(norm);
            }
            if opts.keep_series {
                series.goodput_bps.push(gp_row);
                series.cwnd.push(cwnd_row);
                series.normalized.push(norm_row);
                series.wire_bytes.push(wire_row);
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
        let events = self.ctx.ev.executed();
        let flows = self
            .flows
            .iter()
            .enumerate()
            .map(|(id, m)| {
                let (bytes, fct, retx, rto) = match (&self.comps[m.receiver as usize], &self.comps[m.sender as usize]) {
                    (Comp::Receiver(rx), Comp::Sender(tx)) => (
                        rx.delivered_bytes,
                        rx.completed_ns.map(|t| (t - m.start_ns) as f64 * 1e-9),
                        tx.stats.retransmits,
                        tx.stats.timeouts,
                    ),
                    (Comp::Sink { bytes, .. }, _) => (*bytes, None, 0, 0),
                    _ => unreachable!(),
                };
                let active_end = fct.map_or(sim_end.min(m.stop_ns), |f| m.start_ns + (f * 1e9) as u64);
                let active = active_end.saturating_sub(m.start_ns) as f64 * 1e-9;
                FlowSummary {
                    id: id as u32,
                    aggregate: m.aggregate,
                    cc: m.cc.map_or("udp", |c| c.as_str()).to_string(),
                    rtt_ms: m.rtt_ms,
                    mean_goodput_bps: if active > 0.0 { bytes as f64 * 8.0 / active } else { 0.0 },
                    fct_s: fct,
                    completed: m.finite.then_some(fct.is_some()),
                    delivered_bytes: bytes,
                    retransmits: retx,
                    timeouts: rto,
                    enforcer_arrivals: self.ctx.enf.flows[id].arrivals,
                    enforcer_drops: self.ctx.enf.flows[id].drops,
                    queue_delay_mean_ms: self.ctx.enf.flows[id].delay.mean_ms(),
                    queue_delay_p99_ms: self.ctx.enf.flows[id].delay.percentile_ms(0.99),
                }
            })
            .collect();
        let aggregates = (0..naggs)
            .map(|a| {
                let c = self.ctx.aggs[a];
                let measured_s = sim_end.saturating_sub(warmup) as f64 * 1e-9;
                let capacity = r.aggregates[a].cfg.link_rate.bits_per_sec() as f64 / 8.0 * measured_s;
                let utilization = if capacity > 0.0 { c.link_bytes as f64 / capacity } else { 0.0 };
                AggSummary {
                    link_utilization: utilization,
                    classes: self.ctx.enf.class_summaries(a),
                    ..AggSummary::new(
                        a as u32,
                        self.agg_rates_bps[a],
                        self.agg_kinds[a],
                        &mut norm_samples[a],
                        &jain_samples[a],
                        c,
                    )
                }
            })
            .collect();
        let summary = Summary {
            name: r.scenario.name.clone(),
            seed,
            duration_s: end as f64 * 1e-9,
            simulated_s: sim_end as f64 * 1e-9,
            interrupted,
            flows,
            aggregates,
            engine: EngineSummary {
                events,
                wall_seconds: wall_s,
                events_per_second: if wall_s > 0.0 { events as f64 / wall_s } else { 0.0 },
            },
        };
        if let Some(d) = opts.out_dir {
            summary::write(&summary, &d.join("summary.json"))?;
        }
        Ok((summary, series))
    }
}
