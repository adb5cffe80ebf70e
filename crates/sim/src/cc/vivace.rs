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

impl Mi {
    /// PCC-Uspace's dRTT/dT: of three estimates from the MI's samples (the least-squares slope,
    /// the mean RTT of the second half over the first's per unit of sending time, and how much
    /// longer the ACKs took to arrive than the packets to leave) the one nearest 0, and 0 below
    /// |0.02|, so that timing noise reads as no trend.
    fn rtt_gradient(&self) -> f64 {
        let n = self.rtts.len();
        let send_s = self.end_ns.saturating_sub(self.start_ns) as f64 * 1e-9;
        if n < 2 || send_s <= 0.0 {
            return 0.0;
        }
        let s = |(t, r): (u64, u64)| (t as f64 * 1e-9, r as f64 * 1e-9);
        let nf = n as f64;
        let (st, sr, stt, str) = self.rtts.iter().map(|&x| s(x)).fold((0.0, 0.0, 0.0, 0.0), |(a, b, c, d), (t, r)| (a + t, b + r, c + t * t, d + t * r));
        let den = nf * stt - st * st;
        let slope = if den > 0.0 { (nf * str - st * sr) / den } else { 0.0 };
        let half = n / 2;
        let sum = |xs: &[(u64, u64)]| xs.iter().map(|&x| s(x).1).sum::<f64>();
        let halves = 2.0 * (sum(&self.rtts[half..2 * half]) - sum(&self.rtts[..half])) / (half as f64 * send_s);
        let recv_s = s(self.rtts[n - 1]).0 - s(self.rtts[0]).0;
        let recv = if recv_s > 0.0 { 1.0 - send_s / recv_s } else { 0.0 };
        let g = [slope, halves, recv].into_iter().min_by(|a, b| a.abs().total_cmp(&b.abs())).unwrap_or(0.0);
        if g.abs() < RTT_GRADIENT_FILTER {
            0.0
        } else {
            g
        }
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
    Some(x.powf(EXPONENT) - RTT_COEFFICIENT * x * mi.rtt_gradient() - LOSS_COEFFICIENT * x * loss)
}
