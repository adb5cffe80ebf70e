//! `ratekit testbed`: short real-TCP runs through each enforcer placement, and teardown when a
//! run is interrupted (SIGINT) or killed (SIGKILL, then `testbed sweep`). Every namespace is
//! named rk-<pid>-..., so the checks see only what these runs made.

use ratekit_dataplane::netns::namespaces_of;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs one at a time: real TCP on 2 cores measures better alone, and a run's stale-namespace
/// sweep would otherwise remove what the SIGKILL test checks for.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn require_root() {
    ratekit_dataplane::netns::require_root("the testbed (namespaces, AF_PACKET, tc)");
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rk-testbed-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs a root test's `body` in a fresh run directory with the testbed's lock held; afterwards the
/// directory is removed and no namespace of this process is left.
fn in_run_dir(name: &str, body: impl FnOnce(&Path)) {
    require_root();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tmp(name);
    body(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(namespaces_of(std::process::id()).is_empty());
}

fn scenario(dir: &Path, placement: &str, enforcer: &str, flows: &str, duration: &str, pcap: bool) -> PathBuf {
    let p = dir.join("scenario.toml");
    let text = format!(
        "name = \"t\"\nduration = \"{duration}\"\nseed = 3\n[measure]\nwindow = \"250ms\"\nwarmup = \"1s\"\n\
         [testbed]\nenforcer_at = \"{placement}\"\npcap = {pcap}\n[enforcer]\n{enforcer}\n[[aggregates]]\nrate = \"10mbit\"\n{flows}"
    );
    std::fs::write(&p, text).unwrap();
    p
}

const TWO_CUBIC: &str = "[[aggregates.flows]]\ncc = \"cubic\"\nrtt = \"10ms\"\ncount = 2\n";

fn run_ok(scenario: &Path, out: &Path) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_ratekit"))
        .args(["testbed", "run"])
        .arg(scenario)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// The aggregate of two CUBIC flows is held near 10 Mbit/s by each placement, and the summary
/// has the fields `ratekit sim` writes, its own `testbed` section and none of the simulator's.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET and tc; scripts/test.sh runs it with --include-ignored as root"]
fn placements_hold_the_rate() {
    require_root();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases = [
        ("middlebox", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000"),
        ("tc", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000"),
        ("tbf", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000"),
        ("tbf", "kind = \"fifo\"\nrate = \"10mbit\"\nburst = 25000\nlimit = 1514"),
        ("htb", "kind = \"fifo\"\nrate = \"10mbit\"\nburst = 3000\nlimit = 25000"),
    ];
    for (placement, enforcer) in cases {
        let dir = tmp(placement);
        let s = run_ok(&scenario(&dir, placement, enforcer, TWO_CUBIC, "4s", false), &dir);
        let agg = &s["aggregates"][0];
        let mean = agg["mean_normalized_throughput"].as_f64().unwrap();
        let goodputs: Vec<f64> = s["flows"].as_array().unwrap().iter().map(|f| f["mean_goodput_bps"].as_f64().unwrap()).collect();
        println!("{placement}: throughput/rate {mean:.3} (bounds 0.6..1.1), drop rate {}, flow goodputs {goodputs:?} (min 1e5), Jain {}", agg["drop_rate"], agg["mean_jain"]);
        // Above: a policer passes at most rate x time + burst (+0.7 % over the 3 s measured);
        // below: CUBIC's sawtooth under a one-BDP bucket. Measured 0.93-0.96 for every
        // placement with two busy loops beside it, on 2 cores or pinned to one.
        assert!((0.6..1.1).contains(&mean), "{placement}: throughput/rate {mean}\n{s:#}");
        for key in ["p99_normalized_throughput", "p999_normalized_throughput", "drop_rate", "mean_jain", "rate_bps"] {
            assert!(agg[key].is_number(), "{placement}: {key} missing");
        }
        if placement != "htb" {
            assert!(agg["drop_rate"].as_f64().unwrap() > 0.0, "{placement}: a policer under CUBIC must drop");
        }
        assert_eq!(s["testbed"]["enforcer_at"], placement);
        assert!(s["testbed"]["sender_tcp"]["Tcp.OutSegs"].as_u64().unwrap() > 0, "{placement}: {s:#}");
        assert_eq!(agg["shares"].as_array().map(Vec::len), Some(2), "{placement}");
        for sim_only in ["engine", "simulated_s", "interrupted"] {
            assert!(s.get(sim_only).is_none(), "{placement}: {sim_only} in a testbed summary");
        }
        assert!(agg.get("classes").is_none() && s["flows"][0].get("retransmits").is_none(), "{placement}: {s:#}");
        let flows = s["flows"].as_array().unwrap();
        assert_eq!(flows.len(), 2);
        for f in flows {
            assert_eq!(f["cc"], "cubic");
            assert!(f["mean_goodput_bps"].as_f64().unwrap() > 1e5, "{placement}: {f}");
            assert_eq!(f["rtt_ms"].as_f64().unwrap(), 10.0);
        }
        // Every sender sampled its cwnd and smoothed RTT as windows closed, and Linux's RTT
        // there is the path's 10 ms plus queueing, never less.
        let windows = std::fs::read_to_string(dir.join("windows.csv")).unwrap();
        let sampled: Vec<(f64, f64)> = windows
            .lines()
            .skip(1)
            .filter_map(|l| {
                let cols: Vec<&str> = l.split(',').collect();
                Some((cols[5].parse().ok()?, cols[6].parse().ok()?))
            })
            .collect();
        assert!(sampled.len() >= 2 * 12, "{placement}: {} sampled windows of 2 flows over 4 s\n{windows}", sampled.len());
        assert!(sampled.iter().all(|&(cwnd, srtt)| cwnd >= 1.0 && (9.9..500.0).contains(&srtt)), "{placement}: {sampled:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert!(namespaces_of(std::process::id()).is_empty());
}

/// Flows of two RTTs through one enforcer each see their own RTT: Linux's lowest RTT sample on
/// every sender socket (TCP_INFO min_rtt) is the requested RTT plus at most 5 %, for both classes
/// (a middlebox delaying every flow alike would give the 60 ms flows 10 ms, or the reverse). Each
/// flow starts where the simulator starts it on the same file and seed, its jitter drawn from the
/// same stream, so a Linux run and a simulated run of one seed compare flow start by flow start.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET and tc; scripts/test.sh runs it with --include-ignored as root"]
fn mixed_rtts_are_what_each_flow_measures() {
    in_run_dir("mixed-rtt", |dir| {
        let flows = "[[aggregates.flows]]\ncc = \"cubic\"\nrtt = \"10ms\"\ncount = 2\nstart_jitter = \"20ms\"\n\
                     [[aggregates.flows]]\ncc = \"bbr\"\nrtt = \"60ms\"\ncount = 2\nstart_jitter = \"20ms\"\n";
        let enforcer = "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000";
        let file = scenario(dir, "middlebox", enforcer, flows, "5s", false);
        let s = run_ok(&file, dir);
        let sim_out = dir.join("sim");
        let o = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(["sim", "--quiet", "--out"]).arg(&sim_out).arg(&file).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let sim: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(sim_out.join("summary.json")).unwrap()).unwrap();
        let starts = |s: &serde_json::Value| s["flows"].as_array().unwrap().iter().map(|f| f["start_s"].as_f64().unwrap()).collect::<Vec<_>>();
        let (linux_starts, sim_starts) = (starts(&s), starts(&sim));
        println!("flow starts, Linux {linux_starts:?} s, simulator {sim_starts:?} s");
        assert!(sim_starts.iter().any(|&t| t > 0.002), "the jitter moved some start: {sim_starts:?}");
        for (l, m) in linux_starts.iter().zip(&sim_starts) {
            assert!((l - m).abs() < 0.002, "Linux started a flow at {l} s, the simulator at {m} s");
        }
        let classes = s["testbed"]["rtt_classes"].as_array().unwrap();
        assert_eq!(classes.len(), 2, "{s:#}");
        for (class, rtt, sender) in [(&classes[0], 10.0, "10.199.0.1"), (&classes[1], 60.0, "10.199.0.2")] {
            assert_eq!((class["rtt_ms"].as_f64().unwrap(), class["sender"].as_str().unwrap(), class["flows"].as_u64()), (rtt, sender, Some(2)));
            let measured: Vec<f64> = class["measured_min_rtt_ms"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            println!("{rtt} ms: measured min RTT lowest, median, highest {measured:?} ms");
            assert!(measured[0] >= rtt * 0.99 && measured[2] <= rtt * 1.05, "{rtt} ms class measured {measured:?}\n{s:#}");
        }
        let tcp = s["testbed"]["flow_tcp"].as_array().unwrap();
        assert_eq!(tcp.len(), 4, "every TCP flow reports its socket");
        for (f, t) in s["flows"].as_array().unwrap().iter().zip(tcp) {
            let want = if f["cc"] == "cubic" { 10.0 } else { 60.0 };
            assert_eq!(f["rtt_ms"].as_f64().unwrap(), want, "{f}");
            assert!(f["mean_goodput_bps"].as_f64().unwrap() > 1e5, "{f}");
            // min_rtt may come from timestamp echoes (1 ms resolution); the smoothed RTT is in µs
            // and never below the path's, unless frames leave the middlebox early.
            assert_eq!(t["flow"], f["id"]);
            assert!(t["srtt_ms"].as_f64().unwrap() >= want * 0.99, "{t}");
        }
        // BBR senders read their model of the path (TCP_CC_INFO) as windows closed: a min_rtt of the
        // path's 60 ms (BBR's own filter: at most a few ms above) and a bandwidth below the 10 Mbit/s
        // limit's burst; the CUBIC senders have none.
        let windows = std::fs::read_to_string(dir.join("windows.csv")).unwrap();
        let mut bbr_rows = 0;
        for l in windows.lines().skip(1) {
            let cols: Vec<&str> = l.split(',').collect();
            let flow: usize = cols[1].parse().unwrap();
            let is_bbr = s["flows"][flow]["cc"] == "bbr";
            let (Ok(bw), Ok(min_rtt), Ok(gain)) = (cols[7].parse::<f64>(), cols[8].parse::<f64>(), cols[9].parse::<f64>()) else {
                assert!(cols[7..].iter().all(|c| c.is_empty()), "{l}");
                continue;
            };
            assert!(is_bbr, "a CUBIC flow with a BBR model: {l}");
            assert!((0.0..30.0).contains(&bw) && (59.9..66.0).contains(&min_rtt) && (0.3..3.0).contains(&gain), "{l}");
            bbr_rows += 1;
        }
        assert!(bbr_rows >= 2 * 12, "{bbr_rows} BBR readings of 2 flows over 5 s\n{windows}");
    });
}

/// A finite transfer's completion time and goodput count from its own start, jitter included:
/// four 20 KB pages starting up to 2 s in each finish in tens of ms, as the simulator has them.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET and tc; scripts/test.sh runs it with --include-ignored as root"]
fn page_load_times_count_from_each_flows_start() {
    in_run_dir("pages", |dir| {
        let flows = "[[aggregates.flows]]\ncc = \"cubic\"\nrtt = \"10ms\"\ncount = 4\nstart_jitter = \"2s\"\napp = { kind = \"finite\", size = \"20kb\" }\n";
        let enforcer = "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000";
        let s = run_ok(&scenario(dir, "tc", enforcer, flows, "3s", false), dir);
        let flows = s["flows"].as_array().unwrap();
        assert!(flows.iter().any(|f| f["start_s"].as_f64().unwrap() > 0.5), "the jitter moved some start: {s:#}");
        for f in flows {
            let fct = f["fct_s"].as_f64().unwrap_or(f64::NAN);
            assert!((0.015..0.5).contains(&fct), "a 20 KB page took {fct} s: {f}");
            assert!(f["mean_goodput_bps"].as_f64().unwrap() > 20_000.0 * 8.0 / 0.5, "{f}");
        }
    });
}

/// The periodic application writes each transfer on its schedule on one connection: three 20,000
/// byte transfers 0.5 s apart all arrive, whole, within the run.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET and tc; scripts/test.sh runs it with --include-ignored as root"]
fn periodic_transfers_arrive_whole() {
    in_run_dir("periodic", |dir| {
        let flows = "[[aggregates.flows]]\ncc = \"cubic\"\nrtt = \"10ms\"\ncount = 2\napp = { kind = \"periodic\", size = 20000, period = \"500ms\", count = 3 }\n";
        let enforcer = "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000";
        let s = run_ok(&scenario(dir, "tc", enforcer, flows, "2500ms", false), dir);
        for f in s["flows"].as_array().unwrap() {
            assert_eq!(f["delivered_bytes"].as_u64(), Some(60_000), "{f}");
        }
    });
}


/// A flow's goodput is what arrived within the run: its sender's buffer still drains for the
/// 200 ms + 2 RTT the testbed waits after the writes stop, and those bytes belong to no window, so
/// the run's windows (windows.csv) hold exactly the flow's delivered bytes. Before generator 3 a
/// 100 ms flow through this bucket counted about 0.4 s of drain beyond them.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET and tc; scripts/test.sh runs it with --include-ignored as root"]
fn goodput_counts_the_run_not_the_drain_after_it() {
    in_run_dir("drain", |dir| {
        let flows = "[[aggregates.flows]]\ncc = \"cubic\"\nrtt = \"100ms\"\n";
        let enforcer = "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 200000";
        let s = run_ok(&scenario(dir, "tc", enforcer, flows, "2s", false), dir);
        let delivered = s["flows"][0]["delivered_bytes"].as_u64().unwrap();
        let windows = std::fs::read_to_string(dir.join("windows.csv")).unwrap();
        let in_windows: u64 = windows.lines().skip(1).map(|l| l.split(',').nth(3).unwrap().parse::<u64>().unwrap()).sum();
        assert!(in_windows > 500_000, "the flow hardly ran: {in_windows} bytes in the windows");
        assert_eq!(delivered, in_windows, "delivered bytes beyond the run's windows");
    });
}

/// Ethertypes of the frames in a little-endian pcap of Ethernet frames (what tcpdump writes here).
fn ethertypes(pcap: &[u8]) -> Vec<u16> {
    let mut types = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let caplen = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        let frame = &pcap[at + 16..(at + 16 + caplen).min(pcap.len())];
        if frame.len() >= 14 {
            types.push(u16::from_be_bytes([frame[12], frame[13]]));
        }
        at += 16 + caplen;
    }
    types
}

/// No ARP crosses the middlebox, on either side of it (both captures): the namespaces hold
/// each other as permanent neighbours. Were
/// it resolved through the delay line, every run's SYNs would wait one RTT for it and Linux would
/// start from twice the path's RTT (the SYN is timestamped before neighbour resolution).
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET and tc; scripts/test.sh runs it with --include-ignored as root"]
fn no_arp_crosses_the_delay_line() {
    in_run_dir("arp", |dir| {
        let flows = "[[aggregates.flows]]\ncc = \"cubic\"\nrtt = \"40ms\"\ncount = 2\n";
        let sc = scenario(dir, "tc", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000", flows, "2s", true);
        let text = std::fs::read_to_string(&sc).unwrap().replacen("pcap = true\n", "pcap = true\npcap_receiver = true\n", 1);
        std::fs::write(&sc, text).unwrap();
        run_ok(&sc, dir);
        for side in ["sender", "receiver"] {
            let types = ethertypes(&std::fs::read(dir.join(format!("{side}.pcap"))).unwrap());
            assert!(types.iter().filter(|&&t| t == 0x0800).count() > 100, "the {side}'s capture holds the run: {} frames", types.len());
            assert_eq!(types.iter().filter(|&&t| t == 0x0806).count(), 0, "ARP frames in the {side}'s capture");
        }
    });
}

/// A 30 s run that a failing test does not leave behind: on drop it is killed if still
/// running, and `testbed sweep` removes the namespaces a killed run leaves.
struct LongRun(Child);

impl Drop for LongRun {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
        let _ = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(["testbed", "sweep"]).output();
    }
}

fn spawn_long(dir: &Path) -> LongRun {
    let sc = scenario(dir, "tc", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000", TWO_CUBIC, "30s", true);
    LongRun(
        Command::new(env!("CARGO_BIN_EXE_ratekit"))
            .args(["testbed", "run"])
            .arg(sc)
            .arg("--out")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Waits until the run has built its namespaces and started its capture (tcpdump has created
/// sender.pcap; traffic starts 300 ms later), polling with a deadline far above the 0.2-0.6 s
/// this took with two busy loops beside it, on 2 cores or pinned to one.
fn wait_running(child: &mut Child, dir: &Path) {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(15);
    while namespaces_of(child.id()).len() < 3 || !dir.join("sender.pcap").exists() {
        assert!(Instant::now() < deadline, "the run never built its namespaces and started tcpdump");
        assert!(child.try_wait().unwrap().is_none(), "the run exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("run {} up with its capture after {:.2} s (deadline 15 s)", child.id(), start.elapsed().as_secs_f64());
    // Into the traffic phase, which the interruption must tear down too.
    std::thread::sleep(Duration::from_millis(500));
}

/// Waits (bounded) until no process names `needle`: a killed tcpdump is gone once the kernel
/// has run its exit, which a loaded machine may take a moment to schedule.
fn wait_gone(needle: &str, what: &str) {
    let start = Instant::now();
    while !processes_naming(needle).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(5), "{what}: {:?}", processes_naming(needle));
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("{what}? no: gone after {:.3} s (deadline 5 s)", start.elapsed().as_secs_f64());
}

/// Processes still running whose command line names `needle` (our out dir is unique).
fn processes_naming(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET and tc; scripts/test.sh runs it with --include-ignored as root"]
fn interrupted_run_leaves_nothing_behind() {
    require_root();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tmp("sigint");
    let mut run = spawn_long(&dir);
    let child = &mut run.0;
    wait_running(child, &dir);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let interrupted = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(interrupted.elapsed() < Duration::from_secs(10), "the run did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    println!("SIGINT: the run stopped after {:.2} s (deadline 10 s)", interrupted.elapsed().as_secs_f64());
    assert!(!status.success());
    assert!(namespaces_of(child.id()).is_empty(), "left {:?}", namespaces_of(child.id()));
    wait_gone(dir.to_str().unwrap(), "tcpdump survived");

    // SIGKILL: nothing can run in the process; tcpdump dies with it (PDEATHSIG), and the
    // namespaces are swept by the next run or by `testbed sweep`.
    let _ = std::fs::remove_file(dir.join("sender.pcap"));
    let mut run = spawn_long(&dir);
    let child = &mut run.0;
    wait_running(child, &dir);
    child.kill().unwrap();
    child.wait().unwrap();
    wait_gone(dir.to_str().unwrap(), "tcpdump survived SIGKILL");
    assert_eq!(namespaces_of(child.id()).len(), 3);
    let o = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(["testbed", "sweep"]).output().unwrap();
    assert!(o.status.success());
    assert!(namespaces_of(child.id()).is_empty(), "sweep left {:?}", namespaces_of(child.id()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_scenarios_are_named() {
    let dir = tmp("bad");
    let sc = scenario(&dir, "tbf", "kind = \"fair_policer\"\nrate = \"10mbit\"\nbucket = 25000", TWO_CUBIC, "4s", false);
    let o = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(["testbed", "run"]).arg(&sc).arg("--out").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("enforcer_at") && err.contains("\"token_bucket\" or \"fifo\""), "{err}");
    // Each distinct RTT takes a sender address: ten are more than the testbed has.
    let mixed = "[[aggregates.flows]]\ncc = \"cubic\"\nrtt = [\"1ms\", \"2ms\", \"3ms\", \"4ms\", \"5ms\", \"6ms\", \"7ms\", \"8ms\", \"9ms\", \"10ms\"]\ncount = 10\n";
    let sc = scenario(&dir, "middlebox", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000", mixed, "4s", false);
    let o = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(["testbed", "run"]).arg(&sc).arg("--out").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("flows[0].rtt") && err.contains("at most 9"), "{err}");
    // What only the simulator can run is refused before any namespace is built, naming the field.
    let cannot = [
        ("[[aggregates.flows]]\ncc = \"vegas\"\nrtt = \"10ms\"\n", "aggregates[0].flows[0].cc"),
        ("[[aggregates.flows]]\ncc = \"copa\"\nrtt = \"10ms\"\n", "aggregates[0].flows[0].cc"),
        ("[[aggregates.flows]]\nrtt = \"10ms\"\napp = { kind = \"lognormal\", rate = \"1mbit\" }\n", "aggregates[0].flows[0].app.kind"),
        ("[[aggregates.flows]]\nrtt = \"10ms\"\nstop = \"2s\"\n", "aggregates[0].flows[0].stop"),
        ("[[aggregates.flows]]\nrtt = \"10ms\"\nreceiver_wakeup = \"0us\"\n", "aggregates[0].flows[0].receiver_wakeup"),
        ("[[aggregates.flows]]\nrtt = \"10ms\"\nack_jitter = \"0us\"\n", "aggregates[0].flows[0].ack_jitter"),
    ];
    for (flows, field) in cannot {
        let sc = scenario(&dir, "middlebox", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000", flows, "4s", false);
        let o = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(["testbed", "run"]).arg(&sc).arg("--out").arg(&dir).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(field), "{field}: {err}");
    }
    // Simulator-only keys are ignored, and `sim-scenario` hands the simulator the same file.
    let sim_keys = "link_rate = \"100mbit\"\nbuffer = \"50kb\"\n[[aggregates.flows]]\ncc = \"bbr\"\nrtt = \"10ms\"\nstart_jitter = \"10ms\"\n";
    let sc = scenario(&dir, "middlebox", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000", sim_keys, "4s", false);
    let o = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(["testbed", "sim-scenario"]).arg(&sc).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), std::fs::read_to_string(&sc).unwrap());
    ratekit_dataplane::testbed::plan::load(&sc).unwrap_or_else(|e| panic!("{e}"));
    assert!(!dir.join("summary.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
