//! The section of summary.json only the testbed writes: where the enforcer ran, the emulated
//! path and what the kernel and the middlebox counted.

use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct TestbedSection {
    pub enforcer_at: String,
    pub rtt_ms: f64,
    pub kernel: String,
    /// Frames the middlebox forwarded towards the receiver and back.
    pub middlebox_forwarded: [u64; 2],
    pub middlebox_random_losses: u64,
    pub middlebox_overflow_drops: u64,
    /// The sender namespace's TCP counters over the run (`table.counter`: Linux counts per
    /// namespace, so these are summed over its flows).
    pub sender_tcp: BTreeMap<String, u64>,
}
