//! FairPolicer (001 §IV; algorithms.md §4) and its weighted variant (000 §6.4.2).
//!
//! One global bucket of B bytes filled at R. Each flow's *occupied tokens* o_i live in a
//! count-min sketch; Σ o_i is kept exactly beside it, so the available tokens are
//! k = B − Σ o_i. A packet of flow i and length l passes iff ô_i < T and k ≥ l, with the
//! dynamic threshold T = k (Eq. 5, which approximates B/(n+1) of Eq. 4); on pass ô_i += l.
//! Tokens generated at R are handed round-robin, `token_unit` bytes at a time (× the flow's
//! weight in the weighted variant), to the flows on the active list, lowering their o_i.
//!
//! Decisions where the paper, the public code (ants-xjtu/FairPolicer) and practice differ:
//! - Token unit: default 1500 B (one MTU-sized packet, as a DRR quantum). The paper allows 1 B
//!   in theory and "10 KB at a time" at high rates; the public code uses 100 B. The unit only
//!   sets the round-robin quantum and the work per packet, because of the next point.
//! - No token is wasted: when the head flow holds less than a unit, it gets what it holds, is
//!   removed, and the rest of the credit goes on to the next flow. The paper (§IV-D) and the
//!   code discard the rest, which lowers the enforced rate below R with many small flows.
//! - Active list membership is exact: a flow joins when it passes a packet and is not already
//!   on the list (an exact set of the listed flow keys). The paper's rule "join when the
//!   estimate before the packet is 0" leaves out a flow whose estimate is non-zero through a
//!   collision; its counters are then never lowered by its own turns, and once its colliders
//!   leave it holds tokens for ever (starves, and the bucket leaks). The list has no cap (the
//!   code caps it at 2000 and only logs the overflow).
//! - Bounded work per packet: tokens are allocated lazily on arrival, and allocation stops as
//!   soon as the list is empty (the bucket is then full: the paper discards further tokens),
//!   so after an idle period the loop runs at most Σ o_i / unit + (list length) times.
//! - If the list empties while Σ o_i is not zero (bytes the sketch attributes to nobody after
//!   collisions: a flow's turns subtract from counters it shares with others), the sketch is
//!   cleared, since every real flow's occupancy is zero then, but those bytes stay *owed*: they
//!   still hold tokens, and generated credit pays them off before any flow's turn. Clearing
//!   them for free (the paper's code) lets a window pass more than B + R·Δt.
//! - The threshold test is strict, ô_i < T as in Eq. 3 (the code tests ≤).
//!
//! Integer-only data path: credit in nano-bytes from `Rate::credit`, u32 sketch counters in
//! bytes (B ≤ 4 GiB − 1), saturating arithmetic; the eBPF mirror repeats it bit for bit.

use crate::validate::{check_rate, check_size, ConfigError};
use crate::count_min::{CountMin, MAX_DEPTH, MAX_WIDTH};
use crate::fast_hash::FastSet;
use crate::token_bucket::{advance, PolicerStats};
use crate::units::{Bytes, Rate, NANOS_PER_SEC};
use crate::{DropReason, Instant, Packet, Policer, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Sketch depth d (001 §V: 4 × 1024 by default).
pub const DEFAULT_SKETCH_DEPTH: u32 = 4;
/// Sketch width w (001 §V; 4 × 4096 serves ~1000 flows).
pub const DEFAULT_SKETCH_WIDTH: u32 = 1024;
/// Token allocation unit in bytes (see the module doc for why 1500).
pub const DEFAULT_TOKEN_UNIT: u64 = 1500;
/// Default sketch seed; any value works, a fixed one keeps runs reproducible.
pub const DEFAULT_SEED: u64 = 0x5EED_F00D_CAFE_0001;
/// Largest weight accepted in the weighted variant.
pub const MAX_WEIGHT: u32 = 1 << 16;

/// `kind = "fair_policer"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FairPolicerConfig {
    /// Token rate R.
    pub rate: Rate,
    /// Global bucket capacity B (see `sizing::Cubic::fair_policer_bucket_bytes`, Eq. 16).
    pub bucket: Bytes,
    /// Count-min rows d (default 4).
    #[serde(default = "default_depth")]
    pub sketch_depth: u32,
    /// Count-min columns w, a power of two (default 1024).
    #[serde(default = "default_width")]
    pub sketch_width: u32,
    /// Bytes handed to a flow per round-robin turn (default 1500).
    #[serde(default = "default_unit")]
    pub token_unit: Bytes,
    /// Seed of the sketch's row hashes (default `DEFAULT_SEED`).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Weighted variant (000 §6.4.2): weight of each class, indexed by `Packet::class`; a flow
    /// gets `weight × token_unit` per turn. Empty (the default) = plain FairPolicer; classes
    /// beyond the list weigh 1.
    #[serde(default)]
    pub weights: Vec<u32>,
}

fn default_depth() -> u32 {
    DEFAULT_SKETCH_DEPTH
}
fn default_width() -> u32 {
    DEFAULT_SKETCH_WIDTH
}
fn default_unit() -> Bytes {
    Bytes(DEFAULT_TOKEN_UNIT)
}
fn default_seed() -> u64 {
    DEFAULT_SEED
}

impl FairPolicerConfig {
    pub fn new(rate: Rate, bucket: u64) -> Self {
        FairPolicerConfig {
            rate,
            bucket: Bytes(bucket),
            sketch_depth: DEFAULT_SKETCH_DEPTH,
            sketch_width: DEFAULT_SKETCH_WIDTH,
            token_unit: Bytes(DEFAULT_TOKEN_UNIT),
            seed: DEFAULT_SEED,
            weights: Vec::new(),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        check_rate("rate", self.rate)?;
        check_size("bucket", self.bucket.0)?;
        if self.bucket.0 > u32::MAX as u64 {
            return Err(ConfigError::new("bucket", "must be below 4gb (sketch counters are 32-bit)"));
        }
        if !(1..=MAX_DEPTH).contains(&self.sketch_depth) {
            return Err(ConfigError::new("sketch_depth", format!("must be 1..={MAX_DEPTH}")));
        }
        if !(2..=MAX_WIDTH).contains(&self.sketch_width) || !self.sketch_width.is_power_of_two() {
            return Err(ConfigError::new("sketch_width", format!("must be a power of two in 2..={MAX_WIDTH}")));
        }
        if self.token_unit.0 == 0 || self.token_unit.0 > self.bucket.0 {
            return Err(ConfigError::new("token_unit", "must be between 1 byte and the bucket size"));
        }
        if let Some(i) = self.weights.iter().position(|&w| w == 0 || w > MAX_WEIGHT) {
            return Err(ConfigError::new(format!("weights[{i}]"), format!("must be 1..={MAX_WEIGHT}")));
        }
        if self.weights.len() > u16::MAX as usize + 1 {
            return Err(ConfigError::new("weights", "more entries than classes"));
        }
        Ok(())
    }
}

/// A flow waiting for tokens: its key and the bytes it gets per turn.
#[derive(Debug, Clone, Copy)]
struct ActiveFlow {
    flow: u64,
    quantum: u64,
}

/// Counters beyond pass/drop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FairPolicerStats {
    pub policer: PolicerStats,
    /// Drops because the flow held at least the threshold T = k.
    pub threshold_drops: u64,
    /// Drops because the bucket had fewer than l tokens.
    pub overlimit_drops: u64,
    /// Round-robin allocation steps taken (bounded work is tested on this).
    pub allocation_steps: u64,
    /// Times the list emptied with bytes left in the sketch (cleared then, the bytes owed).
    pub residue_clears: u64,
    /// Bytes owed that way, in total.
    pub residue_bytes: u64,
}

/// The FairPolicer. Its state lives behind one pointer: it carries a heap sketch anyway, and
/// this keeps `AnyPolicer` (sized by its largest variant) small for every other policer.
#[derive(Debug, Clone)]
pub struct FairPolicer {
    st: Box<State>,
}

#[derive(Debug, Clone)]
struct State {
    rate: Rate,
    bucket: u64,
    unit: u64,
    weights: Box<[u32]>,
    sketch: CountMin,
    /// Σ o_i, exact: bytes passed minus bytes allocated, less what is `owed`.
    occupied: u64,
    /// Bytes passed that no flow holds any more (the residue), not yet paid by credit.
    owed: u64,
    /// Generated tokens not yet handed to a flow, nano-bytes.
    credit: u64,
    last: Instant,
    active: VecDeque<ActiveFlow>,
    listed: FastSet<u64>,
    stats: FairPolicerStats,
}

impl FairPolicer {
    pub fn new(cfg: &FairPolicerConfig) -> Self {
        FairPolicer { st: Box::new(State::new(cfg)) }
    }

    /// Available tokens k = B − Σ o_i − owed (bytes) as of the last arrival; also the threshold T.
    pub fn tokens(&self) -> u64 {
        self.st.bucket - self.st.occupied - self.st.owed
    }

    /// Σ o_i in bytes.
    pub fn occupied(&self) -> u64 {
        self.st.occupied
    }

    /// Residue bytes still owed (see the module doc).
    pub fn owed(&self) -> u64 {
        self.st.owed
    }

    /// The sketch's estimate of a flow's occupied tokens.
    pub fn estimate(&self, flow: u64) -> u32 {
        self.st.sketch.estimate(flow)
    }

    /// Flows waiting for tokens.
    pub fn active_len(&self) -> usize {
        self.st.active.len()
    }

    pub fn sketch(&self) -> &CountMin {
        &self.st.sketch
    }

    pub fn stats(&self) -> &FairPolicerStats {
        &self.st.stats
    }

    /// Heap bytes held: the state, the sketch, and the active list and its index at their
    /// capacity.
    pub fn heap_bytes(&self) -> usize {
        let st = &self.st;
        std::mem::size_of::<State>()
            + st.sketch.heap_bytes()
            + st.weights.len() * 4
            + st.active.capacity() * std::mem::size_of::<ActiveFlow>()
            + st.listed.capacity() * (std::mem::size_of::<u64>() + 1)
    }
}

impl State {
    fn new(cfg: &FairPolicerConfig) -> Self {
        State {
            rate: cfg.rate,
            bucket: cfg.bucket.0.min(u32::MAX as u64),
            unit: cfg.token_unit.0.max(1),
            weights: cfg.weights.clone().into_boxed_slice(),
            sketch: CountMin::new(cfg.sketch_depth, cfg.sketch_width, cfg.seed),
            occupied: 0,
            owed: 0,
            credit: 0,
            last: Instant::ZERO,
            active: VecDeque::new(),
            listed: FastSet::default(),
            stats: FairPolicerStats::default(),
        }
    }

    #[inline]
    fn quantum(&self, class: u16) -> u64 {
        self.unit * self.weights.get(class as usize).copied().unwrap_or(1) as u64
    }

    /// Hands the tokens generated since the last call to the active flows, round robin
    /// (001 §IV-D "token allocation module"; weighted round robin with weights), after the
    /// residue owed.
    fn allocate(&mut self, now: Instant) {
        let dt = advance(&mut self.last, now);
        self.credit = self.credit.saturating_add(self.rate.credit(dt));
        if !self.pay_owed() {
            return;
        }
        while let Some(&head) = self.active.front() {
            let held = self.sketch.estimate(head.flow) as u64;
            let give = head.quantum.min(held);
            let cost = give * NANOS_PER_SEC;
            if cost > self.credit {
                return;
            }
            self.credit -= cost;
            self.stats.allocation_steps += 1;
            // give ≤ held ≤ u32::MAX, and ≤ every row's counter for this flow.
            self.sketch.sub(head.flow, give as u32);
            self.occupied = self.occupied.saturating_sub(give);
            self.active.pop_front();
            if held > give {
                self.active.push_back(head);
            } else {
                self.listed.remove(&head.flow);
            }
        }
        if self.occupied != 0 {
            self.sketch.clear();
            self.owed += self.occupied;
            self.stats.residue_clears += 1;
            self.stats.residue_bytes += self.occupied;
            self.occupied = 0;
        }
        if self.pay_owed() {
            // Empty list, nothing owed: the bucket is full and further tokens are discarded.
            self.credit = 0;
        }
    }

    /// Pays the residue owed from the credit; true once nothing is owed.
    #[inline]
    fn pay_owed(&mut self) -> bool {
        if self.owed != 0 {
            let pay = self.owed.min(self.credit / NANOS_PER_SEC);
            self.owed -= pay;
            self.credit -= pay * NANOS_PER_SEC;
        }
        self.owed == 0
    }

    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        self.allocate(now);
        let len = pkt.len as u64;
        let k = self.bucket - self.occupied - self.owed;
        let verdict = if k < len {
            self.stats.overlimit_drops += 1;
            Verdict::Drop(DropReason::Overlimit)
        } else if self.sketch.estimate(pkt.flow) as u64 >= k {
            // Eq. 3 with T = k (Eq. 5).
            self.stats.threshold_drops += 1;
            Verdict::Drop(DropReason::FlowThreshold)
        } else {
            self.sketch.add(pkt.flow, pkt.len);
            self.occupied += len;
            if self.listed.insert(pkt.flow) {
                self.active.push_back(ActiveFlow { flow: pkt.flow, quantum: self.quantum(pkt.class) });
            }
            Verdict::Pass
        };
        self.stats.policer.count(verdict, pkt.len);
        verdict
    }
}

impl Policer for FairPolicer {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        self.st.on_arrival(now, pkt)
    }
}
