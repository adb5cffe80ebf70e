//! Exact per-flow phantom queues under a flat `fair` policy (issue 17): one queue per flow,
//! created at the flow's first packet and given back once it has drained and its owner lets it
//! go (as Linux sch_fq detaches idle flows and collects them), at most `max_flows` per aggregate.
//!
//! Service is the fluid fair share of 000 §3.2 (GPS with unit weights) kept as one level in
//! virtual time, as `lab::bench_floor::FairPqpFloor` does for hashed queues: every non-empty
//! queue has been served `level` nano-bytes since it became non-empty, so queue q holds
//! finish[q] − level, and between two emptyings the level rises at r/n for n non-empty queues.
//! The non-empty queues sit in a min-heap keyed by a lower bound of their finish: an arrival to a
//! non-empty queue only raises its finish and leaves the heap alone; when the level reaches the
//! smallest key, that queue is either empty (it leaves the heap) or was re-filled meanwhile (its
//! key becomes its finish). Every activation ends in one emptying, so an arrival costs amortised
//! O(log n), whatever the number of flows, instead of `PhantomQueues`' O(n) hand-out.
//!
//! Service that does not divide evenly among the n non-empty queues (< n nano-bytes) is carried
//! to the next arrival, not placed in list order as `PhantomQueues` places it:
//! occupancies differ from the hashed mode's by less than a byte (`pqp_flows.rs` tests it).

use super::flow_index::{FlowIndex, Probe};

/// Not in the heap / no slot.
const NONE: u32 = u32::MAX;
/// The level is rebased to 0 past this, so that level + a queue's size (≤ 16 GiB in nano-bytes,
/// 1.7·10¹⁹) stays inside u64.
const REBASE_AT: u64 = 1 << 60;

#[derive(Debug, Clone)]
struct Slot<T> {
    /// Level at which the queue is empty (nano-bytes of virtual time).
    finish: u64,
    /// Heap key: ≤ finish while in the heap (arrivals raise finish, not the key).
    key: u64,
    /// Position in the heap, NONE while the queue is empty.
    pos: u32,
    flow: u64,
    /// The owner's per-flow state (BC-PQP's burst control).
    data: T,
}

/// Counters of the flow table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowStats {
    pub flows_created: u64,
    pub flows_reclaimed: u64,
    /// Packets of flows that found the table full and went to the shared overflow queue.
    pub overflow_packets: u64,
}

/// Totals over the flow tables of one aggregate (the classes of exact flows).
impl std::iter::Sum for FlowStats {
    fn sum<I: Iterator<Item = Self>>(parts: I) -> Self {
        parts.fold(FlowStats::default(), |t, s| FlowStats {
            flows_created: t.flows_created + s.flows_created,
            flows_reclaimed: t.flows_reclaimed + s.flows_reclaimed,
            overflow_packets: t.overflow_packets + s.overflow_packets,
        })
    }
}

/// One aggregate's exact per-flow phantom queues (occupancies in nano-bytes).
#[derive(Debug, Clone)]
pub struct FlowQueues<T> {
    index: FlowIndex,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    /// Non-empty queues, a binary min-heap by `key`.
    heap: Vec<u32>,
    level: u64,
    /// The heap's smallest key (stale while the heap is empty): every arrival compares the level
    /// with it, and a field is cheaper to read than the heap's top slot.
    top_key: u64,
    /// Service owed but not yet given: the part of a batch that did not divide among the queues.
    carry: u64,
    /// The queue shared by the flows that found the table full (NONE until needed).
    overflow: u32,
    max_flows: usize,
    stats: FlowStats,
}

impl<T: Default> FlowQueues<T> {
    pub fn new(max_flows: usize) -> Self {
        FlowQueues {
            index: FlowIndex::new(),
            slots: Vec::new(),
            free: Vec::new(),
            heap: Vec::new(),
            level: 0,
            top_key: 0,
            carry: 0,
            overflow: NONE,
            max_flows,
            stats: FlowStats::default(),
        }
    }

    pub fn stats(&self) -> FlowStats {
        self.stats
    }

    /// Non-empty queues (the n that share the rate).
    #[inline(always)]
    pub fn active(&self) -> usize {
        self.heap.len()
    }

    /// Flows holding a queue (the overflow queue counted as one).
    pub fn allocated(&self) -> usize {
        self.index.len() + (self.overflow != NONE) as usize
    }

    /// Bytes on the heap: slots, free list, heap and flow index as allocated, so the figure
    /// grows with the peak of live flows.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot<T>>() + (self.free.capacity() + self.heap.capacity()) * 4 + self.index.heap_bytes()
    }

    /// The slot of `flow`, created if it has none; the overflow queue if `max_flows` flows hold one.
    #[inline]
    pub fn slot(&mut self, flow: u64) -> usize {
        let slots = &self.slots;
        match self.index.probe(flow, |s| slots[s as usize].flow) {
            Probe::Found(s) => s as usize,
            Probe::Vacant(at) => self.new_slot(flow, at),
        }
    }

    #[inline(never)]
    fn new_slot(&mut self, flow: u64, vacant: usize) -> usize {
        if self.index.len() >= self.max_flows {
            self.stats.overflow_packets += 1;
            if self.overflow == NONE {
                self.overflow = self.take_slot(flow);
            }
            return self.overflow as usize;
        }
        let s = self.take_slot(flow);
        let slots = &self.slots;
        self.index.insert(vacant, s, |s| slots[s as usize].flow);
        s as usize
    }

    fn take_slot(&mut self, flow: u64) -> u32 {
        self.stats.flows_created += 1;
        let slot = Slot { flow, finish: 0, key: 0, pos: NONE, data: T::default() };
        match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = slot;
                s
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// The slot `flow` holds, if any (inspection).
    pub fn slot_of_flow(&self, flow: u64) -> Option<usize> {
        match self.index.probe(flow, |s| self.slots[s as usize].flow) {
            Probe::Found(s) => Some(s as usize),
            Probe::Vacant(_) => None,
        }
    }

    /// Gives an empty slot back (its flow is forgotten).
    pub fn reclaim(&mut self, s: usize) {
        debug_assert_eq!(self.slots[s].pos, NONE, "only an empty queue is reclaimed");
        if s as u32 == self.overflow {
            self.overflow = NONE;
        } else {
            let slots = &self.slots;
            self.index.remove(slots[s].flow, |s| slots[s as usize].flow);
        }
        self.slots[s].data = T::default();
        self.free.push(s as u32);
        self.stats.flows_reclaimed += 1;
    }

    #[inline(always)]
    pub fn data(&self, s: usize) -> &T {
        &self.slots[s].data
    }

    #[inline(always)]
    pub fn data_mut(&mut self, s: usize) -> &mut T {
        &mut self.slots[s].data
    }

    /// Occupancy of slot `s` in nano-bytes.
    #[inline(always)]
    pub fn occupancy(&self, s: usize) -> u64 {
        let slot = &self.slots[s];
        if slot.pos == NONE { 0 } else { slot.finish - self.level }
    }

    /// Σ occupancy over every queue (inspection: walks the non-empty queues).
    pub fn backlog(&self) -> u128 {
        self.heap.iter().map(|&s| self.occupancy(s as usize) as u128).sum()
    }

    /// Serves `budget` nano-bytes fairly. Each queue that empties is offered to `release`, with
    /// its owner's state; it is reclaimed if `release` says so.
    #[inline]
    pub fn serve(&mut self, budget: u64, release: &mut impl FnMut(&mut T) -> bool) {
        let mut budget = budget.saturating_add(self.carry);
        loop {
            let n = self.heap.len() as u64;
            if n == 0 {
                // Idle: service is lost, as the shaper's link idles; the level restarts.
                (self.carry, self.level) = (0, 0);
                return;
            }
            let reach = self.top_key - self.level;
            // The common case: nobody reaches its key, every queue gets an equal part.
            if budget / n < reach {
                let part = budget / n;
                self.level += part;
                self.carry = budget - part * n;
                if self.level > REBASE_AT {
                    self.rebase();
                }
                return;
            }
            // budget ≥ reach·n here, so the product does not overflow.
            budget -= reach * n;
            self.level = self.top_key;
            let top = self.heap[0] as usize;
            let slot = &mut self.slots[top];
            if slot.finish > self.level {
                slot.key = slot.finish;
                self.sift_down(0);
            } else {
                self.heap_remove(0);
                if release(&mut self.slots[top].data) {
                    self.reclaim(top);
                }
            }
        }
    }

    /// Adds `nb` nano-bytes to slot `s` (BC-PQP's magic; occupancy + `nb` ≤ B).
    pub fn add(&mut self, s: usize, nb: u64) {
        self.offer(s, |_, _| Some((nb, ())));
    }

    /// An arrival at slot `s`: `decide` sees the queue's occupancy and its owner's state and
    /// returns the nano-bytes to add with its verdict, or None to decline (nothing is added). One
    /// access to the slot for all of it, where separate calls would each index (and bounds-check)
    /// it again. The owner keeps occupancies ≤ B, so level + occupancy stays inside u64 (REBASE_AT).
    #[inline(always)]
    pub fn offer<R>(&mut self, s: usize, decide: impl FnOnce(u64, &mut T) -> Option<(u64, R)>) -> Option<R> {
        let level = self.level;
        let slot = &mut self.slots[s];
        let empty = slot.pos == NONE;
        let occupancy = if empty { 0 } else { slot.finish - level };
        let (nb, verdict) = decide(occupancy, &mut slot.data)?;
        if !empty {
            slot.finish += nb;
        } else if nb > 0 {
            self.activate(s, level + nb);
        }
        Some(verdict)
    }

    /// Puts the empty queue `s` in the heap, holding `finish` − level.
    fn activate(&mut self, s: usize, finish: u64) {
        let slot = &mut self.slots[s];
        slot.finish = finish;
        slot.key = finish;
        self.heap.push(s as u32);
        self.sift_up(self.heap.len() - 1);
    }

    /// Takes `nb` ≤ occupancy nano-bytes out of slot `s` (BC-PQP's magic removal); whether the
    /// queue is empty now (it is then out of the heap, still allocated).
    pub fn remove(&mut self, s: usize, nb: u64) -> bool {
        let slot = &mut self.slots[s];
        debug_assert!(slot.pos != NONE && slot.finish - self.level >= nb);
        slot.finish = slot.finish.saturating_sub(nb);
        let pos = slot.pos as usize;
        if slot.finish <= self.level {
            self.heap_remove(pos);
            return true;
        }
        if slot.key > slot.finish {
            slot.key = slot.finish;
            self.sift_up(pos);
        }
        false
    }

    fn rebase(&mut self) {
        for &s in &self.heap {
            let slot = &mut self.slots[s as usize];
            slot.finish -= self.level;
            slot.key -= self.level;
        }
        self.top_key -= self.level;
        self.level = 0;
    }

    #[inline(always)]
    fn key_at(&self, i: usize) -> u64 {
        self.slots[self.heap[i] as usize].key
    }

    #[inline(always)]
    fn place(&mut self, i: usize, s: u32) {
        self.heap[i] = s;
        let slot = &mut self.slots[s as usize];
        slot.pos = i as u32;
        if i == 0 {
            self.top_key = slot.key;
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        let s = self.heap[i];
        let key = self.slots[s as usize].key;
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.key_at(parent) <= key {
                break;
            }
            self.place(i, self.heap[parent]);
            i = parent;
        }
        self.place(i, s);
    }

    fn sift_down(&mut self, mut i: usize) {
        let s = self.heap[i];
        let key = self.slots[s as usize].key;
        let n = self.heap.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let child = if left + 1 < n && self.key_at(left + 1) < self.key_at(left) { left + 1 } else { left };
            if self.key_at(child) >= key {
                break;
            }
            self.place(i, self.heap[child]);
            i = child;
        }
        self.place(i, s);
    }

    /// Takes the heap's `i`-th entry out (its slot's `pos` becomes NONE).
    fn heap_remove(&mut self, i: usize) {
        let s = self.heap[i] as usize;
        self.slots[s].pos = NONE;
        let last = self.heap.pop().expect("non-empty heap");
        if i < self.heap.len() {
            self.place(i, last);
            // The moved entry may belong above or below `i`.
            self.sift_up(i);
            let j = self.slots[last as usize].pos as usize;
            self.sift_down(j);
        }
    }
}
