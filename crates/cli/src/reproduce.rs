//! `ratekit reproduce [--quick] [--only NAME] --out DIR`: re-runs the papers' evaluations
//! (scenarios/paper/*.toml) in the simulator, in parallel, computes every claim's metric and
//! writes DIR/claims.json, DIR/report.md, DIR/report.html and DIR/figures/ (docs/reproduce.md).
//! The reproduction is ratekit_lab::reproduce; this hands it the simulator, the detector on
//! generated traces (ratekit_trace::accuracy) and a progress bar.

use crate::progress_bar::Bar;
use anyhow::Context;
use ratekit_lab::progress::{Progress, Silent};
use ratekit_lab::reproduce::run::Reproduction;
use ratekit_lab::scenario::Resolved;
use ratekit_lab::series::Series;
use ratekit_lab::summary::Summary;
use ratekit_sim::RunOptions;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Reduced durations and aggregate counts (each file states what it scales): a few minutes
    /// on two cores.
    #[arg(long)]
    pub quick: bool,
    /// Only the scenarios whose file name contains NAME (repeatable).
    #[arg(long, value_name = "NAME")]
    pub only: Vec<String>,
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Directory of paper scenario files.
    #[arg(long, default_value = "scenarios/paper")]
    pub scenarios: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Validate the scenario files and list the runs, without simulating.
    #[arg(long)]
    pub dry_run: bool,
    /// Exit with status 2 when a claim fails (for CI); by default a failed claim is a reported
    /// result, not an error.
    #[arg(long)]
    pub strict: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let wall = std::time::Instant::now();
    let reproduction = Reproduction::load(&args.scenarios, &args.only, args.quick)?;
    if args.dry_run {
        for j in &reproduction.jobs {
            println!("{}", j.describe());
        }
        println!("{} scenarios, {} runs, {} claims", reproduction.files.len(), reproduction.jobs.len(), reproduction.claims());
        return Ok(());
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let progress: Box<dyn Progress> =
        if args.quiet { Box::new(Silent) } else { Box::new(Bar::new("reproduce [{elapsed_precise}] {wide_bar} {percent}% eta {eta} {msg}")) };
    let outcome = reproduction.run(&args.out, args.threads, &simulate, &ratekit_trace::accuracy::judge, progress.as_ref())?;
    eprintln!(
        "{} of {} claims hold, {} with a failing control ({} whose control passes too) over {} scenarios ({} simulations, {:.0} s); report: {}",
        outcome.passed,
        outcome.claims,
        outcome.controlled,
        outcome.flagged,
        reproduction.files.len(),
        reproduction.jobs.len(),
        wall.elapsed().as_secs_f64(),
        args.out.join("report.md").display()
    );
    if let Some(why) = &outcome.figures_skipped {
        eprintln!("figures not drawn: {why}");
    }
    if args.strict && outcome.passed < outcome.claims {
        std::process::exit(2);
    }
    Ok(())
}

fn simulate(r: &Resolved, seed: u64) -> anyhow::Result<(Summary, Series)> {
    Ok(ratekit_sim::run(r, Some(seed), RunOptions { keep_series: true, ..RunOptions::default() })?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratekit_lab::reproduce::metrics::{Metric, RunResult, Span};
    use ratekit_lab::reproduce::selector::Selector;

    /// Two random (LogNormal) UDP sources of 5 Mbit/s each, classes 0 and 1, into a 5 Mbit/s
    /// tbf-style FIFO of 50 KB: half of each class is dropped and every sent packet waits
    /// ≈ 50 KB / 5 Mbit/s = 82 ms. (Two CBR sources would phase-lock: one class always first.)
    #[test]
    fn class_and_wire_metrics_from_a_hand_worked_overload() {
        let text = r#"
duration = "6s"
seed = 3
[measure]
warmup = "2s"
[enforcer]
kind = "fifo"
rate = "5mbit"
burst = "3kb"
limit = "50kb"
[[aggregates]]
link_rate = "1gbit"
flows = [
  { rtt = "10ms", class = 0, app = { kind = "lognormal", rate = "5mbit", sigma = 0.5, packet = 1500 } },
  { rtt = "10ms", class = 1, app = { kind = "lognormal", rate = "5mbit", sigma = 0.5, packet = 1500 } },
]
"#;
        let resolved = ratekit_lab::scenario::parse(text, "test").unwrap();
        let (summary, series) = simulate(&resolved, resolved.scenario.seed).unwrap();
        let r = RunResult::simulated(&resolved, summary, series);
        let v = |m: &str, class: u16, over: Option<u16>| {
            let sel = Selector { class: Some(class), ..Selector::default() };
            let over = over.map(|c| Selector { class: Some(c), ..Selector::default() });
            r.value(Metric::parse(m).unwrap(), &sel, over.as_ref(), Span::default())
        };
        for class in [0, 1] {
            let loss = v("class_loss", class, None);
            assert!((0.45..0.55).contains(&loss), "class {class} loss {loss}");
            let delay = v("delay_mean", class, None);
            assert!((75.0..90.0).contains(&delay), "class {class} delay {delay} ms");
            assert!(v("delay_p99", class, None) <= v("delay_p100", class, None));
        }
        let ratio = v("class_loss", 1, Some(0));
        assert!((0.9..1.1).contains(&ratio), "loss ratio {ratio}");
        // The FIFO sends at its rate: the arriving UDP payload is (1500 − 28)/1500 of it.
        let wire = r.value(Metric::parse("wire_mean").unwrap(), &Selector::default(), None, Span::default());
        assert!((0.95..1.0).contains(&wire), "wire {wire}");
        assert_eq!(r.value(Metric::parse("wire_burst_p100").unwrap(), &Selector::default(), None, Span::default()), 0.0);
        // The 1 Gbit/s link carries the FIFO's 5 Mbit/s.
        let u = r.value(Metric::parse("utilization").unwrap(), &Selector::default(), None, Span::default());
        assert!((0.0045..0.0055).contains(&u), "utilisation {u}");
    }
}
