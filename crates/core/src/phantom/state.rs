//! One aggregate's phantom queues: the block that holds them, its views, and the reads of it
//! (occupancy with deferred service applied, backlog, active queues).

use super::block::{InnerState, Line, INNER_WORDS};
use super::compile::{Kind, PhantomPolicy};

/// One aggregate's phantom queues. Occupancies are in nano-bytes (bytes × 10⁹), the unit of
/// [`crate::Rate::credit`], so that service `r·Δt` is exact.
#[derive(Debug, Clone)]
pub struct PhantomQueues {
    /// One heap block (one pointer to follow, the root's state right before the occupancies):
    /// every inner node's [`InnerState`] (the root first), then the occupancy of every queue,
    /// then the active children of every inner node as u16 node ids (a node's slots are
    /// `first_slot .. first_slot + active_len`, kept in rank order under `priority` nodes).
    /// The offsets are the policy's `occupancy_at` and `slots_at`.
    pub(super) block: Box<[Line]>,
    /// Flat `fair`/`weighted` only: service owed but not yet handed out (nano-bytes).
    pub(super) deferred: u64,
    /// Service may stay deferred while `deferred < defer_limit`: below it no queue can empty,
    /// so the active set and each queue's share of it are fixed (see [`Self::serve`]).
    pub(super) defer_limit: u64,
    /// ⌊(2⁶⁴−1)/W⌋ for the root's active weight W, so that ⌊D/W⌋ costs two multiplications.
    pub(super) weight_reciprocal: u64,
}

impl PhantomQueues {
    pub fn new(policy: &PhantomPolicy) -> Self {
        PhantomQueues {
            block: vec![Line([0; 8]); policy.block_lines].into_boxed_slice(),
            deferred: 0,
            defer_limit: 0,
            weight_reciprocal: 0,
        }
    }

    /// Bytes this aggregate's state holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.block)
    }

    #[inline(always)]
    fn words(&self) -> &[u64] {
        bytemuck::cast_slice(&self.block)
    }

    #[inline(always)]
    fn words_mut(&mut self) -> &mut [u64] {
        bytemuck::cast_slice_mut(&mut self.block)
    }

    /// The root's state: the block's first words.
    #[inline(always)]
    pub(super) fn root(&self) -> &InnerState {
        // Word arrays, not bytes: the cast is then checked at compile time, not per packet.
        let words: &[u64; INNER_WORDS] = (&self.block[0].0[..INNER_WORDS]).try_into().expect("the root fits in a line");
        bytemuck::cast_ref(words)
    }

    #[inline(always)]
    pub(super) fn root_mut(&mut self) -> &mut InnerState {
        let words: &mut [u64; INNER_WORDS] = (&mut self.block[0].0[..INNER_WORDS]).try_into().expect("the root fits in a line");
        bytemuck::cast_mut(words)
    }

    #[inline(always)]
    pub(super) fn inner(&self, policy: &PhantomPolicy) -> &[InnerState] {
        bytemuck::cast_slice(&self.words()[..policy.occupancy_at])
    }

    #[inline(always)]
    pub(super) fn occ(&self, policy: &PhantomPolicy) -> &[u64] {
        &self.words()[policy.occupancy_at..policy.slots_at]
    }

    /// Queue `q`'s occupancy word, for the per-packet paths: one bounds check on the block
    /// instead of slicing the occupancies out first.
    #[inline(always)]
    pub(super) fn occ_word(&self, policy: &PhantomPolicy, q: usize) -> u64 {
        debug_assert!(q < policy.queues());
        self.words()[policy.occupancy_at + q]
    }

    #[inline(always)]
    pub(super) fn occ_word_mut(&mut self, policy: &PhantomPolicy, q: usize) -> &mut u64 {
        debug_assert!(q < policy.queues());
        let at = policy.occupancy_at + q;
        &mut self.words_mut()[at]
    }

    #[inline(always)]
    pub(super) fn slots(&self, policy: &PhantomPolicy) -> &[u16] {
        bytemuck::cast_slice(&self.words()[policy.slots_at..])
    }

    /// The block's three parts, for code that holds one while it changes another.
    #[inline(always)]
    pub(super) fn parts_mut(&mut self, policy: &PhantomPolicy) -> (&mut [InnerState], &mut [u64], &mut [u16]) {
        let words = self.words_mut();
        let (inner, rest) = words.split_at_mut(policy.occupancy_at);
        let (occ, slots) = rest.split_at_mut(policy.slots_at - policy.occupancy_at);
        (bytemuck::cast_slice_mut(inner), occ, bytemuck::cast_slice_mut(slots))
    }

    #[inline(always)]
    pub(super) fn inner_mut(&mut self, policy: &PhantomPolicy) -> &mut [InnerState] {
        self.parts_mut(policy).0
    }

    #[inline(always)]
    pub(super) fn occ_mut(&mut self, policy: &PhantomPolicy) -> &mut [u64] {
        let (at, end) = (policy.occupancy_at, policy.slots_at);
        &mut self.words_mut()[at..end]
    }

    #[inline(always)]
    pub(super) fn slots_mut(&mut self, policy: &PhantomPolicy) -> &mut [u16] {
        let at = policy.slots_at;
        bytemuck::cast_slice_mut(&mut self.words_mut()[at..])
    }

    /// Occupancy of queue `q` in nano-bytes, with any deferred service applied.
    #[inline(always)]
    pub fn occupancy(&self, policy: &PhantomPolicy, q: usize) -> u64 {
        let stored = self.occ_word(policy, q);
        if self.deferred == 0 || stored == 0 {
            return stored;
        }
        stored - self.deferred_share(policy, q)
    }

    /// What [`Self::water_fill`] would take from active queue `q` if the deferred service were
    /// handed out now. Below `defer_limit` no queue empties, so it is ⌊D/W⌋·w_q, plus the whole
    /// remainder D − ⌊D/W⌋·W for the first queue of the list (whose slack exceeds W).
    #[inline(always)]
    fn deferred_share(&self, policy: &PhantomPolicy, q: usize) -> u64 {
        let root = &*self.root();
        let (unit, spare) = div_rem_by_reciprocal(self.deferred, root.active_weight, self.weight_reciprocal);
        let part = if policy.flat_fair { unit } else { unit * policy.weight_of_queue[q] as u64 };
        part + if root.head_queue as usize == q { spare } else { 0 }
    }

    /// Total occupancy of all queues in nano-bytes (deferred service applied).
    #[inline]
    pub fn backlog(&self) -> u64 {
        self.root().backlog - self.deferred
    }

    /// Queues that are non-empty, in no particular order (walks the active lists only).
    pub fn active_queues(&self, policy: &PhantomPolicy, out: &mut Vec<usize>) {
        out.clear();
        self.collect_active(policy, 0, out);
    }

    fn collect_active(&self, policy: &PhantomPolicy, node: u16, out: &mut Vec<usize>) {
        let info = &policy.nodes[node as usize];
        if info.kind == Kind::Leaf {
            out.push(info.index as usize);
            return;
        }
        let st = self.inner(policy)[info.index as usize];
        for i in 0..st.active_len {
            self.collect_active(policy, self.slots(policy)[(info.first_slot + i) as usize], out);
        }
    }

    /// (Inlined: `water_fill` asks it for every child in every pass.)
    #[inline(always)]
    pub(super) fn node_backlog(&self, policy: &PhantomPolicy, node: u16) -> u64 {
        let info = &policy.nodes[node as usize];
        match info.kind {
            Kind::Leaf => self.occ_word(policy, info.index as usize),
            // An inner node's backlog is its state's first word.
            _ => self.words()[info.index as usize * INNER_WORDS],
        }
    }
}

/// (⌊d/w⌋, d mod w) given recip = ⌊(2⁶⁴−1)/w⌋: the estimate ⌊d·recip/2⁶⁴⌋ is at most 2 short
/// (d·(2⁶⁴/w − recip) < 2⁶⁴·(1 + 1/w)), and the loop corrects it exactly. Never above ⌊d/w⌋,
/// so q·w ≤ d and the remainder needs no 128-bit arithmetic.
#[inline]
pub fn div_rem_by_reciprocal(d: u64, w: u64, recip: u64) -> (u64, u64) {
    let mut q = ((d as u128 * recip as u128) >> 64) as u64;
    let mut r = d - q * w;
    while r >= w {
        q += 1;
        r -= w;
    }
    (q, r)
}
