//! Phantom queues served by a policy tree: the data-path half of PQP and BC-PQP (000 §3.2).
//!
//! A [`PhantomPolicy`] is the [`PolicyNode`] tree compiled into a flat node array, shared by
//! every aggregate (it is immutable). A [`PhantomQueues`] is one aggregate's state: a byte
//! counter per queue and, per inner node, its backlog and the list of its non-empty children.
//!
//! Service is the fluid analogue of the shaper (algorithms.md §0, §2): `serve(S)` hands out `S`
//! nano-bytes exactly as hierarchical GPS would over an interval without arrivals:
//! strict order at `priority` nodes, max-min water-filling by weight at `fair`/`weighted` nodes,
//! each child capped by its backlog, nothing left idle while any queue is non-empty. The active
//! lists make a service batch touch only non-empty queues (000 §4 footnote 6).
//!
//! Integer arithmetic only (the eBPF mirror must agree bit for bit); docs/bcpqp.md spells out
//! every operation.

use crate::policy::PolicyNode;

/// Deepest nesting accepted: the share walk keeps the path on the stack.
pub const MAX_DEPTH: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Leaf,
    /// `fair` and `weighted` are the same water-filling; `fair` just has unit weights.
    Share,
    Priority,
}

#[derive(Debug, Clone)]
struct NodeInfo {
    kind: Kind,
    parent: u16,
    /// Weight within the parent (1 under `fair` and `priority`).
    weight: u32,
    /// Position among the parent's children: the priority order.
    rank: u16,
    /// Leaves: the queue index. Inner nodes: index into [`PhantomQueues::inner`].
    index: u16,
    /// Inner nodes: where its active-children slots start in [`PhantomQueues::slots`].
    first_slot: u16,
    /// Inner nodes: how many children.
    n_children: u16,
}

/// A policy compiled for the data path. Node 0 is the root.
#[derive(Debug, Clone)]
pub struct PhantomPolicy {
    nodes: Vec<NodeInfo>,
    /// Every inner node's children in order, at the node's `first_slot`.
    children: Vec<u16>,
    leaf_of_queue: Vec<u16>,
    /// Each queue's weight within its parent (its leaf's `weight`), without the detour via
    /// `nodes` on the per-packet paths.
    weight_of_queue: Vec<u32>,
    inner_count: usize,
    slot_count: usize,
    /// Where an aggregate's occupancies start in its block, in u64 words (after the inner
    /// nodes' states, 3 words each), and where its active-children slots start (after them).
    occupancy_at: usize,
    slots_at: usize,
    /// The block's size in cache lines.
    block_lines: usize,
    depth: usize,
    /// Every queue hangs directly off one `fair`/`weighted` root: service can be deferred.
    flat_share: bool,
    /// ... and every weight is 1.
    flat_fair: bool,
    /// ... and queue q's leaf is node q + 1 (the queues listed in order, as `fair` and
    /// `weighted` resolve), so the flat paths find a queue without looking its leaf up.
    flat_in_order: bool,
}

/// Why a policy cannot be compiled (beyond what [`PolicyNode::resolve`] checks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("policy nests {0} levels deep (at most {MAX_DEPTH})")]
    TooDeep(usize),
    #[error("policy has too many nodes ({0}, at most 65535)")]
    TooLarge(usize),
}

impl PhantomPolicy {
    pub fn compile(root: &PolicyNode) -> Result<Self, CompileError> {
        let mut p = PhantomPolicy {
            nodes: Vec::new(),
            children: Vec::new(),
            leaf_of_queue: Vec::new(),
            weight_of_queue: Vec::new(),
            inner_count: 0,
            slot_count: 0,
            occupancy_at: 0,
            slots_at: 0,
            block_lines: 0,
            depth: 0,
            flat_share: false,
            flat_fair: false,
            flat_in_order: false,
        };
        p.add(root, 0, 1, 0, 1)?;
        p.weight_of_queue = p.leaf_of_queue.iter().map(|&leaf| p.nodes[leaf as usize].weight).collect();
        p.flat_share = p.depth <= 2 && p.nodes[0].kind == Kind::Share;
        p.flat_fair = p.flat_share && p.nodes.iter().all(|n| n.weight == 1);
        p.flat_in_order = p.flat_share && p.leaf_of_queue.iter().enumerate().all(|(q, &leaf)| leaf as usize == q + 1);
        p.occupancy_at = p.inner_count * INNER_WORDS;
        p.slots_at = p.occupancy_at + p.queues();
        p.block_lines = (p.slots_at + p.slot_count.div_ceil(4)).div_ceil(8);
        if p.nodes.len() > u16::MAX as usize {
            return Err(CompileError::TooLarge(p.nodes.len()));
        }
        Ok(p)
    }

    fn add(&mut self, node: &PolicyNode, parent: u16, weight: u32, rank: u16, depth: usize) -> Result<u16, CompileError> {
        if depth > MAX_DEPTH {
            return Err(CompileError::TooDeep(depth));
        }
        if self.nodes.len() >= u16::MAX as usize {
            return Err(CompileError::TooLarge(self.nodes.len()));
        }
        self.depth = self.depth.max(depth);
        let id = self.nodes.len() as u16;
        let (kind, children): (Kind, Vec<(&PolicyNode, u32)>) = match node {
            PolicyNode::Queue(q) => {
                if self.leaf_of_queue.len() <= *q {
                    self.leaf_of_queue.resize(q + 1, 0);
                }
                self.leaf_of_queue[*q] = id;
                self.nodes.push(NodeInfo { kind: Kind::Leaf, parent, weight, rank, index: *q as u16, first_slot: 0, n_children: 0 });
                return Ok(id);
            }
            PolicyNode::Fair(c) => (Kind::Share, c.iter().map(|n| (n, 1)).collect()),
            PolicyNode::Weighted(c) => (Kind::Share, c.iter().map(|(n, w)| (n, *w)).collect()),
            PolicyNode::Priority(c) => (Kind::Priority, c.iter().map(|n| (n, 1)).collect()),
        };
        let index = self.inner_count as u16;
        self.inner_count += 1;
        let first_slot = self.slot_count as u16;
        self.slot_count += children.len();
        self.children.resize(self.slot_count, 0);
        self.nodes.push(NodeInfo { kind, parent, weight, rank, index, first_slot, n_children: children.len() as u16 });
        for (rank, (child, w)) in children.into_iter().enumerate() {
            let child_id = self.add(child, id, w, rank as u16, depth + 1)?;
            self.children[first_slot as usize + rank] = child_id;
        }
        Ok(id)
    }

    pub fn queues(&self) -> usize {
        self.leaf_of_queue.len()
    }

    /// The queue of leaf node `leaf`, for the flat paths' loops over the root's active list.
    #[inline(always)]
    fn queue_of_leaf(&self, leaf: u16) -> usize {
        if self.flat_in_order { leaf as usize - 1 } else { self.nodes[leaf as usize].index as usize }
    }

    /// The nodes from queue `q`'s leaf up to (not including) the root, leaf first, and how many.
    fn path_to(&self, q: usize) -> ([u16; MAX_DEPTH + 1], usize) {
        let mut path = [0u16; MAX_DEPTH + 1];
        let mut depth = 0;
        let mut node = self.leaf_of_queue[q];
        while node != 0 {
            path[depth] = node;
            depth += 1;
            node = self.nodes[node as usize].parent;
        }
        (path, depth)
    }

    /// A lower bound on [`PhantomQueues::expected_share`] of queue `q` whatever the state: the
    /// same floor divisions with every sibling counted active (a larger denominator), and 0
    /// below a `priority` node's first child (higher classes may use everything). Each step is
    /// monotone in `b`, so the bound holds through any depth.
    pub fn share_floor(&self, q: usize, budget: u64) -> u64 {
        let (path, depth) = self.path_to(q);
        let mut b = budget;
        for &child in path[..depth].iter().rev() {
            let c = &self.nodes[child as usize];
            let p = &self.nodes[c.parent as usize];
            match p.kind {
                Kind::Share => {
                    let siblings = &self.children[p.first_slot as usize..(p.first_slot + p.n_children) as usize];
                    let wsum: u64 = siblings.iter().map(|&s| self.nodes[s as usize].weight as u64).sum();
                    b = ((b as u128 * c.weight as u128) / wsum as u128) as u64;
                }
                Kind::Priority if c.rank > 0 => return 0,
                Kind::Priority => {}
                Kind::Leaf => unreachable!(),
            }
        }
        b
    }
}

/// Per inner node: the bytes queued below it and its non-empty children. Three words of the
/// aggregate's block (`Pod`: it is read in place from the block's words).
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct InnerState {
    /// Σ of the occupancy of every queue below, in nano-bytes.
    backlog: u64,
    /// Σ weight of the non-empty children (water-filling denominator).
    active_weight: u64,
    /// How many of the node's slots hold non-empty children.
    active_len: u16,
    /// Root of a flat `fair`/`weighted` policy only: the queue in its first slot as of the last
    /// [`PhantomQueues::set_defer_limit`] (the deferred remainder's taker), so that
    /// [`PhantomQueues::occupancy`] need not look it up. Fits in the padding.
    head_queue: u16,
    _padding: u32,
}

/// Words of an [`InnerState`].
const INNER_WORDS: usize = std::mem::size_of::<InnerState>() / 8;
// `node_backlog` reads the backlog as the state's first word.
const _: () = assert!(std::mem::offset_of!(InnerState, backlog) == 0);

/// A cache line's worth of an aggregate's block (the unit it is sized in). Aligned to 16 only,
/// what the allocator gives anyway: 64 sends it down its aligned path (padding around every
/// block), and in alternated `ratekit bench` runs at 10k aggregates the 64-aligned block was
/// slower than this one (docs/bcpqp.md, Cost).
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(16))]
struct Line([u64; 8]);

/// What [`PhantomQueues::apply`] did, for the defer limit that follows it.
enum Served {
    Nothing,
    /// Served; the limit needs a scan of the active queues.
    Batch,
    /// Served, and the smallest ⌊L_q/w_q⌋ over the active queues is known.
    AtLevel(u64),
}

/// One aggregate's phantom queues. Occupancies are in nano-bytes (bytes × 10⁹), the unit of
/// [`crate::Rate::credit`], so that service `r·Δt` is exact.
#[derive(Debug, Clone)]
pub struct PhantomQueues {
    /// One heap block (one pointer to follow, the root's state right before the occupancies):
    /// every inner node's [`InnerState`] (the root first), then the occupancy of every queue,
    /// then the active children of every inner node as u16 node ids (a node's slots are
    /// `first_slot .. first_slot + active_len`, kept in rank order under `priority` nodes).
    /// The offsets are the policy's `occupancy_at` and `slots_at`.
    block: Box<[Line]>,
    /// Flat `fair`/`weighted` only: service owed but not yet handed out (nano-bytes).
    deferred: u64,
    /// Service may stay deferred while `deferred < defer_limit`: below it no queue can empty,
    /// so the active set and each queue's share of it are fixed (see [`Self::serve`]).
    defer_limit: u64,
    /// ⌊(2⁶⁴−1)/W⌋ for the root's active weight W, so that ⌊D/W⌋ costs two multiplications.
    weight_reciprocal: u64,
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
    fn root(&self) -> &InnerState {
        // Word arrays, not bytes: the cast is then checked at compile time, not per packet.
        let words: &[u64; INNER_WORDS] = (&self.block[0].0[..INNER_WORDS]).try_into().expect("the root fits in a line");
        bytemuck::cast_ref(words)
    }

    #[inline(always)]
    fn root_mut(&mut self) -> &mut InnerState {
        let words: &mut [u64; INNER_WORDS] = (&mut self.block[0].0[..INNER_WORDS]).try_into().expect("the root fits in a line");
        bytemuck::cast_mut(words)
    }

    #[inline(always)]
    fn inner(&self, policy: &PhantomPolicy) -> &[InnerState] {
        bytemuck::cast_slice(&self.words()[..policy.occupancy_at])
    }

    #[inline(always)]
    fn occ(&self, policy: &PhantomPolicy) -> &[u64] {
        &self.words()[policy.occupancy_at..policy.slots_at]
    }

    /// Queue `q`'s occupancy word, for the per-packet paths: one bounds check on the block
    /// instead of slicing the occupancies out first.
    #[inline(always)]
    fn occ_word(&self, policy: &PhantomPolicy, q: usize) -> u64 {
        debug_assert!(q < policy.queues());
        self.words()[policy.occupancy_at + q]
    }

    #[inline(always)]
    fn occ_word_mut(&mut self, policy: &PhantomPolicy, q: usize) -> &mut u64 {
        debug_assert!(q < policy.queues());
        let at = policy.occupancy_at + q;
        &mut self.words_mut()[at]
    }

    #[inline(always)]
    fn slots(&self, policy: &PhantomPolicy) -> &[u16] {
        bytemuck::cast_slice(&self.words()[policy.slots_at..])
    }

    /// The block's three parts, for code that holds one while it changes another.
    #[inline(always)]
    fn parts_mut(&mut self, policy: &PhantomPolicy) -> (&mut [InnerState], &mut [u64], &mut [u16]) {
        let words = self.words_mut();
        let (inner, rest) = words.split_at_mut(policy.occupancy_at);
        let (occ, slots) = rest.split_at_mut(policy.slots_at - policy.occupancy_at);
        (bytemuck::cast_slice_mut(inner), occ, bytemuck::cast_slice_mut(slots))
    }

    #[inline(always)]
    fn inner_mut(&mut self, policy: &PhantomPolicy) -> &mut [InnerState] {
        self.parts_mut(policy).0
    }

    #[inline(always)]
    fn occ_mut(&mut self, policy: &PhantomPolicy) -> &mut [u64] {
        let (at, end) = (policy.occupancy_at, policy.slots_at);
        &mut self.words_mut()[at..end]
    }

    #[inline(always)]
    fn slots_mut(&mut self, policy: &PhantomPolicy) -> &mut [u16] {
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

    /// Hands out deferred service now (before the active set changes). The caller recomputes
    /// the defer limit once the change is made (a limit computed here would be overwritten).
    /// Some(min over active queues of ⌊L_q/w_q⌋ after the hand-out) if anything was served.
    #[inline]
    fn flush(&mut self, policy: &PhantomPolicy, on_drain: &mut impl FnMut(usize, u64)) -> Option<u64> {
        if self.deferred > 0 {
            let d = std::mem::take(&mut self.deferred);
            self.hand_out_deferred(policy, d, on_drain)
        } else {
            None
        }
    }

    /// [`Self::apply`] of deferred service `d` (below the defer limit), in closed form. No
    /// queue can empty there, so the water-filling's emptying passes find nothing and what is
    /// left is its hand-out: ⌊d/W⌋·w_q to every active queue, and the remainder in list order
    /// as [`Self::serve_flat_fair`] (one nano-byte each to the first d mod n queues) and
    /// [`Self::water_fill`] (all of it to the first queue) give it. Same state, no tests.
    /// Returns the level [`Self::set_defer_limit`] needs, min ⌊L_q/w_q⌋, found on the way.
    fn hand_out_deferred(&mut self, policy: &PhantomPolicy, d: u64, on_drain: &mut impl FnMut(usize, u64)) -> Option<u64> {
        let root = *self.root();
        if root.backlog == 0 {
            return None;
        }
        let mut m = u64::MAX;
        let (unit, mut spare) = div_rem_by_reciprocal(d, root.active_weight, self.weight_reciprocal);
        let (inner, occupancy, slots) = self.parts_mut(policy);
        inner[0].backlog -= d;
        let active = &slots[..root.active_len as usize];
        if policy.flat_fair {
            for &leaf in active {
                let q = policy.queue_of_leaf(leaf);
                let extra = (spare > 0) as u64;
                spare -= extra;
                debug_assert!(occupancy[q] > unit + extra, "deferred service empties no queue");
                occupancy[q] -= unit + extra;
                on_drain(q, occupancy[q]);
                m = m.min(occupancy[q]);
            }
        } else {
            for &leaf in active {
                let info = &policy.nodes[leaf as usize];
                let q = info.index as usize;
                let give = unit * info.weight as u64 + std::mem::take(&mut spare);
                // water_fill leaves a child it gives nothing to untouched (no on_drain).
                if give > 0 {
                    debug_assert!(occupancy[q] > give, "deferred service empties no queue");
                    occupancy[q] -= give;
                    on_drain(q, occupancy[q]);
                }
                m = m.min(occupancy[q] / info.weight as u64);
            }
        }
        Some(m)
    }

    /// After service was applied: how much may be deferred next. With m = min over active
    /// queues of ⌊L_q/w_q⌋ and W the active weight, deferring D keeps every queue above
    /// ⌊D/W⌋·w_q + W (so none empties and the remainder fits in the first) iff
    /// ⌊D/W⌋ + W ≤ m, i.e. D < (m − W + 1)·W. Arrivals only raise L_q, so the limit stays safe.
    fn set_defer_limit(&mut self, policy: &PhantomPolicy) {
        if !policy.flat_share || self.root().active_len == 0 {
            self.defer_limit = 0;
            return;
        }
        let mut m = u64::MAX;
        let active = &self.slots(policy)[..self.root().active_len as usize];
        if policy.flat_fair {
            for &leaf in active {
                m = m.min(self.occ(policy)[policy.queue_of_leaf(leaf)]);
            }
        } else {
            for &leaf in active {
                let info = &policy.nodes[leaf as usize];
                m = m.min(self.occ(policy)[info.index as usize] / info.weight as u64);
            }
        }
        self.set_defer_limit_at(policy, m);
    }

    /// [`Self::set_defer_limit`] given its level m = min over active queues of ⌊L_q/w_q⌋.
    fn set_defer_limit_at(&mut self, policy: &PhantomPolicy, m: u64) {
        self.defer_limit = 0;
        let root = *self.root();
        if !policy.flat_share || root.active_len == 0 {
            return;
        }
        let w = root.active_weight;
        self.weight_reciprocal = u64::MAX / w;
        self.root_mut().head_queue = policy.nodes[self.slots(policy)[0] as usize].index;
        if m >= w {
            self.defer_limit = ((m - w + 1) as u128 * w as u128).min(u64::MAX as u128) as u64;
        }
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
    fn node_backlog(&self, policy: &PhantomPolicy, node: u16) -> u64 {
        let info = &policy.nodes[node as usize];
        match info.kind {
            Kind::Leaf => self.occ_word(policy, info.index as usize),
            // An inner node's backlog is its state's first word.
            _ => self.words()[info.index as usize * INNER_WORDS],
        }
    }

    /// Adds `nb` nano-bytes to queue `q`, activating it (and its ancestors) if it was empty.
    #[inline(always)]
    pub fn add(&mut self, policy: &PhantomPolicy, q: usize, nb: u64, on_drain: &mut impl FnMut(usize, u64)) {
        if nb == 0 {
            return;
        }
        if self.occ_word(policy, q) == 0 {
            self.activate(policy, q, nb, on_drain);
            return;
        }
        // The common case: no list changes, only the backlogs on the way up grow.
        *self.occ_word_mut(policy, q) += nb;
        if policy.flat_share {
            // Every queue's parent is the root, inner node 0.
            self.root_mut().backlog += nb;
        } else {
            let mut node = policy.leaf_of_queue[q];
            while node != 0 {
                let parent = policy.nodes[node as usize].parent;
                self.inner_mut(policy)[policy.nodes[parent as usize].index as usize].backlog += nb;
                node = parent;
            }
        }
    }

    /// [`Self::add`] to an empty queue: it joins its parent's active list (and so on up).
    #[inline(never)]
    fn activate(&mut self, policy: &PhantomPolicy, q: usize, nb: u64, on_drain: &mut impl FnMut(usize, u64)) {
        let mut node = policy.leaf_of_queue[q];
        // A new active queue changes everyone's share: settle the old shares first.
        let level = self.flush(policy, on_drain);
        self.occ_mut(policy)[q] += nb;
        let mut activate = true;
        while node != 0 {
            let info = &policy.nodes[node as usize];
            let parent = &policy.nodes[info.parent as usize];
            let (inner, _, slots) = self.parts_mut(policy);
            let pst = &mut inner[parent.index as usize];
            let parent_was_empty = pst.backlog == 0;
            if activate {
                let len = pst.active_len as usize;
                let base = parent.first_slot as usize;
                let mut pos = len;
                if parent.kind == Kind::Priority {
                    // Insertion keeps rank order, so service walks children highest first.
                    while pos > 0 && policy.nodes[slots[base + pos - 1] as usize].rank > info.rank {
                        slots[base + pos] = slots[base + pos - 1];
                        pos -= 1;
                    }
                }
                slots[base + pos] = node;
                pst.active_len += 1;
                pst.active_weight += info.weight as u64;
            }
            pst.backlog += nb;
            activate = parent_was_empty;
            node = info.parent;
        }
        match level {
            // Flat: the hand-out found the old queues' level; q is the only newcomer.
            Some(m) if policy.flat_share => {
                self.set_defer_limit_at(policy, m.min(self.occ(policy)[q] / policy.weight_of_queue[q] as u64))
            }
            _ => self.set_defer_limit(policy),
        }
    }

    /// Takes `nb` (≤ its occupancy) nano-bytes out of queue `q` without serving them (BC-PQP's
    /// magic removal), deactivating whatever it empties.
    pub fn remove(&mut self, policy: &PhantomPolicy, q: usize, nb: u64, on_drain: &mut impl FnMut(usize, u64)) {
        let served = self.flush(policy, on_drain);
        let nb = nb.min(self.occ(policy)[q]);
        if nb == 0 {
            if let Some(m) = served {
                // The active set is unchanged: the hand-out's level is the limit's.
                self.set_defer_limit_at(policy, m);
            }
            return;
        }
        self.occ_mut(policy)[q] -= nb;
        let mut deactivate = self.occ(policy)[q] == 0;
        let mut node = policy.leaf_of_queue[q];
        while node != 0 {
            let info = &policy.nodes[node as usize];
            let parent = &policy.nodes[info.parent as usize];
            let ix = parent.index as usize;
            let base = parent.first_slot as usize;
            self.inner_mut(policy)[ix].backlog -= nb;
            if deactivate {
                let len = self.inner(policy)[ix].active_len as usize;
                let i = (0..len).find(|&i| self.slots(policy)[base + i] == node).expect("an active node is in its parent's list");
                if parent.kind == Kind::Priority {
                    self.slots_mut(policy).copy_within(base + i + 1..base + len, base + i);
                    let st = &mut self.inner_mut(policy)[ix];
                    st.active_len -= 1;
                    st.active_weight -= info.weight as u64;
                } else {
                    self.remove_slot(policy, ix, base, i, info.weight as u64);
                }
            }
            deactivate = self.inner(policy)[ix].backlog == 0;
            node = info.parent;
        }
        self.set_defer_limit(policy);
    }

    /// Serves `budget` nano-bytes by the policy (the batched phantom dequeues of Δt at rate r).
    /// `on_drain(q, new_occupancy)` is told of queues whose stored occupancy fell.
    ///
    /// Under a flat `fair`/`weighted` policy the batch may be deferred: while no queue can empty
    /// (`defer_limit`), each queue's part of it is a closed form ([`Self::deferred_share`]),
    /// so [`Self::occupancy`] answers in O(1) and the O(#active) hand-out runs only when the
    /// active set may change. Other policies hand out every batch at once.
    #[inline]
    pub fn serve(&mut self, policy: &PhantomPolicy, budget: u64, on_drain: &mut impl FnMut(usize, u64)) {
        let d = self.deferred.saturating_add(budget);
        if d < self.defer_limit {
            self.deferred = d;
            return;
        }
        self.deferred = 0;
        match self.apply(policy, d, on_drain) {
            Served::Nothing => {}
            Served::Batch => self.set_defer_limit(policy),
            Served::AtLevel(m) => self.set_defer_limit_at(policy, m),
        }
    }

    /// Hands out `budget` now.
    fn apply(&mut self, policy: &PhantomPolicy, budget: u64, on_drain: &mut impl FnMut(usize, u64)) -> Served {
        let total = self.root().backlog;
        if total == 0 || budget == 0 {
            return Served::Nothing;
        }
        if budget >= total {
            self.drain_all(policy, 0, on_drain);
        } else if policy.flat_fair {
            if let Some(m) = self.serve_flat_fair(policy, budget, on_drain) {
                return Served::AtLevel(m);
            }
        } else if policy.flat_share {
            // fill(root) without the dispatch, asking the water-filling for the level.
            self.root_mut().backlog -= budget;
            if let Some(m) = self.water_fill(policy, 0, 0, budget, true, on_drain) {
                return Served::AtLevel(m);
            }
        } else {
            self.fill(policy, 0, budget, on_drain);
        }
        Served::Batch
    }

    /// Empties the subtree of `node`; its parent's list is the caller's business.
    fn drain_all(&mut self, policy: &PhantomPolicy, node: u16, on_drain: &mut impl FnMut(usize, u64)) {
        let info = &policy.nodes[node as usize];
        if info.kind == Kind::Leaf {
            let q = info.index as usize;
            self.occ_mut(policy)[q] = 0;
            on_drain(q, 0);
            return;
        }
        let st = self.inner(policy)[info.index as usize];
        for i in 0..st.active_len {
            let child = self.slots(policy)[(info.first_slot + i) as usize];
            self.drain_all(policy, child, on_drain);
        }
        self.inner_mut(policy)[info.index as usize] = InnerState::default();
    }

    /// Serves `budget` (< backlog of `node`) within the subtree of `node`.
    fn fill(&mut self, policy: &PhantomPolicy, node: u16, budget: u64, on_drain: &mut impl FnMut(usize, u64)) {
        let info = &policy.nodes[node as usize];
        if info.kind == Kind::Leaf {
            let q = info.index as usize;
            self.occ_mut(policy)[q] -= budget;
            on_drain(q, self.occ(policy)[q]);
            return;
        }
        let ix = info.index as usize;
        let base = info.first_slot as usize;
        self.inner_mut(policy)[ix].backlog -= budget;
        match info.kind {
            Kind::Priority => {
                // Strict order: the highest-ranked children empty completely, one is served in
                // part, the rest get nothing.
                let mut left = budget;
                let mut emptied = 0;
                while left > 0 {
                    let child = self.slots(policy)[base + emptied];
                    let d = self.node_backlog(policy, child);
                    if left >= d {
                        left -= d;
                        self.drain_all(policy, child, on_drain);
                        self.inner_mut(policy)[ix].active_weight -= policy.nodes[child as usize].weight as u64;
                        emptied += 1;
                    } else {
                        self.fill(policy, child, left, on_drain);
                        left = 0;
                    }
                }
                let len = self.inner(policy)[ix].active_len as usize;
                self.slots_mut(policy).copy_within(base + emptied..base + len, base);
                self.inner_mut(policy)[ix].active_len -= emptied as u16;
            }
            Kind::Share => {
                self.water_fill(policy, ix, base, budget, false, on_drain);
            }
            Kind::Leaf => unreachable!(),
        }
    }

    /// Max-min weighted water-filling of `budget` over the active children of inner node `ix`.
    /// Each pass empties every child whose demand fits under the current water level
    /// (backlog·W ≤ S·w); removing one only raises the level, so at most #active passes run.
    /// The rest get ⌊S/W⌋·w each, and the < W nano-bytes left over go one child at a time in
    /// list order, capped by what each still holds (their total slack exceeds it).
    /// With `want_level`, returns min ⌊backlog/w⌋ over the children left active when the
    /// hand-out pass ran (the defer limit's level under a flat policy).
    fn water_fill(
        &mut self,
        policy: &PhantomPolicy,
        ix: usize,
        base: usize,
        budget: u64,
        want_level: bool,
        on_drain: &mut impl FnMut(usize, u64),
    ) -> Option<u64> {
        let mut level = None;
        // The node's list length and weight live in locals while its children are served
        // (serving a child only touches the child's subtree), and are stored back at the end.
        let mut len = self.inner(policy)[ix].active_len as usize;
        let mut wsum = self.inner(policy)[ix].active_weight;
        let mut s = budget;
        loop {
            let mut removed = false;
            let mut i = 0;
            while i < len {
                let child = self.slots(policy)[base + i];
                let w = policy.nodes[child as usize].weight as u64;
                let d = self.node_backlog(policy, child);
                // d > s already fails the test (w ≤ wsum): skips the 128-bit products for
                // the usual child, which holds more than one batch.
                if d <= s && (d as u128) * (wsum as u128) <= (s as u128) * (w as u128) {
                    s -= d;
                    self.drain_all(policy, child, on_drain);
                    len -= 1;
                    wsum -= w;
                    self.slots_mut(policy)[base + i] = self.slots(policy)[base + len];
                    removed = true;
                } else {
                    i += 1;
                }
            }
            if !removed || s == 0 {
                break;
            }
        }
        if s > 0 {
            let unit = s / wsum;
            let mut spare = s - unit * wsum;
            let mut i = 0;
            while i < len {
                let child = self.slots(policy)[base + i];
                let info = &policy.nodes[child as usize];
                let w = info.weight as u64;
                let d = self.node_backlog(policy, child);
                let mut give = unit * w;
                let extra = spare.min(d - give);
                give += extra;
                spare -= extra;
                if give >= d {
                    self.drain_all(policy, child, on_drain);
                    len -= 1;
                    wsum -= w;
                    self.slots_mut(policy)[base + i] = self.slots(policy)[base + len];
                } else {
                    if give > 0 {
                        if info.kind == Kind::Leaf {
                            // What fill does for a leaf, without the call.
                            let q = info.index as usize;
                            self.occ_mut(policy)[q] -= give;
                            on_drain(q, self.occ(policy)[q]);
                        } else {
                            self.fill(policy, child, give, on_drain);
                        }
                    }
                    if want_level {
                        let m = self.node_backlog(policy, child) / w;
                        level = Some(level.map_or(m, |l: u64| l.min(m)));
                    }
                    i += 1;
                }
            }
        }
        let st = &mut self.inner_mut(policy)[ix];
        st.active_len = len as u16;
        st.active_weight = wsum;
        level
    }

    fn remove_slot(&mut self, policy: &PhantomPolicy, ix: usize, base: usize, i: usize, weight: u64) {
        let (inner, _, slots) = self.parts_mut(policy);
        let st = &mut inner[ix];
        st.active_len -= 1;
        st.active_weight -= weight;
        slots[base + i] = slots[base + st.active_len as usize];
    }

    /// The flat `fair` case without the tree walk: same arithmetic as [`Self::water_fill`]
    /// with unit weights, on the root's active list. When its last pass serves every queue
    /// left, it returns their smallest occupancy, the defer limit's level.
    fn serve_flat_fair(&mut self, policy: &PhantomPolicy, budget: u64, on_drain: &mut impl FnMut(usize, u64)) -> Option<u64> {
        let (inner, occupancy, slots) = self.parts_mut(policy);
        let root = &mut inner[0];
        root.backlog -= budget;
        let mut s = budget;
        loop {
            let n = root.active_len as u64;
            let level = s / n;
            let mut removed = false;
            let mut i = 0;
            // backlog·n ≤ s  ⇔  backlog ≤ ⌊s/n⌋ for integers; the level only rises as queues
            // leave, so testing later queues against the old level is still exact.
            while i < root.active_len as usize {
                let leaf = slots[i];
                let q = policy.queue_of_leaf(leaf);
                let d = occupancy[q];
                if d <= level {
                    s -= d;
                    occupancy[q] = 0;
                    on_drain(q, 0);
                    // remove_slot(0, 0, i, 1) on the parts already split.
                    root.active_len -= 1;
                    root.active_weight -= 1;
                    slots[i] = slots[root.active_len as usize];
                    removed = true;
                } else {
                    i += 1;
                }
            }
            if !removed || s == 0 {
                break;
            }
        }
        if s == 0 {
            return None;
        }
        let n = root.active_len as u64;
        let unit = s / n;
        let mut spare = s - unit * n;
        let mut level = u64::MAX;
        for &leaf in &slots[..n as usize] {
            let q = policy.queue_of_leaf(leaf);
            let extra = (spare > 0) as u64;
            spare -= extra;
            // Every remaining queue holds more than `unit` (it failed the test above), so
            // unit + 1 never exceeds its occupancy.
            occupancy[q] -= unit + extra;
            on_drain(q, occupancy[q]);
            level = level.min(occupancy[q]);
        }
        Some(level)
    }

    /// The nano-bytes queue `q` would be served over a period worth `budget` nano-bytes at the
    /// whole aggregate's rate, if every non-empty queue (and `q` itself) kept the service it gets
    /// now: `fair`/`weighted` nodes split by weight among their non-empty children (counting
    /// `q`'s branch as non-empty), `priority` nodes give `q`'s branch what the higher branches
    /// leave, where a higher branch uses `demand(queue)` summed over all its queues, empty or
    /// not (a higher class that is between packets still uses its rate).
    /// BC-PQP's r_i*·T (000 §4, algorithms.md §3).
    #[inline(always)]
    pub fn expected_share(&self, policy: &PhantomPolicy, q: usize, budget: u64, demand: &impl Fn(usize) -> u64) -> u64 {
        if policy.flat_share {
            // The walk below in closed form: one share node, the root, above every queue.
            let w = policy.weight_of_queue[q] as u64;
            let wsum = self.root().active_weight + if self.occ(policy)[q] == 0 { w } else { 0 };
            return share_of(budget, w, wsum);
        }
        self.expected_share_walk(policy, q, budget, demand)
    }

    fn expected_share_walk(&self, policy: &PhantomPolicy, q: usize, budget: u64, demand: &impl Fn(usize) -> u64) -> u64 {
        let (path, depth) = policy.path_to(q);
        let mut b = budget;
        let mut parent = 0u16;
        for &child in path[..depth].iter().rev() {
            let pinfo = &policy.nodes[parent as usize];
            let cinfo = &policy.nodes[child as usize];
            let st = &self.inner(policy)[pinfo.index as usize];
            let child_idle = self.node_backlog(policy, child) == 0;
            match pinfo.kind {
                Kind::Share => {
                    let w = cinfo.weight as u64;
                    let wsum = st.active_weight + if child_idle { w } else { 0 };
                    b = share_of(b, w, wsum);
                }
                Kind::Priority => {
                    let base = pinfo.first_slot as usize;
                    for &sib in &policy.children[base..base + cinfo.rank as usize] {
                        if b == 0 {
                            break;
                        }
                        b = b.saturating_sub(subtree_demand(policy, sib, demand));
                    }
                }
                Kind::Leaf => unreachable!(),
            }
            parent = child;
        }
        b
    }

    /// Whether a `priority` node on queue `q`'s path has a higher-ranked child holding phantom
    /// backlog: the fluid policy then serves `q` nothing right now (its r_i* over the active
    /// queues is 0). Priority lists are kept in rank order, so the first entry decides.
    #[inline(always)]
    pub fn outranked(&self, policy: &PhantomPolicy, q: usize) -> bool {
        // No priority node anywhere in a flat policy: no walk on the fair/weighted fast path.
        !policy.flat_share && self.outranked_walk(policy, q)
    }

    fn outranked_walk(&self, policy: &PhantomPolicy, q: usize) -> bool {
        let (path, depth) = policy.path_to(q);
        path[..depth].iter().any(|&child| {
            let c = &policy.nodes[child as usize];
            let p = &policy.nodes[c.parent as usize];
            p.kind == Kind::Priority
                && self.inner(policy)[p.index as usize].active_len > 0
                && policy.nodes[self.slots(policy)[p.first_slot as usize] as usize].rank < c.rank
        })
    }
}

/// ⌊b·w/wsum⌋, in 64 bits when b·w fits.
#[inline]
fn share_of(b: u64, w: u64, wsum: u64) -> u64 {
    match b.checked_mul(w) {
        Some(bw) => bw / wsum,
        None => ((b as u128 * w as u128) / wsum as u128) as u64,
    }
}

fn subtree_demand(policy: &PhantomPolicy, node: u16, demand: &impl Fn(usize) -> u64) -> u64 {
    let info = &policy.nodes[node as usize];
    if info.kind == Kind::Leaf {
        return demand(info.index as usize);
    }
    let base = info.first_slot as usize;
    policy.children[base..base + info.n_children as usize]
        .iter()
        .fold(0u64, |acc, &c| acc.saturating_add(subtree_demand(policy, c, demand)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn build(spec: &str, n: usize, weights: Option<&[u32]>) -> (PhantomPolicy, PhantomQueues) {
        let p = PhantomPolicy::compile(&PolicyNode::resolve(spec, n, weights).unwrap()).unwrap();
        let s = PhantomQueues::new(&p);
        (p, s)
    }

    fn occ(p: &PhantomPolicy, s: &PhantomQueues, n: usize) -> Vec<u64> {
        (0..n).map(|q| s.occupancy(p, q)).collect()
    }

    #[test]
    fn reciprocal_division_is_exact() {
        for w in [1u64, 2, 3, 7, 16, 1000, 65_537, u32::MAX as u64 * 1024] {
            let r = u64::MAX / w;
            for d in [0, 1, w - 1, w, w + 1, 12_345_678_901, u64::MAX / 3, u64::MAX - 1, u64::MAX] {
                assert_eq!(div_rem_by_reciprocal(d, w, r), (d / w, d % w), "{d}/{w}");
            }
        }
    }

    /// The defer limit's level is taken from a hand-out (activation, flat-fair service) instead
    /// of a scan where it can be: after every operation that sets the limit, it must be what a
    /// fresh scan of the queues gives (an off-by-one level changes few verdicts, so the golden
    /// digests alone would not notice).
    #[test]
    fn defer_limit_matches_a_fresh_scan() {
        for (spec, weights) in [("fair", None), ("weighted", Some(&[1, 2, 3, 5, 8, 13, 21, 34][..]))] {
            let (p, mut s) = build(spec, 8, weights);
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = move |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let mut checked = 0;
            for _ in 0..50_000 {
                let sets_limit = if next(2) == 0 {
                    let q = next(8) as usize;
                    let empty = s.occ(&p)[q] == 0;
                    s.add(&p, q, (1 + next(3000)) * 1_000_000, &mut |_, _| {});
                    empty
                } else {
                    let budget = if next(50) == 0 { next(30_000) } else { next(3_500) } * 1_000_000;
                    let sets = s.root().backlog > 0 && budget > 0 && s.deferred.saturating_add(budget) >= s.defer_limit;
                    s.serve(&p, budget, &mut |_, _| {});
                    sets
                };
                if sets_limit && s.root().active_len > 0 {
                    let mut fresh = s.clone();
                    fresh.set_defer_limit(&p);
                    let state = |t: &PhantomQueues| (t.defer_limit, t.weight_reciprocal, t.root().head_queue);
                    assert_eq!(state(&s), state(&fresh), "{spec}");
                    checked += 1;
                }
            }
            assert!(checked > 5_000, "{spec}: {checked}");
        }
    }

    #[test]
    fn fair_water_fills_max_min() {
        let (p, mut s) = build("fair", 3, None);
        s.add(&p, 0, 10, &mut |_, _| {});
        s.add(&p, 1, 100, &mut |_, _| {});
        s.add(&p, 2, 100, &mut |_, _| {});
        // 10 goes to queue 0 (it empties), the other 50 split evenly.
        s.serve(&p, 60, &mut |_, _| {});
        assert_eq!(occ(&p, &s, 3), vec![0, 75, 75]);
        assert_eq!(s.backlog(), 150);
        s.serve(&p, 1, &mut |_, _| {});
        assert_eq!(s.occupancy(&p, 1) + s.occupancy(&p, 2), 149);
        assert_eq!(s.backlog(), 149);
    }

    /// Flat policies that list their queues out of order take the leaf lookup, not the
    /// in-order shortcut: each queue is served its own share.
    #[test]
    fn flat_policies_listing_queues_out_of_order() {
        for (spec, want) in [("fair(2, 0, 1)", vec![0, 130, 630]), ("weighted(2:1, 0:3, 1:3)", vec![0, 95, 665])] {
            let (p, mut s) = build(spec, 3, None);
            assert!(!p.flat_in_order, "{spec}");
            s.add(&p, 1, 200, &mut |_, _| {});
            s.add(&p, 2, 700, &mut |_, _| {});
            // Deferred, then handed out when queue 0 joins, then water-filled until it empties.
            s.serve(&p, 100, &mut |_, _| {});
            s.add(&p, 0, 10, &mut |_, _| {});
            s.serve(&p, 50, &mut |_, _| {});
            assert_eq!(occ(&p, &s, 3), want, "{spec}");
        }
        let (p, _) = build("weighted(0:2, 1:1, 2:1)", 3, None);
        assert!(p.flat_in_order);
    }

    #[test]
    fn weighted_and_priority_and_nested() {
        let (p, mut s) = build("weighted", 2, Some(&[1, 3]));
        s.add(&p, 0, 1000, &mut |_, _| {});
        s.add(&p, 1, 1000, &mut |_, _| {});
        s.serve(&p, 400, &mut |_, _| {});
        assert_eq!(occ(&p, &s, 2), vec![900, 700]);

        let (p, mut s) = build("priority", 3, None);
        s.add(&p, 2, 100, &mut |_, _| {});
        s.add(&p, 1, 100, &mut |_, _| {});
        s.serve(&p, 150, &mut |_, _| {});
        assert_eq!(occ(&p, &s, 3), vec![0, 0, 50]);

        let (p, mut s) = build("priority(0, weighted(1:1, 2:2))", 3, None);
        s.add(&p, 0, 30, &mut |_, _| {});
        s.add(&p, 1, 1000, &mut |_, _| {});
        s.add(&p, 2, 1000, &mut |_, _| {});
        s.serve(&p, 330, &mut |_, _| {});
        assert_eq!(occ(&p, &s, 3), vec![0, 900, 800]);
        assert_eq!(s.backlog(), 1700);
    }

    #[test]
    fn share_floor_bounds_expected_share_from_below() {
        // Every subset of active queues (8 queues: all 256), for share, priority and nested trees.
        for (spec, weights) in [
            ("fair", None),
            ("weighted", Some(&[1, 2, 3, 4, 5, 6, 7, 9][..])),
            ("priority", None),
            ("priority(0, fair(1, 2, 3), weighted(4:3, 5:1, 6:2, 7:1))", None),
            ("weighted(fair(0, 1, 2):2, priority(3, 4):1, weighted(5:1, 6:3, 7:1):3)", None),
        ] {
            let (p, _) = build(spec, 8, weights);
            let budget = 1_000_000_007;
            let mut tight = 0;
            for set in 0u32..256 {
                let mut s = PhantomQueues::new(&p);
                for q in (0..8).filter(|q| set & (1 << q) != 0) {
                    s.add(&p, q, 1000, &mut |_, _| {});
                }
                for q in 0..8 {
                    let floor = p.share_floor(q, budget);
                    let share = s.expected_share(&p, q, budget, &|_| 0);
                    assert!(floor <= share, "{spec}: queue {q}, active {set:08b}: {floor} > {share}");
                    tight += (floor == share && set == 255) as u32;
                }
            }
            // With every queue active and no demand the floor is reached (except below priority).
            assert!(tight > 0, "{spec}");
        }
    }

    #[test]
    fn outranked_only_by_a_backlogged_higher_branch() {
        let (p, mut s) = build("weighted(priority(0, weighted(1:1, 2:2)):1, fair(3, 4):1)", 5, None);
        let none: Vec<bool> = (0..5).map(|q| s.outranked(&p, q)).collect();
        assert_eq!(none, vec![false; 5]);
        s.add(&p, 2, 5, &mut |_, _| {});
        s.add(&p, 3, 5, &mut |_, _| {});
        // Siblings under a share node never outrank each other, nor does a lower class.
        assert_eq!((0..5).map(|q| s.outranked(&p, q)).collect::<Vec<_>>(), vec![false; 5]);
        s.add(&p, 0, 5, &mut |_, _| {});
        assert_eq!((0..5).map(|q| s.outranked(&p, q)).collect::<Vec<_>>(), vec![false, true, true, false, false]);
        // Once the higher class is served empty, the lower ones are no longer outranked.
        s.serve(&p, 10, &mut |_, _| {});
        assert_eq!(s.occupancy(&p, 0), 0);
        assert!(!s.outranked(&p, 1) && !s.outranked(&p, 2));
    }

    #[test]
    fn expected_share_follows_policy() {
        let (p, mut s) = build("priority(0, weighted(1:1, 2:2))", 3, None);
        // Queue 0 is greedy once it has sent something.
        let greedy = |q| if q == 0 { u64::MAX } else { 0 };
        let idle = |_| 0;
        // Alone, a queue expects the whole rate.
        assert_eq!(s.expected_share(&p, 1, 900, &idle), 900);
        assert_eq!(s.expected_share(&p, 1, 900, &greedy), 0, "a greedy higher class counts even between packets");
        s.add(&p, 2, 5, &mut |_, _| {});
        assert_eq!(s.expected_share(&p, 1, 900, &idle), 300);
        assert_eq!(s.expected_share(&p, 2, 900, &idle), 900);
        s.add(&p, 0, 5, &mut |_, _| {});
        assert_eq!(s.expected_share(&p, 0, 900, &greedy), 900);
        assert_eq!(s.expected_share(&p, 2, 900, &greedy), 0);
        let uses_300 = |q| if q == 0 { 300 } else { 0 };
        assert_eq!(s.expected_share(&p, 2, 900, &uses_300), 600);
        assert_eq!(s.expected_share(&p, 1, 900, &uses_300), 200);
    }
}
