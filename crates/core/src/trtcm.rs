//! Two-rate three-colour marker, RFC 2698 (algorithms.md §1: "real meters also colour").
//!
//! Bucket P (size PBS) fills at PIR, bucket C (size CBS) at CIR; both start full (RFC 2698 §3).
//! Colour-blind: red if P has fewer than B tokens; else yellow if C has fewer than B (P −= B);
//! else green (P −= B, C −= B). Colour-aware: a pre-coloured red packet is red and a
//! pre-coloured yellow one can at best be yellow. The pre-colour is carried in `Packet::class`
//! (see `colour`). As a `Policer`, red is dropped and yellow passed unless `drop_yellow`.

use crate::colour::{Colour, ColourPolicy, ColourStats};
use crate::validate::{check_rate, check_size, ConfigError};
use crate::token_bucket::{advance, Bucket};
use crate::units::{Bytes, Rate};
use crate::{Instant, Packet, Policer, Verdict};
use serde::{Deserialize, Serialize};

/// `kind = "trtcm"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TrTcmConfig {
    /// Committed information rate; must not exceed `pir` (RFC 2698 §2).
    pub cir: Rate,
    /// Committed burst size.
    pub cbs: Bytes,
    /// Peak information rate.
    pub pir: Rate,
    /// Peak burst size.
    pub pbs: Bytes,
    /// Read the pre-colour from `Packet::class` (0 green, 1 yellow, ≥ 2 red). Default false.
    #[serde(default)]
    pub colour_aware: bool,
    /// Drop yellow as well as red. Default false (drop red only).
    #[serde(default)]
    pub drop_yellow: bool,
}

impl TrTcmConfig {
    pub fn new(cir: Rate, cbs: u64, pir: Rate, pbs: u64) -> Self {
        TrTcmConfig { cir, cbs: Bytes(cbs), pir, pbs: Bytes(pbs), colour_aware: false, drop_yellow: false }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        check_rate("cir", self.cir)?;
        check_size("cbs", self.cbs.0)?;
        check_rate("pir", self.pir)?;
        check_size("pbs", self.pbs.0)?;
        if self.pir < self.cir {
            return Err(ConfigError::new("pir", format!("{} is below cir ({})", self.pir, self.cir)));
        }
        Ok(())
    }
}

/// The trTCM meter / policer.
#[derive(Debug, Clone)]
pub struct TrTcm {
    cir: Rate,
    pir: Rate,
    committed: Bucket,
    peak: Bucket,
    last: Instant,
    policy: ColourPolicy,
    stats: ColourStats,
}

impl TrTcm {
    pub fn new(cfg: &TrTcmConfig) -> Self {
        TrTcm {
            cir: cfg.cir,
            pir: cfg.pir,
            committed: Bucket::new(cfg.cbs.0, cfg.cbs.0),
            peak: Bucket::new(cfg.pbs.0, cfg.pbs.0),
            last: Instant::ZERO,
            policy: ColourPolicy { colour_aware: cfg.colour_aware, drop_yellow: cfg.drop_yellow },
            stats: ColourStats::default(),
        }
    }

    /// Colours the packet (and consumes its tokens) without deciding what to do with it.
    pub fn meter(&mut self, now: Instant, pkt: &Packet) -> Colour {
        let dt = advance(&mut self.last, now);
        self.committed.fill(self.cir.credit(dt));
        self.peak.fill(self.pir.credit(dt));

        let len = pkt.len as u64;
        let pre = self.policy.pre_colour(pkt);
        let colour = if pre == Colour::Red || !self.peak.has(len) {
            Colour::Red
        } else if pre == Colour::Yellow || !self.committed.has(len) {
            self.peak.take(len);
            Colour::Yellow
        } else {
            self.peak.take(len);
            self.committed.take(len);
            Colour::Green
        };
        self.stats.count(colour, pkt.len);
        colour
    }

    /// (Tc, Tp) in whole bytes as of the last arrival.
    pub fn tokens(&self) -> (u64, u64) {
        (self.committed.tokens(), self.peak.tokens())
    }

    pub fn stats(&self) -> &ColourStats {
        &self.stats
    }
}

impl Policer for TrTcm {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let colour = self.meter(now, pkt);
        self.policy.verdict(colour)
    }
}
