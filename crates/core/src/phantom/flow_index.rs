//! Flow key → slot for exact per-flow queues: an open-addressing table of slot indices with
//! linear probing, kept at most half full, entries removed by backward shift (no tombstones,
//! so probe chains stay short however many flows come and go).
//!
//! Why not a general hash map: the data path probes it at every packet, and the flow key is
//! already stored in the slot the probe leads to, so the table holds only 4-byte slot indices
//! and a hit costs one multiply, one table load and one key compare in the slot the packet
//! needs next anyway. The home position is Fibonacci hashing (the key times 2⁶⁴/φ, top bits):
//! one multiply spreads consecutive and structured keys evenly. Like `fast_hash`, it is not
//! DoS-resistant: flow keys come from the operator's own classification.

const EMPTY: u32 = u32::MAX;
/// 2⁶⁴/φ, odd: multiplying by it permutes u64 and spreads nearby keys far apart in the top bits.
const FIBONACCI: u64 = 0x9e37_79b9_7f4a_7c15;
const MIN_CAPACITY: usize = 8;

#[derive(Debug, Clone)]
pub(crate) struct FlowIndex {
    /// Slot indices, `EMPTY` where none; a power of two long.
    table: Box<[u32]>,
    /// 64 − log2(table length): the home position is the product's top bits.
    shift: u32,
    len: usize,
}

/// Where a lookup ended: the flow's slot, or the empty position where it would be inserted.
pub(crate) enum Probe {
    Found(u32),
    Vacant(usize),
}

impl FlowIndex {
    pub(crate) fn new() -> Self {
        Self::with_capacity(MIN_CAPACITY)
    }

    fn with_capacity(capacity: usize) -> Self {
        debug_assert!(capacity.is_power_of_two() && capacity >= 2);
        FlowIndex { table: vec![EMPTY; capacity].into_boxed_slice(), shift: 64 - capacity.trailing_zeros(), len: 0 }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes of the table.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.table.len() * std::mem::size_of::<u32>()
    }

    #[inline(always)]
    fn home(&self, flow: u64) -> usize {
        (flow.wrapping_mul(FIBONACCI) >> self.shift) as usize
    }

    /// Finds `flow`; `key_of` gives the flow key held by a slot.
    #[inline(always)]
    pub(crate) fn probe(&self, flow: u64, key_of: impl Fn(u32) -> u64) -> Probe {
        let mask = self.table.len() - 1;
        let mut i = self.home(flow);
        loop {
            let s = self.table[i];
            if s == EMPTY {
                return Probe::Vacant(i);
            }
            if key_of(s) == flow {
                return Probe::Found(s);
            }
            i = (i + 1) & mask;
        }
    }

    /// Puts slot `s` at `vacant` (from a `probe` of its flow with no insertion since).
    pub(crate) fn insert(&mut self, vacant: usize, s: u32, key_of: impl Fn(u32) -> u64) {
        self.table[vacant] = s;
        self.len += 1;
        if self.len * 2 > self.table.len() {
            self.grow(key_of);
        }
    }

    fn grow(&mut self, key_of: impl Fn(u32) -> u64) {
        let old = std::mem::replace(self, Self::with_capacity(self.table.len() * 2));
        for &s in old.table.iter().filter(|&&s| s != EMPTY) {
            if let Probe::Vacant(i) = self.probe(key_of(s), &key_of) {
                self.table[i] = s;
            }
        }
        self.len = old.len;
    }

    /// Removes `flow`'s entry (which must be there); later entries of its probe chain move back
    /// into the hole, so that every entry stays reachable from its home without tombstones.
    pub(crate) fn remove(&mut self, flow: u64, key_of: impl Fn(u32) -> u64) {
        let mask = self.table.len() - 1;
        let mut hole = self.home(flow);
        while key_of(self.table[hole]) != flow {
            hole = (hole + 1) & mask;
        }
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.table[j];
            if s == EMPTY {
                break;
            }
            // The entry at j may fill the hole if the hole lies on its path from home to j.
            let home = self.home(key_of(s));
            if j.wrapping_sub(home) & mask >= j.wrapping_sub(hole) & mask {
                self.table[hole] = s;
                hole = j;
            }
        }
        self.table[hole] = EMPTY;
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The inverse of FIBONACCI mod 2⁶⁴ (Newton's iteration doubles the correct low bits).
    fn fibonacci_inverse() -> u64 {
        let mut x = FIBONACCI;
        for _ in 0..6 {
            x = x.wrapping_mul(2u64.wrapping_sub(FIBONACCI.wrapping_mul(x)));
        }
        assert_eq!(x.wrapping_mul(FIBONACCI), 1);
        x
    }

    /// Against a HashMap under random inserts and removals. Two thirds of the keys are chosen to
    /// share a home at either end of the table (their products' top bits all 0 or all 1), so
    /// chains grow long, wrap around, and backward shifts cross the table's end.
    #[test]
    fn behaves_as_a_map_under_churn() {
        use rand::{Rng, SeedableRng};
        let inverse = fibonacci_inverse();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut keys: Vec<u64> = Vec::new(); // slot → flow key
        let mut free: Vec<u32> = Vec::new();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut index = FlowIndex::new();
        for step in 0..200_000 {
            let small = rng.gen_range(0..40u64) << 20;
            let flow = match rng.gen_range(0..3) {
                0 => small.wrapping_mul(inverse),
                1 => (!small).wrapping_mul(inverse),
                _ => rng.gen_range(0..40),
            };
            let key_of = |s: u32| keys[s as usize];
            match (index.probe(flow, key_of), model.get(&flow)) {
                (Probe::Found(s), Some(&m)) => {
                    assert_eq!(s, m, "step {step}");
                    if rng.gen_bool(0.6) {
                        index.remove(flow, |s| keys[s as usize]);
                        model.remove(&flow);
                        free.push(s);
                    }
                }
                (Probe::Vacant(i), None) => {
                    let s = free.pop().unwrap_or_else(|| {
                        keys.push(0);
                        keys.len() as u32 - 1
                    });
                    keys[s as usize] = flow;
                    index.insert(i, s, |s| keys[s as usize]);
                    model.insert(flow, s);
                }
                (Probe::Found(s), None) => panic!("step {step}: {flow} found at {s}, not in the model"),
                (Probe::Vacant(_), Some(m)) => panic!("step {step}: {flow} lost (slot {m})"),
            }
            assert_eq!(index.len(), model.len());
            assert!(index.len() * 2 <= index.table.len());
        }
        assert!(index.table.len() >= 128, "the churn must have grown the table: {}", index.table.len());
    }
}
