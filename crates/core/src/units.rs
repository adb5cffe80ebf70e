//! Rates, sizes and durations with tc-style units (iproute2's `tc` conventions).
//!
//! Rates: `bit` (also a bare number), `kbit`, `mbit`, `gbit`, `tbit` (powers of 1000 bits/s),
//! `kibit`, `mibit`, `gibit` (powers of 1024), `bps`, `kbps`, `mbps`, `gbps` (bytes/s, powers of 1000).
//! Sizes: a bare number or `b` is bytes; `k`/`kb` = 1024, `m`/`mb` = 1024², `g`/`gb` = 1024³ bytes,
//! `kbit`, `mbit`, `gbit` = 1000ⁿ bits, as `tc` reads them.
//! Durations: `s`/`sec`/`secs`, `ms`/`msec`/`msecs`, `us`/`usec`/`usecs`, `ns`; a bare number is µs, as in tc.
//! Suffixes are case-insensitive (`1.5Mbit` == `1.5mbit`).

use crate::time::Duration;
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Nanoseconds per second: policers account credit in "nano-bytes" (bytes × 10⁹) so that
/// `rate · Δt` is an exact integer product with no division in the data path.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The largest rate ratekit accepts: 1 Tbit/s. Above this, nano-byte credit for a second of
/// idle time would overflow u64 and no deployment of these algorithms runs that fast.
pub const MAX_RATE_BYTES_PER_SEC: u64 = 125_000_000_000;
/// The largest bucket or queue ratekit accepts: 16 GiB (in nano-bytes it still fits in u64).
pub const MAX_SIZE_BYTES: u64 = 16 << 30;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("'{0}' is not a number with a unit")]
    NotANumber(String),
    #[error("unknown unit '{unit}' in '{input}' (expected one of {expected})")]
    UnknownUnit { input: String, unit: String, expected: &'static str },
    #[error("'{0}' must be greater than zero")]
    NotPositive(String),
    #[error("'{input}' is out of range (at most {max})")]
    TooLarge { input: String, max: &'static str },
}

/// A rate in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(pub u64);

impl Rate {
    pub const fn from_bytes_per_sec(b: u64) -> Self {
        Rate(b)
    }
    pub const fn from_bits_per_sec(b: u64) -> Self {
        Rate(b / 8)
    }
    pub fn from_mbps(m: f64) -> Self {
        Rate((m * 1e6 / 8.0).round() as u64)
    }
    pub fn bytes_per_sec(self) -> u64 {
        self.0
    }
    pub fn bits_per_sec(self) -> u64 {
        self.0 * 8
    }
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }
    /// Credit earned over `dt`, in nano-bytes (bytes × 10⁹), saturating.
    #[inline]
    pub fn credit(self, dt: Duration) -> u64 {
        self.0.saturating_mul(dt.0)
    }
    /// Whole bytes sent at this rate over `dt` (rounded down).
    pub fn bytes_in(self, dt: Duration) -> u64 {
        ((self.0 as u128 * dt.0 as u128) / NANOS_PER_SEC as u128) as u64
    }
    /// Time to send `bytes` at this rate, rounded up to the next nanosecond.
    pub fn time_to_send(self, bytes: u64) -> Duration {
        let ns = (bytes as u128 * NANOS_PER_SEC as u128).div_ceil(self.0.max(1) as u128);
        Duration(ns.min(u64::MAX as u128) as u64)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = self.bits_per_sec() as f64;
        let (v, u) = if bits >= 1e9 {
            (bits / 1e9, "gbit")
        } else if bits >= 1e6 {
            (bits / 1e6, "mbit")
        } else if bits >= 1e3 {
            (bits / 1e3, "kbit")
        } else {
            (bits, "bit")
        };
        write!(f, "{}{}", trim_float(v), u)
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn split_number(input: &str) -> Result<(f64, String), UnitError> {
    let s = input.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'))
        .unwrap_or(s.len());
    // 'e' can start a unit only if no digit follows; the units used here never start with 'e'.
    let (num, unit) = s.split_at(end);
    let value: f64 = num.parse().map_err(|_| UnitError::NotANumber(input.to_string()))?;
    if !value.is_finite() {
        return Err(UnitError::NotANumber(input.to_string()));
    }
    Ok((value, unit.trim().to_ascii_lowercase()))
}

/// Parses a tc-style rate such as `10mbit`, `1.5Mbit` or `125kbps`.
pub fn parse_rate(input: &str) -> Result<Rate, UnitError> {
    let (v, unit) = split_number(input)?;
    let bits_per_unit: f64 = match unit.as_str() {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1024.0 * 1024.0,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => {
            return Err(UnitError::UnknownUnit {
                input: input.into(),
                unit,
                expected: "bit, kbit, mbit, gbit, tbit, kibit, mibit, gibit, bps, kbps, mbps, gbps",
            })
        }
    };
    let bytes = (v * bits_per_unit / 8.0).round();
    if bytes < 1.0 {
        return Err(UnitError::NotPositive(input.into()));
    }
    if bytes > MAX_RATE_BYTES_PER_SEC as f64 {
        return Err(UnitError::TooLarge { input: input.into(), max: "1tbit" });
    }
    Ok(Rate(bytes as u64))
}

/// Parses a tc-style size such as `32kb`, `1.5mb` or `1500`; the result is in bytes.
pub fn parse_size(input: &str) -> Result<u64, UnitError> {
    let (v, unit) = split_number(input)?;
    let mult: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1024.0,
        "m" | "mb" => 1024.0 * 1024.0,
        "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
        "kbit" => 1e3 / 8.0,
        "mbit" => 1e6 / 8.0,
        "gbit" => 1e9 / 8.0,
        _ => {
            return Err(UnitError::UnknownUnit {
                input: input.into(),
                unit,
                expected: "b, k, kb, m, mb, g, gb, kbit, mbit, gbit",
            })
        }
    };
    let bytes = (v * mult).round();
    if bytes < 1.0 {
        return Err(UnitError::NotPositive(input.into()));
    }
    if bytes > MAX_SIZE_BYTES as f64 {
        return Err(UnitError::TooLarge { input: input.into(), max: "16gb" });
    }
    Ok(bytes as u64)
}

/// Parses a tc-style duration such as `100ms`, `2.5s` or `40us`.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    let (v, unit) = split_number(input)?;
    let ns_per_unit: f64 = match unit.as_str() {
        "s" | "sec" | "secs" => 1e9,
        "ms" | "msec" | "msecs" => 1e6,
        "" | "us" | "usec" | "usecs" => 1e3,
        "ns" | "nsec" | "nsecs" => 1.0,
        _ => {
            return Err(UnitError::UnknownUnit {
                input: input.into(),
                unit,
                expected: "s, ms, us, ns",
            })
        }
    };
    let ns = (v * ns_per_unit).round();
    if ns < 0.0 {
        return Err(UnitError::NotPositive(input.into()));
    }
    if ns > 1e18 {
        return Err(UnitError::TooLarge { input: input.into(), max: "1e9s" });
    }
    Ok(Duration(ns as u64))
}

/// A size in bytes that deserialises from an integer (bytes) or a tc-style string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(pub u64);

macro_rules! string_or_number_serde {
    ($ty:ty, $parse:expr, $from_int:expr, $to_string:expr, $what:literal) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> de::Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: de::Error>(self, s: &str) -> Result<$ty, E> {
                        $parse(s).map_err(E::custom)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        if v <= 0 {
                            return Err(E::custom(UnitError::NotPositive(v.to_string())));
                        }
                        $parse(&format!("{}{}", v, $from_int)).map_err(E::custom)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        self.visit_i64(v.min(i64::MAX as u64) as i64)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        $parse(&format!("{}{}", v, $from_int)).map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&$to_string(self))
            }
        }
    };
}

string_or_number_serde!(
    Rate,
    parse_rate,
    "bit",
    |r: &Rate| r.to_string(),
    "a rate such as \"10mbit\" (integers are bits per second)"
);
string_or_number_serde!(
    Bytes,
    |s| parse_size(s).map(Bytes),
    "b",
    |b: &Bytes| format!("{}b", b.0),
    "a size such as \"64kb\" (integers are bytes)"
);
string_or_number_serde!(
    Duration,
    parse_duration,
    "ns",
    |d: &Duration| format!("{}ns", d.0),
    "a duration such as \"100ms\" (integers are nanoseconds)"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_rates() {
        assert_eq!(parse_rate("10mbit").unwrap(), Rate(1_250_000));
        assert_eq!(parse_rate("1.5Mbit").unwrap(), Rate(187_500));
        assert_eq!(parse_rate("125kbps").unwrap(), Rate(125_000));
        assert_eq!(parse_rate("1kibit").unwrap(), Rate(128));
        assert!(matches!(parse_rate("0mbit"), Err(UnitError::NotPositive(_))));
        assert!(matches!(parse_rate("-3mbit"), Err(UnitError::NotPositive(_))));
        assert!(matches!(parse_rate("10 furlongs"), Err(UnitError::UnknownUnit { .. })));
        assert!(matches!(parse_rate("2tbit"), Err(UnitError::TooLarge { .. })));
        assert!(matches!(parse_rate("mbit"), Err(UnitError::NotANumber(_))));
    }

    #[test]
    fn tc_sizes_and_durations() {
        assert_eq!(parse_size("32kb").unwrap(), 32 * 1024);
        assert_eq!(parse_size("1500").unwrap(), 1500);
        assert_eq!(parse_size("1mbit").unwrap(), 125_000);
        assert_eq!(parse_duration("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("2.5s").unwrap(), Duration::from_millis(2500));
        assert_eq!(parse_duration("40").unwrap(), Duration::from_micros(40));
    }

    #[test]
    fn rate_arithmetic_is_exact() {
        let r = parse_rate("10mbit").unwrap();
        assert_eq!(r.credit(Duration::from_millis(1)), 1250 * NANOS_PER_SEC);
        assert_eq!(r.bytes_in(Duration::from_millis(1)), 1250);
        assert_eq!(r.time_to_send(1250), Duration::from_millis(1));
        assert_eq!(r.time_to_send(1), Duration(800));
        assert_eq!(r.to_string(), "10mbit");
    }

    #[test]
    fn serde_accepts_strings_and_integers() {
        #[derive(serde::Deserialize)]
        struct C {
            rate: Rate,
            size: Bytes,
            t: Duration,
        }
        let c: C = toml::from_str("rate = \"10mbit\"\nsize = 1500\nt = \"100ms\"").unwrap();
        assert_eq!((c.rate, c.size, c.t), (Rate(1_250_000), Bytes(1500), Duration::from_millis(100)));
        let e = toml::from_str::<C>("rate = \"ten\"\nsize = 1\nt = 1").err().unwrap();
        assert!(e.to_string().contains("rate"), "{e}");
    }
}
