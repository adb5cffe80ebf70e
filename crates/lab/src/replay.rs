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
use ratekit_core::aggregates::{Aggregates, ConfigFactory};
use ratekit_core::config::Enforcer;
use ratekit_core::{
    AnyPolicer, AnyQueue, DropReason, Dropped, EnforcerConfig, Instant, Packet, Policer, QueueDiscipline, Rate,
};
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

/// What happened to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Passed; `departure` is set for queueing enforcers.
    Pass { departure: Option<Instant> },
    Drop(DropReason),
    /// Still inside a queueing enforcer that would release it no more when the replay ended.
    Held,
}

/// One arrival as the engine sees it; `aggregate` is a dense index (0, 1, ... in order of first
/// appearance).
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

/// Packets not yet handed back, in arrival order; packet ids are positions in this stream.
struct Pending<T> {
    slots: VecDeque<Slot<T>>,
    first_id: u64,
}

impl<T> Pending<T> {
    fn resolve(&mut self, id: u64, outcome: Outcome) {
        let slot = &mut self.slots[(id - self.first_id) as usize];
        debug_assert!(slot.outcome.is_none(), "packet {id} resolved twice");
        slot.outcome = Some(outcome);
    }

    fn resolve_drops(&mut self, drops: &mut Vec<Dropped>) {
        for d in drops.drain(..) {
            self.resolve(d.pkt.id, Outcome::Drop(d.reason));
        }
    }
}

/// A queueing enforcer with the link it feeds.
struct Line<Q> {
    queue: Q,
    link_free_at: Instant,
    /// The wake-up this line is registered for in the event heap (older heap entries are stale).
    scheduled: Option<Instant>,
    /// Wake-ups in a row that released nothing: a guard against a discipline that keeps asking
    /// to be woken without ever releasing its packets.
    idle_wakeups: u32,
}

const MAX_IDLE_WAKEUPS: u32 = 1_000_000;

struct Lines<Q> {
    lines: Vec<Line<Q>>,
    link_rate: Option<Rate>,
    events: BinaryHeap<Reverse<(Instant, u32)>>,
}

impl<Q: QueueDiscipline> Lines<Q> {
    /// Sends what the discipline of line `i` releases at `now` while its link is free, then
    /// registers when it next needs attention.
    fn serve<T>(&mut self, i: u32, now: Instant, pending: &mut Pending<T>, drops: &mut Vec<Dropped>) {
        let line = &mut self.lines[i as usize];
        let mut released = false;
        let next = loop {
            if line.link_free_at > now {
                break Some(line.link_free_at);
            }
            let pkt = line.queue.dequeue(now, drops);
            released |= pkt.is_some() || !drops.is_empty();
            pending.resolve_drops(drops);
            match pkt {
                Some(p) => {
                    let departure = match self.link_rate {
                        Some(r) => now + r.time_to_send(p.len as u64),
                        None => now,
                    };
                    line.link_free_at = departure;
                    pending.resolve(p.id, Outcome::Pass { departure: Some(departure) });
                }
                // A wake-up at or before `now` that released nothing is retried 1 ns later.
                None => break line.queue.next_wakeup().map(|w| w.max(Instant(now.0 + 1))),
            }
        };
        line.idle_wakeups = if released { 0 } else { line.idle_wakeups + 1 };
        line.scheduled = next.filter(|_| line.idle_wakeups < MAX_IDLE_WAKEUPS);
        if let Some(t) = line.scheduled {
            self.events.push(Reverse((t, i)));
        }
    }

    /// Runs every wake-up due at or before `until`, in time order.
    fn run_until<T>(&mut self, until: Instant, pending: &mut Pending<T>, drops: &mut Vec<Dropped>) {
        while let Some(&Reverse((t, i))) = self.events.peek() {
            if t > until {
                break;
            }
            self.events.pop();
            if self.lines[i as usize].scheduled == Some(t) {
                self.serve(i, t, pending, drops);
            }
        }
    }
}

enum Enforcers {
    /// Core's multi-aggregate container, keyed by the dense aggregate index.
    Policers(Aggregates<AnyPolicer, ConfigFactory>),
    Queues(Lines<AnyQueue>),
}

/// Drives one enforcer per aggregate over a time-ordered arrival stream and hands back each
/// packet's outcome in arrival order, as soon as it and every earlier packet are decided.
pub struct Engine<T> {
    config: EnforcerConfig,
    enforcers: Enforcers,
    pending: Pending<T>,
    drops: Vec<Dropped>,
}

impl<T> Engine<T> {
    /// Builds the engine; fails now (before any input is read) if the config cannot build an
    /// enforcer, e.g. a queueing kind that needs `link_rate` without one.
    pub fn new(config: EnforcerConfig, link_rate: Option<Rate>) -> anyhow::Result<Self> {
        let enforcers = match build(&config, link_rate)? {
            Enforcer::Policer(_) => Enforcers::Policers(Aggregates::new(ConfigFactory::new(config.clone())?)),
            Enforcer::Queue(q) => Enforcers::Queues(Lines {
                lines: vec![Line::new(q)],
                link_rate,
                events: BinaryHeap::new(),
            }),
        };
        Ok(Engine { config, enforcers, pending: Pending { slots: VecDeque::new(), first_id: 0 }, drops: Vec::new() })
    }

    pub fn is_queueing(&self) -> bool {
        matches!(self.enforcers, Enforcers::Queues(_))
    }

    /// Feeds one arrival; arrivals must come in time order with aggregates numbered densely.
    pub fn push(&mut self, a: Arrival, payload: T) -> anyhow::Result<()> {
        let id = self.pending.first_id + self.pending.slots.len() as u64;
        self.pending.slots.push_back(Slot { payload, outcome: None });
        let pkt = Packet { id, len: a.bytes, flow: a.flow, class: a.class, aggregate: a.aggregate as u64 };
        let agg = a.aggregate as usize;
        match &mut self.enforcers {
            Enforcers::Policers(ps) => {
                let outcome = match ps.on_arrival(a.time, &pkt) {
                    ratekit_core::Verdict::Pass => Outcome::Pass { departure: None },
                    ratekit_core::Verdict::Drop(r) => Outcome::Drop(r),
                };
                self.pending.resolve(id, outcome);
            }
            Enforcers::Queues(lines) => {
                lines.run_until(a.time, &mut self.pending, &mut self.drops);
                if agg == lines.lines.len() {
                    match build(&self.config, lines.link_rate)? {
                        Enforcer::Queue(q) => lines.lines.push(Line::new(q)),
                        Enforcer::Policer(_) => unreachable!("a config builds one shape"),
                    }
                }
                lines.lines[agg].queue.enqueue(a.time, pkt, &mut self.drops);
                self.pending.resolve_drops(&mut self.drops);
                lines.serve(a.aggregate, a.time, &mut self.pending, &mut self.drops);
            }
        }
        Ok(())
    }

    /// Hands every decided packet at the front of the stream to `f`, in arrival order.
    pub fn take_decided(&mut self, mut f: impl FnMut(T, Outcome) -> anyhow::Result<()>) -> anyhow::Result<()> {
        while let Some(Slot { outcome: Some(_), .. }) = self.pending.slots.front() {
            let slot = self.pending.slots.pop_front().expect("front exists");
            self.pending.first_id += 1;
            f(slot.payload, slot.outcome.expect("checked"))?;
        }
        Ok(())
    }

    /// Runs the queueing enforcers until they are empty (or stop releasing), then hands back
    /// everything that remains; packets never released are `Held`.
    pub fn finish(mut self, mut f: impl FnMut(T, Outcome) -> anyhow::Result<()>) -> anyhow::Result<()> {
        if let Enforcers::Queues(lines) = &mut self.enforcers {
            lines.run_until(Instant(u64::MAX), &mut self.pending, &mut self.drops);
        }
        for slot in self.pending.slots.drain(..) {
            f(slot.payload, slot.outcome.unwrap_or(Outcome::Held))?;
        }
        Ok(())
    }
}

impl<Q> Line<Q> {
    fn new(queue: Q) -> Self {
        Line { queue, link_free_at: Instant::ZERO, scheduled: None, idle_wakeups: 0 }
    }
}

fn build(config: &EnforcerConfig, link_rate: Option<Rate>) -> anyhow::Result<Enforcer> {
    config.build(link_rate).map_err(|e| {
        if e.field == "link_rate" {
            anyhow::anyhow!("--link-rate {}: a '{}' enforcer needs the rate of the link it feeds", e.message, config.kind())
        } else {
            anyhow::anyhow!("{e}")
        }
    })
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

    /// A drop-tail FIFO of `cap` packets that releases its head whenever asked.
    struct Fifo(VecDeque<Packet>, usize);
    /// Releases each packet exactly `hold` after its arrival, asking to be woken then.
    struct Hold(VecDeque<(Instant, Packet)>, u64);

    impl QueueDiscipline for Fifo {
        fn enqueue(&mut self, _: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
            if self.0.len() == self.1 {
                drops.push(Dropped { pkt, reason: DropReason::QueueFull });
            } else {
                self.0.push_back(pkt);
            }
        }
        fn dequeue(&mut self, _: Instant, _: &mut Vec<Dropped>) -> Option<Packet> {
            self.0.pop_front()
        }
        fn next_wakeup(&self) -> Option<Instant> {
            None
        }
        fn backlog_bytes(&self) -> u64 {
            self.0.iter().map(|p| p.len as u64).sum()
        }
    }

    impl QueueDiscipline for Hold {
        fn enqueue(&mut self, now: Instant, pkt: Packet, _: &mut Vec<Dropped>) {
            self.0.push_back((Instant(now.0 + self.1), pkt));
        }
        fn dequeue(&mut self, now: Instant, _: &mut Vec<Dropped>) -> Option<Packet> {
            match self.0.front() {
                Some(&(due, _)) if due <= now => self.0.pop_front().map(|(_, p)| p),
                _ => None,
            }
        }
        fn next_wakeup(&self) -> Option<Instant> {
            self.0.front().map(|&(due, _)| due)
        }
        fn backlog_bytes(&self) -> u64 {
            0
        }
    }

    /// Drives `lines` the way `Engine::push` and `finish` do, returning each packet's outcome.
    fn drive<Q: QueueDiscipline>(mut lines: Lines<Q>, arrivals: &[(u64, u32, u32)]) -> Vec<Option<Outcome>> {
        let mut pending = Pending { slots: VecDeque::new(), first_id: 0 };
        let mut drops = Vec::new();
        for (id, &(t, agg, len)) in arrivals.iter().enumerate() {
            pending.slots.push_back(Slot { payload: (), outcome: None });
            lines.run_until(Instant(t), &mut pending, &mut drops);
            let pkt = Packet { id: id as u64, len, ..Packet::default() };
            lines.lines[agg as usize].queue.enqueue(Instant(t), pkt, &mut drops);
            pending.resolve_drops(&mut drops);
            lines.serve(agg, Instant(t), &mut pending, &mut drops);
        }
        lines.run_until(Instant(u64::MAX), &mut pending, &mut drops);
        pending.slots.iter().map(|s| s.outcome).collect()
    }

    fn pass(ns: u64) -> Option<Outcome> {
        Some(Outcome::Pass { departure: Some(Instant(ns)) })
    }

    #[test]
    fn link_serialises_packets_and_a_full_queue_drops() {
        // 1000 B/s link: a 100-byte packet occupies it for 100 ms.
        let lines = Lines {
            lines: vec![Line::new(Fifo(VecDeque::new(), 1)), Line::new(Fifo(VecDeque::new(), 1))],
            link_rate: Some(Rate(1000)),
            events: BinaryHeap::new(),
        };
        let ms = 1_000_000;
        let got = drive(lines, &[(0, 0, 100), (0, 0, 100), (0, 0, 100), (10 * ms, 1, 50), (150 * ms, 0, 100)]);
        assert_eq!(
            got,
            vec![
                pass(100 * ms),
                pass(200 * ms),
                Some(Outcome::Drop(DropReason::QueueFull)),
                pass(60 * ms), // aggregate 1 has a link of its own
                pass(300 * ms),
            ]
        );
    }

    #[test]
    fn wakeups_release_held_packets_without_further_arrivals() {
        let lines = Lines { lines: vec![Line::new(Hold(VecDeque::new(), 5_000))], link_rate: None, events: BinaryHeap::new() };
        let got = drive(lines, &[(0, 0, 100), (1_000, 0, 100), (20_000, 0, 100)]);
        assert_eq!(got, vec![pass(5_000), pass(6_000), pass(25_000)]);
    }
}
