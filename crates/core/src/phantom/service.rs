//! The per-packet writes: arrivals (`add`), BC-PQP's removal, and service by the policy with
//! the deferred hand-out of flat policies.

use super::block::InnerState;
use super::compile::{Kind, PhantomPolicy};
use super::state::{div_rem_by_reciprocal, PhantomQueues};

/// What [`PhantomQueues::apply`] did, for the defer limit that follows it.
enum Served {
    Nothing,
    /// Served; the limit needs a scan of the active queues.
    Batch,
    /// Served, and the smallest ⌊L_q/w_q⌋ over the active queues is known.
    AtLevel(u64),
}

impl PhantomQueues {
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
    /// left is its hand-out: ⌊d/W⌋·w_q to every active queue, and the remainder to the first
    /// queue of the list, which holds more than W beyond its part (the limit's condition), so
    /// [`Self::serve_flat_fair`] and [`Self::water_fill`] would give it all there too. Same
    /// state, no tests.
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
            // The loop below with unit weights, without the weight loads and divisions.
            for &leaf in active {
                let q = policy.queue_of_leaf(leaf);
                let give = unit + std::mem::take(&mut spare);
                debug_assert!(occupancy[q] > give, "deferred service empties no queue");
                occupancy[q] -= give;
                on_drain(q, occupancy[q]);
                m = m.min(occupancy[q]);
            }
            return Some(m);
        }
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
        Some(m)
    }

    /// After service was applied: how much may be deferred next. With m = min over active
    /// queues of ⌊L_q/w_q⌋ and W the active weight, deferring D keeps every queue above
    /// ⌊D/W⌋·w_q + W (so none empties and the remainder fits in the first) iff
    /// ⌊D/W⌋ + W ≤ m, i.e. D < (m − W + 1)·W. Arrivals only raise L_q, so the limit stays safe.
    pub(super) fn set_defer_limit(&mut self, policy: &PhantomPolicy) {
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
        let unit = s / root.active_len as u64;
        let mut spare = s - unit * root.active_len as u64;
        let mut level = u64::MAX;
        let mut i = 0;
        while i < root.active_len as usize {
            let q = policy.queue_of_leaf(slots[i]);
            // Every queue left holds more than `unit` (it failed the test above). The remainder
            // goes in list order, each queue taking what it holds beyond `unit`, as water_fill
            // gives it: the deferred view (`occupancy`) counts all of it to the first queue.
            let extra = spare.min(occupancy[q] - unit);
            spare -= extra;
            occupancy[q] -= unit + extra;
            on_drain(q, occupancy[q]);
            if occupancy[q] == 0 {
                // An empty queue leaves the list, or its next arrival would list it twice.
                root.active_len -= 1;
                root.active_weight -= 1;
                slots[i] = slots[root.active_len as usize];
            } else {
                level = level.min(occupancy[q]);
                i += 1;
            }
        }
        Some(level)
    }
}
