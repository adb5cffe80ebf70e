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

use crate::bcpqp::{BcPqpConfig, BurstParams, BurstState, CATCH_UP_WINDOWS};
use crate::bcpqp_flows::{FlowBurst, Thresholds};
use crate::pqp_class_flows::ClassFlows;
use crate::units::NANOS_PER_SEC;
use crate::{Instant, Packet, Policer, Verdict};
use std::collections::VecDeque;
use std::sync::Arc;

/// One class's burst control: its demand per window and its flows' cached θ±.
#[derive(Debug, Clone, Default)]
struct ClassBurst {
    /// Only `accepted`, `accepted_prev` and `window_end` are used: the class's bytes per window.
    demand: BurstState,
    /// θ± taken at this class share (nano-bytes per T) and `thresholds.n` flows.
    share: u64,
    thresholds: Thresholds,
}

/// One aggregate's BC-PQP over classes of exact flow queues.
#[derive(Debug, Clone)]
pub struct ClassFlowBcPqp {
    classes: ClassFlows<FlowBurst>,
    class_burst: Box<[ClassBurst]>,
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
        ClassFlowBcPqp {
            classes: ClassFlows::new(&cfg.pqp()),
            class_burst: vec![ClassBurst::default(); cfg.queues as usize].into_boxed_slice(),
            burst: Arc::new(BurstParams::of(cfg)),
            windows: VecDeque::new(),
            next_end: u64::MAX,
            last: 0,
            burst_fills: 0,
            magic_removals: 0,
            magic_added_nb: 0,
            magic_removed_nb: 0,
        }
    }

    /// The class tree and every class's flows (inspection).
    pub fn classes(&self) -> &ClassFlows<FlowBurst> {
        &self.classes
    }

    /// How many times a flow was filled with magic, and how many times magic was removed.
    pub fn burst_events(&self) -> (u64, u64) {
        (self.burst_fills, self.magic_removals)
    }

    /// Nano-bytes of magic added to and removed from the class queues since the start.
    pub fn magic_totals_nb(&self) -> (u128, u128) {
        (self.magic_added_nb, self.magic_removed_nb)
    }

    /// Memory of one aggregate: the class tree, every class's flows and burst state, the window FIFO.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.classes.memory_bytes()
            + std::mem::size_of_val(&*self.class_burst)
            + self.windows.capacity() * std::mem::size_of::<(u64, u32, u32)>()
    }

    /// Magic still in `flow`'s queue in class `c`: min(M_i, L_i).
    pub fn flow_magic_nb(&self, c: usize, flow: u64) -> u64 {
        let q = &self.classes.flows_of(c).queues;
        q.slot_of_flow(flow).map_or(0, |s| q.data(s).magic_nb.min(q.occupancy(s)))
    }

    /// Serves class `c`'s flows what the tree served the class since they were last served.
    #[inline]
    fn sync(&mut self, c: usize, t: u64) {
        // A drained flow outlives its silence only while its window runs.
        self.classes.sync(c, &mut |d: &mut FlowBurst| {
            d.magic_nb = 0;
            t >= d.window_end
        });
    }

    /// θ± of class `c`'s flows at `t`: X_i = r_c*·T / n_c. For the θ− test (`removing`) r_c* is 0
    /// while a higher-priority class holds phantom backlog (bcpqp.rs: the magic of a starved
    /// class stays).
    fn thresholds(&mut self, c: usize, t: u64, removing: bool) -> Thresholds {
        let tree = &self.classes.tree;
        let policy = &tree.params().policy;
        let share = if removing && tree.queues.outranked(policy, c) {
            0
        } else {
            let (class_burst, window) = (&self.class_burst, self.burst.window.0);
            let demand = |j: usize| class_burst[j].demand.demand_nb(t, window);
            tree.queues.expected_share(policy, c, self.burst.window_budget_nb, &demand)
        };
        let n = self.classes.flows_of(c).queues.active().max(1);
        let cb = &mut self.class_burst[c];
        if cb.thresholds.n != n || cb.share != share {
            cb.thresholds = Thresholds::of_share(&self.burst, share, n);
            cb.share = share;
        }
        cb.thresholds
    }

    /// Restarts the window of slot `s` in class `c` at `t`.
    fn restart_window(&mut self, c: usize, s: usize, t: u64) {
        let end = t.saturating_add(self.burst.window.0);
        let d = self.classes.flows_mut(c).queues.data_mut(s);
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
        let magic = self.classes.flows_mut(c).clamp_magic(s);
        if magic > 0 && self.classes.flows_of(c).queues.data(s).accepted < self.thresholds(c, t, true).remove_below {
            self.magic_removed_nb += self.classes.remove(c, magic) as u128;
            let flows = self.classes.flows_mut(c);
            // A queue emptied here stays allocated: its new window runs.
            flows.queues.remove(s, magic);
            flows.queues.data_mut(s).magic_nb = 0;
            self.magic_removals += 1;
        }
        self.restart_window(c, s, t);
    }

    /// Handles the windows due at `t`, each after its class's flows are brought up to date:
    /// closes those holding magic, reclaims drained flows.
    #[inline(never)]
    fn close_windows_due_now(&mut self, t: u64) {
        while self.windows.front().is_some_and(|&(end, _, _)| end <= t) {
            self.close_front_window(t);
        }
        self.next_end = self.windows.front().map_or(u64::MAX, |&(end, _, _)| end);
    }

    /// Closes up to [`CATCH_UP_WINDOWS`] windows that ended by `now` each at its own end, after
    /// the phantom service up to that instant (see [`crate::bcpqp`]). Entries left behind by a
    /// fill or a reclaim are dropped without counting: the tc-BPF list never holds them.
    #[inline(never)]
    fn close_windows_at_their_ends(&mut self, now: u64) {
        let mut closed = 0;
        while closed < CATCH_UP_WINDOWS {
            let Some(&(end, c, s)) = self.windows.front() else { break };
            if end > now {
                break;
            }
            if self.classes.flows_of(c as usize).queues.data(s as usize).window_end != end {
                self.windows.pop_front();
                continue;
            }
            self.classes.tree.advance(Instant(end), &mut |_, _| {});
            self.last = self.last.max(end);
            self.close_front_window(self.last);
            closed += 1;
        }
        self.next_end = self.windows.front().map_or(u64::MAX, |&(end, _, _)| end);
    }

    /// The window FIFO's first entry, due at `t`, after its class's flows are brought up to
    /// date: closes it if it holds magic, reclaims a drained flow, or drops the entry.
    fn close_front_window(&mut self, t: u64) {
        let Some((end, c, s)) = self.windows.pop_front() else { return };
        let (c, s) = (c as usize, s as usize);
        self.sync(c, t);
        let flows = self.classes.flows_mut(c);
        if flows.queues.data(s).window_end != end {
            return; // restarted by a fill, or the slot was reclaimed
        }
        if flows.clamp_magic(s) > 0 {
            self.close_window(c, s, t);
        } else if flows.queues.occupancy(s) == 0 {
            flows.queues.reclaim(s);
        }
        // Otherwise the window closes at the flow's next arrival, and the flow is reclaimed
        // when its queue drains (the window has ended by then).
    }

    /// Fills slot `s` of class `c` with magic up to B, in its class's queue too, and restarts its window.
    fn fill_with_magic(&mut self, c: usize, s: usize, t: u64) {
        let magic = self.classes.flows_mut(c).fill_with_magic(s);
        self.classes.add(c, magic);
        self.magic_added_nb += magic as u128;
        self.burst_fills += 1;
        self.restart_window(c, s, t);
    }
}

impl Policer for ClassFlowBcPqp {
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let c = self.classes.tree.queue_of(pkt);
        if self.next_end <= now.0 {
            self.close_windows_at_their_ends(now.0);
        }
        self.classes.tree.advance(now, &mut |_, _| {});
        self.last = self.last.max(now.0);
        let t = self.last;
        if self.next_end <= t {
            self.close_windows_due_now(t);
        }
        self.sync(c, t);
        let len = pkt.len as u64;
        let key = self.classes.flow_key(c, pkt);
        let s = self.classes.flows_mut(c).queues.slot(key);
        let (verdict, magic, accepted) = loop {
            if let Some(admitted) = self.classes.flows_mut(c).admit_in_window(s, t, len) {
                break admitted;
            }
            // Its window has ended: close it, then the packet counts in the new one.
            self.close_window(c, s, t);
        };
        if verdict.is_pass() {
            self.classes.add(c, len * NANOS_PER_SEC);
            let demand = &mut self.class_burst[c].demand;
            if t >= demand.window_end {
                demand.restart_window(t, self.burst.window.0);
            }
            demand.accepted += len;
            if magic == 0 && accepted > self.thresholds(c, t, false).fill_above {
                self.fill_with_magic(c, s, t);
            }
        }
        verdict
    }
}
