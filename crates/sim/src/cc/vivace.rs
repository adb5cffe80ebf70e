//! PCC Vivace (Dong et al., NSDI 2018, §3-4) with the monitor intervals of PCC-Uspace's sender:
//! the flow sends at a rate, in monitor intervals (MIs) of max(srtt, 20 packets at the rate),
//! and scores each MI once every packet it sent is delivered or lost with the utility
//! u = x^0.9 − 900·x·dRTT/dT − 11.35·x·L (x the MI's sending rate in Mbit/s, dRTT/dT the
//! trend of its RTT samples as PCC-Uspace estimates it, L its loss rate).
//! Starting: the rate doubles every MI until an MI scores below the one before, then falls
//! back to that one's rate. Probing: two pairs of MIs at r(1 + ε) and r(1 − ε), ε = 0.05, in a
//! seeded random order; if both pairs' gradients agree, Moving: the rate changes by
//! m(τ)·θ0·γ (γ the utility gradient, θ0 = 1 Mbit/s per unit of it, the confidence amplifier
//! m(τ) = τ for the τ-th consecutive step) at most ω·r, the dynamic change boundary
//! ω = ω0 + k·δ (ω0 = 0.05, δ = 0.1, k the consecutive steps the boundary clipped); an MI whose
//! gradient against the previous one points the other way sends the flow back to Probing.
//! The rate paces every segment; cwnd only bounds the flight at twice the rate's BDP.

use crate::cc::conn::{Conn, RateSample};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

const EXPONENT: f64 = 0.9;
const RTT_COEFFICIENT: f64 = 900.0;
const LOSS_COEFFICIENT: f64 = 11.35;
const RTT_GRADIENT_FILTER: f64 = 0.02;
const PROBE_STEP: f64 = 0.05;
/// θ0: Mbit/s of rate change per unit of utility gradient (utility per Mbit/s).
const STEP_FACTOR: f64 = 1.0;
const CHANGE_BOUND_MIN: f64 = 0.05;
const CHANGE_BOUND_STEP: f64 = 0.1;
const MIN_MI_PACKETS: f64 = 20.0;
const MIN_RATE_MBPS: f64 = 0.5;
const PROBES: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Starting,
    Probing,
    Moving,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Starting,
    Probe(usize),
    Moving,
    /// Sent while a decision waits for its results: scored by nobody.
    Filler,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    rate: f64,
    utility: f64,
}

/// One monitor interval: the transmissions numbered `sent_lo..sent_hi` (delivered + lost + in
/// flight counts them; the path keeps their order, so they are resolved in order too).
struct Mi {
    role: Role,
    epoch: u32,
    rate: f64,
    start_ns: u64,
    /// When it is due to end; once closed, when it ended.
    end_ns: u64,
    sent_lo: u64,
    sent_hi: Option<u64>,
    /// Losses counted when the resolution reached `sent_lo`.
    lost_lo: Option<u64>,
    /// (ACK time, RTT) of the samples that came back while its packets were being resolved.
    rtts: Vec<(u64, u64)>,
}

/// PCC-Uspace's dRTT/dT over one MI's (ACK time, RTT) samples: of three estimates (the
/// least-squares slope of RTT over send time, the second half's mean RTT over the first's per unit
/// of sending time, and how much longer the ACKs took to come back than the packets to leave) the
/// one nearest 0, taken as 0 below |0.02|, so that timing noise reads as no trend. Send times are
/// the ACK times less the RTTs, as the samples are those of each ACK's latest-sent segment.
fn rtt_trend(rtts: &[(u64, u64)]) -> f64 {
    let n = rtts.len();
    let secs = |(t, r): (u64, u64)| ((t - r) as f64 * 1e-9, r as f64 * 1e-9, t as f64 * 1e-9);
    let (Some(&first), Some(&last)) = (rtts.first(), rtts.last()) else { return 0.0 };
    let ((sent0, _, acked0), (sent1, _, acked1)) = (secs(first), secs(last));
    let (send_s, recv_s) = (sent1 - sent0, acked1 - acked0);
    if n < 2 || send_s <= 0.0 || recv_s <= 0.0 {
        return 0.0;
    }
    let nf = n as f64;
    let (sx, sy, sxx, sxy) = rtts.iter().map(|&x| secs(x)).fold((0.0, 0.0, 0.0, 0.0), |(a, b, c, d), (x, y, _)| (a + x, b + y, c + x * x, d + x * y));
    let den = nf * sxx - sx * sx;
    let slope = if den > 0.0 { (nf * sxy - sx * sy) / den } else { 0.0 };
    let half = n / 2;
    let sum = |xs: &[(u64, u64)]| xs.iter().map(|&x| secs(x).1).sum::<f64>();
    let halves = 2.0 * (sum(&rtts[half..2 * half]) - sum(&rtts[..half])) / (half as f64 * send_s);
    let recv = 1.0 - send_s / recv_s;
    let g = [slope, halves, recv].into_iter().min_by(|a, b| a.abs().total_cmp(&b.abs())).unwrap_or(0.0);
    if g.abs() < RTT_GRADIENT_FILTER {
        0.0
    } else {
        g
    }
}

pub struct Vivace {
    rng: ChaCha8Rng,
    phase: Phase,
    /// The rate decisions are made about (Mbit/s of payload).
    rate: f64,
    epoch: u32,
    /// Starting: the last MI's score; Moving: the sample the next gradient is taken against.
    last: Option<Sample>,
    probe_order_high: [bool; PROBES],
    probes_sent: usize,
    probes: [Option<Sample>; PROBES],
    direction: f64,
    amplifier: f64,
    clipped_steps: u32,
    /// MIs awaiting their outcome; the back one is being sent.
    mis: VecDeque<Mi>,
    mss: f64,
}

impl Vivace {
    pub fn new(seed: u64) -> Self {
        Vivace {
            rng: ChaCha8Rng::seed_from_u64(seed),
            phase: Phase::Starting,
            rate: 0.0,
            epoch: 0,
            last: None,
            probe_order_high: [false; PROBES],
            probes_sent: 0,
            probes: [None; PROBES],
            direction: 1.0,
            amplifier: 0.0,
            clipped_steps: 0,
            mis: VecDeque::new(),
            mss: 1448.0,
        }
    }

    /// Starts at the initial window per handshake RTT, as PCC-Uspace's sender does.
    pub fn init(&mut self, c: &Conn) {
        self.mss = c.mss as f64;
        self.rate = (c.cwnd as f64 * self.mss * 8.0 / (c.srtt_ns as f64 * 1e-9) * 1e-6).max(MIN_RATE_MBPS);
        self.open_mi(c, Role::Starting, self.rate);
    }

    /// The rate of the MI being sent, in payload bytes/s.
    pub fn pacing_rate_bytes_per_sec(&self) -> f64 {
        self.mis.back().map_or(0.0, |m| m.rate * 1e6 / 8.0)
    }

    fn open_mi(&mut self, c: &Conn, role: Role, rate: f64) {
        let rtt = c.srtt_ns.max(1) as f64 * 1e-9;
        let duration_s = rtt.max(MIN_MI_PACKETS * self.mss * 8.0 / (rate * 1e6));
        let start = c.now_ns;
        let sent_lo = c.delivered + c.lost + c.in_flight as u64;
        let epoch = self.epoch;
        let end_ns = start + (duration_s * 1e9) as u64;
        self.mis.push_back(Mi { role, epoch, rate, start_ns: start, end_ns, sent_lo, sent_hi: None, lost_lo: None, rtts: Vec::new() });
    }

    /// The role and rate of the next MI.
    fn next_mi(&mut self) -> (Role, f64) {
        match self.phase {
            Phase::Starting => {
                self.rate *= 2.0;
                (Role::Starting, self.rate)
            }
            Phase::Probing if self.probes_sent < PROBES => {
                let i = self.probes_sent;
                self.probes_sent += 1;
                let sign = if self.probe_order_high[i] { 1.0 } else { -1.0 };
                (Role::Probe(i), self.rate * (1.0 + sign * PROBE_STEP))
            }
            Phase::Probing => (Role::Filler, self.rate),
            Phase::Moving => (Role::Moving, self.rate),
        }
    }

    pub fn cong_control(&mut self, c: &mut Conn, rs: &RateSample) {
        let resolved = c.delivered + c.lost;
        let mut scored = Vec::new();
        let mut sample_used = false;
        for mi in self.mis.iter_mut() {
            if resolved < mi.sent_lo {
                break;
            }
            let lost_lo = *mi.lost_lo.get_or_insert(c.lost);
            if let (Some(rtt), false) = (rs.latest_rtt_ns, sample_used) {
                mi.rtts.push((c.now_ns, rtt));
                sample_used = true;
            }
            match mi.sent_hi {
                Some(hi) if resolved >= hi => scored.push((mi.role, mi.epoch, mi.rate, utility(mi, hi, c.lost - lost_lo, self.mss))),
                _ => break,
            }
        }
        self.mis.drain(..scored.len());
        for (role, epoch, rate, u) in scored {
            if epoch != self.epoch {
                continue;
            }
            match u {
                Some(utility) => self.on_result(role, Sample { rate, utility }),
                // A probe that sent nothing (the flow stalled in a timeout) decides nothing.
                None if matches!(role, Role::Probe(_)) => self.enter_probing(),
                None => {}
            }
        }
        if self.mis.back().is_none_or(|m| c.now_ns >= m.end_ns) {
            if let Some(m) = self.mis.back_mut() {
                m.sent_hi = Some(c.delivered + c.lost + c.in_flight as u64);
                m.end_ns = c.now_ns;
            }
            let (role, rate) = self.next_mi();
            self.open_mi(c, role, rate);
        }
        let rate_bytes = self.pacing_rate_bytes_per_sec();
        let rtt = c.srtt_ns as f64 * 1e-9;
        c.cwnd = ((2.0 * rate_bytes * rtt / self.mss).ceil() as u32).max(4);
    }

    fn on_result(&mut self, role: Role, s: Sample) {
        match role {
            Role::Starting => match self.last {
                Some(prev) if s.utility < prev.utility => {
                    self.rate = prev.rate;
                    self.enter_probing();
                }
                _ => self.last = Some(s),
            },
            Role::Probe(i) => {
                self.probes[i] = Some(s);
                if let [Some(a), Some(b), Some(c), Some(d)] = self.probes {
                    self.decide(a, b, c, d);
                }
            }
            Role::Moving => match self.last {
                Some(prev) if prev.rate != s.rate => {
                    let gradient = (s.utility - prev.utility) / (s.rate - prev.rate);
                    if gradient * self.direction > 0.0 {
                        self.last = Some(s);
                        self.step(gradient);
                    } else {
                        self.rate = if prev.utility > s.utility { prev.rate } else { s.rate };
                        self.enter_probing();
                    }
                }
                _ => self.last = Some(s),
            },
            Role::Filler => {}
        }
    }

    fn enter_probing(&mut self) {
        self.phase = Phase::Probing;
        self.epoch += 1;
        self.probes_sent = 0;
        self.probes = [None; PROBES];
        // Two pairs, each in a random order (PCC-Uspace: high-low-low-high or low-high-high-low).
        let high_first = self.rng.gen_bool(0.5);
        self.probe_order_high = [high_first, !high_first, !high_first, high_first];
    }

    /// After the four probes: move along their gradient if both pairs agree, else probe again.
    fn decide(&mut self, a: Sample, b: Sample, c: Sample, d: Sample) {
        let g1 = (a.utility - b.utility) / (a.rate - b.rate);
        let g2 = (c.utility - d.utility) / (c.rate - d.rate);
        if g1 * g2 <= 0.0 {
            self.enter_probing();
            return;
        }
        self.phase = Phase::Moving;
        self.epoch += 1;
        self.direction = g1.signum();
        self.amplifier = 0.0;
        self.clipped_steps = 0;
        let utility = (a.utility + b.utility + c.utility + d.utility) / 4.0;
        self.last = Some(Sample { rate: self.rate, utility });
        self.step((g1 + g2) / 2.0);
    }

    fn step(&mut self, gradient: f64) {
        self.amplifier += 1.0;
        let mut change = self.amplifier * STEP_FACTOR * gradient;
        let bound = (CHANGE_BOUND_MIN + self.clipped_steps as f64 * CHANGE_BOUND_STEP) * self.rate;
        if change.abs() > bound {
            change = bound.copysign(change);
            self.clipped_steps += 1;
        } else {
            self.clipped_steps = 0;
        }
        self.rate = (self.rate + change).max(MIN_RATE_MBPS);
    }
}

/// The MI's score (Vivace's Eq. 1), or None if it sent nothing.
fn utility(mi: &Mi, sent_hi: u64, lost: u64, mss: f64) -> Option<f64> {
    let sent = sent_hi.saturating_sub(mi.sent_lo);
    if sent == 0 {
        return None;
    }
    let duration_s = mi.end_ns.saturating_sub(mi.start_ns).max(1) as f64 * 1e-9;
    let x = sent as f64 * mss * 8.0 / duration_s * 1e-6;
    let loss = (lost as f64 / sent as f64).min(1.0);
    Some(x.powf(EXPONENT) - RTT_COEFFICIENT * x * rtt_trend(&mi.rtts) - LOSS_COEFFICIENT * x * loss)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// `n` ACKs 1 ms apart whose RTT is 10 ms plus `rtt_ms(i)`.
    fn samples(n: u64, rtt_ms: impl Fn(u64) -> f64) -> Vec<(u64, u64)> {
        (0..n).map(|i| (1_000 * MS + i * MS, 10 * MS + (rtt_ms(i) * 1e6) as u64)).collect()
    }

    #[test]
    fn a_growing_queue_is_a_trend_and_timing_noise_is_not() {
        // RTT growing 0.05 ms per ms of sending: a queue filling at 5 % above the rate.
        let g = rtt_trend(&samples(20, |i| 0.05 / 1.05 * i as f64));
        assert!((g - 0.05).abs() < 0.01, "trend {g}");
        // ±0.1 ms alternating, a jitter's worth: no trend.
        assert_eq!(rtt_trend(&samples(20, |i| if i % 3 == 0 { 0.1 } else { 0.0 })), 0.0);
        assert_eq!(rtt_trend(&samples(1, |_| 0.0)), 0.0);
    }

    #[test]
    fn the_utility_is_vivaces_and_the_step_is_bounded() {
        // 100 segments in 0.1 s (11.584 Mbit/s), 5 lost, no RTT trend: u = x^0.9 − 11.35·x·0.05.
        let mi = Mi { role: Role::Moving, epoch: 0, rate: 11.0, start_ns: 0, end_ns: 100 * MS, sent_lo: 0, sent_hi: Some(100), lost_lo: Some(0), rtts: samples(50, |_| 0.0) };
        let x: f64 = 100.0 * 1448.0 * 8.0 / 0.1 / 1e6;
        let want = x.powf(0.9) - 11.35 * x * 0.05;
        assert!((utility(&mi, 100, 5, 1448.0).unwrap() - want).abs() < 1e-9);
        // A large gradient is clipped to ω·r, ω = 0.05, 0.15, 0.25 for consecutive clipped steps;
        // a step within the bound resets ω.
        let mut v = Vivace::new(1);
        v.rate = 10.0;
        let mut rates = Vec::new();
        for gradient in [100.0, 100.0, 100.0, 0.01] {
            v.step(gradient);
            rates.push((v.rate * 1e6).round() / 1e6);
        }
        assert_eq!(rates[..3], [10.5, 12.075, 15.09375]);
        assert!((rates[3] - (15.09375 + 4.0 * 0.01)).abs() < 1e-6, "{rates:?}");
        assert_eq!(v.clipped_steps, 0);
    }
}
