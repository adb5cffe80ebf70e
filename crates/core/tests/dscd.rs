//! DSCD (004 §III): the erratum, T_q's protection, saved credit, and the design goal as a
//! property: on the same constant-rate link with the same arrivals, no BE packet leaves later
//! than under a FIFO (within one packet time), and an ABE packet leaves within T_d or is dropped
//! unless T_q protects it.

use proptest::prelude::*;
use ratekit_core::dscd::{Dscd, DscdConfig};
use ratekit_core::exp_decay::ExpMode;
use ratekit_core::{Bytes, DropReason, Dropped, Duration, EnforcerConfig, Instant, Packet, QueueDiscipline, Rate};
use std::collections::{HashMap, VecDeque};

mod link;
use link::run_link;

const LINK: Rate = Rate(1_250_000); // 10 Mbit/s
const ABE: u16 = 1;
const BE: u16 = 0;
const MS: u64 = 1_000_000;

fn dscd(exp: ExpMode, buffer: Option<u64>) -> Dscd {
    let cfg = DscdConfig {
        buffer: buffer.map(Bytes),
        delay_threshold: Duration::from_millis(10),
        half_life: Duration::from_millis(100),
        queue_threshold: 1,
        memory: Duration::from_millis(50),
        exp,
        abe_class: ABE,
    };
    Dscd::new(&cfg, Some(LINK)).unwrap()
}

fn pkt(id: u64, class: u16, len: u32) -> Packet {
    Packet { id, len, class, ..Default::default() }
}

#[test]
fn expired_abe_is_dropped_only_while_more_than_t_q_wait() {
    let mut q = dscd(ExpMode::Fixed, None);
    let mut drops = Vec::new();
    for i in 0..5 {
        q.enqueue(Instant(0), pkt(i, ABE, 1000), &mut drops);
    }
    // At 5 ms nothing has expired.
    assert_eq!(q.dequeue(Instant(5 * MS), &mut drops).map(|p| p.id), Some(0));
    assert!(drops.is_empty());
    // At 10 ms the deadline (0 + T_d) has not passed yet: `d < t_now` is strict.
    assert_eq!(q.dequeue(Instant(10 * MS), &mut drops).map(|p| p.id), Some(1));
    // At 20 ms all three left are late: two are dropped, the last is protected by T_q = 1.
    assert_eq!(q.dequeue(Instant(20 * MS), &mut drops).map(|p| p.id), Some(4));
    let dropped: Vec<_> = drops.iter().map(|d| (d.pkt.id, d.reason)).collect();
    assert_eq!(dropped, vec![(2, DropReason::Deadline), (3, DropReason::Deadline)]);
}

#[test]
fn saved_credit_lets_a_later_abe_packet_overtake_be() {
    let mut q = dscd(ExpMode::Fixed, None);
    let mut drops = Vec::new();
    q.enqueue(Instant(0), pkt(1, ABE, 1000), &mut drops);
    q.enqueue(Instant(0), pkt(2, ABE, 1000), &mut drops);
    for i in 10..14 {
        q.enqueue(Instant(0), pkt(i, BE, 1000), &mut drops);
    }
    let t = Instant(20 * MS);
    assert_eq!(q.dequeue(t, &mut drops).map(|p| p.id), Some(2)); // 1 dropped, 2 protected
    q.enqueue(t, pkt(3, ABE, 1000), &mut drops);
    let order: Vec<u64> = std::iter::from_fn(|| q.dequeue(t, &mut drops).map(|p| p.id)).collect();
    // Packet 1's credit, released ahead of the BE credit, carries packet 3 past all four BE.
    assert_eq!(order, vec![3, 10, 11, 12, 13]);
    assert_eq!(drops.len(), 1);
}

#[test]
fn buffer_counts_credit_not_just_packets() {
    // B_max = 10mbit × 25 ms = 31 250 B by default.
    let mut q = dscd(ExpMode::Fixed, None);
    let mut drops = Vec::new();
    for i in 0..40 {
        q.enqueue(Instant(0), pkt(i, BE, 1000), &mut drops);
    }
    assert_eq!(drops.len(), 9);
    assert!(drops.iter().all(|d| d.reason == DropReason::QueueFull));
    assert_eq!(q.total_credit(), 31_000);
}

#[test]
fn bad_input_names_the_field() {
    let e = EnforcerConfig::from_toml("kind = \"dscd\"\ndelay_threshold = 0").unwrap_err();
    // serde rejects a zero duration before validate(); config.rs cannot name the key of an
    // internally tagged enum (no span), so only the message is checked here.
    assert!(e.message.contains("greater than zero"), "{e}");
    let cfg = DscdConfig {
        buffer: None,
        delay_threshold: Duration(0),
        half_life: Duration::from_millis(100),
        queue_threshold: 1,
        memory: Duration::from_millis(50),
        exp: ExpMode::Fixed,
        abe_class: ABE,
    };
    assert_eq!(cfg.validate().unwrap_err().field, "delay_threshold");
    let ok = EnforcerConfig::from_toml("kind = \"dscd\"").unwrap();
    assert_eq!(ok.build(None).err().unwrap().field, "link_rate");
    assert!(ok.build(Some(LINK)).is_ok());
}

/// A plain FIFO, the reference of the design goal.
#[derive(Default)]
struct Fifo {
    q: VecDeque<Packet>,
    bytes: u64,
}

impl QueueDiscipline for Fifo {
    fn enqueue(&mut self, _now: Instant, pkt: Packet, _drops: &mut Vec<Dropped>) {
        self.bytes += pkt.len as u64;
        self.q.push_back(pkt);
    }
    fn dequeue(&mut self, _now: Instant, _drops: &mut Vec<Dropped>) -> Option<Packet> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len as u64;
        Some(p)
    }
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }
    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }
}

fn tx_time(len: u32) -> u64 {
    LINK.time_to_send(len as u64).0
}

fn arrivals(seed: u64, n: usize, abe_share: f64, load: f64) -> Vec<(u64, Packet)> {
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut t = 0f64;
    let mut v = Vec::with_capacity(n);
    for id in 0..n as u64 {
        let len = 64 + (rnd() * 1436.0) as u32;
        let class = if rnd() < abe_share { ABE } else { BE };
        v.push((t as u64, pkt(id, class, len)));
        // Bursty: half the gaps are zero, the rest exponential, for the requested mean load.
        if rnd() < 0.5 {
            t += -(1.0 - rnd()).ln() * 2.0 * 780.0 / (LINK.0 as f64 * load) * 1e9;
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn be_never_later_than_fifo_and_abe_meets_its_deadline(
        seed in any::<u64>(),
        abe_share in 0.0f64..1.0,
        load in 0.6f64..1.6,
        fixed in any::<bool>(),
    ) {
        let arr = arrivals(seed, 600, abe_share, load);
        let arrival_of: HashMap<u64, (u64, u16)> = arr.iter().map(|(t, p)| (p.id, (*t, p.class))).collect();
        let mut fifo = Fifo::default();
        let fifo_dep = run_link(&mut fifo, LINK, &arr, |_, _, _, _| {});
        let exp = if fixed { ExpMode::Fixed } else { ExpMode::Float };
        let mut q = dscd(exp, Some(10_000_000));
        // Bytes the FIFO holds at `t`: arrived and not yet fully transmitted.
        let fifo_spans: Vec<(u64, u64, u64)> = arr.iter().map(|(t, p)| (*t, fifo_dep[&p.id] + tx_time(p.len), p.len as u64)).collect();
        let fifo_holds = |t: u64| -> u64 { fifo_spans.iter().filter(|s| s.0 <= t && t < s.1).map(|s| s.2).sum() };
        let mut violations = Vec::new();
        let mut credit_excess = Vec::new();
        let dscd_dep = run_link(&mut q, LINK, &arr, |q, now, p, drops| {
            // Credit imitates the FIFO's occupancy: never more than it, beyond the packet that
            // just started (counted by the FIFO until it is fully sent, by DSCD no longer).
            let (credit, fifo) = (q.total_credit(), fifo_holds(now));
            if credit > fifo + 1500 {
                credit_excess.push((now, credit, fifo));
            }
            violations.extend(drops.iter().filter(|d| d.pkt.class != ABE).map(|d| (d.pkt.id, 0)));
            if let Some(p) = p {
                let (t_arr, class) = arrival_of[&p.id];
                // T_q protects the head when at most T_q = 1 ABE packets waited (itself).
                if class == ABE && now - t_arr > 10 * MS && q.abe_len() + 1 > 1 {
                    violations.push((p.id, now - t_arr));
                }
            }
        });
        prop_assert!(violations.is_empty(), "late ABE packets or dropped BE: {:?}", violations);
        prop_assert!(credit_excess.is_empty(), "credit above the FIFO's occupancy: {:?}", &credit_excess[..credit_excess.len().min(5)]);
        let one_packet = tx_time(1500);
        for (id, &(_, class)) in &arrival_of {
            if class != BE {
                continue;
            }
            let d = dscd_dep[id];
            let f = fifo_dep[id];
            prop_assert!(d <= f + one_packet, "BE packet {} leaves DSCD at {} but the FIFO at {}", id, d, f);
        }
    }
}
