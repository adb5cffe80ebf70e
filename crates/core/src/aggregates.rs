//! Many aggregates, one enforcer each: the container a deployment runs per interface
//! (algorithms.md §0: "an aggregate key, e.g. the subscriber's address or prefix").
//!
//! `Aggregates` maps the packet's u64 aggregate key to that aggregate's policer and its
//! counters, creating the policer from a factory the first time the key is seen, so each
//! aggregate can have its own rate. Lookup is one hash-table probe with a one-multiply hasher
//! (`fast_hash`); nothing is allocated per packet (the table grows geometrically on new keys,
//! or never if built `with_capacity`). It holds millions of aggregates: memory per aggregate
//! is `size_of::<(u64, Aggregate<P>)>()` plus one control byte, divided by the table's load
//! (between 7/16 and 7/8 for hashbrown), plus whatever the policer keeps on the heap;
//! measured figures per policer are in docs/policers.md.

use crate::config::{AnyPolicer, ConfigError, EnforcerConfig};
use crate::fast_hash::{BuildMix64, FastMap};
use crate::token_bucket::PolicerStats;
use crate::{Instant, Packet, Policer, Verdict};

/// Builds the policer of a newly seen aggregate.
pub trait Factory<P> {
    fn build(&mut self, aggregate: u64) -> P;
}

impl<P, F: FnMut(u64) -> P> Factory<P> for F {
    #[inline]
    fn build(&mut self, aggregate: u64) -> P {
        self(aggregate)
    }
}

/// The same validated config for every aggregate: one policer is built from it, and every new
/// aggregate is a clone of that fresh prototype, so the parameters (for PQP/BC-PQP the compiled
/// policy) are built once and shared by every aggregate instead of compiled per aggregate.
#[derive(Debug, Clone)]
pub struct ConfigFactory {
    prototype: AnyPolicer,
}

impl ConfigFactory {
    /// Validates once; fails if the config is invalid or names a queueing enforcer.
    pub fn new(cfg: EnforcerConfig) -> Result<Self, ConfigError> {
        Ok(ConfigFactory { prototype: cfg.build_policer()? })
    }
}

impl Factory<AnyPolicer> for ConfigFactory {
    #[inline]
    fn build(&mut self, _aggregate: u64) -> AnyPolicer {
        self.prototype.clone()
    }
}

/// One aggregate's enforcer and counters.
#[derive(Debug, Clone)]
pub struct Aggregate<P> {
    pub policer: P,
    pub counters: PolicerStats,
}

/// A policer per aggregate key; itself a `Policer`.
pub struct Aggregates<P, F> {
    map: FastMap<u64, Aggregate<P>>,
    factory: F,
}

impl<P: Policer, F: Factory<P>> Aggregates<P, F> {
    pub fn new(factory: F) -> Self {
        Self::with_capacity(0, factory)
    }

    /// Pre-sizes the table for `aggregates` keys so it never grows on the data path.
    pub fn with_capacity(aggregates: usize, factory: F) -> Self {
        Aggregates { map: FastMap::with_capacity_and_hasher(aggregates, BuildMix64::default()), factory }
    }

    /// The aggregate's state, created from the factory if this key is new. Always inlined: it
    /// is the per-packet lookup, and LLVM left it out of line for some policers (PQP's data
    /// path grew by ~40 instructions per packet through the call when its state got smaller).
    #[inline(always)]
    pub fn entry(&mut self, aggregate: u64) -> &mut Aggregate<P> {
        let factory = &mut self.factory;
        self.map
            .entry(aggregate)
            .or_insert_with(|| Aggregate { policer: factory.build(aggregate), counters: PolicerStats::default() })
    }

    pub fn get(&self, aggregate: u64) -> Option<&Aggregate<P>> {
        self.map.get(&aggregate)
    }

    /// Forgets an aggregate (e.g. an idle subscriber); it starts afresh if seen again.
    pub fn remove(&mut self, aggregate: u64) -> Option<Aggregate<P>> {
        self.map.remove(&aggregate)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every aggregate, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Aggregate<P>)> {
        self.map.iter().map(|(k, v)| (*k, v))
    }

    /// Counters summed over all aggregates.
    pub fn totals(&self) -> PolicerStats {
        self.map.values().fold(PolicerStats::default(), |mut t, a| {
            t.passed_packets += a.counters.passed_packets;
            t.passed_bytes += a.counters.passed_bytes;
            t.dropped_packets += a.counters.dropped_packets;
            t.dropped_bytes += a.counters.dropped_bytes;
            t
        })
    }

    /// Bytes of the table itself (hashbrown: one slot of key + `Aggregate<P>` and one control
    /// byte per bucket, buckets a power of two ≥ 8/7 of the capacity); excludes the policers'
    /// own heap.
    pub fn table_bytes(&self) -> usize {
        let buckets = (self.map.capacity() * 8 / 7).next_power_of_two();
        buckets * (std::mem::size_of::<(u64, Aggregate<P>)>() + 1)
    }
}

impl<P: Policer, F: Factory<P>> Policer for Aggregates<P, F> {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let agg = self.entry(pkt.aggregate);
        let verdict = agg.policer.on_arrival(now, pkt);
        agg.counters.count(verdict, pkt.len);
        verdict
    }
}
