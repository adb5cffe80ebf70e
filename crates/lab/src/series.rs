//! What a simulation measured in every window, kept in memory when asked (`RunOptions::keep_series`
//! in crates/sim): the reproduction's metrics and figures are computed from it.

/// Per-window samples.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// [window][flow] goodput in bits/s.
    pub goodput_bps: Vec<Vec<f64>>,
    /// [window][flow] cwnd in segments (0 for UDP).
    pub cwnd: Vec<Vec<u32>>,
    /// [window][aggregate] normalised throughput.
    pub normalized: Vec<Vec<f64>>,
    /// [window][flow] payload bytes that arrived at the receiver, in order or not, duplicates
    /// included (what a capture at the receiver counts; UDP: as goodput).
    pub wire_bytes: Vec<Vec<u64>>,
    /// [window][aggregate] the aggregate link's rate at the window's end and, where its queueing
    /// enforcer estimates it (DSCD), that estimate, both in bits/s.
    pub link_bps: Vec<Vec<(f64, Option<f64>)>>,
}
