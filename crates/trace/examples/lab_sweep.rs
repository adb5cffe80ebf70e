//! Judges a folder of lab captures (scripts/lab-validate.sh writes them) under other detector
//! parameters, for calibrating on real traces rather than generated ones. Writes the columns
//! scripts/lab-table.py reads.
//!
//! cargo run --release -p ratekit-trace --example lab_sweep -- DIR OUT.csv [NAME=VALUE ...]
//! NAME is one of loss_band_rtts, pass_floor_rtts, tol_packets, min_burst_over_rate,
//! max_inflated_fraction, inflation_min_packets.

use ratekit_trace::analyze::{analyze, Options};
use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, out, overrides @ ..] = args.as_slice() else {
        eprintln!("usage: lab_sweep DIR OUT.csv [NAME=VALUE ...]");
        std::process::exit(2);
    };
    let mut opts = Options::default();
    for o in overrides {
        let (name, value) = o.split_once('=').expect("NAME=VALUE");
        let v: f64 = value.parse().expect("a number");
        let p = &mut opts.params;
        match name {
            "loss_band_rtts" => p.loss_band_rtts = v,
            "pass_floor_rtts" => p.pass_floor_rtts = v,
            "tol_packets" => p.tol_packets = v,
            "min_burst_over_rate" => p.min_burst_over_rate = v,
            "max_inflated_fraction" => p.max_inflated_fraction = v,
            "inflation_min_packets" => p.inflation_min_packets = v,
            _ => panic!("unknown parameter {name}"),
        }
    }
    let mut files: Vec<_> = std::fs::read_dir(dir).expect("DIR").filter_map(|e| e.ok()).map(|e| e.path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "pcap"));
    files.sort();
    let mut w = std::io::BufWriter::new(std::fs::File::create(out).expect("OUT.csv"));
    writeln!(w, "file,direction,losses,policed,reason,rate_bps").unwrap();
    for f in files {
        let report = analyze(std::fs::File::open(&f).expect("pcap"), &opts);
        for r in report.rows {
            let j = &r.judgement;
            let rate = j.rate_bps.map_or(String::new(), |b| format!("{b:.0}"));
            writeln!(w, "{},{},{},{},{},{rate}", f.display(), r.direction, j.losses, j.policed, j.reason.as_str()).unwrap();
        }
    }
}
