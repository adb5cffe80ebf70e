//! The testbed scenario: the same tables as a `ratekit sim` scenario (name, duration, seed,
//! measure, enforcer, aggregates[].flows[] with cc, rtt, count, start, app) plus a `[testbed]`
//! table saying where the enforcer runs. Simulator-only keys (link_rate, buffer, host_rate,
//! secondary, pick, start_jitter) are accepted and ignored, so a sim scenario runs here as is.

use ratekit_core::{Bytes, Duration, EnforcerConfig, Rate};
// The measurement table means the same in the testbed as in the simulator.
pub use ratekit_sim::scenario::Measure;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct ScenarioError {
    pub file: String,
    pub field: String,
    pub message: String,
}

/// Where the enforcer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Inside the userspace middlebox (any core enforcer).
    #[default]
    Middlebox,
    /// The tc-BPF program on the middlebox's egress towards the receiver.
    Tc,
    /// The kernel's tbf with a one-MTU queue, as a policer (enforcer: token_bucket).
    Tbf,
    /// The kernel's htb class with a bfifo queue, as a shaper (enforcer: fifo).
    Htb,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestbedTable {
    #[serde(default)]
    pub enforcer_at: Placement,
    /// Capture a pcap of the first `pcap_snaplen` bytes of each packet at the sender.
    #[serde(default)]
    pub pcap: bool,
    #[serde(default = "default_snaplen")]
    pub pcap_snaplen: u32,
}

impl Default for TestbedTable {
    fn default() -> Self {
        TestbedTable { enforcer_at: Placement::Middlebox, pcap: false, pcap_snaplen: default_snaplen() }
    }
}

fn default_snaplen() -> u32 {
    128
}

#[derive(Debug, Clone, Deserialize)]
pub struct Scenario {
    #[serde(default)]
    pub name: String,
    pub duration: Duration,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub measure: Measure,
    #[serde(default)]
    pub enforcer: Option<toml::Value>,
    pub aggregates: Vec<Aggregate>,
    #[serde(default)]
    pub testbed: TestbedTable,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Aggregate {
    #[serde(default)]
    pub rate: Option<Rate>,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub enforcer: Option<toml::Value>,
    /// Bernoulli loss before the enforcer (the middlebox applies it).
    #[serde(default)]
    pub loss: f64,
    pub flows: Vec<FlowTable>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    fn pick(&self, i: usize) -> Option<T> {
        match self {
            OneOrMany::One(v) => Some(v.clone()),
            OneOrMany::Many(v) if v.is_empty() => None,
            OneOrMany::Many(v) => Some(v[i % v.len()].clone()),
        }
    }
}

/// Linux congestion controls available to the generator (TCP_CONGESTION names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cc {
    Cubic,
    Reno,
    #[serde(alias = "newreno")]
    NewReno,
    Bbr,
    Vegas,
}

impl Cc {
    /// The kernel's name; NewReno is Linux's "reno".
    pub fn linux_name(self) -> &'static str {
        match self {
            Cc::Cubic => "cubic",
            Cc::Reno | Cc::NewReno => "reno",
            Cc::Bbr => "bbr",
            Cc::Vegas => "vegas",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct FlowTable {
    #[serde(default = "default_cc")]
    pub cc: OneOrMany<Cc>,
    pub rtt: OneOrMany<Duration>,
    #[serde(default)]
    pub start: Duration,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub app: App,
    /// Explicit class for class-based enforcers, carried as the DSCP (so 0..=63).
    #[serde(default)]
    pub class: u16,
}

fn default_cc() -> OneOrMany<Cc> {
    OneOrMany::One(Cc::Cubic)
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum App {
    #[default]
    Backlogged,
    Finite { size: Bytes },
    OnOff {
        mean_size: Bytes,
        mean_gap: Duration,
    },
    Cbr {
        rate: Rate,
        #[serde(default = "default_datagram")]
        packet: Bytes,
    },
}

fn default_datagram() -> Bytes {
    Bytes(1400)
}

impl App {
    pub fn is_udp(&self) -> bool {
        matches!(self, App::Cbr { .. })
    }
}

/// One flow, resolved.
#[derive(Debug, Clone)]
pub struct Flow {
    pub id: u32,
    pub aggregate: u32,
    pub cc: Cc,
    pub rtt: Duration,
    pub start: Duration,
    pub app: App,
    pub class: u8,
}

pub struct ResolvedAggregate {
    pub id: u32,
    pub rate: Rate,
    pub enforcer: EnforcerConfig,
    pub loss: f64,
}

pub struct Resolved {
    pub scenario: Scenario,
    pub aggregates: Vec<ResolvedAggregate>,
    pub flows: Vec<Flow>,
    /// The one RTT the middlebox emulates (every flow must ask for it).
    pub rtt: Duration,
}

pub fn load(path: &std::path::Path) -> Result<Resolved, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScenarioError { file: file.clone(), field: "(file)".into(), message: e.to_string() })?;
    parse(&text, &file)
}

pub fn parse(text: &str, file: &str) -> Result<Resolved, ScenarioError> {
    let err = |field: &str, message: String| ScenarioError { file: file.into(), field: field.into(), message };
    let sc: Scenario = toml::from_str(text).map_err(|e| err("(scenario)", e.message().to_string()))?;
    if sc.duration.0 == 0 || sc.duration > Duration::from_secs(3600) {
        return Err(err("duration", "must be between 0 and 1 hour".into()));
    }
    if sc.measure.window.0 < 10_000_000 {
        return Err(err("measure.window", "must be at least 10ms".into()));
    }
    if sc.measure.warmup >= sc.duration {
        return Err(err("measure.warmup", "must be shorter than the duration".into()));
    }
    if sc.aggregates.is_empty() {
        return Err(err("aggregates", "at least one aggregate is needed".into()));
    }
    let mut aggregates = Vec::new();
    let mut flows = Vec::new();
    let mut rtt = None;
    for (ai, a) in sc.aggregates.iter().enumerate() {
        let raw = a.enforcer.as_ref().or(sc.enforcer.as_ref()).ok_or_else(|| {
            err(&format!("aggregates[{ai}].enforcer"), "no enforcer: give the aggregate one or set a top-level [enforcer]".into())
        })?;
        let enforcer = EnforcerConfig::deserialize(raw.clone())
            .map_err(|e| err(&format!("aggregates[{ai}].enforcer"), e.to_string()))?;
        enforcer.validate().map_err(|e| err(&format!("aggregates[{ai}].enforcer.{}", e.field), e.message))?;
        let rate = a.rate.or_else(|| enforcer_rate(raw)).ok_or_else(|| {
            err(&format!("aggregates[{ai}].rate"), "needed: the enforcer table has no rate to default to".into())
        })?;
        if !(0.0..=1.0).contains(&a.loss) {
            return Err(err(&format!("aggregates[{ai}].loss"), "must be a probability in [0, 1]".into()));
        }
        for _ in 0..a.count {
            let id = aggregates.len() as u32;
            aggregates.push(ResolvedAggregate { id, rate, enforcer: enforcer.clone(), loss: a.loss });
            let mut index_in_agg = 0usize;
            for (fi, f) in a.flows.iter().enumerate() {
                for _ in 0..f.count {
                    let field = |k: &str| format!("aggregates[{ai}].flows[{fi}].{k}");
                    let cc = f.cc.pick(index_in_agg).ok_or_else(|| err(&field("cc"), "empty list".into()))?;
                    let r = f.rtt.pick(index_in_agg).ok_or_else(|| err(&field("rtt"), "empty list".into()))?;
                    match rtt {
                        None => rtt = Some(r),
                        Some(x) if x != r => {
                            return Err(err(&field("rtt"), "the testbed emulates one RTT for all flows (the middlebox's delay)".into()))
                        }
                        _ => {}
                    }
                    if f.class > 63 {
                        return Err(err(&field("class"), "the testbed carries the class as the DSCP: 0..=63".into()));
                    }
                    let class = f.class as u8;
                    flows.push(Flow { id: flows.len() as u32, aggregate: id, cc, rtt: r, start: f.start, app: f.app.clone(), class });
                    index_in_agg += 1;
                }
            }
        }
    }
    if aggregates.len() > 200 {
        return Err(err("aggregates", "the testbed gives each aggregate a receiver address: at most 200".into()));
    }
    if flows.is_empty() {
        return Err(err("aggregates.flows", "no flows".into()));
    }
    if matches!(sc.testbed.enforcer_at, Placement::Tbf | Placement::Htb) && aggregates.len() != 1 {
        return Err(err("testbed.enforcer_at", "the kernel tbf / htb baselines police one aggregate".into()));
    }
    let want = match sc.testbed.enforcer_at {
        Placement::Tbf => Some("token_bucket"),
        Placement::Htb => Some("fifo"),
        Placement::Tc => None,
        Placement::Middlebox => None,
    };
    for a in &aggregates {
        if let Some(kind) = want {
            if a.enforcer.kind() != kind {
                return Err(err("enforcer.kind", format!("enforcer_at = {:?} needs kind = \"{kind}\"", sc.testbed.enforcer_at)));
            }
        }
        if sc.testbed.enforcer_at == Placement::Tc {
            crate::bpf::BpfParams::from_config(&a.enforcer).map_err(|e| err("enforcer.kind", e.to_string()))?;
        }
    }
    let rtt = rtt.unwrap();
    Ok(Resolved { scenario: sc, aggregates, flows, rtt })
}

fn enforcer_rate(raw: &toml::Value) -> Option<Rate> {
    let v = raw.get("rate")?.clone();
    Rate::deserialize(v).ok()
}
