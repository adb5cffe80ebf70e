//! CUBIC with HyStart, following net/ipv4/tcp_cubic.c (Linux 6.18 defaults): β = 717/1024,
//! C = 410/1024 (bic_scale 41 × 10 / 1024), fast convergence, TCP-friendly region, updates rate
//! limited to once per HZ/32, HyStart ack-train and delay detection from cwnd ≥ 16, its rounds
//! counted from the first window.
//! The window curve is RFC 9438 Eq. 1: W(t) = C·(t − K)³ + W_max, K = ∛(W_max·(1 − β)/C).
//! Linux evaluates it in fixed point; this model uses f64. The difference is below one segment,
//! but at windows of a few segments Linux's truncation makes it regrow faster after a loss; the
//! port was measured and not adopted (docs/simulator.md, "What misses": Linux's windows leave in
//! fewer bursts than the model's).

use crate::cc::conn::{cong_avoid_ai, slow_start, CaState, Conn, GSO_MAX_SIZE};
use ratekit_lab::summary::HystartCounts;

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

/// `hystart_ack_delay`: a cushion for TSO and GRO batching in the ack train, the time of four
/// GSO packets at the pacing rate, at most 1 ms; none before the rate is known.
fn hystart_ack_delay_ns(c: &Conn) -> u64 {
    c.sk_pacing_rate.map_or(0, |rate| (4.0 * GSO_MAX_SIZE * 1e9 / rate).min(1e6) as u64)
}

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
    /// Kept across timeouts, as Linux's counters are.
    exits: HystartCounts,
}

impl Cubic {
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

    /// A timeout forgets the curve and the path's delay and starts a HyStart round that lasts
    /// until what was in flight is acknowledged (`cubictcp_state`).
    pub fn set_state(&mut self, c: &Conn, state: CaState) {
        if state == CaState::Loss {
            *self = Cubic { exits: self.exits, ..Cubic::default() };
            self.hystart_reset(c);
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
        if !self.found && c.cwnd < c.ssthresh && self.hystart_update(c, delay) {
            c.ssthresh = c.cwnd;
        }
    }

    /// HyStart (Ha & Rhee 2011) as in `hystart_update`: leave slow start when ACKs of a round
    /// keep arriving densely beyond half the min RTT (the whole min RTT when paced: ack train),
    /// or when the round's min RTT exceeds the path's by clamp(min_rtt/8, 4 ms, 16 ms).
    /// Rounds are counted from the first window on, cwnd-limited or not (Linux 6.18's order).
    fn hystart_update(&mut self, c: &Conn, delay: u64) -> bool {
        if c.snd_una > self.end_seq {
            self.hystart_reset(c);
        }
        if c.cwnd < HYSTART_LOW_WINDOW {
            return false;
        }
        let by_train = c.now_ns.saturating_sub(self.last_ack_ns) <= HYSTART_ACK_DELTA_NS && {
            self.last_ack_ns = c.now_ns;
            // Pacing may spread a slow-start round over RTT/2, so a paced train must be longer.
            let threshold = self.delay_min_ns + hystart_ack_delay_ns(c);
            let train = if c.fq_paced { threshold } else { threshold / 2 };
            c.now_ns - self.round_start_ns > train
        };
        self.curr_rtt_ns = self.curr_rtt_ns.min(delay);
        let by_delay = if self.sample_cnt < HYSTART_MIN_SAMPLES {
            self.sample_cnt += 1;
            false
        } else {
            let thresh = (self.delay_min_ns >> 3).clamp(HYSTART_DELAY_MIN_NS, HYSTART_DELAY_MAX_NS);
            self.curr_rtt_ns > self.delay_min_ns + thresh
        };
        // Linux counts each detector that fired (TCPHystartTrainDetect, TCPHystartDelayDetect)
        // and adds the window it fired at.
        if by_train {
            self.exits.train += 1;
            self.exits.train_cwnd += c.cwnd as u64;
        }
        if by_delay {
            self.exits.delay += 1;
            self.exits.delay_cwnd += c.cwnd as u64;
        }
        self.found |= by_train || by_delay;
        by_train || by_delay
    }

    /// How HyStart ended slow start so far, as Linux's four counters count it.
    pub fn hystart_exits(&self) -> HystartCounts {
        self.exits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const ACK_GAP_NS: u64 = 250_000;

    /// Feeds a slow start ACKs `ACK_GAP_NS` apart, each with an RTT sample of `rtt_ns`, acking
    /// one segment each from `first_una`; returns the time of the ACK that ended slow start.
    fn ack_train_until_exit(cubic: &mut Cubic, c: &mut Conn, start_ns: u64, first_una: u32, acks: u32, rtt_ns: u64) -> Option<u64> {
        (0..acks).find_map(|i| {
            c.now_ns = start_ns + i as u64 * ACK_GAP_NS;
            c.snd_una = first_una + i;
            cubic.pkts_acked(c, Some(rtt_ns));
            (c.ssthresh != u32::MAX).then_some(c.now_ns - start_ns)
        })
    }

    fn slow_start(pacing_rate: f64) -> (Cubic, Conn) {
        (Cubic::default(), Conn { snd_nxt: 1000, sk_pacing_rate: Some(pacing_rate), ..Conn::new(20, 1448) })
    }

    #[test]
    fn the_ack_train_must_outlast_half_the_min_rtt_plus_a_cushion_of_four_gso_packets() {
        // At 1 MB/s four 64 KB packets take far longer than 1 ms, so the cushion is 1 ms and
        // a 10 ms path's train must pass (10 + 1) / 2 ms: the first ACK after 5.5 ms ends it.
        let (mut cubic, mut c) = slow_start(1e6);
        assert_eq!(ack_train_until_exit(&mut cubic, &mut c, 0, 1, 100, 10 * MS), Some(5_750_000));
        // At 1.31 GB/s the four packets take 0.2 ms: the train must pass 5.1 ms.
        let (mut cubic, mut c) = slow_start(4.0 * GSO_MAX_SIZE * 1e9 / 200_000.0);
        assert_eq!(ack_train_until_exit(&mut cubic, &mut c, 0, 1, 100, 10 * MS), Some(5_250_000));
    }

    #[test]
    fn after_a_timeout_the_ack_train_waits_for_the_round_in_flight_at_the_timeout() {
        let (mut cubic, mut c) = slow_start(1e6);
        c.snd_una = 50;
        cubic.set_state(&c, CaState::Loss);
        // ACKs of what was in flight at the timeout come an RTT later: more than the train's
        // 2 ms gap after the round began, so however dense they are they make no train.
        let in_flight_round = ack_train_until_exit(&mut cubic, &mut c, 40 * MS, 51, 200, 40 * MS);
        assert_eq!(in_flight_round, None, "a train counted from the timeout's round");
        c.snd_nxt = 2000;
        let next_round = ack_train_until_exit(&mut cubic, &mut c, 100 * MS, 1001, 200, 40 * MS);
        assert_eq!(next_round, Some(20_750_000), "(40 + 1) / 2 ms after the round began");
    }
}
