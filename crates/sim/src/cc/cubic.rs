//! CUBIC with HyStart, following net/ipv4/tcp_cubic.c (Linux 5.x defaults): β = 717/1024,
//! C = 410/1024 (bic_scale 41 × 10 / 1024), fast convergence, TCP-friendly region, updates rate
//! limited to once per HZ/32, HyStart ack-train and delay detection from cwnd ≥ 16.
//! The window curve is RFC 9438 Eq. 1: W(t) = C·(t − K)³ + W_max, K = ∛(W_max·(1 − β)/C).
//! Linux evaluates it in fixed point; this model uses f64. The difference is below one segment,
//! but at windows of a few segments Linux's truncation makes it regrow faster after a loss; the
//! port was measured and not adopted (docs/simulator.md, "What misses": Linux's windows leave in
//! fewer bursts than the model's).

use crate::cc::conn::{cong_avoid_ai, slow_start, CaState, Conn};

const BETA: f64 = 717.0 / 1024.0;
/// RFC 9438's C in segments/s³ as Linux scales it.
pub const C: f64 = 410.0 / 1024.0;
/// `beta_scale` of the TCP-friendly estimate: 8·(1024 + 717)/3/(1024 − 717) in integers.
const BETA_SCALE: u32 = 15;
const HYSTART_LOW_WINDOW: u32 = 16;
const HYSTART_ACK_DELTA_NS: u64 = 2_000_000;
const HYSTART_MIN_SAMPLES: u32 = 8;
const HYSTART_DELAY_MIN_NS: u64 = 4_000_000;
const HYSTART_DELAY_MAX_NS: u64 = 16_000_000;
/// Linux: `HZ / 32` between curve updates when cwnd has not changed.
const UPDATE_INTERVAL_NS: u64 = 31_250_000;

#[derive(Default)]
pub struct Cubic {
    cnt: u32,
    last_max_cwnd: u32,
    last_cwnd: u32,
    last_time_ns: u64,
    origin_point: u32,
    k_s: f64,
    delay_min_ns: u64,
    epoch_start_ns: Option<u64>,
    ack_cnt: u32,
    tcp_cwnd: u32,
    // HyStart
    found: bool,
    round_start_ns: u64,
    last_ack_ns: u64,
    end_seq: u32,
    curr_rtt_ns: u64,
    sample_cnt: u32,
}

impl Cubic {
    fn reset(&mut self) {
        *self = Cubic { round_start_ns: self.round_start_ns, ..Cubic::default() };
    }

    fn hystart_reset(&mut self, c: &Conn) {
        self.round_start_ns = c.now_ns;
        self.last_ack_ns = c.now_ns;
        self.end_seq = c.snd_nxt;
        self.curr_rtt_ns = u64::MAX;
        self.sample_cnt = 0;
    }

    pub fn ssthresh(&mut self, c: &Conn) -> u32 {
        self.epoch_start_ns = None;
        // Fast convergence: release bandwidth to newcomers (tcp_cubic.c `cubictcp_recalc_ssthresh`).
        self.last_max_cwnd = if c.cwnd < self.last_max_cwnd {
            (c.cwnd as u64 * (1024 + 717) / 2048) as u32
        } else {
            c.cwnd
        };
        ((c.cwnd as f64 * BETA) as u32).max(2)
    }

    pub fn set_state(&mut self, state: CaState) {
        if state == CaState::Loss {
            self.reset();
            self.curr_rtt_ns = u64::MAX;
        }
    }

    pub fn on_tx_start(&mut self, now_ns: u64, last_send_ns: u64) {
        // The curve must not grow during idle time (`cubictcp_cwnd_event`).
        if let Some(e) = self.epoch_start_ns.as_mut() {
            *e += now_ns.saturating_sub(last_send_ns);
            *e = (*e).min(now_ns);
        }
    }

    pub fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        if !c.cwnd_limited {
            return;
        }
        let mut acked = acked;
        if c.cwnd < c.ssthresh {
            if c.snd_una > self.end_seq {
                self.hystart_reset(c);
            }
            acked = slow_start(c, acked);
            if acked == 0 {
                return;
            }
        }
        self.update(c, acked);
        let w = self.cnt;
        cong_avoid_ai(c, w, acked);
    }

    fn update(&mut self, c: &Conn, acked: u32) {
        let cwnd = c.cwnd;
        let now = c.now_ns;
        self.ack_cnt += acked;
        if self.last_cwnd == cwnd && now.saturating_sub(self.last_time_ns) <= UPDATE_INTERVAL_NS {
            return;
        }
        if !(self.epoch_start_ns.is_some() && now == self.last_time_ns) {
            self.last_cwnd = cwnd;
            self.last_time_ns = now;
            let epoch = *self.epoch_start_ns.get_or_insert_with(|| {
                self.ack_cnt = acked;
                self.tcp_cwnd = cwnd;
                if self.last_max_cwnd <= cwnd {
                    self.k_s = 0.0;
                    self.origin_point = cwnd;
                } else {
                    self.k_s = ((self.last_max_cwnd - cwnd) as f64 / C).cbrt();
                    self.origin_point = self.last_max_cwnd;
                }
                now
            });
            // RFC 9438 Eq. 1, evaluated one min-RTT ahead as Linux does.
            let t = (now - epoch + self.delay_min_ns) as f64 * 1e-9;
            let target = self.origin_point as f64 + C * (t - self.k_s).powi(3);
            let target = target.max(0.0);
            self.cnt = if target > cwnd as f64 {
                ((cwnd as f64 / (target - cwnd as f64)) as u32).max(1)
            } else {
                100 * cwnd
            };
            if self.last_max_cwnd == 0 && self.cnt > 20 {
                self.cnt = 20;
            }
        }
        // TCP-friendly region: never grow slower than Reno would with β = 0.7 (RFC 9438 §4.3).
        let delta = (cwnd * BETA_SCALE) >> 3;
        if delta > 0 {
            while self.ack_cnt > delta {
                self.ack_cnt -= delta;
                self.tcp_cwnd += 1;
            }
        }
        if self.tcp_cwnd > cwnd {
            let max_cnt = cwnd / (self.tcp_cwnd - cwnd);
            self.cnt = self.cnt.min(max_cnt);
        }
        self.cnt = self.cnt.max(2);
    }

    pub fn pkts_acked(&mut self, c: &mut Conn, rtt_ns: Option<u64>) {
        let Some(rtt) = rtt_ns else { return };
        // Discard delay samples in the first second after a reduction (`cubictcp_acked`).
        if let Some(e) = self.epoch_start_ns {
            if c.now_ns.saturating_sub(e) < 1_000_000_000 {
                return;
            }
        }
        let delay = rtt.max(1);
        if self.delay_min_ns == 0 || self.delay_min_ns > delay {
            self.delay_min_ns = delay;
        }
        if !self.found && c.cwnd < c.ssthresh && c.cwnd >= HYSTART_LOW_WINDOW && self.hystart_update(c, delay) {
            c.ssthresh = c.cwnd;
        }
    }

    /// HyStart (Ha & Rhee 2011) as in `hystart_update`: leave slow start when ACKs of a round
    /// keep arriving densely beyond half the min RTT (the whole min RTT when paced: ack train),
    /// or when the round's min RTT exceeds the path's by clamp(min_rtt/8, 4 ms, 16 ms).
    fn hystart_update(&mut self, c: &Conn, delay: u64) -> bool {
        if c.snd_una > self.end_seq {
            self.hystart_reset(c);
        }
        let found = if c.now_ns.saturating_sub(self.last_ack_ns) <= HYSTART_ACK_DELTA_NS {
            self.last_ack_ns = c.now_ns;
            // Pacing may spread a slow-start round over RTT/2, so a paced train must be longer.
            let train = if c.fq_paced { self.delay_min_ns } else { self.delay_min_ns / 2 };
            c.now_ns - self.round_start_ns > train
        } else {
            false
        };
        let found = found || {
            self.curr_rtt_ns = self.curr_rtt_ns.min(delay);
            if self.sample_cnt < HYSTART_MIN_SAMPLES {
                self.sample_cnt += 1;
                false
            } else {
                let thresh = (self.delay_min_ns >> 3).clamp(HYSTART_DELAY_MIN_NS, HYSTART_DELAY_MAX_NS);
                self.curr_rtt_ns > self.delay_min_ns + thresh
            }
        };
        if found {
            self.found = true;
        }
        found
    }
}
