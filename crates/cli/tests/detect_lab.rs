//! The detector on real Linux TCP (issue 6 item 4): scripts/lab-traces.sh builds namespaces
//! with ratekit's middlebox in the path (50 ms each way, random loss), polices with tbf or
//! ratekit's tc-BPF token bucket or bottlenecks with htb+bfifo, captures at the server and runs
//! `ratekit detect`. The server runs CUBIC (the script's default). The script deletes its namespaces and BPF pins on every exit path. Needs
//! root and iproute2/tcpdump/ethtool/python3 and a kernel with tc-BPF: it is #[ignore]d with that reason,
//! and once run (as root, by scripts/test.sh) a missing prerequisite fails it.

use std::path::{Path, PathBuf};
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
    if !Path::new("/sys/fs/bpf").is_dir() {
        return Some("no BPF filesystem at /sys/fs/bpf".into());
    }
    None
}

type Row = std::collections::HashMap<String, String>;

fn read_rows_text(text: &str) -> Vec<Row> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    reader.records().map(|r| headers.iter().zip(r.unwrap().iter()).map(|(h, v)| (h.to_string(), v.to_string())).collect()).collect()
}

/// Runs the lab script on `specs`; returns results.csv as rows of named columns, the
/// middlebox's counters (JSON) of each case, and the rows of the same captures with their
/// records written out of time order (scripts/lab-artefacts.py) as busy capture points do.
fn lab(tag: &str, chunk: &str, chunks: &str, specs: &[&str]) -> (Vec<Row>, Vec<serde_json::Value>, Vec<Row>) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("ratekit-lab-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new("timeout")
        .args(["240", "bash"])
        .arg(root.join("scripts/lab-traces.sh"))
        .arg(&out)
        .args([chunk, chunks])
        .args(specs)
        .env("RATEKIT", env!("CARGO_BIN_EXE_ratekit"))
        .env("DELAY", "50ms")
        .env("CASE_TIMEOUT", "40")
        // The client delays its ACKs as Linux does by default: a tail drop's last delivered
        // packet then waits ~40 ms for its ACK, which must not read as RTT inflation.
        .status()
        .unwrap();
    let reordered = Command::new("python3")
        .arg(root.join("scripts/lab-artefacts.py"))
        .arg(&out)
        .arg(out.join("artefacts"))
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(env!("CARGO_BIN_EXE_ratekit"))
            .arg("detect")
            .arg(out.join("artefacts/reorder"))
            .arg("--out")
            .arg(out.join("reorder.csv"))
            .status()
            .is_ok_and(|s| s.success());
    let results = std::fs::read_to_string(out.join("results.csv"));
    let reorder_rows = if reordered { read_rows_text(&std::fs::read_to_string(out.join("reorder.csv")).unwrap()) } else { Vec::new() };
    let reports: Vec<serde_json::Value> = std::fs::read_dir(&out)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .iter()
        .filter(|p| p.to_string_lossy().ends_with(".middlebox.json"))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    let _ = std::fs::remove_dir_all(&out);
    assert!(status.success(), "lab script failed");
    let rows = read_rows_text(&results.unwrap());
    assert!(reordered, "scripts/lab-artefacts.py or detect on its output failed");
    (rows, reports, reorder_rows)
}

#[test]
#[ignore = "needs root: network namespaces, tc-BPF, tcpdump; scripts/test.sh runs it with --include-ignored as root"]
fn lab_policers_found_bottleneck_not_and_random_losses_annotated() {
    if let Some(why) = missing_prerequisite() {
        panic!("cannot run: {why}");
    }
    let (rows, _, reordered) =
        lab("rate", "600000", "3", &["policer:3mbit:100kb", "bpf:3mbit:100kb", "droptail:3mbit:100kb"]);
    let of = |file: &'static str| rows.iter().filter(move |r| r["file"].contains(file));
    for r in &rows {
        // The middlebox's delay line: 2 x 50 ms, plus at most the 100 kB queue at 3 Mbit/s.
        let rtt: f64 = r["median_rtt_ms"].parse().unwrap();
        println!(
            "{} segment {}: median RTT {rtt} ms (bounds 99..400), policed {} ({}), {} losses",
            r["file"].rsplit('/').next().unwrap(),
            r["segment"],
            r["policed"],
            r["reason"],
            r["losses"]
        );
        assert!((99.0..400.0).contains(&rtt), "median RTT {rtt} ms: {r:?}");
    }
    for file in ["policer_", "bpf_"] {
        let found: Vec<_> = of(file).filter(|r| r["policed"] == "true").collect();
        assert!(!found.is_empty(), "{file} policer not found: {rows:?}");
        // The estimate is the goodput between a segment's first and last loss, timed at the
        // capture, upstream of a user-space middlebox: J ms of scheduling jitter at either end
        // moves it by about 2J / span, and tbf charges Ethernet frames where the detector counts
        // IP packets (1514/1500 B: 0.9 %). The first transfer's segment spans about a second and
        // has the most losses: there 3 % holds (1.3 % for the tc-BPF bucket in one CI run on 2
        // busy cores). Later transfers start with a partly refilled bucket and may lose only a
        // score of packets over a few hundred ms, where 15 ms of jitter is 5 % (-5.3 % seen
        // once for tc-BPF with a benchmark running beside the tests; -10.7 % once on the first
        // segment in that state, the sender starved): they get 10 %, which still fails an
        // estimator that is off by a header or a burst. On a quiet machine 6 runs of 24
        // estimates all fell within ±2 %. That tc-BPF charges IP
        // bytes exactly is the conformance tests' business, not this timing-bound one.
        let most_losses = found.iter().map(|r| r["losses"].parse::<u64>().unwrap()).max().unwrap();
        for r in found {
            let rate: f64 = r["rate_bps"].parse().unwrap();
            let longest = r["losses"].parse::<u64>().unwrap() == most_losses;
            let bound = if longest { 0.03 } else { 0.10 };
            println!(
                "{file}: policed segment with {} losses, estimated rate {rate:.0} bit/s ({:+.2} % of 3 Mbit/s, bound ±{:.0} %)",
                r["losses"],
                (rate / 3e6 - 1.0) * 100.0,
                bound * 100.0
            );
            assert!((rate / 3e6 - 1.0).abs() < bound, "{file}: rate {rate}");
        }
    }
    assert!(of("droptail_").all(|r| r["policed"] == "false"), "htb+bfifo bottleneck judged policed: {rows:?}");
    // A 5-packet (8 kB) bfifo adds at most 22 ms at 3 Mbit/s to a 100 ms RTT, too little for the RTT
    // safeguard alone; its ACKs come back at the shaped rate. One long transfer, so that CUBIC
    // loses the 15 packets a judgement needs.
    let (small, _, _) = lab("shaper", "1000000", "1", &["droptail:0.5mbit:8kb"]);
    let judged: Vec<_> = small.iter().filter(|r| r["losses"].parse::<u64>().unwrap() >= 15).collect();
    println!("8 kB bfifo: {:?}", judged.iter().map(|r| (&r["losses"], &r["policed"], &r["reason"])).collect::<Vec<_>>());
    assert!(!judged.is_empty(), "the 8 kB bfifo never lost 15 packets in a segment: {small:?}");
    assert!(judged.iter().all(|r| r["policed"] == "false"), "8 kB bfifo judged policed: {small:?}");
    // The same captures with ~3 % of records written 20-500 us late: the same verdicts.
    let verdicts = |rows: &[Row]| {
        let mut v: Vec<(String, String, String)> = rows
            .iter()
            .filter(|r| r["losses"].parse::<u64>().unwrap() >= 15)
            .map(|r| (r["file"].rsplit('/').next().unwrap().to_string(), r["segment"].clone(), r["policed"].clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(verdicts(&reordered), verdicts(&rows), "records out of time order changed a verdict");

    // Random loss in the middlebox: every drop it counts is a data packet the annotation must
    // find lost (the capture is upstream of the middlebox), within a couple of non-data packets
    // (SYN-ACK, FIN). Whether such segments are judged policed is the accuracy table's
    // business (docs/detector.md: short fast transfers with random loss are sometimes judged
    // policed), not asserted here.
    let (rows, reports, _) = lab("loss", "2000000", "1", &["loss:2:1"]);
    let annotated: i64 = rows.iter().map(|r| r["losses"].parse::<i64>().unwrap()).sum();
    let dropped = reports[0]["stats"]["random_losses"].as_i64().unwrap();
    println!("loss: the middlebox dropped {dropped} (min 15), the annotation found {annotated} (within 2)");
    assert!(dropped >= 15, "2 % of ~1400 data packets expected, the middlebox dropped {dropped}");
    assert!((annotated - dropped).abs() <= 2, "annotated losses {annotated}, middlebox drops {dropped}: {rows:?}");
}
