//! A packet scheduler over the policy tree (algorithms.md §0, §5): the shaper's real-packet
//! counterpart of PQP's phantom draining.
//!
//! Every `fair` or `weighted` node is a deficit round robin (Shreedhar & Varghese) over its
//! backlogged children with quantum w_i·MSS (w_i = 1 under `fair`); every `priority` node serves
//! its first backlogged child. Nesting is free: a DRR node charges a child the length of the
//! packet that child's subtree would send next. As in Linux sch_drr, a child that becomes
//! backlogged joins the tail of its parent's round with one quantum of deficit, and a child that
//! empties leaves the round and forgets its deficit. Queues are drop-tail with a byte limit each.
//! All storage is allocated at construction or grows to the largest backlog and is reused.

use crate::packet::Packet;
use crate::policy::PolicyNode;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Leaf(usize),
    Drr,
    Priority,
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    /// (parent node, this node's slot among the parent's children).
    parent: Option<(usize, usize)>,
    children: Vec<usize>,
    quantum: Vec<u64>,
    deficit: Vec<u64>,
    /// Slots of backlogged children, in round order (DRR nodes only).
    round: VecDeque<usize>,
    /// Packets queued in this subtree.
    packets: u64,
}

/// N drop-tail queues served by a policy tree.
#[derive(Debug, Clone)]
pub struct TreeScheduler {
    nodes: Vec<Node>,
    leaf_of_queue: Vec<usize>,
    queues: Vec<VecDeque<Packet>>,
    queue_bytes: Vec<u64>,
    limit: u64,
    backlog: u64,
}

impl TreeScheduler {
    /// `limit` is each queue's size in bytes; `mss` scales the DRR quanta.
    pub fn new(policy: &PolicyNode, queues: usize, limit: u64, mss: u64) -> Self {
        let mut s = TreeScheduler {
            nodes: Vec::new(),
            leaf_of_queue: vec![usize::MAX; queues],
            queues: vec![VecDeque::new(); queues],
            queue_bytes: vec![0; queues],
            limit,
            backlog: 0,
        };
        s.build(policy, None, mss);
        s
    }

    fn build(&mut self, node: &PolicyNode, parent: Option<(usize, usize)>, mss: u64) -> usize {
        let id = self.nodes.len();
        let (kind, kids): (Kind, Vec<(&PolicyNode, u64)>) = match node {
            PolicyNode::Queue(q) => (Kind::Leaf(*q), vec![]),
            PolicyNode::Fair(c) => (Kind::Drr, c.iter().map(|n| (n, 1)).collect()),
            PolicyNode::Weighted(c) => (Kind::Drr, c.iter().map(|(n, w)| (n, *w as u64)).collect()),
            PolicyNode::Priority(c) => (Kind::Priority, c.iter().map(|n| (n, 1)).collect()),
        };
        self.nodes.push(Node {
            kind,
            parent,
            children: Vec::with_capacity(kids.len()),
            quantum: kids.iter().map(|(_, w)| w.saturating_mul(mss)).collect(),
            deficit: vec![0; kids.len()],
            round: VecDeque::with_capacity(kids.len()),
            packets: 0,
        });
        if let Kind::Leaf(q) = kind {
            self.leaf_of_queue[q] = id;
        }
        for (slot, (child, _)) in kids.into_iter().enumerate() {
            let c = self.build(child, Some((id, slot)), mss);
            self.nodes[id].children.push(c);
        }
        id
    }

    pub fn backlog_bytes(&self) -> u64 {
        self.backlog
    }

    pub fn is_empty(&self) -> bool {
        self.nodes[0].packets == 0
    }

    pub fn queue_bytes(&self, queue: usize) -> u64 {
        self.queue_bytes[queue]
    }

    /// Appends `pkt` to `queue`, or hands it back if the queue has no room.
    pub fn enqueue(&mut self, queue: usize, pkt: Packet) -> Result<(), Packet> {
        let len = pkt.len as u64;
        if self.queue_bytes[queue] + len > self.limit {
            return Err(pkt);
        }
        self.queues[queue].push_back(pkt);
        self.queue_bytes[queue] += len;
        self.backlog += len;
        let mut n = self.leaf_of_queue[queue];
        loop {
            self.nodes[n].packets += 1;
            let Some((p, slot)) = self.nodes[n].parent else { break };
            if self.nodes[n].packets == 1 && self.nodes[p].kind == Kind::Drr {
                let parent = &mut self.nodes[p];
                parent.deficit[slot] = parent.quantum[slot];
                parent.round.push_back(slot);
            }
            n = p;
        }
        Ok(())
    }

    /// Runs the rounds until some leaf may send; returns that queue. Idempotent until the next
    /// dequeue: the nodes it passes keep their chosen child at the front.
    fn select(&mut self, n: usize) -> usize {
        match self.nodes[n].kind {
            Kind::Leaf(q) => q,
            Kind::Priority => {
                let node = &self.nodes[n];
                let child = node.children.iter().copied().find(|&c| self.nodes[c].packets > 0);
                self.select(child.expect("select only visits backlogged subtrees"))
            }
            Kind::Drr => loop {
                let slot = *self.nodes[n].round.front().expect("backlogged DRR node has a round");
                let child = self.nodes[n].children[slot];
                let q = self.select(child);
                let len = self.queues[q].front().map_or(0, |p| p.len as u64);
                let node = &mut self.nodes[n];
                if len <= node.deficit[slot] {
                    return q;
                }
                node.deficit[slot] += node.quantum[slot];
                node.round.rotate_left(1);
            },
        }
    }

    /// Removes and returns the next packet the policy sends.
    pub fn dequeue(&mut self) -> Option<Packet> {
        if self.is_empty() {
            return None;
        }
        let q = self.select(0);
        let pkt = self.queues[q].pop_front()?;
        let len = pkt.len as u64;
        self.queue_bytes[q] -= len;
        self.backlog -= len;
        let mut n = self.leaf_of_queue[q];
        loop {
            self.nodes[n].packets -= 1;
            let emptied = self.nodes[n].packets == 0;
            let Some((p, slot)) = self.nodes[n].parent else { break };
            let parent = &mut self.nodes[p];
            if parent.kind == Kind::Drr {
                parent.deficit[slot] -= len;
                if emptied {
                    debug_assert_eq!(parent.round.front(), Some(&slot));
                    parent.round.pop_front();
                    parent.deficit[slot] = 0;
                }
            }
            n = p;
        }
        Some(pkt)
    }
}
