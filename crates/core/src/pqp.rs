//! PQP: a policer with N phantom queues served by a policy tree (000 §3, algorithms.md §2).
//!
//! On arrival of `s` bytes for queue Q_i at `now`: (1) the phantom service owed since the last
//! arrival, r·Δt, is handed out in one batch exactly as the analogous shaper's policy would
//! (see [`crate::phantom`]); (2) the packet passes iff L_i + s ≤ B_i, and then L_i += s.
//! No packet is held and no timer runs: service is computed lazily at the next arrival, which
//! is the only moment a decision can observe it. Doing the batch at every arrival (rather than
//! only when a queue looks full, as the authors' code does) keeps the phantom departures equal to
//! the shaper's (Property 1): a batch that straddles an arrival would start the new bytes'
//! service too early.

use crate::validate::{check_rate, ConfigError};
use crate::phantom::{PhantomPolicy, PhantomQueues};
use crate::packet::mix64;
use crate::policy::PolicyNode;
use crate::units::{MAX_SIZE_BYTES, NANOS_PER_SEC};
use crate::{Bytes, Classify, DropReason, Instant, Packet, Policer, Rate, Verdict};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The most queues one aggregate may have.
pub const MAX_QUEUES: u32 = 1024;

fn default_queues() -> u32 {
    16
}
fn default_policy() -> String {
    "fair".to_string()
}

/// The most flows `flows = "exact"` may track per aggregate (about 100 MB of flow state).
pub const MAX_FLOWS: u32 = 1 << 20;
/// `max_flows` when not given: the floor (a subscriber's home holds dozens of flows).
pub const DEFAULT_MAX_FLOWS: u32 = 1024;

/// How `classify = "flow"` maps flows to phantom queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowQueuing {
    /// hash(flow) mod N fixed queues (000 §3.1; what the tc-BPF programs do).
    #[default]
    Hashed,
    /// One queue per flow, created on its first packet and reclaimed once drained and idle,
    /// at most `max_flows` (crate::phantom::FlowQueues). With `classify = "flow"` the policy is
    /// flat `fair` over the flows; with `classify = "class"` (PQP) the policy runs over the
    /// classes and each class shares its service fairly among its own flows.
    Exact,
}

/// `kind = "pqp"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PqpConfig {
    /// Aggregate rate r: the phantom queues are served at this cumulative rate.
    pub rate: Rate,
    /// Number of phantom queues N (1..=1024). Default 16.
    #[serde(default = "default_queues")]
    pub queues: u32,
    /// Size B_i of each phantom queue. 000 §3.5: at least BDP²/18·MSS for a backlogged Reno flow.
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
    /// `hashed` (the default) or `exact` per-flow queues.
    #[serde(default)]
    pub flows: FlowQueuing,
    /// With `flows = "exact"`: flows tracked per aggregate (default 1024); later flows share
    /// one overflow queue, counted in `FlowStats::overflow_packets`.
    #[serde(default)]
    pub max_flows: Option<u32>,
    /// With `flows = "exact"` and `classify = "class"`: the classes whose flows share the class's
    /// service fairly, each in its own queue (default: every class). A class not listed keeps one
    /// phantom queue for all its flows, as class-queued PQP does.
    #[serde(default)]
    pub fair_classes: Option<Vec<u32>>,
}

impl PqpConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.resolve().map(|_| ())
    }

    /// Validates and compiles the policy; every error names its field.
    pub(crate) fn resolve(&self) -> Result<PhantomPolicy, ConfigError> {
        check_rate("rate", self.rate)?;
        self.check_flows()?;
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return Err(ConfigError::new("queues", format!("must be in 1..={MAX_QUEUES}, got {}", self.queues)));
        }
        if self.queue_size.0 == 0 {
            return Err(ConfigError::new("queue_size", "must be greater than zero"));
        }
        // Occupancies are nano-bytes in u64: all queues together must fit (≈ 18.4 GB). Flat
        // exact flows keep no total (virtual time needs only one queue's worth above the level);
        // a class of exact flows holds up to max_flows of them in its class queue.
        let (queues, what) = match (self.flows, self.classify) {
            (FlowQueuing::Hashed, _) => (self.queues as u64, "queues"),
            (FlowQueuing::Exact, Classify::Flow) => (1, "one flow's"),
            (FlowQueuing::Exact, Classify::Class) => {
                let fair = (0..self.queues).filter(|&c| self.is_fair_class(c)).count() as u64;
                (fair * self.max_flows() as u64 + self.queues as u64 - fair, "fair classes × max_flows + other classes")
            }
        };
        let total = self.queue_size.0.saturating_mul(queues);
        if total > MAX_SIZE_BYTES {
            return Err(ConfigError::new(
                "queue_size",
                format!("{what} × queue_size = {total} bytes exceeds the 16 GiB an aggregate may hold"),
            ));
        }
        let field = if self.weights.is_some() { "weights" } else { "policy" };
        let node = PolicyNode::resolve(&self.policy, self.queues as usize, self.weights.as_deref())
            .map_err(|e| ConfigError::new(field, e.to_string()))?;
        PhantomPolicy::compile(&node).map_err(|e| ConfigError::new("policy", e.to_string()))
    }

    /// `flows` and `max_flows`: exact flows by flow key need the flat fair policy (the flows are
    /// the policy's members); by class, any policy over the classes.
    fn check_flows(&self) -> Result<(), ConfigError> {
        if let Some(list) = &self.fair_classes {
            if (self.flows, self.classify) != (FlowQueuing::Exact, Classify::Class) {
                return Err(ConfigError::new("fair_classes", "only with flows = \"exact\" and classify = \"class\""));
            }
            for (i, &c) in list.iter().enumerate() {
                if c >= self.queues {
                    return Err(ConfigError::new("fair_classes", format!("class {c} is not one of the {} classes (0..{})", self.queues, self.queues)));
                }
                if list[..i].contains(&c) {
                    return Err(ConfigError::new("fair_classes", format!("class {c} is listed twice")));
                }
            }
        }
        if self.flows == FlowQueuing::Hashed {
            return match self.max_flows {
                Some(_) => Err(ConfigError::new("max_flows", "only with flows = \"exact\"")),
                None => Ok(()),
            };
        }
        if self.classify == Classify::Flow && (self.policy != "fair" || self.weights.is_some()) {
            let field = if self.weights.is_some() { "weights" } else { "policy" };
            return Err(ConfigError::new(
                field,
                "flows = \"exact\" with classify = \"flow\" supports policy = \"fair\" only; for a policy over classes use classify = \"class\"",
            ));
        }
        let max = self.max_flows();
        if !(1..=MAX_FLOWS).contains(&max) {
            return Err(ConfigError::new("max_flows", format!("must be in 1..={MAX_FLOWS}, got {max}")));
        }
        Ok(())
    }

    /// Whether class `c`'s flows each get a queue (`fair_classes`; every class when not given).
    pub fn is_fair_class(&self, c: u32) -> bool {
        self.fair_classes.as_ref().map_or(true, |list| list.contains(&c))
    }

    /// Flows tracked per aggregate (per class with `classify = "class"`) under `flows = "exact"`.
    pub fn max_flows(&self) -> u32 {
        self.max_flows.unwrap_or(DEFAULT_MAX_FLOWS)
    }
}

/// What every aggregate with the same config shares.
#[derive(Debug)]
pub struct PqpParams {
    pub rate: Rate,
    /// B_i in nano-bytes.
    pub queue_size_nb: u64,
    pub classify: Classify,
    pub queues: usize,
    pub policy: PhantomPolicy,
    /// N − 1 when packets go to hash(flow) mod N with N a power of two (then a mask).
    flow_mask: Option<u64>,
}

impl PqpParams {
    /// Panics on an invalid config: call [`PqpConfig::validate`] first (config.rs does).
    pub fn new(cfg: &PqpConfig) -> Self {
        let policy = cfg.resolve().expect("PqpConfig must be validated before use");
        PqpParams {
            rate: cfg.rate,
            queue_size_nb: cfg.queue_size.0 * NANOS_PER_SEC,
            classify: cfg.classify,
            queues: cfg.queues as usize,
            policy,
            flow_mask: (cfg.classify == Classify::Flow && cfg.queues.is_power_of_two()).then(|| cfg.queues as u64 - 1),
        }
    }
}

/// Counters, by verdict and drop reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PqpStats {
    pub passed_packets: u64,
    pub passed_bytes: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
}

/// Totals over the parts of one aggregate (the classes of exact flows).
impl std::iter::Sum for PqpStats {
    fn sum<I: Iterator<Item = Self>>(parts: I) -> Self {
        parts.fold(PqpStats::default(), |t, s| PqpStats {
            passed_packets: t.passed_packets + s.passed_packets,
            passed_bytes: t.passed_bytes + s.passed_bytes,
            dropped_packets: t.dropped_packets + s.dropped_packets,
            dropped_bytes: t.dropped_bytes + s.dropped_bytes,
        })
    }
}

impl PqpStats {
    /// Counts a verdict on `bytes`.
    #[inline(always)]
    pub(crate) fn count(&mut self, passed: bool, bytes: u64) {
        if passed {
            self.passed_packets += 1;
            self.passed_bytes += bytes;
        } else {
            self.dropped_packets += 1;
            self.dropped_bytes += bytes;
        }
    }
}

/// One aggregate's PQP.
#[derive(Debug, Clone)]
pub struct Pqp {
    params: Arc<PqpParams>,
    pub(crate) queues: PhantomQueues,
    last: Instant,
    stats: PqpStats,
}

impl Pqp {
    pub fn new(cfg: &PqpConfig) -> Self {
        Self::with_params(Arc::new(PqpParams::new(cfg)))
    }

    /// A fresh aggregate sharing `params` (cheap: multi-aggregate containers use this).
    pub fn with_params(params: Arc<PqpParams>) -> Self {
        let queues = PhantomQueues::new(&params.policy);
        Pqp { params, queues, last: Instant::ZERO, stats: PqpStats::default() }
    }

    pub fn params(&self) -> &Arc<PqpParams> {
        &self.params
    }

    pub fn stats(&self) -> PqpStats {
        self.stats
    }

    /// Memory of one aggregate: the struct plus its heap (the shared params not counted).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.queues.heap_bytes()
    }

    /// Occupancy L_i of queue `q` in nano-bytes (bytes × 10⁹), as of the last arrival.
    #[inline(always)]
    pub fn occupancy_nb(&self, q: usize) -> u64 {
        self.queues.occupancy(&self.params.policy, q)
    }

    /// The queue a packet belongs to.
    #[inline]
    pub fn queue_of(&self, pkt: &Packet) -> usize {
        match self.params.flow_mask {
            // The same queue as Classify::queue_of (x mod 2^k = x & (2^k − 1)) without a division.
            Some(mask) => (mix64(pkt.flow) & mask) as usize,
            None => self.params.classify.queue_of(pkt, self.params.queues),
        }
    }

    /// Brings phantom service up to `now` (000 §3.1: batched dequeues). A clock that went
    /// backwards serves nothing and leaves the reference time where it was.
    #[inline]
    pub(crate) fn advance(&mut self, now: Instant, on_drain: &mut impl FnMut(usize, u64)) {
        if now > self.last {
            let budget = self.params.rate.credit(now - self.last);
            self.queues.serve(&self.params.policy, budget, on_drain);
            self.last = now;
        }
    }

    /// Adds `nb` nano-bytes to queue `q` that were admitted elsewhere (the per-flow queues of a
    /// class of exact flows decide; the class's queue holds their sum). Counts nothing.
    #[inline]
    pub(crate) fn add_admitted(&mut self, q: usize, nb: u64) {
        self.queues.add(&self.params.policy, q, nb, &mut |_, _| {});
    }

    /// Takes `nb` nano-bytes out of queue `q` unserved (magic of a class's flow, removed there).
    pub(crate) fn remove_unserved(&mut self, q: usize, nb: u64) {
        self.queues.remove(&self.params.policy, q, nb, &mut |_, _| {});
    }

    /// Admits `bytes` into queue `q` if it fits; counts the verdict. `occupancy` is L_i as
    /// [`Self::occupancy_nb`] reports it now; `full` names the drop reason (asked on drops only).
    #[inline(always)]
    pub(crate) fn admit(
        &mut self,
        q: usize,
        occupancy: u64,
        bytes: u64,
        full: impl FnOnce() -> DropReason,
        on_drain: &mut impl FnMut(usize, u64),
    ) -> Verdict {
        let nb = bytes.saturating_mul(NANOS_PER_SEC);
        let fits = occupancy.saturating_add(nb) <= self.params.queue_size_nb;
        self.stats.count(fits, bytes);
        if fits {
            self.queues.add(&self.params.policy, q, nb, on_drain);
            Verdict::Pass
        } else {
            Verdict::Drop(full())
        }
    }
}

impl Policer for Pqp {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let q = self.queue_of(pkt);
        self.advance(now, &mut |_, _| {});
        let occupancy = self.occupancy_nb(q);
        self.admit(q, occupancy, pkt.len as u64, || DropReason::Overlimit, &mut |_, _| {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EnforcerConfig;

    fn pkt(flow: u64, len: u32) -> Packet {
        Packet { flow, class: flow as u16, len, ..Packet::default() }
    }

    #[test]
    fn single_queue_is_a_token_bucket() {
        let cfg = EnforcerConfig::from_toml("kind = \"pqp\"\nrate = \"8kbit\"\nqueues = 1\nqueue_size = 3000").unwrap();
        let EnforcerConfig::Pqp(cfg) = cfg else { panic!() };
        let mut p = Pqp::new(&cfg);
        let t = Instant(0);
        assert!(p.on_arrival(t, &pkt(1, 1500)).is_pass());
        assert!(p.on_arrival(t, &pkt(1, 1500)).is_pass());
        assert_eq!(p.on_arrival(t, &pkt(1, 1)), Verdict::Drop(DropReason::Overlimit));
        // 1000 B/s: after 1 s exactly 1000 bytes of room.
        assert!(!p.on_arrival(Instant(999_999_999), &pkt(1, 1000)).is_pass());
        assert!(p.on_arrival(Instant(1_000_000_000), &pkt(1, 1000)).is_pass());
        assert_eq!(p.stats().passed_bytes, 4000);
    }

    #[test]
    fn config_errors_name_the_field() {
        let e = |s: &str| {
            let e = EnforcerConfig::from_toml(s).unwrap_err();
            if e.field.is_empty() { e.message } else { e.field }
        };
        assert_eq!(e("kind = \"pqp\"\nrate = \"1mbit\"\nqueue_size = 1000\nqueues = 0"), "queues");
        assert_eq!(e("kind = \"pqp\"\nrate = \"1mbit\"\nqueue_size = 1000\npolicy = \"lottery\""), "policy");
        assert_eq!(e("kind = \"pqp\"\nrate = \"1mbit\"\nqueue_size = 1000\nqueues = 2\nweights = [1]"), "weights");
        assert_eq!(e("kind = \"pqp\"\nrate = \"1mbit\"\nqueue_size = \"2gb\"\nqueues = 16"), "queue_size");
        assert!(e("kind = \"pqp\"\nrate = \"1mbit\"\nqueue_size = 1000\nburst = 3").contains("burst"));
    }
}
