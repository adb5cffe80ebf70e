//! A whole reproduction: the paper files' runs in parallel, then every claim and figure.

use super::metrics::{Metric, RunResult, Span};
use super::report::{self, ClaimResult, Outcome, ScenarioResult};
use super::sketch;
use super::spec::{self, Job, Loaded, Work};
use crate::progress::Progress;
use crate::scenario::Resolved;
use crate::series::Series;
use crate::summary::Summary;
use anyhow::Context;
use rayon::prelude::*;
use std::path::Path;

/// Runs one simulation scenario with a seed, keeping its series.
pub type Simulate<'a> = dyn Fn(&Resolved, u64) -> anyhow::Result<(Summary, Series)> + Sync + 'a;

/// The paper files and the runs they ask for, validated before anything runs.
pub struct Reproduction {
    pub files: Vec<Loaded>,
    pub jobs: Vec<Job>,
    pub quick: bool,
}

impl Reproduction {
    /// The paper files in `dir` whose name contains one of `only` (all when empty).
    pub fn load(dir: &Path, only: &[String], quick: bool) -> anyhow::Result<Self> {
        let files = spec::load_dir(dir, only)?;
        let jobs = spec::jobs(&files, quick)?;
        Ok(Reproduction { files, jobs, quick })
    }

    pub fn claims(&self) -> usize {
        self.files.iter().map(|f| f.spec.claims.len()).sum()
    }

    /// Runs every job on `threads` workers (default: all cores), evaluates the claims and
    /// writes the reports into `out`. Progress is in simulated flow-seconds, a fair proxy for
    /// the work left.
    pub fn run(&self, out: &Path, threads: Option<usize>, simulate: &Simulate, progress: &dyn Progress) -> anyhow::Result<Outcome> {
        let wall = std::time::Instant::now();
        let results = self.run_jobs(threads, simulate, progress)?;
        let scenarios = self.evaluate(&results);
        report::write(out, &scenarios, self.quick, wall.elapsed().as_secs_f64())
    }

    fn run_jobs(&self, threads: Option<usize>, simulate: &Simulate, progress: &dyn Progress) -> anyhow::Result<Vec<RunResult>> {
        let jobs = &self.jobs;
        let total: f64 = jobs.iter().map(Job::cost).sum();
        progress.start(1000, "reproduce");
        let done = std::sync::Mutex::new(0.0f64);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads.unwrap_or(0)).build()?;
        // Largest first, so the last job to finish is a short one.
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by(|&a, &b| jobs[b].cost().total_cmp(&jobs[a].cost()));
        let computed: Vec<(usize, anyhow::Result<RunResult>)> = pool.install(|| {
            order
                .par_iter()
                .map(|&i| {
                    let j = &jobs[i];
                    let r = match &j.work {
                        Work::Sim(r) => simulate(r, r.scenario.seed).map(|(summary, series)| RunResult::simulated(r, summary, series)),
                        Work::Sketch(s) => sketch::run(&j.name, s),
                    }
                    .with_context(|| j.name.clone());
                    let mut d = done.lock().expect("progress lock");
                    *d += j.cost();
                    progress.set((*d / total * 1000.0) as u64);
                    progress.message(&j.name);
                    (i, r)
                })
                .collect()
        });
        progress.finish();
        let mut results: Vec<Option<anyhow::Result<RunResult>>> = (0..jobs.len()).map(|_| None).collect();
        for (i, r) in computed {
            results[i] = Some(r);
        }
        results.into_iter().map(|r| r.expect("every job ran")).collect()
    }

    fn evaluate(&self, results: &[RunResult]) -> Vec<ScenarioResult> {
        self.files
            .iter()
            .enumerate()
            .map(|(fi, f)| {
                let runs: Vec<(&Job, &RunResult)> = self.jobs.iter().zip(results).filter(|(j, _)| j.file == fi).collect();
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
                ScenarioResult::new(&f.name, &f.spec, self.quick, claims, runs)
            })
            .collect()
    }
}
