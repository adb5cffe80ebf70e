//! The detector judged on generated traces of known truth: `ratekit reproduce`'s
//! `kind = "detect"` runs (002 Table 3; ratekit_lab::reproduce::detect). One synth trace per
//! grid point and seed, analysed as `ratekit detect` analyses a capture (default parameters,
//! per-client judgement on), and the verdict of every segment with enough losses to judge.

use crate::analyze::{analyze_packets, Options};
use crate::synth::{generate, Path, Scenario};
use ratekit_lab::reproduce::detect::{DetectRun, Judged, PathPoint, Rows};
use ratekit_lab::reproduce::metrics::DetectVerdict;
use rayon::prelude::*;

/// Generates and judges every trace of `run`; the `detect::Judge` that `ratekit reproduce` hands in.
pub fn judge(run: &DetectRun) -> anyhow::Result<Judged> {
    let opts = Options::default();
    // Each trace is independent and seeded, so the order of the results is the grid's whatever
    // the threads do.
    let per_trace: Vec<(Vec<DetectVerdict>, u64, f64)> = run
        .traces()
        .par_iter()
        .map(|t| {
            let sc = Scenario {
                flows: run.flows,
                same_client: true,
                cross_flows: run.cross_flows,
                cross_bulk: run.cross_bulk,
                delayed_acks: run.delayed_acks,
                ..Scenario::new(path(t.path), t.seed)
            };
            let trace = generate(&sc);
            let policer_bps = match sc.path {
                Path::Policer { rate, .. } => Some(rate.bits_per_sec() as f64),
                _ => None,
            };
            let verdicts = analyze_packets(&trace.packets, &opts)
                .into_iter()
                .filter(|r| (r.direction == "aggregate") == (run.rows == Rows::Client))
                .filter(|r| r.judgement.losses >= opts.params.min_losses)
                .map(|r| DetectVerdict { policed: r.judgement.policed, rate_bps: r.judgement.rate_bps, policer_bps })
                .collect();
            let span_ns = match (trace.packets.first(), trace.packets.last()) {
                (Some(a), Some(b)) => b.ts_ns - a.ts_ns,
                _ => 0,
            };
            (verdicts, trace.packets.len() as u64, span_ns as f64 * 1e-9)
        })
        .collect();
    let mut out = Judged::default();
    for (verdicts, packets, seconds) in per_trace {
        out.verdicts.extend(verdicts);
        out.packets += packets;
        out.simulated_s += seconds;
    }
    Ok(out)
}

fn path(p: PathPoint) -> Path {
    match p {
        PathPoint::Policer { rate, bucket } => Path::Policer { rate, burst: bucket.0 },
        PathPoint::DropTail { rate, queue } => Path::DropTail { rate, queue: queue.0 },
        PathPoint::RandomLoss { loss } => Path::RandomLoss { p: loss },
    }
}
