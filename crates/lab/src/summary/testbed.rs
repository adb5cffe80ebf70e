//! The section of summary.json only the testbed writes: where the enforcer ran, the emulated
//! path and what the kernel and the middlebox counted.

use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct TestbedSection {
    pub enforcer_at: String,
    /// Which traffic generator sent the flows (`ratekit_dataplane::testbed::traffic::GENERATOR`): a
    /// Linux run compares with runs of the same generator only.
    pub traffic_generator: u32,
    /// The flows by RTT, each RTT sent from an address of its own (docs/testbed.md).
    pub rtt_classes: Vec<RttClass>,
    pub kernel: String,
    /// Frames the middlebox forwarded towards the receiver and back.
    pub middlebox_forwarded: [u64; 2],
    pub middlebox_random_losses: u64,
    pub middlebox_overflow_drops: u64,
    /// Delay-line releases more than 250 µs and 1 ms late, and the worst (µs).
    pub middlebox_late_frames: [u64; 2],
    pub middlebox_max_late_us: u64,
    /// Frames read over 250 µs and 1 ms after the kernel received them, and the worst (µs).
    pub middlebox_late_reads: [u64; 2],
    pub middlebox_max_read_lag_us: u64,
    /// The sender namespace's TCP counters over the run (`table.counter`: Linux counts per
    /// namespace, so these are summed over its flows).
    pub sender_tcp: BTreeMap<String, u64>,
    /// Each TCP flow's sender socket as it closed.
    pub flow_tcp: Vec<FlowTcpInfo>,
    /// The scenario's `secondary` link, a tbf behind the enforcer: what it saw and dropped over the
    /// run (`tc -s qdisc`), the testbed's counterpart of the simulator's `queue_drops` there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secondary_link: Option<LinkCounts>,
}

/// Packets a queue saw over the run and how many of them it dropped.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LinkCounts {
    pub packets: u64,
    pub drops: u64,
}

/// The flows of one RTT.
#[derive(Debug, Clone, Serialize)]
pub struct RttClass {
    pub rtt_ms: f64,
    pub sender: String,
    pub flows: usize,
    /// Mean over the class's flows of each one's goodput after the warm-up.
    pub mean_goodput_bps: f64,
    /// Lowest, median and highest `min_rtt_ms` of the class's TCP flows: what Linux measured
    /// against what was asked.
    pub measured_min_rtt_ms: [f64; 3],
    /// Retransmitted over sent data segments, summed over the class's TCP flows.
    pub retransmit_rate: f64,
}

/// One TCP flow's sender socket (TCP_INFO), read just before it closed.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FlowTcpInfo {
    pub flow: u32,
    /// The lowest RTT sample of the connection: the path's RTT without queueing.
    pub min_rtt_ms: f64,
    /// The smoothed RTT at the end, with the enforcer's queueing.
    pub srtt_ms: f64,
    pub retransmits: u64,
    pub data_segs_out: u64,
    /// Of the time the socket had data in flight (`busy_ms`), how long the receiver's window and
    /// the sender's own buffer held it back rather than the congestion window: a flow limited
    /// this way says nothing about its congestion control.
    pub busy_ms: f64,
    pub rwnd_limited_ms: f64,
    pub sndbuf_limited_ms: f64,
    /// Retransmissions the receiver reported as duplicates (spurious), and reorderings Linux
    /// detected: on the testbed's emulated path both should be 0, and a run where they are not
    /// had a path the simulator does not model.
    pub dsack_dups: u64,
    pub reord_seen: u64,
}
