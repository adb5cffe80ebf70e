//! PQP with exact per-flow phantom queues (`flows = "exact"`, issue 17): 000 §3 with a queue per
//! flow instead of hash(flow) mod N, so that two flows never share a queue (up to `max_flows`).
//! The service is the same flat fair GPS, kept in virtual time (crate::phantom::FlowQueues), so
//! an arrival costs O(log n) in the non-empty queues. A queue is reclaimed as soon as it drains
//! (PQP keeps nothing else per flow); BC-PQP ([`crate::bcpqp_flows`]) keeps it until its window
//! has also ended.

use crate::phantom::{FlowQueues, FlowStats};
use crate::pqp::{PqpConfig, PqpStats};
use crate::units::NANOS_PER_SEC;
use crate::{DropReason, Instant, Packet, Policer, Rate, Verdict};

/// One aggregate's PQP over exact flow queues; `T` is the per-flow state of what runs on top.
#[derive(Debug, Clone)]
pub struct FlowPqp<T> {
    rate: Rate,
    /// B per flow, nano-bytes.
    queue_size_nb: u64,
    /// Boxed: keeps `AnyPolicer` (sized by its largest variant) as it was.
    pub(crate) queues: Box<FlowQueues<T>>,
    last: Instant,
    stats: PqpStats,
}

impl<T: Default> FlowPqp<T> {
    /// Panics on an invalid config: call [`PqpConfig::validate`] first (config.rs does).
    pub fn new(cfg: &PqpConfig) -> Self {
        cfg.validate().expect("PqpConfig must be validated before use");
        FlowPqp {
            rate: cfg.rate,
            queue_size_nb: cfg.queue_size.0 * NANOS_PER_SEC,
            queues: Box::new(FlowQueues::new(cfg.max_flows() as usize)),
            last: Instant::ZERO,
            stats: PqpStats::default(),
        }
    }

    pub fn stats(&self) -> PqpStats {
        self.stats
    }

    pub fn flow_stats(&self) -> FlowStats {
        self.queues.stats()
    }

    pub fn queue_size_nb(&self) -> u64 {
        self.queue_size_nb
    }

    /// Memory of one aggregate: the struct plus its heap.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + std::mem::size_of::<FlowQueues<T>>() + self.queues.heap_bytes()
    }

    /// Occupancy of `flow`'s queue in nano-bytes (0 if it holds none), as of the last arrival.
    pub fn flow_occupancy_nb(&self, flow: u64) -> u64 {
        self.queues.slot_of_flow(flow).map_or(0, |s| self.queues.occupancy(s))
    }

    /// Σ occupancy over every flow, nano-bytes.
    pub fn backlog_nb(&self) -> u128 {
        self.queues.backlog()
    }

    /// Flows holding a queue now.
    pub fn flows(&self) -> usize {
        self.queues.allocated()
    }

    /// The latest arrival time seen: a clock that steps back is held here.
    pub(crate) fn last(&self) -> Instant {
        self.last
    }

    /// Brings phantom service up to `now`; `release` decides whether a drained queue is reclaimed.
    #[inline]
    pub(crate) fn advance(&mut self, now: Instant, release: &mut impl FnMut(&mut T) -> bool) {
        if now > self.last {
            self.queues.serve(self.rate.credit(now - self.last), release);
            self.last = now;
        }
    }

    /// Admits `bytes` into slot `s` if they fit under B, unless `owner` declines the packet
    /// (None: nothing is added or counted). `owner` sees the occupancy before, its per-flow state
    /// and whether the bytes fit, and names the reason of a drop. Counts the verdict.
    #[inline(always)]
    pub(crate) fn admit(&mut self, s: usize, bytes: u64, owner: impl FnOnce(u64, &mut T, bool) -> Option<DropReason>) -> Option<Verdict> {
        let nb = bytes.saturating_mul(NANOS_PER_SEC);
        let size = self.queue_size_nb;
        let stats = &mut self.stats;
        self.queues.offer(s, |occupancy, data| {
            // occupancy ≤ B always (only what fits is added), so this cannot wrap.
            let fits = nb <= size - occupancy;
            let reason = owner(occupancy, data, fits)?;
            stats.count(fits, bytes);
            Some(if fits { (nb, Verdict::Pass) } else { (0, Verdict::Drop(reason)) })
        })
    }
}

impl Policer for FlowPqp<()> {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        // Nothing outlives a drained queue in PQP: reclaim it at once.
        self.advance(now, &mut |_| true);
        let s = self.queues.slot(pkt.flow);
        self.admit(s, pkt.len as u64, |_, _, _| Some(DropReason::Overlimit)).expect("PQP declines no packet")
    }
}
