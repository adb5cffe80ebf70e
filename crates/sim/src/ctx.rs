//! The state every component shares while handling an event. Its own module so that the
//! components can take it without depending on the world that owns them.

use crate::engine::EventList;
use crate::packet::{Pkt, Pool};
use crate::stats::{AggCounters, EnfStats};

/// What every component may touch while handling an event.
#[derive(Default)]
pub struct Ctx {
    pub ev: EventList,
    pub pool: Pool,
    /// Packets handed to their next hop, delivered in FIFO order after the handler returns.
    pub out: Vec<u32>,
    pub aggs: Vec<AggCounters>,
    /// Per flow: (flow key for the core's classifiers, explicit class, customer for
    /// `Packet::aggregate`).
    pub flow_keys: Vec<(u64, u16, u64)>,
    /// Per-flow and per-class statistics at the enforcers.
    pub enf: EnfStats,
}

impl Ctx {
    #[inline]
    pub fn send(&mut self, p: Pkt) {
        let i = self.pool.alloc(p);
        self.out.push(i);
    }
}
