//! The statistics wrapper shared by every queueing discipline (style.md: ns-3's QueueDisc keeps
//! the counters in the public enqueue/dequeue and calls the discipline's hook; each algorithm
//! here only decides).
//!
//! Sojourn time is measured from `enqueue` to `dequeue` by packet id, so ids must be unique among
//! packets held at once (drivers number packets). The id → arrival map grows to the largest
//! backlog seen and is then reused, so steady state does not allocate.

use crate::enforcer::{DropReason, Dropped, QueueDiscipline, Verdict};
use crate::packet::Packet;
use crate::time::{Duration, Instant};
use std::collections::HashMap;

/// Packet and byte counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    pub packets: u64,
    pub bytes: u64,
}

impl Count {
    #[inline]
    fn add(&mut self, pkt: &Packet) {
        self.packets += 1;
        self.bytes += pkt.len as u64;
    }
}

#[derive(Debug, Clone, Default)]
pub struct QueueStats {
    pub enqueued: Count,
    pub dequeued: Count,
    pub dropped: Count,
    /// Drops by reason, in `DropReason` order.
    pub drops_by_reason: Vec<(DropReason, Count)>,
    pub sojourn_total: Duration,
    pub sojourn_max: Duration,
}

impl QueueStats {
    pub fn drops(&self, reason: DropReason) -> Count {
        self.drops_by_reason.iter().find(|(r, _)| *r == reason).map(|(_, c)| *c).unwrap_or_default()
    }

    pub fn mean_sojourn(&self) -> Option<Duration> {
        (self.dequeued.packets > 0).then(|| Duration(self.sojourn_total.0 / self.dequeued.packets))
    }

    /// Packets dropped per reason, by the reason's name: how every driver reports drops.
    pub fn drops_named(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.drops_by_reason.iter().map(|(r, c)| (r.as_str(), c.packets)).collect()
    }

    /// A policer's verdict on `pkt`, counted as a queue that passes at once or drops: policers
    /// and queueing disciplines are accounted alike.
    #[inline]
    pub fn count_policed(&mut self, pkt: &Packet, verdict: Verdict) {
        self.enqueued.add(pkt);
        match verdict {
            Verdict::Pass => self.dequeued.add(pkt),
            Verdict::Drop(reason) => self.count_drop(pkt, reason),
        }
    }

    fn count_drop(&mut self, pkt: &Packet, reason: DropReason) {
        self.dropped.add(pkt);
        match self.drops_by_reason.binary_search_by(|(r, _)| r.cmp(&reason)) {
            Ok(i) => self.drops_by_reason[i].1.add(pkt),
            Err(i) => {
                let mut c = Count::default();
                c.add(pkt);
                self.drops_by_reason.insert(i, (reason, c));
            }
        }
    }
}

/// Wraps any queueing discipline and keeps its statistics.
pub struct WithStats<Q> {
    inner: Q,
    stats: QueueStats,
    arrivals: HashMap<u64, Instant>,
}

impl<Q: QueueDiscipline> WithStats<Q> {
    pub fn new(inner: Q) -> Self {
        WithStats { inner, stats: QueueStats::default(), arrivals: HashMap::new() }
    }
    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }
    pub fn inner(&self) -> &Q {
        &self.inner
    }
    pub fn inner_mut(&mut self) -> &mut Q {
        &mut self.inner
    }
    pub fn into_inner(self) -> Q {
        self.inner
    }

    fn account_drops(&mut self, drops: &[Dropped]) {
        for d in drops {
            self.stats.count_drop(&d.pkt, d.reason);
            self.arrivals.remove(&d.pkt.id);
        }
    }
}

impl<Q: QueueDiscipline> QueueDiscipline for WithStats<Q> {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.stats.enqueued.add(&pkt);
        self.arrivals.insert(pkt.id, now);
        let before = drops.len();
        self.inner.enqueue(now, pkt, drops);
        self.account_drops(&drops[before..]);
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Option<Packet> {
        let before = drops.len();
        let out = self.inner.dequeue(now, drops);
        self.account_drops(&drops[before..]);
        if let Some(pkt) = &out {
            self.stats.dequeued.add(pkt);
            if let Some(arrived) = self.arrivals.remove(&pkt.id) {
                let s = now.saturating_since(arrived);
                self.stats.sojourn_total = self.stats.sojourn_total + s;
                self.stats.sojourn_max = self.stats.sojourn_max.max(s);
            }
        }
        out
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.inner.next_wakeup()
    }

    fn backlog_bytes(&self) -> u64 {
        self.inner.backlog_bytes()
    }

    fn link_rate_estimate(&self) -> Option<f64> {
        self.inner.link_rate_estimate()
    }
}
