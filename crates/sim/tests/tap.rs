//! The capture tap sees each packet where the testbed's captures see Linux's: data as it leaves
//! the sender's NIC and as it reaches the receiver, ACKs as they leave the receiver and as they
//! reach the sender. Checked against the path's own accounting and its one-way delays, so a tap
//! at another hop (before the NIC, after the enforcer, before the delay) fails.

use ratekit_sim::packet::{Kind, Pkt};
use ratekit_sim::{RunOptions, TapPoint};
use std::collections::HashMap;

const SCENARIO: &str = r#"
duration = "3s"
seed = 2
[enforcer]
kind = "token_bucket"
rate = "5mbit"
burst = "15kb"
[[aggregates]]
host_rate = "100mbit"
flows = [{ cc = "cubic", rtt = "20ms", count = 2 }]
"#;

const ONE_WAY_NS: u64 = 10_000_000;
/// The largest frame's serialisation on the aggregate's 1 Gbit/s link. Two senders' NICs at
/// 100 Mbit/s queue at most one frame there, so a segment crosses in one one-way delay plus at
/// most two of these; a tap before the NIC would see a burst's k-th segment 120 µs · k earlier.
const LINK_NS: u64 = 12_000;
/// The ACK path's noise: the default `ack_jitter`.
const ACK_JITTER_NS: u64 = 250_000;

#[test]
fn the_taps_see_data_leave_the_nic_and_reach_the_receiver_and_acks_cross_back() {
    let r = ratekit_lab::scenario::parse(SCENARIO, "tap.toml").unwrap();
    let mut seen: Vec<(TapPoint, u64, Pkt)> = Vec::new();
    let mut tap = |point, now, p: &Pkt| seen.push((point, now, *p));
    let (summary, _) = ratekit_sim::run(&r, None, RunOptions { tap: Some(&mut tap), ..RunOptions::default() }).unwrap();
    let agg = &summary.aggregates[0];

    let forward = |point| seen.iter().filter(move |(at, _, p)| *at == point && !p.kind.is_reverse());
    assert_eq!(forward(TapPoint::Sender).count() as u64, agg.arrivals, "every packet that left the NIC reached the enforcer");
    let received = forward(TapPoint::Receiver).count() as u64;
    assert!(received <= agg.arrivals - agg.enforcer_drops, "the receiver's tap is behind the enforcer");
    // What is still in the forward pipe at the end: at most 10 ms at the 5 Mbit/s rate.
    assert!(received + 10 >= agg.arrivals - agg.enforcer_drops, "{received} of {} delivered", agg.arrivals - agg.enforcer_drops);

    // Each delivered segment left the sender one one-way delay (and a serialisation) earlier.
    let mut sent: HashMap<(u32, u32), Vec<u64>> = HashMap::new();
    for (_, t, p) in forward(TapPoint::Sender).filter(|(_, _, p)| p.kind == Kind::Data) {
        sent.entry((p.flow, p.seq)).or_default().push(*t);
    }
    let mut delivered = 0;
    for (_, t, p) in forward(TapPoint::Receiver).filter(|(_, _, p)| p.kind == Kind::Data) {
        let ok = sent[&(p.flow, p.seq)].iter().any(|s| (ONE_WAY_NS..=ONE_WAY_NS + 2 * LINK_NS).contains(&(t - s)));
        assert!(ok, "segment {} of flow {} reached the receiver at {t} ns, sent at {:?}", p.seq, p.flow, sent[&(p.flow, p.seq)]);
        delivered += 1;
    }
    assert!(delivered > 1000, "{delivered} segments delivered");

    // Each ACK reaches the sender one one-way delay plus the ACK path's noise after it left. No
    // ACK is lost and their order is kept, so the k-th with a number is the k-th to arrive.
    let mut left: HashMap<(u32, u32), std::collections::VecDeque<u64>> = HashMap::new();
    let mut acks = Vec::new();
    for (at, t, p) in seen.iter().filter(|(_, _, p)| p.kind == Kind::Ack) {
        let times = left.entry((p.flow, p.ack)).or_default();
        match at {
            TapPoint::Receiver => times.push_back(*t),
            TapPoint::Sender => acks.push(t - times.pop_front().expect("an ACK arrived that never left")),
        }
    }
    assert!(acks.len() > 500);
    assert!(acks.iter().all(|d| (ONE_WAY_NS..ONE_WAY_NS + ACK_JITTER_NS).contains(d)), "{:?}", acks.iter().max());
    assert!(seen.windows(2).all(|w| w[0].1 <= w[1].1), "time runs forward");
}
