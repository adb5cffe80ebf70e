//! Declarative enforcer configuration: the one format read by replay, the simulator, the
//! middlebox and the tc-BPF loader. `kind` selects the algorithm; the other keys are that
//! algorithm's config struct, defined beside its code.

use crate::bcpqp::{BcPqp, BcPqpConfig};
use crate::cpq::{Cpq, CpqConfig};
use crate::dscd::{Dscd, DscdConfig};
use crate::enforcer::{Policer, QueueDiscipline};
use crate::fair_policer::{FairPolicer, FairPolicerConfig};
use crate::fifo_shaper::{FifoShaper, FifoShaperConfig};
use crate::packet::Packet;
use crate::pqp::{Pqp, PqpConfig};
use crate::red::{Red, RedConfig};
use crate::shaper::{Shaper, ShaperConfig};
use crate::srtcm::{SrTcm, SrTcmConfig};
use crate::time::Instant;
use crate::token_bucket::{TokenBucket, TokenBucketConfig};
use crate::trtcm::{TrTcm, TrTcmConfig};
use crate::units::Rate;
use crate::{Dropped, Verdict};
use serde::Deserialize;

/// A configuration error that names the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { field: field.into(), message: message.into() }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
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
        let cfg: EnforcerConfig = toml::from_str(text).map_err(|e| {
            let field = e.span().map(|s| field_at(text, s.start)).unwrap_or_default();
            ConfigError::new(field, e.message().to_string())
        })?;
        cfg.validate()?;
        Ok(cfg)
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
            EnforcerConfig::Pqp(c) => Enforcer::Policer(AnyPolicer::Pqp(Pqp::new(c))),
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
/// monomorphic and inlinable in the data path.
pub enum AnyPolicer {
    TokenBucket(TokenBucket),
    Srtcm(SrTcm),
    Trtcm(TrTcm),
    Pqp(Pqp),
    Bcpqp(BcPqp),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kind_is_named() {
        let e = EnforcerConfig::from_toml("kind = \"leaky\"\nrate = \"10mbit\"").unwrap_err();
        assert!(e.message.contains("leaky"), "{e}");
    }
}
