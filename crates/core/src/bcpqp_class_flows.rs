//! BC-PQP over classes of exact per-flow queues (`kind = "bcpqp"`, `flows = "exact"`,
//! `classify = "class"`, issue 17 item 1): the classes share the rate by the policy as in
//! [`crate::pqp_class_flows`], and every flow carries the burst control of flat exact BC-PQP
//! ([`crate::bcpqp_flows`]: A_i, M_i, window end, windows in one FIFO by end), judged against
//! X_i = r_c*·T / n_c, r_c* its class's expected share as class-queued BC-PQP computes it and n_c
//! the class's non-empty flows (the class's flows share what it is served equally).
//!
//! Why each step (docs/bcpqp.md, "Exact flows inside classes"):
//! - Magic enters the flow's queue and its class's queue together and leaves both together, so
//!   the class queue stays the sum of its flows and the tree serves magic as the class's backlog:
//!   a flow held back by magic holds its class's service, as a hashed queue would.
//! - The flows of a class are served lazily by what the tree served the class since they were
//!   last brought up to date; a due window first does that for its class, so its θ− test and
//!   reclaim see the occupancy continuous service would have left.
//! - Priority demand is the class's accepted bytes per window (kept per class, not summed over
//!   its flows at every test): the same measure class-queued BC-PQP charges a higher class.
//! - θ− takes X_i = 0 while a higher-priority class holds phantom backlog, as class-queued
//!   BC-PQP does, so a starved class keeps its flows' magic.

use crate::bcpqp::{BcPqpConfig, BurstParams, BurstState};
use crate::bcpqp_flows::{FlowBurst, Thresholds};
use crate::phantom::FlowStats;
use crate::pqp::{Pqp, PqpStats};
use crate::pqp_flows::FlowPqp;
use crate::units::NANOS_PER_SEC;
use crate::{Instant, Packet, Policer, Verdict};
use std::collections::VecDeque;
use std::sync::Arc;

/// One class: its flows, its queue's occupancy when they were last served, its demand per window.
#[derive(Debug, Clone)]
struct Class {
    flows: FlowPqp<FlowBurst>,
    synced: u64,
    /// Only `accepted`, `accepted_prev` and `window_end` are used: the class's bytes per window.
    demand: BurstState,
    /// θ± taken at this class share (nano-bytes per T) and `thresholds.n` flows.
    thresholds_share: u64,
    thresholds: Thresholds,
}

/// One aggregate's BC-PQP over classes of exact flow queues.
#[derive(Debug, Clone)]
pub struct ClassFlowBcPqp {
    tree: Pqp,
    classes: Box<[Class]>,
    burst: Arc<BurstParams>,
    /// (window end, class, slot) of every window started, in order of end.
    windows: VecDeque<(u64, u32, u32)>,
    next_end: u64,
    /// The latest arrival time: a clock that steps back is taken as not moving.
    last: u64,
    burst_fills: u64,
    magic_removals: u64,
    magic_added_nb: u128,
    magic_removed_nb: u128,
}

impl ClassFlowBcPqp {
    /// Panics on an invalid config: call [`BcPqpConfig::validate`] first (config.rs does).
    pub fn new(cfg: &BcPqpConfig) -> Self {
        let burst = Arc::new(BurstParams::of(cfg));
        let pqp = cfg.pqp();
        let class = Class {
            flows: FlowPqp::new(&pqp),
            synced: 0,
            demand: BurstState::default(),
            thresholds_share: 0,
            thresholds: Thresholds::default(),
        };
        ClassFlowBcPqp {
            tree: Pqp::new(&pqp),
            classes: vec![class; cfg.queues as usize].into_boxed_slice(),
            burst,
            windows: VecDeque::new(),
            next_end: u64::MAX,
            last: 0,
            burst_fills: 0,
            magic_removals: 0,
            magic_added_nb: 0,
            magic_removed_nb: 0,
        }
    }

    /// Counters summed over the classes.
    pub fn stats(&self) -> PqpStats {
        self.classes.iter().map(|c| c.flows.stats()).sum()
    }

    /// Flow-table counters summed over the classes.
    pub fn flow_stats(&self) -> FlowStats {
        self.classes.iter().map(|c| c.flows.flow_stats()).sum()
    }

    /// How many times a flow was filled with magic, and how many times magic was removed.
    pub fn burst_events(&self) -> (u64, u64) {
        (self.burst_fills, self.magic_removals)
    }

    /// Nano-bytes of magic added to and removed from the class queues since the start.
    pub fn magic_totals_nb(&self) -> (u128, u128) {
        (self.magic_added_nb, self.magic_removed_nb)
    }

    /// Flows holding a queue now, over every class.
    pub fn flows(&self) -> usize {
        self.classes.iter().map(|c| c.flows.flows()).sum()
    }

    /// Memory of one aggregate: the class tree, every class's flows, the window FIFO.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.tree.memory_bytes()
            + self.classes.iter().map(|c| std::mem::size_of::<Class>() + c.flows.memory_bytes()).sum::<usize>()
            + self.windows.capacity() * std::mem::size_of::<(u64, u32, u32)>()
    }

    /// Occupancy of class `c`'s queue in nano-bytes (its flows' sum, magic included), as of the last arrival.
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

    /// Occupancy of `flow`'s queue in class `c`, nano-bytes, as of the last time they were served.
    pub fn flow_occupancy_nb(&self, c: usize, flow: u64) -> u64 {
        self.classes[c].flows.flow_occupancy_nb(flow)
    }

    /// Magic still in `flow`'s queue in class `c`: min(M_i, L_i).
    pub fn flow_magic_nb(&self, c: usize, flow: u64) -> u64 {
        let q = &self.classes[c].flows.queues;
        q.slot_of_flow(flow).map_or(0, |s| q.data(s).magic_nb.min(q.occupancy(s)))
    }

    /// Serves class `c`'s flows what the tree served the class since they were last served.
    #[inline]
    fn sync(&mut self, c: usize, t: u64) {
        let occupancy = self.tree.occupancy_nb(c);
        let class = &mut self.classes[c];
        // A drained flow outlives its silence only while its window runs.
        class.flows.queues.serve(class.synced - occupancy, &mut |d: &mut FlowBurst| {
            d.magic_nb = 0;
            t >= d.window_end
        });
        class.synced = occupancy;
    }

    /// θ± of class `c`'s flows at `t`: X_i = r_c*·T / n_c. For the θ− test (`removing`) r_c* is 0
    /// while a higher-priority class holds phantom backlog (bcpqp.rs: the magic of a starved
    /// class stays).
    fn thresholds(&mut self, c: usize, t: u64, removing: bool) -> Thresholds {
        let policy = &self.tree.params().policy;
        let share = if removing && self.tree.queues.outranked(policy, c) {
            0
        } else {
            let (classes, window) = (&self.classes, self.burst.window.0);
            let demand = |j: usize| classes[j].demand.demand_nb(t, window);
            self.tree.queues.expected_share(policy, c, self.burst.window_budget_nb, &demand)
        };
        let class = &mut self.classes[c];
        let n = class.flows.queues.active().max(1);
        if class.thresholds.n != n || class.thresholds_share != share {
            class.thresholds = Thresholds::of_share(&self.burst, share, n);
            class.thresholds_share = share;
        }
        class.thresholds
    }

    /// Restarts the window of slot `s` in class `c` at `t`.
    fn restart_window(&mut self, c: usize, s: usize, t: u64) {
        let end = t.saturating_add(self.burst.window.0);
        let d = self.classes[c].flows.queues.data_mut(s);
        d.accepted = 0;
        d.window_end = end;
        let entry = (end, c as u32, s as u32);
        // A fill right after the window's start at the same instant needs no second entry.
        if self.windows.back() != Some(&entry) {
            if self.windows.is_empty() {
                self.next_end = end;
            }
            self.windows.push_back(entry);
        }
    }

    /// Ends the window of slot `s` in class `c` at `t`: removes its magic, from the flow and its
    /// class together, if it accepted less than θ−·X_i.
    fn close_window(&mut self, c: usize, s: usize, t: u64) {
        let magic = self.classes[c].flows.clamp_magic(s);
        if magic > 0 && self.classes[c].flows.queues.data(s).accepted < self.thresholds(c, t, true).remove_below {
            let before = self.tree.occupancy_nb(c);
            self.tree.remove_unserved(c, magic);
            let class = &mut self.classes[c];
            // A queue emptied here stays allocated: its new window runs.
            class.flows.queues.remove(s, magic);
            class.flows.queues.data_mut(s).magic_nb = 0;
            class.synced = self.tree.occupancy_nb(c);
            self.magic_removed_nb += (before - class.synced) as u128;
            self.magic_removals += 1;
        }
        self.restart_window(c, s, t);
    }

    /// Handles the windows due at `t`, each after its class's flows are brought up to date:
    /// closes those holding magic, reclaims drained flows.
    #[inline(never)]
    fn close_windows_due_now(&mut self, t: u64) {
        while let Some(&(end, c, s)) = self.windows.front() {
            if end > t {
                break;
            }
            self.windows.pop_front();
            let (c, s) = (c as usize, s as usize);
            self.sync(c, t);
            let flows = &mut self.classes[c].flows;
            if flows.queues.data(s).window_end != end {
                continue; // restarted by a fill, or the slot was reclaimed
            }
            if flows.clamp_magic(s) > 0 {
                self.close_window(c, s, t);
            } else if flows.queues.occupancy(s) == 0 {
                flows.queues.reclaim(s);
            }
            // Otherwise the window closes at the flow's next arrival, and the flow is reclaimed
            // when its queue drains (the window has ended by then).
        }
        self.next_end = self.windows.front().map_or(u64::MAX, |&(end, _, _)| end);
    }

    /// Fills slot `s` of class `c` with magic up to B, in its class's queue too, and restarts its window.
    fn fill_with_magic(&mut self, c: usize, s: usize, t: u64) {
        let magic = self.classes[c].flows.fill_with_magic(s);
        self.tree.add_admitted(c, magic);
        self.classes[c].synced = self.tree.occupancy_nb(c);
        self.magic_added_nb += magic as u128;
        self.burst_fills += 1;
        self.restart_window(c, s, t);
    }
}

impl Policer for ClassFlowBcPqp {
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let c = self.tree.queue_of(pkt);
        self.tree.advance(now, &mut |_, _| {});
        self.last = self.last.max(now.0);
        let t = self.last;
        if self.next_end <= t {
            self.close_windows_due_now(t);
        }
        self.sync(c, t);
        let len = pkt.len as u64;
        let s = self.classes[c].flows.queues.slot(pkt.flow);
        let (verdict, magic, accepted) = loop {
            if let Some(admitted) = self.classes[c].flows.admit_in_window(s, t, len) {
                break admitted;
            }
            // Its window has ended: close it, then the packet counts in the new one.
            self.close_window(c, s, t);
        };
        if verdict.is_pass() {
            self.tree.add_admitted(c, len * NANOS_PER_SEC);
            let window = self.burst.window.0;
            let class = &mut self.classes[c];
            class.synced = self.tree.occupancy_nb(c);
            if t >= class.demand.window_end {
                class.demand.restart_window(t, window);
            }
            class.demand.accepted += len;
            if magic == 0 && accepted > self.thresholds(c, t, false).fill_above {
                self.fill_with_magic(c, s, t);
            }
        }
        verdict
    }
}
