//! The single-FIFO token-bucket shaper, as Linux `tbf` (000 §6.5's FIFO shaper baseline).
//!
//! One drop-tail FIFO of `limit` bytes in front of a token bucket of `burst` bytes filled at
//! `rate`. The head leaves as soon as the bucket holds its length; `next_wakeup` says when that
//! will be. Tokens are kept in nano-bytes (bytes × 10⁹) so `rate · Δt` is exact.

use crate::validate::ConfigError;
use crate::units::NANOS_PER_SEC;
use crate::{Bytes, DropReason, Dropped, Instant, Packet, QueueDiscipline, Rate};
use serde::Deserialize;
use std::collections::VecDeque;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FifoShaperConfig {
    /// Shaping rate.
    pub rate: Rate,
    /// Bucket size: the largest burst sent at line rate. Must hold the largest packet
    /// (tbf's rule); a longer packet could never leave and is dropped on arrival.
    pub burst: Bytes,
    /// Queue limit in bytes (drop-tail).
    pub limit: Bytes,
    /// Bytes added to each packet's length (IP bytes) before the rate, the burst and the limit
    /// count it, as tc's size table does: Linux's tbf and htb count the Ethernet frame, so they
    /// behave as `overhead = 14` (the testbed runs them with exactly the overhead configured).
    #[serde(default)]
    pub overhead: Bytes,
}

impl FifoShaperConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.rate.0 == 0 {
            return Err(ConfigError::new("rate", "must be greater than zero"));
        }
        if self.burst.0 == 0 {
            return Err(ConfigError::new("burst", "must be greater than zero"));
        }
        if self.limit.0 == 0 {
            return Err(ConfigError::new("limit", "must be greater than zero"));
        }
        Ok(())
    }
}

pub struct FifoShaper {
    rate: Rate,
    overhead: u64,
    capacity_nb: u64,
    limit: u64,
    tokens_nb: u64,
    last: Instant,
    queue: VecDeque<Packet>,
    backlog: u64,
}

impl FifoShaper {
    /// The link rate is not needed: the shaper's own rate paces it.
    pub fn new(cfg: &FifoShaperConfig, _link_rate: Option<Rate>) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let capacity_nb = cfg.burst.0.saturating_mul(NANOS_PER_SEC);
        Ok(FifoShaper {
            rate: cfg.rate,
            overhead: cfg.overhead.0,
            capacity_nb,
            limit: cfg.limit.0,
            tokens_nb: capacity_nb,
            last: Instant::ZERO,
            queue: VecDeque::new(),
            backlog: 0,
        })
    }

    /// What the packet counts for against the rate, the burst and the limit.
    fn charged(&self, pkt: &Packet) -> u64 {
        pkt.len as u64 + self.overhead
    }

    fn refill(&mut self, now: Instant) {
        if now > self.last {
            let earned = self.rate.credit(now.saturating_since(self.last));
            self.tokens_nb = self.tokens_nb.saturating_add(earned).min(self.capacity_nb);
            self.last = now;
        }
    }
}

impl QueueDiscipline for FifoShaper {
    fn enqueue(&mut self, _now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        let len = self.charged(&pkt);
        if len.saturating_mul(NANOS_PER_SEC) > self.capacity_nb {
            drops.push(Dropped { pkt, reason: DropReason::Overlimit });
        } else if self.backlog + len > self.limit {
            drops.push(Dropped { pkt, reason: DropReason::QueueFull });
        } else {
            self.backlog += len;
            self.queue.push_back(pkt);
        }
    }

    fn dequeue(&mut self, now: Instant, _drops: &mut Vec<Dropped>) -> Option<Packet> {
        self.refill(now);
        let need = self.charged(self.queue.front()?) * NANOS_PER_SEC;
        if need > self.tokens_nb {
            return None;
        }
        self.tokens_nb -= need;
        let pkt = self.queue.pop_front()?;
        self.backlog -= self.charged(&pkt);
        Some(pkt)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let need = self.charged(self.queue.front()?) * NANOS_PER_SEC;
        let missing = need.saturating_sub(self.tokens_nb);
        Some(self.last + crate::Duration(missing.div_ceil(self.rate.0.max(1))))
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog
    }
}
