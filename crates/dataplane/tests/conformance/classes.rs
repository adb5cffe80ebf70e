//! Classes of exact flows (`flows = "exact"`, `classify = "class"`, `bpf/pqp_class_flows.c`)
//! against the core's ClassFlowPqp / ClassFlowBcPqp on shared vectors: weighted, priority and
//! nested trees, hundreds of on/off flows, classes in and out of `fair_classes`.

use super::{load, on_off_flows, require_root};
use ratekit_core::pqp_class_flows::ClassFlows;
use ratekit_core::{AnyPolicer, EnforcerConfig, Instant, Policer, Verdict};
use ratekit_dataplane::maps::{CfState, Settings, BPF_DROP_REASONS, FQ_NONE};
use ratekit_dataplane::packet::parse;
use std::collections::HashMap;
use std::net::IpAddr;

/// What the core and the BPF state must agree on, per aggregate: counters, flows held, burst
/// events, each class's flows' backlog, and every (class, flow key) seen: occupancy and magic.
#[derive(Debug, PartialEq, Eq)]
struct ClassFacts {
    passed: u64,
    dropped: u64,
    created: u64,
    reclaimed: u64,
    overflow_packets: u64,
    held: usize,
    burst_events: (u64, u64),
    class_backlog_nb: Vec<u128>,
    flows: Vec<(u16, u64, u64, u64)>,
}

fn classes_of<T: Default + Clone>(p: &ClassFlows<T>, classes: usize, magic: impl Fn(usize, u64) -> u64, seen: &[(u16, u64)]) -> ClassFacts {
    let (stats, fs) = (p.stats(), p.flow_stats());
    ClassFacts {
        passed: stats.passed_packets,
        dropped: stats.dropped_packets,
        created: fs.flows_created,
        reclaimed: fs.flows_reclaimed,
        overflow_packets: fs.overflow_packets,
        held: p.flows(),
        burst_events: (0, 0),
        class_backlog_nb: (0..classes).map(|c| p.class_flows_backlog_nb(c)).collect(),
        flows: seen.iter().map(|&(c, k)| (c, k, p.flow_occupancy_nb(c as usize, k), magic(c as usize, k))).collect(),
    }
}

fn core_facts(p: &AnyPolicer, classes: usize, seen: &[(u16, u64)]) -> ClassFacts {
    match p {
        AnyPolicer::PqpClassFlows(q) => classes_of(q.classes(), classes, |_, _| 0, seen),
        AnyPolicer::BcpqpClassFlows(b) => {
            ClassFacts { burst_events: b.burst_events(), ..classes_of(b.classes(), classes, |c, k| b.flow_magic_nb(c, k), seen) }
        }
        _ => unreachable!("not a policer over classes of exact flows"),
    }
}

fn bpf_facts(st: &CfState, classes: usize, seen: &[(u16, u64)]) -> ClassFacts {
    let f = &st.f;
    let slot_of = f.slots_by_flow();
    let occupancy = |c: u16, k: u64| slot_of.get(&(c, k)).map_or((0, 0), |&s| (f.occupancy(s), f.slots[s].magic_nb.min(f.occupancy(s))));
    ClassFacts {
        passed: st.stats.passed_packets,
        dropped: st.stats.dropped_packets,
        created: f.flows_created,
        reclaimed: f.flows_reclaimed,
        overflow_packets: f.overflow_packets,
        held: f.cls.iter().map(|k| k.mapped as usize + (k.overflow != FQ_NONE) as usize).sum(),
        burst_events: (f.burst_fills, f.magic_removals),
        class_backlog_nb: (0..classes).map(|c| f.heap_of(c).iter().map(|&s| f.occupancy(s as usize) as u128).sum()).collect(),
        flows: seen.iter().map(|&(c, k)| (c, k, occupancy(c, k).0, occupancy(c, k).1)).collect(),
    }
}

/// PQP and BC-PQP over classes of exact flows: every verdict and drop reason agrees with the
/// core's, and every 5000 packets and at the end the mirrored state (see `ClassFacts`).
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn class_flows_match_core() {
    require_root();
    let v4: IpAddr = "10.9.0.1".parse().unwrap();
    let v6: IpAddr = "fd00::9".parse().unwrap();
    let settings = Settings { match_dst: 1, prefix4: 32, prefix6: 128, test_clock: 1 };
    let bc = "kind = \"bcpqp\"\nwindow = \"20ms\"";
    // (name, config, classes, flows, destinations, whether an overflow queue must serve)
    let cases = [
        ("bcpqp weighted 3:1:2, class 1 not fair, 600 flows", format!("{bc}\nrate = \"300mbit\"\nqueue_size = 6000\npolicy = \"weighted\"\nweights = [3, 1, 2]\nfair_classes = [0, 2]\nmax_flows = 300"), 3, 600, vec![v4], false),
        ("bcpqp priority, class 0 not fair, 400 flows, max_flows 100", format!("{bc}\nrate = \"400mbit\"\nqueue_size = \"30kb\"\npolicy = \"priority\"\nfair_classes = [1]\nmax_flows = 100"), 2, 400, vec![v4], true),
        ("bcpqp priority(0, weighted(1:1, 2:2)), 300 flows", format!("{bc}\nrate = \"150mbit\"\nqueue_size = 6000\npolicy = \"priority(0, weighted(1:1, 2:2))\"\nmax_flows = 256"), 3, 300, vec![v4], false),
        ("pqp weighted 1:2:3:4, class 2 not fair, 500 flows", "kind = \"pqp\"\nrate = \"250mbit\"\nqueue_size = 3000\npolicy = \"weighted\"\nweights = [1, 2, 3, 4]\nfair_classes = [0, 1, 3]\nmax_flows = 200".to_string(), 4, 500, vec![v4], false),
        ("pqp weighted(fair(0, 1):3, fair(2, 3):1), 400 flows on two aggregates", "kind = \"pqp\"\nrate = \"200mbit\"\nqueue_size = 3000\npolicy = \"weighted(fair(0, 1):3, fair(2, 3):1)\"\nmax_flows = 8".to_string(), 4, 400, vec![v4, v6], true),
    ];
    for (i, (name, cfg, classes, flows, dsts, overflows)) in cases.into_iter().enumerate() {
        let toml = format!("{cfg}\nqueues = {classes}\nclassify = \"class\"\nflows = \"exact\"");
        let cfg = EnforcerConfig::from_toml(&toml).unwrap();
        let bpf = load(&cfg).expect("needs root");
        let arrivals = on_off_flows(80 + i as u64, flows, &dsts, classes, 300_000_000);
        let mut core: HashMap<u64, (u64, AnyPolicer)> = HashMap::new();
        let mut seen: HashMap<u64, Vec<(u16, u64)>> = HashMap::new();
        let mut reasons = [0u64; 3];
        let compare = |core: &HashMap<u64, (u64, AnyPolicer)>, seen: &HashMap<u64, Vec<(u16, u64)>>, at: usize| {
            for (agg, raw) in bpf.states().unwrap() {
                let st: CfState = bytemuck::pod_read_unaligned(&raw);
                let seen = &seen[&agg.id()];
                let (mut b, mut c) = (bpf_facts(&st, classes, seen), core_facts(&core[&agg.id()].1, classes, seen));
                let flow = b.flows.iter().zip(&c.flows).find(|(x, y)| x != y).map(|(x, y)| (*x, *y));
                assert_eq!(flow, None, "{name}: aggregate {} after packet {at}: first (class, flow, occupancy, magic) that differs (bpf, core)", agg.ip());
                (b.flows, c.flows) = (vec![], vec![]);
                assert_eq!(b, c, "{name}: aggregate {} after packet {at}", agg.ip());
            }
        };
        for (k, a) in arrivals.iter().enumerate() {
            let pkt = parse(&a.frame, &settings).unwrap().pkt;
            let (origin, p) = core.entry(pkt.aggregate).or_insert_with(|| (a.t, cfg.build_policer().unwrap()));
            let want = p.on_arrival(Instant(a.t - *origin), &pkt);
            let got = bpf.test_run(&a.frame, a.t).unwrap();
            assert_eq!(got.is_pass(), want.is_pass(), "{name}: packet {k} at t={} class {} flow {:x}: bpf {got:?}, core {want:?}", a.t, pkt.class, pkt.flow);
            if let Verdict::Drop(r) = want {
                reasons[BPF_DROP_REASONS.iter().position(|&x| x == r).unwrap()] += 1;
            }
            let c = (pkt.class as usize).min(classes - 1);
            let key = match p {
                AnyPolicer::PqpClassFlows(q) => q.classes().flow_key(c, &pkt),
                AnyPolicer::BcpqpClassFlows(b) => b.classes().flow_key(c, &pkt),
                _ => unreachable!(),
            };
            let keys = seen.entry(pkt.aggregate).or_default();
            if !keys.contains(&(c as u16, key)) {
                keys.push((c as u16, key));
            }
            if k % 5000 == 4999 {
                compare(&core, &seen, k);
            }
        }
        compare(&core, &seen, arrivals.len());
        let stats = bpf.stats().unwrap();
        let by_reason: Vec<u64> = (0..3).map(|r| stats.iter().map(|(_, s)| s.drops_by_reason[r]).sum()).collect();
        assert_eq!(by_reason, reasons, "{name}: drops by reason (overlimit, burst control, flow threshold)");
        let passed: u64 = stats.iter().map(|(_, s)| s.passed_packets).sum();
        let facts: Vec<ClassFacts> = core.iter().map(|(agg, (_, p))| core_facts(p, classes, &seen[agg])).collect();
        let (created, reclaimed, overflowed) = facts.iter().fold((0, 0, 0), |(c, r, o), f| (c + f.created, r + f.reclaimed, o + f.overflow_packets));
        let (fills, removals) = facts.iter().fold((0, 0), |(a, b), f| (a + f.burst_events.0, b + f.burst_events.1));
        println!("{name}: {} packets, {passed} passed, drops by reason {reasons:?}, flows created {created}, reclaimed {reclaimed}, overflow packets {overflowed}, magic fills {fills}, removals {removals}", arrivals.len());
        // Vectors that never drop, never reclaim or never fill would not test what they claim.
        let n = arrivals.len() as u64;
        assert!(passed > n / 10 && passed < n * 9 / 10, "{name}: passed {passed} of {n}");
        assert!(reclaimed > flows as u64 / 4, "{name}: only {reclaimed} flows reclaimed");
        assert_eq!(overflowed > 0, overflows, "{name}: overflow packets {overflowed}");
        if cfg.kind() == "bcpqp" {
            assert!(fills > 0 && removals > 0 && reasons[1] > 0, "{name}: burst control never acted");
        }
    }
}
