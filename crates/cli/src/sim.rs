//! `ratekit sim SCENARIO.toml --out DIR [--seed N]`: runs a simulation scenario (one run, or
//! every point of its `[sweep]` in parallel) and writes the time series and summary.json.

use ratekit_lab::sweep as sim_sweep;
use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use crate::sim_capture::Captures;
use ratekit_lab::scenario::{self, Resolved};
use ratekit_lab::series::Series;
use ratekit_lab::summary::{SimulatedTime, Summary};
use ratekit_sim::RunOptions;
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    /// The scenario file (TOML; see docs/simulator.md).
    pub scenario: PathBuf,
    /// Output directory: flows.csv, aggregates.csv, summary.json (a sweep: one point-NNN/ each
    /// plus sweep.json).
    #[arg(long)]
    pub out: PathBuf,
    /// Overrides the scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Worker threads for a sweep (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Run the scenario's [sweep] points on the Dask cluster at ADDRESS (e.g. tcp://host:8786)
    /// through the Python package; --out then holds Parquet partitions (docs/python.md).
    #[arg(long, value_name = "ADDRESS")]
    pub dask: Option<String>,
}

fn bar(len: u64, quiet: bool, what: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{elapsed_precise}] {wide_bar} {percent}% eta {eta}")
            .expect("static template"),
    );
    pb.set_message(what.to_string());
    pb
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(address) = &args.dask {
        let mut forwarded = vec![args.scenario.clone().into_os_string(), "--out".into(), args.out.clone().into()];
        if let Some(seed) = args.seed {
            forwarded.extend(["--seed".into(), seed.to_string().into()]);
        }
        return crate::dask::run("sim", forwarded, address);
    }
    let file = args.scenario.display().to_string();
    let text = std::fs::read_to_string(&args.scenario).with_context(|| format!("reading {file}"))?;
    // Validate the file as written first: its errors carry the field's position.
    let base = scenario::parse(&text, &file)?;
    let value: toml::Value = toml::from_str(&text).with_context(|| format!("{file}"))?;
    let points = sim_sweep::expand(&value).map_err(|e| anyhow::anyhow!("{file}: sweep: {e}"))?;

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // A second Ctrl-C while the first is being honoured exits at once.
        let _ = ctrlc::set_handler(move || {
            if stop.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
        });
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;

    if points.is_empty() {
        let pb = bar(1000, args.quiet, &base.scenario.name);
        let mut progress = |f: f64| pb.set_position((f * 1000.0) as u64);
        let (summary, _) = run_one(&base, args.seed, &args.out, &stop, Some(&mut progress))?;
        pb.finish_and_clear();
        report(&args.out, &summary);
        if let Some(SimulatedTime { simulated_s, interrupted: true }) = summary.simulated {
            bail!("interrupted at {simulated_s:.2} s of {:.2} s; partial results kept in {}", summary.duration_s, args.out.display());
        }
        return Ok(());
    }

    // Validate every point before running any.
    let resolved: Vec<_> = points
        .iter()
        .enumerate()
        .map(|(i, p)| scenario::from_value(p.value.clone(), &format!("{file} (sweep point {i})")))
        .collect::<Result<_, _>>()?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.threads.unwrap_or(0)).build()?;
    let pb = bar(points.len() as u64, args.quiet, "sweep");
    let results: Vec<anyhow::Result<(PathBuf, Summary)>> = pool.install(|| {
        resolved
            .par_iter()
            .enumerate()
            .map(|(i, r)| {
                let dir = args.out.join(format!("point-{i:03}"));
                let (s, _) = run_one(r, args.seed, &dir, &stop, None)?;
                pb.inc(1);
                Ok((dir, s))
            })
            .collect()
    });
    pb.finish_and_clear();
    let mut index = Vec::new();
    let mut interrupted = false;
    for (p, res) in points.iter().zip(results) {
        let (dir, s) = res?;
        let point_interrupted = s.simulated.is_some_and(|t| t.interrupted);
        interrupted |= point_interrupted;
        index.push(serde_json::json!({ "values": p.assignments, "dir": dir, "interrupted": point_interrupted }));
    }
    std::fs::write(args.out.join("sweep.json"), serde_json::to_string_pretty(&index)? + "\n")?;
    eprintln!("{} sweep points written to {}", index.len(), args.out.display());
    if interrupted {
        bail!("interrupted; partial results kept in {}", args.out.display());
    }
    Ok(())
}

/// One run into `dir`, with the captures its `[testbed]` table asks for.
fn run_one(r: &Resolved, seed: Option<u64>, dir: &Path, stop: &AtomicBool, progress: Option<&mut dyn FnMut(f64)>) -> anyhow::Result<(Summary, Series)> {
    let mut captures = Captures::open(r, dir)?;
    let result = {
        let mut record = captures.as_mut().map(|c| move |point, now, p: &_| c.record(point, now, p));
        let tap = record.as_mut().map(|f| f as &mut ratekit_sim::Tap);
        // Reborrowed for this block, so that the caller's callback and the local one share the
        // one lifetime RunOptions has.
        let progress = progress.map(|p| p as &mut dyn FnMut(f64));
        ratekit_sim::run(r, seed, RunOptions { out_dir: Some(dir), stop: Some(stop), progress, keep_series: false, tap })
            .with_context(|| format!("writing results to {}", dir.display()))
    };
    if let Some(c) = captures {
        c.finish().with_context(|| format!("writing the captures in {}", dir.display()))?;
    }
    result
}

fn report(out: &Path, s: &Summary) {
    let engine = s.engine.as_ref().expect("the simulator reports its engine");
    eprintln!(
        "{} flows, {} aggregates; {} events in {:.2} s ({:.2} M events/s); results in {}",
        s.flows.len(),
        s.aggregates.len(),
        engine.events,
        engine.wall_seconds,
        engine.events_per_second / 1e6,
        out.display()
    );
}
