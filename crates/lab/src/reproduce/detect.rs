//! 002 Table 3 (§3.1): the policing detector's accuracy per class of trace. Not a network
//! simulation: a `kind = "detect"` run is a grid of generated server-side traces whose cause of
//! loss is known (a token-bucket policer, a drop-tail bottleneck or random loss; crates/trace's
//! synth.rs), each judged by the detector, and the result is the verdict of every segment with
//! enough losses to judge. The generator and the detector sit above this crate, so whoever drives
//! a reproduction hands them in (`Judge`), as it hands in the simulator (`run::Simulate`).

use super::metrics::{offline_summary, RunResult, DetectVerdict};
use anyhow::bail;
use ratekit_core::{Bytes, Rate};
use serde::Deserialize;

/// The generator's packets: 1448 bytes of payload and 52 of headers (synth.rs). A bucket or a
/// queue smaller than one never passes a packet, and the trace would only end at its horizon.
const PACKET_BYTES: u64 = 1500;

/// The `[base]` of a `kind = "detect"` paper file: one trace per grid point of `path` and seed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectRun {
    pub path: PathGrid,
    /// Traces per grid point, seeded `seed`, `seed + 1`, ….
    pub seeds: u32,
    pub seed: u64,
    /// Captured flows, all towards one client.
    #[serde(default = "one")]
    pub flows: u32,
    /// Uncaptured flows through the same path towards other clients (cross traffic).
    #[serde(default)]
    pub cross_flows: u32,
    /// The cross flows are bulk downloads that keep a queue from draining; else chunked.
    #[serde(default)]
    pub cross_bulk: bool,
    /// The receivers delay their ACKs as Linux does by default (else one ACK per segment).
    pub delayed_acks: bool,
    /// Which judgements count.
    #[serde(default)]
    pub rows: Rows,
}

fn one() -> u32 {
    1
}

/// What drops packets, with the values to generate traces for (the product of the lists).
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PathGrid {
    Policer { rates: Vec<Rate>, buckets: Vec<Bytes> },
    DropTail { rates: Vec<Rate>, queues: Vec<Bytes> },
    RandomLoss { loss: Vec<f64> },
}

/// One point of the grid: the path of one trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PathPoint {
    Policer { rate: Rate, bucket: Bytes },
    DropTail { rate: Rate, queue: Bytes },
    RandomLoss { loss: f64 },
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Rows {
    /// Each flow's segments, judged alone: 002's detector, which sees one flow of a client.
    #[default]
    Flow,
    /// The per-client judgement of the flows towards one client together (beyond the paper).
    Client,
}

impl Rows {
    pub fn as_str(self) -> &'static str {
        match self {
            Rows::Flow => "flow",
            Rows::Client => "client",
        }
    }
}

/// One trace to generate and judge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceSpec {
    pub path: PathPoint,
    pub seed: u64,
}

/// What the detector made of a run's traces.
#[derive(Debug, Clone, Default)]
pub struct Judged {
    pub verdicts: Vec<DetectVerdict>,
    pub packets: u64,
    /// Sum over the traces of first to last packet.
    pub simulated_s: f64,
}

/// Generates and judges the traces of a run.
pub type Judge<'a> = dyn Fn(&DetectRun) -> anyhow::Result<Judged> + Sync + 'a;

impl DetectRun {
    pub fn validate(&self) -> anyhow::Result<()> {
        let sizes = |field: &str, rates: &[Rate], sizes: &[Bytes]| -> anyhow::Result<()> {
            if rates.is_empty() {
                bail!("path.rates: empty; give at least one rate");
            }
            if sizes.is_empty() {
                bail!("path.{field}: empty; give at least one size");
            }
            if let Some(b) = sizes.iter().find(|b| b.0 < PACKET_BYTES) {
                bail!("path.{field}: {} bytes holds no {PACKET_BYTES}-byte packet of the generator", b.0);
            }
            Ok(())
        };
        match &self.path {
            PathGrid::Policer { rates, buckets } => sizes("buckets", rates, buckets)?,
            PathGrid::DropTail { rates, queues } => sizes("queues", rates, queues)?,
            PathGrid::RandomLoss { loss } => {
                if loss.is_empty() {
                    bail!("path.loss: empty; give at least one loss probability");
                }
                if let Some(p) = loss.iter().find(|p| !(**p > 0.0 && **p < 1.0)) {
                    bail!("path.loss: {p} is not a probability in (0, 1)");
                }
            }
        }
        if self.seeds == 0 {
            bail!("seeds: must be at least 1");
        }
        if self.flows == 0 {
            bail!("flows: must be at least 1");
        }
        if self.rows == Rows::Client && self.flows < 2 {
            bail!("rows: 'client' judges several flows towards one client together; flows must be at least 2");
        }
        if self.cross_bulk && self.cross_flows == 0 {
            bail!("cross_bulk: needs cross_flows");
        }
        Ok(())
    }

    /// Every trace of the run: grid points in the lists' order, then seeds.
    pub fn traces(&self) -> Vec<TraceSpec> {
        let points: Vec<PathPoint> = match &self.path {
            PathGrid::Policer { rates, buckets } => {
                rates.iter().flat_map(|&rate| buckets.iter().map(move |&bucket| PathPoint::Policer { rate, bucket })).collect()
            }
            PathGrid::DropTail { rates, queues } => {
                rates.iter().flat_map(|&rate| queues.iter().map(move |&queue| PathPoint::DropTail { rate, queue })).collect()
            }
            PathGrid::RandomLoss { loss } => loss.iter().map(|&loss| PathPoint::RandomLoss { loss }).collect(),
        };
        let seeds = self.seed..self.seed + self.seeds as u64;
        points.iter().flat_map(|&path| seeds.clone().map(move |seed| TraceSpec { path, seed })).collect()
    }

    /// Generated flows (captured and cross), a rough proxy for the work (the progress bar's unit).
    pub fn cost(&self) -> f64 {
        (self.traces().len() * (self.flows + self.cross_flows) as usize) as f64
    }
}

pub fn run(name: &str, cfg: &DetectRun, judge: &Judge) -> anyhow::Result<RunResult> {
    let wall = std::time::Instant::now();
    let judged = judge(cfg)?;
    let summary = offline_summary(name, cfg.seed, judged.simulated_s, judged.packets, wall.elapsed().as_secs_f64());
    Ok(RunResult::detected(summary, judged.verdicts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;
    use crate::reproduce::run::Reproduction;
    use crate::scenario::Resolved;
    use crate::series::Series;
    use crate::summary::Summary;

    fn parse(text: &str) -> anyhow::Result<DetectRun> {
        let run = DetectRun::deserialize(toml::from_str::<toml::Value>(text)?)?;
        run.validate()?;
        Ok(run)
    }

    const POLICER: &str = "seeds = 2\nseed = 5\ndelayed_acks = true\n\
                           path = { kind = \"policer\", rates = [\"1mbit\", \"3mbit\"], buckets = [\"100kb\", 1000000] }\n";

    #[test]
    fn the_grid_is_every_point_times_every_seed() {
        let run = parse(POLICER).unwrap();
        let traces = run.traces();
        assert_eq!(traces.len(), 8);
        assert_eq!(traces[0], TraceSpec { path: PathPoint::Policer { rate: Rate::from_mbps(1.0), bucket: Bytes(102_400) }, seed: 5 });
        assert_eq!(traces[7], TraceSpec { path: PathPoint::Policer { rate: Rate::from_mbps(3.0), bucket: Bytes(1_000_000) }, seed: 6 });
        assert_eq!((run.flows, run.rows), (1, Rows::Flow));
        assert_eq!(run.cost(), 8.0);
    }

    #[test]
    fn errors_name_the_field() {
        for (text, expect) in [
            (POLICER.replace("seeds = 2", "seeds = 0"), "seeds: must be at least 1"),
            (POLICER.replace("\"100kb\", 1000000", ""), "path.buckets: empty"),
            (POLICER.replace("\"100kb\"", "1000"), "path.buckets: 1000 bytes holds no 1500-byte packet"),
            (POLICER.replace("buckets", "queues"), "unknown field `queues`, expected `rates` or `buckets`"),
            (POLICER.replace("delayed_acks = true\n", ""), "missing field `delayed_acks`"),
            (POLICER.replace("seed = 5", "seed = 5\nrows = \"client\""), "rows: 'client' judges several flows"),
            (POLICER.replace("seed = 5", "seed = 5\ncross_bulk = true"), "cross_bulk: needs cross_flows"),
            (POLICER.replace("seed = 5", "seed = 5\nsede = 1"), "unknown field `sede`"),
            ("seeds = 1\nseed = 1\ndelayed_acks = false\npath = { kind = \"random_loss\", loss = [0.01, 1.5] }".into(), "path.loss: 1.5 is not a probability"),
            ("seeds = 1\nseed = 1\ndelayed_acks = false\npath = { kind = \"red\", loss = [0.01] }".into(), "unknown variant `red`"),
        ] {
            let err = format!("{:#}", parse(&text).expect_err(expect));
            assert!(err.contains(expect), "{expect}: {err}");
        }
    }

    /// Two classes of four traces each, a policer and a drop-tail queue at the same rate, with a
    /// claim on each and a rate-error claim; every claim's control is the other class.
    const FILE: &str = r#"
paper = "002"
figure = "test"
title = "fake detectors"
kind = "detect"
[base]
seed = 1
seeds = 4
delayed_acks = true
path = { kind = "policer", rates = ["1mbit"], buckets = [100000] }
[[runs]]
label = "policer"
[[runs]]
label = "drop-tail"
set = { path = { kind = "drop_tail", rates = ["1mbit"], queues = [100000] } }
[[claims]]
name = "policing found"
metric = "detect_policed"
run = "policer"
control = "drop-tail"
paper = 0.9
tolerance = { abs = 0.1 }
note = ""
[[claims]]
name = "drop-tail not found policed"
metric = "detect_not_policed"
run = "drop-tail"
control = "policer"
paper = 1.0
tolerance = { abs = 0.1 }
note = ""
[[claims]]
name = "rate within 3 %"
metric = "rate_error_p50"
run = "policer"
control = "drop-tail"
paper_text = "a test fixture"
tolerance = { max = 0.03 }
note = ""
"#;

    /// Two verdicts per trace, `policed` deciding each, with the policer's rate as the estimate.
    fn fake(run: &DetectRun, policed: impl Fn(&PathPoint) -> bool) -> Judged {
        let verdicts = run.traces().into_iter().flat_map(|t| {
            let policer_bps = match t.path {
                PathPoint::Policer { rate, .. } => Some(rate.bits_per_sec() as f64),
                _ => None,
            };
            let v = DetectVerdict { policed: policed(&t.path), rate_bps: Some(1e6), policer_bps };
            [v, v]
        });
        Judged { verdicts: verdicts.collect(), packets: 100, simulated_s: 10.0 }
    }

    fn no_simulator(_: &Resolved, _: u64) -> anyhow::Result<(Summary, Series)> {
        anyhow::bail!("a detect file needs no simulator")
    }

    /// (claims passed, claims whose control passes too, each claim's pass, each control's pass).
    fn reproduce(file: &str, judge: &Judge) -> (usize, usize, Vec<bool>, Vec<bool>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.toml"), file).unwrap();
        let r = Reproduction::load(dir.path(), &[], true).unwrap();
        let out = dir.path().join("out");
        let o = r.run(&out, Some(1), &no_simulator, judge, &Silent).unwrap();
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("claims.json")).unwrap()).unwrap();
        let claims = json["scenarios"][0]["claims"].as_array().unwrap().clone();
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("| policer | 10 | 100 | 8 |"), "the runs table counts the judged segments: {md}");
        let passes = claims.iter().map(|c| c["pass"].as_bool().unwrap()).collect();
        let controls = claims.iter().map(|c| c["control"]["pass"].as_bool().unwrap()).collect();
        (o.passed, o.flagged, passes, controls)
    }

    #[test]
    fn a_right_detector_holds_every_claim_and_fails_every_control() {
        let right = |r: &DetectRun| Ok(fake(r, |p| matches!(p, PathPoint::Policer { .. })));
        assert_eq!(reproduce(FILE, &right), (3, 0, vec![true; 3], vec![false; 3]));
    }

    #[test]
    fn a_detector_that_flags_everything_fails_the_claims_or_passes_their_controls() {
        let everything = |r: &DetectRun| Ok(fake(r, |_| true));
        // It holds "policing found", but so does its control: the drop-tail queue "is policed".
        assert_eq!(reproduce(FILE, &everything), (2, 1, vec![true, false, true], vec![true, false, false]));
        let nothing = |r: &DetectRun| Ok(fake(r, |_| false));
        // Nothing found policed leaves no rate to judge.
        assert_eq!(reproduce(FILE, &nothing), (1, 1, vec![false, true, false], vec![false, true, false]));
    }

    #[test]
    fn a_bad_base_is_refused_at_load_naming_the_run_and_field() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.toml"), FILE.replace("queues = [100000]", "queues = [10]")).unwrap();
        let err = format!("{:#}", Reproduction::load(dir.path(), &[], true).err().expect("refused"));
        assert!(err.contains("x run 'drop-tail': base: path.queues: 10 bytes holds no 1500-byte packet"), "{err}");
    }
}
