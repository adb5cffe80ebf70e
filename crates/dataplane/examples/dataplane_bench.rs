//! Measures the data plane for docs/testbed.md (performance is measured, not asserted):
//! 1. BPF ns per packet of each tc-BPF program, through BPF_PROG_TEST_RUN with 10⁶ repeats
//!    (the kernel's own timing of the program, no hardware counters needed), programs alternated
//!    round by round, with each one's ratio to the token bucket in the same round; then each on
//!    two CPUs at once on one aggregate (contended lock: ns per packet, packets passed unpoliced);
//! 2. middlebox packets per second forwarding a 64-byte UDP flood between two namespaces, with
//!    no enforcer and with policers whose rate is far above the flood (so every packet runs the
//!    full enforcer path and is forwarded).
//!
//! Run as root: `cargo run --release -p ratekit-dataplane --example dataplane_bench`

use ratekit_core::EnforcerConfig;
use ratekit_dataplane::bpf::{pin_thread_to_cpu, BpfPolicer, LoadOptions};
use ratekit_dataplane::netns::{veth_pair, Netns};
use ratekit_dataplane::packet::{build_frame, IPPROTO_TCP};
use ratekit_dataplane::pipeline::PipelineConfig;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let frame = build_frame("10.0.0.1".parse()?, "10.0.0.2".parse()?, 1000, 80, IPPROTO_TCP, 0, 1500);
    // Rounds run every program once in turn, so a slow spell of the machine (2 shared cores) hits
    // all of them alike; the ratio to the token bucket is taken within each round.
    const ROUNDS: usize = 7;
    const CONTENDED_ROUNDS: usize = 3;
    println!("## BPF ns per packet (BPF_PROG_TEST_RUN, 1e6 repeats; {ROUNDS} rounds of every program in turn: median [range], and the ratio to token_bucket in the same round)");
    let programs = [
        ("token_bucket", "kind = \"token_bucket\"\nrate = \"20mbit\"\nburst = 50000"),
        // A rate far above the flood: every packet passes (above, nearly every packet drops).
        ("token_bucket (rate far above the flood)", "kind = \"token_bucket\"\nrate = \"100gbit\"\nburst = \"1mb\""),
        ("pqp (16 queues, fair)", "kind = \"pqp\"\nrate = \"20mbit\"\nqueue_size = \"580kb\""),
        ("bcpqp (16 queues, fair)", "kind = \"bcpqp\"\nrate = \"20mbit\"\nqueue_size = \"5800kb\""),
        ("bcpqp (4 queues, priority(0, weighted(1:1, 2:2), 3))", "kind = \"bcpqp\"\nrate = \"20mbit\"\nqueues = 4\nqueue_size = \"5800kb\"\npolicy = \"priority(0, weighted(1:1, 2:2), 3)\""),
        ("fair_policer (4 x 1024 sketch)", "kind = \"fair_policer\"\nrate = \"20mbit\"\nbucket = 50000"),
        // Every packet allocates, passes and updates the sketch.
        ("fair_policer (4 x 1024 sketch, rate far above the flood)", "kind = \"fair_policer\"\nrate = \"100gbit\"\nbucket = \"1mb\""),
        // One queue per flow (bpf/pqp_flows.c); `backlogged` below gives it n active flows.
        ("bcpqp exact, 16 active flows", EXACT),
        ("bcpqp exact, 256 active flows", EXACT),
        ("bcpqp exact, 1024 active flows", EXACT),
        // Two classes of exact flows weighted 3:1 (bpf/pqp_class_flows.c), the flows split evenly.
        ("bcpqp class exact 3:1, 16 active flows", CLASS_EXACT),
        ("bcpqp class exact 3:1, 1024 active flows", CLASS_EXACT),
    ];
    let loaded: Vec<BpfPolicer> = programs
        .iter()
        .map(|(name, toml)| {
            let p = BpfPolicer::load(&EnforcerConfig::from_toml(toml)?, &LoadOptions::default())?;
            if let Some(n) = name.strip_prefix("bcpqp exact, ").and_then(|r| r.split(' ').next()) {
                backlogged(&p, n.parse()?, 1)?;
            }
            if let Some(n) = name.strip_prefix("bcpqp class exact 3:1, ").and_then(|r| r.split(' ').next()) {
                backlogged(&p, n.parse()?, 2)?;
            }
            Ok(p)
        })
        .collect::<anyhow::Result<_>>()?;
    let mut ns = vec![Vec::with_capacity(ROUNDS); loaded.len()];
    for _ in 0..ROUNDS {
        for (p, runs) in loaded.iter().zip(&mut ns) {
            runs.push(p.time_run(&frame, 1_000_000)?.as_nanos() as f64);
        }
    }
    for ((name, _), runs) in programs.iter().zip(&ns) {
        let ratios: Vec<f64> = runs.iter().zip(&ns[0]).map(|(x, tb)| x / tb).collect();
        let (t, r) = (spread(runs), spread(&ratios));
        println!("{name}: {:.1} ns/packet [{:.0}-{:.0}], {:.2} x token_bucket [{:.2}-{:.2}]", t.1, t.0, t.2, r.1, r.0, r.2);
    }

    // Two CPUs on one aggregate, each running 10⁶ packets at once: what the lock costs when it is
    // contended, and how often it gives up (packets passed unpoliced, counted untracked).
    println!("## two CPUs on one aggregate (10⁶ repeats on each at once, {CONTENDED_ROUNDS} rounds: median ns/packet [range] over both CPUs, packets passed unpoliced in all)");
    for ((name, _), p) in programs.iter().zip(&loaded) {
        let before = p.untracked()?;
        let mut runs = Vec::new();
        for _ in 0..CONTENDED_ROUNDS {
            let runners = [p.runner()?, p.runner()?];
            let frame = &frame;
            let times: Vec<std::io::Result<Duration>> = std::thread::scope(|s| {
                let handles: Vec<_> = runners
                    .iter()
                    .enumerate()
                    .map(|(cpu, r)| {
                        s.spawn(move || {
                            pin_thread_to_cpu(cpu);
                            r.time_run(frame, 1_000_000)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for t in times {
                runs.push(t?.as_nanos() as f64);
            }
        }
        let t = spread(&runs);
        println!("{name}: {:.1} ns/packet [{:.0}-{:.0}], {} of {} passed unpoliced", t.1, t.0, t.2, p.untracked()? - before, runs.len() * 1_000_000);
    }

    // A FairPolicer sketch clear walks the d x w counters in use in one packet: a live change of
    // the bucket forces one at the next packet; time that packet alone, 21 times.
    for width in [1024, 4096] {
        let cfg = |bucket: u32| EnforcerConfig::from_toml(&format!("kind = \"fair_policer\"\nrate = \"20mbit\"\nsketch_width = {width}\nbucket = {bucket}"));
        let a = ratekit_dataplane::bpf::BpfParams::from_config(&cfg(50_000)?)?;
        let b = ratekit_dataplane::bpf::BpfParams::from_config(&cfg(60_000)?)?;
        let p = BpfPolicer::load(&cfg(50_000)?, &LoadOptions::default())?;
        p.time_run(&frame, 1)?;
        let mut runs: Vec<f64> = Vec::new();
        for i in 0..21 {
            p.set_params(if i % 2 == 0 { &b } else { &a })?;
            runs.push(p.time_run(&frame, 1)?.as_nanos() as f64);
        }
        runs.sort_by(f64::total_cmp);
        println!("fair_policer sketch clear (4 x {width}, one packet after a live bucket change): {:.0} ns (median of 21)", runs[10]);
    }

    println!("## middlebox packets per second (64-byte UDP flood, 3 s each)");
    let a = Netns::create("bench-a")?;
    let m = Netns::create("bench-m")?;
    let b = Netns::create("bench-b")?;
    veth_pair(&a, "a0", Some("10.198.0.1/24"), &m, "m-a", None)?;
    veth_pair(&m, "m-b", None, &b, "b0", Some("10.198.0.2/24"))?;
    let configs = [
        ("none (forward only)", None),
        ("token_bucket", Some("kind = \"token_bucket\"\nrate = \"100gbit\"\nburst = \"1mb\"")),
        ("bcpqp (4 queues, fair)", Some("kind = \"bcpqp\"\nrate = \"100gbit\"\nqueues = 4\nqueue_size = \"8mb\"")),
        ("fair_policer", Some("kind = \"fair_policer\"\nrate = \"100gbit\"\nbucket = \"8mb\"")),
    ];
    for (name, toml) in configs {
        let enforcer = toml.map(EnforcerConfig::from_toml).transpose()?;
        let stop = Arc::new(AtomicBool::new(false));
        let mb = {
            let (stop, ns) = (stop.clone(), m.name.clone());
            std::thread::spawn(move || {
                let f = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
                use std::os::fd::AsRawFd;
                assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
                ratekit_dataplane::middlebox::run("m-a", "m-b", PipelineConfig { enforcer, ..Default::default() }, &stop)
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        let flooder = {
            let ns = a.name.clone();
            std::thread::spawn(move || {
                let f = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
                use std::os::fd::AsRawFd;
                assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
                let sock = std::net::UdpSocket::bind("10.198.0.1:0").unwrap();
                let end = Instant::now() + Duration::from_secs(3);
                let mut sent = 0u64;
                while Instant::now() < end {
                    if sock.send_to(&[0u8; 64], "10.198.0.2:9").is_ok() {
                        sent += 1;
                    }
                }
                sent
            })
        };
        let sent = flooder.join().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        let report = mb.join().unwrap()?;
        println!(
            "{name}: offered {:.0} pps, forwarded {:.0} pps ({} received, {} sent, {} send errors)",
            sent as f64 / 3.0,
            report.stats.sent[0] as f64 / 3.0,
            report.stats.received[0],
            report.stats.sent[0],
            report.send_errors
        );
    }
    Ok(())
}

/// Exact per-flow BC-PQP as bcpqp-exact.toml has it at 20 Mbit/s, with a window long enough that no
/// window closes while it is timed (its queues stay as `backlogged` leaves them).
const EXACT: &str = "kind = \"bcpqp\"\nrate = \"20mbit\"\nflows = \"exact\"\nqueue_size = \"5800kb\"\nwindow = \"60s\"";

/// The same per flow over two classes weighted 3:1, 512 flows each at most.
const CLASS_EXACT: &str = "kind = \"bcpqp\"\nrate = \"20mbit\"\nflows = \"exact\"\nqueue_size = \"5800kb\"\nwindow = \"60s\"\nqueues = 2\nclassify = \"class\"\npolicy = \"weighted\"\nweights = [3, 1]\nmax_flows = 512";

/// Makes `n` flows active (the timed frame's among them, in class 0; flow f in class f mod
/// `classes`): each sends 4000 packets of 1500 bytes,
/// which fill its phantom queue to about B = 5.8 MB (with magic for the flows whose θ+·X_i, X_i =
/// r·T/n, is below 5.8 MB; T = 60 s removes none while timed); at r/n the queue stays non-empty
/// for over 30 s. The timed packets then find n queues in the heap, their own full: the
/// per-packet path of a flooded flow among n backlogged ones.
fn backlogged(p: &BpfPolicer, n: u16, classes: u16) -> anyhow::Result<()> {
    for f in 0..n {
        let frame = build_frame("10.0.0.1".parse()?, "10.0.0.2".parse()?, 1000 + f, 80, IPPROTO_TCP, (f % classes) as u8, 1500);
        p.time_run(&frame, 4000)?;
    }
    Ok(())
}

/// (min, median, max); an even count takes the upper middle.
fn spread(xs: &[f64]) -> (f64, f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}
