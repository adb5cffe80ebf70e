//! What the fluid policy owes a queue (BC-PQP's r_i*), from the state and as a bound over any state.

use super::compile::{Kind, PhantomPolicy, MAX_DEPTH};
use super::state::PhantomQueues;

impl PhantomPolicy {
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

impl PhantomQueues {
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
