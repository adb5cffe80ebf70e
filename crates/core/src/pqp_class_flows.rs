//! PQP over classes of exact per-flow queues (`flows = "exact"`, `classify = "class"`, issue 17
//! item 1): the policy (weighted, priority, nested) shares the rate among the classes exactly as
//! class-queued PQP does, and each class in `fair_classes` (default: all) shares what it is served
//! fairly among its own flows, each in its own phantom queue of size B (000 §3 with a per-flow
//! level under every class); the flows of any other class share one queue of size B.
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
struct Class<T> {
    flows: FlowPqp<T>,
    synced: u64,
    /// In `fair_classes`: each flow its own queue. Otherwise every packet takes the key
    /// [`SHARED_FLOW`], so the class's flows share one queue, the class-queued mode's.
    fair: bool,
}

/// The flow key of every packet of a class that is not in `fair_classes`.
pub const SHARED_FLOW: u64 = 0;

/// The two levels, shared by PQP and BC-PQP over classes of exact flows; `T` is the per-flow
/// state of what runs on top.
#[derive(Debug, Clone)]
pub struct ClassFlows<T> {
    pub(crate) tree: Pqp,
    classes: Box<[Class<T>]>,
}

impl<T: Default + Clone> ClassFlows<T> {
    /// Panics on an invalid config: call [`PqpConfig::validate`] first (config.rs does).
    pub(crate) fn new(cfg: &PqpConfig) -> Self {
        let class = |c| Class { flows: FlowPqp::new(cfg), synced: 0, fair: cfg.is_fair_class(c) };
        ClassFlows { tree: Pqp::new(cfg), classes: (0..cfg.queues).map(class).collect() }
    }

    /// The key `pkt` takes among class `c`'s flows.
    #[inline]
    pub fn flow_key(&self, c: usize, pkt: &Packet) -> u64 {
        if self.classes[c].fair { pkt.flow } else { SHARED_FLOW }
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

    /// Memory of the class tree plus every class's flows.
    pub fn memory_bytes(&self) -> usize {
        self.tree.memory_bytes() + self.classes.iter().map(|c| c.flows.memory_bytes()).sum::<usize>()
    }

    /// Occupancy of class `c`'s queue in nano-bytes (the sum over its flows), as of the last arrival.
    pub fn class_occupancy_nb(&self, c: usize) -> u64 {
        self.tree.occupancy_nb(c)
    }

    /// Σ occupancy over class `c`'s flows, nano-bytes, as of the last time they were served.
    pub fn class_flows_backlog_nb(&self, c: usize) -> u128 {
        self.classes[c].flows.backlog_nb()
    }

    /// Flows of class `c` holding a queue now.
    pub fn class_flows(&self, c: usize) -> usize {
        self.classes[c].flows.flows()
    }

    /// Occupancy of the queue `flow` (its key: [`Self::flow_key`]) holds in class `c`, nano-bytes,
    /// as of the last time they were served.
    pub fn flow_occupancy_nb(&self, c: usize, flow: u64) -> u64 {
        self.classes[c].flows.flow_occupancy_nb(flow)
    }

    pub(crate) fn flows_of(&self, c: usize) -> &FlowPqp<T> {
        &self.classes[c].flows
    }

    pub(crate) fn flows_mut(&mut self, c: usize) -> &mut FlowPqp<T> {
        &mut self.classes[c].flows
    }

    /// Serves class `c`'s flows what the tree served the class since they were last served
    /// (`release` as in [`crate::phantom::FlowQueues::serve`]).
    #[inline]
    pub(crate) fn sync(&mut self, c: usize, release: &mut impl FnMut(&mut T) -> bool) {
        let occupancy = self.tree.occupancy_nb(c);
        let class = &mut self.classes[c];
        class.flows.queues.serve(class.synced - occupancy, release);
        class.synced = occupancy;
    }

    /// Adds `nb` admitted at one of class `c`'s flows to the class's queue.
    #[inline]
    pub(crate) fn add(&mut self, c: usize, nb: u64) {
        self.tree.add_admitted(c, nb);
        self.classes[c].synced = self.tree.occupancy_nb(c);
    }

    /// Takes `nb` removed unserved from one of class `c`'s flows out of the class's queue; the
    /// nano-bytes it took (the class may hold less than its flows by the carried remainder).
    pub(crate) fn remove(&mut self, c: usize, nb: u64) -> u64 {
        let before = self.tree.occupancy_nb(c);
        self.tree.remove_unserved(c, nb);
        self.classes[c].synced = self.tree.occupancy_nb(c);
        before - self.classes[c].synced
    }
}

/// One aggregate's PQP over classes of exact flow queues.
#[derive(Debug, Clone)]
pub struct ClassFlowPqp {
    classes: ClassFlows<()>,
}

impl ClassFlowPqp {
    /// Panics on an invalid config: call [`PqpConfig::validate`] first (config.rs does).
    pub fn new(cfg: &PqpConfig) -> Self {
        ClassFlowPqp { classes: ClassFlows::new(cfg) }
    }

    /// The class tree and every class's flows (inspection).
    pub fn classes(&self) -> &ClassFlows<()> {
        &self.classes
    }

    /// Memory of one aggregate: the class tree plus every class's flows.
    pub fn memory_bytes(&self) -> usize {
        self.classes.memory_bytes()
    }
}

impl Policer for ClassFlowPqp {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let c = self.classes.tree.queue_of(pkt);
        self.classes.tree.advance(now, &mut |_, _| {});
        // Nothing outlives a drained flow queue in PQP: reclaim it at once.
        self.classes.sync(c, &mut |_| true);
        let key = self.classes.flow_key(c, pkt);
        let flows = self.classes.flows_mut(c);
        let s = flows.queues.slot(key);
        let verdict = flows.admit(s, pkt.len as u64, |_, _, _| Some(DropReason::Overlimit)).expect("PQP declines no packet");
        if verdict.is_pass() {
            self.classes.add(c, pkt.len as u64 * NANOS_PER_SEC);
        }
        verdict
    }
}
