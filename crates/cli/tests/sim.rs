//! `ratekit sim` end to end: outputs and summary.json fields, finite flows, the sweep form,
//! bad scenarios, and Ctrl-C keeping what was written.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn ratekit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ratekit"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const SMALL: &str = r#"
name = "small"
duration = "3s"
seed = 4
[measure]
window = "250ms"
[enforcer]
kind = "token_bucket"
rate = "100mbit"
burst = "500kb"
[[aggregates]]
flows = [
  { cc = "bbr", rtt = "10ms" },
  { cc = "cubic", rtt = "20ms" },
  { cc = "reno", rtt = "10ms", app = { kind = "finite", size = "100kb" } },
  { cc = "vegas", rtt = "5ms", app = { kind = "on_off", mean_size = "20kb", mean_gap = "50ms", size_dist = "pareto" } },
  { rtt = "1ms", app = { kind = "cbr", rate = "1mbit" } },
  { rtt = "1ms", app = { kind = "lognormal", rate = "1mbit", sigma = 1.5 } },
]
"#;

#[test]
fn writes_time_series_and_summary() {
    let dir = tempfile::tempdir().unwrap();
    let sc = write(dir.path(), "s.toml", SMALL);
    let out = dir.path().join("out");
    let o = ratekit().arg("sim").arg(&sc).arg("--out").arg(&out).arg("--quiet").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let flows = s["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 6);
    for f in flows {
        for k in ["id", "aggregate", "cc", "rtt_ms", "mean_goodput_bps"] {
            assert!(!f[k].is_null(), "flow lacks {k}: {f}");
        }
    }
    assert_eq!(flows[2]["cc"], "reno");
    let fct = flows[2]["fct_s"].as_f64().expect("finite flow has fct_s");
    assert!(fct > 0.01 && fct < 3.0, "fct {fct}");
    assert!(flows[0]["fct_s"].is_null(), "backlogged flows have no fct_s");
    assert!(flows[4]["mean_goodput_bps"].as_f64().unwrap() > 0.0, "UDP CBR delivered nothing");
    let a = &s["aggregates"][0];
    for k in ["id", "rate_bps", "mean_normalized_throughput", "p99_normalized_throughput", "p999_normalized_throughput", "drop_rate", "mean_jain"] {
        assert!(a[k].is_number(), "aggregate lacks {k}: {a}");
    }
    for k in ["events", "wall_seconds", "events_per_second"] {
        assert!(s["engine"][k].is_number(), "engine lacks {k}");
    }
    let csv = std::fs::read_to_string(out.join("flows.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 12 * 6, "12 windows × 6 flows + header");
    // Flow 0 is BBR: its model of the path (as TCP_CC_INFO reports it in the testbed's
    // windows.csv) on every row, min_rtt the path's 10 ms; the others have none.
    for l in csv.lines().skip(1) {
        let cols: Vec<&str> = l.split(',').collect();
        if cols[1] == "0" {
            let min_rtt: f64 = cols[7].parse().unwrap();
            assert!((10.0..10.5).contains(&min_rtt) && cols[6].parse::<f64>().unwrap() > 0.0 && !cols[8].is_empty(), "{l}");
        } else {
            assert!(cols[6..].iter().all(|c| c.is_empty()), "{l}");
        }
    }
    let rows = std::fs::read_to_string(out.join("aggregates.csv")).unwrap().lines().count();
    assert_eq!(rows, 1 + 12);
}

/// `[testbed] pcap` and `pcap_receiver` give the simulated run the testbed's two captures: every
/// TCP packet that reached the enforcer in sender.pcap (UDP left out), and at the receiver what the
/// enforcer let through, each flow its own sender address; and they pass through a sweep too.
#[test]
fn testbed_captures_are_written_by_the_simulator_at_the_same_points() {
    let dir = tempfile::tempdir().unwrap();
    let text = SMALL.replacen("[measure]", "[testbed]\npcap = true\npcap_receiver = true\n[measure]", 1).replace("burst = \"500kb\"", "burst = \"20kb\"");
    let sc = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    let o = ratekit().arg("sim").arg(&sc).arg("--out").arg(&out).arg("--quiet").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let (arrivals, drops) = (s["aggregates"][0]["arrivals"].as_u64().unwrap(), s["aggregates"][0]["enforcer_drops"].as_u64().unwrap());
    let udp_arrivals: u64 = s["flows"].as_array().unwrap()[4..].iter().map(|f| f["enforcer_arrivals"].as_u64().unwrap()).sum();
    let read = |name: &str| {
        let mut packets = Vec::new();
        let outcome = ratekit_trace::reader::read_file(&out.join(name), |p| packets.push(*p));
        assert!(outcome.error.is_none(), "{name}: {:?}", outcome.error);
        packets
    };
    let (sent, received) = (read("sender.pcap"), read("receiver.pcap"));
    let forward = |ps: &[ratekit_trace::decode::TcpPacket]| ps.iter().filter(|p| p.dport == 5001).count() as u64;
    assert_eq!(forward(&sent), arrivals - udp_arrivals, "every TCP packet that reached the enforcer");
    assert!(drops > 0 && forward(&received) <= arrivals - udp_arrivals - drops, "{drops} drops");
    let syns: std::collections::BTreeSet<_> = sent.iter().filter(|p| p.has(ratekit_trace::decode::TCP_SYN) && p.dport == 5001).map(|p| p.src).collect();
    assert_eq!(syns.len(), 4, "one sender address per TCP flow: {syns:?}");

    let swept = format!("{text}\n[sweep]\n\"enforcer.rate\" = [\"5mbit\", \"20mbit\"]\n");
    let sc = write(dir.path(), "sweep.toml", &swept);
    let o = ratekit().arg("sim").arg(&sc).arg("--out").arg(dir.path().join("sw")).arg("--quiet").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for i in 0..2 {
        for f in ["sender.pcap", "receiver.pcap"] {
            assert!(dir.path().join(format!("sw/point-{i:03}/{f}")).metadata().unwrap().len() > 1000, "point {i} {f}");
        }
    }
}

#[test]
fn sweep_points_run_in_parallel_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{SMALL}\n[sweep]\n\"enforcer.rate\" = [\"5mbit\", \"20mbit\"]\n\"aggregates.0.rate\" = [\"5mbit\", \"20mbit\"]\nmode = \"zip\"\n");
    let sc = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    let o = ratekit().arg("sim").arg(&sc).arg("--out").arg(&out).arg("--quiet").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let index: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(index.as_array().unwrap().len(), 2);
    let rate = |i: usize| -> f64 {
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(format!("point-{i:03}/summary.json"))).unwrap()).unwrap();
        s["aggregates"][0]["rate_bps"].as_f64().unwrap()
    };
    assert_eq!((rate(0), rate(1)), (5e6, 20e6));
}

#[test]
fn bad_scenarios_fail_cleanly_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    for (text, field) in [
        (SMALL.replace("cc = \"bbr\"", "cc = \"bbr9\""), "cc"),
        (SMALL.replace("rtt = \"20ms\"", "rtt = \"-20ms\""), "rtt"),
        (SMALL.replace("rate = \"100mbit\"", "rate = \"0mbit\""), "rate"),
        (format!("{SMALL}\n[sweep]\n\"enforcer.rat\" = [1]\n"), "sweep"),
    ] {
        let sc = write(dir.path(), "bad.toml", &text);
        let out = dir.path().join("out-bad");
        let o = ratekit().arg("sim").arg(&sc).arg("--out").arg(&out).arg("--quiet").output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("bad.toml") && err.contains(field), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.join("summary.json").exists());
    }
}

#[test]
fn ctrl_c_keeps_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough that it cannot finish before the signal (≈ 100 aggregates for 600 s).
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/validate/speed-100-aggregates.toml"))
        .unwrap()
        .replace("duration = \"60s\"", "duration = \"600s\"");
    let sc = write(dir.path(), "long.toml", &text);
    let out = dir.path().join("out");
    let mut child = ratekit()
        .arg("sim")
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .arg("--quiet")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let csv = out.join("aggregates.csv");
    while std::fs::read_to_string(&csv).map_or(0, |s| s.lines().count()) < 200 {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("no output after 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("two windows written after {:.2} s (deadline 60 s)", start.elapsed().as_secs_f64());
    let kill = Command::new("kill").arg("-INT").arg(child.id().to_string()).status().unwrap();
    assert!(kill.success());
    // Bounded: a run that ignored the signal would otherwise hang the suite for its 600 s.
    let interrupted = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if interrupted.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("the run did not stop within 30 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    println!("stopped {:.2} s after SIGINT (deadline 30 s)", interrupted.elapsed().as_secs_f64());
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "an interrupted run must not report success");
    assert!(err.contains("interrupted"), "{err}");
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["interrupted"], true);
    let simulated = s["simulated_s"].as_f64().unwrap();
    assert!(simulated > 0.0 && simulated < 600.0);
    let rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert_eq!(rows as f64, 100.0 * (simulated / 0.25).round(), "every finished window is in the CSV");
}
