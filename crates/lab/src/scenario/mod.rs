//! The scenario file: aggregates, their flows, the enforcer (the same TOML table as
//! `ratekit replay` reads), links and the measurement. Everything is validated before a run,
//! and every error names the file and the field.

mod app;
mod cc;
mod error;
pub mod seeding;
mod testbed;

pub use app::{AppConfig, Dist};
pub use cc::CcKind;
pub use error::ScenarioError;
pub use testbed::{Placement, TestbedTable};
use error::toml_error;

use ratekit_core::{Bytes, Duration, EnforcerConfig, Rate};
use serde::Deserialize;
use std::path::Path;

/// One value or a list; with a list, flow i takes element i mod len (see `Pick`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    pub fn pick(&self, i: usize) -> Option<T> {
        match self {
            OneOrMany::One(v) => Some(v.clone()),
            OneOrMany::Many(v) if v.is_empty() => None,
            OneOrMany::Many(v) => Some(v[i % v.len()].clone()),
        }
    }
    fn is_empty(&self) -> bool {
        matches!(self, OneOrMany::Many(v) if v.is_empty())
    }
    /// Every value a flow may pick.
    pub fn as_slice(&self) -> &[T] {
        match self {
            OneOrMany::One(v) => std::slice::from_ref(v),
            OneOrMany::Many(v) => v,
        }
    }
}

/// Which index selects from `cc`/`rtt` lists: the flow's index within its aggregate (mixed
/// aggregates) or the aggregate's copy index (homogeneous aggregates, each with another CC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pick {
    #[default]
    Flow,
    Aggregate,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub name: String,
    pub duration: Duration,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub measure: Measure,
    /// Default enforcer for every aggregate without its own.
    #[serde(default)]
    pub enforcer: Option<toml::Value>,
    pub aggregates: Vec<AggregateConfig>,
    /// Sweep form: handled before deserialisation (see sweep.rs); ignored here.
    #[serde(default)]
    pub sweep: Option<toml::Value>,
    /// Where `ratekit testbed run` puts the enforcer; the simulator ignores it, so one file
    /// describes the same experiment for both.
    #[serde(default)]
    pub testbed: TestbedTable,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measure {
    /// Time-series window (000 §6.1: 250 ms).
    #[serde(default = "default_window")]
    pub window: Duration,
    /// Windows that end before this are left out of summary.json's statistics.
    #[serde(default)]
    pub warmup: Duration,
}

impl Default for Measure {
    fn default() -> Self {
        Measure { window: default_window(), warmup: Duration::ZERO }
    }
}

fn default_window() -> Duration {
    Duration::from_millis(250)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregateConfig {
    /// A name for flows of other aggregates to cross this one's enforcer and link (`via`);
    /// only an aggregate with `count = 1` can be named there.
    #[serde(default)]
    pub name: Option<String>,
    /// The rate the aggregate is entitled to (normalises its throughput). Default: the
    /// enforcer table's `rate`.
    #[serde(default)]
    pub rate: Option<Rate>,
    /// Identical copies of this aggregate (the 100-aggregate mixes).
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub enforcer: Option<toml::Value>,
    /// The link behind the enforcement point; a queueing enforcer is this link's queue.
    #[serde(default = "default_link_rate")]
    pub link_rate: Rate,
    /// Changes of that link's rate during the run, in time order (004 Figs. 6-8 throttle the
    /// bottleneck to a quarter and back): from `at` on the link runs at `rate`.
    #[serde(default)]
    pub link_steps: Vec<LinkStep>,
    /// Drop-tail buffer of that link when the enforcer is a policer. Default: 1 MB.
    #[serde(default = "default_buffer")]
    pub buffer: Bytes,
    /// Senders' NIC rate: unpaced flows burst at this rate.
    #[serde(default = "default_link_rate")]
    pub host_rate: Rate,
    /// Random (Bernoulli) loss of data packets before the enforcement point.
    #[serde(default)]
    pub loss: f64,
    #[serde(default)]
    pub secondary: Option<LinkConfig>,
    pub flows: Vec<FlowConfig>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkStep {
    pub at: Duration,
    pub rate: Rate,
}

impl AggregateConfig {
    /// The rate of the aggregate's link at `t_ns`.
    pub fn link_rate_at(&self, t_ns: u64) -> Rate {
        self.link_steps.iter().take_while(|s| s.at.0 <= t_ns).last().map_or(self.link_rate, |s| s.rate)
    }

    /// Bytes the link can carry from `from_ns` to `to_ns`, its steps included.
    pub fn link_capacity_bytes(&self, from_ns: u64, to_ns: u64) -> f64 {
        let mut edges: Vec<u64> = self.link_steps.iter().map(|s| s.at.0).filter(|&t| t > from_ns && t < to_ns).collect();
        edges.insert(0, from_ns);
        edges.push(to_ns);
        edges.windows(2).map(|w| self.link_rate_at(w[0]).bytes_per_sec() as f64 * (w[1] - w[0]) as f64 * 1e-9).sum()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    pub rate: Rate,
    #[serde(default = "default_buffer")]
    pub buffer: Bytes,
}

fn default_kernel_hz() -> u32 {
    250
}

/// A sleeping reader's wake-up: behind a policer in the testbed, Linux acknowledged a 4-12 segment
/// burst (sent within 10-30 µs) about 40 µs later than it acknowledged a lone segment in quick-ack
/// mode (docs/simulator.md, "Model").
pub const DEFAULT_RECEIVER_WAKEUP: Duration = Duration(50_000);

fn default_receiver_wakeup() -> Duration {
    DEFAULT_RECEIVER_WAKEUP
}

/// An ACK's extra delay beyond the flow's fastest, in sender captures of the testbed behind a
/// policer (Linux 6.18, four runs): 10th-90th percentiles 50-85 µs to 195-305 µs, median 90-170 µs,
/// which a uniform draw below 250 µs spans (median 125, 90th percentile 225).
pub const DEFAULT_ACK_JITTER: Duration = Duration(250_000);

fn default_ack_jitter() -> Duration {
    DEFAULT_ACK_JITTER
}

/// How much of the ACK-path noise drifts slowly rather than changing from one ACK to the next. In
/// the testbed's sender captures (Linux 6.18, seven cases behind policers and BC-PQP) two
/// ACK-clocked bursts of a flow 20-150 ms apart come back with loop delays a median 29-69 µs apart
/// (`scripts/capture-timing.py`, `loop_drift_us`, median over flows), bursts 0.5-8 s apart
/// 26-106 µs: nearby ACKs share part of their delay. A noise drawn afresh for every ACK reads
/// 73-80 µs at both distances on the same cases and seeds; half of it drifting, with
/// `DEFAULT_ACK_JITTER_MEMORY`, reads 38-48 µs near and 48-53 µs far.
pub const DEFAULT_ACK_JITTER_SLOW: f64 = 0.5;

fn default_ack_jitter_slow() -> f64 {
    DEFAULT_ACK_JITTER_SLOW
}

/// The drifting part's memory: in the same captures the loop delays' differences grow with the
/// bursts' distance up to about half a second to two seconds, and no further.
pub const DEFAULT_ACK_JITTER_MEMORY: Duration = Duration(1_000_000_000);

fn default_ack_jitter_memory() -> Duration {
    DEFAULT_ACK_JITTER_MEMORY
}

fn one() -> u32 {
    1
}
fn default_link_rate() -> Rate {
    Rate::from_bits_per_sec(1_000_000_000)
}
fn default_buffer() -> Bytes {
    Bytes(1_000_000)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    #[serde(default = "default_cc")]
    pub cc: OneOrMany<CcKind>,
    pub rtt: OneOrMany<Duration>,
    #[serde(default)]
    pub start: Duration,
    /// Random extra start delay, uniform in [0, jitter), so copies do not start in lockstep.
    #[serde(default)]
    pub start_jitter: Duration,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub pick: Pick,
    #[serde(default = "default_app")]
    pub app: AppConfig,
    /// Explicit class for class-based enforcers (weighted / priority queues, DSCD's ABE = 1).
    #[serde(default)]
    pub class: u16,
    /// When the application stops offering new data (the flow still finishes what it sent).
    #[serde(default)]
    pub stop: Option<Duration>,
    /// Linux fq-style pacing for TCP (BBR always paces); ignored by UDP sources.
    #[serde(default)]
    pub pacing: bool,
    /// CONFIG_HZ of the hosts' kernels: TCP's retransmission, loss-probe and delayed-ACK timers
    /// fire on its ticks (250: Ubuntu's generic kernels and the testbed's; RHEL's are 1000).
    /// The testbed's flows run on the machine's own kernel whatever this says.
    #[serde(default = "default_kernel_hz")]
    pub kernel_hz: u32,
    /// How long the receiving application takes to wake and read after data arrive: Linux's
    /// receiver acknowledges a burst that arrives within it once, at the read (50 µs, from the
    /// testbed's captures; 0 acknowledges every second segment as it arrives). The testbed's
    /// receivers are real applications, so it refuses any other value.
    #[serde(default = "default_receiver_wakeup")]
    pub receiver_wakeup: Duration,
    /// The hosts' timing noise on the ACK path: each ACK waits a further uniform random time below
    /// this, never overtaking the one before (250 µs: the spread of ACK delays in the testbed's
    /// captures; 0: a path without noise, on which flows of one RTT lock in phase). The testbed's
    /// noise is its machine's, so it refuses any other value.
    #[serde(default = "default_ack_jitter")]
    pub ack_jitter: Duration,
    /// The share of `ack_jitter` that drifts slowly, shared by nearby ACKs (0.5, from the
    /// testbed's captures; 0: every ACK draws its noise afresh). Same testbed rule.
    #[serde(default = "default_ack_jitter_slow")]
    pub ack_jitter_slow: f64,
    /// How long the drifting part takes to forget its value (1 s, from the same captures).
    #[serde(default = "default_ack_jitter_memory")]
    pub ack_jitter_memory: Duration,
    /// The customer the enforcers see (`Packet::aggregate`, CPQ's classifier key), so that
    /// several customers share one aggregate's queue. Default: the flow's aggregate id.
    #[serde(default)]
    pub customer: Option<u32>,
    /// Named aggregates whose enforcer and link the flow crosses after its own, in order
    /// (bottlenecks in series; its propagation delay stays one pipe after the last hop).
    #[serde(default)]
    pub via: Vec<String>,
}

fn default_cc() -> OneOrMany<CcKind> {
    OneOrMany::One(CcKind::Cubic)
}
fn default_app() -> AppConfig {
    AppConfig::Backlogged
}

/// A scenario with every list and default resolved: what the world is built from.
pub struct Resolved {
    pub scenario: Scenario,
    pub aggregates: Vec<ResolvedAggregate>,
}

pub struct ResolvedAggregate {
    pub id: u32,
    pub rate: Rate,
    pub enforcer: EnforcerConfig,
    pub cfg: AggregateConfig,
    pub flows: Vec<ResolvedFlow>,
}

pub struct ResolvedFlow {
    pub cc: CcKind,
    pub rtt: Duration,
    pub start: Duration,
    pub start_jitter: Duration,
    pub app: AppConfig,
    pub class: u16,
    pub stop: Option<Duration>,
    pub pacing: bool,
    pub kernel_hz: u32,
    pub receiver_wakeup: Duration,
    pub ack_jitter: Duration,
    pub ack_jitter_slow: f64,
    pub ack_jitter_memory: Duration,
    pub customer: Option<u32>,
    /// Resolved aggregate ids of `via`.
    pub via: Vec<u32>,
}

/// Reads and validates a scenario file.
pub fn load(path: &Path) -> Result<Resolved, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScenarioError { file: file.clone(), field: "(file)".into(), message: e.to_string() })?;
    parse(&text, &file)
}

/// Parses and validates scenario text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Resolved, ScenarioError> {
    let sc: Scenario = toml::from_str(text).map_err(|e| toml_error(text, file, e))?;
    // The enforcer tables are kept as raw values in `Scenario`; type them here too so that
    // their errors carry a position (and so a field name).
    toml::from_str::<TypedEnforcers>(text).map_err(|e| toml_error(text, file, e))?;
    resolve(sc, file)
}

#[derive(Deserialize)]
struct TypedEnforcers {
    #[serde(default)]
    #[allow(dead_code)]
    enforcer: Option<EnforcerConfig>,
    #[serde(default)]
    #[allow(dead_code)]
    aggregates: Vec<TypedAggregate>,
}

#[derive(Deserialize)]
struct TypedAggregate {
    #[serde(default)]
    #[allow(dead_code)]
    enforcer: Option<EnforcerConfig>,
}

/// Validates a scenario given as a TOML value (one point of a sweep).
pub fn from_value(value: toml::Value, file: &str) -> Result<Resolved, ScenarioError> {
    let sc = Scenario::deserialize(value)
        .map_err(|e| ScenarioError { file: file.into(), field: "(scenario)".into(), message: e.to_string() })?;
    resolve(sc, file)
}

fn resolve(sc: Scenario, file: &str) -> Result<Resolved, ScenarioError> {
    let err = |field: String, message: String| ScenarioError { file: file.into(), field, message };

    if sc.duration.0 == 0 {
        return Err(err("duration".into(), "must be greater than zero".into()));
    }
    if sc.measure.window.0 == 0 {
        return Err(err("measure.window".into(), "must be greater than zero".into()));
    }
    if sc.measure.warmup >= sc.duration {
        return Err(err("measure.warmup".into(), "must be shorter than the duration".into()));
    }
    if sc.aggregates.is_empty() {
        return Err(err("aggregates".into(), "at least one aggregate is needed".into()));
    }
    // Resolved id of each named aggregate (copies are numbered in file order).
    let mut named: std::collections::HashMap<&str, (u32, u32)> = std::collections::HashMap::new();
    let mut next_id = 0u32;
    for (ai, a) in sc.aggregates.iter().enumerate() {
        if let Some(n) = &a.name {
            if named.insert(n.as_str(), (next_id, a.count)).is_some() {
                return Err(err(format!("aggregates[{ai}].name"), format!("'{n}' names two aggregates")));
            }
        }
        next_id = next_id.saturating_add(a.count);
    }
    let mut out = Vec::new();
    for (ai, a) in sc.aggregates.iter().enumerate() {
        let f = |name: &str| format!("aggregates[{ai}].{name}");
        let raw = a.enforcer.as_ref().or(sc.enforcer.as_ref()).ok_or_else(|| {
            err(f("enforcer"), "no enforcer: give the aggregate an [enforcer] table or set a top-level one".into())
        })?;
        let enforcer = EnforcerConfig::deserialize(raw.clone())
            .map_err(|e| err(f("enforcer"), e.message().trim().to_string()))?;
        enforcer.validate().map_err(|e| err(f(&format!("enforcer.{}", e.field)), e.message))?;
        let rate = match a.rate {
            Some(r) => r,
            None => raw
                .get("rate")
                .and_then(|v| Rate::deserialize(v.clone()).ok())
                .ok_or_else(|| err(f("rate"), "missing: the aggregate's rate (the enforcer has no `rate` to default to)".into()))?,
        };
        if a.count == 0 {
            return Err(err(f("count"), "must be at least 1".into()));
        }
        if !(0.0..1.0).contains(&a.loss) {
            return Err(err(f("loss"), "must be in [0, 1)".into()));
        }
        if a.buffer.0 < 1500 {
            return Err(err(f("buffer"), "must hold at least one 1500-byte packet".into()));
        }
        for (si, step) in a.link_steps.iter().enumerate() {
            let fs = |name: &str| f(&format!("link_steps[{si}].{name}"));
            if step.at >= sc.duration {
                return Err(err(fs("at"), "is not before the run ends".into()));
            }
            if si > 0 && step.at <= a.link_steps[si - 1].at {
                return Err(err(fs("at"), "must be later than the step before it".into()));
            }
        }
        if let Some(s) = &a.secondary {
            if s.buffer.0 < 1500 {
                return Err(err(f("secondary.buffer"), "must hold at least one 1500-byte packet".into()));
            }
        }
        if a.flows.is_empty() {
            return Err(err(f("flows"), "an aggregate needs at least one flow".into()));
        }
        // Build one enforcer to catch link-rate dependent errors now rather than mid-run.
        let link_rate = Some(a.link_rate);
        enforcer.build(link_rate).map_err(|e| err(f(&format!("enforcer.{}", e.field)), e.message))?;
        for copy in 0..a.count {
            let mut flows = Vec::new();
            for (fi, fc) in a.flows.iter().enumerate() {
                let ff = |name: &str| format!("aggregates[{ai}].flows[{fi}].{name}");
                if fc.count == 0 {
                    return Err(err(ff("count"), "must be at least 1".into()));
                }
                if fc.cc.is_empty() {
                    return Err(err(ff("cc"), "empty list".into()));
                }
                if fc.rtt.is_empty() {
                    return Err(err(ff("rtt"), "empty list".into()));
                }
                if fc.start >= sc.duration {
                    return Err(err(ff("start"), "starts after the run ends".into()));
                }
                if fc.stop.is_some_and(|s| s.0 <= fc.start.0 + fc.start_jitter.0) {
                    return Err(err(ff("stop"), "must be later than start + start_jitter".into()));
                }
                if ![100, 250, 300, 1000].contains(&fc.kernel_hz) {
                    return Err(err(ff("kernel_hz"), format!("{} is not a CONFIG_HZ Linux offers (100, 250, 300 or 1000)", fc.kernel_hz)));
                }
                // A host that sleeps or stalls its ACKs longer than this stalls the window.
                for (name, d) in [("receiver_wakeup", fc.receiver_wakeup), ("ack_jitter", fc.ack_jitter)] {
                    if d.0 > 100_000_000 {
                        return Err(err(ff(name), "must be at most 100ms".into()));
                    }
                }
                if !(0.0..=1.0).contains(&fc.ack_jitter_slow) {
                    return Err(err(ff("ack_jitter_slow"), format!("{} is not a share between 0 and 1", fc.ack_jitter_slow)));
                }
                if fc.ack_jitter_memory.0 == 0 || fc.ack_jitter_memory.0 > 60_000_000_000 {
                    return Err(err(ff("ack_jitter_memory"), "must be above 0 and at most 60s".into()));
                }
                let mut via = Vec::new();
                for n in &fc.via {
                    let &(id, count) =
                        named.get(n.as_str()).ok_or_else(|| err(ff("via"), format!("no aggregate is named '{n}'")))?;
                    if count != 1 {
                        return Err(err(ff("via"), format!("'{n}' has count = {count}: name a single aggregate")));
                    }
                    if a.name.as_deref() == Some(n.as_str()) || via.contains(&id) {
                        return Err(err(ff("via"), format!("'{n}' is crossed twice (a flow always crosses its own aggregate)")));
                    }
                    via.push(id);
                }
                fc.app.validate().map_err(|m| {
                    let (k, msg) = m.split_once(": ").unwrap_or(("", &m));
                    err(ff(&format!("app.{k}")), msg.to_string())
                })?;
                for k in 0..fc.count {
                    let idx = match fc.pick {
                        Pick::Flow => k as usize,
                        Pick::Aggregate => copy as usize,
                    };
                    let rtt = fc.rtt.pick(idx).expect("non-empty");
                    if rtt.0 < 2_000 {
                        return Err(err(ff("rtt"), "must be at least 2us".into()));
                    }
                    flows.push(ResolvedFlow {
                        cc: fc.cc.pick(idx).expect("non-empty"),
                        rtt,
                        start: fc.start,
                        start_jitter: fc.start_jitter,
                        app: fc.app.clone(),
                        class: fc.class,
                        stop: fc.stop,
                        pacing: fc.pacing,
                        kernel_hz: fc.kernel_hz,
                        receiver_wakeup: fc.receiver_wakeup,
                        ack_jitter: fc.ack_jitter,
                        ack_jitter_slow: fc.ack_jitter_slow,
                        ack_jitter_memory: fc.ack_jitter_memory,
                        customer: fc.customer,
                        via: via.clone(),
                    });
                }
            }
            out.push(ResolvedAggregate {
                id: out.len() as u32,
                rate,
                enforcer: enforcer.clone(),
                cfg: a.clone(),
                flows,
            });
        }
    }
    Ok(Resolved { scenario: sc, aggregates: out })
}
