//! BC-PQP: PQP with magic-packet burst control (000 §4, algorithms.md §3).
//!
//! Per queue Q_i, on top of PQP: bytes accepted in the queue's current window A_i, magic bytes
//! M_i, and the window's end. With X_i = r_i*·T, the bytes the policy would serve Q_i over a
//! window if the current set of non-empty queues stayed as it is:
//! - after accepting a packet, if A_i > θ+·X_i and Q_i holds no magic: fill the queue,
//!   M_i = B − L_i, L_i = B, and start a new window (the slow-start burst ends here);
//! - when Q_i's window has run out: if it holds magic and A_i < θ−·X_i, remove the magic still
//!   queued (M_i ≤ L_i always, see below), then start a new window.
//!
//! Decisions on algorithms.md §3's open points (argued in docs/bcpqp.md):
//! - "active" = the phantom queue is non-empty (magic included), plus Q_i itself while it is
//!   being decided on; the same set the phantom service uses.
//! - Windows are per queue and start at the queue's first arrival after the previous window
//!   ended (not aligned), as in the authors' code. A window of a queue that holds magic closes
//!   at its own end, whether or not a packet arrives then: the next arrival to the aggregate
//!   replays the phantom service up to each such end and closes the window there (a window
//!   that keeps its magic restarts at that end). So a flow that stopped loses its magic one
//!   window after its last packet, not at whatever packet comes next, and the service the magic
//!   would have taken meanwhile goes to the others (a class starved by `priority` takes over
//!   the moment the higher class's last real phantom byte leaves). At most
//!   [`CATCH_UP_WINDOWS`] ends are replayed per arrival; later ones close at the arrival.
//! - Magic drains last: it is the tail of the queue, behind every real byte, so the magic still
//!   queued is min(M_i, L_i) and removal reclaims as much as the paper's footnote 7 allows.
//! - r_i* under `priority`: a higher-priority branch is charged what it actually uses, its
//!   queues' accepted bytes per window (max of the running and the last full window; zero
//!   once a queue has been silent for a whole window), whether or not its phantom queue
//!   happens to be empty at that instant. The paper's literal "r if highest active, else 0"
//!   flips X_i between 0 and r·T with every higher-priority packet, so a lower class would be
//!   filled with magic by chance and could never shed it (A_i < θ−·0 is impossible).
//!   The θ− test alone takes the literal rule while a higher branch holds phantom backlog
//!   (X_i = 0, the magic stays): there the demand rule let starved classes shed their magic on
//!   Poisson dips of the higher classes' demand and pass bytes never served.
//!
//! Integer data path: θ± are applied as ⌊θ·2¹⁶⌉/2¹⁶ and compared in 128-bit products.

use crate::validate::ConfigError;
use crate::pqp::{FlowQueuing, Pqp, PqpConfig, PqpParams, PqpStats, MAX_QUEUES};
use crate::units::NANOS_PER_SEC;
use crate::{Bytes, Classify, DropReason, Duration, Instant, Packet, Policer, Rate, Verdict};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Window ends per arrival that are closed at their own instant (the rest close at the arrival):
/// bounds the work a packet after a long silence does, here and in the tc-BPF programs. Not
/// reached in practice: a window ends again only while its queue keeps its magic, i.e. while a
/// higher-priority queue still drains its phantom backlog (at most B/r), so a silence costs at
/// most one turn per window phase per T of that drain, plus one per queue or flow.
pub const CATCH_UP_WINDOWS: u32 = 1024;

/// Fixed-point scale of θ±.
pub const THETA_ONE: u64 = 1 << 16;
/// Largest θ accepted (keeps θ·2¹⁶ well inside u32).
pub const MAX_THETA: f64 = 1000.0;

fn default_queues() -> u32 {
    16
}
fn default_policy() -> String {
    "fair".to_string()
}
fn default_theta_plus() -> f64 {
    1.5
}
fn default_theta_minus() -> f64 {
    0.5
}
fn default_window() -> Duration {
    Duration::from_millis(100)
}

/// `kind = "bcpqp"`: the PQP fields (same meaning, same defaults) plus burst control.
/// (Repeated rather than `#[serde(flatten)]`ed, because serde cannot deny unknown fields
/// through a flatten.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BcPqpConfig {
    pub rate: Rate,
    #[serde(default = "default_queues")]
    pub queues: u32,
    /// Size B of each phantom queue. 000 §6.1 uses ≥ 10 × BDP²/18·MSS; §4 suggests ≥ 2×.
    pub queue_size: Bytes,
    #[serde(default)]
    pub classify: Classify,
    #[serde(default = "default_policy")]
    pub policy: String,
    #[serde(default)]
    pub weights: Option<Vec<u32>>,
    #[serde(default)]
    pub flows: FlowQueuing,
    #[serde(default)]
    pub max_flows: Option<u32>,
    #[serde(default)]
    pub fair_classes: Option<Vec<u32>>,
    /// θ+: magic fills a queue that accepted more than θ+·X_i in a window. Default 1.5 (000 §4,
    /// the upper end of Reno's steady-state rate, 4r/3, rounded up).
    #[serde(default = "default_theta_plus")]
    pub theta_plus: f64,
    /// θ−: magic is removed once a window accepted less than θ−·X_i. Default 0.5 (000 §4).
    #[serde(default = "default_theta_minus")]
    pub theta_minus: f64,
    /// T, the window: the tail RTT. Default 100 ms (000 §4; the authors' code used 200 ms).
    #[serde(default = "default_window")]
    pub window: Duration,
}

impl BcPqpConfig {
    /// The phantom-queue part of this config.
    pub fn pqp(&self) -> PqpConfig {
        PqpConfig {
            rate: self.rate,
            queues: self.queues,
            queue_size: self.queue_size,
            classify: self.classify,
            policy: self.policy.clone(),
            weights: self.weights.clone(),
            flows: self.flows,
            max_flows: self.max_flows,
            fair_classes: self.fair_classes.clone(),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.pqp().validate()?;
        let theta = |name: &str, v: f64, min: f64| {
            if !v.is_finite() || v < min || v > MAX_THETA {
                Err(ConfigError::new(name, format!("must be a number in [{min}, {MAX_THETA}], got {v}")))
            } else {
                Ok(())
            }
        };
        theta("theta_plus", self.theta_plus, f64::MIN_POSITIVE)?;
        theta("theta_minus", self.theta_minus, 0.0)?;
        if self.theta_minus >= self.theta_plus {
            return Err(ConfigError::new("theta_minus", "must be smaller than theta_plus"));
        }
        if self.window.0 == 0 {
            return Err(ConfigError::new("window", "must be greater than zero"));
        }
        if self.rate.0.checked_mul(self.window.0).is_none() {
            return Err(ConfigError::new("window", "rate × window exceeds 18 GB; use a shorter window"));
        }
        Ok(())
    }
}

fn fixed_theta(v: f64) -> u64 {
    (v * THETA_ONE as f64).round() as u64
}

/// Burst-control parameters shared by every aggregate with the same config.
#[derive(Debug, Clone)]
pub struct BurstParams {
    /// θ+ · 2¹⁶.
    pub theta_plus: u64,
    /// θ− · 2¹⁶.
    pub theta_minus: u64,
    pub window: Duration,
    /// r·T in nano-bytes: the budget split by the policy to get X_i.
    pub window_budget_nb: u64,
    /// Per queue: while A_i is at most this many bytes, A_i > θ+·X_i is impossible whatever
    /// the active set (θ+ times the policy's floor on X_i), so the test is skipped.
    pub theta_plus_floor: Box<[u64]>,
}

impl BurstParams {
    /// From a config (validated here), without the per-queue θ+ floors.
    pub fn of(cfg: &BcPqpConfig) -> Self {
        cfg.validate().expect("BcPqpConfig must be validated before use");
        BurstParams {
            theta_plus: fixed_theta(cfg.theta_plus),
            theta_minus: fixed_theta(cfg.theta_minus),
            window: cfg.window,
            window_budget_nb: cfg.rate.credit(cfg.window),
            theta_plus_floor: Box::default(),
        }
    }

    /// A·2¹⁶·10⁹ vs θ·X, exact in 128 bits.
    pub(crate) fn compare(accepted: u64, theta: u64, x_nb: u64) -> std::cmp::Ordering {
        let lhs = accepted as u128 * THETA_ONE as u128 * NANOS_PER_SEC as u128;
        lhs.cmp(&(theta as u128 * x_nb as u128))
    }
}

/// One queue's burst-control state (32 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BurstState {
    /// Magic nano-bytes still queued (≤ the queue's occupancy).
    pub magic_nb: u64,
    /// Bytes accepted in the current window (A_i).
    pub accepted: u64,
    /// Bytes accepted in the previous window (its demand, for r_i* under priority).
    pub accepted_prev: u64,
    /// When the current window ends (ns); 0: no window running.
    pub window_end: u64,
}

impl BurstState {
    /// The queue's demand per window at `t`, nano-bytes (r_i* under `priority`): its running
    /// window or the last full one, whichever is larger; only the last full one once the running
    /// one has ended; nothing once a whole window has passed without an arrival.
    #[inline(always)]
    pub(crate) fn demand_nb(&self, t: u64, window: u64) -> u64 {
        let bytes = if t < self.window_end {
            self.accepted.max(self.accepted_prev)
        } else if t < self.window_end.saturating_add(window) {
            self.accepted
        } else {
            0
        };
        bytes.saturating_mul(NANOS_PER_SEC)
    }

    /// Starts a new window at `now` (the magic is the caller's).
    #[inline(always)]
    pub(crate) fn restart_window(&mut self, now: u64, window: u64) {
        // A window that ended a whole window ago was idle: its successor accepted nothing.
        self.accepted_prev = if now < self.window_end.saturating_add(window) { self.accepted } else { 0 };
        self.accepted = 0;
        self.window_end = now.saturating_add(window);
    }
}

/// The queues that may hold magic (every queue that holds some, and perhaps some whose magic
/// was served since), in the order their windows end: a FIFO ring of queue ids in the spare
/// tail of the burst-state block. A window (re)starts at `now + T` with `now` non-decreasing
/// and T fixed, so a queue added at every restart goes to the back, and the windows due at
/// `now` are a prefix of the ring. Layout: first entry and length (u16 each), then the ids.
struct WindowOrder<'a, T> {
    /// [first entry's slot, length].
    header: &'a mut [u16],
    ids: &'a mut [T],
}

/// A queue id in the [`WindowOrder`] ring: one byte for up to 256 queues, else two.
trait QueueId: bytemuck::Pod {
    fn of_queue(q: usize) -> Self;
    fn queue(self) -> usize;
}

macro_rules! queue_id {
    ($($t:ty),*) => {$(
        impl QueueId for $t {
            #[inline(always)]
            fn of_queue(q: usize) -> Self {
                q as $t
            }
            #[inline(always)]
            fn queue(self) -> usize {
                self as usize
            }
        }
    )*};
}
queue_id!(u8, u16);

/// Burst-state elements that the ring of `queues` ids takes.
fn window_order_elements(queues: usize) -> usize {
    let id_bytes = if queues <= 256 { 1 } else { 2 };
    (4 + queues * id_bytes).div_ceil(std::mem::size_of::<BurstState>())
}

impl<'a, T: QueueId> WindowOrder<'a, T> {
    #[inline(always)]
    fn of(tail: &'a mut [BurstState], queues: usize) -> Self {
        let (header, ids) = bytemuck::cast_slice_mut::<_, u16>(tail).split_at_mut(2);
        WindowOrder { header, ids: &mut bytemuck::cast_slice_mut(ids)[..queues] }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.header[1] as usize
    }

    /// The slot of the `i`-th id from the front.
    #[inline(always)]
    fn slot(&self, i: usize) -> usize {
        let at = self.header[0] as usize + i;
        if at >= self.ids.len() { at - self.ids.len() } else { at }
    }

    #[inline(always)]
    fn get(&self, i: usize) -> usize {
        self.ids[self.slot(i)].queue()
    }

    #[inline(always)]
    fn put(&mut self, i: usize, q: usize) {
        let slot = self.slot(i);
        self.ids[slot] = T::of_queue(q);
    }

    #[inline(always)]
    fn front(&self) -> Option<usize> {
        (self.len() > 0).then(|| self.get(0))
    }

    #[inline(always)]
    fn pop_front(&mut self) {
        self.header[0] = self.slot(1) as u16;
        self.header[1] -= 1;
    }

    /// Adds `q` (not in the ring, so there is room) behind every queue whose window ends no
    /// later than its own: the back, unless the clock stepped back.
    #[inline(always)]
    fn insert(&mut self, state: &[BurstState], q: usize) {
        let len = self.len();
        debug_assert!(len < self.ids.len());
        let end = state[q].window_end;
        let mut i = len;
        while i > 0 && state[self.get(i - 1)].window_end > end {
            let later = self.get(i - 1);
            self.put(i, later);
            i -= 1;
        }
        self.put(i, q);
        self.header[1] += 1;
    }

    /// Takes `q` out wherever it is (closing the gap keeps the others' order).
    fn remove(&mut self, q: usize) {
        let len = self.len();
        if let Some(i) = (0..len).find(|&i| self.get(i) == q) {
            for j in i..len - 1 {
                let next = self.get(j + 1);
                self.put(j, next);
            }
            self.header[1] -= 1;
        }
    }
}

/// One aggregate's BC-PQP.
#[derive(Debug, Clone)]
pub struct BcPqp {
    core: Pqp,
    burst: Arc<BurstParams>,
    /// One [`BurstState`] per queue, then the [`WindowOrder`] ring in the block's tail.
    state: Box<[BurstState]>,
    /// Earliest window end among queues that may hold magic, the ring's first (u64::MAX: none).
    magic_deadline: u64,
    /// Bit q mod 64 is set if queue q may hold magic (a superset, exact up to 64 queues: the
    /// queues in the ring): service skips the burst state of queues that cannot hold any, so a
    /// packet does not pull every queue's state into the cache.
    magic_queues: u64,
    burst_fills: u64,
    magic_removals: u64,
}

impl BcPqp {
    pub fn new(cfg: &BcPqpConfig) -> Self {
        let mut burst = BurstParams::of(cfg);
        let params = PqpParams::new(&cfg.pqp());
        // A·2¹⁶·10⁹ ≤ θ+·X_floor ≤ θ+·X  ⇐  A ≤ ⌊θ+·X_floor / (2¹⁶·10⁹)⌋.
        burst.theta_plus_floor = (0..params.queues)
            .map(|q| {
                let x = params.policy.share_floor(q, burst.window_budget_nb) as u128;
                (burst.theta_plus as u128 * x / (THETA_ONE as u128 * NANOS_PER_SEC as u128)) as u64
            })
            .collect();
        Self::with_params(Arc::new(params), Arc::new(burst))
    }

    /// A fresh aggregate sharing the parameters (cheap: multi-aggregate containers use this).
    pub fn with_params(params: Arc<PqpParams>, burst: Arc<BurstParams>) -> Self {
        let n = params.queues;
        BcPqp {
            core: Pqp::with_params(params),
            burst,
            state: vec![BurstState::default(); n + window_order_elements(n)].into_boxed_slice(),
            magic_deadline: u64::MAX,
            magic_queues: 0,
            burst_fills: 0,
            magic_removals: 0,
        }
    }

    pub fn params(&self) -> (&Arc<PqpParams>, &Arc<BurstParams>) {
        (self.core.params(), &self.burst)
    }

    pub fn stats(&self) -> PqpStats {
        self.core.stats()
    }

    /// How many times a queue was filled with magic, and how many times magic was removed.
    pub fn burst_events(&self) -> (u64, u64) {
        (self.burst_fills, self.magic_removals)
    }

    /// Memory of one aggregate: the struct plus its heap (the shared params not counted).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.core.queues.heap_bytes() + std::mem::size_of_val(&*self.state)
    }

    /// Occupancy L_i of queue `q` in nano-bytes (magic included), as of the last arrival.
    #[inline]
    pub fn occupancy_nb(&self, q: usize) -> u64 {
        self.core.occupancy_nb(q)
    }

    /// Magic nano-bytes still in queue `q`: magic drains last, so min(M_i, L_i).
    #[inline(always)]
    pub fn magic_nb(&self, q: usize) -> u64 {
        self.state[q].magic_nb.min(self.core.occupancy_nb(q))
    }

    /// Burst-control state of queue `q`, as of the last arrival (`magic_nb` as stored: use
    /// [`Self::magic_nb`] for what is left of it).
    pub fn burst_state(&self, q: usize) -> BurstState {
        self.state[..self.core.params().queues][q]
    }

    /// The window-end ring, and the queues' states it is ordered by.
    #[inline(always)]
    fn window_order<T: QueueId>(&mut self) -> (&mut [BurstState], WindowOrder<'_, T>) {
        let n = self.core.params().queues;
        let (state, tail) = self.state.split_at_mut(n);
        (state, WindowOrder::of(tail, n))
    }

    pub fn queue_of(&self, pkt: &Packet) -> usize {
        self.core.queue_of(pkt)
    }

    /// X_i = r_i*·T in nano-bytes for queue `q`, given the queues non-empty at `now` and (under
    /// `priority`) what the higher-priority queues accepted per window lately.
    #[inline]
    pub fn expected_window_nb(&self, q: usize, now: Instant) -> u64 {
        let (state, t, window) = (&self.state, now.0, self.burst.window.0);
        let demand = |j: usize| state[j].demand_nb(t, window);
        let p = self.core.params();
        self.core.queues.expected_share(&p.policy, q, self.burst.window_budget_nb, &demand)
    }

    /// Ends queue `q`'s window at `now`: removes its magic if it accepted less than θ−·X_i.
    /// For this test X_i is 0 while a higher-priority branch holds phantom backlog (the policy
    /// serves Q_i nothing then), so the magic of a starved class stays: removing it would
    /// admit bytes the phantom service never serves (docs/bcpqp.md, "Priority and the θ− test").
    #[inline(never)]
    fn close_window(&mut self, q: usize, now: u64) {
        self.close_window_inline(q, now)
    }

    /// [`Self::close_window`], inlined into the close of due magic windows (the common case
    /// there: one queue, which keeps its magic).
    #[inline(always)]
    fn close_window_inline(&mut self, q: usize, now: u64) {
        // Most windows end without magic (every queue's first window, for one): no L_i needed.
        let magic = if self.state[q].magic_nb == 0 { 0 } else { self.magic_nb(q) };
        if magic > 0 && !self.core.queues.outranked(&self.core.params().policy, q) {
            let x = self.expected_window_nb(q, Instant(now));
            if BurstParams::compare(self.state[q].accepted, self.burst.theta_minus, x).is_lt() {
                let params = Arc::clone(self.core.params());
                let state = &mut self.state;
                self.core.queues.remove(&params.policy, q, magic, &mut clamp_magic(state, self.magic_queues));
                self.state[q].magic_nb = 0;
                self.magic_removals += 1;
            }
        }
        self.state[q].restart_window(now, self.burst.window.0);
    }

    /// Closes the magic windows that ended by `t` each at its own end, after the phantom service
    /// up to that instant, for up to [`CATCH_UP_WINDOWS`] distinct ends (the rest close at `t`).
    #[inline(never)]
    fn close_magic_windows_at_their_ends(&mut self, t: u64) {
        for _ in 0..CATCH_UP_WINDOWS {
            let due = self.magic_deadline;
            if due > t {
                break;
            }
            self.core.advance(Instant(due), &mut clamp_magic(&mut self.state, self.magic_queues));
            self.close_magic_windows(due);
        }
    }

    /// Closes the run-out windows of every queue holding magic, in queue order (once per
    /// window of each such queue). The due windows are the ring's prefix; they are closed in
    /// queue order, not in the ring's, because a removal changes the active set that the next
    /// queues' θ− tests see at this same instant. The stored M_i may exceed what is left
    /// (min(M_i, L_i)); a queue whose magic was all served leaves the ring when its window is due.
    #[inline(never)]
    fn close_magic_windows(&mut self, now: u64) {
        if self.core.params().queues > 64 {
            return self.close_magic_windows_of_many(now);
        }
        // Up to 64 queues: queue order is bit order, and the summary is exact.
        let mut due = [0u64];
        // The ring's first end once done: the first one not due, or a queue put back.
        let mut earliest = self.pop_due_windows::<u8>(now, &mut due);
        let [mut due] = due;
        while due != 0 {
            let q = due.trailing_zeros() as usize;
            due &= due - 1;
            if self.close_due_window::<u8>(q, now) {
                earliest = earliest.min(self.state[q].window_end);
            } else {
                self.magic_queues &= !(1 << q);
            }
        }
        debug_assert_eq!(earliest, self.earliest_magic_window_end::<u8>());
        self.magic_deadline = earliest;
    }

    /// [`Self::close_magic_windows`] for more than 64 queues: the due queues in a bit set of
    /// every queue, and the summary (which aliases queues 64 apart) rebuilt from the ring.
    #[inline(never)]
    fn close_magic_windows_of_many(&mut self, now: u64) {
        if self.core.params().queues <= 256 {
            self.close_due_windows_of_many::<u8>(now)
        } else {
            self.close_due_windows_of_many::<u16>(now)
        }
    }

    fn close_due_windows_of_many<T: QueueId>(&mut self, now: u64) {
        let mut due = [0u64; MAX_QUEUES as usize / 64];
        self.pop_due_windows::<T>(now, &mut due);
        for (word, &bits) in due.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let q = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.close_due_window::<T>(q, now);
            }
        }
        let (_, order) = self.window_order::<T>();
        self.magic_queues = (0..order.len()).fold(0, |bits, i| bits | 1 << (order.get(i) & 63));
        self.magic_deadline = self.earliest_magic_window_end::<T>();
    }

    /// Takes the queues whose windows are due at `now` (the ring's prefix) off the ring into the
    /// bit set `due`; returns the window end of the first queue left (u64::MAX if none).
    #[inline(always)]
    fn pop_due_windows<T: QueueId>(&mut self, now: u64, due: &mut [u64]) -> u64 {
        let (state, mut order) = self.window_order::<T>();
        while let Some(q) = order.front() {
            if state[q].window_end > now {
                return state[q].window_end;
            }
            order.pop_front();
            due[q / 64] |= 1 << (q % 64);
        }
        u64::MAX
    }

    /// Closes the due window of queue `q`, just taken off the ring, if it holds magic, and puts
    /// it back if it still does (its window now ends last). Whether it is back.
    #[inline(always)]
    fn close_due_window<T: QueueId>(&mut self, q: usize, now: u64) -> bool {
        if self.state[q].magic_nb > 0 {
            self.close_window_inline(q, now);
        }
        let holds_magic = self.state[q].magic_nb > 0;
        if holds_magic {
            let (state, mut order) = self.window_order::<T>();
            order.insert(state, q);
        }
        holds_magic
    }

    /// The window end of the ring's first queue (u64::MAX if the ring is empty).
    #[inline(always)]
    fn earliest_magic_window_end<T: QueueId>(&mut self) -> u64 {
        let (state, order) = self.window_order::<T>();
        order.front().map_or(u64::MAX, |q| state[q].window_end)
    }

    /// The θ+ test of an accepted packet to queue `q`, which holds no magic: fills it if its
    /// window accepted more than θ+·X_i.
    #[inline(never)]
    fn check_theta_plus(&mut self, q: usize, t: u64) {
        let x = self.expected_window_nb(q, Instant(t));
        if BurstParams::compare(self.state[q].accepted, self.burst.theta_plus, x).is_gt() {
            self.fill_with_magic(q, t);
        }
    }

    /// Fills queue `q` with magic up to B and restarts its window (000 §4).
    fn fill_with_magic(&mut self, q: usize, now: u64) {
        let magic = self.core.params().queue_size_nb - self.core.occupancy_nb(q);
        let params = Arc::clone(self.core.params());
        let state = &mut self.state;
        self.core.queues.add(&params.policy, q, magic, &mut clamp_magic(state, self.magic_queues));
        self.burst_fills += 1;
        let st = &mut self.state[q];
        st.magic_nb = magic;
        st.accepted_prev = st.accepted;
        st.accepted = 0;
        st.window_end = now.saturating_add(self.burst.window.0);
        // Its window end moves: a queue still in the ring (its magic was served) moves with it.
        if self.core.params().queues <= 256 {
            self.reorder_filled::<u8>(q, magic > 0)
        } else {
            self.reorder_filled::<u16>(q, magic > 0)
        }
    }

    /// [`Self::fill_with_magic`]'s ring update for queue `q`, whose window just restarted.
    fn reorder_filled<T: QueueId>(&mut self, q: usize, holds_magic: bool) {
        let bit = 1 << (q & 63);
        let listed = self.magic_queues & bit != 0;
        let (state, mut order) = self.window_order::<T>();
        if listed {
            order.remove(q);
        }
        if holds_magic {
            order.insert(state, q);
            self.magic_queues |= bit;
        } else if self.core.params().queues <= 64 {
            // Keeps the summary exact: it was the ring's only mark of `q`.
            self.magic_queues &= !bit;
        }
        self.magic_deadline = self.earliest_magic_window_end::<T>();
    }
}

/// Magic drains last: when service leaves a queue with `occ` nano-bytes, at most that much of
/// it can still be magic. Queues outside `may_hold` (see `BcPqp::magic_queues`) hold none.
fn clamp_magic(state: &mut [BurstState], may_hold: u64) -> impl FnMut(usize, u64) + '_ {
    #[inline(always)]
    move |q, occ| {
        if may_hold & (1 << (q & 63)) != 0 {
            let m = &mut state[q].magic_nb;
            *m = (*m).min(occ);
        }
    }
}

impl Policer for BcPqp {
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let q = self.core.queue_of(pkt);
        let t = now.0;
        if t >= self.magic_deadline {
            self.close_magic_windows_at_their_ends(t);
        }
        self.core.advance(now, &mut clamp_magic(&mut self.state, self.magic_queues));
        if t >= self.magic_deadline {
            self.close_magic_windows(t);
        }
        if t >= self.state[q].window_end {
            self.close_window(q, t);
        }
        let len = pkt.len as u64;
        let occupancy = self.core.occupancy_nb(q);
        let magic = self.state[q].magic_nb.min(occupancy);
        let size = self.core.params().queue_size_nb;
        let reason = || {
            let room_without_magic = (occupancy - magic).saturating_add(len * NANOS_PER_SEC) <= size;
            if room_without_magic { DropReason::BurstControl } else { DropReason::Overlimit }
        };
        let verdict = self.core.admit(q, occupancy, len, reason, &mut clamp_magic(&mut self.state, self.magic_queues));
        if verdict.is_pass() {
            let st = &mut self.state[q];
            st.accepted += len;
            if magic == 0 && st.accepted > self.burst.theta_plus_floor[q] {
                self.check_theta_plus(q, t);
            }
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EnforcerConfig;

    fn cfg(extra: &str) -> BcPqpConfig {
        let text = format!("kind = \"bcpqp\"\nrate = \"8mbit\"\nqueue_size = \"1mb\"\n{extra}");
        match EnforcerConfig::from_toml(&text).unwrap() {
            EnforcerConfig::Bcpqp(c) => c,
            _ => unreachable!(),
        }
    }

    #[test]
    fn defaults_are_the_papers() {
        let c = cfg("");
        assert_eq!((c.theta_plus, c.theta_minus, c.window), (1.5, 0.5, Duration::from_millis(100)));
        assert_eq!((c.queues, c.policy.as_str(), c.classify), (16, "fair", Classify::Flow));
        let b = BcPqp::new(&c);
        assert_eq!(b.burst.theta_plus, 98_304);
        assert_eq!(b.burst.window_budget_nb, 100_000 * NANOS_PER_SEC);
    }

    #[test]
    fn memory_per_aggregate_is_small() {
        // 16 flat queues: 8 B occupancy + 2 B active slot + 32 B burst state per queue, one
        // 24 B inner node (the phantom block rounded up to 192 B), the window-end ring (one
        // 32 B element), and the structs (144 B): 880 B, so 1,000,000 aggregates ≈ 0.88 GB
        // before the container's slot.
        let b = BcPqp::new(&cfg("queues = 16"));
        assert!((800..=900).contains(&b.memory_bytes()), "{} bytes", b.memory_bytes());
        let b2 = b.clone();
        assert!(Arc::ptr_eq(b.params().0, b2.params().0), "clones share the parameters");
    }

    #[test]
    fn config_errors_name_the_field() {
        let e = |s: &str| {
            let e = EnforcerConfig::from_toml(&format!("kind = \"bcpqp\"\nrate = \"8mbit\"\nqueue_size = \"1mb\"\n{s}")).unwrap_err();
            if e.field.is_empty() { e.message } else { e.field }
        };
        assert_eq!(e("theta_minus = 2.0"), "theta_minus");
        assert_eq!(e("theta_plus = -1"), "theta_plus");
        assert_eq!(e("theta_plus = nan"), "theta_plus");
        assert_eq!(e("window = 0"), "window");
        assert_eq!(e("queues = 2000"), "queues");
        assert!(e("thetaplus = 2").contains("thetaplus"));
    }

    #[test]
    fn magic_fills_after_theta_plus_and_leaves_below_theta_minus() {
        // One queue, 1 MB/s, T = 100 ms: X = 100 kB, θ+·X = 150 kB.
        let mut b = BcPqp::new(&cfg("queues = 1"));
        let p = Packet { len: 1000, ..Packet::default() };
        let mut accepted = 0;
        for i in 0..200u64 {
            if b.on_arrival(Instant(i * 10_000), &p).is_pass() {
                accepted += 1000;
            }
        }
        // 2 ms at 100 MB/s: the 151st kB crosses θ+, then the queue is full of magic.
        assert_eq!(accepted, 151_000);
        assert_eq!(b.burst_events(), (1, 0));
        assert_eq!(b.on_arrival(Instant(2_000_000), &p), Verdict::Drop(DropReason::BurstControl));
        // Silence for longer than a window: the magic still queued is removed on the next arrival.
        let before = b.occupancy_nb(0);
        assert!(b.on_arrival(Instant(150_000_000), &p).is_pass());
        assert_eq!(b.burst_events(), (1, 1));
        assert!(b.occupancy_nb(0) < before);
        assert_eq!(b.magic_nb(0), 0);
    }

    #[test]
    fn a_stopped_queues_magic_leaves_at_its_windows_end_not_at_the_next_packet() {
        // priority(0, 1), 1 MB/s, T = 100 ms. Class 1 queues 20 kB, then class 0 bursts 151 kB
        // in 1.5 ms (θ+·X = 150 kB: filled with magic) and stops. Its real bytes are served by
        // about 152 ms; its window, restarted at the fill, ended at about 102 ms having accepted
        // nothing, so the magic is gone and class 1 is served from about 152 ms on. Nothing
        // arrives until 400 ms: had the magic stayed until that arrival, class 1 would still be
        // starved behind it (about 850 kB of magic at 1 MB/s).
        let mut b = BcPqp::new(&cfg("queues = 2\nclassify = \"class\"\npolicy = \"priority(0, 1)\""));
        let low = Packet { len: 1000, class: 1, ..Packet::default() };
        let high = Packet { len: 1000, class: 0, ..Packet::default() };
        for i in 0..20u64 {
            assert!(b.on_arrival(Instant(i * 1_000), &low).is_pass());
        }
        for i in 0..200u64 {
            b.on_arrival(Instant(20_000 + i * 10_000), &high);
        }
        assert_eq!(b.burst_events().0, 1);
        assert!(b.on_arrival(Instant(400_000_000), &low).is_pass());
        assert_eq!(b.burst_events().1, 1);
        assert_eq!(b.occupancy_nb(0), 0);
        assert_eq!(b.occupancy_nb(1), 1000 * NANOS_PER_SEC, "class 1 was served once class 0's real bytes left");
    }
}
