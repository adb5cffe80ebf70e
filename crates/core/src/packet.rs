//! What an enforcer sees of a packet (algorithms.md §0).

/// A packet as the enforcers see it. Drivers keep their own payload and map it back through `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Packet {
    /// Opaque to the core: the driver's handle for this packet.
    pub id: u64,
    /// IP packet length in bytes.
    pub len: u32,
    /// Flow key, e.g. a 5-tuple hash. Used for flow-hash classification and per-flow state.
    pub flow: u64,
    /// Explicit class (queue index for weighted / priority policies, 1 = ABE for DSCD).
    pub class: u16,
    /// Aggregate key (subscriber address, prefix or id) used by multi-aggregate containers.
    pub aggregate: u64,
}

/// Which queue of an aggregate a packet belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classify {
    /// Queue = mix(flow) mod N: per-flow fairness without per-flow state (000 §3.1).
    #[default]
    Flow,
    /// Queue = the packet's explicit class, which must be < N.
    Class,
}

impl Classify {
    /// Queue index in `0..queues`. An out-of-range explicit class is clamped to the last queue
    /// (drivers that can report bad input, such as replay, reject it before it gets here).
    #[inline]
    pub fn queue_of(self, pkt: &Packet, queues: usize) -> usize {
        match self {
            Classify::Flow => (mix64(pkt.flow) % queues as u64) as usize,
            Classify::Class => (pkt.class as usize).min(queues - 1),
        }
    }
}

/// A cheap, well-mixing 64-bit finaliser (the SplitMix64 output function), so that flow keys
/// that are small integers still spread evenly over queues.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
