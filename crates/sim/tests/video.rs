//! The video player through the whole simulator (TCP, handshake, the enforcer), against bounds
//! worked out by hand: a path faster than the top rung plays without a stall, one slower than
//! the lowest rung stalls, and a policer's bucket lures the rule into rungs its rate cannot carry.

use ratekit_lab::summary::VideoSummary;
use ratekit_sim::RunOptions;

/// One CUBIC video flow (100 ms RTT; ladder 300 kbit/s-4.3 Mbit/s, Pensieve's; 2 s segments,
/// 20 s long) through `enforcer` for 60 s.
fn session(enforcer: &str) -> VideoSummary {
    let text = format!(
        r#"
        duration = "60s"
        [enforcer]
        {enforcer}
        [[aggregates]]
        link_rate = "1gbit"
        flows = [{{ cc = "cubic", rtt = "100ms", app = {{ kind = "video", length = "20s", segment = "2s", ladder = ["300kbit", "750kbit", "1200kbit", "1850kbit", "2850kbit", "4300kbit"] }} }}]
        "#
    );
    let r = ratekit_lab::scenario::parse(&text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    let (s, _) = ratekit_sim::run(&r, None, RunOptions::default()).expect("run");
    s.flows[0].video.expect("a video flow reports its session")
}

/// A 20 Mbit/s shaper: the first segment (75 KB at 300 kbit/s, 52 segments) arrives after the
/// handshake and three slow-start rounds, about 0.4 s. Its rate (1.5 Mbit/s, round trips
/// included) allows 1.2 Mbit/s; each larger segment measures more, slow start being less of it,
/// and the rule climbs to the top rung, whose 2 s segments (1.1 MB) take under a second: the
/// buffer only grows.
#[test]
fn a_path_faster_than_the_top_rung_joins_at_once_and_never_stalls() {
    let v = session(r#"kind = "fifo"
        rate = "20mbit"
        burst = "3000"
        limit = "250kb""#);
    let join = v.join_s.unwrap();
    assert!((0.3..0.6).contains(&join), "join {join} s");
    assert_eq!((v.stalls, v.rebuffer_s, v.segments), (0, 0.0, 10));
    assert!(v.mean_rung >= 3.5 && v.mean_bitrate_bps > 2.5e6, "mean rung {} (the top is 5)", v.mean_rung);
}

/// 200 kbit/s, below the lowest rung: 20 s of video at 300 kbit/s need at least 30 s of
/// transfer, so playback, which starts after the first 3 s of it, waits at least 30 − 20 − 3 s.
#[test]
fn a_path_slower_than_the_lowest_rung_stalls() {
    let v = session(r#"kind = "fifo"
        rate = "200kbit"
        burst = "3000"
        limit = "50kb""#);
    assert!(v.join_s.unwrap() >= 3.0, "join {:?}", v.join_s);
    assert!(v.stalls >= 3 && v.rebuffer_s >= 7.0, "{v:?}");
    assert_eq!((v.mean_rung, v.segments), (0.0, 10));
}

/// A 500 kbit/s policer with a 1 MB bucket: the bucket carries the first segments at line rate,
/// the rule climbs above what 500 kbit/s carries, and playback stalls once the bucket is empty;
/// a 500 kbit/s shaper gives the rule the true rate from the start and never stalls.
#[test]
fn a_large_bucket_lures_the_rule_into_stalls_a_shaper_does_not() {
    let policed = session(r#"kind = "token_bucket"
        rate = "500kbit"
        burst = "1mb""#);
    let shaped = session(r#"kind = "fifo"
        rate = "500kbit"
        burst = "3000"
        limit = "100kb""#);
    assert!(policed.join_s.unwrap() < 0.6 && shaped.join_s.unwrap() > 1.0, "{policed:?} {shaped:?}");
    assert!(policed.mean_bitrate_bps > 500e3 && policed.rebuffer_s > 2.0, "{policed:?}");
    assert!(shaped.mean_bitrate_bps < 500e3 && shaped.rebuffer_s == 0.0, "{shaped:?}");
}
