//! A fast, non-cryptographic hasher for u64 keys (aggregate and flow keys) in hash maps.
//!
//! One SplitMix64 finalisation per key (`packet::mix64`, the same mixer the flow classifier
//! uses): no allocation, a handful of cycles, and good spread for the small or structured
//! integers that subscriber addresses and flow hashes often are. Not DoS-resistant: keys come
//! from the operator's own classification, and a keyed variant is one XOR away (`with_seed`).

use crate::packet::mix64;
use std::hash::{BuildHasher, Hasher};

/// Hasher state: a running 64-bit value, finalised with `mix64`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mix64Hasher {
    state: u64,
}

impl Hasher for Mix64Hasher {
    #[inline]
    fn finish(&self) -> u64 {
        mix64(self.state)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for keys other than integers; fold 8 bytes at a time.
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.state = mix64(self.state ^ u64::from_le_bytes(buf));
        }
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.state ^= x;
    }
}

/// Builds `Mix64Hasher`s, optionally keyed by a seed.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildMix64 {
    seed: u64,
}

impl BuildMix64 {
    pub fn with_seed(seed: u64) -> Self {
        BuildMix64 { seed }
    }
}

impl BuildHasher for BuildMix64 {
    type Hasher = Mix64Hasher;
    #[inline]
    fn build_hasher(&self) -> Mix64Hasher {
        Mix64Hasher { state: self.seed }
    }
}

/// A `HashMap` keyed by u64 with the fast hasher.
pub type FastMap<K, V> = std::collections::HashMap<K, V, BuildMix64>;
/// A `HashSet` with the fast hasher.
pub type FastSet<K> = std::collections::HashSet<K, BuildMix64>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_keys_spread_over_buckets() {
        // hashbrown takes the low bits for the bucket and the top 7 for the tag.
        let b = BuildMix64::default();
        let mut low = [0u32; 64];
        let mut top = [0u32; 128];
        for k in 0..64_000u64 {
            let h = b.hash_one(k);
            low[(h & 63) as usize] += 1;
            top[(h >> 57) as usize] += 1;
        }
        assert!(low.iter().all(|&c| (800..1200).contains(&c)), "{low:?}");
        assert!(top.iter().all(|&c| (350..650).contains(&c)), "{top:?}");
    }
}
