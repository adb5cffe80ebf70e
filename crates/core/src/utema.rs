//! UTEMA bandwidth estimation (004 §III-B5, Algorithm 4, Eq. 1-2).
//!
//! Two unbiased time-exponentially weighted sums, S_B of bytes sent and S_T of their transmission
//! times, both decayed by e^(−Δ/M); the estimate is C = S_B / S_T. Only packets that leave a
//! backlogged queue count, so idle time never reads as slow transmission.
//! Memory M: the paper's Table IV says 50 ms (the authors' qdisc defaults to 100 ms); we take 50 ms.

use crate::exp_decay::ExpMode;
use crate::time::{Duration, Instant};

/// Scaling of S_B in fixed-point mode (credits and bytes ×2^10, 004 §IV-B3's s_m = 10).
const BYTE_SCALE: u32 = 10;

/// The UTEMA weighted sum S_X(t) = S_X(t_last)·e^(−μ(t − t_last)) + X (Eq. 1-2), kept as an
/// integer so that the fixed-point exp of 004 §IV-B applies unchanged.
#[derive(Debug, Clone)]
pub struct Utema {
    sum: u64,
    last: Option<Instant>,
    memory: Duration,
    mode: ExpMode,
}

impl Utema {
    pub fn new(memory: Duration, mode: ExpMode) -> Self {
        Utema { sum: 0, last: None, memory, mode }
    }

    /// Adds sample `x` at `now`; the first sample meets an empty sum (t_last = −∞).
    pub fn add(&mut self, now: Instant, x: u64) {
        let decayed = match self.last {
            Some(last) => self.mode.decay(self.sum, now.saturating_since(last), self.memory),
            None => 0,
        };
        self.sum = decayed.saturating_add(x);
        self.last = Some(now);
    }

    pub fn sum(&self) -> u64 {
        self.sum
    }
}

/// Algorithm 4 (EstimateBandwidth): call `on_dequeue` at the end of every successful dequeue.
#[derive(Debug, Clone)]
pub struct BandwidthEstimator {
    bytes: Utema,
    nanos: Utema,
    backlogged: bool,
    last_dequeue: Instant,
    last_pkt_size: u64,
    /// Estimated bandwidth in bytes per second.
    rate: f64,
}

impl BandwidthEstimator {
    /// Starts from `initial` bytes/s (the configured link rate) until the first backlogged sample.
    pub fn new(initial_bytes_per_sec: f64, memory: Duration, mode: ExpMode) -> Self {
        BandwidthEstimator {
            bytes: Utema::new(memory, mode),
            nanos: Utema::new(memory, mode),
            backlogged: false,
            last_dequeue: Instant::ZERO,
            last_pkt_size: 0,
            rate: initial_bytes_per_sec,
        }
    }

    /// `pkt_len` just left at `now`; `still_backlogged` says whether packets remain queued.
    pub fn on_dequeue(&mut self, now: Instant, pkt_len: u64, still_backlogged: bool) {
        if self.backlogged {
            // Lines 2-6: the previous packet's transmission time is the gap to this dequeue.
            let tx_time = now.saturating_since(self.last_dequeue).0;
            self.bytes.add(now, self.last_pkt_size << BYTE_SCALE);
            self.nanos.add(now, tx_time);
            if self.nanos.sum() > 0 {
                self.rate = self.bytes.sum() as f64 / (1u64 << BYTE_SCALE) as f64 * 1e9 / self.nanos.sum() as f64;
            }
        }
        self.backlogged = still_backlogged; // lines 7-10
        self.last_dequeue = now;
        self.last_pkt_size = pkt_len;
    }

    /// C in bytes per second.
    pub fn bytes_per_sec(&self) -> f64 {
        self.rate
    }
}
