//! Token-bucket policer: exact conformance on hand vectors, an independent max-plus reference
//! on random traces, and Theorem 1's single-queue bound (accepted ≤ B + r·Δt).

use proptest::prelude::*;
use ratekit_core::token_bucket::{TokenBucket, TokenBucketConfig};
use ratekit_core::{Bytes, EnforcerConfig, Instant, Packet, Policer, Rate};

const NS: u128 = 1_000_000_000;

fn pkt(len: u32) -> Packet {
    Packet { len, ..Packet::default() }
}

#[test]
fn hand_vector_with_sub_byte_credit() {
    // 1000 B/s: one byte of credit per ms; bucket 3000 B starting with 1000 B.
    let cfg = TokenBucketConfig { initial: Some(Bytes(1000)), ..TokenBucketConfig::new(Rate(1000), 3000) };
    let mut tb = TokenBucket::new(&cfg);
    let vector: &[(u64, u32, bool, u64)] = &[
        // (time µs, bytes, passes, tokens after in whole bytes)
        (0, 1000, true, 0),
        (0, 1, false, 0),
        (500_000, 600, false, 500),
        (500_000, 500, true, 0),
        (10_000_000, 3000, true, 0), // capped at B: 9500 bytes of credit, 3000 kept
        (10_000_000, 1, false, 0),
        (10_001_000, 1, true, 0),
        (10_001_500, 1, false, 0), // half a byte is not enough
        (10_002_000, 2, false, 1), // the half byte was kept: 1.0 now
        (10_002_000, 1, true, 0),
        (10_002_700, 1, false, 0), // 0.7
        (10_003_000, 1, true, 0),  // 0.7 + 0.3 = exactly 1: credit is exact
        (10_003_000, 1, false, 0),
    ];
    let (mut passed_bytes, mut drops) = (0, 0);
    for (i, &(t, len, pass, tokens)) in vector.iter().enumerate() {
        let v = tb.on_arrival(Instant(t * 1000), &pkt(len));
        if v.is_pass() { passed_bytes += len; } else { drops += 1; }
        assert_eq!(v.is_pass(), pass, "row {i}: t={t}us len={len}");
        assert_eq!(tb.tokens(), tokens, "row {i}: tokens");
    }
    assert_eq!((passed_bytes, drops), (1000 + 500 + 3000 + 3, 7));
}

#[test]
fn toml_config_and_field_errors() {
    let cfg = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = \"64kb\"\n").unwrap();
    match cfg {
        EnforcerConfig::TokenBucket(c) => {
            assert_eq!(c.rate, Rate(1_250_000));
            assert_eq!(c.burst, Bytes(65536));
            assert_eq!(c.initial, None);
        }
        other => panic!("wrong kind {}", other.kind()),
    }
    let e = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 100\ninitial = 200\n").unwrap_err();
    assert_eq!(e.field, "initial", "{e}");
    let e = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = \"0mbit\"\nburst = 100\n").unwrap_err();
    assert!(e.message.contains("0mbit"), "{e}");
    let e = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = \"1mbit\"\nburst = 100\nburts = 3\n").unwrap_err();
    assert!(e.message.contains("burts"), "{e}");
}

#[test]
fn shipped_example_builds() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/enforcers/policer.toml")).unwrap();
    let cfg = EnforcerConfig::from_toml(&text).unwrap();
    assert_eq!(cfg.kind(), "token_bucket");
    cfg.build_policer().unwrap();
}

/// Verdicts from the max-plus closed form, written independently of the incremental code:
/// tokens before packet j = min( m + r·t_j − A[0, j),  min_k (B + r·(t_j − t_k) − A[k, j)) ),
/// where A[k, j) is the bytes accepted among packets k..j and k ranges over earlier packets
/// (the bucket may have been clamped full at any of their arrivals) and j itself.
fn reference(rate: u64, burst: u64, initial: u64, arrivals: &[(u64, u32)]) -> Vec<bool> {
    let mut passed: Vec<bool> = Vec::with_capacity(arrivals.len());
    for (j, &(tj, len)) in arrivals.iter().enumerate() {
        let accepted_from = |k: usize| -> u128 {
            (k..j).filter(|&i| passed[i]).map(|i| arrivals[i].1 as u128).sum::<u128>() * NS
        };
        let mut tokens = (initial as u128 * NS + rate as u128 * tj as u128) as i128 - accepted_from(0) as i128;
        for (k, &(tk, _)) in arrivals.iter().enumerate().take(j + 1) {
            let cand = (burst as u128 * NS + rate as u128 * (tj - tk) as u128) as i128 - accepted_from(k) as i128;
            tokens = tokens.min(cand);
        }
        passed.push(tokens >= len as i128 * NS as i128);
    }
    passed
}

fn trace() -> impl Strategy<Value = (u64, u64, u64, Vec<(u64, u32)>)> {
    (1u64..20_000_000, 1u64..200_000, 0u64..=100)
        .prop_flat_map(|(rate, burst, fill_pct)| {
            let gaps = prop::collection::vec((0u64..5_000_000, 1u32..9000), 1..120);
            (Just(rate), Just(burst), Just(burst * fill_pct / 100), gaps)
        })
        .prop_map(|(rate, burst, initial, gaps)| {
            let mut t = 0;
            let arrivals = gaps.into_iter().map(|(gap, len)| { t += gap; (t, len) }).collect();
            (rate, burst, initial, arrivals)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(0x7b), ..ProptestConfig::default() })]

    #[test]
    fn matches_max_plus_reference_and_theorem_1_bound((rate, burst, initial, arrivals) in trace()) {
        let cfg = TokenBucketConfig { initial: Some(Bytes(initial)), ..TokenBucketConfig::new(Rate(rate), burst) };
        let mut tb = TokenBucket::new(&cfg);
        let got: Vec<bool> = arrivals.iter().map(|&(t, len)| tb.on_arrival(Instant(t), &pkt(len)).is_pass()).collect();
        prop_assert_eq!(&got, &reference(rate, burst, initial, &arrivals));

        // Over any interval [t_i, t_j], inclusive: accepted ≤ B + r·(t_j − t_i) (000 §3.4, N = 1).
        for i in 0..arrivals.len() {
            let mut acc: u128 = 0;
            for j in i..arrivals.len() {
                if got[j] { acc += arrivals[j].1 as u128; }
                let bound = burst as u128 * NS + rate as u128 * (arrivals[j].0 - arrivals[i].0) as u128;
                prop_assert!(acc * NS <= bound, "accepted {} in [{}, {}]", acc, i, j);
            }
        }
    }
}
