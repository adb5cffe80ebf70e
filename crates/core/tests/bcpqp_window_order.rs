//! BC-PQP's bookkeeping of the windows of queues holding magic, where the golden traces do not
//! reach: one queue, exactly 64 and 65 queues (the 64-bit summary becomes inexact), 300 queues
//! (queue ids wider than a byte), a clock that now and then steps back (window ends then
//! arrive out of order), and stamps on a grid (windows end exactly at arrivals). Seeded on/off
//! traces with many flows, so that many queues hold magic at once and their windows end at
//! different times; every verdict and, every 61 packets, every queue's occupancy, magic and
//! window state are digested. The ring matched the code before it (e16585b: every deadline
//! scanned all queues holding magic in queue order) on these cases; the expected digests were
//! regenerated when magic windows began to close at their own end rather than at the next
//! arrival (`bcpqp::CATCH_UP_WINDOWS`), and for the fair cases again when flat fair service began
//! to give its remainder as water-filling does (in list order, each queue what it holds) instead
//! of a nano-byte per queue; any change of a verdict or of the state changes them.

mod common;

use common::bcpqp_config;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::bcpqp::BcPqp;
use ratekit_core::{Classify, Duration, Instant, Packet, Policer, Verdict};

const RATE: u64 = 1_250_000;
const PACKETS: usize = 40_000;

/// FNV-1a over u64 words.
fn fnv(h: &mut u64, x: u64) {
    for b in x.to_le_bytes() {
        *h = (*h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
}

#[derive(Clone, Copy, Debug)]
enum Clock {
    Forward,
    /// One arrival in 50 is stamped up to 30 ms before the previous one.
    StepsBack,
    /// Stamps on a 1 ms grid: windows (20 ms) often end exactly at an arrival.
    Grid,
}

/// On/off flows at 10× the rate with gaps of every length around the window (20 ms).
fn trace(seed: u64, flows: u64, clock: Clock) -> Vec<(Instant, Packet)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = 1_000_000_000u64;
    let mut out = Vec::with_capacity(PACKETS);
    while out.len() < PACKETS {
        let flow = rng.gen_range(0..flows);
        for _ in 0..rng.gen_range(1..60) {
            let len = if rng.gen_bool(0.6) { 1500 } else { rng.gen_range(40..1500) };
            if !rng.gen_bool(0.05) {
                t += len as u64 * 1_000_000_000 / (10 * RATE);
            }
            let stamp = match clock {
                Clock::StepsBack if rng.gen_bool(0.02) => t - rng.gen_range(0..30_000_000),
                Clock::Grid => t / 1_000_000 * 1_000_000,
                _ => t,
            };
            let pkt = Packet { id: out.len() as u64, len, flow, class: (flow % 1024) as u16, aggregate: 0 };
            out.push((Instant(stamp), pkt));
        }
        t += match rng.gen_range(0..8) {
            0 => rng.gen_range(20_000_000..60_000_000),
            1..=3 => 0,
            _ => rng.gen_range(0..5_000_000),
        };
    }
    out.truncate(PACKETS);
    out
}

fn digest(queues: u32, policy: &str, clock: Clock, seed: u64) -> (u64, (u64, u64)) {
    let cfg = bcpqp_config(policy, queues, RATE, 40_000, Classify::Flow, (1.5, 0.5), Duration::from_millis(20));
    let mut p = BcPqp::new(&cfg);
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let arr = trace(seed, 3 * queues as u64 + 2, clock);
    for (i, (t, pkt)) in arr.iter().enumerate() {
        fnv(&mut h, matches!(p.on_arrival(*t, pkt), Verdict::Pass) as u64);
        if i % 61 == 60 || i + 1 == arr.len() {
            for q in 0..queues as usize {
                let st = p.burst_state(q);
                for x in [p.occupancy_nb(q), p.magic_nb(q), st.accepted, st.accepted_prev, st.window_end] {
                    fnv(&mut h, x);
                }
            }
        }
    }
    (h, p.burst_events())
}

/// (queues, policy, clock, seed) → (digest, (fills, removals)).
const CASES: [(u32, &str, Clock, u64, u64, (u64, u64)); 9] = [
    (1, "fair", Clock::Forward, 1, 0xc18bc0e86b63e526, (112, 108)),
    (16, "fair", Clock::StepsBack, 2, 0xcb3e10145ee1ed99, (899, 898)),
    (16, "weighted", Clock::Forward, 3, 0xbccf6ce11348af07, (860, 859)),
    (16, "fair", Clock::Grid, 8, 0x72ef13efea871afc, (906, 904)),
    (64, "fair", Clock::Forward, 4, 0x63ea7f7afef6fd54, (1110, 1106)),
    (65, "fair", Clock::StepsBack, 5, 0x0407bb2c1e7cc192, (1099, 1096)),
    (300, "fair", Clock::Forward, 6, 0x157d4022cbc1b836, (1126, 1121)),
    (300, "weighted", Clock::StepsBack, 7, 0xdd88c391429b46a4, (1162, 1162)),
    (300, "fair", Clock::Grid, 9, 0x6953dc0db0170ffc, (1145, 1144)),
];

#[test]
fn magic_windows_close_as_before() {
    for (queues, policy, clock, seed, want, events) in CASES {
        let got = digest(queues, policy, clock, seed);
        assert_eq!(got, (want, events), "{queues} queues, {policy}, {clock:?}");
    }
}
