//! Constructing the world from a resolved scenario: components, routes, per-flow seeds and keys.

use super::{Comp, FlowMeta, World};
use crate::app::{App, UdpSource};
use crate::cc::Cc;
use crate::ctx::Ctx;
use crate::engine::{ComponentId, EventList};
use crate::jitter::Jitter;
use crate::net::{EnforcementPoint, Link, Pipe};
use crate::packet::Pool;
use crate::stats::{AggCounters, EnfStats, FlowEnf};
use crate::tcp::receiver::TcpReceiver;
use crate::tcp::sender::{first_write_delay_ns, TcpSender};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use ratekit_core::Enforcer;
use ratekit_lab::scenario::seeding::{self, mix};
use ratekit_lab::scenario::{AppConfig, Resolved};

/// A flow's routes before the `via` hops are known: its data route, where the `via` hops go in
/// it, the `via` aggregate ids, and its ACK route.
type RoutePlan<'a> = (Vec<ComponentId>, usize, &'a [u32], [ComponentId; 2]);

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
        let mut agg_links = Vec::new();
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
        // A file written for the testbed runs its path here too: the forward delay's place moves
        // flows of different RTTs against each other at their start (docs/testbed.md, "BC-PQP's
        // first windows").
        let delay_before_enforcer = r.scenario.testbed.enforcer_at.after_forward_delay();
        for a in &r.aggregates {
            agg_rates_bps.push(a.rate.bits_per_sec() as f64);
            agg_kinds.push(a.enforcer.kind());
            let built = a.enforcer.build(Some(a.cfg.link_rate)).map_err(|e| format!("aggregates[{}].enforcer.{}", a.id, e))?;
            let (policer, queue) = match built {
                Enforcer::Policer(p) => (Some(p), Link::drop_tail(a.cfg.buffer.0)),
                Enforcer::Queue(q) => (None, Link::enforcer(q, a.cfg.link_rate)),
            };
            let enf_id = comps.len() as ComponentId;
            let rng = ChaCha8Rng::seed_from_u64(mix(seed, 0xE0F0_0000 + a.id as u64));
            comps.push(Comp::Enf(Box::new(EnforcementPoint::new(a.id, a.cfg.loss, rng, policer))));
            let link_id = comps.len() as ComponentId;
            let steps = a.cfg.link_steps.iter().map(|s| (s.at.0, s.rate)).collect();
            comps.push(Comp::Link(Box::new(Link::new(link_id, a.id, a.cfg.link_rate, queue).measured().with_steps(steps))));
            agg_links.push(link_id);
            agg_hops.push([enf_id, link_id]);
            let secondary = a.cfg.secondary.as_ref().map(|s| {
                let id = comps.len() as ComponentId;
                comps.push(Comp::Link(Box::new(Link::new(id, a.id, s.rate, Link::drop_tail(s.buffer.0)))));
                id
            });
            for f in &a.flows {
                let fid = flows.len() as u32;
                let mut rng = seeding::flow_rng(seed, fid);
                let start_ns = seeding::start_ns(f.start, f.start_jitter, &mut rng);
                let stop_ns = f.stop.map(|d| d.0);
                let nic = comps.len() as ComponentId;
                comps.push(Comp::Link(Box::new(Link::new(nic, a.id, a.cfg.host_rate, Link::drop_tail(u64::MAX)))));
                let half = f.rtt.0 / 2;
                let fwd = comps.len() as ComponentId;
                comps.push(Comp::Pipe(Pipe::new(fwd, half)));
                let rev = comps.len() as ComponentId;
                let ack_noise = ChaCha8Rng::seed_from_u64(mix(seed, 0xACC0_0000 + fid as u64));
                let jitter = Jitter { bound_ns: f.ack_jitter.0, slow_share: f.ack_jitter_slow, memory_ns: f.ack_jitter_memory.0 };
                comps.push(Comp::Pipe(Pipe::new(rev, f.rtt.0 - half).with_jitter(jitter, ack_noise)));
                let sender = comps.len() as ComponentId;
                let receiver = sender + 1;
                let udp = f.app.is_udp();
                if udp {
                    let relabel_flow = f.app.class_fraction().map(|_| (nflows_total + relabels.len()) as u32);
                    comps.push(Comp::Udp(Box::new(UdpSource::new(sender, fid, &f.app, rng, stop_ns, relabel_flow))));
                    comps.push(Comp::Sink { bytes: 0, window_bytes: 0 });
                } else {
                    let app = App::new(&f.app, rng, stop_ns, f.rtt.0 - half);
                    let finite = app.finite_shape();
                    let cc = Cc::new(f.cc, mix(seed, 0xCC00_0000 + fid as u64));
                    let ack_each = cc.acks_each_packet();
                    let mut tx = TcpSender::new(sender, fid, cc, app);
                    tx.set_pacing(f.pacing);
                    tx.set_kernel_hz(f.kernel_hz);
                    tx.set_first_write_delay(first_write_delay_ns(&mut ChaCha8Rng::seed_from_u64(mix(seed, 0xF1F0_0000 + fid as u64))));
                    let mut rx = TcpReceiver::new(receiver, fid, finite);
                    rx.set_kernel_hz(f.kernel_hz);
                    rx.set_read_wakeup(f.receiver_wakeup.0);
                    rx.ack_each = ack_each;
                    rx.video = matches!(f.app, AppConfig::Video { .. });
                    comps.push(Comp::Sender(Box::new(tx)));
                    comps.push(Comp::Receiver(Box::new(rx)));
                }
                let mut data_route = if delay_before_enforcer { vec![nic, fwd, enf_id, link_id] } else { vec![nic, enf_id, link_id] };
                let via_at = data_route.len();
                data_route.extend(secondary);
                if !delay_before_enforcer {
                    data_route.push(fwd);
                }
                data_route.push(receiver);
                // The flow key stands for the 5-tuple, whose ephemeral port differs from run to
                // run: drawn from the seed, so hashed queues and sketch cells collide per seed with
                // the real probability (a key fixed per flow id never made 4 flows share one of
                // 16 queues, where Linux runs do about one time in three).
                let keys = (mix(seed ^ 0xF10F, fid as u64), f.class, f.customer.unwrap_or(a.id) as u64);
                if let Some((_, class)) = f.app.class_fraction().filter(|_| udp) {
                    relabels.push(((data_route.clone(), via_at, &f.via, [rev, sender]), (keys.0, class, keys.2), fid));
                }
                plans.push((data_route, via_at, &f.via, [rev, sender]));
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
                    continuous: matches!(f.app, AppConfig::Backlogged | AppConfig::Finite { .. }),
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
        Ok(World { ctx, comps, flows, route_hops, route_start, agg_rates_bps, agg_kinds, agg_links, wire_window, owner })
    }
}
