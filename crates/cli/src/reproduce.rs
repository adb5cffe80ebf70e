//! `ratekit reproduce [--quick] [--only NAME] --out DIR`: re-runs the papers' evaluations
//! (scenarios/paper/*.toml) in the simulator, in parallel, computes every claim's metric and
//! writes DIR/claims.json, DIR/report.md, DIR/report.html and DIR/figures/ (docs/reproduce.md).

use crate::reproduce_metrics::{Metric, RunResult, Span};
use crate::reproduce_report::{self, ClaimResult, ScenarioResult};
use crate::reproduce_sketch;
use crate::reproduce_spec::{self, Job, Work};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use ratekit_lab::scenario::{AppConfig, Resolved};
use ratekit_sim::RunOptions;
use rayon::prelude::*;
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
    let files = reproduce_spec::load_dir(&args.scenarios, &args.only)?;
    let jobs = reproduce_spec::jobs(&files, args.quick)?;
    if args.dry_run {
        for j in &jobs {
            println!("{}", j.describe());
        }
        let claims: usize = files.iter().map(|f| f.spec.claims.len()).sum();
        println!("{} scenarios, {} runs, {claims} claims", files.len(), jobs.len());
        return Ok(());
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;

    // Progress in simulated flow-seconds, a fair proxy for the work left.
    let cost = |j: &Job| j.cost();
    let total: f64 = jobs.iter().map(cost).sum();
    let pb = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(1000) };
    pb.set_style(
        ProgressStyle::with_template("reproduce [{elapsed_precise}] {wide_bar} {percent}% eta {eta} {msg}").expect("static template"),
    );
    let done = std::sync::Mutex::new(0.0f64);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.threads.unwrap_or(0)).build()?;
    // Largest first, so the last job to finish is a short one.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| cost(&jobs[b]).total_cmp(&cost(&jobs[a])));
    let mut results: Vec<Option<anyhow::Result<RunResult>>> = (0..jobs.len()).map(|_| None).collect();
    let computed: Vec<(usize, anyhow::Result<RunResult>)> = pool.install(|| {
        order
            .par_iter()
            .map(|&i| {
                let j = &jobs[i];
                let r = match &j.work {
                    Work::Sim(r) => simulate(r),
                    Work::Sketch(s) => reproduce_sketch::run(&j.name, s),
                }
                .with_context(|| j.name.clone());
                let mut d = done.lock().expect("progress lock");
                *d += cost(j);
                pb.set_position((*d / total * 1000.0) as u64);
                pb.set_message(j.name.clone());
                (i, r)
            })
            .collect()
    });
    pb.finish_and_clear();
    for (i, r) in computed {
        results[i] = Some(r);
    }
    let results: Vec<RunResult> = results.into_iter().map(|r| r.expect("every job ran")).collect::<anyhow::Result<_>>()?;

    let scenarios: Vec<ScenarioResult> = files
        .iter()
        .enumerate()
        .map(|(fi, f)| {
            let runs: Vec<(&Job, &RunResult)> = jobs.iter().zip(&results).filter(|(j, _)| j.file == fi).collect();
            let find = |label: &Option<String>| -> &RunResult {
                match label {
                    Some(l) => runs.iter().find(|(j, _)| &j.label == l).expect("labels checked on load").1,
                    None => runs[0].1,
                }
            };
            let claims = f
                .spec
                .claims
                .iter()
                .map(|c| {
                    let metric = Metric::parse(&c.metric).expect("checked on load");
                    let span = Span { from: c.from, to: c.to };
                    let mut v = find(&c.run).value(metric, &c.select, c.over.as_ref(), span);
                    if c.over_run.is_some() {
                        v /= find(&c.over_run).value(metric, &c.select, c.over.as_ref(), span);
                    }
                    ClaimResult::new(c, v)
                })
                .collect();
            ScenarioResult::new(&f.name, &f.spec, args.quick, claims, runs)
        })
        .collect();
    let outcome = reproduce_report::write(&args.out, &scenarios, args.quick, wall.elapsed().as_secs_f64())?;
    eprintln!(
        "{} of {} claims hold over {} scenarios ({} simulations, {:.0} s); report: {}",
        outcome.passed,
        outcome.claims,
        scenarios.len(),
        jobs.len(),
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

fn simulate(r: &Resolved) -> anyhow::Result<RunResult> {
    let (summary, series) = ratekit_sim::run(r, None, RunOptions { keep_series: true, ..RunOptions::default() })?;
    let flows = || r.aggregates.iter().flat_map(|a| a.flows.iter());
    let classes = flows().map(|f| f.class).collect();
    let end_ns = summary.covered_s() * 1e9;
    // A CBR source sends at start, then every packet/rate (truncated to whole ns, as the
    // simulator's UdpSource does); a random start is not known here, so such flows get None.
    let udp_offered = flows()
        .map(|f| match f.app {
            AppConfig::Cbr { rate, packet } if f.start_jitter.0 == 0 && end_ns > f.start.0 as f64 => {
                let gap = ((packet.0 as f64 * 1e9 / rate.0 as f64) as u64).max(1) as f64;
                let sent = ((end_ns - f.start.0 as f64) / gap).ceil();
                Some(sent * packet.0.saturating_sub(28) as f64)
            }
            _ => None,
        })
        .collect();
    Ok(RunResult {
        summary,
        series,
        classes,
        window_s: r.scenario.measure.window.as_secs_f64(),
        warmup_s: r.scenario.measure.warmup.as_secs_f64(),
        udp_offered,
        sketch: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reproduce_spec::Selector;

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
        let r = simulate(&ratekit_lab::scenario::parse(text, "test").unwrap()).unwrap();
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
