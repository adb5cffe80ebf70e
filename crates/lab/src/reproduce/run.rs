//! A whole reproduction: the paper files' runs in parallel, then every claim and figure.

use super::cost;
use super::detect::{self, Judge};
use super::metrics::{Metric, RunResult, Span};
use super::report::{self, ClaimResult, Outcome, ScenarioResult};
use super::sketch;
use super::spec::{self, Claim, Job, Loaded, Work};
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
        let mut files = spec::load_dir(dir, only)?;
        if quick {
            for f in &mut files {
                f.spec.claims.retain(|c| !c.full_only);
                f.spec.figures.retain(|fig| !fig.full_only());
            }
        }
        let jobs = spec::jobs(&files, quick)?;
        Ok(Reproduction { files, jobs, quick })
    }

    pub fn claims(&self) -> usize {
        self.files.iter().map(|f| f.spec.claims.len()).sum()
    }

    /// Runs every job on `threads` workers (default: all cores), evaluates the claims and
    /// writes the reports into `out`. Progress is in simulated flow-seconds, a fair proxy for
    /// the work left.
    pub fn run(
        &self,
        out: &Path,
        threads: Option<usize>,
        simulate: &Simulate,
        judge: &Judge,
        progress: &dyn Progress,
    ) -> anyhow::Result<Outcome> {
        let wall = std::time::Instant::now();
        let results = self.run_jobs(threads, simulate, judge, progress)?;
        let scenarios = self.evaluate(&results);
        report::write(out, &scenarios, self.quick, wall.elapsed().as_secs_f64())
    }

    fn run_jobs(
        &self,
        threads: Option<usize>,
        simulate: &Simulate,
        judge: &Judge,
        progress: &dyn Progress,
    ) -> anyhow::Result<Vec<RunResult>> {
        let jobs = &self.jobs;
        let total: f64 = jobs.iter().map(Job::cost).sum();
        progress.start(1000, "reproduce");
        let done = std::sync::Mutex::new(0.0f64);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads.unwrap_or(0)).build()?;
        let step = |j: &Job, r: anyhow::Result<RunResult>| {
            let mut d = done.lock().expect("progress lock");
            *d += j.cost();
            progress.set((*d / total * 1000.0) as u64);
            progress.message(&j.name);
            r.with_context(|| j.name.clone())
        };
        // Largest first, so the last job to finish is a short one. Cost runs time the machine,
        // so they wait until the simulations are done and then run one at a time.
        let mut order: Vec<usize> = (0..jobs.len()).filter(|&i| !matches!(jobs[i].work, Work::Cost(_))).collect();
        order.sort_by(|&a, &b| jobs[b].cost().total_cmp(&jobs[a].cost()));
        let execute = |j: &Job| match &j.work {
            Work::Sim(r) => simulate(r, r.scenario.seed).map(|(summary, series)| RunResult::simulated(r, summary, series)),
            Work::Sketch(s) => sketch::run(&j.name, s),
            Work::Detect(d) => detect::run(&j.name, d, judge),
            Work::Cost(c) => cost::run(&j.name, c),
        };
        let mut computed: Vec<(usize, anyhow::Result<RunResult>)> =
            pool.install(|| order.par_iter().map(|&i| (i, step(&jobs[i], execute(&jobs[i])))).collect());
        for (i, j) in jobs.iter().enumerate().filter(|(_, j)| matches!(j.work, Work::Cost(_))) {
            computed.push((i, step(j, execute(j))));
        }
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
                let find = |label: Option<&String>| -> &RunResult {
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
                        let measure = |run: Option<&String>, over: Option<&String>| claim_value(c, find(run), over.map(|o| find(Some(o))));
                        ClaimResult::new(c, measure(c.run.as_ref(), c.over_run.as_ref()), measure(Some(&c.control), c.control_over()))
                    })
                    .collect();
                ScenarioResult::new(&f.name, &f.spec, self.quick, claims, runs)
            })
            .collect()
    }
}

/// The claim's metric in `run`, divided by the same in `over` when the claim names an `over_run`.
fn claim_value(c: &Claim, run: &RunResult, over: Option<&RunResult>) -> f64 {
    let metric = Metric::parse(&c.metric).expect("checked on load");
    let span = Span { from: c.from, to: c.to };
    let v = run.value(metric, &c.select, c.over.as_ref(), span);
    over.map_or(v, |o| v / o.value(metric, &c.select, c.over.as_ref(), span))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;

    /// A sketch file (no simulator needed): 2000 flows into a 4×65536 sketch, which almost never
    /// misestimates, into a broken 4×8 one, which almost always does, and into a 4×256 one between.
    const FILE: &str = r#"
paper = "001"
figure = "test"
title = "negative controls"
kind = "sketch"
[base]
rate = "80mbit"
bucket = 400000
flows = 2000
duration = "500ms"
sketch_depth = 4
sketch_width = 65536
seed = 7
[[runs]]
label = "wide"
[[runs]]
label = "narrow"
set = { sketch_width = 8 }
[[runs]]
label = "mid"
set = { sketch_width = 256 }
"#;

    fn claim(name: &str, run: &str, control: Option<&str>, tolerance: &str) -> String {
        let control = control.map_or(String::new(), |c| format!("control = \"{c}\"\n"));
        format!(
            "[[claims]]\nname = \"{name}\"\nmetric = \"sketch_misestimation\"\nrun = \"{run}\"\n{control}\
             paper_text = \"a test fixture\"\ntolerance = {tolerance}\nnote = \"\"\n"
        )
    }

    fn load(claims: &str) -> (tempfile::TempDir, anyhow::Result<Reproduction>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.toml"), format!("{FILE}{claims}")).unwrap();
        let r = Reproduction::load(dir.path(), &[], true);
        (dir, r)
    }

    fn no_simulator(_: &Resolved, _: u64) -> anyhow::Result<(Summary, Series)> {
        anyhow::bail!("a sketch file needs no simulator")
    }

    fn no_detector(_: &detect::DetectRun) -> anyhow::Result<detect::Judged> {
        anyhow::bail!("a sketch file needs no detector")
    }

    #[test]
    fn a_control_that_passes_too_is_flagged_and_counted_apart() {
        let claims = [
            claim("a wide sketch rarely misestimates", "wide", Some("narrow"), "{ max = 0.01 }"),
            claim("misestimation is a fraction", "wide", Some("narrow"), "{ max = 1.0 }"),
        ];
        let (dir, r) = load(&claims.concat());
        let out = dir.path().join("out");
        let o = r.unwrap().run(&out, Some(1), &no_simulator, &no_detector, &Silent).unwrap();
        assert_eq!((o.claims, o.passed, o.controlled, o.flagged), (2, 2, 1, 1));

        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("claims.json")).unwrap()).unwrap();
        assert_eq!((json["failing_controls"].as_u64(), json["passing_controls"].as_u64()), (Some(1), Some(1)));
        assert_eq!(json["passed_with_failing_control"].as_u64(), Some(1));
        let c = &json["scenarios"][0]["claims"];
        assert_eq!(c[0]["control"]["run"], "narrow");
        assert!(c[0]["control"]["ratekit"].as_f64().unwrap() > 0.3, "the 4×8 sketch misestimates: {}", c[0]);
        assert_eq!((&c[0]["control"]["pass"], &c[1]["control"]["pass"]), (&false.into(), &true.into()));

        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        let row = |name: &str| md.lines().find(|l| l.starts_with(&format!("| {name} |"))).unwrap().to_string();
        let controlled = row("a wide sketch rarely misestimates");
        assert!(controlled.contains("| narrow |") && controlled.ends_with("| fails |"), "{md}");
        assert!(row("misestimation is a fraction").contains("**PASSES TOO"), "{md}");
        assert!(md.contains("2 of 2 claims hold (1 of them with a failing control). Claims with a failing control (a wrong system fails them): 1; with a control that passes too"), "{md}");
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert_eq!(html.matches("class=\"flag\"").count(), 1);
    }

    #[test]
    fn a_ratio_claims_control_can_replace_both_runs() {
        let ratio = "[[claims]]\nname = \"a narrow sketch misestimates more\"\nmetric = \"sketch_misestimation\"\n\
                     run = \"narrow\"\nover_run = \"mid\"\ncontrol = \"mid\"\ncontrol_over_run = \"narrow\"\n\
                     paper_text = \"a test fixture\"\ntolerance = { min = 2.0 }\nnote = \"\"\n";
        let (dir, r) = load(ratio);
        let out = dir.path().join("out");
        let o = r.unwrap().run(&out, Some(1), &no_simulator, &no_detector, &Silent).unwrap();
        assert_eq!((o.passed, o.controlled), (1, 1));
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("claims.json")).unwrap()).unwrap();
        let c = &json["scenarios"][0]["claims"][0];
        assert_eq!((&c["control"]["run"], &c["control"]["over_run"]), (&"mid".into(), &"narrow".into()));
        // The control is the claim's ratio turned over.
        let (v, ctl) = (c["ratekit"].as_f64().unwrap(), c["control"]["ratekit"].as_f64().unwrap());
        assert!((v * ctl - 1.0).abs() < 1e-9, "{c}");
    }

    #[test]
    fn a_control_must_name_another_run_of_the_file() {
        for (control, expect) in [
            (None, "claims[0].control: missing; name a run of this file where the claim should not hold"),
            (Some(""), "claims[0].control: missing"),
            (Some("nope"), "claims[0].control: no run labelled 'nope'"),
            (Some("wide"), "claims[0].control: 'wide' is the claim's own run"),
        ] {
            let (_dir, r) = load(&claim("c", "wide", control, "{ max = 0.01 }"));
            let err = format!("{:#}", r.err().expect("a bad control is refused before any run"));
            assert!(err.contains(expect), "{err}");
        }
    }
}
