//! RFC 2697 (srTCM) and RFC 2698 (trTCM) colour sequences, colour-blind and colour-aware,
//! and the policer verdicts derived from them.

use ratekit_core::colour::Colour::{self, Green, Red, Yellow};
use ratekit_core::srtcm::{SrTcm, SrTcmConfig};
use ratekit_core::trtcm::{TrTcm, TrTcmConfig};
use ratekit_core::{DropReason, EnforcerConfig, Instant, Packet, Policer, Rate, Verdict};

fn pkt(len: u32, class: u16) -> Packet {
    Packet { len, class, ..Packet::default() }
}

fn ms(m: u64) -> Instant {
    Instant(m * 1_000_000)
}

#[test]
fn srtcm_colour_blind_sequence() {
    // CIR 1000 B/s, CBS 2000, EBS 1000; both buckets start full (RFC 2697 §3).
    let mut m = SrTcm::new(&SrTcmConfig::new(Rate(1000), 2000, 1000));
    let steps: &[(u64, u32, Colour, (u64, u64))] = &[
        (0, 1500, Green, (500, 1000)),
        (0, 600, Yellow, (500, 400)), // C lacks 600: E pays
        (0, 500, Green, (0, 400)),
        (0, 500, Red, (0, 400)),
        (0, 400, Yellow, (0, 0)),
        // 2.5 s = 2500 B of credit: C takes 2000, only the 500 overflow reaches E (§3:
        // "if Tc < CBS, Tc++, else if Te < EBS, Te++").
        (2500, 2000, Green, (0, 500)),
        (2500, 501, Red, (0, 500)),
        (2500, 500, Yellow, (0, 0)),
    ];
    for (i, &(t, len, want, tokens)) in steps.iter().enumerate() {
        assert_eq!(m.meter(ms(t), &pkt(len, 2)), want, "step {i}");
        assert_eq!(m.tokens(), tokens, "step {i}");
    }
    assert_eq!(m.stats().packets, [3, 3, 2]);
}

#[test]
fn srtcm_colour_aware_sequence() {
    let mut cfg = SrTcmConfig::new(Rate(1000), 2000, 1000);
    cfg.colour_aware = true;
    let mut m = SrTcm::new(&cfg);
    // Pre-coloured yellow (class 1) may not use C even though it is full.
    assert_eq!(m.meter(ms(0), &pkt(500, 1)), Yellow);
    assert_eq!(m.tokens(), (2000, 500));
    // Pre-coloured red (class 2 and above) stays red and takes nothing.
    assert_eq!(m.meter(ms(0), &pkt(100, 2)), Red);
    assert_eq!(m.meter(ms(0), &pkt(100, 7)), Red);
    assert_eq!(m.tokens(), (2000, 500));
    // Green behaves as in colour-blind mode.
    assert_eq!(m.meter(ms(0), &pkt(2000, 0)), Green);
    assert_eq!(m.meter(ms(0), &pkt(400, 0)), Yellow);
    assert_eq!(m.meter(ms(0), &pkt(600, 1)), Red);
    assert_eq!(m.tokens(), (0, 100));
}

#[test]
fn trtcm_colour_blind_sequence() {
    // CIR 1000 B/s, CBS 1000, PIR 2000 B/s, PBS 2000 (RFC 2698 §3).
    let mut m = TrTcm::new(&TrTcmConfig::new(Rate(1000), 1000, Rate(2000), 2000));
    let steps: &[(u64, u32, Colour, (u64, u64))] = &[
        (0, 800, Green, (200, 1200)),
        (0, 800, Yellow, (200, 400)), // C lacks: P pays alone
        (0, 500, Red, (200, 400)),    // P lacks: nothing paid
        (0, 400, Yellow, (200, 0)),
        (500, 700, Green, (0, 300)), // +500 to C, +1000 to P
        (500, 300, Yellow, (0, 0)),
        (500, 1, Red, (0, 0)),
    ];
    for (i, &(t, len, want, tokens)) in steps.iter().enumerate() {
        assert_eq!(m.meter(ms(t), &pkt(len, 2)), want, "step {i}");
        assert_eq!(m.tokens(), tokens, "step {i}");
    }
}

#[test]
fn trtcm_colour_aware_sequence() {
    let mut cfg = TrTcmConfig::new(Rate(1000), 1000, Rate(2000), 2000);
    cfg.colour_aware = true;
    let mut m = TrTcm::new(&cfg);
    assert_eq!(m.meter(ms(0), &pkt(500, 2)), Red);
    assert_eq!(m.tokens(), (1000, 2000));
    assert_eq!(m.meter(ms(0), &pkt(500, 1)), Yellow); // C is full but the packet came yellow
    assert_eq!(m.tokens(), (1000, 1500));
    assert_eq!(m.meter(ms(0), &pkt(1000, 0)), Green);
    assert_eq!(m.meter(ms(0), &pkt(500, 0)), Yellow);
    assert_eq!(m.meter(ms(0), &pkt(1, 0)), Red);
    assert_eq!(m.tokens(), (0, 0));
}

#[test]
fn policers_drop_red_and_optionally_yellow() {
    for drop_yellow in [false, true] {
        let mut cfg = SrTcmConfig::new(Rate(1000), 1000, 1000);
        cfg.drop_yellow = drop_yellow;
        let mut p = SrTcm::new(&cfg);
        assert_eq!(p.on_arrival(ms(0), &pkt(1000, 0)), Verdict::Pass);
        let yellow = p.on_arrival(ms(0), &pkt(1000, 0));
        assert_eq!(yellow.is_pass(), !drop_yellow);
        assert_eq!(p.on_arrival(ms(0), &pkt(1, 0)), Verdict::Drop(DropReason::Colour));

        let mut cfg = TrTcmConfig::new(Rate(1000), 1000, Rate(1000), 2000);
        cfg.drop_yellow = drop_yellow;
        let mut p = TrTcm::new(&cfg);
        assert_eq!(p.on_arrival(ms(0), &pkt(1000, 0)), Verdict::Pass);
        assert_eq!(p.on_arrival(ms(0), &pkt(1000, 0)).is_pass(), !drop_yellow);
        assert_eq!(p.on_arrival(ms(0), &pkt(1, 0)), Verdict::Drop(DropReason::Colour));
    }
}

#[test]
fn long_run_rates() {
    // CIR 100 kB/s, PIR 200 kB/s, offered 300 kB/s open loop.
    let mut sr = SrTcm::new(&SrTcmConfig::new(Rate(100_000), 5000, 5000));
    let mut tr = TrTcm::new(&TrTcmConfig::new(Rate(100_000), 5000, Rate(200_000), 5000));
    let (mut sr_g, mut tr_g, mut tr_gy) = (0u64, 0u64, 0u64);
    // 300 kB/s offered for 10 s: one 1000 B packet every 3.333 ms.
    for i in 0..3000u64 {
        let t = Instant(i * 10_000_000 / 3);
        if sr.meter(t, &pkt(1000, 0)) == Green {
            sr_g += 1000;
        }
        match tr.meter(t, &pkt(1000, 0)) {
            Green => { tr_g += 1000; tr_gy += 1000; }
            Yellow => tr_gy += 1000,
            Red => {}
        }
    }
    // Green ≈ CIR·10 s + CBS; green+yellow ≈ PIR·10 s + PBS for trTCM.
    assert!((1_000_000..=1_006_000).contains(&sr_g), "{sr_g}");
    assert!((1_000_000..=1_006_000).contains(&tr_g), "{tr_g}");
    assert!((2_000_000..=2_006_000).contains(&tr_gy), "{tr_gy}");
}

#[test]
fn configs_parse_and_validate() {
    for name in ["srtcm.toml", "trtcm.toml"] {
        let path = format!("{}/../../examples/enforcers/{name}", env!("CARGO_MANIFEST_DIR"));
        let cfg = EnforcerConfig::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap();
        cfg.build_policer().unwrap();
    }
    let e = EnforcerConfig::from_toml("kind = \"trtcm\"\ncir = \"10mbit\"\ncbs = 1500\npir = \"5mbit\"\npbs = 1500\n").unwrap_err();
    assert_eq!(e.field, "pir", "{e}");
    let e = EnforcerConfig::from_toml("kind = \"srtcm\"\ncir = \"10mbit\"\ncbs = 1500\nebs = 1\ncolor_aware = true\n").unwrap_err();
    assert!(e.message.contains("color_aware"), "{e}");
    let c = EnforcerConfig::from_toml("kind = \"srtcm\"\ncir = \"10mbit\"\ncbs = 1500\n").unwrap();
    assert!(matches!(c, EnforcerConfig::Srtcm(SrTcmConfig { ebs, .. }) if ebs.0 == 0));
}

mod bounds {
    use super::*;
    use proptest::prelude::*;

    const NS: u128 = 1_000_000_000;

    fn arrivals() -> impl Strategy<Value = Vec<(u64, u32, u16)>> {
        prop::collection::vec((0u64..3_000_000, 1u32..3000, 0u16..3), 1..150).prop_map(|gaps| {
            let mut t = 0;
            gaps.into_iter().map(|(g, len, class)| { t += g; (t, len, class) }).collect()
        })
    }

    /// Bytes of the selected colours over every window [t_i, t_j] ≤ burst + rate·(t_j − t_i).
    fn check(log: &[(u64, u32, Colour)], select: impl Fn(Colour) -> bool, burst: u64, rate: u64) -> Result<(), TestCaseError> {
        for i in 0..log.len() {
            let mut acc = 0u128;
            for &(t, len, c) in &log[i..] {
                if select(c) { acc += len as u128; }
                prop_assert!(acc * NS <= burst as u128 * NS + rate as u128 * (t - log[i].0) as u128);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(0x2697), ..ProptestConfig::default() })]

        /// RFC 2697: green is bounded by (CIR, CBS), green + yellow by (CIR, CBS + EBS).
        #[test]
        fn srtcm_colour_bounds(arr in arrivals(), cir in 1_000u64..2_000_000, cbs in 1u64..20_000, ebs in 0u64..20_000, aware: bool) {
            let mut cfg = SrTcmConfig::new(Rate(cir), cbs, ebs);
            cfg.colour_aware = aware;
            let mut m = SrTcm::new(&cfg);
            let log: Vec<_> = arr.iter().map(|&(t, len, class)| (t, len, m.meter(Instant(t), &pkt(len, class)))).collect();
            check(&log, |c| c == Green, cbs, cir)?;
            check(&log, |c| c != Red, cbs + ebs, cir)?;
            if aware {
                // A pre-coloured packet never comes out better than it went in.
                for (&(_, _, class), &(_, _, c)) in arr.iter().zip(&log) {
                    prop_assert!(c >= Colour::of_class(class));
                }
            }
        }

        /// RFC 2698: green is bounded by (CIR, CBS), green + yellow by (PIR, PBS).
        #[test]
        fn trtcm_colour_bounds(arr in arrivals(), cir in 1_000u64..2_000_000, extra in 0u64..2_000_000, cbs in 1u64..20_000, pbs in 1u64..20_000, aware: bool) {
            let mut cfg = TrTcmConfig::new(Rate(cir), cbs, Rate(cir + extra), pbs);
            cfg.colour_aware = aware;
            let mut m = TrTcm::new(&cfg);
            let log: Vec<_> = arr.iter().map(|&(t, len, class)| (t, len, m.meter(Instant(t), &pkt(len, class)))).collect();
            check(&log, |c| c == Green, cbs, cir)?;
            check(&log, |c| c != Red, pbs, cir + extra)?;
            if aware {
                for (&(_, _, class), &(_, _, c)) in arr.iter().zip(&log) {
                    prop_assert!(c >= Colour::of_class(class));
                }
            }
        }
    }
}
