//! PQP over classes of exact per-flow queues (`flows = "exact"`, `classify = "class"`, issue 17
//! item 1): the policy (weighted, priority, nested) shares the rate among the classes exactly as
//! class-queued PQP does, and each class shares what it is served fairly among its own flows,
//! each in its own phantom queue of size B (000 §3 with a per-flow level under every class).
//!
//! Two levels, one service: the class tree ([`Pqp`] over the classes) holds in each class's
//! queue the sum of its flows' occupancies; the flows of a class ([`FlowPqp`], virtual time)
//! are served lazily, when the class is next touched, by what the tree served the class since:
//! its queue then held `synced`, now holds L_c, so the class was served `synced − L_c` (only
//! service lowers a class queue between touches). Fair sharing among a class's flows depends
//! only on how much the class got over an interval without arrivals to it, not on when, so the
//! lazy batch equals serving the flows continuously. Per packet: the tree's work for one class
//! plus O(log n) for the class's flows, whatever the number of flows.
//!
//! The flows of a class hold `synced` + less than one nano-byte per non-empty flow (the
//! remainder `FlowQueues` carries to the next batch); when the class's queue empties, the batch
//! is all the flows hold and every one of them empties with it.

use crate::phantom::FlowStats;
use crate::pqp::{Pqp, PqpConfig, PqpStats};
use crate::pqp_flows::FlowPqp;
use crate::units::NANOS_PER_SEC;
use crate::{DropReason, Instant, Packet, Policer, Verdict};

/// One class: its flows' queues, and its queue's occupancy in the tree when they were last served.
#[derive(Debug, Clone)]
struct Class {
    flows: FlowPqp<()>,
    synced: u64,
}

/// One aggregate's PQP over classes of exact flow queues.
#[derive(Debug, Clone)]
pub struct ClassFlowPqp {
    tree: Pqp,
    classes: Box<[Class]>,
}

impl ClassFlowPqp {
    /// Panics on an invalid config: call [`PqpConfig::validate`] first (config.rs does).
    pub fn new(cfg: &PqpConfig) -> Self {
        let class = Class { flows: FlowPqp::new(cfg), synced: 0 };
        ClassFlowPqp { tree: Pqp::new(cfg), classes: vec![class; cfg.queues as usize].into_boxed_slice() }
    }

    /// Counters summed over the classes.
    pub fn stats(&self) -> PqpStats {
        self.classes.iter().map(|c| c.flows.stats()).sum()
    }

    /// Flow-table counters summed over the classes.
    pub fn flow_stats(&self) -> FlowStats {
        self.classes.iter().map(|c| c.flows.flow_stats()).sum()
    }

    /// Flows holding a queue now, over every class.
    pub fn flows(&self) -> usize {
        self.classes.iter().map(|c| c.flows.flows()).sum()
    }

    /// Memory of one aggregate: the class tree plus every class's flows.
    pub fn memory_bytes(&self) -> usize {
        self.tree.memory_bytes() + self.classes.iter().map(|c| c.flows.memory_bytes()).sum::<usize>()
    }

    /// Occupancy of class `c`'s queue in nano-bytes (the sum over its flows), as of the last arrival.
    pub fn class_occupancy_nb(&self, c: usize) -> u64 {
        self.tree.occupancy_nb(c)
    }

    /// Σ occupancy over class `c`'s flows, nano-bytes, as of the last arrival to class `c`.
    pub fn class_flows_backlog_nb(&self, c: usize) -> u128 {
        self.classes[c].flows.backlog_nb()
    }

    /// Flows of class `c` holding a queue now.
    pub fn class_flows(&self, c: usize) -> usize {
        self.classes[c].flows.flows()
    }

    /// Occupancy of `flow`'s queue in class `c`, nano-bytes, as of the last arrival to class `c`.
    pub fn flow_occupancy_nb(&self, c: usize, flow: u64) -> u64 {
        self.classes[c].flows.flow_occupancy_nb(flow)
    }
}

impl Policer for ClassFlowPqp {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let c = self.tree.queue_of(pkt);
        self.tree.advance(now, &mut |_, _| {});
        let occupancy = self.tree.occupancy_nb(c);
        let class = &mut self.classes[c];
        // Nothing outlives a drained flow queue in PQP: reclaim it at once.
        class.flows.queues.serve(class.synced - occupancy, &mut |_| true);
        let s = class.flows.queues.slot(pkt.flow);
        let verdict = class.flows.admit(s, pkt.len as u64, |_, _, _| Some(DropReason::Overlimit)).expect("PQP declines no packet");
        let added = if verdict.is_pass() { pkt.len as u64 * NANOS_PER_SEC } else { 0 };
        class.synced = occupancy + added;
        if added > 0 {
            self.tree.add_admitted(c, added);
        }
        verdict
    }
}
