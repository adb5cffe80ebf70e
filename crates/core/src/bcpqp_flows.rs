//! BC-PQP over exact per-flow queues (`flows = "exact"`, issue 17): burst control as in
//! [`crate::bcpqp`] (000 §4: θ+, θ−, T, per queue, magic drains last), each flow its own queue
//! under a flat `fair` policy, so X_i = ⌊r·T / n⌋ with n the non-empty queues (Q_i counted).
//!
//! What differs from the hashed mode, and why (docs/bcpqp.md, "Exact per-flow queues"):
//! - A flow's queue is reclaimed once it has drained and its window has ended: its state is then
//!   what closing that window would leave (no magic, nothing accepted), so forgetting the flow
//!   changes no decision. Drained flows whose window still runs wait in the window FIFO.
//! - Magic is clamped lazily: between two touches of a queue only service lowers it, so
//!   min(M_i, L_i) taken when the queue is next touched equals the hashed mode's eager clamp.
//! - Windows sit in one FIFO ordered by end (every window starts at `now` + T with `now` held
//!   non-decreasing: a clock that steps back is taken as not moving); a due entry closes a magic
//!   window, reclaims a drained flow, or is dropped. Entries left behind by a fill's restart are
//!   recognised (their end is not the flow's) and dropped when due. Due windows are closed in
//!   order of end, not of queue index, which flows do not have.

use crate::bcpqp::{BcPqpConfig, BurstParams, CATCH_UP_WINDOWS, THETA_ONE};
use crate::pqp_flows::FlowPqp;
use crate::units::NANOS_PER_SEC;
use crate::{DropReason, Instant, Packet, Policer, Verdict};
use std::collections::VecDeque;
use std::sync::Arc;

/// One flow's burst control (A'_i is not kept: only `priority` needs it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowBurst {
    /// Magic nano-bytes, clamped to the occupancy when the queue is touched.
    pub magic_nb: u64,
    /// Bytes accepted in the current window (A_i).
    pub accepted: u64,
    /// When the current window ends (ns); 0: none running.
    pub window_end: u64,
}

/// θ+·X_i and θ−·X_i as whole-byte thresholds for one count n of non-empty queues. For whole
/// bytes A, A·2¹⁶·10⁹ > θ+·X ⟺ A > ⌊θ+·X / (2¹⁶·10⁹)⌋ and A·2¹⁶·10⁹ < θ−·X ⟺
/// A < ⌈θ−·X / (2¹⁶·10⁹)⌉, so the tests take one comparison instead of a 128-bit product, and
/// the division X_i = ⌊r·T / n⌋ runs only when n has changed (at activations and emptyings, not
/// at every accepted packet).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Thresholds {
    /// The n they were taken at; 0: none yet (n counts at least 1).
    pub(crate) n: usize,
    /// Fill with magic when A_i exceeds this.
    pub(crate) fill_above: u64,
    /// Remove magic when A_i is below this.
    pub(crate) remove_below: u64,
}

impl Thresholds {
    fn at(burst: &BurstParams, n: usize) -> Self {
        Self::of_share(burst, burst.window_budget_nb, n)
    }

    /// For X_i = ⌊share / n⌋, `share` the nano-bytes the policy gives the n queues' parent per T.
    pub(crate) fn of_share(burst: &BurstParams, share: u64, n: usize) -> Self {
        let x = (share / n as u64) as u128;
        let unit = THETA_ONE as u128 * NANOS_PER_SEC as u128;
        let bytes = |theta: u64, round_up: u128| ((theta as u128 * x + round_up) / unit).min(u64::MAX as u128) as u64;
        Thresholds { n, fill_above: bytes(burst.theta_plus, 0), remove_below: bytes(burst.theta_minus, unit - 1) }
    }
}

/// One aggregate's BC-PQP over exact flow queues.
#[derive(Debug, Clone)]
pub struct FlowBcPqp {
    core: FlowPqp<FlowBurst>,
    burst: Arc<BurstParams>,
    /// (window end, slot) of every window started, in order of end.
    windows: VecDeque<(u64, u32)>,
    /// The end of `windows`' front entry (u64::MAX with none): every arrival tests it, and a
    /// field is cheaper to read than the deque's front.
    next_end: u64,
    thresholds: Thresholds,
    burst_fills: u64,
    magic_removals: u64,
}

impl FlowBcPqp {
    pub fn new(cfg: &BcPqpConfig) -> Self {
        let burst = Arc::new(BurstParams::of(cfg));
        FlowBcPqp { core: FlowPqp::new(&cfg.pqp()), burst, windows: VecDeque::new(), next_end: u64::MAX, thresholds: Thresholds::default(), burst_fills: 0, magic_removals: 0 }
    }

    pub fn core(&self) -> &FlowPqp<FlowBurst> {
        &self.core
    }

    /// How many times a queue was filled with magic, and how many times magic was removed.
    pub fn burst_events(&self) -> (u64, u64) {
        (self.burst_fills, self.magic_removals)
    }

    pub fn memory_bytes(&self) -> usize {
        self.core.memory_bytes() + self.windows.capacity() * std::mem::size_of::<(u64, u32)>()
    }

    /// Magic nano-bytes still in `flow`'s queue: min(M_i, L_i).
    pub fn flow_magic_nb(&self, flow: u64) -> u64 {
        let q = &self.core.queues;
        q.slot_of_flow(flow).map_or(0, |s| q.data(s).magic_nb.min(q.occupancy(s)))
    }

    /// Σ over flows of min(M_i, L_i), nano-bytes (inspection: walks every slot holding magic).
    pub fn magic_backlog_nb(&self) -> u128 {
        let q = &self.core.queues;
        // A queue restarted twice at one instant has two live entries: count it once.
        let live: std::collections::BTreeSet<u32> =
            self.windows.iter().filter(|&&(end, s)| q.data(s as usize).window_end == end).map(|&(_, s)| s).collect();
        live.into_iter().map(|s| self.magic_of(s as usize) as u128).sum()
    }

    /// Window FIFO entries (stale ones included: fewer than the windows started in the last T).
    pub fn window_entries(&self) -> usize {
        self.windows.len()
    }

    fn magic_of(&self, s: usize) -> u64 {
        self.core.queues.data(s).magic_nb.min(self.core.queues.occupancy(s))
    }

    /// The θ± thresholds for X_i = ⌊r·T / n⌋, n the non-empty queues, queue `s` counted (it is
    /// non-empty when asked).
    #[inline(always)]
    fn thresholds(&mut self) -> Thresholds {
        let n = self.core.queues.active().max(1);
        if self.thresholds.n != n {
            self.thresholds = Thresholds::at(&self.burst, n);
        }
        self.thresholds
    }

    /// Restarts queue `s`'s window at `t`.
    fn restart_window(&mut self, s: usize, t: u64) {
        let end = t.saturating_add(self.burst.window.0);
        let d = self.core.queues.data_mut(s);
        d.accepted = 0;
        d.window_end = end;
        // A fill right after the window's start at the same instant needs no second entry.
        if self.windows.back() != Some(&(end, s as u32)) {
            if self.windows.is_empty() {
                self.next_end = end;
            }
            self.windows.push_back((end, s as u32));
        }
    }

    /// Ends queue `s`'s window at `t`: removes its magic if it accepted less than θ−·X_i.
    /// Inline: the due-window loop runs it for every flow holding magic, once per window.
    #[inline]
    fn close_window(&mut self, s: usize, t: u64) {
        let magic = self.core.clamp_magic(s);
        if magic > 0 {
            let accepted = self.core.queues.data(s).accepted;
            if accepted < self.thresholds().remove_below {
                // A queue emptied here stays allocated: its new window runs.
                self.core.queues.remove(s, magic);
                self.core.queues.data_mut(s).magic_nb = 0;
                self.magic_removals += 1;
            }
        }
        self.restart_window(s, t);
    }

    /// Handles the windows due at `t`: closes those holding magic, reclaims drained flows.
    #[inline(always)]
    fn close_due_windows(&mut self, t: u64) {
        if self.next_end <= t {
            self.close_windows_due_now(t);
        }
    }

    /// Out of line: most arrivals find no window due, and keeping this loop out of
    /// `on_arrival` spares that path registers.
    #[inline(never)]
    fn close_windows_due_now(&mut self, t: u64) {
        while self.windows.front().is_some_and(|&(end, _)| end <= t) {
            self.close_front_window(t);
        }
        self.next_end = self.windows.front().map_or(u64::MAX, |&(end, _)| end);
    }

    /// Closes up to [`CATCH_UP_WINDOWS`] windows that ended by `now` each at its own end, after
    /// the phantom service up to that instant (see [`crate::bcpqp`]). Entries left behind by a
    /// fill or a reclaim are dropped without counting: the tc-BPF list never holds them.
    #[inline(never)]
    fn close_windows_at_their_ends(&mut self, now: u64) {
        let mut closed = 0;
        while closed < CATCH_UP_WINDOWS {
            let Some(&(end, s)) = self.windows.front() else { break };
            if end > now {
                break;
            }
            if self.core.queues.data(s as usize).window_end != end {
                self.windows.pop_front();
                continue;
            }
            self.serve_until(Instant(end));
            let t = self.core.last().0;
            self.close_front_window(t);
            closed += 1;
        }
        self.next_end = self.windows.front().map_or(u64::MAX, |&(end, _)| end);
    }

    /// The phantom service up to `t`. A drained queue outlives its flow's silence only while its
    /// window runs (service is handed out only when `t` is past the last arrival, so `t` is the
    /// time here).
    #[inline(always)]
    fn serve_until(&mut self, t: Instant) {
        self.core.advance(t, &mut |d: &mut FlowBurst| {
            d.magic_nb = 0;
            t.0 >= d.window_end
        });
    }

    /// The window FIFO's first entry, due at `t`: closes it if it holds magic, reclaims a
    /// drained flow, or drops the entry.
    #[inline(always)]
    fn close_front_window(&mut self, t: u64) {
        let Some((end, s)) = self.windows.pop_front() else { return };
        let s = s as usize;
        if self.core.queues.data(s).window_end != end {
            return; // restarted by a fill, or the slot was reclaimed
        }
        if self.core.clamp_magic(s) > 0 {
            self.close_window(s, t);
        } else if self.core.queues.occupancy(s) == 0 {
            self.core.queues.reclaim(s);
        }
        // Otherwise the window closes at the flow's next arrival, and the flow is reclaimed
        // when its queue drains (the window has ended by then).
    }

    /// Fills queue `s` with magic up to B and restarts its window (000 §4).
    fn fill_with_magic(&mut self, s: usize, t: u64) {
        self.core.fill_with_magic(s);
        self.burst_fills += 1;
        self.restart_window(s, t);
    }
}

/// The per-flow half of burst control, shared with the flows of a class ([`crate::bcpqp_class_flows`]).
impl FlowPqp<FlowBurst> {
    /// Slot `s`'s magic, clamped to its occupancy (and stored so: magic drains last).
    #[inline(always)]
    pub(crate) fn clamp_magic(&mut self, s: usize) -> u64 {
        let occupancy = self.queues.occupancy(s);
        let d = self.queues.data_mut(s);
        d.magic_nb = d.magic_nb.min(occupancy);
        d.magic_nb
    }

    /// Fills slot `s` with magic up to B (000 §4); the nano-bytes added. The window is the owner's.
    pub(crate) fn fill_with_magic(&mut self, s: usize) -> u64 {
        let magic = self.queue_size_nb() - self.queues.occupancy(s);
        self.queues.add(s, magic);
        self.queues.data_mut(s).magic_nb = magic;
        magic
    }

    /// PQP's admission of `len` bytes into queue `s` with BC-PQP's drop reason, unless the
    /// queue's window has ended by `t` (None: nothing done). Also returns M_i (clamped) and A_i
    /// after the packet, for the θ+ test once the packet is in.
    #[inline(always)]
    pub(crate) fn admit_in_window(&mut self, s: usize, t: u64, len: u64) -> Option<(Verdict, u64, u64)> {
        let size = self.queue_size_nb();
        let mut burst = (0, 0);
        let verdict = self.admit(s, len, |occupancy, d, fits| {
            if t >= d.window_end {
                return None;
            }
            // Lazy clamp: magic drains last, so at most the occupancy is still magic.
            let magic = d.magic_nb.min(occupancy);
            d.magic_nb = magic;
            d.accepted += if fits { len } else { 0 };
            burst = (magic, d.accepted);
            // occupancy ≤ B: no wrap.
            let room_without_magic = len * NANOS_PER_SEC <= size - (occupancy - magic);
            Some(if room_without_magic { DropReason::BurstControl } else { DropReason::Overlimit })
        })?;
        Some((verdict, burst.0, burst.1))
    }
}

impl Policer for FlowBcPqp {
    // Inlined into the caller's loop (as `FlowPqp`'s): the call and its register saves were
    // 16 of ~180 instructions per packet; the rare paths stay out of line.
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        if self.next_end <= now.0 {
            self.close_windows_at_their_ends(now.0);
        }
        self.serve_until(now);
        // A clock that steps back is taken as not moving.
        let t = self.core.last().0;
        self.close_due_windows(t);
        let s = self.core.queues.slot(pkt.flow);
        let (verdict, magic, accepted) = loop {
            if let Some(admitted) = self.core.admit_in_window(s, t, pkt.len as u64) {
                break admitted;
            }
            // Its window has ended: close it, then the packet counts in the new one.
            self.close_window(s, t);
        };
        if verdict.is_pass() && magic == 0 && accepted > self.thresholds().fill_above {
            self.fill_with_magic(s, t);
        }
        verdict
    }
}
