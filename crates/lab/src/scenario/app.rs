//! The `app` table of a flow: what it has to send and when. The simulator (crates/sim app.rs)
//! and the testbed's senders each run it their own way.
//! TCP: backlogged, finite (one transfer), on-off (messages and gaps drawn from exponential or
//! Pareto distributions), periodic (a fixed transfer repeated on a fixed schedule). UDP (no congestion control): constant bit rate, and LogNormal
//! inter-arrival times (004 §V-A3).

use ratekit_core::{Bytes, Duration, Rate};
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dist {
    Exp,
    Pareto,
}

/// The `app` table of a flow.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AppConfig {
    Backlogged,
    Finite {
        size: Bytes,
    },
    OnOff {
        /// Mean message size.
        mean_size: Bytes,
        /// Mean gap between a message's completion and the next one.
        mean_gap: Duration,
        #[serde(default = "default_dist")]
        size_dist: Dist,
        #[serde(default = "default_dist")]
        gap_dist: Dist,
        /// Pareto shape α (> 1); default 1.5.
        #[serde(default = "default_shape")]
        shape: f64,
    },
    /// `count` transfers of `size` bytes on one connection, the i-th handed to TCP at the flow's
    /// start + i·`period` whether or not the one before is done: a socket write on a timer, as
    /// the BC-PQP authors' testbed traffic generator sends (000 Fig. 6). Unlike on-off, the
    /// schedule does not drift by the transfers' completion times, and the connection (its
    /// ssthresh, RTT estimate and BBR model) carries over from one transfer to the next.
    Periodic {
        size: Bytes,
        period: Duration,
        count: u32,
    },
    /// UDP at a constant bit rate.
    Cbr {
        rate: Rate,
        #[serde(default = "default_datagram")]
        packet: Bytes,
    },
    /// UDP with LogNormal inter-arrival times of mean packet/rate and log-space σ (default 1).
    /// A fraction `class_fraction` of the datagrams, drawn independently per datagram, carries
    /// `other_class` instead of the flow's class: one stream whose classes share its bursts, as
    /// 004 §V-A3a labels packets ABE at random.
    Lognormal {
        rate: Rate,
        #[serde(default = "default_sigma")]
        sigma: f64,
        #[serde(default = "default_datagram")]
        packet: Bytes,
        #[serde(default)]
        class_fraction: f64,
        #[serde(default)]
        other_class: u16,
    },
}

fn default_dist() -> Dist {
    Dist::Exp
}
fn default_shape() -> f64 {
    1.5
}
fn default_sigma() -> f64 {
    1.0
}
fn default_datagram() -> Bytes {
    Bytes(1500)
}

impl AppConfig {
    pub fn is_udp(&self) -> bool {
        matches!(self, AppConfig::Cbr { .. } | AppConfig::Lognormal { .. })
    }

    /// (fraction, class) of the datagrams labelled with another class than the flow's, if any.
    pub fn class_fraction(&self) -> Option<(f64, u16)> {
        match *self {
            AppConfig::Lognormal { class_fraction, other_class, .. } if class_fraction > 0.0 => Some((class_fraction, other_class)),
            _ => None,
        }
    }

    pub fn is_finite(&self) -> bool {
        matches!(self, AppConfig::Finite { .. })
    }

    pub fn validate(&self) -> Result<(), String> {
        match self {
            AppConfig::OnOff { shape, .. } if *shape <= 1.0 => Err("shape: a Pareto shape must be > 1".into()),
            AppConfig::Periodic { count: 0, .. } => Err("count: a periodic app sends at least one transfer".into()),
            AppConfig::Periodic { period, count, .. } if period.0 == 0 && *count > 1 => {
                Err("period: repeated transfers need a period > 0".into())
            }
            AppConfig::Lognormal { sigma, .. } if !(*sigma >= 0.0 && sigma.is_finite()) => {
                Err("sigma: must be a finite number ≥ 0".into())
            }
            AppConfig::Lognormal { class_fraction, .. } if !(0.0..=1.0).contains(class_fraction) => {
                Err("class_fraction: must be a fraction in [0, 1]".into())
            }
            AppConfig::Cbr { packet, .. } | AppConfig::Lognormal { packet, .. } if packet.0 < 28 || packet.0 > 65535 => {
                Err("packet: a datagram is 28..65535 bytes".into())
            }
            _ => Ok(()),
        }
    }
}
