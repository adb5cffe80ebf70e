//! BC-PQP's burst control (000 §4, algorithms.md §3): the per-window burst bound θ+·X_i,
//! the harmonic bound for flows joining one after another, and magic removal below θ−.
//! Each bound is also shown to fail for plain PQP with the same (large) queues, so the tests
//! measure burst control rather than a small queue.

mod common;
mod pqp_reference;

use pqp_reference::load::{run, Source, PKT};
use ratekit_core::bcpqp::BcPqp;
use ratekit_core::pqp::{FlowQueuing, Pqp, PqpConfig};
use ratekit_core::{Bytes, Classify, Duration, Instant, Policer, Rate};

const R: u64 = 1_250_000; // 10 Mbit/s
const T: u64 = 100_000_000; // the window, 100 ms
const SEC: u64 = 1_000_000_000;
const B: u64 = 4 << 20; // ≫ θ+·r·T = 187.5 kB, as 000 §6.1 sizes BC-PQP

fn bcpqp(queues: u32, policy: &str) -> BcPqp {
    let cfg = common::bcpqp_config(policy, queues, R, B, Classify::Class, (1.5, 0.5), Duration(T));
    cfg.validate().unwrap();
    BcPqp::new(&cfg)
}

fn pqp(queues: u32) -> Pqp {
    let cfg = PqpConfig { rate: Rate(R), queues, queue_size: Bytes(B), classify: Classify::Class, policy: "fair".into(), weights: None, flows: FlowQueuing::Hashed, max_flows: None, fair_classes: None };
    Pqp::new(&cfg)
}

/// Bytes passed per aligned window of length T.
fn per_window(p: &mut impl Policer, sources: &[Source], end: u64) -> Vec<u64> {
    let mut w = vec![0u64; (end / T) as usize];
    run(p, sources, 3, 0, end, |t, _, pass| {
        if pass {
            w[(t / T) as usize] += PKT;
        }
    });
    w
}

/// One greedy flow (10× r) into an empty queue: before its magic fill it passes at most
/// θ+·X + one packet (X = r·T, it is alone), and after it only what the phantom queue serves,
/// r per unit time. So no window of length T passes more than θ+·r·T + r·T + 2 packets
/// (an aligned window can hold the end of the pre-fill burst and the start of the service).
#[test]
fn one_flow_bursts_at_most_theta_plus_x_per_window() {
    let bound = (1.5 * (R * T / SEC) as f64) as u64 + R * T / SEC + 2 * PKT;
    let sources = [Source::steady(10 * R)];
    let bc = per_window(&mut bcpqp(1, "fair"), &sources, 3 * SEC);
    assert!(bc.iter().all(|&w| w <= bound), "BC-PQP windows {bc:?} exceed {bound}");
    // The phantom queue keeps the long-run rate: after the first window, r·T ± a packet.
    for w in &bc[2..] {
        assert!(w.abs_diff(R * T / SEC) <= PKT, "{w}");
    }
    let plain = per_window(&mut pqp(1), &sources, 3 * SEC);
    assert!(plain[0] > 3 * bound, "plain PQP with the same queue bursts B: {}", plain[0]);
}

/// n greedy flows joining T/n apart (000 §4's worst case for fairness): flow k is the k-th
/// active queue, so X_k ≤ r·T/k and it passes at most θ+·r·T/k + a packet before its fill;
/// everything else is phantom service, r per unit time. Over the first 2T the aggregate passes
/// at most θ+·r·T·H_n + 2·r·T + n packets (H_n ≈ ln n + 0.5772).
#[test]
fn flows_joining_one_by_one_burst_at_most_the_harmonic_sum() {
    let n = 8u64;
    let sources: Vec<Source> = (0..n).map(|k| Source { rate: 10 * R, start: k * T / n, stop: u64::MAX, after: 0 }).collect();
    let harmonic: f64 = (1..=n).map(|k| 1.0 / k as f64).sum();
    let rt = (R * T / SEC) as f64;
    let bound = (1.5 * rt * harmonic + 2.0 * rt) as u64 + n * PKT;
    let bc: u64 = per_window(&mut bcpqp(n as u32, "fair"), &sources, 2 * T).iter().sum();
    assert!(bc <= bound, "BC-PQP passed {bc} in 2T, bound {bound}");
    let plain: u64 = per_window(&mut pqp(n as u32), &sources, 2 * T).iter().sum();
    assert!(plain > bound, "plain PQP passed only {plain}");
}

/// Flow 0 is greedy for 1 s and then trickles at 5 % of r, below θ−·X = 0.5·(r/2)·T per
/// window; flow 1 stays greedy. Within a window (plus the real bytes ahead of the magic, at
/// most θ+·X + a packet, served at ≥ r/2) flow 0's magic is removed and flow 1 gets all but the
/// trickle: from 1.5 s on it passes ≥ 0.95·r·Δt − 2 packets. Under plain PQP flow 0's full
/// 4 MB queue keeps half the rate for seconds. Flow 1, still above θ−, keeps its magic.
#[test]
fn magic_is_removed_when_a_queue_falls_below_theta_minus() {
    let sources = [Source { rate: 10 * R, start: 0, stop: SEC, after: R / 20 }, Source::steady(10 * R)];
    let mut bc = bcpqp(2, "fair");
    let tally = run(&mut bc, &sources, 5, 3 * SEC / 2, 5 * SEC / 2, |_, _, _| {});
    assert_eq!(tally[0].passed, tally[0].offered, "the trickle is within its share");
    let min = (0.95 * R as f64) as u64 - 2 * PKT;
    assert!(tally[1].passed >= min, "flow 1 passed {} in 1 s, expected ≥ {min}", tally[1].passed);
    let (fills, removals) = bc.burst_events();
    assert!(fills >= 2 && removals >= 1, "fills {fills}, removals {removals}");
    assert_eq!(bc.magic_nb(0), 0);
    assert!(bc.magic_nb(1) > 0, "a queue still above θ− keeps its magic");

    let plain = run(&mut pqp(2), &sources, 5, 3 * SEC / 2, 5 * SEC / 2, |_, _, _| {});
    assert!(plain[1].passed < (0.6 * R as f64) as u64, "plain PQP: {}", plain[1].passed);
}

/// Under strict priority a lower class is charged only what the higher one uses (docs/bcpqp.md):
/// with class 0 sending 30 % of r, class 1 expects X = r·T − 0.3·r·T (class 0's accepted
/// bytes per window, ± a packet at the window edges), neither 0 nor r·T as the literal
/// "r if highest active, else 0" would flip between. A greedy class 1 is filled with magic
/// once and then gets the remaining 70 % in every window.
#[test]
fn priority_lower_class_expects_and_gets_the_leftover() {
    let sources = [Source::steady(3 * R / 10), Source::steady(2 * R)];
    let mut bc = bcpqp(2, "priority");
    let windows = {
        let mut w = vec![[0u64; 2]; 30];
        run(&mut bc, &sources, 9, 0, 3 * SEC, |t, i, pass| {
            if pass {
                w[(t / T) as usize][i] += PKT;
            }
        });
        w
    };
    let (fills, removals) = bc.burst_events();
    assert_eq!((fills, removals), (1, 0), "class 1 is filled once and keeps its magic");
    let x1 = bc.expected_window_nb(1, Instant(3 * SEC)) / SEC;
    let leftover = R * T / SEC * 7 / 10;
    assert!(x1.abs_diff(leftover) <= 2 * PKT, "X_1 = {x1}, expected {leftover}");
    for w in &windows[5..] {
        // Class 1 gets r·T − what class 0 sent in the window, ± the packets at the edges.
        let leftover = (R * T / SEC).saturating_sub(w[0]);
        assert!(w[1].abs_diff(leftover) <= 3 * PKT, "window {w:?}");
    }
}
