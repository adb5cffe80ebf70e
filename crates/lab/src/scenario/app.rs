//! The `app` table of a flow: what it has to send and when. The simulator (crates/sim app.rs)
//! and the testbed's senders each run it their own way.
//! TCP: backlogged, finite (one transfer), on-off (messages and gaps drawn from exponential or
//! Pareto distributions), periodic (a fixed transfer repeated on a fixed schedule), video (a
//! DASH-style player fetching segments one at a time, docs/simulator.md "Video"). UDP (no
//! congestion control): constant bit rate, and LogNormal inter-arrival times (004 §V-A3).

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
    /// A DASH-style player (the receiving end) streaming one video of `length` in segments of
    /// `segment`, each fetched at a bitrate of `ladder` (ascending) once the one before has fully
    /// arrived and the buffer has room for it (`max_buffer`), chosen by a throughput rule (the
    /// highest bitrate at most `safety` × the harmonic mean of the last `history` segments'
    /// download rates); playback starts with `startup` buffered (default: one segment).
    Video {
        ladder: Vec<Rate>,
        length: Duration,
        #[serde(default = "default_video_segment")]
        segment: Duration,
        #[serde(default)]
        startup: Option<Duration>,
        #[serde(default = "default_max_buffer")]
        max_buffer: Duration,
        #[serde(default = "default_safety")]
        safety: f64,
        #[serde(default = "default_history")]
        history: u32,
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
/// Pensieve's simulator's segment (hongzimao/pensieve sim/env.py, VIDEO_CHUNCK_LEN).
fn default_video_segment() -> Duration {
    Duration(4_000_000_000)
}
/// Pensieve's simulator's buffer limit (BUFFER_THRESH).
fn default_max_buffer() -> Duration {
    Duration(60_000_000_000)
}
/// dash.js's `abr.bandwidthSafetyFactor`.
fn default_safety() -> f64 {
    0.9
}
/// The past segments Pensieve's MPC and rate-based players average (test/mpc.py).
fn default_history() -> u32 {
    5
}

/// A segment larger than this many bytes (u32 TCP segments of 1448 bytes, with room to spare)
/// is refused rather than overflow the simulator's sequence space.
const MAX_SEGMENT_BYTES: u64 = 1 << 40;

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
            AppConfig::Video { .. } => self.validate_video(),
            _ => Ok(()),
        }
    }

    fn validate_video(&self) -> Result<(), String> {
        let AppConfig::Video { ladder, length, segment, startup, max_buffer, safety, history } = self else {
            return Ok(());
        };
        if ladder.is_empty() {
            return Err("ladder: list at least one bitrate".into());
        }
        if let Some(w) = ladder.windows(2).find(|w| w[0] >= w[1]) {
            return Err(format!("ladder: bitrates must ascend ({} is followed by {})", w[0], w[1]));
        }
        if segment.0 == 0 {
            return Err("segment: must be > 0".into());
        }
        let top = ladder[ladder.len() - 1];
        if top.bytes_in(*segment) > MAX_SEGMENT_BYTES {
            return Err(format!("ladder: a {} s segment at {top} exceeds {MAX_SEGMENT_BYTES} bytes", segment.as_secs_f64()));
        }
        if length.0 == 0 || length.0 % segment.0 != 0 {
            return Err(format!("length: must be a whole number (≥ 1) of {} s segments", segment.as_secs_f64()));
        }
        let startup = startup.unwrap_or(*segment);
        if startup.0 == 0 {
            return Err("startup: must be > 0".into());
        }
        if max_buffer.0 < startup.0.saturating_add(segment.0) {
            return Err(format!("max_buffer: must hold the startup buffer and one more segment (≥ {} s)", (startup.0 + segment.0) as f64 * 1e-9));
        }
        if !(*safety > 0.0 && *safety <= 1.0) {
            return Err("safety: must be in (0, 1]".into());
        }
        if *history == 0 {
            return Err("history: average at least one segment".into());
        }
        Ok(())
    }
}
