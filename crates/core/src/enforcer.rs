//! The two shapes of enforcer (algorithms.md §0, style.md practice 1).

use crate::packet::Packet;
use crate::time::Instant;

/// Why a packet was dropped; every drop is counted by its reason (as Linux qdiscs do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// A policer had too few tokens / the phantom queue had no room for real bytes.
    Overlimit,
    /// BC-PQP: the queue was full because burst control filled it with magic bytes.
    BurstControl,
    /// FairPolicer: the flow already holds more than the dynamic threshold.
    FlowThreshold,
    /// srTCM / trTCM: the meter coloured the packet red (or yellow, when configured to drop it).
    Colour,
    /// A real queue had no room.
    QueueFull,
    /// RED's probabilistic early drop.
    RedEarly,
    /// RED's forced drop above max_th.
    RedForced,
    /// A CPQ congestion policer had too few congestion tokens.
    CongestionPolicer,
    /// DSCD: an ABE packet's deadline passed while more than T_q ABE packets waited.
    Deadline,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Overlimit => "overlimit",
            DropReason::BurstControl => "burst_control",
            DropReason::FlowThreshold => "flow_threshold",
            DropReason::Colour => "colour",
            DropReason::QueueFull => "queue_full",
            DropReason::RedEarly => "red_early",
            DropReason::RedForced => "red_forced",
            DropReason::CongestionPolicer => "congestion_policer",
            DropReason::Deadline => "deadline",
        }
    }
}

/// A bufferless enforcer's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Drop(DropReason),
}

impl Verdict {
    pub fn is_pass(self) -> bool {
        self == Verdict::Pass
    }
}

/// A bufferless enforcer: decides on arrival, holds nothing.
pub trait Policer {
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict;
}

/// A packet some queueing discipline dropped, with why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub pkt: Packet,
    pub reason: DropReason,
}

/// A queueing enforcer. It may drop the arriving packet or others (e.g. DSCD's expired ABE
/// packets); every drop is appended to `drops`, so the driver can account for each packet.
pub trait QueueDiscipline {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>);
    /// The next packet to send at `now`, if any is eligible (a shaper may hold packets until
    /// their departure time; a link-driven queue returns its head whenever asked).
    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Option<Packet>;
    /// When a `dequeue` would next return a packet, if something is queued but not yet eligible.
    fn next_wakeup(&self) -> Option<Instant>;
    /// Bytes currently queued.
    fn backlog_bytes(&self) -> u64;
    /// The discipline's own estimate of its link's rate in bytes/s, for one that measures it
    /// (DSCD's Algorithm 4), so drivers can report it beside the rate the link really has.
    fn link_rate_estimate(&self) -> Option<f64> {
        None
    }
}
