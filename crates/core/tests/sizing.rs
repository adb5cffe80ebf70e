//! Sizing rules against the papers' worked examples, and the two derivations re-done
//! independently (Appendix A's sawtooth area, Eq. 8 by numerical integration).

use ratekit_core::sizing::{bdp_bytes, phantom_queue_bytes, Cubic, EvaluationSizes, DEFAULT_MSS};
use ratekit_core::{Duration, Rate};

fn mbit(m: u64) -> Rate {
    Rate::from_bits_per_sec(m * 1_000_000)
}

fn close(got: u64, want: f64, rel: f64) -> bool {
    (got as f64 - want).abs() <= rel * want
}

#[test]
fn bdp() {
    assert_eq!(bdp_bytes(mbit(10), Duration::from_millis(100)), 125_000);
    assert_eq!(bdp_bytes(mbit(200), Duration::from_millis(2)), 50_000);
}

#[test]
fn phantom_rule_worked_examples() {
    // 000 §3.4 / algorithms.md §2 erratum: 10 Mbit/s, 100 ms → 83.3²/18 · 1500 B ≈ 580 KB
    // (the paper's "1000 KB" does not follow from its own formula).
    let b = phantom_queue_bytes(mbit(10), Duration::from_millis(100), DEFAULT_MSS);
    assert_eq!(b, 578_704);
    // 000 §3.4: "15 Mbps ... maximum RTT of 100 ms at 1.4MBs": the formula gives 1.30 MB.
    let b = phantom_queue_bytes(mbit(15), Duration::from_millis(100), DEFAULT_MSS);
    assert_eq!(b, 1_302_083);
    assert!(close(b, 1.4e6, 0.08));
}

#[test]
fn phantom_rule_is_the_reno_sawtooth_area() {
    // Appendix A, re-derived per RTT: after a loss cwnd = 2/3 BDP and grows by one packet per
    // RTT; the phantom queue gains (cwnd − BDP)^+ packets each RTT until cwnd = 4/3 BDP. The
    // peak backlog must fit in the queue.
    for (rate, rtt_ms) in [(10, 100), (50, 50), (200, 25), (100, 10)] {
        let bdp = mbit(rate).as_f64() * rtt_ms as f64 * 1e-3 / DEFAULT_MSS as f64;
        let mut cwnd = (2.0 * bdp / 3.0).round();
        let mut backlog = 0.0;
        while cwnd <= (4.0 * bdp / 3.0).round() {
            backlog += (cwnd - bdp).max(0.0);
            cwnd += 1.0;
        }
        let rule = phantom_queue_bytes(mbit(rate), Duration::from_millis(rtt_ms), DEFAULT_MSS);
        assert!(close(rule, backlog * DEFAULT_MSS as f64, 0.06), "{rate} Mbit/s {rtt_ms} ms: rule {rule}, sawtooth {}", backlog * 1500.0);
    }
}

#[test]
fn cubic_g_recomputed() {
    let g = Cubic::default().g();
    assert!((g - 0.035722).abs() < 1e-6, "{g}");
    // The paper rounds it to 0.036.
    assert!((g - 0.036).abs() < 0.0005);
}

#[test]
fn fair_policer_worked_example() {
    // 001 §V-A: 10 Mbit/s, D = 10 ms: FairPolicer 180 KB (Eq. 16), a single-flow policer 90 KB
    // (Eq. 12).
    let (r, d) = (mbit(10), Duration::from_millis(10));
    let fp = Cubic::default().fair_policer_bucket_bytes(r, d, DEFAULT_MSS);
    let single = Cubic::default().single_flow_bucket_bytes(r, d, DEFAULT_MSS);
    assert_eq!(fp, 181_056);
    assert_eq!(single, 90_528);
    assert!(close(fp, 180e3, 0.02) && close(single, 90e3, 0.02));
}

#[test]
fn eq12_matches_numerical_integration_of_eq8() {
    // Eq. 8: B = R·τ − ∫₀^τ w(t)/D dt with w(t) = C(t − K)³ + w_max, w_max from Eq. 10 and
    // τ where w(τ) = R·D; integrate numerically and compare with the closed form.
    let cubic = Cubic::default();
    for (rate, rtt_ms) in [(10u64, 10u64), (10, 100), (100, 50), (1, 200)] {
        let d = rtt_ms as f64 * 1e-3;
        let r = mbit(rate).as_f64() / DEFAULT_MSS as f64;
        let wmax = 4.0 / (4.0 - cubic.beta) * r * d;
        let k = (wmax * cubic.beta / cubic.c).cbrt();
        let tau = k - ((wmax - r * d) / cubic.c).cbrt();
        let n = 100_000;
        let h = tau / n as f64;
        let sent: f64 = (0..n).map(|i| { let t = (i as f64 + 0.5) * h; (cubic.c * (t - k).powi(3) + wmax) / d * h }).sum();
        let b_numeric = (r * tau - sent) * DEFAULT_MSS as f64;
        let b = cubic.single_flow_bucket_bytes(mbit(rate), Duration::from_millis(rtt_ms), DEFAULT_MSS);
        assert!(close(b, b_numeric, 1e-4), "{rate} Mbit/s {rtt_ms} ms: {b} vs {b_numeric}");
    }
}

#[test]
fn evaluation_sizes_paper_and_scripts() {
    let (r, d) = (mbit(10), Duration::from_millis(100));
    let p = EvaluationSizes::paper(r, d, DEFAULT_MSS);
    assert_eq!(p.policer, 125_000);
    assert_eq!(p.shaper_queue, 125_000);
    // Reno's BDP² term (578 704 B) beats CUBIC's (≈ 390 KB) at 100 ms.
    assert_eq!(p.fair_policer, 578_704);
    assert_eq!(p.policer_plus, p.fair_policer);
    assert_eq!(p.bcpqp, 5_787_040);
    // At a 2 ms RTT and 1.5 Mbit/s CUBIC's term dominates (000 §6.1: "for small values of RTT
    // and rate, Cubic requires a larger bucket").
    let small = EvaluationSizes::paper(Rate::from_bits_per_sec(1_500_000), Duration::from_millis(2), DEFAULT_MSS);
    let cubic = Cubic::default().fair_policer_bucket_bytes(Rate::from_bits_per_sec(1_500_000), Duration::from_millis(2), DEFAULT_MSS);
    assert_eq!(small.fair_policer, cubic);
    assert!(cubic > phantom_queue_bytes(Rate::from_bits_per_sec(1_500_000), Duration::from_millis(2), DEFAULT_MSS));

    // The public scripts: 2 × BDP policer, and the CUBIC term in bytes^(4/3): 0.72 · 125000^(4/3).
    let s = EvaluationSizes::public_scripts(r, d);
    assert_eq!(s.policer, 250_000);
    assert_eq!(s.fair_policer, 4_500_000);
    assert_eq!(s.bcpqp, 45_000_000);
}
