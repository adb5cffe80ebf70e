//! BBR v1 as in net/ipv4/tcp_bbr.c (Linux 5.1 to 6.x): Startup (gain 2/ln2), Drain, ProbeBW with
//! the eight-phase pacing-gain cycle (5/4, 3/4, 1 × 6) entered at a random phase, ProbeRTT (cwnd
//! 4 for 200 ms and one round when min_rtt is 10 s old, not while restarting from idle), bw the
//! 10-round windowed maximum as lib/win_minmax.c ages it, pacing at gain·bw·(1 − 1 %), cwnd =
//! gain·BDP + the ACK-aggregation allowance + the quantisation budget, packet conservation in the
//! first recovery round, and the long-term bandwidth ("policer") mode: two consecutive
//! 4..16-round intervals with ≥ 20 % loss and delivery rates within 1/8 (or 4 kbit/s) set bw =
//! their mean, pacing gain 1, for 48 rounds. The ACK-aggregation allowance (`extra_acked`) is the
//! most data acknowledged beyond bw × time within an ACK epoch over the last 5-10 rounds: stretch
//! ACKs (a receiver acknowledging a line-rate burst at its read) raise BBR's cwnd by their size.

use crate::cc::conn::{CaState, Conn, RateSample};
use crate::cc::win_max::WinMax;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const HIGH_GAIN: f64 = 2885.0 / 1000.0;
const DRAIN_GAIN: f64 = 1000.0 / 2885.0;
const CWND_GAIN: f64 = 2.0;
const PACING_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Random start phase: any but the 3/4 drain phase (`bbr_cycle_rand` = 7).
const CYCLE_RAND: u32 = 7;
const BW_WINDOW_ROUNDS: u64 = 10;
const MIN_RTT_WINDOW_NS: u64 = 10_000_000_000;
const PROBE_RTT_NS: u64 = 200_000_000;
const CWND_MIN_TARGET: u32 = 4;
const FULL_BW_THRESH: f64 = 1.25;
const FULL_BW_CNT: u32 = 3;
const LT_INTVL_MIN_RTTS: u32 = 4;
/// 50/256 ≈ 20 % loss marks a policed interval.
const LT_LOSS_THRESH: f64 = 50.0 / 256.0;
const LT_BW_RATIO: f64 = 1.0 / 8.0;
/// 4 kbit/s in bytes/s.
const LT_BW_DIFF_BYTES: f64 = 4000.0 / 8.0;
const LT_BW_MAX_RTTS: u32 = 48;
const PACING_MARGIN: f64 = 0.99;
const INIT_CWND: u32 = 10;
/// `bbr_extra_acked_win_rtts`: each of the two `extra_acked` maxima covers this many rounds.
const EXTRA_ACKED_WIN_ROUNDS: u32 = 5;
/// `bbr_ack_epoch_acked_reset_thresh`: an epoch this long (in segments) starts over.
const ACK_EPOCH_RESET_SEGMENTS: u64 = 1 << 20;
/// `bbr_extra_acked_max_us`: the allowance is at most this much time at bw.
const EXTRA_ACKED_MAX_NS: f64 = 100e6;

/// BBR's model of the path, as `ss -i` and TCP_CC_INFO show it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BbrModel {
    pub bw_bytes_per_sec: f64,
    pub min_rtt_ns: u64,
    pub pacing_gain: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

pub struct Bbr {
    pub mode: Mode,
    rng: ChaCha8Rng,
    min_rtt_ns: u64,
    min_rtt_stamp: u64,
    probe_rtt_done_stamp: Option<u64>,
    probe_rtt_round_done: bool,
    /// Restarting from an application-limited idle period, until the restart delivers data.
    idle_restart: bool,
    /// Windowed max of the delivery rate (segments/s) over 10 rounds, as Linux ages it.
    bw_filter: WinMax,
    rtt_cnt: u64,
    next_rtt_delivered: u64,
    round_start: bool,
    cycle_idx: usize,
    cycle_stamp: u64,
    pacing_gain: f64,
    cwnd_gain: f64,
    full_bw: f64,
    full_bw_cnt: u32,
    full_bw_reached: bool,
    lt_is_sampling: bool,
    lt_rtt_cnt: u32,
    pub lt_use_bw: bool,
    lt_bw: f64,
    lt_last_delivered: u64,
    lt_last_stamp: u64,
    lt_last_lost: u64,
    prior_cwnd: u32,
    /// `extra_acked[2]` and the rounds into the current one's window; the ACK epoch's start
    /// and the segments acknowledged since.
    extra_acked: [u32; 2],
    extra_acked_idx: usize,
    extra_acked_win_rounds: u32,
    ack_epoch_start_ns: u64,
    ack_epoch_acked: u64,
    packet_conservation: bool,
    prev_ca_state: CaState,
    pacing_rate: f64,
    mss: f64,
}

impl Bbr {
    pub fn new(seed: u64) -> Self {
        Bbr {
            mode: Mode::Startup,
            rng: ChaCha8Rng::seed_from_u64(seed),
            min_rtt_ns: u64::MAX,
            min_rtt_stamp: 0,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            idle_restart: false,
            bw_filter: WinMax::default(),
            rtt_cnt: 0,
            next_rtt_delivered: 0,
            round_start: false,
            cycle_idx: 0,
            cycle_stamp: 0,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            full_bw: 0.0,
            full_bw_cnt: 0,
            full_bw_reached: false,
            lt_is_sampling: false,
            lt_rtt_cnt: 0,
            lt_use_bw: false,
            lt_bw: 0.0,
            lt_last_delivered: 0,
            lt_last_stamp: 0,
            lt_last_lost: 0,
            prior_cwnd: 0,
            extra_acked: [0; 2],
            extra_acked_idx: 0,
            extra_acked_win_rounds: 0,
            ack_epoch_start_ns: 0,
            ack_epoch_acked: 0,
            packet_conservation: false,
            prev_ca_state: CaState::Open,
            pacing_rate: 0.0,
            mss: 1448.0,
        }
    }

    pub fn min_rtt_ns(&self) -> u64 {
        self.min_rtt_ns
    }

    pub fn pacing_rate_bytes_per_sec(&self) -> f64 {
        self.pacing_rate
    }

    /// What Linux reports in `tcp_bbr_info` (`bbr_get_info`): the bandwidth estimate in bytes/s
    /// (the long-term one while it is in use), min_rtt and the pacing gain.
    pub fn model(&self) -> BbrModel {
        BbrModel { bw_bytes_per_sec: self.bw() * self.mss, min_rtt_ns: self.min_rtt_ns, pacing_gain: self.pacing_gain }
    }

    /// Windowed max of the delivery rate (segments/s).
    fn max_bw(&self) -> f64 {
        self.bw_filter.get()
    }

    fn bw(&self) -> f64 {
        if self.lt_use_bw {
            self.lt_bw
        } else {
            self.max_bw()
        }
    }

    fn bdp(&self, bw: f64, gain: f64) -> u32 {
        if self.min_rtt_ns == u64::MAX {
            return INIT_CWND;
        }
        (bw * self.min_rtt_ns as f64 * 1e-9 * gain).ceil() as u32
    }

    fn tso_segs_goal(&self) -> u32 {
        // tcp_tso_autosize: one pacing-shift (≈ 1 ms) of data, at least 2 segments above 1.2 Mbit/s.
        let min = if self.pacing_rate < 1.2e6 / 8.0 { 1 } else { 2 };
        ((self.pacing_rate / 1024.0 / self.mss) as u32).clamp(min, 127)
    }

    fn quantization_budget(&self, cwnd: u32) -> u32 {
        let mut cwnd = cwnd + 3 * self.tso_segs_goal();
        cwnd = (cwnd + 1) & !1;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            cwnd += 2;
        }
        cwnd
    }

    fn inflight(&self, bw: f64, gain: f64) -> u32 {
        self.quantization_budget(self.bdp(bw, gain))
    }

    fn packets_in_net_at_edt(&self, c: &Conn, inflight_now: u32) -> u32 {
        let edt = c.edt_ns.max(c.now_ns);
        let interval_delivered = (self.bw() * (edt - c.now_ns) as f64 * 1e-9) as u32;
        let mut at_edt = inflight_now;
        if self.pacing_gain > 1.0 {
            at_edt += self.tso_segs_goal();
        }
        at_edt.saturating_sub(interval_delivered)
    }

    fn save_cwnd(&mut self, c: &Conn) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = c.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(c.cwnd);
        }
    }

    pub fn ssthresh(&mut self, c: &Conn) -> u32 {
        self.save_cwnd(c);
        c.ssthresh
    }

    pub fn set_state(&mut self, c: &Conn, state: CaState) {
        if state == CaState::Loss {
            self.prev_ca_state = CaState::Loss;
            self.full_bw = 0.0;
            self.round_start = true;
            let rs = RateSample { losses: 1, ..RateSample::default() };
            self.lt_bw_sampling(c, &rs);
        }
    }

    /// `bbr_init`, once the handshake is done: min_rtt is the handshake's RTT (`tcp_min_rtt`)
    /// and `bbr_init_pacing_rate_from_rtt` paces at high_gain·cwnd/srtt (less the 1 % margin of
    /// `bbr_bw_to_pacing_rate`).
    pub fn init(&mut self, c: &Conn) {
        self.mss = c.mss as f64;
        self.min_rtt_ns = c.min_rtt_ns;
        self.min_rtt_stamp = c.now_ns;
        self.cycle_stamp = c.now_ns;
        self.ack_epoch_start_ns = c.now_ns;
        self.pacing_rate = c.cwnd as f64 / (c.srtt_ns as f64 * 1e-9) * self.mss * HIGH_GAIN * PACING_MARGIN;
    }

    pub fn cong_control(&mut self, c: &mut Conn, rs: &RateSample) {
        self.update_bw(c, rs);
        self.update_ack_aggregation(c, rs);
        self.update_cycle_phase(c, rs);
        self.check_full_bw_reached(rs);
        self.check_drain(c);
        self.update_min_rtt(c, rs);
        self.update_gains();
        let bw = self.bw();
        self.set_pacing_rate(bw, self.pacing_gain);
        self.set_cwnd(c, rs, bw);
    }

    fn set_pacing_rate(&mut self, bw: f64, gain: f64) {
        let rate = bw * self.mss * gain * PACING_MARGIN;
        if rate > 0.0 && (self.full_bw_reached || rate > self.pacing_rate) {
            self.pacing_rate = rate;
        }
    }

    fn update_bw(&mut self, c: &Conn, rs: &RateSample) {
        self.round_start = false;
        if rs.delivered < 0 || rs.interval_ns <= 0 {
            return;
        }
        if rs.prior_delivered >= self.next_rtt_delivered {
            self.next_rtt_delivered = c.delivered;
            self.rtt_cnt += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        self.lt_bw_sampling(c, rs);
        let bw = rs.delivered as f64 / (rs.interval_ns as f64 * 1e-9);
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.bw_filter.update(BW_WINDOW_ROUNDS, self.rtt_cnt, bw);
        }
    }

    /// `bbr_update_ack_aggregation`: an epoch lasts while ACKs deliver faster than bw; what they
    /// delivered beyond bw × the epoch (at most a cwnd) is the epoch's excess, and the larger of
    /// two alternating 5-round maxima of it is the allowance.
    fn update_ack_aggregation(&mut self, c: &Conn, rs: &RateSample) {
        if rs.acked_sacked == 0 || rs.delivered < 0 || rs.interval_ns <= 0 {
            return;
        }
        if self.round_start {
            self.extra_acked_win_rounds = (self.extra_acked_win_rounds + 1).min(0x1f);
            if self.extra_acked_win_rounds >= EXTRA_ACKED_WIN_ROUNDS {
                self.extra_acked_win_rounds = 0;
                self.extra_acked_idx ^= 1;
                self.extra_acked[self.extra_acked_idx] = 0;
            }
        }
        let epoch_ns = c.now_ns.saturating_sub(self.ack_epoch_start_ns);
        let mut expected = (self.bw() * epoch_ns as f64 * 1e-9) as u64;
        let acked = rs.acked_sacked as u64;
        if self.ack_epoch_acked <= expected || self.ack_epoch_acked + acked >= ACK_EPOCH_RESET_SEGMENTS {
            self.ack_epoch_acked = 0;
            self.ack_epoch_start_ns = c.now_ns;
            expected = 0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + acked).min(0xfffff);
        let extra = (self.ack_epoch_acked - expected).min(c.cwnd as u64) as u32;
        let slot = &mut self.extra_acked[self.extra_acked_idx];
        *slot = (*slot).max(extra);
    }

    /// `bbr_ack_aggregation_cwnd`, once the pipe is full.
    fn ack_aggregation_cwnd(&self, bw: f64) -> u32 {
        if !self.full_bw_reached {
            return 0;
        }
        let max = (bw * EXTRA_ACKED_MAX_NS * 1e-9) as u32;
        self.extra_acked[0].max(self.extra_acked[1]).min(max)
    }

    fn reset_lt_interval(&mut self, c: &Conn) {
        self.lt_last_stamp = c.now_ns;
        self.lt_last_delivered = c.delivered;
        self.lt_last_lost = c.lost;
        self.lt_rtt_cnt = 0;
    }

    fn reset_lt(&mut self, c: &Conn) {
        self.lt_bw = 0.0;
        self.lt_use_bw = false;
        self.lt_is_sampling = false;
        self.reset_lt_interval(c);
    }

    fn lt_bw_sampling(&mut self, c: &Conn, rs: &RateSample) {
        if self.lt_use_bw {
            if self.mode == Mode::ProbeBw && self.round_start {
                self.lt_rtt_cnt += 1;
                if self.lt_rtt_cnt >= LT_BW_MAX_RTTS {
                    self.reset_lt(c);
                    self.reset_probe_bw_mode(c);
                }
            }
            return;
        }
        // Start on the first loss, once the policer's bucket is exhausted.
        if !self.lt_is_sampling {
            if rs.losses == 0 {
                return;
            }
            self.reset_lt_interval(c);
            self.lt_is_sampling = true;
        }
        if rs.is_app_limited {
            self.reset_lt(c);
            return;
        }
        if self.round_start {
            self.lt_rtt_cnt += 1;
        }
        if self.lt_rtt_cnt < LT_INTVL_MIN_RTTS {
            return;
        }
        if self.lt_rtt_cnt > 4 * LT_INTVL_MIN_RTTS {
            self.reset_lt(c);
            return;
        }
        if rs.losses == 0 {
            return;
        }
        let lost = c.lost - self.lt_last_lost;
        let delivered = c.delivered - self.lt_last_delivered;
        if delivered == 0 || (lost as f64) < LT_LOSS_THRESH * delivered as f64 {
            return;
        }
        // Linux measures the interval in whole milliseconds.
        let t_ms = (c.now_ns / 1_000_000).saturating_sub(self.lt_last_stamp / 1_000_000);
        if t_ms < 1 {
            return;
        }
        let bw = delivered as f64 / (t_ms as f64 * 1e-3);
        if self.lt_bw > 0.0 {
            let diff = (bw - self.lt_bw).abs();
            if diff <= LT_BW_RATIO * self.lt_bw || diff * self.mss <= LT_BW_DIFF_BYTES {
                self.lt_bw = (bw + self.lt_bw) / 2.0;
                self.lt_use_bw = true;
                self.pacing_gain = 1.0;
                self.lt_rtt_cnt = 0;
                return;
            }
        }
        self.lt_bw = bw;
        self.reset_lt_interval(c);
    }

    fn reset_probe_bw_mode(&mut self, c: &Conn) {
        self.mode = Mode::ProbeBw;
        let r = self.rng.gen_range(0..CYCLE_RAND) as usize;
        self.cycle_idx = PACING_GAINS.len() - 1 - r;
        self.advance_cycle_phase(c);
    }

    fn advance_cycle_phase(&mut self, c: &Conn) {
        self.cycle_idx = (self.cycle_idx + 1) % PACING_GAINS.len();
        self.cycle_stamp = c.now_ns;
    }

    fn update_cycle_phase(&mut self, c: &Conn, rs: &RateSample) {
        if self.mode != Mode::ProbeBw {
            return;
        }
        let full_length = c.now_ns.saturating_sub(self.cycle_stamp) > self.min_rtt_ns;
        let next = if self.pacing_gain == 1.0 {
            full_length
        } else {
            let inflight = self.packets_in_net_at_edt(c, rs.prior_in_flight);
            let bw = self.max_bw();
            if self.pacing_gain > 1.0 {
                full_length && (rs.losses > 0 || inflight >= self.inflight(bw, self.pacing_gain))
            } else {
                full_length || inflight <= self.inflight(bw, 1.0)
            }
        };
        if next {
            self.advance_cycle_phase(c);
        }
    }

    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        let max = self.max_bw();
        if max >= self.full_bw * FULL_BW_THRESH {
            self.full_bw = max;
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_CNT;
    }

    fn check_drain(&mut self, c: &mut Conn) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            c.ssthresh = self.inflight(self.max_bw(), 1.0);
        }
        if self.mode == Mode::Drain
            && self.packets_in_net_at_edt(c, c.in_flight) <= self.inflight(self.max_bw(), 1.0)
        {
            self.reset_probe_bw_mode(c);
        }
    }

    fn update_min_rtt(&mut self, c: &mut Conn, rs: &RateSample) {
        let expired = c.now_ns > self.min_rtt_stamp + MIN_RTT_WINDOW_NS;
        if let Some(rtt) = rs.rtt_ns {
            if rtt < self.min_rtt_ns || expired {
                self.min_rtt_ns = rtt;
                self.min_rtt_stamp = c.now_ns;
            }
        }
        if expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd(c);
            self.probe_rtt_done_stamp = None;
        }
        if self.mode == Mode::ProbeRtt {
            // The deliberately small flight must not pass for the path's rate: its samples are
            // app-limited, so they neither lower the bandwidth filter nor count as a long-term
            // interval (an app-limited sample resets long-term sampling).
            c.mark_app_limited(c.in_flight);
            match self.probe_rtt_done_stamp {
                None if c.in_flight <= CWND_MIN_TARGET => {
                    self.probe_rtt_done_stamp = Some(c.now_ns + PROBE_RTT_NS);
                    self.probe_rtt_round_done = false;
                    self.next_rtt_delivered = c.delivered;
                }
                Some(_) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done {
                        self.check_probe_rtt_done(c);
                    }
                }
                None => {}
            }
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    /// `bbr_check_probe_rtt_done`: ProbeRTT's 200 ms are over, so the cwnd comes back and the
    /// next min_rtt probe is 10 s away.
    fn check_probe_rtt_done(&mut self, c: &mut Conn) {
        if !self.probe_rtt_done_stamp.is_some_and(|done| c.now_ns > done) {
            return;
        }
        self.min_rtt_stamp = c.now_ns;
        c.cwnd = c.cwnd.max(self.prior_cwnd);
        if self.full_bw_reached {
            self.reset_probe_bw_mode(c);
        } else {
            self.mode = Mode::Startup;
        }
    }

    /// `bbr_cwnd_event(CA_EVENT_TX_START)`: the first transmission with nothing in flight. After
    /// an application-limited idle period BBR starts a new ACK epoch, paces at the estimated
    /// bandwidth rather than a probing or draining gain, ends a ProbeRTT whose time is up, and
    /// does not start one before the restart has delivered data.
    pub fn on_tx_start(&mut self, c: &mut Conn) {
        if c.app_limited == 0 {
            return;
        }
        self.idle_restart = true;
        self.ack_epoch_start_ns = c.now_ns;
        self.ack_epoch_acked = 0;
        match self.mode {
            Mode::ProbeBw => self.set_pacing_rate(self.bw(), 1.0),
            Mode::ProbeRtt => self.check_probe_rtt_done(c),
            _ => {}
        }
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw if self.lt_use_bw => (1.0, CWND_GAIN),
            Mode::ProbeBw => (PACING_GAINS[self.cycle_idx], CWND_GAIN),
            Mode::ProbeRtt => (1.0, 1.0),
        };
    }

    fn set_cwnd(&mut self, c: &mut Conn, rs: &RateSample, bw: f64) {
        let acked = rs.acked_sacked;
        let mut cwnd = c.cwnd;
        'done: {
            if acked == 0 {
                break 'done;
            }
            // Recovery: packet conservation for the first round, then restore (bbr_set_cwnd_to_recover_or_restore).
            if rs.losses > 0 {
                cwnd = cwnd.saturating_sub(rs.losses).max(1);
            }
            let state = c.ca_state;
            if state == CaState::Recovery && self.prev_ca_state != CaState::Recovery {
                self.packet_conservation = true;
                self.next_rtt_delivered = c.delivered;
                cwnd = c.in_flight + acked;
            } else if self.prev_ca_state >= CaState::Recovery && state < CaState::Recovery {
                cwnd = cwnd.max(self.prior_cwnd);
                self.packet_conservation = false;
            }
            self.prev_ca_state = state;
            if self.packet_conservation {
                cwnd = cwnd.max(c.in_flight + acked);
                break 'done;
            }
            let target = self.quantization_budget(self.bdp(bw, self.cwnd_gain) + self.ack_aggregation_cwnd(bw));
            if self.full_bw_reached {
                cwnd = (cwnd + acked).min(target);
            } else if cwnd < target || c.delivered < INIT_CWND as u64 {
                cwnd += acked;
            }
            cwnd = cwnd.max(CWND_MIN_TARGET);
        }
        if self.mode == Mode::ProbeRtt {
            cwnd = cwnd.min(CWND_MIN_TARGET);
        }
        c.cwnd = cwnd;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BBR past Startup with bw = 1000 segments/s, fed `acks` ACKs of `size` segments each,
    /// `size` ms apart (the same rate whatever the size): its ACK-aggregation allowance.
    fn allowance(size: u32, acks: u32) -> u32 {
        let mut bbr = Bbr::new(1);
        let mut c = Conn { in_flight: 20, cwnd_limited: true, min_rtt_ns: 20_000_000, srtt_ns: 20_000_000, ..Conn::new(40, 1448) };
        bbr.init(&c);
        bbr.full_bw_reached = true;
        bbr.mode = Mode::ProbeBw;
        bbr.bw_filter.update(BW_WINDOW_ROUNDS, 0, 1000.0);
        for _ in 0..acks {
            c.now_ns += size as u64 * 1_000_000;
            c.delivered += size as u64;
            let rs = RateSample { delivered: size as i64, interval_ns: size as i64 * 1_000_000, acked_sacked: size, prior_delivered: 0, ..RateSample::default() };
            bbr.update_ack_aggregation(&c, &rs);
        }
        bbr.ack_aggregation_cwnd(bbr.bw())
    }

    #[test]
    fn stretch_acks_raise_the_cwnd_by_their_size() {
        assert_eq!(allowance(1, 50), 1, "one segment a millisecond: no aggregation beyond the ACK itself");
        assert_eq!(allowance(10, 5), 10, "ten segments every 10 ms: ten segments of allowance");
        assert_eq!(allowance(60, 2), 40, "at most a cwnd");
    }

    #[test]
    fn a_probe_rtt_longer_than_the_bandwidth_window_keeps_the_bandwidth() {
        // ProbeRTT holds four segments in flight for 200 ms: 20 rounds on a 10 ms path, twice
        // the filter's window. Its samples are app-limited and far below the estimate.
        let mut bbr = Bbr::new(1);
        let mut c = Conn::new(40, 1448);
        bbr.init(&c);
        bbr.bw_filter.update(BW_WINDOW_ROUNDS, 0, 4000.0);
        for _ in 0..20 {
            let prior_delivered = c.delivered;
            c.delivered += 4;
            let rs = RateSample { delivered: 4, interval_ns: 10_000_000, prior_delivered, is_app_limited: true, ..RateSample::default() };
            bbr.update_bw(&c, &rs);
        }
        assert_eq!(bbr.rtt_cnt, 20);
        assert_eq!(bbr.max_bw(), 4000.0, "no sample entered the filter, so nothing aged out of it");
        let prior_delivered = c.delivered;
        c.delivered += 38;
        let rs = RateSample { delivered: 38, interval_ns: 10_000_000, prior_delivered, ..RateSample::default() };
        bbr.update_bw(&c, &rs);
        assert_eq!(bbr.max_bw(), 3800.0, "the first full sample after the window replaces the estimate");
    }

    #[test]
    fn a_restart_from_idle_paces_at_the_estimate_and_defers_probe_rtt_until_data_is_delivered() {
        let mut bbr = Bbr::new(1);
        let mut c = Conn { min_rtt_ns: 20_000_000, srtt_ns: 20_000_000, ..Conn::new(40, 1448) };
        bbr.init(&c);
        bbr.full_bw_reached = true;
        bbr.bw_filter.update(BW_WINDOW_ROUNDS, 0, 1000.0);
        bbr.reset_probe_bw_mode(&c);
        bbr.cycle_idx = 0;
        bbr.set_pacing_rate(bbr.bw(), PACING_GAINS[0]);
        let at_estimate = 1000.0 * 1448.0 * PACING_MARGIN;
        c.now_ns = 11_000_000_000;
        bbr.on_tx_start(&mut c);
        assert!(!bbr.idle_restart, "a sender that was not application-limited did not idle");
        assert!(bbr.pacing_rate > at_estimate, "still probing at 5/4");
        c.mark_app_limited(0);
        bbr.on_tx_start(&mut c);
        assert_eq!(bbr.pacing_rate, at_estimate, "the restart paces at the estimate");
        assert_eq!(bbr.ack_epoch_start_ns, c.now_ns, "a new ACK epoch");
        // min_rtt is 11 s old: only a delivery ends the restart and lets ProbeRTT begin.
        let nothing_delivered = RateSample { delivered: 0, rtt_ns: Some(25_000_000), ..RateSample::default() };
        bbr.update_min_rtt(&mut c, &nothing_delivered);
        assert_eq!(bbr.mode, Mode::ProbeBw);
        let delivered = RateSample { delivered: 1, ..nothing_delivered };
        bbr.update_min_rtt(&mut c, &delivered);
        assert!(!bbr.idle_restart);
        c.now_ns += MIN_RTT_WINDOW_NS + 1;
        bbr.update_min_rtt(&mut c, &delivered);
        assert_eq!(bbr.mode, Mode::ProbeRtt, "with the restart over, an expired min_rtt starts ProbeRTT");
    }
}
