//! Network elements: links (serialisation at a rate, then a drop-tail FIFO or any core queueing
//! discipline as the queue), constant-delay pipes, and the enforcement point that runs a core
//! policer per aggregate. Each keeps at most one pending event.

use crate::ctx::Ctx;
use crate::engine::{ComponentId, Wakeup};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use ratekit_core::{AnyPolicer, AnyQueue, Dropped, Instant, Packet, Policer, QueueDiscipline, Rate, Verdict};
use std::collections::VecDeque;

pub enum LinkQueue {
    DropTail { q: VecDeque<u32>, bytes: u64, limit: u64 },
    /// A core queueing enforcer (shaper, FIFO shaper, RED, CPQ, DSCD) as the link's queue.
    Enforcer(Box<AnyQueue>),
}

pub struct Link {
    pub id: ComponentId,
    pub agg: u32,
    rate: Rate,
    queue: LinkQueue,
    in_tx: Option<u32>,
    wake: Wakeup,
    drops: Vec<Dropped>,
    /// Counts its transmitted bytes as the aggregate's link utilisation (not NICs, secondaries).
    measured: bool,
}

impl Link {
    pub fn new(id: ComponentId, agg: u32, rate: Rate, queue: LinkQueue) -> Self {
        Link { id, agg, rate, queue, in_tx: None, wake: Wakeup::default(), drops: Vec::new(), measured: false }
    }

    /// The aggregate's own link, whose transmissions after the warm-up are its utilisation.
    pub fn measured(mut self) -> Self {
        self.measured = true;
        self
    }

    pub fn drop_tail(limit: u64) -> LinkQueue {
        LinkQueue::DropTail { q: VecDeque::new(), bytes: 0, limit }
    }

    pub fn is_enforcer(&self) -> bool {
        matches!(self.queue, LinkQueue::Enforcer(_))
    }

    pub fn arrive(&mut self, ctx: &mut Ctx, idx: u32) {
        let now = ctx.ev.now();
        let len = ctx.pool.get(idx).len as u64;
        match &mut self.queue {
            LinkQueue::DropTail { q, bytes, limit } => {
                if *bytes + len > *limit {
                    ctx.aggs[self.agg as usize].queue_drops += 1;
                    ctx.pool.release(idx);
                    return;
                }
                *bytes += len;
                q.push_back(idx);
            }
            LinkQueue::Enforcer(d) => {
                let sp = ctx.pool.get_mut(idx);
                sp.enq_ns = now;
                let p = *sp;
                let (flow, class, customer) = ctx.flow_keys[p.flow as usize];
                ctx.aggs[self.agg as usize].arrivals += 1;
                ctx.enf.arrival(now, self.agg, p.flow, class);
                let pkt = Packet { id: idx as u64, len: p.len, flow, class, aggregate: customer };
                d.enqueue(Instant(now), pkt, &mut self.drops);
                self.release_drops(ctx);
            }
        }
        if self.in_tx.is_none() {
            self.start_next(ctx);
        }
    }

    fn release_drops(&mut self, ctx: &mut Ctx) {
        let now = ctx.ev.now();
        for d in self.drops.drain(..) {
            let flow = ctx.pool.get(d.pkt.id as u32).flow;
            ctx.aggs[self.agg as usize].enforcer_drops += 1;
            ctx.enf.drop(now, self.agg, flow, ctx.flow_keys[flow as usize].1);
            ctx.pool.release(d.pkt.id as u32);
        }
    }

    fn start_next(&mut self, ctx: &mut Ctx) {
        let now = ctx.ev.now();
        let next = match &mut self.queue {
            LinkQueue::DropTail { q, bytes, .. } => q.pop_front().inspect(|&i| *bytes -= ctx.pool.get(i).len as u64),
            LinkQueue::Enforcer(d) => {
                let p = d.dequeue(Instant(now), &mut self.drops).map(|p| p.id as u32);
                if let Some(i) = p {
                    let sp = ctx.pool.get(i);
                    let flow = sp.flow;
                    let sojourn = now - sp.enq_ns;
                    ctx.enf.sent(now, self.agg, flow, ctx.flow_keys[flow as usize].1, sojourn);
                }
                let wake = d.next_wakeup();
                self.release_drops(ctx);
                if p.is_none() {
                    if let Some(t) = wake {
                        let t = t.0.max(now);
                        if self.wake.want(t) {
                            ctx.ev.schedule(t, self.id);
                        }
                    }
                }
                p
            }
        };
        if let Some(i) = next {
            self.in_tx = Some(i);
            let t = now + self.rate.time_to_send(ctx.pool.get(i).len as u64).0;
            if self.wake.want(t) {
                ctx.ev.schedule(t, self.id);
            }
        }
    }

    pub fn on_timer(&mut self, ctx: &mut Ctx) {
        if !self.wake.fire(ctx.ev.now()) {
            return;
        }
        if let Some(i) = self.in_tx.take() {
            if self.measured && ctx.ev.now() >= ctx.enf.from_ns {
                ctx.aggs[self.agg as usize].link_bytes += ctx.pool.get(i).len as u64;
            }
            ctx.out.push(i);
        }
        self.start_next(ctx);
    }
}

/// Propagation delay: a FIFO of (arrival time, packet); constant delay keeps it ordered.
pub struct Pipe {
    pub id: ComponentId,
    delay: u64,
    q: VecDeque<(u64, u32)>,
    wake: Wakeup,
}

impl Pipe {
    pub fn new(id: ComponentId, delay: u64) -> Self {
        Pipe { id, delay, q: VecDeque::new(), wake: Wakeup::default() }
    }

    pub fn arrive(&mut self, ctx: &mut Ctx, idx: u32) {
        let t = ctx.ev.now() + self.delay;
        self.q.push_back((t, idx));
        if self.q.len() == 1 && self.wake.want(t) {
            ctx.ev.schedule(t, self.id);
        }
    }

    pub fn on_timer(&mut self, ctx: &mut Ctx) {
        let now = ctx.ev.now();
        if !self.wake.fire(now) {
            return;
        }
        while let Some(&(t, i)) = self.q.front() {
            if t > now {
                if self.wake.want(t) {
                    ctx.ev.schedule(t, self.id);
                }
                break;
            }
            self.q.pop_front();
            ctx.out.push(i);
        }
    }
}

/// The enforcement point of one aggregate: optional random loss, then a core policer (or
/// nothing when the aggregate's enforcer is a queueing discipline on its link).
pub struct EnforcementPoint {
    pub agg: u32,
    loss: f64,
    rng: ChaCha8Rng,
    policer: Option<AnyPolicer>,
}

impl EnforcementPoint {
    pub fn new(agg: u32, loss: f64, rng: ChaCha8Rng, policer: Option<AnyPolicer>) -> Self {
        EnforcementPoint { agg, loss, rng, policer }
    }

    pub fn arrive(&mut self, ctx: &mut Ctx, idx: u32) {
        if self.loss > 0.0 && self.rng.gen::<f64>() < self.loss {
            ctx.aggs[self.agg as usize].random_losses += 1;
            ctx.pool.release(idx);
            return;
        }
        if let Some(p) = &mut self.policer {
            let sp = *ctx.pool.get(idx);
            let (flow, class, customer) = ctx.flow_keys[sp.flow as usize];
            let pkt = Packet { id: idx as u64, len: sp.len, flow, class, aggregate: customer };
            let now = ctx.ev.now();
            ctx.aggs[self.agg as usize].arrivals += 1;
            ctx.enf.arrival(now, self.agg, sp.flow, class);
            if let Verdict::Drop(_) = p.on_arrival(Instant(now), &pkt) {
                ctx.aggs[self.agg as usize].enforcer_drops += 1;
                ctx.enf.drop(now, self.agg, sp.flow, class);
                ctx.pool.release(idx);
                return;
            }
            ctx.enf.sent(now, self.agg, sp.flow, class, 0);
        }
        ctx.out.push(idx);
    }
}
