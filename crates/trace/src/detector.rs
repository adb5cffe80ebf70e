//! The policing detector (PD) of 002 §2.1 (Figure 2), with its safeguards, the burst estimate and
//! the §4.4 pattern label.
//!
//! Decisions where the paper is silent (docs/detector.md has the reasoning and the calibration):
//! - Token accounting uses IP packet lengths (what a policer charges); rates are IP bits/s.
//! - "t_a ≈ 0" for a loss means t_a lies within 2 · r · RTT_med of the median loss sample, and
//!   "t_a ≳ 0" for a pass means t_a ≥ that median − 0.75 · r · RTT_med (the rule of the paper's
//!   tool), each band at least `tol_packets` MTUs wide. The median, not zero: at a real policer
//!   the token count at drop time spreads over about ±1 RTT of tokens (TCP sends per-RTT bursts,
//!   the bucket does not fill while the sender runs below the rate, and the send times recorded
//!   at the server are offset from the arrivals at the policer by delays that vary within an RTT).
//! - RTT inflation (line 15): each loss is tied to the RTT sample of a packet sent just before
//!   it (within one median RTT), skipping the last packet delivered before it (for a run of
//!   losses, the one before the whole run): after a tail drop that one waits for the receiver's
//!   delayed-ACK timer. Behind a queue, that sample carries the queue the lost packet met, where
//!   the last ACK received before the loss describes it an RTT earlier. A loss is inflated when
//!   its sample is ≥ the median, > 1.3 × the segment's smallest RTT, more than two packet times
//!   (at the estimated rate) above it and ≥ 20 ms; more than 20 % of the losses that have a
//!   sample rule policing out. In a per-client aggregate, a loss is tied to its own flow's packets
//!   and samples only (a delayed ACK is one flow's matter). The paper's tool measures from the
//!   10th percentile; behind a queue that other traffic keeps from draining, every sample carries
//!   the standing queue, the 10th percentile with them, and only the smallest RTT is near the
//!   path's.
//! - Beyond the paper: policed needs ACK trains faster than 1.5 × the estimated rate (a queue's
//!   output never exceeds its rate; a policer passes its bucket at the sender's line rate).
//! - Further safeguards: the losses must span at least two median RTTs (a single burst of losses
//!   gives no rate, 002 §3.1 footnote 5), and at least 15 passed packets must lie between them.
//! - Per-client aggregate (beyond the paper): the simulated bucket has a capacity, the largest
//!   fall of t_a from its high point between two losses to the later loss, and the rate is the
//!   one that empties that bucket again at the last loss (the paper's line 1 with a capacity).
//! - The second pass drops the first and last two losses and re-estimates r (footnote 4); the
//!   segment is policed if either pass says so, and the reported rate is that pass's estimate.

use crate::flow::{AckEvent, DataPkt, RttSample};

/// Detector parameters; the defaults are the paper's (n_loss, n_pass, 15 losses) and ours,
/// calibrated on generated traces (docs/detector.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// 002 §2.1 footnote 3: run only on segments with at least this many losses.
    pub min_losses: usize,
    /// Fraction of lost packets allowed to have t_a far from 0 (002: 0.1).
    pub n_loss: f64,
    /// Fraction of passed packets allowed to have t_a well below 0 (002: 0.03).
    pub n_pass: f64,
    /// Half-width of the band around the median loss sample, in rate × median RTT (tool: 2).
    pub loss_band_rtts: f64,
    /// How far below the median loss sample a pass may lie, in rate × median RTT (tool: 0.75).
    pub pass_floor_rtts: f64,
    /// Floor of both, in largest-packet sizes.
    pub tol_packets: f64,
    /// Losses cut from each end in the second pass (002 footnote 4: 2).
    pub cutoff: usize,
    pub min_pass_samples: usize,
    pub min_loss_span_rtts: f64,
    pub inflation_factor: f64,
    pub inflation_min_rtt_ns: u64,
    /// An inflated sample also exceeds the smallest RTT by this many packet times at the rate.
    pub inflation_min_packets: f64,
    pub max_inflated_fraction: f64,
    /// A policer passes what its bucket holds at the sender's line rate, so some ACK trains come
    /// back faster than the policed rate; a queue's output never exceeds its rate. Policed needs
    /// the segment's burst throughput at least this multiple of the estimated rate.
    pub min_burst_over_rate: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            min_losses: 15,
            n_loss: 0.1,
            n_pass: 0.03,
            loss_band_rtts: 0.5,
            pass_floor_rtts: 0.75,
            tol_packets: 2.0,
            cutoff: 2,
            min_pass_samples: 15,
            min_loss_span_rtts: 2.0,
            inflation_factor: 1.3,
            inflation_min_rtt_ns: 20_000_000,
            inflation_min_packets: 2.0,
            max_inflated_fraction: 0.2,
            min_burst_over_rate: 1.5,
        }
    }
}

/// Why a segment was not found policed: stable codes for the CSV's `reason` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    Policed,
    FewLosses,
    NoRttSamples,
    SingleLossBurst,
    FewPassSamples,
    LossesNotBelowPasses,
    LossesWithTokens,
    PassesWithoutTokens,
    RttInflation,
    AcksPacedAtRate,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Policed => "policed",
            Reason::FewLosses => "few_losses",
            Reason::NoRttSamples => "no_rtt_samples",
            Reason::SingleLossBurst => "single_loss_burst",
            Reason::FewPassSamples => "few_pass_samples",
            Reason::LossesNotBelowPasses => "losses_not_below_passes",
            Reason::LossesWithTokens => "losses_with_tokens",
            Reason::PassesWithoutTokens => "passes_without_tokens",
            Reason::RttInflation => "rtt_inflation",
            Reason::AcksPacedAtRate => "acks_paced_at_rate",
        }
    }
}

/// 002 §4.4: how TCP and the policer interact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    CongestionAvoidance,
    Staircase,
    DoublingWindow,
}

impl Pattern {
    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::CongestionAvoidance => "congestion_avoidance",
            Pattern::Staircase => "staircase",
            Pattern::DoublingWindow => "doubling_window",
        }
    }
}

/// The detector's judgement of one segment.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub data_packets: usize,
    pub losses: usize,
    pub policed: bool,
    pub reason: Reason,
    /// 1 or 2 when policed (which pass found it); 0 otherwise.
    pub pass: u8,
    /// Estimated policing rate (IP bits/s) of the deciding pass, or of pass 1 when not policed.
    pub rate_bps: Option<f64>,
    /// IP bytes sent before the first loss: the burst the policer let through.
    pub burst_bytes: u64,
    /// Throughput of ACK trains (bits/s): the bottleneck / burst rate, 002 §4.2.
    pub burst_throughput_bps: Option<f64>,
    pub median_rtt_ns: Option<u64>,
    pub pattern: Option<Pattern>,
}

impl Judgement {
    pub fn loss_rate(&self) -> f64 {
        if self.data_packets == 0 {
            0.0
        } else {
            self.losses as f64 / self.data_packets as f64
        }
    }
}

/// Judges one segment: its data packets in send order, its RTT samples and ACK arrivals.
pub fn judge(pkts: &[DataPkt], rtts: &[RttSample], acks: &[AckEvent], params: &Params) -> Judgement {
    judge_inner(pkts, rtts, acks, params, false)
}

/// Judges the merged packets of several flows towards one client (beyond the paper). Flows start
/// and stop independently, so the aggregate idles below the rate at times and a real bucket
/// stops filling at its capacity; the paper's uncapped t_p would then predict tokens that never
/// existed. Here the simulated bucket has a capacity, and the rate and capacity are estimated
/// together from the judged window (`capped_bucket`).
pub fn judge_aggregate(pkts: &[DataPkt], rtts: &[RttSample], acks: &[AckEvent], params: &Params) -> Judgement {
    judge_inner(pkts, rtts, acks, params, true)
}

fn judge_inner(pkts: &[DataPkt], rtts: &[RttSample], acks: &[AckEvent], params: &Params, capped: bool) -> Judgement {
    let lost: Vec<usize> = (0..pkts.len()).filter(|&i| pkts[i].lost()).collect();
    let burst_bytes = pkts[..lost.first().copied().unwrap_or(pkts.len())]
        .iter()
        .map(|p| p.ip_len as u64)
        .sum();
    let mut rtt_sorted: Vec<u64> = rtts.iter().map(|s| s.rtt_ns).collect();
    rtt_sorted.sort_unstable();
    let median_rtt = percentile(&rtt_sorted, 0.5);
    let mut j = Judgement {
        data_packets: pkts.len(),
        losses: lost.len(),
        policed: false,
        reason: Reason::FewLosses,
        pass: 0,
        rate_bps: None,
        burst_bytes,
        burst_throughput_bps: burst_throughput(acks, rtt_sorted.first().copied()),
        median_rtt_ns: median_rtt,
        pattern: None,
    };
    if lost.len() < params.min_losses {
        return j;
    }
    let Some(rtt_med) = median_rtt else {
        j.reason = Reason::NoRttSamples;
        return j;
    };
    let rtt_min = rtt_sorted[0];
    let mut by_sent = rtts.to_vec();
    by_sent.sort_by_key(|s| s.sent_ns);
    let burst_bytes_per_sec = j.burst_throughput_bps.map(|b| b / 8.0);
    let ctx = Context { pkts, by_sent, rtt_med, rtt_min, params, capped, burst_bytes_per_sec };
    let first = ctx.run(&lost);
    j.rate_bps = first.rate.map(|r| r * 8.0);
    j.reason = first.reason;
    let mut decided = (first.reason == Reason::Policed).then_some((1u8, first.rate));
    if decided.is_none() && lost.len() >= 2 * params.cutoff + 2 {
        let second = ctx.run(&lost[params.cutoff..lost.len() - params.cutoff]);
        if second.reason == Reason::Policed {
            decided = Some((2, second.rate));
        }
    }
    if let Some((pass, rate)) = decided {
        j.policed = true;
        j.pass = pass;
        j.reason = Reason::Policed;
        j.rate_bps = rate.map(|r| r * 8.0);
        let rtt_min = rtt_sorted.first().copied().unwrap_or(rtt_med);
        j.pattern = rate.map(|r| pattern(pkts, &lost, r, rtt_min, rtt_med));
    }
    j
}

struct Context<'a> {
    pkts: &'a [DataPkt],
    /// RTT samples in the order their packets were sent.
    by_sent: Vec<RttSample>,
    rtt_med: u64,
    /// The segment's smallest RTT: the path without a queue, as far as the segment shows it.
    rtt_min: u64,
    params: &'a Params,
    /// Simulate a bucket of bounded capacity (the per-client aggregate); false = the paper's
    /// unbounded t_p − t_u.
    capped: bool,
    burst_bytes_per_sec: Option<f64>,
}

struct PassResult {
    reason: Reason,
    /// Bytes per second.
    rate: Option<f64>,
}

impl Context<'_> {
    /// One run of Figure 2 over the packets from `lost[0]` to the last of `lost`.
    fn run(&self, lost: &[usize]) -> PassResult {
        let (first, last) = (lost[0], lost[lost.len() - 1]);
        let (t0, t1) = (self.pkts[first].t_ns, self.pkts[last].t_ns);
        let span = t1.saturating_sub(t0);
        if (span as f64) < self.params.min_loss_span_rtts * self.rtt_med as f64 || span == 0 {
            return PassResult { reason: Reason::SingleLossBurst, rate: None };
        }
        let window = &self.pkts[first..=last];
        let mtu = window.iter().map(|p| p.ip_len).max().unwrap_or(1500) as f64;
        // Line 1: r = goodput between the first and the last loss.
        let passed: u64 = window.iter().filter(|p| !p.lost()).map(|p| p.ip_len as u64).sum();
        let goodput = passed as f64 / (span as f64 * 1e-9);
        let (rate, cap) = if self.capped { capped_bucket(window, goodput, mtu) } else { (goodput, f64::INFINITY) };
        let result = |reason| PassResult { reason, rate: Some(rate) };
        // Lines 2-10.
        let mut l_loss = Vec::with_capacity(lost.len());
        let mut l_pass = Vec::with_capacity(window.len());
        balances(window, rate, cap, |p, available| if p.lost() { l_loss.push(available) } else { l_pass.push(available) });
        if l_pass.len() < self.params.min_pass_samples {
            return result(Reason::FewPassSamples);
        }
        // Lines 11-12.
        if mean(&l_loss) >= mean(&l_pass) || median_f(&mut l_loss.clone()) >= median_f(&mut l_pass.clone()) {
            return result(Reason::LossesNotBelowPasses);
        }
        // Lines 13-14 with the bands of the module doc.
        let rtt_bytes = rate * self.rtt_med as f64 * 1e-9;
        let floor = self.params.tol_packets * mtu;
        let (band, below) = ((self.params.loss_band_rtts * rtt_bytes).max(floor), (self.params.pass_floor_rtts * rtt_bytes).max(floor));
        let centre = median_f(&mut l_loss.clone());
        let near_zero = l_loss.iter().filter(|&&a| (a - centre).abs() <= band).count();
        if (near_zero as f64) < (1.0 - self.params.n_loss) * l_loss.len() as f64 {
            return result(Reason::LossesWithTokens);
        }
        let non_negative = l_pass.iter().filter(|&&a| a >= centre - below).count();
        if (non_negative as f64) < (1.0 - self.params.n_pass) * l_pass.len() as f64 {
            return result(Reason::PassesWithoutTokens);
        }
        // Line 15.
        if self.inflated_fraction(lost, rate, mtu) > self.params.max_inflated_fraction {
            return result(Reason::RttInflation);
        }
        if self.burst_bytes_per_sec.is_some_and(|b| b < self.params.min_burst_over_rate * rate) {
            return result(Reason::AcksPacedAtRate);
        }
        result(Reason::Policed)
    }

    /// `rate` in bytes/s, `mtu` the largest packet: a queue of a packet or two (the kernel's tbf
    /// holds one) at a low rate is a large part of a short RTT, but no shaper's buffer.
    fn inflated_fraction(&self, lost: &[usize], rate: f64, mtu: f64) -> f64 {
        let one_packet_ns = mtu / rate * 1e9;
        let threshold = (self.rtt_med as f64)
            .max(self.params.inflation_factor * self.rtt_min as f64 + 1.0)
            .max(self.rtt_min as f64 + self.params.inflation_min_packets * one_packet_ns)
            .max(self.params.inflation_min_rtt_ns as f64);
        // The last packet of the lost one's flow delivered before it is skipped (module doc); in a
        // run of losses that is the one before the whole run, not the loss just before. A delayed
        // ACK is one flow's matter, so in a per-client aggregate only the flow's own packets and
        // samples count.
        let flows = self.pkts.iter().map(|p| p.flow as usize + 1).max().unwrap_or(1);
        let mut last_delivered: Vec<Option<u64>> = vec![None; flows];
        let mut skip_from = Vec::with_capacity(lost.len());
        let mut next = lost.iter().peekable();
        for (i, p) in self.pkts.iter().enumerate() {
            if next.peek().is_some_and(|&&l| l == i) {
                skip_from.push(last_delivered[p.flow as usize].map_or(p.t_ns, |t| t.min(p.t_ns)));
                next.next();
            }
            if !p.lost() {
                last_delivered[p.flow as usize] = Some(p.t_ns);
            }
        }
        // Losses without a sample of their flow within one median RTT before them say nothing
        // either way (a 64-byte snaplen leaves no SACK samples), so they are not counted.
        let (mut tied, mut inflated) = (0usize, 0usize);
        for (&i, skip_from) in lost.iter().zip(skip_from) {
            let (sent, flow) = (self.pkts[i].t_ns, self.pkts[i].flow);
            let before = self.by_sent.partition_point(|s| s.sent_ns < skip_from);
            let sample = self.by_sent[..before]
                .iter()
                .rev()
                .take_while(|s| sent.saturating_sub(s.sent_ns) <= self.rtt_med)
                .find(|s| s.flow == flow);
            if let Some(s) = sample {
                tied += 1;
                inflated += usize::from(s.rtt_ns as f64 >= threshold);
            }
        }
        inflated as f64 / tied.max(1) as f64
    }
}

/// Walks t_a = t_p − t_u over `window` (from its first loss, at 0 tokens) as a running balance
/// in a bucket of capacity `cap`, calling `visit` with each packet and the tokens before it.
/// Returns the balance after the last packet. `rate` in bytes/s.
fn balances(window: &[DataPkt], rate: f64, cap: f64, mut visit: impl FnMut(&DataPkt, f64)) -> f64 {
    let mut available = 0.0f64;
    let mut t_prev = window[0].t_ns;
    for p in window {
        // Capture records can be written slightly out of time order: a step back adds no
        // tokens, and the clock resumes from the latest time seen.
        available = (available + rate * p.t_ns.saturating_sub(t_prev) as f64 * 1e-9).min(cap);
        t_prev = t_prev.max(p.t_ns);
        visit(p, available);
        if !p.lost() {
            available -= p.ip_len as f64;
        }
    }
    available
}

/// The bucket of the per-client aggregate (beyond the paper): its rate and capacity, estimated
/// together from the judged window (first to last loss). `goodput` in bytes/s.
///
/// Capacity: the largest fall of the unbounded t_a from its highest point between two losses to
/// the later loss, i.e. the most bytes the aggregate got through beyond the rate before a loss:
/// a real bucket empty at that loss held at least that much. Measured between consecutive losses
/// so that an error in the rate adds drift over one burst only, not over the whole window.
/// (The burst before the first loss is no bound: another flow of the client may have drained
/// the bucket just before the period began.)
/// Rate: the paper's line 1 says the bucket, empty at the first loss, is empty again at the
/// last. In an unbounded bucket that is the goodput; a capped one also wastes the tokens that
/// arrive while it is full (the aggregate idles between chunks), so the goodput underestimates
/// the rate and the balance drifts by the shortfall over the window. The rate solved by
/// bisection brings the capped balance back to zero at the last loss.
fn capped_bucket(window: &[DataPkt], goodput: f64, mtu: f64) -> (f64, f64) {
    let capacity = |rate: f64| {
        let (mut peak, mut fall) = (0.0f64, 0.0f64);
        balances(window, rate, f64::INFINITY, |p, available| {
            peak = peak.max(available);
            if p.lost() {
                fall = fall.max(peak - available);
                peak = available;
            }
        });
        fall.max(2.0 * mtu)
    };
    let end = |rate: f64| balances(window, rate, capacity(rate), |_, _| {});
    // Searched up to twice the goodput (a bound, not a measurement: the lab's periods needed at
    // most 1.1×); when the bucket never overflowed, or no rate there empties it, the goodput stands.
    let (mut lo, mut hi) = (goodput, 2.0 * goodput);
    if end(lo) >= 0.0 || end(hi) <= 0.0 {
        return (goodput, capacity(goodput));
    }
    // 2^-20 of the goodput: far below what the capture's timing resolves.
    for _ in 0..20 {
        let mid = 0.5 * (lo + hi);
        if end(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo, capacity(lo))
}

/// 002 §4.4. `rate` in bytes/s.
fn pattern(pkts: &[DataPkt], lost: &[usize], rate: f64, rtt_min: u64, rtt_med: u64) -> Pattern {
    let mtu = pkts.iter().map(|p| p.ip_len).max().unwrap_or(1500) as f64;
    let bdp = rate * rtt_min as f64 * 1e-9;
    // The policing rate lies between the rates of a 1-MSS and a 2-MSS window (Figure 10c).
    if bdp <= 2.0 * mtu {
        return Pattern::DoublingWindow;
    }
    // Staircase: before each loss episode the sender ran at several times the policing rate.
    let mut ratios = Vec::new();
    let mut prev_loss_t: Option<u64> = None;
    for &i in lost {
        let t = pkts[i].t_ns;
        let starts_episode = !matches!(prev_loss_t, Some(p) if t.saturating_sub(p) <= rtt_med);
        prev_loss_t = Some(t);
        if !starts_episode {
            continue;
        }
        let from = t.saturating_sub(rtt_min);
        let lo = pkts.partition_point(|p| p.t_ns < from);
        let sent: u64 = pkts[lo..i].iter().map(|p| p.ip_len as u64).sum();
        ratios.push(sent as f64 / (rtt_min.max(1) as f64 * 1e-9) / rate);
    }
    if median_f(&mut ratios) >= 2.0 {
        Pattern::Staircase
    } else {
        Pattern::CongestionAvoidance
    }
}

/// ACKs in a train of this many cumulative advances give one rate sample.
const TRAIN_ACKS: usize = 4;

/// Burst throughput from ACK inter-arrivals (002 §4.2): the 90th percentile of the rates of
/// trains of four advancing ACKs that arrived within one minimum RTT (so they acknowledge one
/// flight, paced by the bottleneck rather than by the sender).
fn burst_throughput(acks: &[AckEvent], rtt_min: Option<u64>) -> Option<f64> {
    let rtt_min = rtt_min?;
    let mut rates: Vec<f64> = acks
        .windows(TRAIN_ACKS)
        .filter_map(|w| {
            let span = w[TRAIN_ACKS - 1].t_ns.saturating_sub(w[0].t_ns);
            if span == 0 || span > rtt_min {
                return None;
            }
            let bytes: u64 = w[1..].iter().map(|a| a.bytes).sum();
            Some(bytes as f64 * 8.0 / (span as f64 * 1e-9))
        })
        .collect();
    rates.sort_unstable_by(f64::total_cmp);
    percentile(&rates, 0.9)
}

fn percentile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    Some(sorted[i.min(sorted.len() - 1)])
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn median_f(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(t_ms: f64, lost: bool) -> DataPkt {
        DataPkt {
            t_ns: (t_ms * 1e6) as u64,
            seq: 0,
            payload: 1448,
            ip_len: 1500,
            flags: if lost { crate::flow::LOST } else { 0 },
            flow: 0,
        }
    }

    #[test]
    fn doubling_window_is_one_to_two_packets_per_rtt() {
        // 20 ms RTT, policed at 1.5 packets per RTT: windows of 1 and 2 packets alternate.
        let mut pkts = Vec::new();
        for round in 0..60 {
            let t = round as f64 * 20.0;
            pkts.push(pkt(t, false));
            if round % 3 == 2 {
                pkts.push(pkt(t + 0.1, true));
            }
        }
        let lost: Vec<usize> = (0..pkts.len()).filter(|&i| pkts[i].lost()).collect();
        let rate = 1.5 * 1500.0 / 0.02;
        assert_eq!(pattern(&pkts, &lost, rate, 20_000_000, 20_000_000), Pattern::DoublingWindow);
        // The same trace with ten times the RTT is no longer near one packet per RTT.
        assert_ne!(pattern(&pkts, &lost, rate, 200_000_000, 200_000_000), Pattern::DoublingWindow);
    }

    #[test]
    fn staircase_needs_bursts_well_above_the_rate() {
        // Bursts of 40 packets within 2 ms every 500 ms, at 100 ms RTT, policed at 20 packets
        // per 500 ms: the sender runs far above the rate before each loss episode.
        let mut pkts = Vec::new();
        for ep in 0..10 {
            for k in 0..40 {
                pkts.push(pkt(ep as f64 * 500.0 + k as f64 * 0.05, k >= 20));
            }
        }
        let lost: Vec<usize> = (0..pkts.len()).filter(|&i| pkts[i].lost()).collect();
        let rate = 20.0 * 1500.0 / 0.5;
        assert_eq!(pattern(&pkts, &lost, rate, 100_000_000, 100_000_000), Pattern::Staircase);
        // Spread the same packets evenly: a congestion-avoidance-like approach to the rate.
        let even: Vec<DataPkt> =
            pkts.iter().enumerate().map(|(i, p)| DataPkt { t_ns: i as u64 * 25_000_000, ..*p }).collect();
        assert_eq!(pattern(&even, &lost, rate, 100_000_000, 100_000_000), Pattern::CongestionAvoidance);
    }
}
