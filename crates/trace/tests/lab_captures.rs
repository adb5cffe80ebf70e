//! The detector on real Linux TCP captured in the lab (tests/data/lab/README.md says how they
//! were made): the cases a generated trace did not show.

use ratekit_trace::analyze::{analyze, Options, Row};
use ratekit_trace::Reason;

fn lossy_rows(name: &str) -> Vec<Row> {
    let path = format!("{}/tests/data/lab/{name}.pcap.gz", env!("CARGO_MANIFEST_DIR"));
    let file = ratekit_trace::reader::open(std::path::Path::new(&path)).expect(&path);
    let report = analyze(file, &Options::default());
    assert!(report.error.is_none(), "{name}: {:?}", report.error);
    report.rows.into_iter().filter(|r| r.judgement.losses >= 15 && r.direction != "aggregate").collect()
}

fn verdicts(rows: &[Row]) -> Vec<(String, Reason)> {
    rows.iter().map(|r| (r.segment.clone(), r.judgement.reason)).collect()
}

#[test]
fn a_shared_queue_that_never_drains_is_not_policing() {
    // The captured flow shares a full drop-tail queue with an uncaptured bulk flow: its losses
    // fall where a bucket's would and its ACK trains come back at up to twice its share; only the
    // queueing delay before each loss, measured from the path's smallest RTT (the segment's
    // 10th percentile already holds the standing queue), tells it from a policer.
    // The 64-byte snaplen copy has no SACK blocks, so RTT samples come from cumulative ACKs
    // only and most losses have no sample of their own within an RTT: counting those as "not
    // inflated" called its segment 2 policed.
    for name in ["cross_3mbit_32kb", "cross_0.5mbit_100kb", "cross_1.5mbit_100kb_snaplen64"] {
        let rows = lossy_rows(name);
        assert!(!rows.is_empty(), "{name}: no segment with 15 losses");
        assert!(rows.iter().all(|r| !r.judgement.policed), "{name}: {:?}", verdicts(&rows));
    }
}

#[test]
fn a_tail_drop_run_whose_last_delivered_packet_waits_for_a_delayed_ack_is_policing() {
    // Segment 2: the bucket ran dry inside a flight sent at line rate, so ~100 packets in a row
    // were dropped and the packet delivered just before them was acknowledged by the receiver's
    // 40 ms delayed-ACK timer. Every loss of the run must not be tied to that one late sample.
    let rows = lossy_rows("policer_1.5mbit_1mb");
    assert!(rows.len() >= 2, "{:?}", verdicts(&rows));
    for r in &rows {
        assert!(r.judgement.policed, "segment {}: {:?}", r.segment, r.judgement.reason);
        let err = r.judgement.rate_bps.unwrap() / 1.5e6 - 1.0;
        // tbf charges whole frames (1514 B for 1500 B of IP): the IP rate is 0.9 % under.
        assert!(err.abs() < 0.03, "segment {}: rate {:.0} bit/s", r.segment, r.judgement.rate_bps.unwrap());
    }
}
