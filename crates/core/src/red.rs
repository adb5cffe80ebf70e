//! Random Early Detection (Floyd & Jacobson 1993; algorithms.md §6, 003 §IV-B), packet mode.
//!
//! On each arrival the average queue is updated: avg ← (1 − w_q)·avg + w_q·q while the queue is
//! busy, and avg ← (1 − w_q)^m·avg after an idle period, with m = idle time / s and
//! s = mean_pkt_size / link rate (the idle-time correction: the average decays as if m small
//! packets had arrived to an empty queue). Then
//!   p_b = max_p·(avg − min_th)/(max_th − min_th)   for min_th ≤ avg < max_th
//!   p_a = p_b / (1 − count·p_b)                     (count: packets since the last drop)
//! and every packet is dropped once avg ≥ max_th. The queue is measured in bytes, the
//! probability is not scaled by packet size (packet mode, as in 003's evaluation).
//! RED is link-driven: its head is always eligible, so `next_wakeup` is `None`; the driver
//! dequeues whenever the link is free.

use crate::validate::{require_link, ConfigError};
use crate::{Bytes, DropReason, Dropped, Instant, Packet, QueueDiscipline, Rate};
use serde::Deserialize;
use std::collections::VecDeque;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedConfig {
    /// Below this average queue nothing is dropped early.
    pub min_th: Bytes,
    /// At and above this average queue every packet is dropped.
    pub max_th: Bytes,
    /// Drop probability reached at max_th, in (0, 1]. Default 0.1 (Floyd & Jacobson's 1/50..1/10).
    #[serde(default = "default_max_p")]
    pub max_p: f64,
    /// Averaging weight w_q in (0, 1]. Default 0.002 (Floyd & Jacobson §11).
    #[serde(default = "default_w_q")]
    pub w_q: f64,
    /// Hard queue limit in bytes (drop-tail behind RED); must be at least max_th.
    pub limit: Bytes,
    /// Typical packet size for the idle-time correction's s = size / link rate. Default 1500 B.
    #[serde(default = "default_mean_pkt")]
    pub mean_pkt_size: Bytes,
    /// Seed of the drop decisions' random source. Default 1.
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_max_p() -> f64 {
    0.1
}
fn default_w_q() -> f64 {
    0.002
}
fn default_mean_pkt() -> Bytes {
    Bytes(1500)
}
fn default_seed() -> u64 {
    1
}

impl RedConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.min_th >= self.max_th {
            return Err(ConfigError::new("min_th", "must be below max_th"));
        }
        if !(self.max_p > 0.0 && self.max_p <= 1.0) {
            return Err(ConfigError::new("max_p", "must lie in (0, 1]"));
        }
        if !(self.w_q > 0.0 && self.w_q <= 1.0) {
            return Err(ConfigError::new("w_q", "must lie in (0, 1]"));
        }
        if self.limit < self.max_th {
            return Err(ConfigError::new("limit", "must be at least max_th"));
        }
        if self.mean_pkt_size.0 == 0 {
            return Err(ConfigError::new("mean_pkt_size", "must be greater than zero"));
        }
        Ok(())
    }
}

/// A small seeded PRNG (SplitMix64) so the core needs no `rand` dependency.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        crate::packet::mix64(self.0)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// RED's state and decisions, shared by `Red` and CPQ's AQM.
#[derive(Debug, Clone)]
pub struct RedAqm {
    pub min_th: f64,
    pub max_th: f64,
    pub max_p: f64,
    w_q: f64,
    /// s of the idle correction, in ns.
    small_pkt_time_ns: f64,
    avg: f64,
    /// Packets since the last drop, −1 while avg < min_th (Floyd & Jacobson's initialisation).
    count: i64,
    idle_since: Option<Instant>,
    rng: SplitMix64,
}

impl RedAqm {
    pub fn new(cfg: &RedConfig, link_rate: Rate) -> Self {
        RedAqm {
            min_th: cfg.min_th.0 as f64,
            max_th: cfg.max_th.0 as f64,
            max_p: cfg.max_p,
            w_q: cfg.w_q,
            small_pkt_time_ns: cfg.mean_pkt_size.0 as f64 * 1e9 / link_rate.0.max(1) as f64,
            avg: 0.0,
            count: -1,
            idle_since: Some(Instant::ZERO),
            rng: SplitMix64::new(cfg.seed),
        }
    }

    pub fn avg(&self) -> f64 {
        self.avg
    }

    /// Updates the average on an arrival that finds `queue_bytes` queued.
    pub fn on_arrival(&mut self, now: Instant, queue_bytes: u64) {
        match self.idle_since.take() {
            Some(since) if queue_bytes == 0 => {
                let m = now.saturating_since(since).0 as f64 / self.small_pkt_time_ns;
                self.avg *= (1.0 - self.w_q).powf(m);
            }
            _ => self.avg = (1.0 - self.w_q) * self.avg + self.w_q * queue_bytes as f64,
        }
    }

    /// The queue is empty at `now`: an idle period starts unless one is already running (an
    /// arrival that RED never saw, e.g. one a policer in front dropped, must not restart it).
    pub fn on_empty(&mut self, now: Instant) {
        self.idle_since.get_or_insert(now);
    }

    /// p_b for the current average and the given thresholds; 1.0 at and above max_th.
    pub fn p_b(&self, min_th: f64, max_th: f64) -> f64 {
        if self.avg < min_th {
            0.0
        } else if self.avg >= max_th {
            1.0
        } else {
            self.max_p * (self.avg - min_th) / (max_th - min_th)
        }
    }

    /// RED's drop decision with its own thresholds, including the count-based p_a.
    pub fn decide(&mut self) -> Option<DropReason> {
        if self.avg < self.min_th {
            self.count = -1;
            return None;
        }
        if self.avg >= self.max_th {
            self.count = 0;
            return Some(DropReason::RedForced);
        }
        self.count += 1;
        let p_b = self.p_b(self.min_th, self.max_th);
        let denom = 1.0 - self.count as f64 * p_b;
        let p_a = if denom <= 0.0 { 1.0 } else { p_b / denom };
        if self.rng.next_f64() < p_a {
            self.count = 0;
            Some(DropReason::RedEarly)
        } else {
            None
        }
    }

    /// A uniform draw from RED's random source, for decisions made with another probability.
    pub fn draw(&mut self) -> f64 {
        self.rng.next_f64()
    }
}

/// A FIFO of packets that keeps its byte count, shared by RED and CPQ.
#[derive(Debug, Default)]
pub(crate) struct ByteFifo {
    pub queue: VecDeque<Packet>,
    pub bytes: u64,
}

impl ByteFifo {
    pub fn push(&mut self, pkt: Packet) {
        self.bytes += pkt.len as u64;
        self.queue.push_back(pkt);
    }
    pub fn pop(&mut self) -> Option<Packet> {
        let pkt = self.queue.pop_front()?;
        self.bytes -= pkt.len as u64;
        Some(pkt)
    }
}

pub struct Red {
    aqm: RedAqm,
    limit: u64,
    fifo: ByteFifo,
}

impl Red {
    pub fn new(cfg: &RedConfig, link_rate: Option<Rate>) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let link = require_link(link_rate, "RED's idle-time correction drains the average at the link rate")?;
        Ok(Red { aqm: RedAqm::new(cfg, link), limit: cfg.limit.0, fifo: ByteFifo::default() })
    }

    /// The average queue in bytes.
    pub fn avg(&self) -> f64 {
        self.aqm.avg()
    }
}

impl QueueDiscipline for Red {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.aqm.on_arrival(now, self.fifo.bytes);
        let verdict = self.aqm.decide();
        match verdict {
            Some(reason) => drops.push(Dropped { pkt, reason }),
            None if self.fifo.bytes + pkt.len as u64 > self.limit => {
                drops.push(Dropped { pkt, reason: DropReason::QueueFull })
            }
            None => self.fifo.push(pkt),
        }
        if self.fifo.bytes == 0 {
            self.aqm.on_empty(now);
        }
    }

    fn dequeue(&mut self, now: Instant, _drops: &mut Vec<Dropped>) -> Option<Packet> {
        let pkt = self.fifo.pop()?;
        if self.fifo.bytes == 0 {
            self.aqm.on_empty(now);
        }
        Some(pkt)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn backlog_bytes(&self) -> u64 {
        self.fifo.bytes
    }
}
