//! Sweeps the detector over generated traces with known ground truth and prints the accuracy per
//! scenario class (the calibration behind the defaults in docs/detector.md).
//!
//! cargo run --release -p ratekit-trace --example calibrate -- [loss_band_rtts tol_packets] [seeds] [delayed-acks]
//! (`delayed-acks`: the receivers delay their ACKs as Linux does by default.)

use ratekit_core::Rate;
use ratekit_trace::analyze::{analyze_packets, Options};
use ratekit_trace::synth::{generate, Path, Scenario};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let delayed_acks = args.iter().any(|a| a == "delayed-acks");
    args.retain(|a| a != "delayed-acks");
    let mut opts = Options::default();
    if args.len() >= 2 {
        opts.params.loss_band_rtts = args[0].parse().expect("loss_band_rtts");
        opts.params.tol_packets = args[1].parse().expect("tol_packets");
    }
    let seeds: u64 = args.get(2).map_or(2, |s| s.parse().expect("seeds"));
    let mut classes: Vec<(&str, Vec<Scenario>, bool)> = Vec::new();
    let rates = [0.5, 1.5, 3.0, 10.0];
    let bursts = [8_000u64, 100_000, 1_000_000, 2_000_000];
    let (mut pol, mut small, mut multi) = (Vec::new(), Vec::new(), Vec::new());
    let (mut dt, mut dt_min, mut dt_multi, mut rl) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut dt_agg, mut dt_bulk) = (Vec::new(), Vec::new());
    for seed in 0..seeds {
        for &r in &rates {
            for &b in &bursts {
                let sc = Scenario::new(Path::Policer { rate: Rate::from_mbps(r), burst: b }, seed);
                if b < 10_000 {
                    small.push(sc.clone());
                } else {
                    pol.push(sc.clone());
                }
                if b >= 10_000 {
                    multi.push(Scenario { flows: 3, ..sc });
                }
            }
            for &q in &[8_000u64, 32_000, 100_000, 1_000_000] {
                let sc = Scenario::new(Path::DropTail { rate: Rate::from_mbps(r), queue: q }, seed);
                if q < 10_000 {
                    dt_min.push(sc.clone());
                } else {
                    dt.push(sc.clone());
                }
                dt_multi.push(Scenario { cross_flows: 2, ..sc.clone() });
                dt_bulk.push(Scenario { cross_flows: 1, cross_bulk: true, ..sc.clone() });
                dt_agg.push(Scenario { flows: 3, ..sc });
            }
        }
        for &p in &[0.01, 0.02] {
            rl.push(Scenario::new(Path::RandomLoss { p }, seed));
        }
    }
    classes.push(("A policing", pol, true));
    classes.push(("B policing 8kB bucket", small, true));
    classes.push(("C policing 3 flows, per-client aggregate", multi.clone(), true));
    classes.push(("c policing 3 flows, single-flow segments", multi, true));
    classes.push(("E drop-tail", dt, false));
    classes.push(("F random loss", rl, false));
    classes.push(("G drop-tail 8kB queue", dt_min, false));
    classes.push(("H drop-tail + cross traffic", dt_multi, false));
    classes.push(("H drop-tail + one bulk cross flow that never lets the queue drain", dt_bulk, false));
    classes.push(("h drop-tail, 3 flows, per-client aggregate", dt_agg, false));
    for (name, scenarios, truth) in classes {
        let (mut right, mut judged) = (0, 0);
        let mut errors = Vec::new();
        for sc in &scenarios {
            let trace = generate(&Scenario { delayed_acks, ..sc.clone() });
            let report = analyze_packets(&trace.packets, &opts);
            let marked: usize = report.iter().filter(|r| r.direction != "aggregate").map(|r| r.judgement.losses).sum();
            if marked as u64 != trace.drops && !aggregate_class(name) {
                println!("  {name} {:?}: {marked} packets marked lost, {} dropped", sc.path, trace.drops);
            }
            let aggregate = aggregate_class(name);
            for row in report
                .iter()
                .filter(|r| r.judgement.losses >= opts.params.min_losses && (r.direction == "aggregate") == aggregate)
            {
                judged += 1;
                let j = &row.judgement;
                if j.policed == truth {
                    right += 1;
                }
                if let (true, Path::Policer { rate, .. }, Some(est)) = (j.policed, sc.path, j.rate_bps) {
                    let truth_bps = rate.bytes_per_sec() as f64 * 8.0;
                    errors.push((est - truth_bps).abs() / truth_bps);
                }
                if std::env::var("VERBOSE").is_ok() || (j.policed != truth && std::env::var("QUIET").is_err()) {
                    println!(
                        "  {name} {:?} seg {} pkts {} losses {} policed {} reason {} rate {:.3} burst {} pattern {:?}",
                        sc.path,
                        row.segment,
                        j.data_packets,
                        j.losses,
                        j.policed,
                        j.reason.as_str(),
                        j.rate_bps.unwrap_or(0.0) / 1e6,
                        j.burst_bytes,
                        j.pattern
                    );
                }
            }
        }
        print!("{name}: {right}/{judged} lossy segments right ({:.1} %)", 100.0 * right as f64 / judged.max(1) as f64);
        if truth && !errors.is_empty() {
            errors.sort_by(f64::total_cmp);
            let q = |f: f64| 100.0 * errors[((errors.len() - 1) as f64 * f).round() as usize];
            print!("; rate error median {:.1} %, p90 {:.1} %, max {:.1} %", q(0.5), q(0.9), q(1.0));
        }
        println!();
    }
}

fn aggregate_class(name: &str) -> bool {
    name.ends_with("aggregate")
}
