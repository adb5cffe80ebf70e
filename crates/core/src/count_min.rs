//! Count-min sketch with u32 counters and seeded multiply-shift hashes (001 §IV-C, §IV-E;
//! Cormode & Muthukrishnan 2005).
//!
//! Row r maps a u64 key to column `(a_r·key + b_r) mod 2⁶⁴ >> (64 − log₂ w)`: Dietzfelbinger's
//! multiply-add-shift, universal with collision probability ≤ 2/w (the factor 2 over the ideal
//! 1/w is what the paper's pairwise-independence assumption idealises). It is one 64-bit
//! multiply and a shift, so a BPF program computes the same columns. The per-row constants come
//! from the configured seed through SplitMix64: state = seed; for each row r in order,
//! state += 0x9E3779B97F4A7C15, a_r = mix64(state) | 1; state += 0x9E3779B97F4A7C15,
//! b_r = mix64(state) (`packet::mix64` is SplitMix64's output function).
//!
//! Guarantee (strict turnstile: no key's count is ever taken below zero): the estimate, the
//! minimum over rows, is never below the true count and exceeds it by at most ε·N with
//! probability at least 1 − δ, where N is the total count, ε = e/w and δ = e^{−d} (001
//! Theorem 1; with multiply-shift, ε = 2e/w is the provable constant).

use crate::packet::mix64;

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The largest width accepted (2²⁰ columns, 4 MiB of u32 counters per row).
pub const MAX_WIDTH: u32 = 1 << 20;
/// The largest depth accepted (δ = e^{−16} ≈ 1e-7 is beyond any practical need).
pub const MAX_DEPTH: u32 = 16;

#[derive(Debug, Clone)]
pub struct CountMin {
    depth: usize,
    shift: u32,
    width: usize,
    /// (a_r, b_r) per row; a_r odd.
    rows: Box<[(u64, u64)]>,
    /// Row-major, depth × width.
    counters: Box<[u32]>,
}

/// The per-row multiply-shift constants derived from `seed` (see the module doc).
pub fn row_constants(seed: u64, depth: usize) -> Vec<(u64, u64)> {
    let mut state = seed;
    (0..depth)
        .map(|_| {
            state = state.wrapping_add(GOLDEN_GAMMA);
            let a = mix64(state) | 1;
            state = state.wrapping_add(GOLDEN_GAMMA);
            (a, mix64(state))
        })
        .collect()
}

impl CountMin {
    /// `depth` rows of `width` counters; `width` must be a power of two ≥ 2 (validated by the
    /// callers' configs; out-of-range values are clamped here rather than panicking).
    pub fn new(depth: u32, width: u32, seed: u64) -> Self {
        let depth = depth.clamp(1, MAX_DEPTH) as usize;
        let width = width.clamp(2, MAX_WIDTH).next_power_of_two();
        CountMin {
            depth,
            shift: 64 - width.trailing_zeros(),
            width: width as usize,
            rows: row_constants(seed, depth).into_boxed_slice(),
            counters: vec![0; depth * width as usize].into_boxed_slice(),
        }
    }

    pub fn depth(&self) -> usize {
        self.depth
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// The column `key` maps to in `row`.
    #[inline]
    pub fn column(&self, row: usize, key: u64) -> usize {
        let (a, b) = self.rows[row];
        (a.wrapping_mul(key).wrapping_add(b) >> self.shift) as usize
    }

    /// The count-min estimate: the smallest of the key's counters.
    #[inline]
    pub fn estimate(&self, key: u64) -> u32 {
        let mut min = u32::MAX;
        for row in 0..self.depth {
            min = min.min(self.counters[row * self.width + self.column(row, key)]);
        }
        min
    }

    /// Adds `c` to each of the key's counters (saturating).
    #[inline]
    pub fn add(&mut self, key: u64, c: u32) {
        for row in 0..self.depth {
            let i = row * self.width + self.column(row, key);
            self.counters[i] = self.counters[i].saturating_add(c);
        }
    }

    /// Subtracts `c` from each of the key's counters; callers keep `c ≤ estimate(key)`, so no
    /// counter goes below zero (saturating all the same).
    #[inline]
    pub fn sub(&mut self, key: u64, c: u32) {
        for row in 0..self.depth {
            let i = row * self.width + self.column(row, key);
            self.counters[i] = self.counters[i].saturating_sub(c);
        }
    }

    /// Sum of one row's counters (each row sums to the total count while nothing saturates).
    pub fn row_sum(&self, row: usize) -> u64 {
        self.counters[row * self.width..(row + 1) * self.width].iter().map(|&c| c as u64).sum()
    }

    pub fn clear(&mut self) {
        self.counters.fill(0);
    }

    /// Heap bytes held (the counters and the row constants).
    pub fn heap_bytes(&self) -> usize {
        self.counters.len() * std::mem::size_of::<u32>() + self.rows.len() * 16
    }
}
