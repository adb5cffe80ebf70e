//! The shaper baseline (000 §2.1, §6.1; algorithms.md §5): per aggregate, N drop-tail queues
//! served at cumulative rate r by the policy tree (DRR with quantum w·MSS, strict priority,
//! nesting; see [`crate::drr`]). It is not work-conserving towards the link: a packet leaves no
//! earlier than its departure slot, and `next_wakeup` tells the driver when that is.
//!
//! Pacing keeps a virtual clock in "rate-nanoseconds" (ns × bytes/s), so departures are exactly
//! len/r apart with no rounding drift: the k-th packet of a busy period leaves at
//! t_start + Σ_{j<k} len_j / r. A driver that calls late (e.g. the timing wheel of
//! [`crate::shaper_set`]) does not lose rate: the schedule, not the call time, advances. An
//! arrival that finds the backlog virtually gone (every held packet's slot has passed) restarts
//! the schedule so that the exact shaper's idle time is kept: the departure times do not depend
//! on how late the driver calls, as long as it calls after them.

use crate::validate::ConfigError;
use crate::drr::TreeScheduler;
use crate::policy::PolicyNode;
use crate::units::{MAX_SIZE_BYTES, NANOS_PER_SEC};
use crate::{Bytes, Classify, DropReason, Dropped, Duration, Instant, Packet, QueueDiscipline, Rate};
use serde::Deserialize;

/// At most this many queues per aggregate (as PQP).
pub const MAX_QUEUES: u32 = 1024;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShaperConfig {
    /// Aggregate rate r.
    pub rate: Rate,
    /// Number of queues N (1..=1024). Default 16.
    #[serde(default = "default_queues")]
    pub queues: u32,
    /// Size of each drop-tail queue (000 §6.1: the max BDP; the authors' scripts use 2×BDP).
    pub queue_size: Bytes,
    /// `flow` (hash of the flow key mod N, the default) or `class` (the packet's class).
    #[serde(default)]
    pub classify: Classify,
    /// Policy tree over the queues (see [`crate::policy`]). Default `"fair"`.
    #[serde(default = "default_policy")]
    pub policy: String,
    /// Weights per queue, only with `policy = "weighted"` (default: all 1).
    #[serde(default)]
    pub weights: Option<Vec<u32>>,
    /// MSS: the DRR quantum of a child of weight w is w·MSS. Default 1500 B.
    #[serde(default = "default_mss")]
    pub mss: Bytes,
    /// Many aggregates only: timing-wheel slot width. Default half an MSS's transmission time at
    /// `rate` (the BC-PQP authors' choice), at least 1 µs.
    #[serde(default)]
    pub wheel_slot: Option<Duration>,
    /// Many aggregates only: slots in the timing wheel. Default 4096.
    #[serde(default = "default_wheel_slots")]
    pub wheel_slots: u32,
}

fn default_queues() -> u32 {
    16
}
fn default_policy() -> String {
    "fair".to_string()
}
fn default_mss() -> Bytes {
    Bytes(1500)
}
fn default_wheel_slots() -> u32 {
    4096
}

impl ShaperConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.resolve().map(|_| ())
    }

    /// Validates and resolves the policy tree; every error names its field.
    pub fn resolve(&self) -> Result<PolicyNode, ConfigError> {
        if self.rate.0 == 0 {
            return Err(ConfigError::new("rate", "must be greater than zero"));
        }
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return Err(ConfigError::new("queues", format!("must be in 1..={MAX_QUEUES}, got {}", self.queues)));
        }
        if self.queue_size.0 == 0 {
            return Err(ConfigError::new("queue_size", "must be greater than zero"));
        }
        if self.queue_size.0.saturating_mul(self.queues as u64) > MAX_SIZE_BYTES {
            return Err(ConfigError::new("queue_size", "queues × queue_size exceeds the 16 GiB an aggregate may hold"));
        }
        if self.mss.0 == 0 || self.mss.0 > 65_535 {
            return Err(ConfigError::new("mss", "must be in 1..=65535 bytes"));
        }
        if self.wheel_slot.is_some_and(|d| d.0 == 0) {
            return Err(ConfigError::new("wheel_slot", "must be greater than zero"));
        }
        if !(2..=1 << 24).contains(&self.wheel_slots) {
            return Err(ConfigError::new("wheel_slots", "must be in 2..=16777216"));
        }
        let field = if self.weights.is_some() { "weights" } else { "policy" };
        PolicyNode::resolve(&self.policy, self.queues as usize, self.weights.as_deref())
            .map_err(|e| ConfigError::new(field, e.to_string()))
    }

    /// The timing wheel's slot width: configured, or half an MSS's time at `rate`, ≥ 1 µs.
    pub fn wheel_slot_width(&self) -> Duration {
        self.wheel_slot.unwrap_or_else(|| self.rate.time_to_send(self.mss.0 / 2).max(Duration::from_micros(1)))
    }
}

/// One aggregate's shaper.
#[derive(Debug, Clone)]
pub struct Shaper {
    rate: u64,
    classify: Classify,
    queues: usize,
    scheduler: TreeScheduler,
    /// Departure time of the next packet, × rate (ns·B/s), so increments of len·10⁹ are exact.
    next_departure_scaled: u128,
}

impl Shaper {
    /// The link rate is not needed: the shaper's own rate paces it.
    pub fn new(cfg: &ShaperConfig, _link_rate: Option<Rate>) -> Result<Self, ConfigError> {
        let policy = cfg.resolve()?;
        Ok(Shaper {
            rate: cfg.rate.0,
            classify: cfg.classify,
            queues: cfg.queues as usize,
            scheduler: TreeScheduler::new(&policy, cfg.queues as usize, cfg.queue_size.0, cfg.mss.0),
            next_departure_scaled: 0,
        })
    }

    fn next_departure(&self) -> Instant {
        Instant(self.next_departure_scaled.div_ceil(self.rate as u128).min(u64::MAX as u128) as u64)
    }

    /// Bytes queued in one queue.
    pub fn queue_bytes(&self, queue: usize) -> u64 {
        self.scheduler.queue_bytes(queue)
    }

    pub fn is_empty(&self) -> bool {
        self.scheduler.is_empty()
    }
}

impl QueueDiscipline for Shaper {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        let backlog_before = self.scheduler.backlog_bytes() as u128 * NANOS_PER_SEC as u128;
        let queue = self.classify.queue_of(&pkt, self.queues);
        if let Err(pkt) = self.scheduler.enqueue(queue, pkt) {
            drops.push(Dropped { pkt, reason: DropReason::QueueFull });
            return;
        }
        // If the packets still held would all have left by `now` on the exact schedule (a late
        // driver has not collected them yet), the exact shaper would be idle now: restart the
        // schedule so that it reaches `now` once they are gone.
        let arrival = now.0 as u128 * self.rate as u128;
        if self.next_departure_scaled + backlog_before < arrival {
            self.next_departure_scaled = arrival - backlog_before;
        }
    }

    fn dequeue(&mut self, now: Instant, _drops: &mut Vec<Dropped>) -> Option<Packet> {
        if self.scheduler.is_empty() || now < self.next_departure() {
            return None;
        }
        let pkt = self.scheduler.dequeue()?;
        self.next_departure_scaled += pkt.len as u128 * NANOS_PER_SEC as u128;
        Some(pkt)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        (!self.scheduler.is_empty()).then(|| self.next_departure())
    }

    fn backlog_bytes(&self) -> u64 {
        self.scheduler.backlog_bytes()
    }
}
