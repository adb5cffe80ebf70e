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

const NO_PARENT: u32 = u32::MAX;

/// A tree node. The DRR state a node has as its parent's child (quantum, deficit) lives in the
/// node itself, so the enqueue and dequeue walks from a leaf to the root touch one record per
/// level.
#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    parent: u32,
    /// Quantum and deficit in the parent's round (unused under a priority parent).
    quantum: u64,
    deficit: u64,
    /// Packets queued in this subtree.
    packets: u64,
    /// Children in priority order (priority nodes only).
    children: Vec<u32>,
    /// Backlogged children in round order (DRR nodes only).
    round: VecDeque<u32>,
}

#[derive(Debug, Clone)]
struct Queue {
    fifo: VecDeque<Packet>,
    bytes: u64,
    leaf: u32,
}

/// N drop-tail queues served by a policy tree.
#[derive(Debug, Clone)]
pub struct TreeScheduler {
    nodes: Vec<Node>,
    queues: Vec<Queue>,
    limit: u64,
    backlog: u64,
}

impl TreeScheduler {
    /// `limit` is each queue's size in bytes; `mss` scales the DRR quanta.
    pub fn new(policy: &PolicyNode, queues: usize, limit: u64, mss: u64) -> Self {
        let mut s = TreeScheduler {
            nodes: Vec::new(),
            queues: vec![Queue { fifo: VecDeque::new(), bytes: 0, leaf: u32::MAX }; queues],
            limit,
            backlog: 0,
        };
        s.build(policy, NO_PARENT, 0, mss);
        s
    }

    fn build(&mut self, node: &PolicyNode, parent: u32, quantum: u64, mss: u64) -> u32 {
        let id = self.nodes.len() as u32;
        let (kind, kids): (Kind, Vec<(&PolicyNode, u64)>) = match node {
            PolicyNode::Queue(q) => (Kind::Leaf(*q), vec![]),
            PolicyNode::Fair(c) => (Kind::Drr, c.iter().map(|n| (n, 1)).collect()),
            PolicyNode::Weighted(c) => (Kind::Drr, c.iter().map(|(n, w)| (n, *w as u64)).collect()),
            PolicyNode::Priority(c) => (Kind::Priority, c.iter().map(|n| (n, 1)).collect()),
        };
        self.nodes.push(Node {
            kind,
            parent,
            quantum,
            deficit: 0,
            packets: 0,
            children: Vec::new(),
            round: VecDeque::with_capacity(if kind == Kind::Drr { kids.len() } else { 0 }),
        });
        if let Kind::Leaf(q) = kind {
            self.queues[q].leaf = id;
        }
        for (child, w) in kids {
            let c = self.build(child, id, w.saturating_mul(mss), mss);
            if kind == Kind::Priority {
                self.nodes[id as usize].children.push(c);
            }
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
        self.queues[queue].bytes
    }

    /// Appends `pkt` to `queue`, or hands it back if the queue has no room.
    pub fn enqueue(&mut self, queue: usize, pkt: Packet) -> Result<(), Packet> {
        let len = pkt.len as u64;
        let q = &mut self.queues[queue];
        if q.bytes + len > self.limit {
            return Err(pkt);
        }
        q.fifo.push_back(pkt);
        q.bytes += len;
        self.backlog += len;
        let mut n = q.leaf;
        loop {
            let node = &mut self.nodes[n as usize];
            node.packets += 1;
            let (parent, activated) = (node.parent, node.packets == 1);
            if parent == NO_PARENT {
                break;
            }
            if activated && self.nodes[parent as usize].kind == Kind::Drr {
                let node = &mut self.nodes[n as usize];
                node.deficit = node.quantum;
                self.nodes[parent as usize].round.push_back(n);
            }
            n = parent;
        }
        Ok(())
    }

    /// Runs the rounds until some leaf may send; returns that queue. Idempotent until the next
    /// dequeue: the nodes it passes keep their chosen child at the front.
    fn select(&mut self, n: u32) -> usize {
        match self.nodes[n as usize].kind {
            Kind::Leaf(q) => q,
            Kind::Priority => {
                let node = &self.nodes[n as usize];
                let child = node.children.iter().copied().find(|&c| self.nodes[c as usize].packets > 0);
                self.select(child.expect("select only visits backlogged subtrees"))
            }
            Kind::Drr => loop {
                let child = *self.nodes[n as usize].round.front().expect("backlogged DRR node has a round");
                let q = self.select(child);
                let len = self.queues[q].fifo.front().map_or(0, |p| p.len as u64);
                let c = &mut self.nodes[child as usize];
                if len <= c.deficit {
                    return q;
                }
                c.deficit += c.quantum;
                self.nodes[n as usize].round.rotate_left(1);
            },
        }
    }

    /// Removes and returns the next packet the policy sends.
    pub fn dequeue(&mut self) -> Option<Packet> {
        if self.is_empty() {
            return None;
        }
        let qi = self.select(0);
        let q = &mut self.queues[qi];
        let pkt = q.fifo.pop_front()?;
        let len = pkt.len as u64;
        q.bytes -= len;
        self.backlog -= len;
        let mut n = q.leaf;
        loop {
            let node = &mut self.nodes[n as usize];
            node.packets -= 1;
            let (parent, emptied) = (node.parent, node.packets == 0);
            if parent == NO_PARENT {
                break;
            }
            if self.nodes[parent as usize].kind == Kind::Drr {
                let node = &mut self.nodes[n as usize];
                node.deficit -= len;
                if emptied {
                    node.deficit = 0;
                    let round = &mut self.nodes[parent as usize].round;
                    debug_assert_eq!(round.front(), Some(&n));
                    round.pop_front();
                }
            }
            n = parent;
        }
        Some(pkt)
    }
}
