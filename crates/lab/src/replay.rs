//! `ratekit replay`: what would this enforcer do to these packets?
//!
//! One enforcer instance per aggregate, built from the config. Policers decide on arrival. A
//! queueing enforcer of each aggregate feeds its own link of `--link-rate`: whenever that link is
//! free the discipline is asked for its next packet, which then occupies the link for
//! `len / link_rate`; `departure_ns` is when its last bit leaves. Without a link rate (a shaper
//! paces itself) the link is infinitely fast and a packet departs when the discipline releases it;
//! the replay wakes each discipline at its `next_wakeup`. Input and output formats: docs/replay.md.

use crate::csv_io::{flow_key, ArrivalReader, AtomicFile, InputError, Row, OUTPUT_COLUMNS};
use crate::progress::Progress;
use crate::replay_summary::{Accounting, Summary};
use anyhow::{bail, Context};
use csv::StringRecord;
use crate::driver::{AggregateDriver, Decision, DriverFactory};
pub use crate::driver::Outcome;
use ratekit_core::{EnforcerConfig, Instant, Packet, Rate};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::path::{Path, PathBuf};

/// One `ratekit replay` run: an enforcer config, an arrivals CSV, a verdicts CSV.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Enforcer config (TOML), e.g. examples/enforcers/bcpqp-fair.toml.
    pub config: PathBuf,
    /// Arrivals CSV with header time_ns,aggregate,flow,bytes[,class] (rows sorted by time).
    pub input: PathBuf,
    /// Verdicts CSV: the input rows in input order plus `verdict` (and `departure_ns` for
    /// queueing enforcers). The summary goes beside it as <name>.summary.json.
    pub output: PathBuf,
    /// Rate of the link each aggregate's queueing enforcer feeds.
    pub link_rate: Option<Rate>,
}

/// What a replay wrote.
pub struct ReplayReport {
    pub summary: Summary,
    pub summary_file: PathBuf,
}

/// One arrival as the engine sees it; `aggregate` is an index from 0 (the CLI numbers aggregates
/// in order of first appearance; the demo by its fixed table, so any may come first).
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub time: Instant,
    pub aggregate: u32,
    pub flow: u64,
    pub bytes: u32,
    pub class: u16,
}

struct Slot<T> {
    payload: T,
    outcome: Option<Outcome>,
}

/// Drives one enforcer per aggregate over a time-ordered arrival stream and hands back each
/// packet's outcome in arrival order, as soon as it and every earlier packet are decided.
/// Packets not yet handed back wait in `slots`; packet ids are positions in this stream.
pub struct Engine<T> {
    factory: DriverFactory,
    drivers: Vec<AggregateDriver>,
    /// Wake-ups of queueing drivers: (time, aggregate); an entry is stale unless it is still
    /// that driver's `next_wakeup`.
    wakeups: BinaryHeap<Reverse<(Instant, u32)>>,
    slots: VecDeque<Slot<T>>,
    first_id: u64,
    decided: Vec<Decision>,
}

impl<T> Engine<T> {
    /// Builds the engine; fails now (before any input is read) if the config cannot build an
    /// enforcer, e.g. a queueing kind that needs `link_rate` without one.
    pub fn new(config: EnforcerConfig, link_rate: Option<Rate>) -> anyhow::Result<Self> {
        let kind = config.kind();
        let factory = DriverFactory::new(config, link_rate).map_err(|e| {
            if e.field == "link_rate" {
                anyhow::anyhow!("--link-rate {}: a '{kind}' enforcer needs the rate of the link it feeds", e.message)
            } else {
                anyhow::anyhow!("{e}")
            }
        })?;
        Ok(Engine {
            factory,
            drivers: Vec::new(),
            wakeups: BinaryHeap::new(),
            slots: VecDeque::new(),
            first_id: 0,
            decided: Vec::new(),
        })
    }

    pub fn is_queueing(&self) -> bool {
        self.factory.is_queueing()
    }

    /// Feeds one arrival; arrivals must come in time order, aggregates numbered from 0.
    pub fn push(&mut self, a: Arrival, payload: T) -> anyhow::Result<()> {
        let id = self.first_id + self.slots.len() as u64;
        self.slots.push_back(Slot { payload, outcome: None });
        let pkt = Packet { id, len: a.bytes, flow: a.flow, class: a.class, aggregate: a.aggregate as u64 };
        self.run_until(a.time);
        // Drivers are clones of one fresh prototype, so one built before its aggregate's first
        // packet is the same as one built at it: aggregates may appear in any order.
        while self.drivers.len() <= a.aggregate as usize {
            self.drivers.push(self.factory.build());
        }
        self.drivers[a.aggregate as usize].arrive(a.time, pkt, &mut self.decided);
        self.settle(a.aggregate);
        Ok(())
    }

    /// Records what driver `agg` decided and registers its next wake-up.
    fn settle(&mut self, agg: u32) {
        for d in self.decided.drain(..) {
            let slot = &mut self.slots[(d.id - self.first_id) as usize];
            debug_assert!(slot.outcome.is_none(), "packet {} resolved twice", d.id);
            slot.outcome = Some(d.outcome);
        }
        if let Some(t) = self.drivers[agg as usize].next_wakeup() {
            self.wakeups.push(Reverse((t, agg)));
        }
    }

    /// Runs every wake-up due at or before `until`, in time order.
    fn run_until(&mut self, until: Instant) {
        while let Some(&Reverse((t, agg))) = self.wakeups.peek() {
            if t > until {
                break;
            }
            self.wakeups.pop();
            if self.drivers[agg as usize].next_wakeup() == Some(t) {
                self.drivers[agg as usize].wake(t, &mut self.decided);
                self.settle(agg);
            }
        }
    }

    /// Hands every decided packet at the front of the stream to `f`, in arrival order.
    pub fn take_decided(&mut self, mut f: impl FnMut(T, Outcome) -> anyhow::Result<()>) -> anyhow::Result<()> {
        while let Some(Slot { outcome: Some(_), .. }) = self.slots.front() {
            let slot = self.slots.pop_front().expect("front exists");
            self.first_id += 1;
            f(slot.payload, slot.outcome.expect("checked"))?;
        }
        Ok(())
    }

    /// Runs the queueing enforcers until they are empty (or stop releasing), then hands back
    /// everything that remains; packets never released are `Held`.
    pub fn finish(mut self, mut f: impl FnMut(T, Outcome) -> anyhow::Result<()>) -> anyhow::Result<()> {
        self.run_until(Instant(u64::MAX));
        for slot in self.slots.drain(..) {
            f(slot.payload, slot.outcome.unwrap_or(Outcome::Held))?;
        }
        Ok(())
    }
}

/// How many explicit classes the config accepts, read from its raw TOML: its `queues` (16 when
/// not given, the default of every queue-per-class kind) when `classify = "class"`. `None` when
/// the config does not map classes to queues (colour-aware meters and DSCD read the class but
/// accept any value).
pub fn class_limit(text: &str) -> Option<(u64, &'static str)> {
    const DEFAULT_QUEUES: i64 = 16;
    let table: toml::Table = text.parse().ok()?;
    if table.get("classify").and_then(|c| c.as_str()) != Some("class") {
        return None;
    }
    let queues = table.get("queues").map_or(Some(DEFAULT_QUEUES), |q| q.as_integer()).filter(|&q| q > 0)?;
    Some((queues as u64, "the config's queues (classify = \"class\")"))
}

/// Reads and validates an enforcer config file; errors name the file and the field.
pub fn load_config(path: &Path) -> anyhow::Result<(EnforcerConfig, String)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
    let config = EnforcerConfig::from_toml(&text).map_err(|e| anyhow::anyhow!("config {}: {e}", path.display()))?;
    Ok((config, text))
}

/// `VERDICTS.csv` → `VERDICTS.summary.json`, beside it.
pub fn summary_path(output: &Path) -> PathBuf {
    let stem = output.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "verdicts".into());
    output.with_file_name(format!("{stem}.summary.json"))
}

/// Replays `args.input` through the enforcer and writes the verdicts and the summary beside them.
pub fn run(args: &ReplayOptions, progress: &dyn Progress) -> anyhow::Result<ReplayReport> {
    let (config, text) = load_config(&args.config)?;
    let limit = class_limit(&text);
    if args.link_rate.is_some() && !config.is_queueing() {
        progress.note(&format!("--link-rate is ignored for the policer '{}'", config.kind()));
    }
    let kind = config.kind();
    let mut engine: Engine<(u32, u32, u32, StringRecord)> = Engine::new(config, args.link_rate)?;
    let queueing = engine.is_queueing();

    let file = std::fs::File::open(&args.input).with_context(|| format!("cannot read input {}", args.input.display()))?;
    let input_len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let input_name = args.input.display().to_string();
    let in_err = |e: InputError| anyhow::anyhow!("{input_name}: {e}");
    let mut reader = ArrivalReader::new(std::io::BufReader::with_capacity(1 << 16, file)).map_err(in_err)?;

    let mut out = AtomicFile::create(&args.output)?;
    let mut writer = csv::Writer::from_writer(std::io::BufWriter::with_capacity(1 << 16, out.writer()));
    let mut header = reader.header().clone();
    header.push_field(OUTPUT_COLUMNS[0]);
    if queueing {
        header.push_field(OUTPUT_COLUMNS[1]);
    }
    writer.write_record(&header)?;

    progress.start(input_len, "replay");

    let mut acc = Accounting::default();
    let mut emit = |acc: &mut Accounting, (agg, flow, bytes, mut record): (u32, u32, u32, StringRecord), outcome: Outcome| {
        acc.record(agg, flow, bytes, outcome);
        let (verdict, departure) = match outcome {
            Outcome::Pass { departure } => ("pass", departure),
            Outcome::Drop(_) => ("drop", None),
            Outcome::Held => ("held", None),
        };
        record.push_field(verdict);
        if queueing {
            record.push_field(&departure.map(|d| d.0.to_string()).unwrap_or_default());
        }
        writer.write_record(&record)?;
        Ok(())
    };

    let mut rows: u64 = 0;
    while let Some(next) = reader.next_row() {
        let (row, record) = next.map_err(in_err)?;
        let Row { line, time_ns, aggregate, flow, bytes, class } = row;
        if let Some((n, what)) = limit {
            if class as u64 >= n {
                bail!("{input_name}: line {line}, field 'class': {class} is out of range: {what} allow 0..{n}");
            }
        }
        let agg = acc.aggregate(&aggregate);
        let flow_idx = acc.flow(agg, &flow);
        acc.saw_arrival(time_ns);
        let arrival = Arrival { time: Instant(time_ns), aggregate: agg, flow: flow_key(&flow), bytes, class };
        engine.push(arrival, (agg, flow_idx, bytes, record))?;
        engine.take_decided(|p, o| emit(&mut acc, p, o))?;
        rows += 1;
        if rows % 65_536 == 0 {
            progress.set(reader.bytes_read());
        }
    }
    engine.finish(|p, o| emit(&mut acc, p, o))?;
    progress.finish();
    writer.flush()?;
    drop(writer);

    let summary: Summary = acc.finish(kind);
    let json = serde_json::to_vec_pretty(&summary)?;
    let summary_file = summary_path(&args.output);
    out.commit()?;
    crate::csv_io::write_atomic(&summary_file, &json)?;
    Ok(ReplayReport { summary, summary_file })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An aggregate may send before a lower-numbered one has (the demo's trace does).
    #[test]
    fn aggregates_may_first_appear_in_any_order() {
        let cfg = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = 8000\nburst = 1500").unwrap();
        let mut engine: Engine<u32> = Engine::new(cfg, None).unwrap();
        for (i, agg) in [2u32, 0, 2, 1].into_iter().enumerate() {
            engine.push(Arrival { time: Instant(i as u64), aggregate: agg, flow: 1, bytes: 1000, class: 0 }, agg).unwrap();
        }
        let mut got = Vec::new();
        engine.finish(|agg, o| Ok(got.push((agg, o)))).unwrap();
        let pass = Outcome::Pass { departure: None };
        let drop = Outcome::Drop(ratekit_core::DropReason::Overlimit);
        // Each aggregate has its own 1500-byte bucket: the second 1000-byte packet of aggregate 2 is dropped.
        assert_eq!(got, vec![(2, pass), (0, pass), (2, drop), (1, pass)]);
    }
}
