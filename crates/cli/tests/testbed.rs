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

fn root() -> bool {
    let ok = unsafe { libc::geteuid() } == 0;
    if !ok {
        eprintln!("SKIPPED: the testbed needs root (namespaces, AF_PACKET, tc)");
    }
    ok
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rk-testbed-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
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
/// has the fields `ratekit sim` writes.
#[test]
fn placements_hold_the_rate() {
    if !root() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases = [
        ("middlebox", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000"),
        ("tc", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000"),
        ("tbf", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000"),
        ("htb", "kind = \"fifo\"\nrate = \"10mbit\"\nburst = 3000\nlimit = 25000"),
    ];
    for (placement, enforcer) in cases {
        let dir = tmp(placement);
        let s = run_ok(&scenario(&dir, placement, enforcer, TWO_CUBIC, "4s", false), &dir);
        let agg = &s["aggregates"][0];
        let mean = agg["mean_normalized_throughput"].as_f64().unwrap();
        assert!((0.6..1.1).contains(&mean), "{placement}: throughput/rate {mean}\n{s:#}");
        for key in ["p99_normalized_throughput", "p999_normalized_throughput", "drop_rate", "mean_jain", "rate_bps"] {
            assert!(agg[key].is_number(), "{placement}: {key} missing");
        }
        if placement != "htb" {
            assert!(agg["drop_rate"].as_f64().unwrap() > 0.0, "{placement}: a policer under CUBIC must drop");
        }
        let flows = s["flows"].as_array().unwrap();
        assert_eq!(flows.len(), 2);
        for f in flows {
            assert_eq!(f["cc"], "cubic");
            assert!(f["mean_goodput_bps"].as_f64().unwrap() > 1e5, "{placement}: {f}");
            assert_eq!(f["rtt_ms"].as_f64().unwrap(), 10.0);
        }
        assert!(dir.join("windows.csv").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert!(namespaces_of(std::process::id()).is_empty());
}

fn spawn_long(dir: &Path) -> Child {
    let sc = scenario(dir, "tc", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000", TWO_CUBIC, "30s", true);
    Command::new(env!("CARGO_BIN_EXE_ratekit"))
        .args(["testbed", "run"])
        .arg(sc)
        .arg("--out")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until the run has built its namespaces and traffic flows (pcap started).
fn wait_running(child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while namespaces_of(child.id()).len() < 3 {
        assert!(Instant::now() < deadline, "the run never built its namespaces");
        assert!(child.try_wait().unwrap().is_none(), "the run exited early");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
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
fn interrupted_run_leaves_nothing_behind() {
    if !root() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tmp("sigint");
    let mut child = spawn_long(&dir);
    wait_running(&mut child);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the run did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    assert!(namespaces_of(child.id()).is_empty(), "left {:?}", namespaces_of(child.id()));
    std::thread::sleep(Duration::from_millis(200));
    assert!(processes_naming(dir.to_str().unwrap()).is_empty(), "tcpdump survived");

    // SIGKILL: nothing can run in the process; tcpdump dies with it (PDEATHSIG), and the
    // namespaces are swept by the next run or by `testbed sweep`.
    let mut child = spawn_long(&dir);
    wait_running(&mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(processes_naming(dir.to_str().unwrap()).is_empty(), "tcpdump survived SIGKILL");
    assert_eq!(namespaces_of(child.id()).len(), 3);
    let o = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(["testbed", "sweep"]).output().unwrap();
    assert!(o.status.success());
    assert!(namespaces_of(child.id()).is_empty(), "sweep left {:?}", namespaces_of(child.id()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_scenarios_are_named() {
    let dir = tmp("bad");
    let sc = scenario(&dir, "tbf", "kind = \"fifo\"\nrate = \"10mbit\"\nburst = 3000\nlimit = 25000", TWO_CUBIC, "4s", false);
    let o = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(["testbed", "run"]).arg(&sc).arg("--out").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("enforcer_at") && err.contains("token_bucket"), "{err}");
    let mixed = "[[aggregates.flows]]\ncc = \"cubic\"\nrtt = [\"10ms\", \"20ms\"]\ncount = 2\n";
    let sc = scenario(&dir, "middlebox", "kind = \"token_bucket\"\nrate = \"10mbit\"\nburst = 25000", mixed, "4s", false);
    let o = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(["testbed", "run"]).arg(&sc).arg("--out").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("flows[0].rtt"), "{err}");
    assert!(!dir.join("summary.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
