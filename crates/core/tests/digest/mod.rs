//! The digest the golden tests pin verdicts with (bcpqp_golden, exact_flows_golden).

use ratekit_core::{DropReason, Verdict};

/// FNV-1a over u64 words: tiny, stable across platforms and Rust versions.
pub struct Digest(pub u64);

impl Digest {
    pub fn new() -> Self {
        Digest(0xcbf2_9ce4_8422_2325)
    }
    pub fn word(&mut self, x: u64) {
        for b in x.to_le_bytes() {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

pub fn verdict_code(v: Verdict) -> u64 {
    match v {
        Verdict::Pass => 0,
        Verdict::Drop(DropReason::Overlimit) => 1,
        Verdict::Drop(DropReason::BurstControl) => 2,
        Verdict::Drop(other) => 3 + other as u64,
    }
}
