//! Network elements: links (serialisation at a rate, then a drop-tail FIFO or any core queueing
//! discipline as the queue), constant-delay pipes, and the enforcement point that runs a core
//! policer per aggregate. Each keeps at most one pending event. Enforcers run on lab's
//! `AggregateDriver`, as they do in replay and the middlebox.

use crate::ctx::Ctx;
use crate::engine::{ComponentId, Wakeup};
use crate::jitter::{Jitter, Noise};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use ratekit_core::queue_stats::QueueStats;
use ratekit_core::{AnyPolicer, AnyQueue, Instant, Packet, Rate, Verdict};
use ratekit_lab::driver::{AggregateDriver, Decision, Outcome, Policing};
use std::collections::VecDeque;

pub enum LinkQueue {
    /// The packet on the wire is the link's `in_tx`.
    DropTail { q: VecDeque<u32>, bytes: u64, limit: u64 },
    /// A core queueing enforcer (shaper, FIFO shaper, RED, CPQ, DSCD) as the link's queue.
    Enforcer(Box<EnforcedQueue>),
}

/// A queueing enforcer's driver, which decides when each packet starts on the link and when it
/// has left, and the packets on the wire with the time their last bit leaves, oldest first: the
/// driver may start the next packet at the instant the last one leaves, before this link's
/// timer for that instant has fired.
pub struct EnforcedQueue {
    driver: AggregateDriver,
    on_wire: VecDeque<(u64, u32)>,
    decided: Vec<Decision>,
}

pub struct Link {
    pub id: ComponentId,
    pub agg: u32,
    rate: Rate,
    queue: LinkQueue,
    /// The drop-tail queue's packet on the wire.
    in_tx: Option<u32>,
    wake: Wakeup,
    /// Counts its transmitted bytes as the aggregate's link utilisation (not NICs, secondaries).
    measured: bool,
    /// A packet has left since the warm-up ended: later ones were sent wholly after it.
    past_warmup: bool,
    /// Rate changes still to come, (time, rate), latest first. They are applied at the first
    /// event at or after their time: a packet already on the wire keeps its rate.
    steps: Vec<(u64, Rate)>,
}

impl Link {
    pub fn new(id: ComponentId, agg: u32, rate: Rate, queue: LinkQueue) -> Self {
        Link { id, agg, rate, queue, in_tx: None, wake: Wakeup::default(), measured: false, past_warmup: false, steps: Vec::new() }
    }

    /// The link's rate changes to each step's rate at its time (ns; any order).
    pub fn with_steps(mut self, mut steps: Vec<(u64, Rate)>) -> Self {
        steps.sort_by(|a, b| b.0.cmp(&a.0));
        self.steps = steps;
        self
    }

    fn apply_steps(&mut self, now: u64) {
        while let Some(&(at, rate)) = self.steps.last() {
            if at > now {
                break;
            }
            self.steps.pop();
            self.rate = rate;
            if let LinkQueue::Enforcer(e) = &mut self.queue {
                e.driver.set_link_rate(rate);
            }
        }
    }

    /// The rate the link runs at now.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// A queueing enforcer's own estimate of this link's rate in bytes/s, if it keeps one.
    pub fn rate_estimate(&self) -> Option<f64> {
        match &self.queue {
            LinkQueue::Enforcer(e) => e.driver.link_rate_estimate(),
            LinkQueue::DropTail { .. } => None,
        }
    }

    /// A queueing enforcer as the queue of a link at `rate`.
    pub fn enforcer(queue: AnyQueue, rate: Rate) -> LinkQueue {
        let driver = AggregateDriver::queue(queue, Some(rate));
        LinkQueue::Enforcer(Box::new(EnforcedQueue { driver, on_wire: VecDeque::new(), decided: Vec::new() }))
    }

    /// The aggregate's own link, whose transmissions after the warm-up are its utilisation.
    pub fn measured(mut self) -> Self {
        self.measured = true;
        self
    }

    pub fn drop_tail(limit: u64) -> LinkQueue {
        LinkQueue::DropTail { q: VecDeque::new(), bytes: 0, limit }
    }

    /// The queueing enforcer's accounting, if this link's queue is one.
    pub fn enforcer_stats(&self) -> Option<&QueueStats> {
        match &self.queue {
            LinkQueue::Enforcer(e) => Some(e.driver.stats()),
            LinkQueue::DropTail { .. } => None,
        }
    }

    pub fn arrive(&mut self, ctx: &mut Ctx, idx: u32) {
        let now = ctx.ev.now();
        self.apply_steps(now);
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
            LinkQueue::Enforcer(e) => {
                let sp = ctx.pool.get_mut(idx);
                sp.enq_ns = now;
                let p = *sp;
                let (flow, class, customer) = ctx.flow_keys[p.flow as usize];
                ctx.aggs[self.agg as usize].arrivals += 1;
                ctx.enf.arrival(now, self.agg, p.flow, class);
                let pkt = Packet { id: idx as u64, len: p.len, flow, class, aggregate: customer };
                e.driver.arrive(Instant(now), pkt, &mut e.decided);
            }
        }
        match self.queue {
            LinkQueue::Enforcer(_) => self.settle(ctx),
            LinkQueue::DropTail { .. } if self.in_tx.is_none() => self.start_next(ctx),
            LinkQueue::DropTail { .. } => {}
        }
    }

    /// Accounts for what the driver decided at `now` and asks for the link's next wake-up: the
    /// end of the oldest transmission, or the driver's own (a shaper's release).
    fn settle(&mut self, ctx: &mut Ctx) {
        let LinkQueue::Enforcer(e) = &mut self.queue else { return };
        let now = ctx.ev.now();
        for d in e.decided.drain(..) {
            let i = d.id as u32;
            let flow = ctx.pool.get(i).flow;
            let class = ctx.flow_keys[flow as usize].1;
            match d.outcome {
                Outcome::Pass { departure } => {
                    ctx.enf.sent(now, self.agg, flow, class, now - ctx.pool.get(i).enq_ns);
                    e.on_wire.push_back((departure.map_or(now, |t| t.0), i));
                }
                Outcome::Drop(_) | Outcome::Held => {
                    ctx.aggs[self.agg as usize].enforcer_drops += 1;
                    ctx.enf.drop(now, self.agg, flow, class);
                    ctx.pool.release(i);
                }
            }
        }
        let next = e.on_wire.front().map(|&(t, _)| t).into_iter().chain(e.driver.next_wakeup().map(|t| t.0)).min();
        if let Some(t) = next {
            if self.wake.want(t.max(now)) {
                ctx.ev.schedule(t.max(now), self.id);
            }
        }
    }

    /// Starts the drop-tail queue's next packet on the link.
    fn start_next(&mut self, ctx: &mut Ctx) {
        let now = ctx.ev.now();
        let LinkQueue::DropTail { q, bytes, .. } = &mut self.queue else { return };
        if let Some(i) = q.pop_front() {
            *bytes -= ctx.pool.get(i).len as u64;
            self.in_tx = Some(i);
            let t = now + self.rate.time_to_send(ctx.pool.get(i).len as u64).0;
            if self.wake.want(t) {
                ctx.ev.schedule(t, self.id);
            }
        }
    }

    pub fn on_timer(&mut self, ctx: &mut Ctx) {
        let now = ctx.ev.now();
        if !self.wake.fire(now) {
            return;
        }
        self.apply_steps(now);
        let (measured, agg, rate, past_warmup) = (self.measured, self.agg, self.rate, &mut self.past_warmup);
        match &mut self.queue {
            LinkQueue::DropTail { .. } => {
                if let Some(i) = self.in_tx.take() {
                    deliver(ctx, measured, past_warmup, agg, rate, i);
                }
                self.start_next(ctx);
            }
            LinkQueue::Enforcer(e) => {
                while let Some(&(t, i)) = e.on_wire.front() {
                    if t > now {
                        break;
                    }
                    e.on_wire.pop_front();
                    deliver(ctx, measured, past_warmup, agg, rate, i);
                }
                if e.driver.next_wakeup().is_some_and(|t| t.0 <= now) {
                    e.driver.wake(Instant(now), &mut e.decided);
                }
                self.settle(ctx);
            }
        }
    }
}

/// Packet `i`'s last bit has left link of aggregate `agg`: it goes to its next hop, and counts as
/// the aggregate's utilisation after the warm-up if the link is `measured`; the packet on the wire
/// when the warm-up ends counts only the bytes sent after it, so utilisation stays ≤ 1.
#[inline]
fn deliver(ctx: &mut Ctx, measured: bool, past_warmup: &mut bool, agg: u32, rate: Rate, i: u32) {
    let now = ctx.ev.now();
    if measured && now >= ctx.enf.from_ns {
        let mut len = ctx.pool.get(i).len as u64;
        if !*past_warmup {
            *past_warmup = true;
            len = len.min(((now - ctx.enf.from_ns) as u128 * rate.bytes_per_sec() as u128 / 1_000_000_000) as u64);
        }
        ctx.aggs[agg as usize].link_bytes += len;
    }
    ctx.out.push(i);
}

/// Propagation delay: a FIFO of (arrival time, packet). With jitter each packet also waits a
/// random time below its bound, never overtaking the one before: the hosts' timing noise on a
/// path that does not reorder.
pub struct Pipe {
    pub id: ComponentId,
    delay: u64,
    jitter: Option<Box<Noise>>,
    q: VecDeque<(u64, u32)>,
    wake: Wakeup,
}

impl Pipe {
    pub fn new(id: ComponentId, delay: u64) -> Self {
        Pipe { id, delay, jitter: None, q: VecDeque::new(), wake: Wakeup::default() }
    }

    pub fn with_jitter(mut self, jitter: Jitter, rng: ChaCha8Rng) -> Self {
        self.jitter = (jitter.bound_ns > 0).then(|| Box::new(Noise::new(jitter, rng)));
        self
    }

    pub fn arrive(&mut self, ctx: &mut Ctx, idx: u32) {
        let now = ctx.ev.now();
        let mut t = now + self.delay;
        if let Some(noise) = &mut self.jitter {
            // A packet due before the one ahead of it waits for it: the queue is FIFO.
            t += noise.draw(now);
        }
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
    policer: Option<Policing>,
}

impl EnforcementPoint {
    pub fn new(agg: u32, loss: f64, rng: ChaCha8Rng, policer: Option<AnyPolicer>) -> Self {
        EnforcementPoint { agg, loss, rng, policer: policer.map(Policing::new) }
    }

    /// The policer's accounting, if this aggregate is policed here.
    pub fn enforcer_stats(&self) -> Option<&QueueStats> {
        self.policer.as_ref().map(Policing::stats)
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
            if let Verdict::Drop(_) = p.police(Instant(now), &pkt) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const NOISE: Jitter = Jitter { bound_ns: 250_000, slow_share: 0.5, memory_ns: 1_000_000_000 };

    /// Sends `n` packets `gap_ns` apart through a 1 ms pipe; returns (index, delay beyond 1 ms) in
    /// the order they left.
    fn through_pipe(jitter: Jitter, n: u32, gap_ns: u64) -> Vec<(u32, u64)> {
        let mut ctx = Ctx::default();
        let mut pipe = Pipe::new(0, 1_000_000).with_jitter(jitter, ChaCha8Rng::seed_from_u64(1));
        let mut left = Vec::new();
        let mut run_until = |ctx: &mut Ctx, pipe: &mut Pipe, t: u64| {
            while ctx.ev.pop_until(t).is_some() {
                pipe.on_timer(ctx);
                left.extend(std::mem::take(&mut ctx.out).into_iter().map(|i| (i, ctx.ev.now() - i as u64 * gap_ns - 1_000_000)));
            }
        };
        for i in 0..n {
            run_until(&mut ctx, &mut pipe, i as u64 * gap_ns);
            ctx.ev.advance_to(i as u64 * gap_ns);
            pipe.arrive(&mut ctx, i);
        }
        run_until(&mut ctx, &mut pipe, u64::MAX);
        left
    }

    #[test]
    fn a_jittered_pipe_delays_within_its_jitter_and_never_reorders() {
        // 1000 packets 10 µs apart with up to 250 µs of noise: each leaves 1-1.25 ms after it
        // entered or right behind the one before, in the order they came.
        for slow_share in [0.0, 0.5] {
            let left = through_pipe(Jitter { slow_share, ..NOISE }, 1000, 10_000);
            assert_eq!(left.iter().map(|&(i, _)| i).collect::<Vec<_>>(), (0..1000).collect::<Vec<_>>());
            assert!(left.iter().all(|&(_, e)| e < 250_000 + 10_000 * 25), "{:?}", left.iter().map(|l| l.1).max());
        }
        let left = through_pipe(Jitter { slow_share: 0.0, ..NOISE }, 1000, 10_000);
        let mean = left.iter().map(|l| l.1).sum::<u64>() as f64 / left.len() as f64;
        assert!((100_000.0..200_000.0).contains(&mean), "mean extra delay {mean} ns: a uniform draw below 250 µs, some held behind");
    }
}
