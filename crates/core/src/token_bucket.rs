//! Token-bucket policer (algorithms.md §1; 000 §2.2, 002 §2.1, 001 §II).
//!
//! A bucket of `burst` bytes filled at `rate`, starting with `initial` tokens (default: full).
//! A packet of `s` bytes passes and takes `s` tokens if at least `s` are there, else it is
//! dropped. This is exactly one phantom queue of size `burst` drained at `rate`
//! (occupancy = burst − tokens), which is what the PQP cross-check relies on.
//!
//! Data path: integers only. Tokens are kept in nano-bytes (bytes × 10⁹) so that the credit
//! `rate · Δt` is an exact product with no division (`Rate::credit`), and all arithmetic
//! saturates. The eBPF mirror does the same operations in the same order, so both give
//! bit-identical verdicts on the same arrivals.

use crate::validate::{check_rate, check_size, ConfigError};
use crate::units::{Bytes, Rate, NANOS_PER_SEC};
use crate::{DropReason, Instant, Packet, Policer, Verdict};
use serde::{Deserialize, Serialize};

/// `kind = "token_bucket"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenBucketConfig {
    /// Fill rate r (e.g. "10mbit").
    pub rate: Rate,
    /// Bucket size B: the largest burst that passes at line rate (e.g. "64kb"). The BC-PQP
    /// evaluation's "Policer" uses one BDP, "Policer+" the FairPolicer size (see `sizing`).
    pub burst: Bytes,
    /// Tokens at start; defaults to `burst` (a full bucket, as tc and RFC 2697 do).
    #[serde(default)]
    pub initial: Option<Bytes>,
}

impl TokenBucketConfig {
    pub fn new(rate: Rate, burst: u64) -> Self {
        TokenBucketConfig { rate, burst: Bytes(burst), initial: None }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        check_rate("rate", self.rate)?;
        check_size("burst", self.burst.0)?;
        if let Some(initial) = self.initial {
            if initial.0 > self.burst.0 {
                return Err(ConfigError::new(
                    "initial",
                    format!("{} bytes exceeds burst ({} bytes)", initial.0, self.burst.0),
                ));
            }
        }
        Ok(())
    }
}

/// One bucket of tokens counted in nano-bytes. Shared by the token bucket and the RFC 2697 /
/// 2698 meters, which are two such buckets with different fill rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Current tokens, nano-bytes; never above `capacity`.
    tokens: u64,
    /// Bucket size, nano-bytes (≤ 16 GiB × 10⁹, which fits in u64).
    capacity: u64,
}

impl Bucket {
    /// A bucket of `capacity` bytes holding `initial` bytes (clamped to the capacity).
    pub fn new(capacity: u64, initial: u64) -> Self {
        let capacity = capacity.saturating_mul(NANOS_PER_SEC);
        Bucket { tokens: initial.saturating_mul(NANOS_PER_SEC).min(capacity), capacity }
    }

    /// Adds `credit` nano-bytes; returns what did not fit (the overflow srTCM hands to E).
    #[inline]
    pub fn fill(&mut self, credit: u64) -> u64 {
        let room = self.capacity - self.tokens;
        let added = credit.min(room);
        self.tokens += added;
        credit - added
    }

    /// Whether `bytes` tokens are available.
    #[inline]
    pub fn has(&self, bytes: u64) -> bool {
        self.tokens >= bytes.saturating_mul(NANOS_PER_SEC)
    }

    /// Removes `bytes` tokens; the caller checked `has(bytes)` (saturates otherwise).
    #[inline]
    pub fn take(&mut self, bytes: u64) {
        self.tokens = self.tokens.saturating_sub(bytes.saturating_mul(NANOS_PER_SEC));
    }

    /// Current tokens in nano-bytes (exact).
    pub fn tokens_nanobytes(&self) -> u64 {
        self.tokens
    }

    /// Current tokens in whole bytes (rounded down).
    pub fn tokens(&self) -> u64 {
        self.tokens / NANOS_PER_SEC
    }

    pub fn capacity(&self) -> u64 {
        self.capacity / NANOS_PER_SEC
    }
}

/// The time since the last update, never negative: a clock that goes backwards earns no
/// credit and does not move the reference point back (which would credit the same time twice).
#[inline]
pub(crate) fn advance(last: &mut Instant, now: Instant) -> crate::Duration {
    let dt = now.saturating_since(*last);
    if now > *last {
        *last = now;
    }
    dt
}

/// Pass and drop counters of a policer (kept per aggregate by `Aggregates`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicerStats {
    pub passed_packets: u64,
    pub passed_bytes: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
}

impl PolicerStats {
    #[inline]
    pub(crate) fn count(&mut self, verdict: Verdict, len: u32) {
        if verdict.is_pass() {
            self.passed_packets += 1;
            self.passed_bytes += len as u64;
        } else {
            self.dropped_packets += 1;
            self.dropped_bytes += len as u64;
        }
    }
}

/// The token-bucket policer (algorithms.md §1). 32 bytes and no counters of its own, so that
/// millions fit in `Aggregates`, which counts passes and drops per aggregate.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: Rate,
    bucket: Bucket,
    last: Instant,
}

impl TokenBucket {
    /// Builds from a validated config; time starts at `Instant::ZERO`.
    pub fn new(cfg: &TokenBucketConfig) -> Self {
        let initial = cfg.initial.unwrap_or(cfg.burst).0;
        TokenBucket {
            rate: cfg.rate,
            bucket: Bucket::new(cfg.burst.0, initial),
            last: Instant::ZERO,
        }
    }

    /// Brings the bucket up to `now`: tokens = min(B, tokens + r·(now − t_last)).
    #[inline]
    fn refill(&mut self, now: Instant) {
        let dt = advance(&mut self.last, now);
        self.bucket.fill(self.rate.credit(dt));
    }

    /// Tokens (whole bytes) the bucket would hold at `now`, without changing state.
    pub fn tokens_at(&self, now: Instant) -> u64 {
        let mut b = self.bucket;
        b.fill(self.rate.credit(now.saturating_since(self.last)));
        b.tokens()
    }

    /// Tokens in whole bytes as of the last arrival.
    pub fn tokens(&self) -> u64 {
        self.bucket.tokens()
    }

    /// Tokens in nano-bytes as of the last arrival (exact; for conformance vectors).
    pub fn tokens_nanobytes(&self) -> u64 {
        self.bucket.tokens_nanobytes()
    }
}

impl Policer for TokenBucket {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        self.refill(now);
        let len = pkt.len as u64;
        if self.bucket.has(len) {
            self.bucket.take(len);
            Verdict::Pass
        } else {
            Verdict::Drop(DropReason::Overlimit)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Duration;

    fn pkt(len: u32) -> Packet {
        Packet { len, ..Packet::default() }
    }

    #[test]
    fn starts_full_and_refills_exactly() {
        // 8000 bit/s = 1000 B/s, so 1 byte of credit per millisecond.
        let mut tb = TokenBucket::new(&TokenBucketConfig::new(Rate(1000), 1500));
        assert!(tb.on_arrival(Instant(0), &pkt(1500)).is_pass());
        assert_eq!(tb.on_arrival(Instant(0), &pkt(1)), Verdict::Drop(DropReason::Overlimit));
        let t = Instant::ZERO + Duration::from_millis(99);
        assert!(!tb.on_arrival(t, &pkt(100)).is_pass());
        assert_eq!(tb.tokens(), 99);
        assert!(tb.on_arrival(t + Duration::from_millis(1), &pkt(100)).is_pass());
        assert_eq!(tb.tokens_nanobytes(), 0);
    }

    #[test]
    fn clock_going_backwards_earns_nothing() {
        let mut tb = TokenBucket::new(&TokenBucketConfig { initial: Some(Bytes(0)), ..TokenBucketConfig::new(Rate(1000), 1500) });
        assert!(!tb.on_arrival(Instant(1_000_000_000), &pkt(1001)).is_pass());
        assert!(!tb.on_arrival(Instant(0), &pkt(1001)).is_pass());
        // Had the reference point moved back, this arrival would be credited a second time.
        assert!(!tb.on_arrival(Instant(1_000_000_000), &pkt(1001)).is_pass());
        assert!(tb.on_arrival(Instant(1_000_000_000), &pkt(1000)).is_pass());
    }

    #[test]
    fn validation_names_fields() {
        let mut c = TokenBucketConfig::new(Rate(0), 1500);
        assert_eq!(c.validate().unwrap_err().field, "rate");
        c.rate = Rate(1000);
        c.burst = Bytes(0);
        assert_eq!(c.validate().unwrap_err().field, "burst");
        c.burst = Bytes(10);
        c.initial = Some(Bytes(11));
        assert_eq!(c.validate().unwrap_err().field, "initial");
    }
}
