//! The policy tree compiled into the flat arrays the data path walks, and where each part of an
//! aggregate's block starts.

use super::block::INNER_WORDS;
use crate::policy::PolicyNode;

/// Deepest nesting accepted: the share walk keeps the path on the stack.
pub const MAX_DEPTH: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Leaf,
    /// `fair` and `weighted` are the same water-filling; `fair` just has unit weights.
    Share,
    Priority,
}

#[derive(Debug, Clone)]
pub(super) struct NodeInfo {
    pub(super) kind: Kind,
    pub(super) parent: u16,
    /// Weight within the parent (1 under `fair` and `priority`).
    pub(super) weight: u32,
    /// Position among the parent's children: the priority order.
    pub(super) rank: u16,
    /// Leaves: the queue index. Inner nodes: index into [`PhantomQueues::inner`](super::PhantomQueues::inner).
    pub(super) index: u16,
    /// Inner nodes: where its active-children slots start in [`PhantomQueues::slots`](super::PhantomQueues::slots).
    pub(super) first_slot: u16,
    /// Inner nodes: how many children.
    pub(super) n_children: u16,
}

/// A policy compiled for the data path. Node 0 is the root.
#[derive(Debug, Clone)]
pub struct PhantomPolicy {
    pub(super) nodes: Vec<NodeInfo>,
    /// Every inner node's children in order, at the node's `first_slot`.
    pub(super) children: Vec<u16>,
    pub(super) leaf_of_queue: Vec<u16>,
    /// Each queue's weight within its parent (its leaf's `weight`), without the detour via
    /// `nodes` on the per-packet paths.
    pub(super) weight_of_queue: Vec<u32>,
    pub(super) inner_count: usize,
    pub(super) slot_count: usize,
    /// Where an aggregate's occupancies start in its block, in u64 words (after the inner
    /// nodes' states, 3 words each), and where its active-children slots start (after them).
    pub(super) occupancy_at: usize,
    pub(super) slots_at: usize,
    /// The block's size in cache lines.
    pub(super) block_lines: usize,
    pub(super) depth: usize,
    /// Every queue hangs directly off one `fair`/`weighted` root: service can be deferred.
    pub(super) flat_share: bool,
    /// ... and every weight is 1.
    pub(super) flat_fair: bool,
    /// ... and queue q's leaf is node q + 1 (the queues listed in order, as `fair` and
    /// `weighted` resolve), so the flat paths find a queue without looking its leaf up.
    pub(super) flat_in_order: bool,
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
    pub(super) fn queue_of_leaf(&self, leaf: u16) -> usize {
        if self.flat_in_order { leaf as usize - 1 } else { self.nodes[leaf as usize].index as usize }
    }
}
