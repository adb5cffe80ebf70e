//! Copa (Arun & Balakrishnan, NSDI 2018, §2) in its default mode, as genericCC's `markoviancc`
//! runs it: target rate λt = 1/(δ·dq) packets/s with δ = 0.5 and dq = RTTstanding − RTTmin
//! (RTTstanding: the least RTT of the last srtt/2; RTTmin: the least of the last 10 s); current
//! rate λ = cwnd/RTTstanding. Per acknowledged packet cwnd moves by v/(δ·cwnd) towards the
//! target; the velocity v doubles once per RTT after the direction has held for three RTTs and
//! is 1 again when it turns (at most cwnd, as genericCC caps it). Slow start grows cwnd by one
//! per packet acknowledged (doubling per RTT) until cwnd reaches the target window. Pacing at
//! 2·cwnd/RTTstanding. Losses change nothing (genericCC's default mode ignores them; the sender
//! still repairs them). Competitive mode is not modelled (docs/simulator.md says why).

use crate::cc::conn::{Conn, RateSample};
use std::collections::VecDeque;

const DELTA: f64 = 0.5;
const MIN_RTT_WINDOW_NS: u64 = 10_000_000_000;
/// RTTs the direction must hold before the velocity starts doubling.
const SAME_DIRECTION_RTTS: u32 = 3;
const MIN_CWND: f64 = 2.0;
const PACING_GAIN: f64 = 2.0;

pub struct Copa {
    cwnd: f64,
    slow_start: bool,
    velocity: f64,
    /// +1 up, −1 down: the direction of the last RTT, and how many RTTs in a row it held.
    direction: i8,
    same_direction_rtts: u32,
    rtt_start_ns: u64,
    rtt_start_cwnd: f64,
    min_rtt_ns: u64,
    min_rtt_stamp_ns: u64,
    /// (time, RTT) samples of the last srtt/2, RTTs increasing: the front is RTTstanding.
    standing: VecDeque<(u64, u64)>,
    mss: f64,
    pacing_rate: f64,
}

impl Copa {
    pub fn new() -> Self {
        Copa {
            cwnd: 0.0,
            slow_start: true,
            velocity: 1.0,
            direction: 1,
            same_direction_rtts: 0,
            rtt_start_ns: 0,
            rtt_start_cwnd: 0.0,
            min_rtt_ns: u64::MAX,
            min_rtt_stamp_ns: 0,
            standing: VecDeque::new(),
            mss: 1448.0,
            pacing_rate: 0.0,
        }
    }

    /// Starts from the handshake: its RTT is the first sample, the initial window the first cwnd.
    pub fn init(&mut self, c: &Conn) {
        self.mss = c.mss as f64;
        self.cwnd = c.cwnd as f64;
        self.rtt_start_ns = c.now_ns;
        self.rtt_start_cwnd = self.cwnd;
        self.add_rtt(c.now_ns, c.min_rtt_ns, c.srtt_ns);
        self.set_pacing_rate();
    }

    pub fn pacing_rate_bytes_per_sec(&self) -> f64 {
        self.pacing_rate
    }

    /// Copa's estimate of the queueing delay, dq = RTTstanding − RTTmin.
    pub fn queue_delay_ns(&self) -> u64 {
        self.standing_rtt_ns().saturating_sub(self.min_rtt_ns)
    }

    fn standing_rtt_ns(&self) -> u64 {
        self.standing.front().map_or(self.min_rtt_ns, |&(_, r)| r)
    }

    fn add_rtt(&mut self, now: u64, rtt: u64, srtt: u64) {
        if rtt <= self.min_rtt_ns || now > self.min_rtt_stamp_ns + MIN_RTT_WINDOW_NS {
            self.min_rtt_ns = rtt;
            self.min_rtt_stamp_ns = now;
        }
        while self.standing.back().is_some_and(|&(_, r)| r >= rtt) {
            self.standing.pop_back();
        }
        self.standing.push_back((now, rtt));
        let horizon = now.saturating_sub(srtt / 2);
        while self.standing.len() > 1 && self.standing.front().is_some_and(|&(t, _)| t < horizon) {
            self.standing.pop_front();
        }
    }

    fn set_pacing_rate(&mut self) {
        let standing_s = self.standing_rtt_ns() as f64 * 1e-9;
        if standing_s > 0.0 {
            self.pacing_rate = PACING_GAIN * self.cwnd * self.mss / standing_s;
        }
    }

    /// Once per RTT: the direction of the RTT that ended, and the velocity it earns.
    fn update_velocity(&mut self, now: u64, srtt: u64) {
        if now < self.rtt_start_ns + srtt {
            return;
        }
        let direction = if self.cwnd > self.rtt_start_cwnd { 1 } else { -1 };
        if direction == self.direction {
            self.same_direction_rtts += 1;
            if self.same_direction_rtts >= SAME_DIRECTION_RTTS {
                self.velocity *= 2.0;
            }
        } else {
            self.direction = direction;
            self.same_direction_rtts = 0;
            self.velocity = 1.0;
        }
        self.rtt_start_ns = now;
        self.rtt_start_cwnd = self.cwnd;
    }

    pub fn cong_control(&mut self, c: &mut Conn, rs: &RateSample) {
        if let Some(rtt) = rs.latest_rtt_ns {
            self.add_rtt(c.now_ns, rtt, c.srtt_ns);
        }
        let acked = rs.acked_sacked as f64;
        if acked > 0.0 {
            let standing = self.standing_rtt_ns() as f64;
            let dq = self.queue_delay_ns() as f64;
            // λ ≤ λt ⇔ cwnd/RTTstanding ≤ 1/(δ·dq) ⇔ cwnd ≤ RTTstanding/(δ·dq) (Eq. 1); no
            // queue at all puts the target at infinity.
            let target = if dq > 0.0 { standing / (DELTA * dq) } else { f64::INFINITY };
            if self.slow_start {
                self.cwnd += acked;
                self.slow_start = self.cwnd < target;
            } else {
                self.update_velocity(c.now_ns, c.srtt_ns);
                let v = self.velocity.min(self.cwnd);
                let step = acked * v / (DELTA * self.cwnd);
                self.cwnd = if self.cwnd <= target { self.cwnd + step } else { (self.cwnd - step).max(MIN_CWND) };
            }
        }
        c.cwnd = self.cwnd.round().max(MIN_CWND) as u32;
        self.set_pacing_rate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Copa past slow start fed one ACK per packet at a fixed RTT for `rtts` round trips of
    /// `per_rtt` ACKs each: its window afterwards.
    fn window_after(rtt_ns: u64, min_rtt_ns: u64, per_rtt: u32, rtts: u32) -> (f64, f64) {
        let mut copa = Copa::new();
        let mut c = Conn { min_rtt_ns, srtt_ns: rtt_ns, ..Conn::new(20, 1448) };
        copa.init(&c);
        copa.slow_start = false;
        for i in 0..rtts * per_rtt {
            c.now_ns = (i as u64 + 1) * rtt_ns / per_rtt as u64;
            copa.cong_control(&mut c, &RateSample { acked_sacked: 1, latest_rtt_ns: Some(rtt_ns), ..RateSample::default() });
        }
        (copa.cwnd, copa.velocity)
    }

    #[test]
    fn the_window_moves_towards_one_over_delta_dq_and_speeds_up_after_three_rtts() {
        // 10 ms RTT over a 9 ms minimum: dq = 1 ms, so the target window is 10/(0.5·1) = 20
        // segments, where the window stays; with a 10 ms minimum (dq = 0) it only grows, by 1/δ = 2
        // segments per RTT until the direction has held for three RTTs, then faster.
        let (w, _) = window_after(10_000_000, 9_000_000, 20, 30);
        assert!((15.0..=25.0).contains(&w), "window {w} not near the target of 20");
        let (w2, v2) = window_after(10_000_000, 10_000_000, 20, 2);
        assert!((w2 - 24.0).abs() < 1.0 && v2 == 1.0, "two RTTs at v = 1 add about 4 segments: {w2}, v {v2}");
        let (w8, v8) = window_after(10_000_000, 10_000_000, 20, 8);
        assert!(v8 >= 8.0 && w8 > 60.0, "the velocity doubles per RTT once the direction held: {w8}, v {v8}");
    }
}
