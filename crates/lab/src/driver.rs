//! One aggregate's enforcement, as every driver runs it (replay, the middlebox pipeline, the
//! simulator's enforcement points): the aggregate's enforcer, the link a queueing enforcer
//! feeds, its wake-ups, and its accounting.
//!
//! A policer decides on arrival. A queueing enforcer feeds a link of its own at `link_rate`:
//! whenever that link is free the discipline is asked for its next packet, which then occupies
//! the link for `len / link_rate`; its departure is when its last bit leaves. Without a link
//! rate (a shaper paces itself) the link is infinitely fast and a packet departs when the
//! discipline releases it. The driver says when it next needs `wake` (a held packet's release,
//! or the link coming free); the caller keeps the clock and calls back then.
//!
//! Accounting is core's `WithStats` around every queueing enforcer, and the same `QueueStats`
//! counted from verdicts for a policer, so every driver reports arrivals, passes and drops by
//! `DropReason` alike.

use ratekit_core::config::Enforcer;
use ratekit_core::queue_stats::{QueueStats, WithStats};
use ratekit_core::{AnyPolicer, AnyQueue, DropReason, Dropped, EnforcerConfig, Instant, Packet, Policer, QueueDiscipline, Rate, Verdict};

/// What happened to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Passed; `departure` is set for queueing enforcers.
    Pass { departure: Option<Instant> },
    Drop(DropReason),
    /// Still inside a queueing enforcer that would release it no more when the run ended.
    Held,
}

/// The outcome of the packet with this id (ids are the caller's: unique among packets held at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub id: u64,
    pub outcome: Outcome,
}

/// Wake-ups in a row that released nothing after which the driver stops asking to be woken: a
/// guard against a discipline that keeps asking without ever releasing its packets.
const MAX_IDLE_WAKEUPS: u32 = 1_000_000;

/// A policer with its accounting: the whole of a policing driver. Enforcement points that only
/// ever police (the simulator's) hold this directly, without a driver's decision list.
#[derive(Debug, Clone)]
pub struct Policing {
    policer: AnyPolicer,
    stats: QueueStats,
}

impl Policing {
    pub fn new(policer: AnyPolicer) -> Self {
        Policing { policer, stats: QueueStats::default() }
    }

    /// The policer's verdict on `pkt`, counted.
    #[inline]
    pub fn police(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let verdict = self.policer.on_arrival(now, pkt);
        self.stats.count_policed(pkt, verdict);
        verdict
    }

    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }
}

enum Kind<Q> {
    Policer(Policing),
    Queue { queue: WithStats<Q>, link_free_at: Instant, idle_wakeups: u32 },
}

/// One aggregate's enforcer with its link and accounting.
pub struct AggregateDriver<Q = AnyQueue> {
    kind: Kind<Q>,
    link_rate: Option<Rate>,
    /// When the driver wants `wake` next (None: nothing held, or it gave up, see MAX_IDLE_WAKEUPS).
    wakeup: Option<Instant>,
    drops: Vec<Dropped>,
}

impl AggregateDriver<AnyQueue> {
    /// The driver of a built enforcer; `link_rate` is the link a queueing enforcer feeds.
    pub fn new(enforcer: Enforcer, link_rate: Option<Rate>) -> Self {
        match enforcer {
            Enforcer::Policer(p) => Self::policer(p),
            Enforcer::Queue(q) => Self::queue(q, link_rate),
        }
    }
}

impl<Q: QueueDiscipline> AggregateDriver<Q> {
    pub fn policer(policer: AnyPolicer) -> Self {
        AggregateDriver { kind: Kind::Policer(Policing::new(policer)), link_rate: None, wakeup: None, drops: Vec::new() }
    }

    pub fn queue(queue: Q, link_rate: Option<Rate>) -> Self {
        AggregateDriver {
            kind: Kind::Queue { queue: WithStats::new(queue), link_free_at: Instant::ZERO, idle_wakeups: 0 },
            link_rate,
            wakeup: None,
            drops: Vec::new(),
        }
    }

    pub fn is_queueing(&self) -> bool {
        matches!(self.kind, Kind::Queue { .. })
    }

    /// A packet arrives at `now`; the outcomes decided now are appended to `out` (the packet's
    /// own, when a policer decides or a queue drops it, and any others a queue releases or drops).
    pub fn arrive(&mut self, now: Instant, pkt: Packet, out: &mut Vec<Decision>) {
        match &mut self.kind {
            Kind::Policer(p) => {
                let outcome = match p.police(now, &pkt) {
                    Verdict::Pass => Outcome::Pass { departure: None },
                    Verdict::Drop(r) => Outcome::Drop(r),
                };
                out.push(Decision { id: pkt.id, outcome });
            }
            Kind::Queue { queue, .. } => {
                queue.enqueue(now, pkt, &mut self.drops);
                resolve_drops(&mut self.drops, out);
                self.serve(now, out);
            }
        }
    }

    /// Serves the link at `now` (call at `next_wakeup`, or earlier: nothing is released early).
    pub fn wake(&mut self, now: Instant, out: &mut Vec<Decision>) {
        if self.is_queueing() {
            self.serve(now, out);
        }
    }

    /// When `wake` should next be called, if a queueing enforcer holds packets.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.wakeup
    }

    /// The link now runs at `rate` (a throttled bottleneck, 004 Figs. 6-8): the packet on the
    /// wire keeps the rate it started at, as on a real link.
    pub fn set_link_rate(&mut self, rate: Rate) {
        self.link_rate = Some(rate);
    }

    /// A queueing enforcer's own estimate of its link's rate in bytes/s, if it keeps one.
    pub fn link_rate_estimate(&self) -> Option<f64> {
        match &self.kind {
            Kind::Policer(_) => None,
            Kind::Queue { queue, .. } => queue.link_rate_estimate(),
        }
    }

    /// Arrivals, passes (dequeued) and drops by reason; for a queueing enforcer also sojourn.
    pub fn stats(&self) -> &QueueStats {
        match &self.kind {
            Kind::Policer(p) => p.stats(),
            Kind::Queue { queue, .. } => queue.stats(),
        }
    }

    /// Sends what the discipline releases at `now` while its link is free, then notes when it
    /// next needs attention.
    fn serve(&mut self, now: Instant, out: &mut Vec<Decision>) {
        let Kind::Queue { queue, link_free_at, idle_wakeups } = &mut self.kind else { return };
        let mut released = false;
        let next = loop {
            if *link_free_at > now {
                break Some(*link_free_at);
            }
            let pkt = queue.dequeue(now, &mut self.drops);
            released |= pkt.is_some() || !self.drops.is_empty();
            resolve_drops(&mut self.drops, out);
            match pkt {
                Some(p) => {
                    let departure = match self.link_rate {
                        Some(r) => now + r.time_to_send(p.len as u64),
                        None => now,
                    };
                    *link_free_at = departure;
                    out.push(Decision { id: p.id, outcome: Outcome::Pass { departure: Some(departure) } });
                }
                // A wake-up at or before `now` that released nothing is retried 1 ns later.
                None => break queue.next_wakeup().map(|w| w.max(Instant(now.0 + 1))),
            }
        };
        *idle_wakeups = if released { 0 } else { *idle_wakeups + 1 };
        self.wakeup = next.filter(|_| *idle_wakeups < MAX_IDLE_WAKEUPS);
    }
}

fn resolve_drops(drops: &mut Vec<Dropped>, out: &mut Vec<Decision>) {
    out.extend(drops.drain(..).map(|d| Decision { id: d.pkt.id, outcome: Outcome::Drop(d.reason) }));
}

/// Builds every aggregate's driver from one validated config. Policers are clones of one fresh
/// prototype, so their parameters (for PQP/BC-PQP the compiled policy) are built once.
#[derive(Debug, Clone)]
pub struct DriverFactory {
    config: EnforcerConfig,
    link_rate: Option<Rate>,
    prototype: Option<AnyPolicer>,
}

impl DriverFactory {
    /// Fails now if the config cannot build an enforcer, e.g. a queueing kind that needs
    /// `link_rate` without one.
    pub fn new(config: EnforcerConfig, link_rate: Option<Rate>) -> Result<Self, ratekit_core::ConfigError> {
        let prototype = match config.build(link_rate)? {
            Enforcer::Policer(p) => Some(p),
            Enforcer::Queue(_) => None,
        };
        Ok(DriverFactory { config, link_rate, prototype })
    }

    pub fn is_queueing(&self) -> bool {
        self.prototype.is_none()
    }

    pub fn build(&self) -> AggregateDriver {
        match &self.prototype {
            Some(p) => AggregateDriver::policer(p.clone()),
            None => AggregateDriver::new(self.config.build(self.link_rate).expect("validated in DriverFactory::new"), self.link_rate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A drop-tail FIFO of `cap` packets that releases its head whenever asked.
    struct Fifo(VecDeque<Packet>, usize);
    /// Releases each packet exactly `hold` after its arrival, asking to be woken then.
    struct Hold(VecDeque<(Instant, Packet)>, u64);

    impl QueueDiscipline for Fifo {
        fn enqueue(&mut self, _: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
            if self.0.len() == self.1 {
                drops.push(Dropped { pkt, reason: DropReason::QueueFull });
            } else {
                self.0.push_back(pkt);
            }
        }
        fn dequeue(&mut self, _: Instant, _: &mut Vec<Dropped>) -> Option<Packet> {
            self.0.pop_front()
        }
        fn next_wakeup(&self) -> Option<Instant> {
            None
        }
        fn backlog_bytes(&self) -> u64 {
            self.0.iter().map(|p| p.len as u64).sum()
        }
    }

    impl QueueDiscipline for Hold {
        fn enqueue(&mut self, now: Instant, pkt: Packet, _: &mut Vec<Dropped>) {
            self.0.push_back((Instant(now.0 + self.1), pkt));
        }
        fn dequeue(&mut self, now: Instant, _: &mut Vec<Dropped>) -> Option<Packet> {
            match self.0.front() {
                Some(&(due, _)) if due <= now => self.0.pop_front().map(|(_, p)| p),
                _ => None,
            }
        }
        fn next_wakeup(&self) -> Option<Instant> {
            self.0.front().map(|&(due, _)| due)
        }
        fn backlog_bytes(&self) -> u64 {
            0
        }
    }

    /// Drives one driver per aggregate over (time, aggregate, len) arrivals, waking each at its
    /// `next_wakeup` in time order before later arrivals, then until every driver is idle.
    fn drive<Q: QueueDiscipline>(mut drivers: Vec<AggregateDriver<Q>>, arrivals: &[(u64, u32, u32)]) -> Vec<Option<Outcome>> {
        let mut outcomes = vec![None; arrivals.len()];
        let mut out = Vec::new();
        let mut record = |out: &mut Vec<Decision>| {
            for d in out.drain(..) {
                assert!(outcomes[d.id as usize].replace(d.outcome).is_none(), "packet {} decided twice", d.id);
            }
        };
        let run_until = |drivers: &mut Vec<AggregateDriver<Q>>, until: u64, out: &mut Vec<Decision>| loop {
            let due = drivers.iter().enumerate().filter_map(|(i, d)| d.next_wakeup().map(|t| (t, i))).filter(|(t, _)| t.0 <= until).min();
            let Some((t, i)) = due else { break };
            drivers[i].wake(t, out);
        };
        for (id, &(t, agg, len)) in arrivals.iter().enumerate() {
            run_until(&mut drivers, t, &mut out);
            record(&mut out);
            drivers[agg as usize].arrive(Instant(t), Packet { id: id as u64, len, ..Packet::default() }, &mut out);
            record(&mut out);
        }
        run_until(&mut drivers, u64::MAX, &mut out);
        record(&mut out);
        outcomes
    }

    fn pass(ns: u64) -> Option<Outcome> {
        Some(Outcome::Pass { departure: Some(Instant(ns)) })
    }

    #[test]
    fn link_serialises_packets_and_a_full_queue_drops() {
        // 1000 B/s link: a 100-byte packet occupies it for 100 ms.
        let link = Some(Rate(1000));
        let drivers = vec![AggregateDriver::queue(Fifo(VecDeque::new(), 1), link), AggregateDriver::queue(Fifo(VecDeque::new(), 1), link)];
        let ms = 1_000_000;
        let got = drive(drivers, &[(0, 0, 100), (0, 0, 100), (0, 0, 100), (10 * ms, 1, 50), (150 * ms, 0, 100)]);
        assert_eq!(
            got,
            vec![
                pass(100 * ms),
                pass(200 * ms),
                Some(Outcome::Drop(DropReason::QueueFull)),
                pass(60 * ms), // aggregate 1 has a link of its own
                pass(300 * ms),
            ]
        );
    }

    #[test]
    fn wakeups_release_held_packets_without_further_arrivals() {
        let got = drive(vec![AggregateDriver::queue(Hold(VecDeque::new(), 5_000), None)], &[(0, 0, 100), (1_000, 0, 100), (20_000, 0, 100)]);
        assert_eq!(got, vec![pass(5_000), pass(6_000), pass(25_000)]);
    }

    /// Policers and queues are accounted alike: arrivals, passes, drops by reason.
    #[test]
    fn policer_and_queue_accounting_agree() {
        let tb = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = 8000\nburst = 1500").unwrap();
        let mut policer = DriverFactory::new(tb, None).unwrap().build();
        let mut queue = AggregateDriver::queue(Fifo(VecDeque::new(), 1), None);
        let mut out = Vec::new();
        for id in 0..3 {
            let pkt = Packet { id, len: 1000, ..Packet::default() };
            policer.arrive(Instant(0), pkt, &mut out);
            queue.arrive(Instant(0), pkt, &mut out);
        }
        // The bucket passes one 1000-byte packet of 1500 B; the FIFO passes each at once (no link).
        let p = policer.stats();
        assert_eq!((p.enqueued.packets, p.dequeued.packets, p.dropped.packets), (3, 1, 2));
        assert_eq!(p.drops_named(), [("overlimit", 2)].into_iter().collect());
        let q = queue.stats();
        assert_eq!((q.enqueued.packets, q.dequeued.packets, q.dropped.packets), (3, 3, 0));
    }
}
