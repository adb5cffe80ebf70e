//! `ratekit detect` end to end: directories, gzip, bad files, exit status, clusters.

use ratekit_core::Rate;
use ratekit_trace::synth::{generate, Path, Scenario};
use std::path::PathBuf;
use std::process::Command;

fn ratekit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ratekit"))
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ratekit-detect-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write_trace(path: &std::path::Path, sc: &Scenario) {
    let mut bytes = Vec::new();
    generate(sc).write_pcap(&mut bytes).unwrap();
    if path.extension().is_some_and(|e| e == "gz") {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::fast());
        gz.write_all(&bytes).unwrap();
        gz.finish().unwrap();
    } else {
        std::fs::write(path, bytes).unwrap();
    }
}

fn read_csv(path: &std::path::Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let headers = r.headers().unwrap().iter().map(String::from).collect();
    let rows = r.records().map(|rec| rec.unwrap().iter().map(String::from).collect()).collect();
    (headers, rows)
}

#[test]
fn detect_reads_directories_and_reports_per_file_errors() {
    let dir = TempDir::new("dir");
    let sub = dir.0.join("traces/sub");
    std::fs::create_dir_all(&sub).unwrap();
    let mut pol = Scenario::new(Path::Policer { rate: Rate::from_mbps(1.5), burst: 100_000 }, 1);
    pol.chunks = 3;
    write_trace(&dir.0.join("traces/policed.pcap"), &pol);
    let mut dt = Scenario::new(Path::DropTail { rate: Rate::from_mbps(3.0), queue: 100_000 }, 2);
    dt.chunks = 2;
    write_trace(&sub.join("droptail.pcap.gz"), &dt);
    std::fs::write(sub.join("broken.pcap"), b"definitely not a capture").unwrap();
    std::fs::write(sub.join("notes.txt"), b"ignored: not a capture name").unwrap();
    let out = dir.0.join("results.csv");
    let status = ratekit().arg("detect").arg(dir.0.join("traces")).arg("--out").arg(&out).status().unwrap();
    assert!(status.success());
    let (headers, rows) = read_csv(&out);
    for col in ["file", "flow", "segment", "direction", "data_packets", "losses", "policed", "rate_bps", "burst_bytes", "reason"] {
        assert!(headers.iter().any(|h| h == col), "missing column {col}");
    }
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let of = |file: &str| rows.iter().filter(move |r| r[col("file")].ends_with(file)).collect::<Vec<_>>();
    let policed = of("policed.pcap");
    assert_eq!(policed.len(), 3, "one row per chunk");
    assert!(policed.iter().filter(|r| r[col("policed")] == "true").count() >= 2);
    let rate: f64 = policed.iter().find(|r| r[col("policed")] == "true").unwrap()[col("rate_bps")].parse().unwrap();
    assert!((rate / 1.5e6 - 1.0).abs() < 0.05, "rate {rate}");
    let dt_rows = of("droptail.pcap.gz");
    assert_eq!(dt_rows.len(), 2, "gzip read");
    assert!(dt_rows.iter().all(|r| r[col("policed")] == "false"));
    let broken = of("broken.pcap");
    assert_eq!(broken.len(), 1);
    assert_eq!(broken[0][col("reason")], "read_error");
    assert!(!broken[0][col("error")].is_empty());
    assert!(of("notes.txt").is_empty());
}

#[test]
fn detect_fails_only_when_nothing_is_readable() {
    let dir = TempDir::new("bad");
    let bad = dir.0.join("bad.pcap");
    std::fs::write(&bad, [0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]).unwrap();
    let out = dir.0.join("r.csv");
    let result = ratekit().arg("detect").arg(&bad).arg("--out").arg(&out).output().unwrap();
    assert!(!result.status.success());
    assert!(String::from_utf8_lossy(&result.stderr).contains("no input file could be read"));
    // The error still reaches the results file.
    let (_, rows) = read_csv(&out);
    assert_eq!(rows.len(), 1);
    let missing = ratekit().arg("detect").arg(dir.0.join("nope.pcap")).arg("--out").arg(&out).output().unwrap();
    assert!(!missing.status.success());
}

#[test]
fn clusters_group_policed_rates() {
    let dir = TempDir::new("clusters");
    let results = dir.0.join("results.csv");
    let mut csv = String::from("file,flow,segment,direction,client,policed,rate_bps,reason,asn\n");
    // AS 1: plans at 1 and 2 Mbit/s; AS 2: dispersed rates; aggregate rows are not counted twice.
    for (i, rate) in [1.0e6, 1.01e6, 0.99e6, 1.02e6, 2.0e6, 2.02e6, 1.98e6, 7.0e6].iter().enumerate() {
        csv += &format!("f,x,{i},server_to_client,c,true,{rate},policed,1\n");
    }
    csv += "f,*>c,0,aggregate,c,true,5000000,policed,1\n";
    for (i, rate) in [1.0e6, 1.3e6, 1.7e6, 2.2e6].iter().enumerate() {
        csv += &format!("g,y,{i},server_to_client,d,true,{rate},policed,2\n");
    }
    csv += "g,y,9,server_to_client,d,false,,losses_with_tokens,2\n";
    std::fs::write(&results, csv).unwrap();
    let out = dir.0.join("clusters.csv");
    let status = ratekit()
        .args(["detect", "--clusters"])
        .arg(&results)
        .args(["--group-by", "asn", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let (_, rows) = read_csv(&out);
    let as1: Vec<_> = rows.iter().filter(|r| r[0] == "1").collect();
    let as2: Vec<_> = rows.iter().filter(|r| r[0] == "2").collect();
    assert_eq!(as1.len(), 2, "{as1:?}");
    assert_eq!(as1[0][1], "8");
    assert_eq!(as2.len(), 3, "{as2:?}");
    let bad = ratekit().args(["detect", "--clusters"]).arg(&results).args(["--group-by", "nope"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no column 'nope'"));
}
