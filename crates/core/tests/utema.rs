//! UTEMA bandwidth estimation (004 Algorithm 4) tracking a rate step as in 004 Fig. 6.

use ratekit_core::exp_decay::ExpMode;
use ratekit_core::utema::BandwidthEstimator;
use ratekit_core::{Duration, Instant};

const GBIT: f64 = 125e6; // bytes/s
const PKT: u64 = 1500;

/// Feeds back-to-back packets at `rate` for `span`, returning the time reached.
fn run(est: &mut BandwidthEstimator, mut t: f64, rate: f64, span: f64, samples: &mut Vec<(f64, f64)>) -> f64 {
    let gap = PKT as f64 / rate * 1e9;
    let end = t + span;
    while t < end {
        t += gap;
        est.on_dequeue(Instant(t.round() as u64), PKT, true);
        samples.push((t, est.bytes_per_sec()));
    }
    t
}

#[test]
fn tracks_a_one_g_quarter_g_one_g_step() {
    let m = 50e6; // M = 50 ms
    for mode in [ExpMode::Fixed, ExpMode::Float] {
        let mut est = BandwidthEstimator::new(GBIT, Duration(m as u64), mode);
        let mut s = Vec::new();
        let warm = 250e6;
        let t1 = run(&mut est, 0.0, GBIT, warm, &mut s);
        assert!((est.bytes_per_sec() / GBIT - 1.0).abs() < 0.005, "{mode:?} {}", est.bytes_per_sec());
        let before = s.len();
        let t2 = run(&mut est, t1, GBIT / 4.0, 400e6, &mut s);
        // UTEMA's ratio of sums after τ at the new rate (Eq. 1 summed over both segments):
        // C(τ) = [C_new(1 − e^(−τ/M)) + C_old(e^(−τ/M) − e^(−(τ+T0)/M))] / (1 − e^(−(τ+T0)/M)).
        for &(t, c) in &s[before..] {
            let tau = t - t1;
            let (e, e0) = ((-tau / m).exp(), (-(tau + warm) / m).exp());
            let want = (GBIT / 4.0 * (1.0 - e) + GBIT * (e - e0)) / (1.0 - e0);
            assert!((c / want - 1.0).abs() < 0.01, "{mode:?} τ={tau} est {c} want {want}");
        }
        assert!((est.bytes_per_sec() / (GBIT / 4.0) - 1.0).abs() < 0.01, "{mode:?}");
        run(&mut est, t2, GBIT, 400e6, &mut s);
        assert!((est.bytes_per_sec() / GBIT - 1.0).abs() < 0.01, "{mode:?}");
    }
}

#[test]
fn idle_gaps_do_not_count_as_slow_transmission() {
    let mut est = BandwidthEstimator::new(GBIT, Duration::from_millis(50), ExpMode::Fixed);
    let gap = (PKT as f64 / GBIT * 1e9) as u64;
    let mut t = 0;
    for burst in 0..200 {
        // Bursts of 10 back-to-back packets, then 1 ms idle: the last of each burst leaves an
        // empty queue, so the idle gap after it is not a transmission time.
        for i in 0..10 {
            t += gap;
            est.on_dequeue(Instant(t), PKT, i < 9);
        }
        t += 1_000_000;
        let _ = burst;
    }
    assert!((est.bytes_per_sec() / GBIT - 1.0).abs() < 0.01, "{}", est.bytes_per_sec());
}
