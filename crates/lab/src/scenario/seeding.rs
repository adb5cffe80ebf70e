//! The random streams of one run, drawn from its seed alike by every driver: the simulator and the
//! testbed start flow i of a run with seed s at the same offset, so a Linux run and a simulated
//! run of one seed can be compared flow start by flow start.

use ratekit_core::Duration;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// splitmix64 of the seed and a salt: independent streams per component from one scenario seed.
pub fn mix(seed: u64, salt: u64) -> u64 {
    let mut z = seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Flow `index`'s stream (its position among all the run's flows, aggregates in order, each
/// flow table's copies in order): first its start jitter, then its application's draws.
pub fn flow_rng(seed: u64, index: u32) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix(seed, index as u64))
}

/// When the flow starts: `start` plus a jitter uniform in [0, `start_jitter`), the stream's first draw.
pub fn start_ns(start: Duration, start_jitter: Duration, rng: &mut ChaCha8Rng) -> u64 {
    let jitter = if start_jitter.0 > 0 { rng.gen_range(0..start_jitter.0) } else { 0 };
    start.0 + jitter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_of_a_flow_start_apart_within_their_bound_and_differently_per_seed() {
        let starts = |seed| (0..8).map(|i| start_ns(Duration(1_000_000_000), Duration(10_000_000), &mut flow_rng(seed, i))).collect::<Vec<_>>();
        let a = starts(1);
        assert!(a.iter().all(|d| (1_000_000_000..1_010_000_000).contains(d)), "{a:?}");
        let mut distinct = a.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), a.len(), "{a:?}");
        assert_ne!(a, starts(2));
        assert_eq!(start_ns(Duration(5), Duration(0), &mut flow_rng(1, 0)), 5, "no jitter: no draw");
    }
}
