//! Congestion Policing Queues (003): a classifier (customer = `pkt.aggregate`), one congestion
//! policer per customer, and one shared RED queue, plus plain RED and per-customer DRR as the
//! references of 003 Table II.
//!
//! A congestion policer is a token bucket of size S filled at F that only congestion drains
//! (003 §III-B). The seven variants (003 §IV) differ in how congestion is assessed and how the
//! bucket's fill decides. Decisions where 003 is silent (docs/queueing.md):
//! - ICP's Fig. 4 is not in the text: with fill ratio f = tokens/S and knee k (default 0.25),
//!   step drops every packet while f < k; slope drops with 1 − f/k; squared with (1 − f/k)².
//!   ICP drains the size of each of the customer's packets the queue dropped (RED or full).
//!   ICP is "independent of the queue's state" and can be "implemented as independent device"
//!   (003 §IV-A), so a packet ICP drops never reaches the queue: it does not move RED's average.
//!   AFCP and AICP sit in the queue's device, where RED averages every arrival.
//! - AFCP's "current drop probability" is RED's p_b for the current average (not the per-packet,
//!   count-adjusted p_a), so it is a function of the queue's state only.
//! - AICP consumes tokens like AFCP-b: every packet it forwards drains size × RED's p_b (with
//!   the unshifted thresholds), so congestion is priced the same way in AFCP and AICP and Table I
//!   can give both the same F. AICP's own drop decision uses its probability directly (no count).
//! - DRR: per-customer drop-tail queues of `red.limit` bytes each, quantum one MSS (Shreedhar &
//!   Varghese; a customer becoming active starts with one quantum, as Linux sch_drr does).
//!
//! CPQ is link-driven: `next_wakeup` is `None`; the driver dequeues whenever the link is free.

use crate::validate::{require_link, ConfigError};
use crate::red::{ByteFifo, RedAqm, RedConfig};
use crate::{Bytes, DropReason, Dropped, Instant, Packet, QueueDiscipline, Rate};
use serde::Deserialize;
use std::collections::{HashMap, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpqVariant {
    IcpStep,
    IcpSlope,
    IcpSquared,
    AfcpA,
    AfcpB,
    AicpA,
    AicpB,
    /// Reference: the shared RED queue without policers.
    Red,
    /// Reference: one queue per customer served by deficit round robin.
    Drr,
}

impl CpqVariant {
    /// ICP: the policer is a device in front of the queue (003 §IV-A).
    fn is_icp(self) -> bool {
        matches!(self, CpqVariant::IcpStep | CpqVariant::IcpSlope | CpqVariant::IcpSquared)
    }

    /// 003 Table I: (bucket size in bytes, fill rate in bytes/s).
    pub fn table_i(self) -> (u64, u64) {
        match self {
            CpqVariant::IcpStep | CpqVariant::IcpSlope | CpqVariant::IcpSquared => (350_000, 550),
            _ => (225_000, 300),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpqConfig {
    pub variant: CpqVariant,
    /// Congestion bucket size S. Default from 003 Table I (ICP 350000 B, AFCP/AICP 225000 B).
    #[serde(default)]
    pub bucket_size: Option<Bytes>,
    /// Congestion token fill rate F. Default from 003 Table I (ICP 550 B/s, AFCP/AICP 300 B/s).
    #[serde(default)]
    pub fill_rate: Option<Rate>,
    /// ICP: fill ratio below which the drop functions start. Default 0.25 (our reading of Fig. 4).
    #[serde(default = "default_quarter")]
    pub knee: f64,
    /// AICP-b: p_max, the policer's drop probability with an empty bucket. Default 0.5 (003 §IV-C).
    #[serde(default = "default_half")]
    pub p_max: f64,
    /// AICP-b: p_ratio_thresh, the fill ratio where the policer's probability starts. Default 0.25.
    #[serde(default = "default_quarter")]
    pub p_ratio_thresh: f64,
    /// DRR reference: quantum per customer. Default 1500 B (one MSS-sized packet).
    #[serde(default = "default_quantum")]
    pub quantum: Bytes,
    /// The shared queue's RED (the DRR reference uses only `red.limit`, per customer).
    pub red: RedConfig,
}

fn default_quarter() -> f64 {
    0.25
}
fn default_half() -> f64 {
    0.5
}
fn default_quantum() -> Bytes {
    Bytes(1500)
}

impl CpqConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.red.validate().map_err(|e| ConfigError::new(format!("red.{}", e.field), e.message))?;
        if self.bucket_size.is_some_and(|b| b.0 == 0) {
            return Err(ConfigError::new("bucket_size", "must be greater than zero"));
        }
        if self.fill_rate.is_some_and(|r| r.0 == 0) {
            return Err(ConfigError::new("fill_rate", "must be greater than zero"));
        }
        if !(self.knee > 0.0 && self.knee <= 1.0) {
            return Err(ConfigError::new("knee", "must lie in (0, 1]"));
        }
        if !(self.p_max > 0.0 && self.p_max <= 1.0) {
            return Err(ConfigError::new("p_max", "must lie in (0, 1]"));
        }
        if !(self.p_ratio_thresh > 0.0 && self.p_ratio_thresh <= 1.0) {
            return Err(ConfigError::new("p_ratio_thresh", "must lie in (0, 1]"));
        }
        if self.quantum.0 == 0 {
            return Err(ConfigError::new("quantum", "must be greater than zero"));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// One customer's queue in the DRR reference.
#[derive(Debug, Default)]
struct CustomerQueue {
    fifo: ByteFifo,
    deficit: u64,
}

pub struct Cpq {
    variant: CpqVariant,
    size: f64,
    fill_per_ns: f64,
    knee: f64,
    p_max: f64,
    p_ratio_thresh: f64,
    quantum: u64,
    limit: u64,
    aqm: RedAqm,
    fifo: ByteFifo,
    buckets: HashMap<u64, Bucket>,
    // DRR reference only.
    drr_index: HashMap<u64, usize>,
    drr_queues: Vec<CustomerQueue>,
    drr_active: VecDeque<usize>,
    backlog: u64,
}

impl Cpq {
    pub fn new(cfg: &CpqConfig, link_rate: Option<Rate>) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let link = require_link(link_rate, "RED's idle-time correction drains the average at the link rate")?;
        let (size, fill) = cfg.variant.table_i();
        Ok(Cpq {
            variant: cfg.variant,
            size: cfg.bucket_size.map_or(size, |b| b.0) as f64,
            fill_per_ns: cfg.fill_rate.map_or(fill, |r| r.0) as f64 * 1e-9,
            knee: cfg.knee,
            p_max: cfg.p_max,
            p_ratio_thresh: cfg.p_ratio_thresh,
            quantum: cfg.quantum.0,
            limit: cfg.red.limit.0,
            aqm: RedAqm::new(&cfg.red, link),
            fifo: ByteFifo::default(),
            buckets: HashMap::new(),
            drr_index: HashMap::new(),
            drr_queues: Vec::new(),
            drr_active: VecDeque::new(),
            backlog: 0,
        })
    }

    /// The congestion tokens `customer` holds (as of its last packet), if it has been seen.
    pub fn tokens(&self, customer: u64) -> Option<f64> {
        self.buckets.get(&customer).map(|b| b.tokens)
    }

    /// RED's average queue in bytes.
    pub fn red_avg(&self) -> f64 {
        self.aqm.avg()
    }

    /// The customer's bucket, refilled to `now`; a new customer starts with a full bucket.
    fn refill(&mut self, now: Instant, customer: u64) -> f64 {
        let size = self.size;
        let b = self.buckets.entry(customer).or_insert(Bucket { tokens: size, last: now });
        b.tokens = (b.tokens + self.fill_per_ns * now.saturating_since(b.last).0 as f64).min(size);
        b.last = now;
        b.tokens
    }

    fn drain(&mut self, customer: u64, amount: f64) {
        if let Some(b) = self.buckets.get_mut(&customer) {
            b.tokens = (b.tokens - amount).max(0.0);
        }
    }

    /// ICP's drop probability from the fill ratio (our reading of 003 Fig. 4).
    fn icp_drop_probability(&self, fill_ratio: f64) -> f64 {
        if fill_ratio >= self.knee {
            return 0.0;
        }
        let below = 1.0 - fill_ratio / self.knee;
        match self.variant {
            CpqVariant::IcpStep => 1.0,
            CpqVariant::IcpSlope => below,
            _ => below * below,
        }
    }

    /// The AQM's verdict on a packet the policer forwarded: RED, then the hard limit.
    fn aqm_verdict(&mut self, len: u64) -> Option<DropReason> {
        let red = self.aqm.decide();
        if red.is_none() && self.fifo.bytes + len > self.limit {
            return Some(DropReason::QueueFull);
        }
        red
    }

    /// Decides for one packet of the shared-queue variants: `None` admits it.
    fn decide(&mut self, now: Instant, pkt: &Packet) -> Option<DropReason> {
        let len = pkt.len as u64;
        let size = len as f64;
        if self.variant == CpqVariant::Red {
            return self.aqm_verdict(len);
        }
        let tokens = self.refill(now, pkt.aggregate);
        let fill_ratio = tokens / self.size;
        let p_red = self.aqm.p_b(self.aqm.min_th, self.aqm.max_th);
        match self.variant {
            CpqVariant::IcpStep | CpqVariant::IcpSlope | CpqVariant::IcpSquared => {
                let p = self.icp_drop_probability(fill_ratio);
                if p >= 1.0 || (p > 0.0 && self.aqm.draw() < p) {
                    return Some(DropReason::CongestionPolicer);
                }
                self.aqm.on_arrival(now, self.fifo.bytes);
                let verdict = self.aqm_verdict(len);
                if verdict.is_some() {
                    self.drain(pkt.aggregate, size); // a dropped packet is congestion
                }
                verdict
            }
            CpqVariant::AfcpA | CpqVariant::AfcpB => {
                let drain = size * p_red; // 003 §IV-B: drain = size(pkt)·AQM.drop_prob
                if tokens < drain {
                    return Some(DropReason::CongestionPolicer);
                }
                let verdict = self.aqm_verdict(len);
                if self.variant == CpqVariant::AfcpA || verdict.is_none() {
                    self.drain(pkt.aggregate, drain);
                }
                verdict
            }
            CpqVariant::AicpA | CpqVariant::AicpB => {
                let p = if self.variant == CpqVariant::AicpA {
                    // 003 §IV-C: th' = th·(1 + fill/S) for both thresholds.
                    let shift = 1.0 + fill_ratio;
                    self.aqm.p_b(self.aqm.min_th * shift, self.aqm.max_th * shift)
                } else {
                    // 003 §IV-C: p = p_red² + p_prob, p_prob = p_max·(1 − fill/p_ratio_thresh).
                    let p_prob = if fill_ratio < self.p_ratio_thresh {
                        self.p_max * (1.0 - fill_ratio / self.p_ratio_thresh)
                    } else {
                        0.0
                    };
                    p_red * p_red + p_prob
                };
                if p >= 1.0 || (p > 0.0 && self.aqm.draw() < p) {
                    return Some(DropReason::CongestionPolicer);
                }
                if self.fifo.bytes + len > self.limit {
                    return Some(DropReason::QueueFull);
                }
                self.drain(pkt.aggregate, size * p_red);
                None
            }
            CpqVariant::Red | CpqVariant::Drr => unreachable!("handled by the caller"),
        }
    }

    fn drr_enqueue(&mut self, pkt: Packet, drops: &mut Vec<Dropped>) {
        let next = self.drr_queues.len();
        let i = *self.drr_index.entry(pkt.aggregate).or_insert(next);
        if i == next {
            self.drr_queues.push(CustomerQueue::default());
        }
        let q = &mut self.drr_queues[i];
        if q.fifo.bytes + pkt.len as u64 > self.limit {
            drops.push(Dropped { pkt, reason: DropReason::QueueFull });
            return;
        }
        if q.fifo.queue.is_empty() {
            q.deficit = self.quantum;
            self.drr_active.push_back(i);
        }
        self.backlog += pkt.len as u64;
        q.fifo.push(pkt);
    }

    fn drr_dequeue(&mut self) -> Option<Packet> {
        loop {
            let i = *self.drr_active.front()?;
            let q = &mut self.drr_queues[i];
            let head = q.fifo.queue.front()?.len as u64;
            if head <= q.deficit {
                q.deficit -= head;
                let pkt = q.fifo.pop()?;
                if q.fifo.queue.is_empty() {
                    q.deficit = 0;
                    self.drr_active.pop_front();
                }
                self.backlog -= pkt.len as u64;
                return Some(pkt);
            }
            q.deficit += self.quantum;
            self.drr_active.rotate_left(1);
        }
    }
}

impl QueueDiscipline for Cpq {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        if self.variant == CpqVariant::Drr {
            return self.drr_enqueue(pkt, drops);
        }
        if !self.variant.is_icp() {
            self.aqm.on_arrival(now, self.fifo.bytes);
        }
        match self.decide(now, &pkt) {
            Some(reason) => drops.push(Dropped { pkt, reason }),
            None => {
                self.backlog += pkt.len as u64;
                self.fifo.push(pkt);
            }
        }
        if self.fifo.bytes == 0 {
            self.aqm.on_empty(now);
        }
    }

    fn dequeue(&mut self, now: Instant, _drops: &mut Vec<Dropped>) -> Option<Packet> {
        if self.variant == CpqVariant::Drr {
            return self.drr_dequeue();
        }
        let pkt = self.fifo.pop()?;
        self.backlog -= pkt.len as u64;
        if self.fifo.bytes == 0 {
            self.aqm.on_empty(now);
        }
        Some(pkt)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog
    }
}
