//! Golden verdicts of exact per-flow PQP and BC-PQP (`flows = "exact"`): seeded bursty arrivals
//! across 1,000 flows, digested (verdict and drop reason per packet; every 97 packets the
//! backlog, magic backlog, flows held, window entries; final counters) and compared with
//! digests taken from the code before its data path was optimised (issue 17 item 4), so that
//! an optimisation that changes a decision or the state behind it fails here.
//!
//! After an intended change of behaviour, print the new digests with
//! `RATEKIT_BLESS=1 cargo test --release -p ratekit-core --test exact_flows_golden -- --nocapture`,
//! update `GOLDEN` and say why in the commit.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::bcpqp::BcPqpConfig;
use ratekit_core::bcpqp_flows::FlowBcPqp;
use ratekit_core::pqp::FlowQueuing;
use ratekit_core::pqp_flows::FlowPqp;
use ratekit_core::{Bytes, Classify, Duration, Instant, Packet, Policer, Rate};

mod digest;
use digest::{verdict_code, Digest};

const RATE: u64 = 1_250_000; // 10 Mbit/s
const FLOWS: u64 = 1_000;
const PACKETS: usize = 300_000;

/// (max_flows, PQP digest, BC-PQP digest, BC-PQP fills, BC-PQP removals).
const GOLDEN: [(u32, u64, u64, u64, u64); 2] = [
    (1024, 0x9078c869be5c2368, 0x74f5e493d2762005, 6660, 6653),
    // Fewer slots than flows: the overflow queue is exercised too.
    (8, 0x3cbdb373c600c7bf, 0x091648fd48d40198, 2784, 2774),
];


/// On/off flows: trains of 1..64 packets from one flow at 5-40× the rate (some sharing a
/// timestamp), interleaved with other flows' trains; silences now and then longer than a
/// window, so queues drain, windows end and flows are reclaimed and come back.
fn trace(seed: u64) -> Vec<(Instant, Packet)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = 0u64;
    let mut out = Vec::with_capacity(PACKETS);
    while out.len() < PACKETS {
        // A skewed choice of flow: a few heavy flows, many light ones.
        let flow = if rng.gen_bool(0.5) { rng.gen_range(0..16) } else { rng.gen_range(0..FLOWS) };
        let speed = rng.gen_range(5..40);
        for _ in 0..rng.gen_range(1..64) {
            let len = if rng.gen_bool(0.6) { 1500 } else { rng.gen_range(40..1500) };
            if !rng.gen_bool(0.1) {
                t += len as u64 * 1_000_000_000 / (speed * RATE);
            }
            out.push((Instant(t), Packet { id: out.len() as u64, len, flow, class: 0, aggregate: 0 }));
        }
        t += match rng.gen_range(0..20) {
            0 => rng.gen_range(60_000_000..300_000_000), // longer than a window
            1..=8 => 0,
            _ => rng.gen_range(0..5_000_000),
        };
    }
    out.truncate(PACKETS);
    out
}

fn config(max_flows: u32) -> BcPqpConfig {
    let cfg = BcPqpConfig {
        rate: Rate(RATE),
        queues: 1,
        queue_size: Bytes(40_000),
        classify: Classify::Flow,
        policy: "fair".into(),
        weights: None,
        flows: FlowQueuing::Exact,
        max_flows: Some(max_flows),
        fair_classes: None,
        theta_plus: 1.5,
        theta_minus: 0.5,
        window: Duration::from_millis(50),
    };
    cfg.validate().unwrap();
    cfg
}

fn run<P: Policer>(p: &mut P, arr: &[(Instant, Packet)], inspect: impl Fn(&P, &mut Digest)) -> u64 {
    let mut d = Digest::new();
    for (i, (t, pkt)) in arr.iter().enumerate() {
        d.word(verdict_code(p.on_arrival(*t, pkt)));
        if i % 97 == 96 {
            inspect(p, &mut d);
        }
    }
    inspect(p, &mut d);
    d.0
}

fn pqp_state<T: Default>(p: &FlowPqp<T>, d: &mut Digest) {
    let b = p.backlog_nb();
    d.word(b as u64);
    d.word((b >> 64) as u64);
    d.word(p.flows() as u64);
    let (s, f) = (p.stats(), p.flow_stats());
    d.word(s.passed_bytes);
    for x in [f.flows_created, f.flows_reclaimed, f.overflow_packets] {
        d.word(x);
    }
}

#[test]
fn exact_verdicts_and_state_match_the_golden_digests() {
    let arr = trace(17);
    let mut got = Vec::new();
    for &(max_flows, ..) in &GOLDEN {
        let cfg = config(max_flows);
        let mut pqp = FlowPqp::<()>::new(&cfg.pqp());
        let pd = run(&mut pqp, &arr, pqp_state);
        let mut bc = FlowBcPqp::new(&cfg);
        let bd = run(&mut bc, &arr, |p, d| {
            pqp_state(p.core(), d);
            let m = p.magic_backlog_nb();
            d.word(m as u64);
            d.word((m >> 64) as u64);
            d.word(p.window_entries() as u64);
            let (fills, removals) = p.burst_events();
            d.word(fills);
            d.word(removals);
        });
        let (fills, removals) = bc.burst_events();
        got.push((max_flows, pd, bd, fills, removals));
    }
    if std::env::var_os("RATEKIT_BLESS").is_some() {
        for g in &got {
            println!("    ({}, {:#018x}, {:#018x}, {}, {}),", g.0, g.1, g.2, g.3, g.4);
        }
        return;
    }
    assert_eq!(got, GOLDEN, "exact PQP/BC-PQP verdicts or state changed");
    // The trace exercises what the digests guard, or they would prove little.
    for (max_flows, .., fills, removals) in got {
        assert!(fills > 100 && removals > 100, "max_flows {max_flows}: {fills} fills, {removals} removals");
    }
}
