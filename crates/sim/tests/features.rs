//! The simulator's measurement and topology features, each against a result worked out by hand
//! from constant-rate traffic, so that a wrong implementation fails: statistics at the
//! enforcement point, flow stop times, pacing, wire-arrival bytes, customers and `via` routes.

use ratekit_sim::{RunOptions, Series, Summary};

fn run(text: &str) -> (Summary, Series) {
    let r = ratekit_sim::parse(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    ratekit_sim::run(&r, None, RunOptions { keep_series: true, ..RunOptions::default() }).expect("run")
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs()
}

/// 12 Mbit/s of 1500-byte datagrams (one per ms) into a 10 Mbit/s FIFO shaper (one out per
/// 1.2 ms) with room for all: packet k waits 0.2·k ms, so over 2 s the packets sent (k < 1667)
/// waited 0 to 333 ms, uniformly: mean 166.7, p50 166.7, p95 316.7, p99 330, max 333 ms.
#[test]
fn queue_sojourn_times_and_counts_per_class_and_flow() {
    let (s, _) = run(r#"
        duration = "2s"
        [enforcer]
        kind = "fifo"
        rate = "10mbit"
        burst = "1500b"
        limit = "10mb"
        [[aggregates]]
        flows = [{ rtt = "10ms", class = 3, app = { kind = "cbr", rate = "12mbit", packet = 1500 } }]
    "#);
    let a = &s.aggregates[0];
    assert_eq!(a.classes.len(), 1);
    let c = &a.classes[0];
    assert_eq!(c.class, 3);
    assert_eq!(c.arrivals, 2000);
    assert_eq!(c.drops, 0);
    assert!((1665..=1668).contains(&c.sent), "sent {}", c.sent);
    for (got, want) in [
        (c.delay_mean_ms, 166.7),
        (c.delay_p50_ms, 166.7),
        (c.delay_p95_ms, 316.7),
        (c.delay_p99_ms, 330.0),
        (c.delay_max_ms, 333.3),
    ] {
        assert!(close(got, want, 0.012), "delay {got} ms, expected {want}");
    }
    let f = &s.flows[0];
    assert_eq!((f.enforcer_arrivals, f.enforcer_drops), (2000, 0));
    assert_eq!(f.queue_delay_mean_ms, c.delay_mean_ms);
    assert_eq!(f.queue_delay_p99_ms, c.delay_p99_ms);
}

/// A policer has no queue (sojourn 0); drops are charged to the flow and class that lost them;
/// only events after the warm-up count (2 s of the 3 s run).
#[test]
fn policer_counts_after_the_warmup_with_zero_sojourn() {
    let (s, _) = run(r#"
        duration = "3s"
        [measure]
        warmup = "1s"
        [enforcer]
        kind = "token_bucket"
        rate = "10mbit"
        burst = "3000b"
        [[aggregates]]
        flows = [
          { rtt = "10ms", class = 0, app = { kind = "cbr", rate = "4mbit", packet = 1500 } },
          { rtt = "10ms", class = 1, app = { kind = "cbr", rate = "16mbit", packet = 1500 } },
        ]
    "#);
    let a = &s.aggregates[0];
    let per_s = |mbit: f64| mbit * 1e6 / 12_000.0;
    for (c, f, mbit) in [(&a.classes[0], &s.flows[0], 4.0), (&a.classes[1], &s.flows[1], 16.0)] {
        let want = 2.0 * per_s(mbit);
        assert!((c.arrivals as f64 - want).abs() <= 2.0, "class {} arrivals {} vs {want}", c.class, c.arrivals);
        assert_eq!(c.arrivals, c.sent + c.drops);
        assert_eq!((f.enforcer_arrivals, f.enforcer_drops), (c.arrivals, c.drops));
        assert_eq!((c.delay_max_ms, f.queue_delay_p99_ms), (0.0, 0.0));
    }
    // The bucket passes 10 Mbit/s of the 20 offered.
    let sent: u64 = a.classes.iter().map(|c| c.sent).sum();
    assert!(close(sent as f64, 2.0 * per_s(10.0), 0.01), "sent {sent}");
    assert!(a.classes[1].drops > a.classes[0].drops);
}
