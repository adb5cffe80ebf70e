//! The detector on real Linux TCP (issue 6 item 4): scripts/lab-traces.sh builds namespaces,
//! polices with tbf or bottlenecks with htb+bfifo, captures at the server, and runs
//! `ratekit detect`. Needs root and iproute2/tcpdump/ethtool/python3; skips with a reason otherwise.

use std::path::PathBuf;
use std::process::Command;

fn missing_prerequisite() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("not root".into());
    }
    for tool in ["ip", "tc", "tcpdump", "ethtool", "python3"] {
        let found = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("{tool} not installed"));
        }
    }
    None
}

#[test]
fn lab_policer_found_and_bottleneck_not() {
    if let Some(why) = missing_prerequisite() {
        println!("skipped: {why}");
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("ratekit-lab-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new("timeout")
        .args(["300", "bash"])
        .arg(root.join("scripts/lab-traces.sh"))
        .arg(&out)
        .args(["600000", "3", "policer:3mbit:100kb", "droptail:3mbit:100kb"])
        .env("RATEKIT", env!("CARGO_BIN_EXE_ratekit"))
        .status()
        .unwrap();
    let results = std::fs::read_to_string(out.join("results.csv"));
    let _ = std::fs::remove_dir_all(&out);
    assert!(status.success(), "lab script failed");
    let results = results.unwrap();
    let mut lines = results.lines();
    let headers: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| headers.iter().position(|h| *h == n).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let policed = |file: &str| rows.iter().filter(|r| r[col("file")].contains(file) && r[col("policed")] == "true").collect::<Vec<_>>();
    let found = policed("policer_");
    assert!(!found.is_empty(), "tbf policer not found: {results}");
    for r in &found {
        // tbf charges Ethernet frames, the detector IP packets: 1514/1500 B explains <1 %.
        let rate: f64 = r[col("rate_bps")].parse().unwrap();
        assert!((rate / 3e6 - 1.0).abs() < 0.1, "rate {rate}");
    }
    assert!(policed("droptail_").is_empty(), "htb+bfifo bottleneck judged policed: {results}");
}
