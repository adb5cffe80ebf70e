//! Single-rate three-colour marker, RFC 2697 (algorithms.md §1: "real meters also colour").
//!
//! Two buckets share one fill rate CIR: the committed bucket C (size CBS) and the excess bucket
//! E (size EBS); both start full (RFC 2697 §3). Tokens go to C while it is not full, and only
//! the overflow goes to E. Lazy refill on arrival gives exactly the RFC's per-tick rule because
//! the overflow of C is computed from the exact nano-byte credit.
//!
//! Colour-blind: green if C has B tokens (C −= B), else yellow if E has B (E −= B), else red.
//! Colour-aware: a pre-coloured yellow packet may only use E, a pre-coloured red one is red.
//! The pre-colour is carried in `Packet::class` (see `colour`). As a `Policer`, red is dropped
//! and yellow passed unless `drop_yellow`; `meter()` only marks.

use crate::colour::{Colour, ColourPolicy, ColourStats};
use crate::validate::{check_rate, check_size, ConfigError};
use crate::token_bucket::{advance, Bucket};
use crate::units::{Bytes, Rate};
use crate::{Instant, Packet, Policer, Verdict};
use serde::{Deserialize, Serialize};

/// `kind = "srtcm"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SrTcmConfig {
    /// Committed information rate.
    pub cir: Rate,
    /// Committed burst size (RFC 2697 recommends at least the largest packet).
    pub cbs: Bytes,
    /// Excess burst size; 0 (the default) disables yellow, making this a two-colour policer.
    #[serde(default)]
    pub ebs: Bytes,
    /// Read the pre-colour from `Packet::class` (0 green, 1 yellow, ≥ 2 red). Default false.
    #[serde(default)]
    pub colour_aware: bool,
    /// Drop yellow as well as red. Default false (drop red only).
    #[serde(default)]
    pub drop_yellow: bool,
}

impl SrTcmConfig {
    pub fn new(cir: Rate, cbs: u64, ebs: u64) -> Self {
        SrTcmConfig { cir, cbs: Bytes(cbs), ebs: Bytes(ebs), colour_aware: false, drop_yellow: false }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        check_rate("cir", self.cir)?;
        check_size("cbs", self.cbs.0)?;
        if self.ebs.0 > 0 {
            check_size("ebs", self.ebs.0)?;
        }
        Ok(())
    }
}

/// The srTCM meter / policer.
#[derive(Debug, Clone)]
pub struct SrTcm {
    cir: Rate,
    committed: Bucket,
    excess: Bucket,
    last: Instant,
    policy: ColourPolicy,
    stats: ColourStats,
}

impl SrTcm {
    pub fn new(cfg: &SrTcmConfig) -> Self {
        SrTcm {
            cir: cfg.cir,
            committed: Bucket::new(cfg.cbs.0, cfg.cbs.0),
            excess: Bucket::new(cfg.ebs.0, cfg.ebs.0),
            last: Instant::ZERO,
            policy: ColourPolicy { colour_aware: cfg.colour_aware, drop_yellow: cfg.drop_yellow },
            stats: ColourStats::default(),
        }
    }

    /// Colours the packet (and consumes its tokens) without deciding what to do with it.
    pub fn meter(&mut self, now: Instant, pkt: &Packet) -> Colour {
        let dt = advance(&mut self.last, now);
        let overflow = self.committed.fill(self.cir.credit(dt));
        self.excess.fill(overflow);

        let len = pkt.len as u64;
        let colour = match self.policy.pre_colour(pkt) {
            Colour::Green if self.committed.has(len) => {
                self.committed.take(len);
                Colour::Green
            }
            Colour::Green | Colour::Yellow if self.excess.has(len) => {
                self.excess.take(len);
                Colour::Yellow
            }
            _ => Colour::Red,
        };
        self.stats.count(colour, pkt.len);
        colour
    }

    /// (Tc, Te) in whole bytes as of the last arrival.
    pub fn tokens(&self) -> (u64, u64) {
        (self.committed.tokens(), self.excess.tokens())
    }

    pub fn stats(&self) -> &ColourStats {
        &self.stats
    }
}

impl Policer for SrTcm {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let colour = self.meter(now, pkt);
        self.policy.verdict(colour)
    }
}
