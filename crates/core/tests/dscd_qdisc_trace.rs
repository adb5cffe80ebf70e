//! Issue 16: DSCD's saved ABE credit, CC[ABE], traced on the same arrivals through ratekit's
//! DSCD and through `Qdisc`, a restatement (our code) of the credit bookkeeping of the authors'
//! Linux qdisc (uni-tue-kn/dscd-linux-qdisc, net/sched/sch_dscd.c). Where that qdisc departs
//! from 004's Algorithm 3, `Qdisc` follows the qdisc:
//! - two clocks: the linear decay measures from the last devaluation of any kind, the exponential
//!   decay from its own last step, which the idle branch does not move; so the first busy call
//!   after an idle period decays exponentially over the idle time that the linear decay has
//!   already drained;
//! - an exponential step that leaves a non-zero CC[ABE] unchanged (fixed-point truncation) does
//!   not move its clock, so the elapsed time accrues until a step changes the counter, and is
//!   then applied to whatever credit the counter holds by then;
//! - n·2^(−y/2^s) is 0 from y/2^s ≥ 20 on, and truncates n·y before dividing by 5909;
//! - spending ABE credit zeroes CC[ABE] when less than one byte would remain;
//! - C is the configured rate (the qdisc's `rate` option), where ratekit estimates it (UTEMA);
//!   on a constant-rate link the two agree.
//!
//! Run with `--nocapture` for the traces.

use ratekit_core::dscd::{Dscd, DscdConfig};
use ratekit_core::exp_decay::ExpMode;
use ratekit_core::{DropReason, Dropped, Duration, Instant, Packet, QueueDiscipline, Rate};
use std::collections::VecDeque;

mod link;
use link::run_link;

const GBIT: Rate = Rate(125_000_000);
const BE: u16 = 0;
const ABE: u16 = 1;
const MS: u64 = 1_000_000;
/// Back-to-back arrivals from a 10 Gbit/s sender (1500 B), as in 004's testbed.
const HOST_GAP: u64 = 1_200;
/// Table IV: B_max = C·25 ms at 1 Gbit/s.
const B_MAX: u64 = 3_125_000;
const T_D: u64 = 10 * MS;
/// 004 §IV-B3: credits ×2^10, exponent ×2^20.
const CREDIT_SHIFT: u32 = 10;
const EXP_SHIFT: u32 = 20;
/// t_h = ∞, as the Table V scenario writes it.
const FOREVER: u64 = 1_000_000 * MS;

/// The qdisc's n·2^(−y/2^s); u128 only so that no product can wrap (none does here in u64).
fn qdisc_pow2(n: u64, y: u64, s: u32) -> u64 {
    let (n, y) = (n as u128, y as u128);
    if y * 9219 <= 1 << (s + 12) {
        return (n - ((n * y) >> (s - 12)) / 5909) as u64;
    }
    let whole = y >> s;
    if whole >= 20 {
        return 0;
    }
    ((n * (2 + whole) - ((n * y) >> s)) >> (1 + whole)) as u64
}

struct Waiting {
    pkt: Packet,
    arrival: u64,
}

/// The qdisc's state: BE credit and CC_cq in bytes, CC[ABE] ×2^10, time in ns.
struct Qdisc {
    half_life: u64,
    rate: u64,
    queues: [VecDeque<Waiting>; 2],
    credit_queue: VecDeque<(u64, usize)>,
    cc_cq: u64,
    cc_be: u64,
    cc_abe: u64,
    backlog: u64,
    last_devaluation: Option<u64>,
    last_exp_devaluation: Option<u64>,
}

const Q_BE: usize = 0;
const Q_ABE: usize = 1;

impl Qdisc {
    fn new(half_life: u64, rate: Rate) -> Self {
        Qdisc {
            half_life,
            rate: rate.0,
            queues: [VecDeque::new(), VecDeque::new()],
            credit_queue: VecDeque::new(),
            cc_cq: 0,
            cc_be: 0,
            cc_abe: 0,
            backlog: 0,
            last_devaluation: None,
            last_exp_devaluation: None,
        }
    }

    fn saved_abe_credit(&self) -> u64 {
        self.cc_abe >> CREDIT_SHIFT
    }

    fn is_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }

    fn credit(&mut self, (len, class): (u64, usize)) {
        self.cc_cq -= len;
        match class {
            Q_ABE => self.cc_abe += len << CREDIT_SHIFT,
            _ => self.cc_be += len,
        }
    }

    /// Spends or drains ABE credit; less than one byte left becomes zero.
    fn take_abe(&mut self, bytes: u64) {
        self.cc_abe = if (bytes + 1) << CREDIT_SHIFT > self.cc_abe { 0 } else { self.cc_abe - (bytes << CREDIT_SHIFT) };
    }

    fn exp_decay(&mut self, now: u64) {
        let Some(last) = self.last_exp_devaluation else {
            self.last_exp_devaluation = Some(now);
            return;
        };
        let y = ((now - last) << EXP_SHIFT) / self.half_life;
        let old = self.cc_abe;
        self.cc_abe = qdisc_pow2(old, y, EXP_SHIFT);
        if self.cc_abe == 0 || self.cc_abe != old {
            self.last_exp_devaluation = Some(now);
        }
    }

    fn devaluate(&mut self, now: u64) {
        if self.is_empty() {
            while let Some(e) = self.credit_queue.pop_front() {
                self.credit(e);
            }
            if let Some(last) = self.last_devaluation {
                self.take_abe((now - last) * self.rate / 1_000_000_000);
            }
        } else {
            self.exp_decay(now);
        }
        self.last_devaluation = Some(now);
    }

    fn head_fits(&self, class: usize, credit: u64) -> bool {
        self.queues[class].front().is_some_and(|w| credit >= w.pkt.len as u64)
    }
}

impl QueueDiscipline for Qdisc {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.devaluate(now.0);
        let len = pkt.len as u64;
        if len + self.cc_cq + self.saved_abe_credit() + self.cc_be > B_MAX {
            drops.push(Dropped { pkt, reason: DropReason::QueueFull });
            return;
        }
        let class = if pkt.class == ABE { Q_ABE } else { Q_BE };
        self.credit_queue.push_back((len, class));
        self.cc_cq += len;
        self.backlog += len;
        self.queues[class].push_back(Waiting { pkt, arrival: now.0 });
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Option<Packet> {
        self.devaluate(now.0);
        while self.queues[Q_ABE].len() > 1 && self.queues[Q_ABE].front().is_some_and(|w| w.arrival + T_D < now.0) {
            let w = self.queues[Q_ABE].pop_front()?;
            self.backlog -= w.pkt.len as u64;
            drops.push(Dropped { pkt: w.pkt, reason: DropReason::Deadline });
        }
        if self.is_empty() {
            return None;
        }
        let class = loop {
            if self.head_fits(Q_ABE, self.saved_abe_credit()) {
                break Q_ABE;
            }
            if self.head_fits(Q_BE, self.cc_be) {
                break Q_BE;
            }
            // The qdisc would read its list head as a credit element here.
            let e = self.credit_queue.pop_front().expect("the qdisc's credit queue ran dry");
            self.credit(e);
        };
        let pkt = self.queues[class].pop_front()?.pkt;
        let len = pkt.len as u64;
        match class {
            Q_ABE => self.take_abe(len),
            _ => self.cc_be -= len,
        }
        self.backlog -= len;
        Some(pkt)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog
    }
}

fn ratekit(half_life: u64) -> Dscd {
    let cfg = DscdConfig {
        buffer: Some(ratekit_core::Bytes(B_MAX)),
        delay_threshold: Duration(T_D),
        half_life: Duration(half_life),
        queue_threshold: 1,
        memory: Duration::from_millis(50),
        exp: ExpMode::Fixed,
        abe_class: ABE,
    };
    Dscd::new(&cfg, Some(GBIT)).unwrap()
}

/// `count` packets of `len` bytes and `class` sent back to back from `start`.
fn burst(start: u64, count: u64, len: u32, class: u16) -> impl Iterator<Item = (u64, Packet)> {
    (0..count).map(move |i| (start + i * HOST_GAP, Packet { len, class, ..Default::default() }))
}

/// Sorts by time and numbers the packets.
fn arrivals(mut v: Vec<(u64, Packet)>) -> Vec<(u64, Packet)> {
    v.sort_by_key(|a| a.0);
    for (id, a) in v.iter_mut().enumerate() {
        a.1.id = id as u64;
    }
    v
}

/// BE keeps 20 ms queued (a burst, then exactly the link rate); every 50 ms from 100 ms on, 8 ABE
/// datagrams of 1490 B arrive back to back. Seven expire behind the BE queue (T_q = 1 keeps the
/// last), and their credit, released 20 ms after they came, is saved until the next burst.
fn periodic_abe_over_be_backlog(end: u64) -> Vec<(u64, Packet)> {
    let fill = B_MAX * 4 / 5 / 1500;
    let mut v: Vec<_> = burst(0, fill, 1500, BE).collect();
    let link_gap = GBIT.time_to_send(1500).0;
    v.extend((fill * HOST_GAP..end).step_by(link_gap as usize).map(|t| (t, Packet { len: 1500, class: BE, ..Default::default() })));
    v.extend((100 * MS..end).step_by(50 * MS as usize).flat_map(|t| burst(t, 8, 1490, ABE)));
    arrivals(v)
}

/// 1500 BE packets (18 ms of queue) back to back, then 100 ABE datagrams: 99 expire, T_q = 1
/// keeps the last, which leaves at 18 ms on the first ABE credit and empties the queue. The 99
/// other credits wait in Qc through an idle `gap` after that datagram's transmission, until one
/// BE packet arrives. Returns the arrivals and the idle period's start and end.
fn abe_credit_across_idle(gap: u64) -> (Vec<(u64, Packet)>, u64, u64) {
    let last_out = 1500 * GBIT.time_to_send(1500).0;
    let resumes = last_out + GBIT.time_to_send(1490).0 + gap;
    let v = burst(0, 1500, 1500, BE).chain(burst(1500 * HOST_GAP, 100, 1490, ABE)).chain(burst(resumes, 1, 1500, BE));
    (arrivals(v.collect()), last_out, resumes)
}

/// CC[ABE] after every dequeue, and the ABE datagrams that left.
struct Trace {
    points: Vec<(u64, u64)>,
    abe_sent: usize,
}

impl Trace {
    /// CC[ABE] as the last call at or before `t` left it.
    fn at(&self, t: u64) -> u64 {
        let i = self.points.partition_point(|p| p.0 <= t);
        if i == 0 {
            0
        } else {
            self.points[i - 1].1
        }
    }

    /// Time-weighted mean of CC[ABE] over [from, to).
    fn mean(&self, from: u64, to: u64) -> f64 {
        let mut sum = 0u128;
        let mut prev = (from, self.at(from));
        for &(t, c) in self.points.iter().filter(|p| p.0 > from && p.0 < to) {
            sum += (t - prev.0) as u128 * prev.1 as u128;
            prev = (t, c);
        }
        sum += (to - prev.0) as u128 * prev.1 as u128;
        sum as f64 / (to - from) as f64
    }
}

fn trace<Q: QueueDiscipline>(q: &mut Q, arr: &[(u64, Packet)], saved: impl Fn(&Q) -> u64) -> Trace {
    let mut points = Vec::new();
    let departures = run_link(q, GBIT, arr, |q, now, _, _| points.push((now, saved(q))));
    let abe_sent = arr.iter().filter(|a| a.1.class == ABE && departures.contains_key(&a.1.id)).count();
    Trace { points, abe_sent }
}

fn both(half_life: u64, arr: &[(u64, Packet)]) -> (Trace, Trace) {
    let ours = trace(&mut ratekit(half_life), arr, Dscd::saved_abe_credit);
    let theirs = trace(&mut Qdisc::new(half_life, GBIT), arr, Qdisc::saved_abe_credit);
    (ours, theirs)
}

fn label(half_life: u64) -> String {
    if half_life == FOREVER {
        "∞".into()
    } else {
        format!("{} ms", half_life / MS)
    }
}

fn abe_sent_of(arr: &[(u64, Packet)]) -> usize {
    arr.iter().filter(|a| a.1.class == ABE).count()
}

/// With BE always queued only the exponential decay acts, and the two bookkeepings agree: the
/// saved credit each ABE burst finds is the same, and t_h sets how much of it survives.
#[test]
fn saved_credit_under_a_be_backlog_matches_the_qdisc() {
    let end = 1000 * MS;
    let arr = periodic_abe_over_be_backlog(end);
    let sent = abe_sent_of(&arr);
    // The instants just before the bursts of the second half (steady state).
    let bursts: Vec<u64> = (550..1000).step_by(50).map(|t| t * MS - 1).collect();
    let mut found = Vec::new();
    for half_life in [10 * MS, 100 * MS, FOREVER] {
        let (ours, theirs) = both(half_life, &arr);
        let at_burst = |t: &Trace| bursts.iter().map(|&b| t.at(b)).sum::<u64>() / bursts.len() as u64;
        let (o, q) = (at_burst(&ours), at_burst(&theirs));
        let (om, qm) = (ours.mean(100 * MS, end), theirs.mean(100 * MS, end));
        println!(
            "t_h = {:>5}: CC[ABE] at a burst's arrival ratekit {o} B, qdisc {q} B; mean {om:.0} B vs {qm:.0} B; \
             ABE sent {}/{sent} vs {}/{sent}",
            label(half_life),
            ours.abe_sent,
            theirs.abe_sent
        );
        let period: Vec<String> = (600..=650).step_by(5).map(|t| format!("{}/{}", ours.at(t * MS), theirs.at(t * MS))).collect();
        println!("  600-650 ms every 5 ms (ratekit/qdisc, B): {}", period.join(" "));
        if half_life == FOREVER {
            // Every fixed-point step of ratekit's truncates to y = 0 (Δ·2^20 < t_h), so nothing
            // decays; the qdisc lets the time accrue until a step changes the counter, and the
            // few bytes it takes leave the eighth datagram short of credit once, whose credit
            // then stays saved: one datagram's credit more, less that decay.
            assert_eq!(o, 7 * 1490);
            assert!(q < o + 1490 && q > o + 1480, "the qdisc keeps {q} B");
        } else {
            assert!(o.abs_diff(q) <= q / 100 + 10, "t_h {}: ratekit finds {o} B at a burst, the qdisc {q} B", label(half_life));
            assert!((om - qm).abs() <= 0.01 * qm + 10.0, "t_h {}: mean CC[ABE] {om} vs {qm}", label(half_life));
            assert_eq!(ours.abe_sent, theirs.abe_sent, "t_h {}", label(half_life));
        }
        found.push(o);
    }
    // Seven datagrams' credit is saved per burst; 30 ms later t_h = ∞ keeps all of it, 100 ms
    // about 2^(−0.3) ≈ 0.81, 10 ms about 2^(−3) = 0.125.
    assert!(found[1] < found[2] * 9 / 10 && found[0] < found[2] / 5, "t_h does not act: {found:?}");
}

/// Across an idle period the qdisc drains the saved credit linearly (as ratekit does) and then,
/// on its first call with a packet queued, decays what is left exponentially over the same idle
/// time: a factor 2^(−idle/t_h) that Algorithm 3, whose single lastDevaluation ratekit keeps,
/// does not apply.
#[test]
fn saved_credit_across_an_idle_period_against_the_qdisc() {
    for half_life in [10 * MS, 100 * MS] {
        for gap in [MS / 10, MS / 5, MS / 2] {
            let (arr, idle_from, resumes) = abe_credit_across_idle(gap);
            let (ours, theirs) = both(half_life, &arr);
            let (o, q) = (ours.at(resumes), theirs.at(resumes));
            // Ratekit: the 99 credits less C times the whole time since the last call (its C is
            // UTEMA's estimate, a few bytes per second off the link's).
            let drained = GBIT.bytes_in(Duration(resumes - idle_from));
            let double_count = (-((resumes - idle_from) as f64) / half_life as f64).exp2();
            println!(
                "t_h = {:>6}, idle {:.1} ms: CC[ABE] when traffic resumes ratekit {o} B (99·1490 − {drained}), \
                 qdisc {q} B = {:.4} of ratekit (2^(−idle/t_h) = {double_count:.4})",
                label(half_life),
                gap as f64 / MS as f64,
                q as f64 / o as f64
            );
            assert!(o.abs_diff(99 * 1490 - drained) <= 8, "ratekit's linear decay: {o}");
            assert!((q as f64 - o as f64 * double_count).abs() <= 0.001 * o as f64 + 2.0, "qdisc {q} vs {o}·{double_count}");
        }
    }
}
