//! The multi-aggregate container: per-aggregate policers from a factory (so rates can differ),
//! counters, a million aggregates, and any policer including `AnyPolicer`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::aggregates::{Aggregates, ConfigFactory};
use ratekit_core::token_bucket::{TokenBucket, TokenBucketConfig};
use ratekit_core::{EnforcerConfig, Instant, Packet, Policer, Rate};

fn rate_of(key: u64) -> Rate {
    Rate(10_000 * (key % 7 + 1))
}

#[test]
fn each_aggregate_behaves_like_its_own_policer() {
    let mut aggs = Aggregates::new(|key: u64| TokenBucket::new(&TokenBucketConfig::new(rate_of(key), 3000)));
    let mut own: Vec<TokenBucket> = (0..100).map(|k| TokenBucket::new(&TokenBucketConfig::new(rate_of(k), 3000))).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut t = 0;
    let mut expect_passed = vec![0u64; 100];
    for _ in 0..100_000 {
        t += rng.gen_range(0..200_000);
        let key = rng.gen_range(0..100u64);
        let p = Packet { aggregate: key, len: rng.gen_range(40..1500), ..Packet::default() };
        let v = aggs.on_arrival(Instant(t), &p);
        assert_eq!(v, own[key as usize].on_arrival(Instant(t), &p));
        if v.is_pass() {
            expect_passed[key as usize] += p.len as u64;
        }
    }
    assert_eq!(aggs.len(), 100);
    for (key, &bytes) in expect_passed.iter().enumerate() {
        assert_eq!(aggs.get(key as u64).unwrap().counters.passed_bytes, bytes);
    }
    // Faster aggregates passed more: the factory's per-key rates took effect.
    assert!(expect_passed[6] > 5 * expect_passed[0], "{} vs {}", expect_passed[6], expect_passed[0]);
    let totals = aggs.totals();
    assert_eq!(totals.passed_packets + totals.dropped_packets, 100_000);
}

#[test]
fn a_million_aggregates() {
    const N: u64 = 1_000_000;
    let cfg = TokenBucketConfig::new(Rate(125_000), 1500);
    let mut aggs = Aggregates::with_capacity(N as usize, |_| TokenBucket::new(&cfg));
    let start = std::time::Instant::now();
    // Keys spread like IPv4 subscriber addresses in a /12.
    let key = |i: u64| 0x0a00_0000 + i;
    for i in 0..N {
        assert!(aggs.on_arrival(Instant(0), &Packet { aggregate: key(i), len: 1500, ..Packet::default() }).is_pass());
    }
    for i in 0..N {
        let p = Packet { aggregate: key(i), len: 1, ..Packet::default() };
        assert!(!aggs.on_arrival(Instant(1000), &p).is_pass(), "aggregate {i} kept its own empty bucket");
    }
    // 12 ms later each bucket holds 1500 bytes again.
    for i in (0..N).step_by(1000) {
        let p = Packet { aggregate: key(i), len: 1500, ..Packet::default() };
        assert!(aggs.on_arrival(Instant(12_000_000), &p).is_pass());
    }
    assert_eq!(aggs.len(), N as usize);
    let t = aggs.totals();
    assert_eq!((t.passed_packets, t.dropped_packets), (N + N / 1000, N));
    eprintln!("2M+ arrivals over 1M aggregates: {:?}", start.elapsed());
}

#[test]
fn any_policer_from_config() {
    // trtcm.toml passes yellow up to its 12 Mbit/s peak rate.
    for (name, want) in [("policer.toml", 10.0), ("fairpolicer.toml", 10.0), ("srtcm.toml", 10.0), ("trtcm.toml", 12.0)] {
        let path = format!("{}/../../examples/enforcers/{name}", env!("CARGO_MANIFEST_DIR"));
        let cfg = EnforcerConfig::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut aggs = Aggregates::new(ConfigFactory::new(cfg).unwrap());
        // Two aggregates, one offering 20 Mbit/s, one 5 Mbit/s: only the first is policed.
        let mut passed = [0u64; 2];
        for i in 0..20_000u64 {
            for (a, gap) in [(0u64, 600_000), (1, 2_400_000)] {
                if i * 600_000 % gap == 0 {
                    let p = Packet { aggregate: a, flow: i % 4, len: 1500, ..Packet::default() };
                    if aggs.on_arrival(Instant(i * 600_000), &p).is_pass() {
                        passed[a as usize] += 1500;
                    }
                }
            }
        }
        let secs = 12.0;
        let mbit = |b: u64| b as f64 * 8.0 / secs / 1e6;
        assert!((mbit(passed[0]) - want).abs() < 0.3, "{name}: {} Mbit/s", mbit(passed[0]));
        assert!((mbit(passed[1]) - 5.0).abs() < 0.01, "{name}: {} Mbit/s", mbit(passed[1]));
    }
}

#[test]
fn config_factory_rejects_invalid_configs() {
    let cfg: EnforcerConfig = toml::from_str("kind = \"token_bucket\"\nrate = \"1mbit\"\nburst = 100\ninitial = 500\n").unwrap();
    let e = ConfigFactory::new(cfg).unwrap_err();
    assert_eq!(e.field, "initial");
}

mod config_fuzz {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("\"10mbit\"".to_string()),
            Just("\"1.5Mbit\"".to_string()),
            Just("\"64kb\"".to_string()),
            Just("\"0mbit\"".to_string()),
            Just("\"-3kb\"".to_string()),
            Just("\"2tbit\"".to_string()),
            Just("\"ten\"".to_string()),
            Just("true".to_string()),
            Just("[1, 2, 0]".to_string()),
            Just("[3, 1]".to_string()),
            (-5i64..5_000_000_000).prop_map(|v| v.to_string()),
            (0.0f64..1e7).prop_map(|v| format!("{v:.3}")),
        ]
    }

    /// A valid document of one of this module's kinds, then 0-3 fields overridden with random
    /// values (or unknown fields added) and possibly one required field dropped.
    fn document() -> impl Strategy<Value = String> {
        let bases: [&[(&str, &str)]; 4] = [
            &[("kind", "\"token_bucket\""), ("rate", "\"10mbit\""), ("burst", "125000")],
            &[("kind", "\"srtcm\""), ("cir", "\"10mbit\""), ("cbs", "\"64kb\""), ("ebs", "\"64kb\"")],
            &[("kind", "\"trtcm\""), ("cir", "\"10mbit\""), ("cbs", "\"64kb\""), ("pir", "\"12mbit\""), ("pbs", "\"96kb\"")],
            &[("kind", "\"fair_policer\""), ("rate", "\"10mbit\""), ("bucket", "181056"), ("weights", "[1, 2]")],
        ];
        let field = prop_oneof![
            Just("rate"), Just("burst"), Just("initial"), Just("cir"), Just("cbs"), Just("ebs"),
            Just("pir"), Just("pbs"), Just("colour_aware"), Just("drop_yellow"), Just("bucket"),
            Just("sketch_depth"), Just("sketch_width"), Just("token_unit"), Just("seed"),
            Just("weights"), Just("bogus"),
        ];
        (0..4usize, prop::collection::vec((field, value()), 0..4), 0..8usize).prop_map(move |(kind, overrides, drop)| {
            let mut fields: Vec<(String, String)> = bases[kind].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            for (k, v) in overrides {
                match fields.iter_mut().find(|(f, _)| f == k) {
                    Some(slot) => slot.1 = v,
                    None => fields.push((k.to_string(), v)),
                }
            }
            if drop > 0 && drop < fields.len() {
                fields.remove(drop);
            }
            fields.iter().map(|(k, v)| format!("{k} = {v}\n")).collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, rng_seed: proptest::test_runner::RngSeed::Fixed(0xc0f), ..ProptestConfig::default() })]

        /// Any document either fails with a message (never a panic) or builds a policer that
        /// survives traffic.
        #[test]
        fn configs_never_panic(doc in document()) {
            match EnforcerConfig::from_toml(&doc) {
                Err(e) => prop_assert!(!e.message.is_empty(), "{doc}"),
                Ok(cfg) => {
                    let mut aggs = Aggregates::new(ConfigFactory::new(cfg).unwrap());
                    for i in 0..200u64 {
                        let p = Packet { aggregate: i % 3, flow: i % 5, class: (i % 4) as u16, len: 1 + (i as u32 * 997) % 9000, ..Packet::default() };
                        aggs.on_arrival(Instant(i * 137_000), &p);
                    }
                }
            }
        }
    }
}
