//! RED (Floyd & Jacobson): the drop curve, the count-based p_a, the idle correction, bad input.

use ratekit_core::red::{Red, RedAqm, RedConfig};
use ratekit_core::{Bytes, DropReason, Duration, EnforcerConfig, Instant, Packet, QueueDiscipline, Rate};

const LINK: Rate = Rate(1_250_000); // 10 Mbit/s

fn cfg(w_q: f64, seed: u64) -> RedConfig {
    RedConfig {
        min_th: Bytes(30_000),
        max_th: Bytes(90_000),
        max_p: 0.1,
        w_q,
        limit: Bytes(200_000),
        mean_pkt_size: Bytes(1000),
        seed,
    }
}

fn pkt(id: u64) -> Packet {
    Packet { id, len: 1000, ..Default::default() }
}

/// Holds the queue at `level` bytes (w_q = 1 makes avg the instantaneous queue) and offers
/// `n` packets; returns the arrival indices that RED dropped, and their reasons.
fn drops_at_level(level: u64, n: u64, seed: u64) -> Vec<(u64, DropReason)> {
    let mut red = Red::new(&cfg(1.0, seed), Some(LINK)).unwrap();
    let mut drops = Vec::new();
    let mut id = 0;
    while red.backlog_bytes() < level {
        red.enqueue(Instant::ZERO, pkt(id), &mut drops);
        id += 1;
        assert!(drops.is_empty() || level > 30_000, "no early drops below min_th");
        drops.clear();
    }
    let mut out = Vec::new();
    for i in 0..n {
        red.enqueue(Instant::ZERO, pkt(id), &mut drops);
        id += 1;
        match drops.pop() {
            Some(d) => out.push((i, d.reason)),
            None => {
                red.dequeue(Instant::ZERO, &mut drops);
            }
        }
    }
    out
}

#[test]
fn drop_curve_follows_p_b_with_uniform_gaps() {
    // Floyd & Jacobson's pseudo-code increments count before p_a = p_b/(1 − count·p_b) and
    // resets it to 0 on a drop, so the k-th packet after a drop survives with
    // P(gap > k) = (1 − (k+1)·p_b)/(1 − p_b): gaps are uniform on 1..1/p_b − 1 (not the
    // geometric gaps of a memoryless p_b) and the drop fraction is 1/E[gap].
    let n = 40_000;
    for (level, p_b) in [(45_000u64, 0.025), (60_000, 0.05), (75_000, 0.075), (85_000, 0.1 * 55.0 / 60.0)] {
        let drops = drops_at_level(level, n, level);
        assert!(drops.iter().all(|(_, r)| *r == DropReason::RedEarly));
        let frac = drops.len() as f64 / n as f64;
        let mean_gap: f64 = (0..1000).map(|k| if k == 0 { 1.0 } else { ((1.0 - (k + 1) as f64 * p_b) / (1.0 - p_b)).max(0.0) }).sum();
        let want = 1.0 / mean_gap;
        assert!((frac - want).abs() < 0.04 * want, "level {level}: drop fraction {frac}, want {want}");
        let max_gap = drops.windows(2).map(|w| w[1].0 - w[0].0).max().unwrap();
        assert!(max_gap as f64 <= (1.0 / p_b).ceil() - 1.0, "level {level}: gap {max_gap} ≥ 1/p_b");
    }
}

#[test]
fn nothing_below_min_th_everything_above_max_th() {
    assert!(drops_at_level(20_000, 5_000, 1).is_empty());
    let drops = drops_at_level(90_000, 1_000, 2);
    assert_eq!(drops.len(), 1_000);
    assert!(drops.iter().all(|(_, r)| *r == DropReason::RedForced));
}

#[test]
fn idle_time_decays_the_average() {
    // avg ← (1 − w_q)^m·avg with m = idle / s, s = 1000 B / 1.25 MB/s = 0.8 ms.
    let w_q = 0.01;
    let mut red = Red::new(&cfg(w_q, 1), Some(LINK)).unwrap();
    let mut drops = Vec::new();
    for i in 0..50 {
        red.enqueue(Instant::ZERO, pkt(i), &mut drops);
    }
    let avg = red.avg();
    assert!(avg > 0.0);
    let t_empty = Instant(Duration::from_millis(1).0);
    while red.dequeue(t_empty, &mut drops).is_some() {}
    let idle = Duration::from_millis(8); // m = 10
    red.enqueue(t_empty + idle, pkt(99), &mut drops);
    let want = avg * (1.0 - w_q).powf(10.0);
    assert!((red.avg() - want).abs() < 1e-6 * avg, "{} vs {want}", red.avg());
}

#[test]
fn a_second_empty_notice_keeps_the_idle_start() {
    // A policer in front of RED (003's ICP) drops packets RED never sees; the queue then reports
    // "empty" again, which must not restart the idle period the decay is measured from.
    let w_q = 0.01;
    let mut aqm = RedAqm::new(&cfg(w_q, 1), LINK);
    for _ in 0..50 {
        aqm.on_arrival(Instant::ZERO, 50_000);
    }
    let avg = aqm.avg();
    let ms = |n| Instant::ZERO + Duration::from_millis(n);
    aqm.on_empty(ms(1));
    aqm.on_empty(ms(5));
    aqm.on_arrival(ms(9), 0); // 8 ms idle since the first notice: m = 10
    let want = avg * (1.0 - w_q).powf(10.0);
    assert!((aqm.avg() - want).abs() < 1e-6 * avg, "{} vs {want}", aqm.avg());
}

#[test]
fn impossible_parameters_are_rejected_by_name() {
    let base = "kind = \"red\"\nlimit = \"200kb\"\n";
    let e = EnforcerConfig::from_toml(&format!("{base}min_th = 9000\nmax_th = 9000")).unwrap_err();
    assert_eq!(e.field, "min_th", "{e}");
    for bad in ["0.0", "1.5", "-0.1"] {
        let e = EnforcerConfig::from_toml(&format!("{base}min_th = 3000\nmax_th = 9000\nmax_p = {bad}")).unwrap_err();
        assert_eq!(e.field, "max_p", "{e}");
    }
    let e = EnforcerConfig::from_toml(&format!("{base}min_th = 3000\nmax_th = 9000\nw_q = 0")).unwrap_err();
    assert_eq!(e.field, "w_q", "{e}");
    let ok = EnforcerConfig::from_toml(&format!("{base}min_th = 3000\nmax_th = 9000")).unwrap();
    let e = ok.build(None).err().unwrap();
    assert_eq!(e.field, "link_rate", "{e}");
    assert!(ok.build(Some(LINK)).is_ok());
}
