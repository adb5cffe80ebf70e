//! FairPolicer's aggregate bound (001 §IV: one bucket of B filled at R) must hold whatever the
//! sketch: passed bytes over any window [t_i, t_j] ≤ B + R·(t_j − t_i). Small sketches, many
//! flows and on/off bursts make count-min collisions leave bytes in the sketch that no listed
//! flow owns when the active list empties; handing those back for free would break the bound.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::fair_policer::{FairPolicer, FairPolicerConfig};
use ratekit_core::{Bytes, Instant, Packet, Policer, Rate};

struct Traffic {
    flows: u64,
    /// Every `epoch_ns` each flow is switched on or off at random: on/off bursts.
    epoch_ns: u64,
    /// Chance that an epoch is silent for every flow, so the active list can drain.
    quiet: f64,
    mean_gap_ns: u64,
    packets: usize,
    seed: u64,
}

/// Offered load through `fp`; returns (arrival time, bytes) of every passed packet.
fn passed(fp: &mut FairPolicer, traffic: &Traffic) -> Vec<(u64, u64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(traffic.seed);
    let mut on: Vec<u64> = Vec::new();
    let (mut t, mut epoch) = (0u64, u64::MAX);
    let mut log = Vec::new();
    for _ in 0..traffic.packets {
        t += rng.gen_range(0..=2 * traffic.mean_gap_ns);
        if t / traffic.epoch_ns != epoch {
            epoch = t / traffic.epoch_ns;
            let quiet = rng.gen_bool(traffic.quiet);
            on = (0..traffic.flows).filter(|_| !quiet && rng.gen_bool(0.3)).collect();
        }
        let Some(&flow) = on.get(rng.gen_range(0..on.len().max(1))) else { continue };
        let pkt = Packet { flow: flow * 0x9E37_79B9_7F4A_7C15, len: rng.gen_range(40..=1500), ..Packet::default() };
        if fp.on_arrival(Instant(t), &pkt).is_pass() {
            log.push((t, pkt.len as u64));
        }
    }
    log
}

/// max over windows of passed − (B + R·Δt), in nano-bytes (≤ 0 when the bound holds). One pass:
/// for window end j, the worst start maximises R·t_i − (bytes passed before i).
fn worst_excess_nanobytes(log: &[(u64, u64)], rate: u64, bucket: u64) -> i128 {
    let (mut before, mut best_start, mut worst) = (0i128, i128::MIN, i128::MIN);
    for &(t, len) in log {
        best_start = best_start.max(rate as i128 * t as i128 - before);
        before += len as i128 * 1_000_000_000;
        let excess = before - rate as i128 * t as i128 + best_start - bucket as i128 * 1_000_000_000;
        worst = worst.max(excess);
    }
    worst
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(0xfa1e), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn passed_bytes_never_exceed_bucket_plus_rate(
        depth in 1u32..=4,
        width_log2 in 1u32..=4,
        flows in 20u64..=120,
        rate in 50_000u64..=2_000_000,
        bucket in 3_000u64..=200_000,
        unit in prop::sample::select(vec![100u64, 500, 1500]),
        epoch_ms in 5u64..=200,
        overload in 1u64..=4,
        quiet in 0.0f64..0.6,
        seed in any::<u64>(),
    ) {
        let mut cfg = FairPolicerConfig::new(Rate(rate), bucket);
        cfg.sketch_depth = depth;
        cfg.sketch_width = 1 << width_log2;
        cfg.token_unit = Bytes(unit.min(bucket));
        cfg.seed = seed;
        let mut fp = FairPolicer::new(&cfg);
        // Mean packet 770 B offered at `overload` × R while about 30 % of the flows are on.
        let mean_gap_ns = 770 * 1_000_000_000 / (rate * overload);
        let traffic = Traffic { flows, epoch_ns: epoch_ms * 1_000_000, quiet, mean_gap_ns, packets: 6_000, seed };
        let log = passed(&mut fp, &traffic);
        let excess = worst_excess_nanobytes(&log, rate, bucket);
        prop_assert!(excess <= 0, "a window passed {} bytes more than B + R·Δt", excess / 1_000_000_000);
    }
}

/// Negative control for the window arithmetic: a log that passes B + R·Δt plus one byte is caught.
#[test]
fn the_window_check_catches_one_byte_too_many() {
    let (rate, bucket) = (1_000u64, 10_000u64);
    // B at t = 0, then R·1 s at t = 1 s: exactly the bound; one more byte breaks it.
    let exact = [(0u64, bucket), (1_000_000_000, rate)];
    assert_eq!(worst_excess_nanobytes(&exact, rate, bucket), 0);
    let over = [(0u64, bucket), (1_000_000_000, rate + 1)];
    assert_eq!(worst_excess_nanobytes(&over, rate, bucket), 1_000_000_000);
}

/// 001's sizing at 100 Mbit/s (B = 6.7 MB, 4 × 1024 sketch) with 2,500 on/off flows: the excess
/// over B + R·Δt in the worst window (the figure docs/policers.md quotes).
#[test]
fn paper_sizing_with_thousands_of_on_off_flows_keeps_the_bound() {
    let (rate, bucket) = (12_500_000u64, 6_700_000u64);
    let mut fp = FairPolicer::new(&FairPolicerConfig::new(Rate(rate), bucket));
    let traffic = Traffic { flows: 2_500, epoch_ns: 50_000_000, quiet: 0.8, mean_gap_ns: 770 * 1_000_000_000 / (3 * rate), packets: 1_000_000, seed: 5 };
    let log = passed(&mut fp, &traffic);
    let excess = worst_excess_nanobytes(&log, rate, bucket);
    let s = fp.stats();
    println!("worst window: {} bytes over B + R·Δt; {} residues, {} bytes owed in all", excess / 1_000_000_000, s.residue_clears, s.residue_bytes);
    assert!(excess <= 0, "a window passed {} bytes more than B + R·Δt", excess / 1_000_000_000);
}
