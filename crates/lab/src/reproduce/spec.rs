//! The paper-scenario file of `ratekit reproduce` (scenarios/paper/*.toml; docs/reproduce.md):
//! a `[base]` simulation scenario (the `ratekit sim` format), `[[runs]]` that each override
//! fields of it (one per enforcer or parameter value), `[quick]` overrides for `--quick`, the
//! `[[claims]]` with the paper's number and a tolerance fixed before any run, and `[[figures]]`.

use super::cost::CostRun;
use super::detect::DetectRun;
use super::metrics::Metric;
use super::selector::Selector;
use super::sketch::SketchRun;
use crate::scenario::{self, Resolved};
use crate::sweep as sim_sweep;
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::path::Path;
use toml::Value;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperFile {
    /// Which paper: "000" .. "004" (the seeds' index).
    pub paper: String,
    /// The figure or table reproduced, as the paper names it.
    pub figure: String,
    pub title: String,
    /// What `--quick` changes, in words (the overrides themselves are `quick`).
    #[serde(default)]
    pub quick_note: String,
    /// What `base` describes: a network simulation (default), a sketch-accuracy run or a
    /// detector-accuracy run.
    #[serde(default)]
    pub kind: RunKind,
    /// Dotted field path → value, applied to the base (after a run's `set`) with `--quick`.
    #[serde(default)]
    pub quick: toml::Table,
    /// A simulation scenario (docs/simulator.md) every run starts from, or with
    /// `kind = "sketch"` a `sketch::SketchRun`, with `kind = "detect"` a `detect::DetectRun`, with
    /// `kind = "cost"` a `cost::CostRun`.
    pub base: Value,
    /// Without runs the base is run once, labelled "main".
    #[serde(default)]
    pub runs: Vec<RunSpec>,
    pub claims: Vec<Claim>,
    #[serde(default)]
    pub figures: Vec<FigureSpec>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    #[default]
    Sim,
    /// 001 Fig. 11: count-min accuracy under FairPolicer (sketch.rs).
    Sketch,
    /// 002 Table 3: the policing detector on generated traces of known truth (detect.rs).
    Detect,
    /// 000 Table 1 and Fig. 7: an enforcer's time per packet against a policer's (cost.rs).
    Cost,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    pub label: String,
    /// Dotted field path → value, applied to the base.
    #[serde(default)]
    pub set: toml::Table,
    /// Applied after `set` and the file's `quick` with `--quick`.
    #[serde(default)]
    pub quick: toml::Table,
    /// Where this run sits on a `metric` figure's x axis (e.g. the flow count).
    #[serde(default)]
    pub x: Option<f64>,
    /// Left out with `--quick` (claims and figures must not need it there).
    #[serde(default)]
    pub full_only: bool,
}

/// The claim holds when every given bound holds for ratekit's number v against the paper's p:
/// |v − p| ≤ abs, |v − p| ≤ rel·|p|, v ≥ min, v ≤ max.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abs: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

impl Tolerance {
    /// `abs` and `rel` need the paper's number; without one they cannot hold.
    pub fn holds(&self, v: f64, paper: Option<f64>) -> bool {
        let paper = paper.unwrap_or(f64::NAN);
        v.is_finite()
            && self.abs.is_none_or(|a| (v - paper).abs() <= a)
            && self.rel.is_none_or(|r| (v - paper).abs() <= r * paper.abs())
            && self.min.is_none_or(|m| v >= m)
            && self.max.is_none_or(|m| v <= m)
    }

    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(a) = self.abs {
            parts.push(format!("±{a}"));
        }
        if let Some(r) = self.rel {
            parts.push(format!("±{}%", r * 100.0));
        }
        if let Some(m) = self.min {
            parts.push(format!("≥ {m}"));
        }
        if let Some(m) = self.max {
            parts.push(format!("≤ {m}"));
        }
        parts.join(", ")
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub name: String,
    /// See `metrics::Metric` (e.g. "throughput_p99", "jain_mean", "share").
    pub metric: String,
    /// The run measured (default: the only run).
    #[serde(default)]
    pub run: Option<String>,
    /// Divide by the same metric measured in this run.
    #[serde(default)]
    pub over_run: Option<String>,
    /// The negative control: a run of the same file where the claim should not hold (the
    /// baseline enforcer, a broken parameter, the other CC). The claim is measured there in
    /// place of `run`; a control that also passes shows the claim cannot tell a right system
    /// from a wrong one. Required: `check` refuses a claim without one, naming it, rather than
    /// serde's bare "missing field", which says neither which claim nor what to name.
    #[serde(default)]
    pub control: String,
    /// With `over_run`, the run that replaces it in the control (default: `over_run` itself), so
    /// a ratio of two configurations is controlled by the same ratio in the wrong system.
    #[serde(default)]
    pub control_over_run: Option<String>,
    #[serde(default)]
    pub select: Selector,
    /// The denominator's flows for "share" (default: all flows of the run) and "ratio".
    #[serde(default)]
    pub over: Option<Selector>,
    /// Window range in seconds of simulated time (default: after the warm-up to the end).
    #[serde(default)]
    pub from: Option<f64>,
    #[serde(default)]
    pub to: Option<f64>,
    /// The paper's number, where its text or a table gives one.
    #[serde(default)]
    pub paper: Option<f64>,
    /// What the paper shows where it gives no number (read off a figure or stated in words);
    /// the tolerance then says, in advance, what counts as agreeing.
    #[serde(default)]
    pub paper_text: Option<String>,
    pub tolerance: Tolerance,
    pub note: String,
    /// Judged only in full mode, on runs `--quick` leaves out (a table's other cells).
    #[serde(default)]
    pub full_only: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FigureSpec {
    /// CDF per run of the windows' normalised aggregate throughput or Jain's index.
    Cdf {
        title: String,
        data: CdfData,
        #[serde(default)]
        runs: Option<Vec<String>>,
    },
    /// Per-flow goodput over time in one run, one line per selected flow.
    Timeseries {
        title: String,
        run: String,
        #[serde(default)]
        select: Selector,
    },
    /// The queueing enforcer's estimate of its link's rate over time, one line per run, with
    /// the rate the link really had in the first of them (004 Figs. 6-8); `full_only` for runs
    /// that only full mode makes.
    LinkEstimate {
        title: String,
        runs: Vec<String>,
        #[serde(default)]
        full_only: bool,
    },
    /// One metric per run against the runs' `x`.
    Metric {
        title: String,
        metric: String,
        xlabel: String,
        #[serde(default)]
        select: Selector,
        /// The denominator's flows for "share" and "ratio".
        #[serde(default)]
        over: Option<Selector>,
        /// Runs whose label starts with one of these prefixes, one line per prefix.
        groups: Vec<String>,
        /// Logarithmic x axis (base 2).
        #[serde(default)]
        log_x: bool,
        /// Symmetric-log y axis, linear below the smallest positive value (zeros stay visible).
        #[serde(default)]
        log_y: bool,
    },
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CdfData {
    Throughput,
    Jain,
}

/// One run: a validated simulation scenario, sketch or detect run, and where it came from.
pub struct Job {
    pub file: usize,
    pub label: String,
    pub x: Option<f64>,
    pub name: String,
    pub work: Work,
}

pub enum Work {
    Sim(Box<Resolved>),
    Sketch(SketchRun),
    Detect(DetectRun),
    Cost(CostRun),
}

impl FigureSpec {
    pub fn full_only(&self) -> bool {
        matches!(self, FigureSpec::LinkEstimate { full_only: true, .. })
    }
}

impl Claim {
    /// The control's denominator run, for a claim that divides two runs: `control_over_run`, else
    /// the claim's own `over_run`.
    pub fn control_over(&self) -> Option<&String> {
        self.control_over_run.as_ref().or(self.over_run.as_ref())
    }
}

impl Job {
    /// Simulated flow-seconds, a fair proxy for the work (the progress bar's unit).
    pub fn cost(&self) -> f64 {
        match &self.work {
            Work::Sim(r) => r.scenario.duration.as_secs_f64() * r.aggregates.iter().map(|a| a.flows.len()).sum::<usize>() as f64,
            Work::Sketch(s) => s.cost(),
            Work::Detect(d) => d.cost(),
            Work::Cost(c) => c.cost(),
        }
    }

    /// One line for `--dry-run`.
    pub fn describe(&self) -> String {
        match &self.work {
            Work::Sim(r) => {
                let flows: usize = r.aggregates.iter().map(|a| a.flows.len()).sum();
                format!("{}\t{} aggregates\t{flows} flows\t{:.0} s", self.name, r.aggregates.len(), r.scenario.duration.as_secs_f64())
            }
            Work::Sketch(s) => format!(
                "{}\tsketch {}x{}\t{} flows\t{:.0} s",
                self.name,
                s.sketch_depth,
                s.sketch_width,
                s.flows,
                s.duration.as_secs_f64()
            ),
            Work::Detect(d) => format!("{}\tdetect\t{} traces\t{} rows", self.name, d.traces().len(), d.rows.as_str()),
            Work::Cost(c) => format!("{}\tcost\t{}\t{} aggregates\t{} packets x {}", self.name, c.enforcer, c.aggregates, c.packets, c.reps),
        }
    }
}

/// A paper file with its name (the file stem, what `--only` matches).
pub struct Loaded {
    pub name: String,
    pub spec: PaperFile,
}

/// Reads every `*.toml` in `dir`, sorted by name, keeping those whose stem contains one of
/// `only` (all when `only` is empty).
pub fn load_dir(dir: &Path, only: &[String]) -> anyhow::Result<Vec<Loaded>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let name = p.file_stem().expect("a .toml file has a stem").to_string_lossy().to_string();
        if !only.is_empty() && !only.iter().any(|o| name.contains(o.as_str())) {
            continue;
        }
        let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let spec: PaperFile = toml::from_str(&text).with_context(|| format!("{}", p.display()))?;
        check(&spec).with_context(|| format!("{}", p.display()))?;
        let loaded = Loaded { name, spec };
        check_quick(&loaded)?;
        out.push(loaded);
    }
    if out.is_empty() {
        bail!("no scenario in {} matches {:?}", dir.display(), only);
    }
    Ok(out)
}

fn check(spec: &PaperFile) -> anyhow::Result<()> {
    let labels = run_labels(spec);
    let known = |field: &str, l: &Option<String>| -> anyhow::Result<()> {
        match l {
            Some(l) if !labels.contains(l) => bail!("{field}: no run labelled '{l}' (runs: {labels:?})"),
            None if labels.len() > 1 && field.ends_with(".run") => {
                bail!("{field}: missing; the file has several runs ({labels:?})")
            }
            _ => Ok(()),
        }
    };
    for (i, c) in spec.claims.iter().enumerate() {
        known(&format!("claims[{i}].run"), &c.run)?;
        known(&format!("claims[{i}].over_run"), &c.over_run)?;
        if c.control.is_empty() {
            bail!(
                "claims[{i}].control: missing; name a run of this file where the claim should not hold \
                 (the baseline enforcer, a broken parameter, the other CC, no policing)"
            );
        }
        known(&format!("claims[{i}].control"), &Some(c.control.clone()))?;
        known(&format!("claims[{i}].control_over_run"), &c.control_over_run)?;
        if c.control_over_run.is_some() && c.over_run.is_none() {
            bail!("claims[{i}].control_over_run: needs the claim's over_run");
        }
        if c.run.as_ref().or(labels.first()) == Some(&c.control) {
            bail!("claims[{i}].control: '{}' is the claim's own run; name a run where the claim should not hold", c.control);
        }
        Metric::parse(&c.metric).with_context(|| format!("claims[{i}].metric"))?;
        let t = &c.tolerance;
        if t.abs.is_none() && t.rel.is_none() && t.min.is_none() && t.max.is_none() {
            bail!("claims[{i}].tolerance: give at least one of abs, rel, min, max");
        }
        if c.paper.is_none() && (c.paper_text.is_none() || t.abs.is_some() || t.rel.is_some()) {
            bail!("claims[{i}]: without the paper's number give paper_text and a min/max tolerance");
        }
    }
    for (i, f) in spec.figures.iter().enumerate() {
        match f {
            FigureSpec::Cdf { runs: Some(rs), .. } | FigureSpec::LinkEstimate { runs: rs, .. } => {
                for r in rs {
                    known(&format!("figures[{i}].runs"), &Some(r.clone()))?;
                }
            }
            FigureSpec::Timeseries { run, .. } => known(&format!("figures[{i}].run"), &Some(run.clone()))?,
            FigureSpec::Metric { metric, .. } => {
                Metric::parse(metric).with_context(|| format!("figures[{i}].metric"))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Claims and figures (but `full_only` ones) may only use runs that `--quick` keeps.
pub fn check_quick(f: &Loaded) -> anyhow::Result<()> {
    let dropped: Vec<&str> = f.spec.runs.iter().filter(|r| r.full_only).map(|r| r.label.as_str()).collect();
    for c in f.spec.claims.iter().filter(|c| !c.full_only) {
        for l in c.run.iter().chain(&c.over_run).chain([&c.control]).chain(&c.control_over_run) {
            if dropped.contains(&l.as_str()) {
                bail!("{}: claim '{}' uses run '{l}', which is full_only", f.name, c.name);
            }
        }
    }
    for fig in f.spec.figures.iter().filter(|fig| !fig.full_only()) {
        let used: Vec<&String> = match fig {
            FigureSpec::Cdf { runs: Some(rs), .. } | FigureSpec::LinkEstimate { runs: rs, .. } => rs.iter().collect(),
            FigureSpec::Timeseries { run, .. } => vec![run],
            _ => Vec::new(),
        };
        if let Some(l) = used.iter().find(|l| dropped.contains(&l.as_str())) {
            bail!("{}: a figure uses run '{l}', which is full_only", f.name);
        }
    }
    Ok(())
}

pub fn run_labels(spec: &PaperFile) -> Vec<String> {
    if spec.runs.is_empty() {
        vec!["main".to_string()]
    } else {
        spec.runs.iter().map(|r| r.label.clone()).collect()
    }
}

/// Applies `overrides` (dotted path → value) to `doc`, through the sweep expander so that a
/// mistyped path is an error rather than a new key.
fn apply(doc: &Value, overrides: &toml::Table) -> Result<Value, String> {
    if overrides.is_empty() {
        return Ok(doc.clone());
    }
    let mut d = doc.clone();
    let sweep: toml::Table = overrides.iter().map(|(k, v)| (k.clone(), Value::Array(vec![v.clone()]))).collect();
    d.as_table_mut().ok_or("base: must be a table")?.insert("sweep".into(), Value::Table(sweep));
    let mut points = sim_sweep::expand(&d)?;
    Ok(points.remove(0).value)
}

/// The `[base]` of a run that is not a network simulation, read and validated; errors name the
/// run and the field.
fn offline_base<T: serde::de::DeserializeOwned>(doc: Value, what: &str, validate: fn(&T) -> anyhow::Result<()>) -> anyhow::Result<T> {
    let base = T::deserialize(doc).with_context(|| format!("{what}: base"))?;
    validate(&base).with_context(|| format!("{what}: base"))?;
    Ok(base)
}

/// The validated simulations of every loaded file, in file then run order.
pub fn jobs(files: &[Loaded], quick: bool) -> anyhow::Result<Vec<Job>> {
    let mut out = Vec::new();
    for (fi, f) in files.iter().enumerate() {
        let single =
            [RunSpec { label: "main".into(), set: toml::Table::new(), quick: toml::Table::new(), x: None, full_only: false }];
        let runs = if f.spec.runs.is_empty() { &single[..] } else { &f.spec.runs[..] };
        for r in runs.iter().filter(|r| !(quick && r.full_only)) {
            let what = format!("{} run '{}'", f.name, r.label);
            let mut doc = apply(&f.spec.base, &r.set).map_err(|e| anyhow::anyhow!("{what}: set: {e}"))?;
            if quick {
                doc = apply(&doc, &f.spec.quick).map_err(|e| anyhow::anyhow!("{what}: quick: {e}"))?;
                doc = apply(&doc, &r.quick).map_err(|e| anyhow::anyhow!("{what}: runs.quick: {e}"))?;
            }
            let name = format!("{}/{}", f.name, r.label);
            let work = match f.spec.kind {
                RunKind::Sim => {
                    if let Some(t) = doc.as_table_mut() {
                        t.insert("name".into(), Value::String(name.clone()));
                    }
                    Work::Sim(Box::new(scenario::from_value(doc, &what)?))
                }
                RunKind::Sketch => Work::Sketch(offline_base(doc, &what, SketchRun::validate)?),
                RunKind::Detect => Work::Detect(offline_base(doc, &what, DetectRun::validate)?),
                RunKind::Cost => Work::Cost(offline_base(doc, &what, CostRun::validate)?),
            };
            out.push(Job { file: fi, label: r.label.clone(), x: r.x, name, work });
        }
    }
    Ok(out)
}
