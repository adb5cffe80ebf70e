//! Validation scenarios (scenarios/validate/) against the papers' claims, with tolerances a
//! wrong model fails. Every run is seeded; durations are the scenario files' own (each run
//! takes well under a second of CPU except where noted).

use ratekit_lab::summary::Summary;
use ratekit_sim::RunOptions;
use std::path::PathBuf;

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/validate").join(name)
}

fn run_text(text: &str, name: &str, keep_series: bool) -> (Summary, ratekit_lab::series::Series) {
    let r = ratekit_lab::scenario::parse(text, name).unwrap_or_else(|e| panic!("{e}"));
    ratekit_sim::run(&r, None, RunOptions { keep_series, ..RunOptions::default() }).expect("run")
}

fn run(name: &str) -> Summary {
    let text = std::fs::read_to_string(scenario(name)).unwrap();
    run_text(&text, name, false).0
}

fn goodput_share(s: &Summary, cc: &str) -> f64 {
    let total: f64 = s.flows.iter().map(|f| f.mean_goodput_bps).sum();
    s.flows.iter().filter(|f| f.cc == cc).map(|f| f.mean_goodput_bps).sum::<f64>() / total
}

#[test]
fn token_bucket_policer_lets_bbr_starve_cubic() {
    // 001 Fig. 2: BBR takes ≈ 90 % of a 10 Mbit/s, 50 KB policer against one CUBIC flow.
    let s = run("policer-bbr-vs-cubic.toml");
    let bbr = goodput_share(&s, "bbr");
    assert!((0.80..0.995).contains(&bbr), "BBR share {bbr:.3}, expected ≈ 0.9");
    let a = &s.aggregates[0];
    assert!(a.mean_jain < 0.75, "Jain {:.3} should show the unfairness", a.mean_jain);
    assert!((0.9..1.0).contains(&a.mean_normalized_throughput), "{a:?}");
}

/// The fair enforcers' claim (001 §V, 000 §6): BBR and CUBIC split the rate evenly and the
/// aggregate still reaches it.
fn assert_bbr_and_cubic_share_fairly(file: &str) {
    let s = run(file);
    let a = &s.aggregates[0];
    assert!(a.mean_jain >= 0.95, "{file}: Jain {:.3}", a.mean_jain);
    let bbr = goodput_share(&s, "bbr");
    assert!((0.4..0.6).contains(&bbr), "{file}: BBR share {bbr:.3}");
    assert!(a.mean_normalized_throughput > 0.9, "{file}: {a:?}");
}

#[test]
fn fair_policer_shares_fairly_between_bbr_and_cubic() {
    assert_bbr_and_cubic_share_fairly("fairpolicer-bbr-vs-cubic.toml");
}

#[test]
fn bcpqp_shares_fairly_between_bbr_and_cubic() {
    assert_bbr_and_cubic_share_fairly("bcpqp-bbr-vs-cubic.toml");
}

#[test]
fn drr_shaper_as_the_link_queue_is_fair_and_holds_the_rate() {
    // The queueing path: the shaper is the aggregate link's queue, woken by its next_wakeup.
    let s = run("shaper-bbr-vs-cubic.toml");
    let a = &s.aggregates[0];
    assert!(a.mean_jain >= 0.95, "Jain {:.3}", a.mean_jain);
    assert!((0.94..0.97).contains(&a.mean_normalized_throughput), "{a:?}");
    assert!(a.drop_rate < 0.01, "a shaper queues instead of dropping: {a:?}");
}

#[test]
fn reno_needs_a_bdp_squared_phantom_queue() {
    // 000 Fig. 4c: with B = 130 KB the queue empties and Reno stays below r; 1000 KB reaches r
    // (goodput excludes headers, so "r" is 1448/1500 ≈ 0.965 of it).
    let small = run("pqp-reno-130kb.toml").aggregates[0].mean_normalized_throughput;
    let large = run("pqp-reno-1000kb.toml").aggregates[0].mean_normalized_throughput;
    assert!(small < 0.88, "130 KB: {small:.3} should under-enforce");
    assert!(large > 0.93, "1000 KB: {large:.3} should reach r");
}

#[test]
fn reno_under_random_loss_follows_mathis() {
    // Goodput = (MSS/RTT)·√(3/(2p)); checked at two loss rates so the √p scaling is tested too.
    let text = std::fs::read_to_string(scenario("reno-mathis.toml")).unwrap();
    let mut ratios = Vec::new();
    for p in [0.01f64, 0.0025] {
        let t = text.replace("loss = 0.01", &format!("loss = {p}"));
        let s = run_text(&t, "reno-mathis.toml", false).0;
        let mathis = 1448.0 * 8.0 / 0.1 * (1.5 / p).sqrt();
        let ratio = s.flows[0].mean_goodput_bps / mathis;
        assert!((0.85..1.25).contains(&ratio), "p = {p}: goodput / Mathis = {ratio:.3}");
        ratios.push(ratio);
    }
    assert!((ratios[0] / ratios[1] - 1.0).abs() < 0.2, "√p scaling off: {ratios:?}");
}

#[test]
fn cubic_window_follows_rfc9438() {
    let text = std::fs::read_to_string(scenario("cubic-window.toml")).unwrap();
    let (_, series) = run_text(&text, "cubic-window.toml", true);
    let cwnd: Vec<f64> = series.cwnd.iter().map(|w| w[0] as f64).collect();
    let dt = 0.1;
    // A multiplicative decrease spreads over one RTT under PRR, so it may begin in one sample and
    // fall below 0.95 × the window at the loss in the next: a cut is the first sample below 0.95 ×
    // the largest of the three before it, and that largest is the window at the loss.
    let peak = |i: usize| cwnd[i.saturating_sub(3)..i].iter().cloned().fold(0.0, f64::max);
    let mut cuts: Vec<usize> = Vec::new();
    for i in 1..cwnd.len() {
        if cwnd[i] < 0.95 * peak(i) && cuts.last().is_none_or(|&c| i > c + 5) {
            cuts.push(i);
        }
    }
    assert!(cuts.len() >= 4, "expected several loss epochs, got {cuts:?}");
    let (c, beta) = (0.4, 0.7);
    let mut checked = 0;
    let mut last_max = 0.0;
    for (n, &i) in cuts.iter().enumerate() {
        let w_loss = peak(i);
        let after = cwnd[i..(i + 5).min(cwnd.len())].iter().cloned().fold(f64::MAX, f64::min);
        assert!((after / w_loss - beta).abs() < 0.03, "cut to {after} from {w_loss}: not β = 0.7");
        // RFC 9438 §4.7 fast convergence: a loss below the previous W_max lowers the plateau.
        let w_max = if w_loss < last_max { w_loss * (1.0 + beta) / 2.0 } else { w_loss };
        last_max = w_max;
        let k = ((w_max - after) / c).cbrt();
        let Some(&next) = cuts.get(n + 1) else { break };
        if n == 0 {
            continue; // the epoch after slow start is where HyStart and RTT inflation mix in
        }
        for (j, &w) in cwnd.iter().enumerate().take(next - 1).skip(i + 10) {
            let t = (j - i) as f64 * dt;
            let predicted = c * (t - k).powi(3) + w_max;
            let err = (w - predicted).abs() / w_max;
            assert!(err < 0.04, "t = {t:.1} s after the cut: cwnd {w} vs RFC 9438 {predicted:.0} (W_max {w_max}, K {k:.2} s)");
            checked += 1;
        }
    }
    assert!(checked > 50, "too few samples checked: {checked}");
}

#[test]
fn runs_are_deterministic_per_seed() {
    let text = std::fs::read_to_string(scenario("policer-bbr-vs-cubic.toml")).unwrap().replace("60s", "5s").replace("warmup = \"5s\"", "warmup = \"1s\"");
    let r = ratekit_lab::scenario::parse(&text, "x").unwrap();
    let a = ratekit_sim::run(&r, Some(7), RunOptions::default()).unwrap().0;
    let b = ratekit_sim::run(&r, Some(7), RunOptions::default()).unwrap().0;
    let key = |s: &Summary| (s.engine.as_ref().unwrap().events, s.flows.iter().map(|f| f.delivered_bytes).collect::<Vec<_>>());
    assert_eq!(key(&a), key(&b));
    // Once BBR's long-term (policer) mode holds its gain at 1 the cycle phase no longer matters,
    // so two seeds may agree; among a few, some must differ.
    let differing = (8..12).filter(|&seed| key(&ratekit_sim::run(&r, Some(seed), RunOptions::default()).unwrap().0) != key(&a)).count();
    assert!(differing > 0, "the seed must matter (BBR's gain-cycle phase is random)");
}

#[test]
fn bcpqp_mix_of_100_aggregates_enforces_the_rate() {
    // speed-100-aggregates.toml shortened to 4 s (the full 60 s is the speed benchmark, not a
    // CI test). Aggregates of backlogged flows must get ≈ r together (goodput is 0.965 of the
    // wire rate) and stay bounded in the tail; on-off-only aggregates must not exceed r.
    // No single aggregate may pass more than burst control lets n flows starting together
    // through (000 §4): a burst of at most θ+·X·(ln n + 0.5772) beyond r, X = r·T, θ+ = 1.5,
    // T = 100 ms, n = 10, which over the 2 s measured is a mean of at most
    // 0.965·(1 + 1.5·0.1·2.88/2) = 1.17. Phantom queues alone bound nothing this early
    // (Theorem 1: r·Δt + ΣB, B = 10 MB per queue). The bound was 1.05, which measured how far
    // the start-up had got rather than the enforcement: ten CUBIC flows at 2 ms (aggregate 5)
    // run above r while their phantom queues fill, at 1.14 over 4-6 s and 1.046 over the full
    // 60 s; with Linux's Loss-to-Recovery transition they leave their start-up losses sooner
    // and that phase begins inside the window (1.072).
    // One aggregate's 2 s mean is no tighter than 0.75: ten BBR (aggregate 10) or Vegas
    // (aggregate 15) flows at 2 ms RTT lose about half their packets to the policer, and their
    // mean varies with the seed, 0.78-0.92 over seeds 1-5 with either tail-loss-probe timing
    // (the 10 ms PTO floor of older kernels or Linux 6.x's 2·srtt + 2 ms), and 0.79 for
    // aggregate 15 over the full 60 s; the mean over all backlogged aggregates stays 0.96-0.97.
    let text = std::fs::read_to_string(scenario("speed-100-aggregates.toml"))
        .unwrap()
        .replace("duration = \"60s\"", "duration = \"4s\"")
        .replace("warmup = \"5s\"", "warmup = \"2s\"");
    let s = run_text(&text, "speed-100-aggregates.toml", false).0;
    assert_eq!(s.aggregates.len(), 100);
    assert_eq!(s.flows.len(), 1000);
    let ccs: std::collections::HashSet<_> = s.flows.iter().map(|f| f.cc.as_str()).collect();
    assert_eq!(ccs.len(), 4, "{ccs:?}");
    let backlogged: Vec<_> = s.aggregates[..17].iter().chain(&s.aggregates[50..67]).collect();
    let together = backlogged.iter().map(|a| a.mean_normalized_throughput).sum::<f64>() / backlogged.len() as f64;
    assert!((0.93..1.02).contains(&together), "backlogged aggregates together: {together:.3}");
    for a in backlogged {
        assert!((0.75..1.17).contains(&a.mean_normalized_throughput), "aggregate {}: {:.3}", a.id, a.mean_normalized_throughput);
        assert!(a.p99_normalized_throughput < 1.5, "aggregate {}: p99 {:.3}", a.id, a.p99_normalized_throughput);
    }
    for a in s.aggregates[17..34].iter().chain(&s.aggregates[67..84]) {
        assert!(a.mean_normalized_throughput < 1.0, "on-off aggregate {} above r", a.id);
    }
}
