//! Rust core vs BPF programs on shared arrival vectors (issue 5, deliverable 3): every packet
//! gets the same verdict from ratekit-core's policer and from the tc-BPF program run through
//! BPF_PROG_TEST_RUN with the test clock (skb->tstamp), and the per-aggregate counters agree.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::{EnforcerConfig, Instant, Policer, Verdict};
use ratekit_dataplane::bpf::{pin_thread_to_cpu, BpfPolicer, LoadOptions};
use ratekit_dataplane::maps::{FpState, FqFlows, FqState, Settings, TbState, FQ_NONE};
use ratekit_dataplane::packet::{build_frame, parse, IPPROTO_TCP, IPPROTO_UDP};
use std::collections::HashMap;
use std::net::IpAddr;

#[path = "conformance/classes.rs"]
mod classes;

struct Arrival {
    t: u64,
    frame: Vec<u8>,
}

/// Bursty arrivals: several aggregates (v4 and v6), several flows each, sizes 40..1500 bytes,
/// back-to-back trains separated by idle gaps, offered well above the policed rate.
/// `quantum` rounds arrival times so that, with a rate of 10⁹/quantum bytes/s multiples, credit
/// comes in whole bytes and "tokens exactly equal to the length" happens often.
fn vector(seed: u64, n: usize, quantum: u64) -> Vec<Arrival> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dsts: [IpAddr; 3] = ["10.9.0.1".parse().unwrap(), "10.9.0.2".parse().unwrap(), "fd00::9".parse().unwrap()];
    let mut t = 0u64;
    (0..n)
        .map(|_| {
            t += if rng.gen_bool(0.05) { rng.gen_range(0..20_000_000) } else { rng.gen_range(0..100_000) };
            t -= t % quantum;
            let dst = dsts[rng.gen_range(0..dsts.len())];
            let src: IpAddr = if dst.is_ipv4() { "10.8.0.1".parse().unwrap() } else { "fd00::8".parse().unwrap() };
            let sport = 1000 + rng.gen_range(0..8u16);
            let proto = if rng.gen_bool(0.8) { IPPROTO_TCP } else { IPPROTO_UDP };
            let len = if rng.gen_bool(0.7) { 1500 } else { rng.gen_range(60..1500) / 100 * 100 };
            Arrival { t, frame: build_frame(src, dst, sport, 5201, proto, rng.gen_range(0..4), len) }
        })
        .collect()
}

fn load(cfg: &EnforcerConfig) -> Option<BpfPolicer> {
    let opts = LoadOptions { settings: Settings { match_dst: 1, prefix4: 32, prefix6: 128, test_clock: 1 }, ..Default::default() };
    match BpfPolicer::load(cfg, &opts) {
        Ok(p) => Some(p),
        Err(e @ ratekit_dataplane::bpf::BpfError::Privileges { .. }) => {
            eprintln!("SKIPPED: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Runs `arrivals` through the BPF program and through one fresh core policer per aggregate
/// (whose clock starts at that aggregate's first arrival, as the BPF state's does).
fn check(cfg_toml: &str, arrivals: &[Arrival]) -> (BpfPolicer, HashMap<u64, (u64, ratekit_core::AnyPolicer)>) {
    let cfg = EnforcerConfig::from_toml(cfg_toml).unwrap();
    let bpf = load(&cfg).expect("needs root");
    let settings = Settings { match_dst: 1, prefix4: 32, prefix6: 128, test_clock: 1 };
    let mut core: HashMap<u64, (u64, ratekit_core::AnyPolicer)> = HashMap::new();
    let mut passed = 0;
    for (i, a) in arrivals.iter().enumerate() {
        let parsed = parse(&a.frame, &settings).unwrap();
        let (origin, p) = core.entry(parsed.pkt.aggregate).or_insert_with(|| (a.t, cfg.build_policer().unwrap()));
        let want = p.on_arrival(Instant(a.t - *origin), &parsed.pkt);
        let got = bpf.test_run(&a.frame, a.t).unwrap();
        assert_eq!(got.is_pass(), want.is_pass(), "{cfg_toml:?}: packet {i} at t={} len={}: bpf {got:?}, core {want:?}", a.t, parsed.pkt.len);
        passed += want.is_pass() as usize;
    }
    // A vector that passes or drops everything would not test the arithmetic.
    assert!(passed > arrivals.len() / 10 && passed < arrivals.len() * 9 / 10, "passed {passed} of {}", arrivals.len());
    let stats = bpf.stats().unwrap();
    assert_eq!(stats.len(), core.len());
    let total: u64 = stats.iter().map(|(_, s)| s.passed_packets).sum();
    assert_eq!(total as usize, passed);
    (bpf, core)
}

fn require_root() {
    ratekit_dataplane::netns::require_root("BPF_PROG_TEST_RUN");
}

#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn token_bucket_matches_core() {
    require_root();
    check("kind = \"token_bucket\"\nrate = \"4mbit\"\nburst = \"30kb\"", &vector(1, 4000, 1));
    // 1 MB/s with µs-aligned arrivals: credit is whole bytes, so equality cases occur.
    let (bpf, core) = check("kind = \"token_bucket\"\nrate = \"8mbit\"\nburst = 3000\ninitial = 1", &vector(2, 4000, 1000));
    for (agg, raw) in bpf.states().unwrap() {
        let st: TbState = bytemuck::pod_read_unaligned(&raw);
        let Some((_, ratekit_core::AnyPolicer::TokenBucket(tb))) = core.get(&agg.id()) else { panic!("no core twin") };
        assert_eq!(st.tokens_nb, tb.tokens_nanobytes(), "aggregate {}", agg.ip());
    }
}

/// A lock left held (its holder stalled on another CPU) makes the token bucket wait, then pass the
/// packet unpoliced, counted untracked, leaving the state as it was. The wait is rk_lock's 2^23
/// tries, milliseconds at least (its first form, 4096 tries, gave up within tens of microseconds).
#[test]
fn token_bucket_held_lock_waits_then_passes_untracked() {
    let cfg = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = 8000\nburst = 1500").unwrap();
    let Some(bpf) = load(&cfg) else { return };
    let frame = build_frame("10.8.0.1".parse().unwrap(), "10.9.0.1".parse().unwrap(), 1, 2, IPPROTO_UDP, 0, 1000);
    assert_eq!(bpf.test_run(&frame, 1_000).unwrap(), Verdict::Pass); // 500 bytes left
    let (key, raw) = bpf.states().unwrap().remove(0);
    let mut held: TbState = bytemuck::pod_read_unaligned(&raw);
    held.lock = 1;
    bpf.set_state(&key, bytemuck::bytes_of(&held)).unwrap();
    let start = std::time::Instant::now();
    assert_eq!(bpf.test_run(&frame, 2_000).unwrap(), Verdict::Pass, "a held lock passes the packet");
    let waited = start.elapsed();
    println!("gave up after {waited:?}");
    assert_eq!(bpf.untracked().unwrap(), 1);
    assert_eq!(bytemuck::pod_read_unaligned::<TbState>(&bpf.states().unwrap()[0].1), held, "state touched without the lock");
    assert!(waited >= std::time::Duration::from_millis(1), "gave up after {waited:?}: too soon for 2^23 tries");
    held.lock = 0;
    bpf.set_state(&key, bytemuck::bytes_of(&held)).unwrap();
    assert!(matches!(bpf.test_run(&frame, 3_000).unwrap(), Verdict::Drop(_)), "released: 500 bytes cannot pass 1000");
}

/// Non-IP frames are not policed and create no aggregate.
#[test]
fn non_ip_passes_untouched() {
    let cfg = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = 8000\nburst = 1").unwrap();
    let Some(bpf) = load(&cfg) else { return };
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(bpf.test_run(&arp, 1).unwrap(), Verdict::Pass);
    assert!(bpf.stats().unwrap().is_empty());
}

/// Two CPUs hammer one aggregate at the same (test-clock) times: the lock must keep every
/// counter update and never spend the same tokens twice.
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn policers_are_correct_across_cpus() {
    require_root();
    for toml in [
        "kind = \"token_bucket\"\nrate = \"8mbit\"\nburst = 20000",
        // One flow, so one queue: B + r·t bounds what PQP and BC-PQP may pass.
        "kind = \"pqp\"\nrate = \"8mbit\"\nqueue_size = 20000",
        "kind = \"bcpqp\"\nrate = \"8mbit\"\nqueue_size = 20000",
        // Passing needs B − Σ o_i ≥ l and Σ o_i falls only by allocated tokens: B + r·t too.
        "kind = \"fair_policer\"\nrate = \"8mbit\"\nbucket = 20000",
    ] {
        across_cpus(toml);
    }
}

fn across_cpus(toml: &str) {
    let cfg = EnforcerConfig::from_toml(toml).unwrap();
    let bpf = load(&cfg).expect("needs root");
    let frame = build_frame("10.8.0.1".parse().unwrap(), "10.9.0.1".parse().unwrap(), 1, 2, IPPROTO_UDP, 0, 1000);
    let n = 20_000u64;
    std::thread::scope(|s| {
        for cpu in 0..2usize {
            let runner = bpf.runner().unwrap();
            let frame = &frame;
            s.spawn(move || {
                pin_thread_to_cpu(cpu);
                for i in 0..n {
                    runner.passes(frame, i * 100_000).unwrap(); // 2 × 10 Mbyte/s offered
                }
            });
        }
    });
    let stats = bpf.stats().unwrap();
    assert_eq!(stats.len(), 1);
    let st = stats[0].1;
    // A lock wait that gives up passes the packet, counted untracked: rk_lock waits ~0.1 s for a
    // holder stalled by an interrupt or the hypervisor (15 µs before this bound was last met with
    // 0.3-2.5 in 10^4 packets given up), so the bound is loose on purpose.
    let untracked = bpf.untracked().unwrap();
    println!("{toml}: {untracked} of {} packets passed unpoliced (bound {})", 2 * n, n / 100);
    assert!(untracked <= n / 100, "{toml}: {untracked} packets passed unpoliced");
    assert_eq!(st.passed_packets + st.dropped_packets + untracked, 2 * n, "{toml}: lost counter updates: {st:?}");
    let allowed = 20_000 + 1_000_000 * (n - 1) * 100_000 / 1_000_000_000;
    assert!(st.passed_bytes <= allowed, "{toml}: passed {} > burst + rate × t = {allowed}", st.passed_bytes);
    assert!(st.passed_bytes > allowed * 9 / 10, "{toml}: passed only {} of {allowed}", st.passed_bytes);
}

/// PQP and BC-PQP (flat fair by flow hash, weighted, priority and two nested trees by class):
/// same verdicts packet by packet, same counters, and for BC-PQP the same number of magic
/// fills and removals (which must occur, or burst control was not exercised).
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn pqp_and_bcpqp_match_core() {
    require_root();
    let policies = [
        "queues = 8",
        "queues = 4\nclassify = \"class\"\npolicy = \"weighted\"\nweights = [1, 2, 3, 4]",
        "queues = 4\nclassify = \"class\"\npolicy = \"priority\"",
        "queues = 4\nclassify = \"class\"\npolicy = \"priority(0, weighted(1:1, 2:2), 3)\"",
        "queues = 4\nclassify = \"class\"\npolicy = \"weighted(fair(0, 1):3, fair(2, 3):1)\"",
    ];
    for (i, policy) in policies.iter().enumerate() {
        let arrivals = vector(10 + i as u64, 3000, 1000);
        // 1 MB/s with µs-aligned arrivals and 1500-byte packets in 3000-byte queues: service
        // comes in whole bytes and "exactly full" happens often, so an off-by-one shows.
        let pqp = format!("kind = \"pqp\"\nrate = \"8mbit\"\nqueue_size = 3000\n{policy}");
        check(&pqp, &arrivals);
        // BC-PQP with the same small queues: its admission equality cases too.
        check(&format!("kind = \"bcpqp\"\nrate = \"8mbit\"\nqueue_size = 3000\nwindow = \"20ms\"\n{policy}"), &arrivals);
        let bc = format!("kind = \"bcpqp\"\nrate = \"8mbit\"\nqueue_size = \"30kb\"\nwindow = \"20ms\"\n{policy}");
        let (bpf, core) = check(&bc, &arrivals);
        let (mut fills, mut removals) = (0, 0);
        for (agg, raw) in bpf.states().unwrap() {
            let st: ratekit_dataplane::maps::BcpqpState = bytemuck::pod_read_unaligned(&raw);
            let Some((_, ratekit_core::AnyPolicer::Bcpqp(b))) = core.get(&agg.id()) else { panic!("no core twin") };
            assert_eq!((st.burst_fills, st.magic_removals), b.burst_events(), "{policy}: aggregate {}", agg.ip());
            fills += st.burst_fills;
            removals += st.magic_removals;
        }
        assert!(fills > 0 && removals > 0, "{policy}: burst control never acted ({fills} fills, {removals} removals)");
    }
}

/// Strict priority with classes 0-1 offering the whole rate (Poisson, µs-aligned, 1500 B) and
/// classes 2-3 starved: the starved classes' windows close while a higher class holds phantom
/// backlog, where their magic must stay (X_i = 0 for the θ− test, docs/bcpqp.md "Priority and
/// the θ− test"). BPF code removing it by the demand rule alone fails this (tried).
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn bcpqp_starved_priority_classes_match_core() {
    require_root();
    let mut rng = ChaCha8Rng::seed_from_u64(40);
    let mut next = [0u64; 4];
    let mut arrivals = Vec::new();
    let (src, dst): (IpAddr, IpAddr) = ("10.8.0.1".parse().unwrap(), "10.9.0.1".parse().unwrap());
    while arrivals.len() < 3000 {
        let (class, &t) = next.iter().enumerate().min_by_key(|(_, t)| **t).unwrap();
        arrivals.push(Arrival { t: 1000 + t, frame: build_frame(src, dst, 1000, 5201, IPPROTO_UDP, class as u8, 1500) });
        // Each class offers half of 1 MB/s: mean gap 3 ms, rounded to µs.
        next[class] = t + ((-(1.0 - rng.gen::<f64>()).ln() * 3000.0) as u64 + 1) * 1000;
    }
    for policy in ["policy = \"priority\"", "policy = \"priority(0, 1, fair(2, 3))\""] {
        let toml = format!("kind = \"bcpqp\"\nrate = \"8mbit\"\nqueue_size = \"30kb\"\nwindow = \"20ms\"\nqueues = 4\nclassify = \"class\"\n{policy}");
        let (bpf, core) = check(&toml, &arrivals);
        let (agg, raw) = &bpf.states().unwrap()[0];
        let st: ratekit_dataplane::maps::BcpqpState = bytemuck::pod_read_unaligned(raw);
        let Some((_, ratekit_core::AnyPolicer::Bcpqp(b))) = core.get(&agg.id()) else { panic!("no core twin") };
        assert_eq!((st.burst_fills, st.magic_removals), b.burst_events(), "{policy}");
        assert!(st.burst_fills >= 2, "{policy}: the starved classes were never filled with magic");
    }
}

/// A long catch-up (`bcpqp::CATCH_UP_WINDOWS`, `RK_CATCH_UP_WINDOWS`): strict priority over eight
/// classes with 3 MB phantom queues. Class 0 sends 1500 B every 1.25 ms (1.2 × the rate: at most
/// 17 packets per 20 ms window, below θ+·X = 30 kB, so it is never filled with magic) for 10 s,
/// and its real phantom backlog grows to about 2 MB; classes 1-7 send one packet per 6.25 ms
/// between them, are filled with magic at once (X_i = 0 below a busy class) and then dropped.
/// Then 2.5 s of silence: while class 0's backlog drains (about 2 s) the starved classes keep
/// their magic, and their windows end every 20 ms: the next packet replays about 100 window ends
/// (the core's count, checked by instrumenting it), each after the service up to it; a BPF
/// bound of 8 window ends fails this (tried).
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn bcpqp_long_catch_up_matches_core() {
    require_root();
    let (src, dst): (IpAddr, IpAddr) = ("10.8.0.1".parse().unwrap(), "10.9.0.1".parse().unwrap());
    let frame = |class: u8| build_frame(src, dst, 1000, 5201, IPPROTO_UDP, class, 1500);
    let mut arrivals = Vec::new();
    for k in 0..8500u64 {
        let t = 1000 + k * 1_250_000 + if k >= 8000 { 2_500_000_000 } else { 0 };
        arrivals.push(Arrival { t, frame: frame(0) });
        if k % 5 == 0 && k < 8000 {
            arrivals.push(Arrival { t: t + 600_000, frame: frame((k / 5 % 7 + 1) as u8) });
        }
    }
    let toml = "kind = \"bcpqp\"\nrate = \"8mbit\"\nqueue_size = \"3mb\"\nwindow = \"20ms\"\nqueues = 8\nclassify = \"class\"\npolicy = \"priority\"";
    let (bpf, core) = check(toml, &arrivals);
    let (agg, raw) = &bpf.states().unwrap()[0];
    let st: ratekit_dataplane::maps::BcpqpState = bytemuck::pod_read_unaligned(raw);
    let Some((_, ratekit_core::AnyPolicer::Bcpqp(b))) = core.get(&agg.id()) else { panic!("no core twin") };
    assert_eq!((st.burst_fills, st.magic_removals), b.burst_events());
    assert!(st.burst_fills >= 6, "the starved classes were never filled with magic: {} fills", st.burst_fills);
}

/// Flat fair water-filling when a queue's backlog equals the water level exactly (⌊S/n⌋):
/// it must be emptied and leave the active list. Two queues by class at 1 MB/s, 3000-byte
/// queues: after 3 ms (3000 B of service) queue 0 holds 1500 B = ⌊3000/2⌋ B. Kept on the list
/// (`<` for `≤`, tried), it is listed twice when it refills, so the next 1.5 ms of deferred
/// service is split in thirds: queue 0 seems to hold 2500 B instead of 2250 B and the
/// 600-byte packet is dropped where the core passes it.
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn flat_fair_water_level_equality_matches_core() {
    require_root();
    let arrivals = [
        (1000, 0, 1500),
        (1000, 1, 1500),
        (1000, 1, 1500),
        (3_001_000, 0, 1500),
        (3_001_000, 0, 1500),
        (4_501_000, 0, 600),
        (4_501_000, 0, 1500), // full either way
        (4_501_000, 0, 1500),
    ];
    two_class_queues_drop_the_last_two("8mbit", &arrivals);
}

/// PQP and BC-PQP, fair between two 3000-byte queues by class, on arrivals (t, class, length):
/// the BPF programs agree with the core, and the last two arrivals are the only drops.
fn two_class_queues_drop_the_last_two(rate: &str, arrivals: &[(u64, u8, u16)]) {
    let (src, dst): (IpAddr, IpAddr) = ("10.8.0.1".parse().unwrap(), "10.9.0.1".parse().unwrap());
    let arrivals: Vec<Arrival> = arrivals
        .iter()
        .map(|&(t, class, len)| Arrival { t, frame: build_frame(src, dst, 1000, 5201, IPPROTO_UDP, class, len) })
        .collect();
    for kind in ["pqp", "bcpqp"] {
        let (bpf, _) = check(&format!("kind = \"{kind}\"\nrate = \"{rate}\"\nqueue_size = 3000\nqueues = 2\nclassify = \"class\""), &arrivals);
        assert_eq!(bpf.stats().unwrap()[0].1.dropped_packets, 2, "{kind}: the last two packets are the drops");
    }
}

/// Flat fair service whose remainder empties a queue: two 1500-byte queues served 1 nano-byte
/// short of both (3·10¹² − 1 = 359 ns at 8 356 545 961 B/s) leave ⌊S/2⌋ + 1 to the first, which
/// empties and must leave the active list. Kept there (the one-each remainder did that), it is
/// listed twice once it refills, takes two thirds of the next 1203 B of service instead of half,
/// and queue 1 seems to hold 1099 B instead of 898 B: its 2050-byte packet is dropped where the
/// core passes it.
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn flat_fair_remainder_that_empties_a_queue_matches_core() {
    require_root();
    let arrivals = [
        (1000, 0, 1500),
        (1000, 1, 1500),
        (1359, 0, 1500),
        (1359, 1, 1500),
        (1503, 1, 2050),
        (1503, 1, 1500), // full either way
        (1503, 0, 2200), // queue 0 holds 899 B (698 B listed twice)
    ];
    two_class_queues_drop_the_last_two("8356545961bps", &arrivals);
}

/// FairPolicer: the same verdicts packet by packet and the same state (Σ o_i, credit, active
/// list length, allocation steps, residue clears, every flow's sketch estimate and each row's
/// sum) as ratekit-core's, for the default sketch, a tiny one where flows collide (and residue
/// clears happen), and the weighted variant. µs-aligned arrivals at 1 MB/s make credit whole
/// bytes, so "k equals the length" and "estimate equals the threshold" occur.
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn fair_policer_matches_core() {
    require_root();
    let variants = [
        ("default sketch", "", false),
        ("2 x 4 sketch (collisions)", "sketch_depth = 2\nsketch_width = 4\n", true),
        // one row: a flow takes its colliders' bytes too, so no residue is left to clear
        ("weighted, 1 x 8 sketch", "sketch_depth = 1\nsketch_width = 8\ntoken_unit = 500\nweights = [1, 2, 3, 4]\n", false),
        ("token unit 100, 4 x 4096", "sketch_width = 4096\ntoken_unit = 100\nseed = 7\n", false),
        // 1500-byte packets in a 3000-byte bucket: "k = l" and "ô_i = k" are common, so an
        // off-by-one in either test shows.
        ("3000-byte bucket", "bucket = 3000\n", false),
        ("3000-byte bucket, 2 x 4 sketch", "bucket = 3000\nsketch_depth = 2\nsketch_width = 4\n", true),
    ];
    for (i, (name, extra, collide)) in variants.iter().enumerate() {
        let arrivals = vector(20 + i as u64, 3000, 1000);
        let bucket = if extra.contains("bucket") { "" } else { "bucket = \"20kb\"\n" };
        let toml = format!("kind = \"fair_policer\"\nrate = \"8mbit\"\n{bucket}{extra}");
        let (bpf, core) = check(&toml, &arrivals);
        let settings = Settings { match_dst: 1, prefix4: 32, prefix6: 128, test_clock: 1 };
        let (mut clears, mut threshold_drops, mut listed) = (0, 0, 0);
        for (agg, raw) in bpf.states().unwrap() {
            let st: FpState = bytemuck::pod_read_unaligned(&raw);
            let Some((_, ratekit_core::AnyPolicer::FairPolicer(fp))) = core.get(&agg.id()) else { panic!("no core twin") };
            let s = fp.stats();
            let what = format!("{name}: aggregate {}", agg.ip());
            assert_eq!((st.occupied, st.owed), (fp.occupied(), fp.owed()), "{what}: Σ o_i, residue owed");
            assert_eq!(st.len as usize, fp.active_len(), "{what}: active list");
            assert_eq!((st.allocation_steps, st.residue_clears, st.residue_bytes), (s.allocation_steps, s.residue_clears, s.residue_bytes), "{what}");
            assert_eq!(st.stats.drops_by_reason[2], s.threshold_drops, "{what}: threshold drops");
            assert_eq!(st.stats.drops_by_reason[0], s.overlimit_drops, "{what}: overlimit drops");
            assert_eq!(st.list_full_drops, 0, "{what}: the vectors stay within the list bound");
            let sketch = fp.sketch();
            for r in 0..sketch.depth() {
                let sum: u64 = st.sketch[r].iter().map(|&c| c as u64).sum();
                assert_eq!(sum, sketch.row_sum(r), "{what}: row {r}");
            }
            for a in arrivals.iter() {
                let pkt = parse(&a.frame, &settings).unwrap().pkt;
                if pkt.aggregate == agg.id() {
                    let est = (0..sketch.depth()).map(|r| st.sketch[r][sketch.column(r, pkt.flow)]).min().unwrap();
                    assert_eq!(est, fp.estimate(pkt.flow), "{what}: flow {:x}", pkt.flow);
                }
            }
            clears += s.residue_clears;
            threshold_drops += s.threshold_drops;
            listed += st.len;
        }
        assert!(threshold_drops > 0, "{name}: the per-flow threshold never acted");
        assert!(listed > 0, "{name}: no flow left holding tokens at the end");
        if *collide {
            assert!(clears > 0, "{name}: collisions never left a residue to clear");
        }
    }
}

/// Configs beyond the BPF FairPolicer's bounds are refused naming the field.
#[test]
fn fair_policer_bounds_are_named() {
    use ratekit_dataplane::bpf::BpfParams;
    for (extra, field) in [
        ("sketch_width = 8192", "sketch_width"),
        ("sketch_depth = 5", "sketch_depth"),
        ("token_unit = 1", "token_unit"),
    ] {
        let cfg = EnforcerConfig::from_toml(&format!("kind = \"fair_policer\"\nrate = \"8mbit\"\nbucket = \"1mb\"\n{extra}")).unwrap();
        let err = BpfParams::from_config(&cfg).unwrap_err().to_string();
        assert!(err.starts_with(field), "{extra}: {err}");
    }
    let ok = EnforcerConfig::from_toml("kind = \"fair_policer\"\nrate = \"8mbit\"\nbucket = \"1mb\"").unwrap();
    assert_eq!(BpfParams::from_config(&ok).unwrap().program(), "fair_policer");
}

/// Exact per-flow configs beyond the program are refused naming the field: more than 1024 flows,
/// any policy but flat `fair` by flow key (the core's validation), classification by class (the
/// loader's: the core runs classes of exact flows, the program does not).
#[test]
fn exact_flow_bounds_are_named() {
    use ratekit_dataplane::bpf::BpfParams;
    for (extra, field) in [
        ("max_flows = 1025", "max_flows: 1025 > 1024"),
        ("policy = \"weighted\"\nqueues = 2\nweights = [1, 2]", "weights"),
        ("policy = \"priority\"", "policy"),
        ("policy = \"weighted(fair(0, 1):3, fair(2, 3):1)\"\nqueues = 4", "policy"),
        // Classes of exact flows: 1024 flows over the fair classes, and the hashed programs' tree bounds.
        ("classify = \"class\"\nqueues = 2\npolicy = \"priority\"", "max_flows: 2 fair classes × max_flows 1024 = 2048 > 1024"),
        ("classify = \"class\"\nqueues = 2\npolicy = \"priority\"\nmax_flows = 513", "max_flows: 2 fair classes × max_flows 513"),
        ("classify = \"class\"\nqueues = 17\nmax_flows = 8", "queues = 17"),
    ] {
        let cfg = EnforcerConfig::from_toml(&format!("kind = \"bcpqp\"\nrate = \"8mbit\"\nqueue_size = \"30kb\"\nflows = \"exact\"\n{extra}"));
        let err = match cfg {
            Ok(cfg) => BpfParams::from_config(&cfg).unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(field), "{extra}: {err}");
    }
    let classes = "kind = \"pqp\"\nrate = \"8mbit\"\nqueue_size = \"30kb\"\nflows = \"exact\"\nclassify = \"class\"\nqueues = 3\npolicy = \"priority\"";
    for extra in ["max_flows = 512\nfair_classes = [1, 2]", "max_flows = 341"] {
        let cfg = EnforcerConfig::from_toml(&format!("{classes}\n{extra}")).unwrap();
        assert_eq!(BpfParams::from_config(&cfg).unwrap().program(), "pqp_class_flows", "{extra}");
    }
    let ok = EnforcerConfig::from_toml("kind = \"pqp\"\nrate = \"8mbit\"\nqueue_size = \"30kb\"\nflows = \"exact\"\nmax_flows = 1024").unwrap();
    assert_eq!(BpfParams::from_config(&ok).unwrap().program(), "pqp_flows");
}

/// The BPF FairPolicer's one departure from the core: at most 256 flows on an aggregate's
/// active list. Flows beyond it are dropped as overlimit (never admitted unlisted) until the
/// list drains; flows already listed keep passing.
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn fair_policer_list_bound() {
    require_root();
    let cfg = EnforcerConfig::from_toml("kind = \"fair_policer\"\nrate = \"8mbit\"\nbucket = \"1mb\"").unwrap();
    let bpf = load(&cfg).expect("needs root");
    let (src, dst): (IpAddr, IpAddr) = ("10.8.0.1".parse().unwrap(), "10.9.0.1".parse().unwrap());
    let frame = |flow: u16| build_frame(src, dst, 1000 + flow, 5201, IPPROTO_UDP, 0, 100);
    // All at one instant: no credit, so no flow leaves the list.
    let passed: Vec<bool> = (0..300).map(|f| bpf.test_run(&frame(f), 1_000).unwrap().is_pass()).collect();
    assert!(passed[..256].iter().all(|&p| p), "the first 256 flows must pass");
    assert!(passed[256..].iter().all(|&p| !p), "flows beyond the list bound must be dropped");
    assert!(bpf.test_run(&frame(3), 1_000).unwrap().is_pass(), "a listed flow keeps passing");
    let st: FpState = bytemuck::pod_read_unaligned(&bpf.states().unwrap()[0].1);
    assert_eq!((st.len, st.list_full_drops, st.stats.drops_by_reason[0]), (256, 44, 44));
    // One second later 10⁶ bytes of credit have drained every listed flow: room again.
    assert!(bpf.test_run(&frame(299), 1_000_001_000).unwrap().is_pass());
    let st: FpState = bytemuck::pod_read_unaligned(&bpf.states().unwrap()[0].1);
    assert_eq!(st.len, 1);
}

/// A live change of the bucket (or sketch) restarts the sketch and the list, keeping the
/// counters; a rate change keeps them.
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn fair_policer_live_update() {
    use ratekit_dataplane::bpf::BpfParams;
    require_root();
    let toml = |rate: &str, bucket: u32| format!("kind = \"fair_policer\"\nrate = \"{rate}\"\nbucket = {bucket}\nsketch_width = 4096");
    let bpf = load(&EnforcerConfig::from_toml(&toml("8mbit", 100_000)).unwrap()).expect("needs root");
    let (src, dst): (IpAddr, IpAddr) = ("10.8.0.1".parse().unwrap(), "10.9.0.1".parse().unwrap());
    let frame = |flow: u16| build_frame(src, dst, 1000 + flow, 5201, IPPROTO_UDP, 0, 1000);
    let state = || -> FpState { bytemuck::pod_read_unaligned(&bpf.states().unwrap()[0].1) };
    let row_sums = |st: &FpState| st.sketch.iter().map(|row| row.iter().map(|&c| c as u64).sum()).collect::<Vec<u64>>();
    for f in 0..40 {
        assert!(bpf.test_run(&frame(f), 1_000).unwrap().is_pass());
    }
    assert_eq!((state().len, state().occupied), (40, 40_000));
    bpf.set_params(&BpfParams::from_config(&EnforcerConfig::from_toml(&toml("16mbit", 100_000)).unwrap()).unwrap()).unwrap();
    assert!(bpf.test_run(&frame(40), 1_000).unwrap().is_pass());
    assert_eq!((state().len, state().occupied), (41, 41_000), "a rate change keeps the flows' tokens");
    bpf.set_params(&BpfParams::from_config(&EnforcerConfig::from_toml(&toml("16mbit", 90_000)).unwrap()).unwrap()).unwrap();
    assert!(bpf.test_run(&frame(41), 1_000).unwrap().is_pass());
    let st = state();
    assert_eq!((st.len, st.occupied, st.stats.passed_packets), (1, 1000, 42), "a bucket change restarts, counters kept");
    assert_eq!(row_sums(&st), vec![1000; 4], "every counter in use was cleared");
}

/// On/off flows for the exact per-flow programs: each flow sends trains of 1-8 packets (10-500 µs
/// apart) separated by silences of 0-60 ms, longer than the 20 ms window often enough that
/// drained flows are reclaimed and come back as new flows. µs-aligned, as `vector`'s. The flows
/// of each destination take DSCP classes 0..`classes` in turn.
fn on_off_flows(seed: u64, flows: usize, dsts: &[IpAddr], classes: usize, horizon_ns: u64) -> Vec<Arrival> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut events = Vec::new();
    for f in 0..flows {
        let dst = dsts[f % dsts.len()];
        let src: IpAddr = if dst.is_ipv4() { "10.8.0.1".parse().unwrap() } else { "fd00::8".parse().unwrap() };
        let sport = 1000 + (f / dsts.len()) as u16;
        let dscp = ((f / dsts.len()) % classes) as u8;
        let mut t = 1_000 + rng.gen_range(0..horizon_ns / 4) / 1000 * 1000;
        while t < horizon_ns {
            for _ in 0..rng.gen_range(1..=8) {
                let len = if rng.gen_bool(0.7) { 1500 } else { rng.gen_range(1..15) * 100 };
                events.push((t, f, build_frame(src, dst, sport, 5201, IPPROTO_UDP, dscp, len)));
                t += rng.gen_range(10..500) * 1000;
            }
            t += rng.gen_range(0..60_000) * 1000;
        }
    }
    events.sort_by_key(|(t, f, _)| (*t, *f));
    events.into_iter().map(|(t, _, frame)| Arrival { t, frame }).collect()
}

/// What the core's exact-flow policer and the BPF program's state must agree on: counters, flows
/// held, burst events, the backlog of each class's flows (one class in the flat mode), and each
/// flow key seen (`K`: the flow, or (class, flow key)): its occupancy and magic (nano-bytes).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ExactFacts<K> {
    pub passed: u64,
    pub dropped: u64,
    pub created: u64,
    pub reclaimed: u64,
    pub overflow_packets: u64,
    pub held: usize,
    pub backlog_nb: Vec<u128>,
    pub burst_events: (u64, u64),
    pub flows: Vec<(K, u64, u64)>,
}

fn core_facts(p: &ratekit_core::AnyPolicer, flows: &[u64]) -> ExactFacts<u64> {
    use ratekit_core::AnyPolicer::{BcpqpFlows, PqpFlows};
    let (stats, fs, held, backlog_nb) = match p {
        PqpFlows(q) => (q.stats(), q.flow_stats(), q.flows(), q.backlog_nb()),
        BcpqpFlows(b) => (b.core().stats(), b.core().flow_stats(), b.core().flows(), b.core().backlog_nb()),
        _ => unreachable!("not an exact-flow policer"),
    };
    let flow = |f: u64| match p {
        PqpFlows(q) => (f, q.flow_occupancy_nb(f), 0),
        BcpqpFlows(b) => (f, b.core().flow_occupancy_nb(f), b.flow_magic_nb(f)),
        _ => unreachable!(),
    };
    ExactFacts {
        passed: stats.passed_packets,
        dropped: stats.dropped_packets,
        created: fs.flows_created,
        reclaimed: fs.flows_reclaimed,
        overflow_packets: fs.overflow_packets,
        held,
        backlog_nb: vec![backlog_nb],
        burst_events: if let BcpqpFlows(b) = p { b.burst_events() } else { (0, 0) },
        flows: flows.iter().map(|&f| flow(f)).collect(),
    }
}

/// The facts of the flow queues `f` of classes 0..`classes`, keyed as `key` maps a seen key.
pub(crate) fn bpf_flow_facts<K: Copy>(f: &FqFlows, stats: &ratekit_dataplane::maps::Stats, classes: usize, seen: &[K], key: impl Fn(K) -> (u16, u64)) -> ExactFacts<K> {
    let slot_of = f.slots_by_flow();
    let occupancy = |k: K| slot_of.get(&key(k)).map_or((k, 0, 0), |&s| (k, f.occupancy(s), f.slots[s].magic_nb.min(f.occupancy(s))));
    ExactFacts {
        passed: stats.passed_packets,
        dropped: stats.dropped_packets,
        created: f.flows_created,
        reclaimed: f.flows_reclaimed,
        overflow_packets: f.overflow_packets,
        held: f.cls.iter().map(|k| k.mapped as usize + (k.overflow != FQ_NONE) as usize).sum(),
        backlog_nb: (0..classes).map(|c| f.heap_of(c).iter().map(|&s| f.occupancy(s as usize) as u128).sum()).collect(),
        burst_events: (f.burst_fills, f.magic_removals),
        flows: seen.iter().map(|&k| occupancy(k)).collect(),
    }
}

/// How a vector of exact flows is judged: the flow key a packet has in the core, and both sides' facts.
pub(crate) struct ExactCheck<'a, K> {
    pub key: &'a dyn Fn(&ratekit_core::AnyPolicer, &ratekit_core::Packet) -> K,
    pub core: &'a dyn Fn(&ratekit_core::AnyPolicer, &[K]) -> ExactFacts<K>,
    pub bpf: &'a dyn Fn(&[u8], &[K]) -> ExactFacts<K>,
}

/// Runs `arrivals` through `bpf` and one core policer per aggregate: every verdict, the drops by
/// reason, and every 5000 packets and at the end each aggregate's facts agree. Also checks that
/// the vector drops, reclaims flows, uses the overflow queue iff `overflows`, and (BC-PQP) acts.
pub(crate) fn run_exact<K: Copy + PartialEq + std::fmt::Debug>(name: &str, cfg: &EnforcerConfig, arrivals: &[Arrival], flows: usize, overflows: bool, check: ExactCheck<K>) {
    let settings = Settings { match_dst: 1, prefix4: 32, prefix6: 128, test_clock: 1 };
    let bpf = load(cfg).expect("needs root");
    let mut core: HashMap<u64, (u64, ratekit_core::AnyPolicer)> = HashMap::new();
    let mut seen: HashMap<u64, Vec<K>> = HashMap::new();
    let mut reasons = [0u64; 3];
    let compare = |core: &HashMap<u64, (u64, ratekit_core::AnyPolicer)>, seen: &HashMap<u64, Vec<K>>, at: usize| {
        for (agg, raw) in bpf.states().unwrap() {
            let keys = &seen[&agg.id()];
            let (mut b, mut c) = ((check.bpf)(&raw, keys), (check.core)(&core[&agg.id()].1, keys));
            let flow = b.flows.iter().zip(&c.flows).find(|(x, y)| x != y).map(|(x, y)| (*x, *y));
            assert_eq!(flow, None, "{name}: aggregate {} after packet {at}: first (flow, occupancy, magic) that differs (bpf, core)", agg.ip());
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
            reasons[ratekit_dataplane::maps::BPF_DROP_REASONS.iter().position(|&x| x == r).unwrap()] += 1;
        }
        let key = (check.key)(p, &pkt);
        let keys = seen.entry(pkt.aggregate).or_default();
        if !keys.contains(&key) {
            keys.push(key);
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
    let facts: Vec<ExactFacts<K>> = core.iter().map(|(agg, (_, p))| (check.core)(p, &seen[agg])).collect();
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

/// PQP and BC-PQP with exact per-flow queues (`flows = "exact"`): hundreds of on/off flows per
/// aggregate, within max_flows and far beyond it (the overflow queue). Every verdict, every drop
/// reason, and at checkpoints the whole mirrored state (counters, flows held, created, reclaimed,
/// overflow packets, backlog, magic fills and removals, each flow's occupancy and magic) agree.
#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN of the tc-BPF programs; scripts/test.sh runs it with --include-ignored as root"]
fn exact_flows_match_core() {
    require_root();
    let v4: IpAddr = "10.9.0.1".parse().unwrap();
    let v6: IpAddr = "fd00::9".parse().unwrap();
    // (name, config, flows, destinations, whether the overflow queue must be used)
    let cases = [
        ("bcpqp, 1000 flows", "kind = \"bcpqp\"\nrate = \"400mbit\"\nqueue_size = 6000\nwindow = \"20ms\"", 1000, vec![v4], false),
        ("bcpqp, 600 flows on two aggregates, max_flows 1024", "kind = \"bcpqp\"\nrate = \"100mbit\"\nqueue_size = \"30kb\"\nwindow = \"20ms\"\nmax_flows = 1024", 600, vec![v4, v6], false),
        ("bcpqp, 300 flows, max_flows 48", "kind = \"bcpqp\"\nrate = \"40mbit\"\nqueue_size = 6000\nwindow = \"20ms\"\nmax_flows = 48", 300, vec![v4], true),
        ("pqp, 500 flows", "kind = \"pqp\"\nrate = \"100mbit\"\nqueue_size = 3000", 500, vec![v4], false),
        ("pqp, 400 flows, max_flows 100", "kind = \"pqp\"\nrate = \"50mbit\"\nqueue_size = 3000\nmax_flows = 100", 400, vec![v4], true),
    ];
    for (i, (name, cfg, flows, dsts, overflows)) in cases.into_iter().enumerate() {
        let cfg = EnforcerConfig::from_toml(&format!("{cfg}\nflows = \"exact\"")).unwrap();
        let arrivals = on_off_flows(60 + i as u64, flows, &dsts, 1, 300_000_000);
        let bpf = |raw: &[u8], seen: &[u64]| {
            let st: FqState = bytemuck::pod_read_unaligned(raw);
            bpf_flow_facts(&st.f, &st.stats, 1, seen, |flow| (0, flow))
        };
        run_exact(name, &cfg, &arrivals, flows, overflows, ExactCheck { key: &|_, pkt| pkt.flow, core: &core_facts, bpf: &bpf });
    }
}
