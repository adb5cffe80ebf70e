//! Classes of exact flows (`flows = "exact"`, `classify = "class"`, `bpf/pqp_class_flows.c`)
//! against the core's ClassFlowPqp / ClassFlowBcPqp on shared vectors: weighted, priority and
//! nested trees, hundreds of on/off flows, classes in and out of `fair_classes`.

use super::{bpf_flow_facts, on_off_flows, require_root, run_exact, ExactCheck, ExactFacts};
use ratekit_core::pqp_class_flows::ClassFlows;
use ratekit_core::{AnyPolicer, EnforcerConfig, Packet};
use ratekit_dataplane::maps::CfState;
use std::net::IpAddr;

/// A flow key as the core sees it: (class, flow key in the class).
type Key = (u16, u64);

fn classes_of<T: Default + Clone>(p: &ClassFlows<T>, classes: usize, magic: impl Fn(usize, u64) -> u64, seen: &[Key]) -> ExactFacts<Key> {
    let (stats, fs) = (p.stats(), p.flow_stats());
    ExactFacts {
        passed: stats.passed_packets,
        dropped: stats.dropped_packets,
        created: fs.flows_created,
        reclaimed: fs.flows_reclaimed,
        overflow_packets: fs.overflow_packets,
        held: p.flows(),
        backlog_nb: (0..classes).map(|c| p.class_flows_backlog_nb(c)).collect(),
        burst_events: (0, 0),
        flows: seen.iter().map(|&(c, k)| ((c, k), p.flow_occupancy_nb(c as usize, k), magic(c as usize, k))).collect(),
    }
}

fn core_facts(p: &AnyPolicer, classes: usize, seen: &[Key]) -> ExactFacts<Key> {
    match p {
        AnyPolicer::PqpClassFlows(q) => classes_of(q.classes(), classes, |_, _| 0, seen),
        AnyPolicer::BcpqpClassFlows(b) => {
            ExactFacts { burst_events: b.burst_events(), ..classes_of(b.classes(), classes, |c, k| b.flow_magic_nb(c, k), seen) }
        }
        _ => unreachable!("not a policer over classes of exact flows"),
    }
}

/// The packet's class (its DSCP clamped, as `classify = "class"` takes it) and its key there.
fn key_of(p: &AnyPolicer, pkt: &Packet, classes: usize) -> Key {
    let c = (pkt.class as usize).min(classes - 1);
    let key = match p {
        AnyPolicer::PqpClassFlows(q) => q.classes().flow_key(c, pkt),
        AnyPolicer::BcpqpClassFlows(b) => b.classes().flow_key(c, pkt),
        _ => unreachable!("not a policer over classes of exact flows"),
    };
    (c as u16, key)
}

/// PQP and BC-PQP over classes of exact flows: every verdict and drop reason agrees with the
/// core's, and every 5000 packets and at the end the mirrored state (counters, flows held,
/// created, reclaimed, overflow packets, burst events, each class's flows' backlog, and each
/// (class, flow key)'s occupancy and magic).
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn class_flows_match_core() {
    require_root();
    let v4: IpAddr = "10.9.0.1".parse().unwrap();
    let v6: IpAddr = "fd00::9".parse().unwrap();
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
        let cfg = EnforcerConfig::from_toml(&format!("{cfg}\nqueues = {classes}\nclassify = \"class\"\nflows = \"exact\"")).unwrap();
        let arrivals = on_off_flows(80 + i as u64, flows, &dsts, classes, 300_000_000);
        let bpf = |raw: &[u8], seen: &[Key]| {
            let st: CfState = bytemuck::pod_read_unaligned(raw);
            bpf_flow_facts(&st.f, &st.stats, classes, seen, |k| k)
        };
        let check = ExactCheck { key: &|p, pkt| key_of(p, pkt, classes), core: &|p, seen| core_facts(p, classes, seen), bpf: &bpf };
        run_exact(name, &cfg, &arrivals, flows, overflows, check);
    }
}
