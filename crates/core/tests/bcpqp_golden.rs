//! Golden verdicts: seeded traces through PQP and BC-PQP under every kind of policy, digested
//! (verdicts and drop reasons per packet, every queue's occupancy and magic every 97 packets,
//! final counters) and compared with `bcpqp_golden.txt`, generated from the code before the
//! data path was optimised. Any change of a verdict or of the arithmetic docs/bcpqp.md
//! specifies (which the eBPF mirror follows) changes a digest.
//!
//! After an intended change of behaviour, regenerate with
//! `RATEKIT_BLESS=1 cargo test --release -p ratekit-core --test bcpqp_golden` and say why in
//! the commit.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::bcpqp::{BcPqp, BcPqpConfig};
use ratekit_core::pqp::{FlowQueuing, Pqp};
use ratekit_core::{Bytes, Classify, Duration, Instant, Packet, Policer, Rate};
use std::fmt::Write as _;

mod digest;
use digest::{verdict_code, Digest};

const RATE: u64 = 1_250_000; // 10 Mbit/s
const QUEUES: u32 = 8;
const PACKETS: usize = 60_000;


#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Poisson arrivals at `load` × the rate, random flows/classes and sizes.
    Steady { load: f64 },
    /// On/off flows: bursts of back-to-back packets from one flow at 20× the rate, gaps of
    /// silence (some longer than the window), simultaneous arrivals now and then.
    Bursty,
}

fn trace(seed: u64, shape: Shape) -> Vec<(Instant, Packet)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = 0u64;
    let mut out = Vec::with_capacity(PACKETS);
    let size = |rng: &mut ChaCha8Rng| if rng.gen_bool(0.6) { 1500 } else { rng.gen_range(40..1500) };
    while out.len() < PACKETS {
        match shape {
            Shape::Steady { load } => {
                let len = size(&mut rng);
                let mean_gap = len as f64 / (RATE as f64 * load) * 1e9;
                t += (-(1.0 - rng.gen::<f64>()).ln() * mean_gap) as u64;
                let flow = rng.gen_range(0..40u64);
                out.push((Instant(t), Packet { id: out.len() as u64, len, flow, class: (flow % QUEUES as u64) as u16, aggregate: 0 }));
            }
            Shape::Bursty => {
                let flow = rng.gen_range(0..24u64);
                let burst = rng.gen_range(1..200);
                for _ in 0..burst {
                    let len = size(&mut rng);
                    // Now and then several packets share a timestamp.
                    if !rng.gen_bool(0.1) {
                        t += len as u64 * 1_000_000_000 / (20 * RATE);
                    }
                    out.push((Instant(t), Packet { id: out.len() as u64, len, flow, class: (flow % QUEUES as u64) as u16, aggregate: 0 }));
                }
                t += match rng.gen_range(0..10) {
                    0 => rng.gen_range(100_000_000..400_000_000), // longer than a window
                    1..=4 => 0,
                    _ => rng.gen_range(0..30_000_000),
                };
            }
        }
    }
    out.truncate(PACKETS);
    out
}

struct Case {
    queues: u32,
    policy: &'static str,
    weights: Option<Vec<u32>>,
    classify: Classify,
}

fn cases() -> Vec<Case> {
    vec![
        Case { queues: QUEUES, policy: "fair", weights: None, classify: Classify::Flow },
        Case { queues: QUEUES, policy: "weighted", weights: Some(vec![1, 2, 3, 4, 1, 7, 2, 5]), classify: Classify::Class },
        Case { queues: QUEUES, policy: "priority", weights: None, classify: Classify::Class },
        Case { queues: QUEUES, policy: "priority(0, fair(1, 2, 3), weighted(4:3, 5:1, 6:2, 7:1))", weights: None, classify: Classify::Class },
        Case { queues: QUEUES, policy: "weighted(fair(0, 1, 2):2, priority(3, 4):1, weighted(5:1, 6:3, 7:1):3)", weights: None, classify: Classify::Flow },
        // More than 64 queues: BC-PQP's 64-bit summary of queues holding magic is then inexact.
        Case { queues: 80, policy: "fair", weights: None, classify: Classify::Flow },
    ]
}

/// Small queues, so that both verdicts occur often and magic fills and removals happen.
fn queue_size(shape: Shape) -> u64 {
    match shape {
        Shape::Steady { .. } => 60_000,
        Shape::Bursty => 150_000,
    }
}

fn run<P: Policer>(mut p: P, arr: &[(Instant, Packet)], mut inspect: impl FnMut(&P, &mut Digest)) -> u64 {
    let mut d = Digest::new();
    for (i, (t, pkt)) in arr.iter().enumerate() {
        d.word(verdict_code(p.on_arrival(*t, pkt)));
        if i % 97 == 96 {
            inspect(&p, &mut d);
        }
    }
    inspect(&p, &mut d);
    d.0
}

fn digests() -> String {
    let shapes = [Shape::Steady { load: 1.4 }, Shape::Steady { load: 3.0 }, Shape::Bursty];
    let mut out = String::new();
    for (si, shape) in shapes.into_iter().enumerate() {
        let arr = trace(100 + si as u64, shape);
        for case in cases() {
            let bc = BcPqpConfig {
                rate: Rate(RATE),
                queues: case.queues,
                queue_size: Bytes(queue_size(shape)),
                classify: case.classify,
                policy: case.policy.into(),
                weights: case.weights.clone(),
                flows: FlowQueuing::Hashed,
                max_flows: None,
                fair_classes: None,
                theta_plus: 1.5,
                theta_minus: 0.5,
                window: Duration::from_millis(50),
            };
            bc.validate().unwrap();
            let pqp = bc.pqp();
            pqp.validate().unwrap();
            let pd = run(Pqp::new(&pqp), &arr, |p, d| {
                for q in 0..case.queues as usize {
                    d.word(p.occupancy_nb(q));
                }
                let s = p.stats();
                d.word(s.passed_bytes);
            });
            let mut events = (0, 0);
            let bd = run(BcPqp::new(&bc), &arr, |p, d| {
                for q in 0..case.queues as usize {
                    d.word(p.occupancy_nb(q));
                    d.word(p.magic_nb(q));
                    let st = p.burst_state(q);
                    d.word(st.accepted);
                    d.word(st.accepted_prev);
                    d.word(st.window_end);
                }
                let s = p.stats();
                d.word(s.passed_bytes);
                events = p.burst_events();
                d.word(events.0);
                d.word(events.1);
            });
            let _ = writeln!(out, "{shape:?} | {} queues | {} | pqp {pd:016x} | bcpqp {bd:016x} | fills {} removals {}", case.queues, case.policy, events.0, events.1);
        }
    }
    out
}

#[test]
fn verdicts_and_state_match_the_golden_digests() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bcpqp_golden.txt");
    let got = digests();
    if std::env::var_os("RATEKIT_BLESS").is_some() {
        std::fs::write(path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(path).expect("tests/bcpqp_golden.txt (RATEKIT_BLESS=1 generates it)");
    assert_eq!(got, want, "PQP/BC-PQP verdicts or state changed");
    // The traces exercise burst control in both directions, or the digests would prove little.
    assert!(got.lines().any(|l| !l.ends_with("fills 0 removals 0")), "{got}");
    assert!(got.lines().filter(|l| !l.ends_with("removals 0")).count() >= 3, "{got}");
}
