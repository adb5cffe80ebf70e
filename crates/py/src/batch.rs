//! Arrays of arrivals through `ratekit replay`'s engine: the same enforcers, aggregates numbered
//! in order of first appearance and the same input checks, so a DataFrame replayed here gets the
//! verdicts the CLI writes for the same rows.

use crate::csv_io::MAX_PACKET_BYTES;
use crate::replay::{class_limit, Arrival, Engine, Outcome};
use anyhow::{bail, Context};
use ratekit_core::{EnforcerConfig, Instant};
use std::collections::HashMap;

pub const PASS: u8 = 0;
pub const DROP: u8 = 1;
pub const HELD: u8 = 2;

pub struct Input<'a> {
    pub time_ns: &'a [u64],
    pub aggregate: &'a [u64],
    /// Flow keys: the flow number itself, or `flow_keys` of the flow's text.
    pub flow: &'a [u64],
    pub bytes: &'a [u32],
    pub class: Option<&'a [u16]>,
}

pub struct Output {
    pub verdict: Vec<u8>,
    /// When the packet's last bit left (queueing enforcers); -1 for none.
    pub departure_ns: Vec<i64>,
    pub queueing: bool,
}

pub fn run(config_text: &str, link_rate: Option<&str>, input: &Input) -> anyhow::Result<Output> {
    let n = input.time_ns.len();
    let lens = [input.aggregate.len(), input.flow.len(), input.bytes.len(), input.class.map_or(n, |c| c.len())];
    if lens.iter().any(|&l| l != n) {
        bail!("time_ns, aggregate, flow, bytes and class must have the same length");
    }
    let config = EnforcerConfig::from_toml(config_text).map_err(|e| anyhow::anyhow!("config: {e}"))?;
    let link_rate = link_rate.map(ratekit_core::units::parse_rate).transpose().context("link_rate")?;
    let limit = class_limit(config_text);
    let mut engine: Engine<usize> = Engine::new(config, link_rate)?;
    let mut out = Output { verdict: vec![HELD; n], departure_ns: vec![-1; n], queueing: engine.is_queueing() };
    let mut dense: HashMap<u64, u32> = HashMap::new();
    let mut record = |i: usize, o: Outcome| -> anyhow::Result<()> {
        match o {
            Outcome::Pass { departure } => {
                out.verdict[i] = PASS;
                out.departure_ns[i] = departure.map_or(-1, |d| d.0 as i64);
            }
            Outcome::Drop(_) => out.verdict[i] = DROP,
            Outcome::Held => out.verdict[i] = HELD,
        }
        Ok(())
    };
    let mut last = 0u64;
    for i in 0..n {
        let (time, bytes) = (input.time_ns[i], input.bytes[i]);
        let class = input.class.map_or(0, |c| c[i]);
        if time < last {
            bail!("row {i}, field 'time_ns': {time} is earlier than the previous row's {last}: rows must be sorted by time");
        }
        last = time;
        if !(1..=MAX_PACKET_BYTES).contains(&bytes) {
            bail!("row {i}, field 'bytes': {bytes} is not a packet length in 1..={MAX_PACKET_BYTES}");
        }
        if let Some((limit, what)) = limit {
            if class as u64 >= limit {
                bail!("row {i}, field 'class': {class} is out of range: {what} allow 0..{limit}");
            }
        }
        let next = dense.len() as u32;
        let agg = *dense.entry(input.aggregate[i]).or_insert(next);
        engine.push(Arrival { time: Instant(time), aggregate: agg, flow: input.flow[i], bytes, class }, i)?;
        engine.take_decided(&mut record)?;
    }
    engine.finish(&mut record)?;
    Ok(out)
}
