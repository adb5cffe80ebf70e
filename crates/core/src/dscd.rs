//! DSCD: scheduling with deadlines, saved credits and decay for BE and ABE traffic
//! (004 §III, Algorithms 1-4, with the erratum of algorithms.md §7).
//!
//! Two FIFO packet queues Q[BE], Q[ABE]; a FIFO credit queue Qc of (size, class) elements; credit
//! counters CC[BE], CC[ABE] and CC_cq. A packet may leave only on its class's credit, and credit
//! is released from Qc in arrival order, so BE never leaves later than in a FIFO; ABE packets whose
//! deadline (arrival + T_d) has passed are dropped, and their credit lets later ABE packets leave
//! early. Decisions beyond the printed pseudocode (docs/queueing.md):
//! - All credit is kept in 2^-10 bytes (004 §IV-B3's s_m = 10), for both exp modes.
//! - One `last_devaluation` serves both the linear (idle) and the exponential decay, as Algorithm 3
//!   prints it, so no interval is devalued twice. The authors' qdisc gives the exponential decay a
//!   clock of its own that its idle branch does not move, so it decays the credit left after an
//!   idle period again by 2^(−idle/t_h); it also lets that clock's time accrue while a fixed-point
//!   step leaves CC[ABE] unchanged, where ours truncates each step (with t_h = 1000 s and calls
//!   microseconds apart, nothing decays). tests/dscd_qdisc_trace.rs measures both: under a BE
//!   backlog the two agree within 0.2 %.
//! - Algorithm 2's loop cannot find credit when exponential decay has eaten the credit an ABE packet
//!   needs and Qc is empty; the printed loop would spin forever. We then serve the ABE head (or
//!   the BE head) and clamp its counter at zero, as §III-B3 says counters "cannot fall below zero".
//! - Erratum: drop the expired ABE head while Q[ABE].len > T_q (len counts the head itself).
//! - DSCD is link-driven: `next_wakeup` is `None`; the driver dequeues whenever the link is free.

use crate::validate::{require_link, ConfigError};
use crate::exp_decay::ExpMode;
use crate::utema::BandwidthEstimator;
use crate::{Bytes, DropReason, Dropped, Duration, Instant, Packet, QueueDiscipline, Rate};
use serde::Deserialize;
use std::collections::VecDeque;

const BE: usize = 0;
const ABE: usize = 1;
/// Credits are scaled by 2^10 (004 §IV-B3).
const CREDIT_SHIFT: u32 = 10;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DscdConfig {
    /// B_max: total credit (≈ FIFO occupancy) the scheduler accepts. Default C·25 ms (Table IV).
    #[serde(default)]
    pub buffer: Option<Bytes>,
    /// T_d: an ABE packet's deadline is its arrival + T_d. Default 10 ms (Table IV).
    #[serde(default = "default_delay_threshold")]
    pub delay_threshold: Duration,
    /// t_h: half-life of saved ABE credit. Default 100 ms (Table IV).
    #[serde(default = "default_half_life")]
    pub half_life: Duration,
    /// T_q: expired ABE packets are dropped only while more than T_q ABE packets wait. Default 1.
    #[serde(default = "default_queue_threshold")]
    pub queue_threshold: u32,
    /// M: UTEMA memory of the bandwidth estimate. Default 50 ms (Table IV; the qdisc uses 100 ms).
    #[serde(default = "default_memory")]
    pub memory: Duration,
    /// exp() implementation: `fixed` (004 §IV-B, default) or `float`.
    #[serde(default)]
    pub exp: ExpMode,
    /// The class id marking ABE packets; every other class is BE. Default 1.
    #[serde(default = "default_abe_class")]
    pub abe_class: u16,
}

fn default_delay_threshold() -> Duration {
    Duration::from_millis(10)
}
fn default_half_life() -> Duration {
    Duration::from_millis(100)
}
fn default_queue_threshold() -> u32 {
    1
}
fn default_memory() -> Duration {
    Duration::from_millis(50)
}
fn default_abe_class() -> u16 {
    1
}

impl DscdConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.delay_threshold.0 == 0 {
            return Err(ConfigError::new("delay_threshold", "T_d must be greater than zero"));
        }
        if self.half_life.0 == 0 {
            return Err(ConfigError::new("half_life", "must be greater than zero"));
        }
        if self.memory.0 == 0 {
            return Err(ConfigError::new("memory", "must be greater than zero"));
        }
        if self.buffer.is_some_and(|b| b.0 == 0) {
            return Err(ConfigError::new("buffer", "must be greater than zero"));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    pkt: Packet,
    deadline: Instant,
}

#[derive(Debug, Clone, Copy)]
struct CreditElement {
    credit: u64,
    class: usize,
}

pub struct Dscd {
    buffer: u64,
    delay_threshold: Duration,
    half_life: Duration,
    queue_threshold: usize,
    exp: ExpMode,
    abe_class: u16,
    queues: [VecDeque<Queued>; 2],
    backlog: u64,
    credit_queue: VecDeque<CreditElement>,
    /// CC[BE], CC[ABE], scaled by 2^10.
    cc: [u64; 2],
    /// CC_cq, scaled by 2^10.
    cc_cq: u64,
    last_devaluation: Option<Instant>,
    estimator: BandwidthEstimator,
}

impl Dscd {
    pub fn new(cfg: &DscdConfig, link_rate: Option<Rate>) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let link = require_link(link_rate, "DSCD's B_max = C·25 ms and its initial bandwidth estimate C")?;
        let buffer = cfg.buffer.map(|b| b.0).unwrap_or_else(|| link.bytes_in(Duration::from_millis(25)).max(1));
        Ok(Dscd {
            buffer: buffer << CREDIT_SHIFT,
            delay_threshold: cfg.delay_threshold,
            half_life: cfg.half_life,
            queue_threshold: cfg.queue_threshold as usize,
            exp: cfg.exp,
            abe_class: cfg.abe_class,
            queues: [VecDeque::new(), VecDeque::new()],
            backlog: 0,
            credit_queue: VecDeque::new(),
            cc: [0, 0],
            cc_cq: 0,
            last_devaluation: None,
            estimator: BandwidthEstimator::new(link.0 as f64, cfg.memory, cfg.exp),
        })
    }

    /// All credit in the system (Qc plus both counters), in bytes: an upper bound on the
    /// occupancy of the FIFO that DSCD imitates.
    pub fn total_credit(&self) -> u64 {
        (self.cc_cq + self.cc[BE] + self.cc[ABE]) >> CREDIT_SHIFT
    }

    /// The current bandwidth estimate C in bytes/s.
    pub fn estimated_rate(&self) -> f64 {
        self.estimator.bytes_per_sec()
    }

    /// CC[ABE], the ABE credit released from Qc and not yet spent, in bytes: the saved credit
    /// that exponential and linear decay devalue (Algorithm 3).
    pub fn saved_abe_credit(&self) -> u64 {
        self.cc[ABE] >> CREDIT_SHIFT
    }

    /// ABE packets waiting.
    pub fn abe_len(&self) -> usize {
        self.queues[ABE].len()
    }

    fn class_of(&self, pkt: &Packet) -> usize {
        if pkt.class == self.abe_class {
            ABE
        } else {
            BE
        }
    }

    fn is_empty(&self) -> bool {
        self.queues[BE].is_empty() && self.queues[ABE].is_empty()
    }

    fn release_credit_element(&mut self) -> bool {
        match self.credit_queue.pop_front() {
            Some(e) => {
                self.cc_cq -= e.credit;
                self.cc[e.class] += e.credit;
                true
            }
            None => false,
        }
    }

    /// Algorithm 3 (DevalueCredit).
    fn devalue_credit(&mut self, now: Instant) {
        let Some(last) = self.last_devaluation.replace(now) else {
            return; // lastDevaluation = −∞ and nothing to devalue yet
        };
        let dt = now.saturating_since(last);
        if self.is_empty() {
            while self.release_credit_element() {} // lines 4-7
            // Line 8: CC[ABE] = max(0, CC[ABE] − C·Δ).
            let drained = self.estimator.bytes_per_sec() * dt.as_secs_f64() * (1u64 << CREDIT_SHIFT) as f64;
            self.cc[ABE] = self.cc[ABE].saturating_sub(drained.min(u64::MAX as f64) as u64);
        } else {
            // Line 10: CC[ABE]·exp(−λΔ) with λ = ln2/t_h.
            self.cc[ABE] = self.exp.halve(self.cc[ABE], dt, self.half_life);
        }
    }
}

impl QueueDiscipline for Dscd {
    /// Algorithm 1.
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.devalue_credit(now);
        let len = (pkt.len as u64) << CREDIT_SHIFT;
        if len + self.cc_cq + self.cc[BE] + self.cc[ABE] > self.buffer {
            drops.push(Dropped { pkt, reason: DropReason::QueueFull });
            return;
        }
        let class = self.class_of(&pkt);
        let deadline = if class == ABE { now + self.delay_threshold } else { Instant(u64::MAX) };
        self.credit_queue.push_back(CreditElement { credit: len, class });
        self.cc_cq += len;
        self.backlog += pkt.len as u64;
        self.queues[class].push_back(Queued { pkt, deadline });
    }

    /// Algorithm 2, with the erratum on line 2.
    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Option<Packet> {
        self.devalue_credit(now);
        while self.queues[ABE].len() > self.queue_threshold
            && self.queues[ABE].front().is_some_and(|q| q.deadline < now)
        {
            let q = self.queues[ABE].pop_front()?;
            self.backlog -= q.pkt.len as u64;
            drops.push(Dropped { pkt: q.pkt, reason: DropReason::Deadline });
        }
        if self.is_empty() {
            return None;
        }
        let head_len = |q: &VecDeque<Queued>| q.front().map(|h| (h.pkt.len as u64) << CREDIT_SHIFT);
        let class = loop {
            if head_len(&self.queues[ABE]).is_some_and(|l| self.cc[ABE] >= l) {
                break ABE;
            }
            if head_len(&self.queues[BE]).is_some_and(|l| self.cc[BE] >= l) {
                break BE;
            }
            if !self.release_credit_element() {
                // Decay ate the credit and Qc is empty: serve anyway (see the module doc).
                break if self.queues[ABE].is_empty() { BE } else { ABE };
            }
        };
        let q = self.queues[class].pop_front()?;
        let len = q.pkt.len as u64;
        self.cc[class] = self.cc[class].saturating_sub(len << CREDIT_SHIFT); // line 17
        self.backlog -= len;
        let still_backlogged = !self.is_empty();
        self.estimator.on_dequeue(now, len, still_backlogged); // line 18
        Some(q.pkt)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog
    }

    fn link_rate_estimate(&self) -> Option<f64> {
        Some(self.estimated_rate())
    }
}
