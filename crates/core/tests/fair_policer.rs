//! FairPolicer: hand vectors of the threshold and round-robin allocation, bounded work after
//! idle, long-run shares under open-loop overload (fair and weighted), a flow whose estimate is
//! inflated by a collision still being served, and the count-min error bound.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::count_min::CountMin;
use ratekit_core::fair_policer::{FairPolicer, FairPolicerConfig};
use ratekit_core::{Bytes, DropReason, EnforcerConfig, Instant, Packet, Policer, Rate, Verdict};

fn pkt(flow: u64, len: u32) -> Packet {
    Packet { flow, len, ..Packet::default() }
}

fn ms(m: u64) -> Instant {
    Instant(m * 1_000_000)
}

fn small(rate: u64, bucket: u64, unit: u64) -> FairPolicer {
    let mut cfg = FairPolicerConfig::new(Rate(rate), bucket);
    cfg.token_unit = Bytes(unit);
    cfg.sketch_width = 1 << 16; // no collisions among the handful of flows used here
    FairPolicer::new(&cfg)
}

#[test]
fn threshold_and_round_robin_hand_vector() {
    // R = 1000 B/s (100 B per 100 ms), B = 3000, unit 100.
    let mut fp = small(1000, 3000, 100);
    assert!(fp.on_arrival(ms(0), &pkt(1, 1000)).is_pass()); // o1 = 1000 < T = 3000
    assert!(fp.on_arrival(ms(0), &pkt(1, 1000)).is_pass()); // o1 = 1000 < T = 2000
    assert_eq!(fp.on_arrival(ms(0), &pkt(1, 500)), Verdict::Drop(DropReason::FlowThreshold)); // 2000 ≥ 1000
    assert!(fp.on_arrival(ms(0), &pkt(2, 500)).is_pass());
    assert_eq!(fp.on_arrival(ms(0), &pkt(3, 600)), Verdict::Drop(DropReason::Overlimit)); // k = 500
    assert_eq!((fp.tokens(), fp.active_len()), (500, 2));
    // 100 ms: one unit to the head (flow 1), which moves to the tail: list [2, 1].
    assert!(fp.on_arrival(ms(100), &pkt(3, 600)).is_pass());
    assert_eq!((fp.estimate(1), fp.tokens(), fp.active_len()), (1900, 0, 3));
    // 350 ms: 250 B of credit: 100 to flow 2, 100 to flow 1, 50 wait for flow 3's turn.
    assert_eq!(fp.on_arrival(ms(350), &pkt(4, 300)), Verdict::Drop(DropReason::Overlimit));
    assert_eq!((fp.estimate(1), fp.estimate(2), fp.estimate(3)), (1800, 400, 600));
    assert_eq!(fp.tokens(), 200);
    // 400 ms: flow 3's turn completes with the carried 50 B.
    assert!(fp.on_arrival(ms(400), &pkt(4, 300)).is_pass());
    assert_eq!(fp.estimate(3), 500);
}

#[test]
fn leftover_tokens_go_to_the_next_flow() {
    let mut fp = small(1000, 3000, 1000);
    assert!(fp.on_arrival(ms(0), &pkt(1, 100)).is_pass());
    assert!(fp.on_arrival(ms(0), &pkt(2, 1000)).is_pass());
    // 1 s = 1000 B: flow 1 needs only 100 and leaves; the other 900 stay as credit for flow 2's
    // turn (001 §IV-D would waste them) ...
    assert!(fp.on_arrival(ms(1000), &pkt(3, 1)).is_pass());
    assert_eq!((fp.estimate(1), fp.estimate(2), fp.active_len()), (0, 1000, 2));
    // ... which completes 100 ms later: with the waste, flow 2 would need another 900 ms.
    assert!(fp.on_arrival(ms(1100), &pkt(3, 1)).is_pass());
    assert_eq!((fp.estimate(2), fp.active_len()), (0, 1));
}

#[test]
fn bounded_work_after_a_long_idle_period() {
    let mut cfg = FairPolicerConfig::new(Rate::from_bits_per_sec(10_000_000), 181_056);
    cfg.token_unit = Bytes(100);
    let mut fp = FairPolicer::new(&cfg);
    for f in 0..1000 {
        fp.on_arrival(ms(0), &pkt(f, 150));
    }
    let (occupied, listed) = (fp.occupied(), fp.active_len() as u64);
    assert!(occupied > 100_000 && listed >= 600, "{occupied} {listed}");
    // An hour later: the list drains and the loop stops; it does not spin over 4.5 GB of tokens.
    assert!(fp.on_arrival(ms(3_600_000), &pkt(5000, 1500)).is_pass());
    assert!(fp.stats().allocation_steps <= occupied / 100 + listed, "{}", fp.stats().allocation_steps);
    assert_eq!(fp.occupied(), 1500);
    assert_eq!(fp.active_len(), 1);
}

/// Open-loop Poisson arrivals of 1500 B packets per flow; returns passed bytes per flow.
fn run_open_loop(fp: &mut FairPolicer, flows: &[(u64, u16, f64)], secs: f64, seed: u64) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut next: Vec<f64> = flows.iter().map(|_| 0.0).collect();
    let mut passed = vec![0u64; flows.len()];
    loop {
        let (i, &t) = next.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)).unwrap();
        if t >= secs {
            return passed;
        }
        let (flow, class, mbit) = flows[i];
        let p = Packet { flow, class, len: 1500, ..Packet::default() };
        if fp.on_arrival(Instant((t * 1e9) as u64), &p).is_pass() {
            passed[i] += 1500;
        }
        let mean_gap = 1500.0 * 8.0 / (mbit * 1e6);
        next[i] += -mean_gap * (1.0 - rng.gen::<f64>()).ln();
    }
}

fn mbit_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs / 1e6
}

#[test]
fn long_run_shares_are_max_min_fair() {
    let cfg = FairPolicerConfig::new(Rate::from_bits_per_sec(10_000_000), 181_056);
    let mut fp = FairPolicer::new(&cfg);
    // Offered 2, 4, 8, 16 Mbit/s into 10 Mbit/s: max-min shares 2, 2.67, 2.67, 2.67.
    let flows = [(11, 0, 2.0), (22, 0, 4.0), (33, 0, 8.0), (44, 0, 16.0)];
    let secs = 30.0;
    let got: Vec<f64> = run_open_loop(&mut fp, &flows, secs, 7).iter().map(|&b| mbit_per_s(b, secs)).collect();
    let want = [2.0, 8.0 / 3.0, 8.0 / 3.0, 8.0 / 3.0];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 0.05 * w, "got {got:?}, want {want:?}");
    }
    let total: f64 = got.iter().sum();
    assert!(total <= 10.0 * (1.0 + 0.2 / secs) && total > 9.8, "{total}");
}

#[test]
fn weighted_variant_shares_follow_weights() {
    let mut cfg = FairPolicerConfig::new(Rate::from_bits_per_sec(10_000_000), 181_056);
    cfg.weights = vec![1, 2, 3, 4];
    let mut fp = FairPolicer::new(&cfg);
    let flows = [(11, 0, 10.0), (22, 1, 10.0), (33, 2, 10.0), (44, 3, 10.0)];
    let secs = 30.0;
    let got: Vec<f64> = run_open_loop(&mut fp, &flows, secs, 9).iter().map(|&b| mbit_per_s(b, secs)).collect();
    for (i, g) in got.iter().enumerate() {
        let w = (i + 1) as f64;
        assert!((g - w).abs() < 0.07 * w, "got {got:?}, want 1:2:3:4 Mbit/s");
    }
}

#[test]
fn aggregate_never_exceeds_bucket_plus_rate() {
    let cfg = FairPolicerConfig::new(Rate(1_250_000), 181_056);
    let mut fp = FairPolicer::new(&cfg);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut t = 0u64;
    let mut log = Vec::new();
    for _ in 0..50_000 {
        t += rng.gen_range(0..600_000); // ~2× overload of 1500 B packets on average
        let p = pkt(rng.gen_range(0..40), rng.gen_range(40..1500));
        if fp.on_arrival(Instant(t), &p).is_pass() {
            log.push((t, p.len as u64));
        }
    }
    // Passed bytes over any window [t_i, t_j] ≤ B + R·(t_j − t_i); windows from every 97th start.
    for i in (0..log.len()).step_by(97) {
        let mut acc = 0u128;
        for &(tj, len) in &log[i..] {
            acc += len as u128;
            let bound = 181_056u128 * 1_000_000_000 + 1_250_000u128 * (tj - log[i].0) as u128;
            assert!(acc * 1_000_000_000 <= bound);
        }
    }
}

#[test]
fn a_flow_inflated_by_a_collision_still_gets_served() {
    // d = 2 rows of 4 columns. B shares its row-0 column with A and its row-1 column with C,
    // so B's estimate is non-zero before its first packet and the paper's rule ("join when
    // the estimate was 0") never lists it. When A and C have drained their own bytes and left,
    // B's bytes would stay in the sketch for ever: B starves and the bucket leaks.
    let mut cfg = FairPolicerConfig::new(Rate(100_000), 60_000);
    cfg.sketch_depth = 2;
    cfg.sketch_width = 4;
    cfg.token_unit = Bytes(500);
    let sk = CountMin::new(2, 4, cfg.seed);
    let a = 1u64;
    let b = (2..).find(|&k| sk.column(0, k) == sk.column(0, a) && sk.column(1, k) != sk.column(1, a)).unwrap();
    let c = (2..).find(|&k| sk.column(1, k) == sk.column(1, b) && sk.column(0, k) != sk.column(0, a)).unwrap();
    let mut fp = FairPolicer::new(&cfg);
    assert!(fp.on_arrival(ms(0), &pkt(a, 1500)).is_pass());
    assert!(fp.on_arrival(ms(0), &pkt(c, 1500)).is_pass());
    assert!(fp.estimate(b) > 0);
    assert!(fp.on_arrival(ms(1), &pkt(b, 1000)).is_pass());
    assert_eq!(fp.active_len(), 3);
    // A and C go quiet; B keeps sending 40 kB/s (below R = 100 kB/s) for 20 s: it must all pass.
    let mut passed = 0;
    for i in 0..800u64 {
        if fp.on_arrival(ms(25 + i * 25), &pkt(b, 1000)).is_pass() {
            passed += 1;
        }
    }
    assert_eq!(passed, 800);
    // And the bucket does not leak: once B stops, everything drains back.
    fp.on_arrival(ms(60_000), &pkt(99, 1));
    assert_eq!(fp.occupied(), 1);
}

#[test]
fn count_min_never_underestimates_and_meets_the_error_bound() {
    // 001 Theorem 1: error ≤ ε·N with probability ≥ 1 − δ, ε = e/w, δ = e^{−d}.
    let (d, w) = (3u32, 128u32);
    let eps_n_frac = std::f64::consts::E / w as f64;
    let delta = (-(d as f64)).exp();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (mut over_bound, mut total_keys) = (0usize, 0usize);
    for trial in 0..40u64 {
        let mut sk = CountMin::new(d, w, trial);
        let keys: Vec<(u64, u32)> = (0..400).map(|_| (rng.gen(), rng.gen_range(1..2000))).collect();
        let mut truth = std::collections::HashMap::new();
        for &(k, c) in &keys {
            sk.add(k, c);
            *truth.entry(k).or_insert(0u64) += c as u64;
        }
        // Strict turnstile: take back part of some counts, never more than the key holds.
        for &(k, c) in keys.iter().step_by(3) {
            let back = c / 2;
            sk.sub(k, back);
            *truth.get_mut(&k).unwrap() -= back as u64;
        }
        let n: u64 = truth.values().sum();
        for (&k, &t) in &truth {
            let est = sk.estimate(k) as u64;
            assert!(est >= t, "underestimate {est} < {t}");
            total_keys += 1;
            if (est - t) as f64 > eps_n_frac * n as f64 {
                over_bound += 1;
            }
        }
        assert_eq!(sk.row_sum(0), n);
    }
    let frac = over_bound as f64 / total_keys as f64;
    eprintln!("{over_bound} of {total_keys} estimates beyond e/w·N (δ = {delta:.3})");
    assert!(frac <= delta, "{frac} of estimates beyond ε·N, δ = {delta}");
}

#[test]
fn count_min_rows_hash_independently() {
    // With independent rows, P(error > 0) at depth d is about P(error > 0 at depth 1)^d.
    // Rows sharing one hash (a classic bug) would make depth 4 no better than depth 1.
    let frac_with_error = |d: u32| {
        let mut errs = 0;
        for seed in 0..20u64 {
            let mut sk = CountMin::new(d, 256, seed);
            let keys: Vec<u64> = (0..128u64).map(|i| i.wrapping_mul(0x9E37_79B9) ^ seed).collect();
            for &k in &keys {
                sk.add(k, 1);
            }
            errs += keys.iter().filter(|&&k| sk.estimate(k) > 1).count();
        }
        errs as f64 / (20.0 * 128.0)
    };
    let (p1, p4) = (frac_with_error(1), frac_with_error(4));
    eprintln!("P(error > 0): depth 1 {p1:.3}, depth 4 {p4:.4}");
    assert!(p1 > 0.2, "{p1}");
    assert!(p4 < 3.0 * p1.powi(4) + 0.01, "p1 = {p1}, p4 = {p4}");
}

#[test]
fn config_parses_and_names_bad_fields() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/enforcers/fairpolicer.toml");
    let cfg = EnforcerConfig::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap();
    cfg.build_policer().unwrap();
    let base = "kind = \"fair_policer\"\nrate = \"10mbit\"\nbucket = \"180kb\"\n";
    assert!(EnforcerConfig::from_toml(base).is_ok());
    for (extra, field) in [
        ("sketch_width = 1000\n", "sketch_width"),
        ("sketch_depth = 0\n", "sketch_depth"),
        ("sketch_depth = 17\n", "sketch_depth"),
        ("weights = [1, 0]\n", "weights[1]"),
        ("token_unit = \"1mb\"\n", "token_unit"),
    ] {
        let e = EnforcerConfig::from_toml(&format!("{base}{extra}")).unwrap_err();
        assert_eq!(e.field, field, "{extra}: {e}");
    }
    let e = EnforcerConfig::from_toml(&format!("{base}sketch_size = 3\n")).unwrap_err();
    assert!(e.message.contains("sketch_size"), "{e}");
}
