//! An independent reference for PQP's analogous shaper (000 §3.3, Property 1): a fluid
//! hierarchical-GPS shaper with drop-tail byte queues, simulated event by event in f64.
//!
//! It shares nothing with `ratekit_core::phantom` but the parsed policy tree: rates are pushed
//! down the tree (priority: all to the first backlogged child; fair/weighted: by weight among
//! backlogged children), time advances to the next moment a queue empties, and the allocation
//! is recomputed. A fluid shaper, not a packet DRR, because PQP's phantom queues are byte
//! counters served continuously (a DRR would differ from both by up to a quantum per round).

#![allow(dead_code)]

pub mod load;

use ratekit_core::PolicyNode;

/// Backlog below this many bytes after a step is the f64 round-off of an exact emptying.
pub const DUST: f64 = 1e-6;

pub struct FluidShaper {
    policy: PolicyNode,
    /// bytes per nanosecond
    rate: f64,
    size: f64,
    backlog: Vec<f64>,
    now: f64,
}

impl FluidShaper {
    pub fn new(policy: PolicyNode, queues: usize, rate_bytes_per_sec: u64, size_bytes: u64) -> Self {
        FluidShaper {
            policy,
            rate: rate_bytes_per_sec as f64 / 1e9,
            size: size_bytes as f64,
            backlog: vec![0.0; queues],
            now: 0.0,
        }
    }

    pub fn backlog(&self, q: usize) -> f64 {
        self.backlog[q]
    }

    fn subtree_busy(&self, node: &PolicyNode) -> bool {
        match node {
            PolicyNode::Queue(q) => self.backlog[*q] > 0.0,
            PolicyNode::Fair(c) | PolicyNode::Priority(c) => c.iter().any(|n| self.subtree_busy(n)),
            PolicyNode::Weighted(c) => c.iter().any(|(n, _)| self.subtree_busy(n)),
        }
    }

    fn allocate(&self, node: &PolicyNode, rate: f64, out: &mut [f64]) {
        match node {
            PolicyNode::Queue(q) => out[*q] = rate,
            PolicyNode::Priority(c) => {
                if let Some(first) = c.iter().find(|n| self.subtree_busy(n)) {
                    self.allocate(first, rate, out);
                }
            }
            PolicyNode::Fair(c) => {
                let busy: Vec<&PolicyNode> = c.iter().filter(|n| self.subtree_busy(n)).collect();
                for n in &busy {
                    self.allocate(n, rate / busy.len() as f64, out);
                }
            }
            PolicyNode::Weighted(c) => {
                let total: f64 = c.iter().filter(|(n, _)| self.subtree_busy(n)).map(|(_, w)| *w as f64).sum();
                for (n, w) in c.iter().filter(|(n, _)| self.subtree_busy(n)) {
                    self.allocate(n, rate * *w as f64 / total, out);
                }
            }
        }
    }

    /// Serves the queues from the current time to `t` (ns).
    pub fn advance(&mut self, t: f64) {
        let mut rates = vec![0.0; self.backlog.len()];
        while self.now < t {
            rates.iter_mut().for_each(|r| *r = 0.0);
            self.allocate(&self.policy, self.rate, &mut rates);
            let step = self
                .backlog
                .iter()
                .zip(&rates)
                .filter(|(b, r)| **b > 0.0 && **r > 0.0)
                .map(|(b, r)| b / r)
                .fold(t - self.now, f64::min);
            if !(step > 0.0) && rates.iter().all(|r| *r == 0.0) {
                break;
            }
            for (b, r) in self.backlog.iter_mut().zip(&rates) {
                if *r > 0.0 {
                    *b -= r * step;
                    // The queue that set `step` empties exactly; round-off must not leave dust.
                    if *b <= DUST {
                        *b = 0.0;
                    }
                }
            }
            self.now += step;
        }
        self.now = self.now.max(t);
    }

    /// Drop-tail admission of `bytes` into queue `q` at time `t`; `None` if the decision is
    /// within `tie` bytes of the edge (a float tie the test must not judge).
    pub fn arrive(&mut self, t: f64, q: usize, bytes: u64, tie: f64) -> Option<bool> {
        self.advance(t);
        let after = self.backlog[q] + bytes as f64;
        if (after - self.size).abs() <= tie {
            return None;
        }
        Some(after <= self.size)
    }

    pub fn enqueue(&mut self, q: usize, bytes: u64) {
        self.backlog[q] += bytes as f64;
    }
}
