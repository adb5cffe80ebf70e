//! CUBIC with HyStart, following net/ipv4/tcp_cubic.c (Linux 5.x-6.x defaults): β = 717/1024,
//! C = 410/1024 (bic_scale 41 × 10 / 1024), fast convergence, TCP-friendly region, updates rate
//! limited to once per HZ/32, HyStart ack-train and delay detection from cwnd ≥ 16.
//! The window curve is RFC 9438 Eq. 1: W(t) = C·(t − K)³ + W_max, K = ∛(W_max·(1 − β)/C),
//! evaluated as Linux does: time in jiffies scaled to 1/1024 s, the target a whole number of
//! segments. At the windows a small policer bucket leaves (3-5 segments) that rounding is the
//! curve: the target sits at W_max while C·(t − K)³ < 1 (the first 1.36 s past K, where a
//! real-valued curve already creeps above it) and reaches W_max at once below it (where the
//! real-valued one gives cnt = cwnd/0.13).

use crate::cc::conn::{cong_avoid_ai, slow_start, CaState, Conn};

const BETA: f64 = 717.0 / 1024.0;
/// `cube_rtt_scale`: RFC 9438's C × 1024 segments/s³.
const CUBE_RTT_SCALE: u64 = 410;
/// `BICTCP_HZ`: the curve's time unit is 2^-10 s.
const BICTCP_HZ: u32 = 10;
/// `cube_factor`: 2^(10 + 3·BICTCP_HZ) / cube_rtt_scale, so that K = ∛(cube_factor·ΔW) in 2^-10 s.
const CUBE_FACTOR: u64 = (1 << (10 + 3 * BICTCP_HZ)) / CUBE_RTT_SCALE;
/// `beta_scale` of the TCP-friendly estimate: 8·(1024 + 717)/3/(1024 − 717) in integers.
const BETA_SCALE: u32 = 15;
const HYSTART_LOW_WINDOW: u32 = 16;
const HYSTART_ACK_DELTA_NS: u64 = 2_000_000;
const HYSTART_MIN_SAMPLES: u32 = 8;
const HYSTART_DELAY_MIN_NS: u64 = 4_000_000;
const HYSTART_DELAY_MAX_NS: u64 = 16_000_000;

#[derive(Default)]
pub struct Cubic {
    cnt: u32,
    last_max_cwnd: u32,
    last_cwnd: u32,
    last_time_jiffies: u64,
    origin_point: u32,
    /// K in 2^-10 s.
    bic_k: u64,
    delay_min_ns: u64,
    epoch_start_jiffies: Option<u64>,
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
        self.epoch_start_jiffies = None;
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

    pub fn on_tx_start(&mut self, jiffy_ns: u64, now_ns: u64, last_send_ns: u64) {
        // The curve must not grow during idle time (`cubictcp_cwnd_event`).
        let now = now_ns / jiffy_ns;
        if let Some(e) = self.epoch_start_jiffies.as_mut() {
            *e += now.saturating_sub(last_send_ns / jiffy_ns);
            *e = (*e).min(now);
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
        let now = c.now_ns / c.jiffy_ns;
        let hz = 1_000_000_000 / c.jiffy_ns;
        self.ack_cnt += acked;
        if self.last_cwnd == cwnd && now.saturating_sub(self.last_time_jiffies) <= hz / 32 {
            return;
        }
        // The curve is evaluated at most once per jiffy.
        if !(self.epoch_start_jiffies.is_some() && now == self.last_time_jiffies) {
            self.last_cwnd = cwnd;
            self.last_time_jiffies = now;
            let epoch = *self.epoch_start_jiffies.get_or_insert_with(|| {
                self.ack_cnt = acked;
                self.tcp_cwnd = cwnd;
                if self.last_max_cwnd <= cwnd {
                    self.bic_k = 0;
                    self.origin_point = cwnd;
                } else {
                    self.bic_k = integer_cbrt(CUBE_FACTOR * (self.last_max_cwnd - cwnd) as u64);
                    self.origin_point = self.last_max_cwnd;
                }
                now
            });
            // One min-RTT ahead (`usecs_to_jiffies(delay_min)`, rounded up), in 2^-10 s.
            let ahead = (self.delay_min_ns / 1000).div_ceil(c.jiffy_ns / 1000);
            let t = ((now - epoch + ahead) << BICTCP_HZ) / hz;
            let offs = t.abs_diff(self.bic_k);
            let delta = (CUBE_RTT_SCALE.saturating_mul(offs.saturating_pow(3)) >> (10 + 3 * BICTCP_HZ)).min(u32::MAX as u64) as u32;
            let target = if t < self.bic_k {
                self.origin_point.saturating_sub(delta)
            } else {
                self.origin_point.saturating_add(delta)
            };
            self.cnt = if target > cwnd { cwnd / (target - cwnd) } else { 100 * cwnd };
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
        if let Some(e) = self.epoch_start_jiffies {
            if (c.now_ns / c.jiffy_ns).saturating_sub(e) * c.jiffy_ns < 1_000_000_000 {
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

/// ⌊∛a⌋. Linux's `cubic_root` approximates it (a table and one Newton step, within 0.2 %).
fn integer_cbrt(a: u64) -> u64 {
    let mut x = (a as f64).cbrt() as u64;
    while x.checked_pow(3).map_or(true, |c| c > a) {
        x -= 1;
    }
    while (x + 1).checked_pow(3).is_some_and(|c| c <= a) {
        x += 1;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(cwnd: u32, now_ns: u64) -> Conn {
        Conn { cwnd, ssthresh: cwnd, cwnd_limited: true, now_ns, ..Conn::new(cwnd, 1448) }
    }

    #[test]
    fn the_curve_counts_whole_segments_as_linux_does() {
        // After a loss at 5 segments (W_max 4 by fast convergence, cwnd 3) on a 60 ms path:
        // C·(K − t)³ = 0.87 is under a segment, so the target is W_max at once (cnt 3, one
        // segment per RTT); the real-valued curve's 3.13 would give cnt 23.
        let mut cubic = Cubic { last_max_cwnd: 4, delay_min_ns: 60_000_000, ..Cubic::default() };
        cubic.update(&conn(3, 1_000_000_000), 1);
        assert_eq!(cubic.cnt, 3);
        // Half a second past K the real-valued curve is 0.05 above W_max (cnt 80); Linux's
        // target is W_max itself until C·(t − K)³ reaches a segment, so the window holds.
        cubic.update(&conn(4, 2_796_000_000), 1);
        assert_eq!(cubic.cnt, 400);
    }

    #[test]
    fn integer_cbrt_is_the_floor() {
        for a in [0u64, 1, 7, 8, 26, 27, 1 << 40, u64::MAX] {
            let x = integer_cbrt(a);
            assert!(x.pow(3) <= a && (x + 1).checked_pow(3).map_or(true, |c| c > a), "{a}: {x}");
        }
    }
}
