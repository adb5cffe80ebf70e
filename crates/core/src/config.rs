//! Declarative enforcer configuration: the one format read by replay, the simulator, the
//! middlebox and the tc-BPF loader. `kind` selects the algorithm; the other keys are that
//! algorithm's config struct, defined beside its code.

use crate::bcpqp::{BcPqp, BcPqpConfig};
use crate::bcpqp_class_flows::ClassFlowBcPqp;
use crate::bcpqp_flows::FlowBcPqp;
use crate::cpq::{Cpq, CpqConfig};
use crate::dscd::{Dscd, DscdConfig};
use crate::enforcer::{Policer, QueueDiscipline};
use crate::fair_policer::{FairPolicer, FairPolicerConfig};
use crate::fifo_shaper::{FifoShaper, FifoShaperConfig};
use crate::packet::{Classify, Packet};
use crate::pqp::{FlowQueuing, Pqp, PqpConfig};
use crate::pqp_class_flows::ClassFlowPqp;
use crate::pqp_flows::FlowPqp;
use crate::red::{Red, RedConfig};
use crate::shaper::{Shaper, ShaperConfig};
use crate::srtcm::{SrTcm, SrTcmConfig};
use crate::time::Instant;
use crate::token_bucket::{TokenBucket, TokenBucketConfig};
use crate::trtcm::{TrTcm, TrTcmConfig};
use crate::units::Rate;
// Defined beside the checks it reports since issue 13; the old path stays valid.
pub use crate::validate::ConfigError;
use crate::{Dropped, Verdict};
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::Deserialize;

/// Deserialises from a table with a `kind` key (see `from_table`), so that every error, wherever the
/// config is embedded (replay, simulator scenarios, testbed), names the field.
#[derive(Debug, Clone)]
pub enum EnforcerConfig {
    TokenBucket(TokenBucketConfig),
    Srtcm(SrTcmConfig),
    Trtcm(TrTcmConfig),
    Pqp(PqpConfig),
    Bcpqp(BcPqpConfig),
    FairPolicer(FairPolicerConfig),
    Shaper(ShaperConfig),
    Fifo(FifoShaperConfig),
    Red(RedConfig),
    Cpq(CpqConfig),
    Dscd(DscdConfig),
}

/// A built enforcer: one of the two shapes.
pub enum Enforcer {
    Policer(AnyPolicer),
    Queue(AnyQueue),
}

impl EnforcerConfig {
    /// Parses and validates a TOML document; errors name the field.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            let field = e.span().map(|s| field_at(text, s.start)).unwrap_or_default();
            // A syntax error can come with an empty message; its Display says what and where.
            let message = match e.message().trim() {
                "" => e.to_string().trim().to_string(),
                m => m.to_string(),
            };
            ConfigError::new(field, message)
        })?;
        let cfg = Self::from_table(table)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Builds the config from a TOML table: `kind` picks the variant, the other keys are that
    /// variant's fields. Serde's internally tagged enums buffer their content and lose the key of
    /// a bad value, so the variant is chosen first and its struct read with a tracked path.
    pub fn from_table(mut table: toml::Table) -> Result<Self, ConfigError> {
        let kind = match table.remove("kind") {
            Some(toml::Value::String(kind)) => kind,
            Some(other) => return Err(ConfigError::new("kind", format!("must be a string, not {}", other.type_str()))),
            None => return Err(ConfigError::new("kind", format!("missing: one of {}", KINDS.join(", ")))),
        };
        fn read<T: DeserializeOwned>(table: toml::Table) -> Result<T, ConfigError> {
            serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
                let path = e.path().to_string();
                let message = e.inner().message().trim().to_string();
                let field = if path == "." { unknown_field_name(&message) } else { path };
                ConfigError::new(field, message)
            })
        }
        Ok(match kind.as_str() {
            "token_bucket" => EnforcerConfig::TokenBucket(read(table)?),
            "srtcm" => EnforcerConfig::Srtcm(read(table)?),
            "trtcm" => EnforcerConfig::Trtcm(read(table)?),
            "pqp" => EnforcerConfig::Pqp(read(table)?),
            "bcpqp" => EnforcerConfig::Bcpqp(read(table)?),
            "fair_policer" => EnforcerConfig::FairPolicer(read(table)?),
            "shaper" => EnforcerConfig::Shaper(read(table)?),
            "fifo" => EnforcerConfig::Fifo(read(table)?),
            "red" => EnforcerConfig::Red(read(table)?),
            "cpq" => EnforcerConfig::Cpq(read(table)?),
            "dscd" => EnforcerConfig::Dscd(read(table)?),
            other => {
                return Err(ConfigError::new("kind", format!("unknown kind '{other}': expected one of {}", KINDS.join(", "))))
            }
        })
    }

    pub fn kind(&self) -> &'static str {
        match self {
            EnforcerConfig::TokenBucket(_) => "token_bucket",
            EnforcerConfig::Srtcm(_) => "srtcm",
            EnforcerConfig::Trtcm(_) => "trtcm",
            EnforcerConfig::Pqp(_) => "pqp",
            EnforcerConfig::Bcpqp(_) => "bcpqp",
            EnforcerConfig::FairPolicer(_) => "fair_policer",
            EnforcerConfig::Shaper(_) => "shaper",
            EnforcerConfig::Fifo(_) => "fifo",
            EnforcerConfig::Red(_) => "red",
            EnforcerConfig::Cpq(_) => "cpq",
            EnforcerConfig::Dscd(_) => "dscd",
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            EnforcerConfig::TokenBucket(c) => c.validate(),
            EnforcerConfig::Srtcm(c) => c.validate(),
            EnforcerConfig::Trtcm(c) => c.validate(),
            EnforcerConfig::Pqp(c) => c.validate(),
            EnforcerConfig::Bcpqp(c) => c.validate(),
            EnforcerConfig::FairPolicer(c) => c.validate(),
            EnforcerConfig::Shaper(c) => c.validate(),
            EnforcerConfig::Fifo(c) => c.validate(),
            EnforcerConfig::Red(c) => c.validate(),
            EnforcerConfig::Cpq(c) => c.validate(),
            EnforcerConfig::Dscd(c) => c.validate(),
        }
    }

    /// Whether this enforcer holds packets (shaper, FIFO, RED/CPQ, DSCD) rather than deciding on arrival.
    pub fn is_queueing(&self) -> bool {
        matches!(
            self,
            EnforcerConfig::Shaper(_)
                | EnforcerConfig::Fifo(_)
                | EnforcerConfig::Red(_)
                | EnforcerConfig::Cpq(_)
                | EnforcerConfig::Dscd(_)
        )
    }

    /// Builds a fresh enforcer for one aggregate. `link_rate` is the rate of the link a queueing
    /// enforcer feeds; those that need it (RED's idle correction, DSCD's B_max) fail without it.
    pub fn build(&self, link_rate: Option<Rate>) -> Result<Enforcer, ConfigError> {
        self.validate()?;
        Ok(match self {
            EnforcerConfig::TokenBucket(c) => Enforcer::Policer(AnyPolicer::TokenBucket(TokenBucket::new(c))),
            EnforcerConfig::Srtcm(c) => Enforcer::Policer(AnyPolicer::Srtcm(SrTcm::new(c))),
            EnforcerConfig::Trtcm(c) => Enforcer::Policer(AnyPolicer::Trtcm(TrTcm::new(c))),
            EnforcerConfig::Pqp(c) if c.flows == FlowQueuing::Exact && c.classify == Classify::Class => {
                Enforcer::Policer(AnyPolicer::PqpClassFlows(ClassFlowPqp::new(c)))
            }
            EnforcerConfig::Pqp(c) if c.flows == FlowQueuing::Exact => Enforcer::Policer(AnyPolicer::PqpFlows(FlowPqp::new(c))),
            EnforcerConfig::Pqp(c) => Enforcer::Policer(AnyPolicer::Pqp(Pqp::new(c))),
            EnforcerConfig::Bcpqp(c) if c.flows == FlowQueuing::Exact && c.classify == Classify::Class => {
                Enforcer::Policer(AnyPolicer::BcpqpClassFlows(Box::new(ClassFlowBcPqp::new(c))))
            }
            EnforcerConfig::Bcpqp(c) if c.flows == FlowQueuing::Exact => Enforcer::Policer(AnyPolicer::BcpqpFlows(FlowBcPqp::new(c))),
            EnforcerConfig::Bcpqp(c) => Enforcer::Policer(AnyPolicer::Bcpqp(BcPqp::new(c))),
            EnforcerConfig::FairPolicer(c) => Enforcer::Policer(AnyPolicer::FairPolicer(FairPolicer::new(c))),
            EnforcerConfig::Shaper(c) => Enforcer::Queue(AnyQueue::Shaper(Shaper::new(c, link_rate)?)),
            EnforcerConfig::Fifo(c) => Enforcer::Queue(AnyQueue::Fifo(FifoShaper::new(c, link_rate)?)),
            EnforcerConfig::Red(c) => Enforcer::Queue(AnyQueue::Red(Red::new(c, link_rate)?)),
            EnforcerConfig::Cpq(c) => Enforcer::Queue(AnyQueue::Cpq(Cpq::new(c, link_rate)?)),
            EnforcerConfig::Dscd(c) => Enforcer::Queue(AnyQueue::Dscd(Dscd::new(c, link_rate)?)),
        })
    }

    /// Builds a policer, or says that this kind is a queueing enforcer.
    pub fn build_policer(&self) -> Result<AnyPolicer, ConfigError> {
        match self.build(None)? {
            Enforcer::Policer(p) => Ok(p),
            Enforcer::Queue(_) => Err(ConfigError::new("kind", format!("'{}' is a queueing enforcer, not a policer", self.kind()))),
        }
    }
}

/// Every `kind` a config may name, in the order of `EnforcerConfig`'s variants.
pub const KINDS: [&str; 11] =
    ["token_bucket", "srtcm", "trtcm", "pqp", "bcpqp", "fair_policer", "shaper", "fifo", "red", "cpq", "dscd"];

impl<'de> Deserialize<'de> for EnforcerConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let table = toml::Table::deserialize(d)?;
        Self::from_table(table).map_err(D::Error::custom)
    }
}

/// Serde reports an unknown key at the struct's own level; the key is the field to name.
/// The key serde names in an unknown- or missing-field message at the table's root.
fn unknown_field_name(message: &str) -> String {
    match message.strip_prefix("unknown field `").or_else(|| message.strip_prefix("missing field `")) {
        Some(rest) => rest.split('`').next().unwrap_or("").to_string(),
        None => String::new(),
    }
}

/// The name of the TOML key whose value starts at or before byte `offset` (best effort).
fn field_at(text: &str, offset: usize) -> String {
    let line = text[..offset.min(text.len())].rsplit('\n').next().unwrap_or("");
    let line = if line.trim().is_empty() || !line.contains('=') {
        text[offset.min(text.len())..].split('\n').next().unwrap_or("")
    } else {
        line
    };
    line.split('=').next().unwrap_or("").trim().trim_matches(['[', ']']).to_string()
}

/// Enum dispatch over every policer: a closed set at the boundary (style.md practice 3),
/// monomorphic and inlinable in the data path. Cloning copies one aggregate's state and shares
/// its parameters (PQP/BC-PQP keep them behind an `Arc`), so containers clone a prototype.
#[derive(Debug, Clone)]
pub enum AnyPolicer {
    TokenBucket(TokenBucket),
    Srtcm(SrTcm),
    Trtcm(TrTcm),
    Pqp(Pqp),
    Bcpqp(BcPqp),
    /// `pqp` with `flows = "exact"`.
    PqpFlows(FlowPqp<()>),
    /// `pqp` with `flows = "exact"` and `classify = "class"`.
    PqpClassFlows(ClassFlowPqp),
    /// `bcpqp` with `flows = "exact"`.
    BcpqpFlows(FlowBcPqp),
    /// `bcpqp` with `flows = "exact"` and `classify = "class"` (boxed: keeps `AnyPolicer` as it was).
    BcpqpClassFlows(Box<ClassFlowBcPqp>),
    FairPolicer(FairPolicer),
}

impl Policer for AnyPolicer {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        match self {
            AnyPolicer::TokenBucket(p) => p.on_arrival(now, pkt),
            AnyPolicer::Srtcm(p) => p.on_arrival(now, pkt),
            AnyPolicer::Trtcm(p) => p.on_arrival(now, pkt),
            AnyPolicer::Pqp(p) => p.on_arrival(now, pkt),
            AnyPolicer::Bcpqp(p) => p.on_arrival(now, pkt),
            AnyPolicer::PqpFlows(p) => p.on_arrival(now, pkt),
            AnyPolicer::PqpClassFlows(p) => p.on_arrival(now, pkt),
            AnyPolicer::BcpqpFlows(p) => p.on_arrival(now, pkt),
            AnyPolicer::BcpqpClassFlows(p) => p.on_arrival(now, pkt),
            AnyPolicer::FairPolicer(p) => p.on_arrival(now, pkt),
        }
    }
}

/// Enum dispatch over every queueing discipline.
pub enum AnyQueue {
    Shaper(Shaper),
    Fifo(FifoShaper),
    Red(Red),
    Cpq(Cpq),
    Dscd(Dscd),
}

macro_rules! each_queue {
    ($self:ident, $q:ident => $e:expr) => {
        match $self {
            AnyQueue::Shaper($q) => $e,
            AnyQueue::Fifo($q) => $e,
            AnyQueue::Red($q) => $e,
            AnyQueue::Cpq($q) => $e,
            AnyQueue::Dscd($q) => $e,
        }
    };
}

impl QueueDiscipline for AnyQueue {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        each_queue!(self, q => q.enqueue(now, pkt, drops))
    }
    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Option<Packet> {
        each_queue!(self, q => q.dequeue(now, drops))
    }
    fn next_wakeup(&self) -> Option<Instant> {
        each_queue!(self, q => q.next_wakeup())
    }
    fn backlog_bytes(&self) -> u64 {
        each_queue!(self, q => q.backlog_bytes())
    }
    fn link_rate_estimate(&self) -> Option<f64> {
        each_queue!(self, q => q.link_rate_estimate())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kind_is_named() {
        let e = EnforcerConfig::from_toml("kind = \"leaky\"\nrate = \"10mbit\"").unwrap_err();
        assert_eq!(e.field, "kind");
        assert!(e.message.contains("leaky"), "{e}");
        let e = EnforcerConfig::from_toml("rate = \"10mbit\"").unwrap_err();
        assert_eq!(e.field, "kind");
    }

    #[test]
    fn bad_values_name_their_field() {
        let e = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = \"0mbit\"\nburst = \"64kb\"").unwrap_err();
        assert_eq!(e.field, "rate", "{e}");
        let e = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = \"1mbit\"\nburst = \"64kb\"\nbrust = 1").unwrap_err();
        assert_eq!(e.field, "brust", "{e}");
        let e = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = \"1mbit\"").unwrap_err();
        assert!(e.message.contains("burst"), "{e}");
        assert_eq!(e.field, "burst", "a missing key is named as the field: {e}");
        let e = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = \"1mbit\"\nburst = \"64 furlongs\"").unwrap_err();
        assert_eq!(e.field, "burst", "{e}");
        let e = EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = ").unwrap_err();
        assert!(!e.message.is_empty());
    }

    #[test]
    fn embedded_configs_keep_field_names() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Scenario {
            enforcer: EnforcerConfig,
        }
        let e = toml::from_str::<Scenario>("[enforcer]\nkind = \"token_bucket\"\nrate = \"-1mbit\"\nburst = 1500").unwrap_err();
        assert!(e.to_string().contains("rate: "), "{e}");
    }
}
