//! The outputs of `ratekit reproduce`: claims.json, report.md, report.html, and figures/
//! (one JSON of plot data per figure, drawn to PNG and SVG by scripts/report.py, which is
//! built into the binary and run with the system's python3 and matplotlib).

use super::metrics::{Metric, RunResult, Span};
use super::selector::Selector;
use super::spec::{CdfData, Claim, FigureSpec, Job, PaperFile, Tolerance};
use anyhow::Context;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

const PLOT_SCRIPT: &str = include_str!("../../../../scripts/report.py");
/// Points per CDF line: enough for the eye, small enough for an SVG.
const CDF_POINTS: usize = 400;

#[derive(Debug, Clone, Serialize)]
pub struct ClaimResult {
    pub name: String,
    pub metric: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_run: Option<String>,
    #[serde(skip_serializing_if = "is_default")]
    pub select: Selector,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper_text: Option<String>,
    /// `null` when the metric had no samples (e.g. no window in range).
    pub ratekit: Option<f64>,
    pub tolerance: Tolerance,
    pub tolerance_text: String,
    pub pass: bool,
    pub note: String,
    /// The claim measured on its negative control.
    pub control: ControlResult,
}

/// A claim judged on the run where it should not hold.
#[derive(Debug, Clone, Serialize)]
pub struct ControlResult {
    pub run: String,
    /// The control's denominator run, where the claim is a ratio of two runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_run: Option<String>,
    pub ratekit: Option<f64>,
    /// True when the control passes too, i.e. the claim cannot tell the systems apart.
    pub pass: bool,
}

fn is_default(s: &Selector) -> bool {
    *s == Selector::default()
}

impl ClaimResult {
    /// `control` is the claim's number measured on its control.
    pub fn new(c: &Claim, v: f64, control: f64) -> Self {
        ClaimResult {
            name: c.name.clone(),
            metric: c.metric.clone(),
            run: c.run.clone(),
            over_run: c.over_run.clone(),
            select: c.select.clone(),
            paper: c.paper,
            paper_text: c.paper_text.clone(),
            ratekit: v.is_finite().then_some(v),
            tolerance: c.tolerance.clone(),
            tolerance_text: c.tolerance.describe(),
            pass: c.tolerance.holds(v, c.paper),
            note: c.note.clone(),
            control: ControlResult {
                run: c.control.clone(),
                over_run: c.control_over().cloned(),
                ratekit: control.is_finite().then_some(control),
                pass: c.tolerance.holds(control, c.paper),
            },
        }
    }

    /// A wrong system (the control) fails the claim, so the claim can tell it from a right one;
    /// otherwise the report flags the claim.
    pub fn control_fails(&self) -> bool {
        !self.control.pass
    }

    /// The control's run, number and verdict, for the report's tables.
    fn control_cells(&self) -> [String; 3] {
        let c = &self.control;
        let run = c.over_run.as_ref().map_or(c.run.clone(), |o| format!("{} / {o}", c.run));
        let verdict = if c.pass { "PASSES TOO: cannot tell right from wrong" } else { "fails" };
        [run, num(c.ratekit), verdict.into()]
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub label: String,
    pub x: Vec<f64>,
    pub y: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// File stem under figures/.
    pub file: String,
    pub title: String,
    /// "cdf" (steps) or "lines".
    pub kind: &'static str,
    pub xlabel: String,
    pub ylabel: String,
    pub series: Vec<Series>,
    pub log_x: bool,
    pub log_y: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    pub label: String,
    pub simulated_s: f64,
    pub flows: usize,
    pub aggregates: usize,
    pub events: u64,
    pub wall_seconds: f64,
    /// The run's headline metrics, for context beside the claims.
    pub throughput_mean: Option<f64>,
    pub throughput_p99: Option<f64>,
    pub throughput_p999: Option<f64>,
    pub drop_rate: Option<f64>,
    pub jain_mean: Option<f64>,
    /// A detect run's judged segments and how many were found policed (the fractions' counts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detect: Option<DetectCounts>,
    /// A cost run's ns per packet and that over the token bucket's in the same repetitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostInfo>,
    /// A run with video sessions: their mean join and rebuffer times (s) and mean bitrate (bit/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub video: Option<[f64; 3]>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct CostInfo {
    pub ns_per_packet: f64,
    pub over_token_bucket: f64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct DetectCounts {
    pub judged: usize,
    pub policed: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub name: String,
    pub paper: String,
    pub figure: String,
    pub title: String,
    pub quick_note: String,
    pub claims: Vec<ClaimResult>,
    pub runs: Vec<RunInfo>,
    #[serde(skip)]
    pub figures: Vec<Figure>,
}

impl ScenarioResult {
    pub fn new(name: &str, spec: &PaperFile, quick: bool, claims: Vec<ClaimResult>, runs: Vec<(&Job, &RunResult)>) -> Self {
        let figures = spec.figures.iter().enumerate().map(|(i, f)| figure(format!("{name}-{i}"), f, &runs)).collect();
        ScenarioResult {
            name: name.to_string(),
            paper: spec.paper.clone(),
            figure: spec.figure.clone(),
            title: spec.title.clone(),
            quick_note: if quick { spec.quick_note.clone() } else { String::new() },
            claims,
            runs: runs
                .iter()
                .map(|(j, r)| {
                    let m = |name: &str| {
                        let v = r.value(Metric::parse(name).expect("static name"), &Selector::default(), None, Span::default());
                        v.is_finite().then_some(v)
                    };
                    RunInfo {
                        label: j.label.clone(),
                        simulated_s: r.summary.covered_s(),
                        flows: r.summary.flows.len(),
                        aggregates: r.summary.aggregates.len(),
                        events: r.summary.engine.as_ref().map_or(0, |e| e.events),
                        wall_seconds: r.summary.engine.as_ref().map_or(0.0, |e| e.wall_seconds),
                        throughput_mean: m("throughput_mean"),
                        throughput_p99: m("throughput_p99"),
                        throughput_p999: m("throughput_p99.9"),
                        drop_rate: m("drop_rate"),
                        jain_mean: m("jain_mean"),
                        detect: r.detect.as_ref().map(|vs| DetectCounts {
                            judged: vs.len(),
                            policed: vs.iter().filter(|v| v.policed).count(),
                        }),
                        cost: r.cost.map(|(over_token_bucket, ns_per_packet)| CostInfo { ns_per_packet, over_token_bucket }),
                        video: m("video_join_mean").map(|join| {
                            [join, m("video_rebuffer_mean").unwrap_or(f64::NAN), m("video_bitrate_mean").unwrap_or(f64::NAN)]
                        }),
                    }
                })
                .collect(),
            figures,
        }
    }
}

fn thin(sorted: Vec<f64>) -> Series {
    let n = sorted.len();
    let step = n.div_ceil(CDF_POINTS).max(1);
    let mut x = Vec::new();
    let mut y = Vec::new();
    for i in (0..n).step_by(step).chain(n.checked_sub(1)) {
        x.push(sorted[i]);
        y.push((i + 1) as f64 / n as f64);
    }
    Series { label: String::new(), x, y }
}

fn figure(file: String, spec: &FigureSpec, runs: &[(&Job, &RunResult)]) -> Figure {
    match spec {
        FigureSpec::Cdf { title, data, runs: which } => {
            let series = runs
                .iter()
                .filter(|(j, _)| which.as_ref().is_none_or(|w| w.contains(&j.label)))
                .map(|(j, r)| {
                    let all = Selector::default();
                    let mut xs = match data {
                        CdfData::Throughput => r.throughput_samples(&all, Span::default()),
                        CdfData::Jain => r.jain_samples(&all, Span::default()),
                    };
                    xs.sort_by(f64::total_cmp);
                    Series { label: j.label.clone(), ..thin(xs) }
                })
                .collect();
            let xlabel = match data {
                CdfData::Throughput => "aggregate throughput / rate (250 ms windows)",
                CdfData::Jain => "Jain's index per window and aggregate",
            };
            Figure { file, title: title.clone(), kind: "cdf", xlabel: xlabel.into(), ylabel: "CDF".into(), series, log_x: false, log_y: false }
        }
        FigureSpec::Timeseries { title, run, select } => {
            let (_, r) = runs.iter().find(|(j, _)| &j.label == run).expect("labels checked on load");
            let times: Vec<f64> = (0..r.series.goodput_bps.len()).map(|w| (w + 1) as f64 * r.window_s).collect();
            let series = (0..r.summary.flows.len())
                .filter(|&id| r.flow_matches(id, select))
                .take(16)
                .map(|id| {
                    let f = &r.summary.flows[id];
                    Series {
                        label: format!("flow {id} ({}, class {}, {} ms)", f.cc, r.classes[id], f.rtt_ms),
                        x: times.clone(),
                        y: r.series.goodput_bps.iter().map(|row| row[id] / 1e6).collect(),
                    }
                })
                .collect();
            Figure {
                file,
                title: title.clone(),
                kind: "lines",
                xlabel: "time (s)".into(),
                ylabel: "goodput (Mbit/s)".into(),
                series,
                log_x: false,
                log_y: false,
            }
        }
        FigureSpec::LinkEstimate { title, runs: which, .. } => {
            let chosen: Vec<&(&Job, &RunResult)> = which.iter().filter_map(|l| runs.iter().find(|(j, _)| &j.label == l)).collect();
            let line = |label: String, r: &RunResult, pick: fn(&(f64, Option<f64>)) -> Option<f64>| {
                let (x, y) = r
                    .series
                    .link_bps
                    .iter()
                    .enumerate()
                    .filter_map(|(w, row)| Some(((w + 1) as f64 * r.window_s, pick(row.first()?)? / 1e9)))
                    .unzip();
                Series { label, x, y }
            };
            let mut series: Vec<Series> = chosen.iter().map(|(j, r)| line(format!("estimate, {}", j.label), r, |&(_, e)| e)).collect();
            if let Some((_, r)) = chosen.first() {
                series.push(line("the link's rate".into(), r, |&(l, _)| Some(l)));
            }
            Figure { file, title: title.clone(), kind: "lines", xlabel: "time (s)".into(), ylabel: "Gbit/s".into(), series, log_x: false, log_y: false }
        }
        FigureSpec::Metric { title, metric, xlabel, select, over, groups, log_x, log_y } => {
            let m = Metric::parse(metric).expect("checked on load");
            let series = groups
                .iter()
                .map(|g| {
                    let mut pts: Vec<(f64, f64)> = runs
                        .iter()
                        .filter(|(j, _)| j.label.starts_with(g.as_str()))
                        .filter_map(|(j, r)| j.x.map(|x| (x, r.value(m, select, over.as_ref(), Span::default()))))
                        .collect();
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Series { label: g.clone(), x: pts.iter().map(|p| p.0).collect(), y: pts.iter().map(|p| p.1).collect() }
                })
                .collect();
            Figure { file, title: title.clone(), kind: "lines", xlabel: xlabel.clone(), ylabel: metric.clone(), series, log_x: *log_x, log_y: *log_y }
        }
    }
}

pub struct Outcome {
    pub claims: usize,
    pub passed: usize,
    /// Claims whose negative control fails them.
    pub controlled: usize,
    /// Claims whose negative control passes them too.
    pub flagged: usize,
    /// Why no PNG/SVG was drawn, if none was.
    pub figures_skipped: Option<String>,
}

fn num(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if v != 0.0 && (v.abs() >= 1e4 || v.abs() < 1e-3) => format!("{v:.3e}"),
        Some(v) => format!("{v:.4}"),
    }
}

fn paper_cell(c: &ClaimResult) -> String {
    match (&c.paper, &c.paper_text) {
        (Some(p), Some(t)) => format!("{} ({t})", num(Some(*p))),
        (Some(p), None) => num(Some(*p)),
        (None, Some(t)) => t.clone(),
        (None, None) => String::new(),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

pub fn write(out: &Path, scenarios: &[ScenarioResult], quick: bool, wall_s: f64) -> anyhow::Result<Outcome> {
    let claims: usize = scenarios.iter().map(|s| s.claims.len()).sum();
    let count = |keep: fn(&ClaimResult) -> bool| -> usize { scenarios.iter().map(|s| s.claims.iter().filter(|c| keep(c)).count()).sum() };
    let passed = count(|c| c.pass);
    let controlled = count(ClaimResult::control_fails);
    let held_controlled = count(|c| c.pass && c.control_fails());
    let flagged = claims - controlled;
    let summary = format!(
        "{passed} of {claims} claims hold ({held_controlled} of them with a failing control). Claims with a failing control (a wrong system fails them): {controlled}; \
         with a control that passes too (flagged: they cannot tell a right system from a wrong one): {flagged}."
    );
    let figdir = out.join("figures");
    std::fs::create_dir_all(&figdir).with_context(|| format!("creating {}", figdir.display()))?;
    for f in scenarios.iter().flat_map(|s| &s.figures) {
        std::fs::write(figdir.join(format!("{}.json", f.file)), serde_json::to_string(f)? + "\n")?;
    }
    let figures_skipped = draw(out).err();

    let json = serde_json::json!({
        "ratekit_version": env!("CARGO_PKG_VERSION"),
        "quick": quick,
        "wall_seconds": wall_s,
        "claims": claims,
        "passed": passed,
        "failing_controls": controlled,
        "passed_with_failing_control": held_controlled,
        "passing_controls": flagged,
        "scenarios": scenarios,
    });
    atomic_write(&out.join("claims.json"), &(serde_json::to_string_pretty(&json)? + "\n"))?;

    let mut md = String::new();
    let mode = if quick { "quick (reduced scale; see each scenario's note)" } else { "full" };
    writeln!(md, "# ratekit reproduce: the papers' claims\n")?;
    writeln!(md, "Mode: {mode}. {summary} Wall time {wall_s:.0} s. Each tolerance was written in the")?;
    writeln!(md, "scenario file (scenarios/paper/) before the run; each claim's control is a run of the same file where")?;
    writeln!(md, "the claim should not hold; docs/reproduce.md explains every mismatch.\n")?;
    writeln!(md, "| scenario | paper | claims held | failing controls |\n|---|---|---|---|")?;
    for s in scenarios {
        let ok = s.claims.iter().filter(|c| c.pass).count();
        let controlled = s.claims.iter().filter(|c| c.control_fails()).count();
        writeln!(md, "| [{}](#{}) | {} {} | {ok} / {} | {controlled} / {} |", s.name, s.name, s.paper, s.figure, s.claims.len(), s.claims.len())?;
    }
    let mut html = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>ratekit reproduce</title><style>\
         body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}\
         td,th{border:1px solid #bbb;padding:3px 6px;font-size:90%}.pass{background:#dfd}.fail{background:#fdd}\
         .flag{background:#fd8;font-weight:bold}\
         img{max-width:100%}</style></head><body>\n",
    );
    writeln!(html, "<h1>ratekit reproduce: the papers' claims</h1><p>Mode: {mode}. {} Wall time {wall_s:.0} s.</p>", esc(&summary))?;
    for s in scenarios {
        writeln!(md, "\n## {}\n\n{} {}: {}", s.name, s.paper, s.figure, s.title)?;
        writeln!(html, "<h2 id=\"{0}\">{0}</h2><p>{1} {2}: {3}</p>", esc(&s.name), esc(&s.paper), esc(&s.figure), esc(&s.title))?;
        if !s.quick_note.is_empty() {
            writeln!(md, "\nQuick mode: {}", s.quick_note)?;
            writeln!(html, "<p><i>Quick mode: {}</i></p>", esc(&s.quick_note))?;
        }
        writeln!(md, "\n| claim | metric | run | paper | ratekit | tolerance | result | note | control | control's number | control's result |\n|---|---|---|---|---|---|---|---|---|---|---|")?;
        writeln!(html, "<table><tr><th>claim</th><th>metric</th><th>run</th><th>paper</th><th>ratekit</th><th>tolerance</th><th>result</th><th>note</th><th>control</th><th>control's number</th><th>control's result</th></tr>")?;
        for c in &s.claims {
            let run = match (&c.run, &c.over_run) {
                (Some(r), Some(o)) => format!("{r} / {o}"),
                (Some(r), None) => r.clone(),
                _ => String::new(),
            };
            let verdict = if c.pass { "pass" } else { "FAIL" };
            let [control, control_num, control_verdict] = c.control_cells();
            writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {verdict} | {} | {control} | {control_num} | {} |",
                c.name,
                c.metric,
                run,
                paper_cell(c),
                num(c.ratekit),
                c.tolerance_text,
                c.note.replace('|', "/").replace('\n', " "),
                if c.control_fails() { control_verdict.clone() } else { format!("**{control_verdict}**") }
            )?;
            writeln!(
                html,
                "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{verdict}</td><td>{}</td>\
                 <td>{}</td><td>{control_num}</td><td{}>{}</td></tr>",
                if c.pass { "pass" } else { "fail" },
                esc(&c.name),
                esc(&c.metric),
                esc(&run),
                esc(&paper_cell(c)),
                num(c.ratekit),
                esc(&c.tolerance_text),
                esc(&c.note),
                esc(&control),
                if c.control_fails() { "" } else { " class=\"flag\"" },
                esc(&control_verdict)
            )?;
        }
        writeln!(html, "</table>")?;
        for f in &s.figures {
            writeln!(md, "\n![{}](figures/{}.png) ([SVG](figures/{}.svg))", f.title, f.file, f.file)?;
            writeln!(html, "<p><img src=\"figures/{}.svg\" alt=\"{}\"></p>", f.file, esc(&f.title))?;
        }
        if s.runs.iter().any(|r| r.detect.is_some()) {
            write_detect_runs(&mut md, &s.runs)?;
        } else if s.runs.iter().any(|r| r.cost.is_some()) {
            write_cost_runs(&mut md, &s.runs)?;
        } else {
            write_sim_runs(&mut md, &s.runs)?;
        }
    }
    if let Some(why) = &figures_skipped {
        writeln!(md, "\nFigures were not drawn: {why}. Their data is in figures/*.json.")?;
        writeln!(html, "<p>Figures were not drawn: {}.</p>", esc(why))?;
    }
    html.push_str("</body></html>\n");
    atomic_write(&out.join("report.md"), &md)?;
    atomic_write(&out.join("report.html"), &html)?;
    Ok(Outcome { claims, passed, controlled, flagged, figures_skipped })
}

fn write_sim_runs(md: &mut String, runs: &[RunInfo]) -> std::fmt::Result {
    writeln!(md, "\nRuns (normalised goodput over non-zero 250 ms windows after the warm-up; payload only, so r reads ≈ 0.965):\n")?;
    writeln!(md, "| run | simulated s | aggregates | flows | mean | p99 | p99.9 | drop rate | mean Jain | wall s |\n|---|---|---|---|---|---|---|---|---|---|")?;
    for r in runs {
        writeln!(
            md,
            "| {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
            r.label,
            r.simulated_s,
            r.aggregates,
            r.flows,
            num(r.throughput_mean),
            num(r.throughput_p99),
            num(r.throughput_p999),
            num(r.drop_rate),
            num(r.jain_mean),
            r.wall_seconds
        )?;
    }
    Ok(())
}

fn write_detect_runs(md: &mut String, runs: &[RunInfo]) -> std::fmt::Result {
    writeln!(md, "\nRuns (generated traces; a segment is judged when it has as many losses as the detector needs, 15 in 002):\n")?;
    writeln!(md, "| run | traced s | packets | judged segments | found policed | wall s |\n|---|---|---|---|---|---|")?;
    for r in runs {
        let (judged, policed) = r.detect.map_or((0, 0), |d| (d.judged, d.policed));
        writeln!(md, "| {} | {:.0} | {} | {judged} | {policed} | {:.1} |", r.label, r.simulated_s, r.events, r.wall_seconds)?;
    }
    Ok(())
}

fn write_cost_runs(md: &mut String, runs: &[RunInfo]) -> std::fmt::Result {
    writeln!(md, "\nRuns (timed on this machine after every simulation; ns per packet, and over the token bucket's in the same repetitions):\n")?;
    writeln!(md, "| run | ns per packet | × token bucket | wall s |\n|---|---|---|---|")?;
    for r in runs {
        let (ns, ratio) = r.cost.map_or((None, None), |c| (Some(c.ns_per_packet), Some(c.over_token_bucket)));
        writeln!(md, "| {} | {} | {} | {:.1} |", r.label, num(ns), num(ratio), r.wall_seconds)?;
    }
    Ok(())
}

fn atomic_write(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

/// The interpreters tried, in order: `RATEKIT_PYTHON`, then `python3` on PATH, then the
/// system's (Debian's python3-matplotlib lives there even when PATH leads to a pyenv one).
fn pythons() -> Vec<String> {
    let mut v: Vec<String> = std::env::var("RATEKIT_PYTHON").into_iter().collect();
    v.extend(["python3".to_string(), "/usr/bin/python3".to_string()]);
    v
}

/// Draws figures/*.json to PNG and SVG with the built-in plot script; the error says why not.
fn draw(out: &Path) -> Result<(), String> {
    let mut last = String::from("no python3 found; run scripts/setup.d/70-reproduce.sh");
    for py in pythons() {
        match draw_with(&py, out) {
            Ok(()) => return Ok(()),
            Err(e) => last = format!("{py}: {e}"),
        }
    }
    Err(last)
}

fn draw_with(python: &str, out: &Path) -> Result<(), String> {
    use std::io::Write;
    let mut child = std::process::Command::new(python)
        .arg("-")
        .arg(out.join("figures"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run it ({e}); run scripts/setup.d/70-reproduce.sh"))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(PLOT_SCRIPT.as_bytes())
        .map_err(|e| format!("writing the plot script: {e}"))?;
    let o = child.wait_with_output().map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).trim().lines().last().unwrap_or("failed").to_string())
    }
}
