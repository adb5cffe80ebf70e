//! Bucket and phantom-queue sizing rules from the papers (algorithms.md §2, §3, §4, §10).
//!
//! These run at configuration time, so they use `f64`; every result is rounded to whole bytes.
//! "Packets" and "MSS" are the same unit here: `mss` bytes (1500 in both papers' examples).
//!
//! | rule | source | 10 Mbit/s example |
//! |---|---|---|
//! | BDP = r·RTT | | 125 000 B at 100 ms |
//! | phantom queue ≥ BDP²/18 · MSS (BDP in packets) | 000 §3.4, App. A | 578 704 B at 100 ms (the paper's "1000 KB" is an erratum) |
//! | single CUBIC flow ≥ (G/D)(R·D)^{4/3} | 001 Eq. 12 | 90 528 B at 10 ms (paper: ≈ 90 KB) |
//! | FairPolicer B = 2G/D (R·D)^{4/3} | 001 Eq. 15-16 | 181 056 B at 10 ms (paper: 180 KB) |
//!
//! G (001 Eq. 13) is recomputed from C and β rather than taken as the paper's rounded 0.036:
//! for C = 0.4, β = 0.3 it is 0.035722 (the rounding moves B by 0.8 %).

use crate::time::Duration;
use crate::units::Rate;

/// The packet size both papers assume when they count in packets or MSS.
pub const DEFAULT_MSS: u64 = 1500;

/// Bandwidth-delay product r·RTT in bytes (rounded down).
pub fn bdp_bytes(rate: Rate, rtt: Duration) -> u64 {
    rate.bytes_in(rtt)
}

fn bdp_packets(rate: Rate, rtt: Duration, mss: u64) -> f64 {
    rate.as_f64() * rtt.as_secs_f64() / mss as f64
}

/// Smallest phantom queue that keeps a backlogged Reno flow at rate r (000 §3.4, Appendix A):
/// BDP²/18 · MSS bytes with BDP = r·RTT in packets. Reno's window swings between 2/3 and 4/3 of
/// the BDP, and the queue must hold the area above r over one sawtooth.
///
/// Erratum (algorithms.md §2): the paper's example "10 Mbps, 100 ms needs 1000 KB" does not
/// follow from its formula, which gives 83.3²/18 · 1500 B ≈ 579 KB; we trust the formula.
pub fn phantom_queue_bytes(rate: Rate, rtt: Duration, mss: u64) -> u64 {
    let bdp = bdp_packets(rate, rtt, mss);
    (bdp * bdp / 18.0 * mss as f64).round() as u64
}

/// CUBIC's parameters as 001 §IV-F uses them: `c` is the scaling constant (packets/s³) and
/// `beta` the fraction the window is *reduced by* on loss (0.3; RFC 8312 writes the same
/// thing as the multiplicative factor β_cubic = 0.7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cubic {
    pub c: f64,
    pub beta: f64,
}

impl Default for Cubic {
    /// C = 0.4, β = 0.3 (RFC 8312, as 001 §IV-F cites it).
    fn default() -> Self {
        Cubic { c: 0.4, beta: 0.3 }
    }
}

impl Cubic {
    /// G = 3 / (4·C^{1/3}) · (β / (4 − β))^{4/3} (001 Eq. 13); 0.035722 for the defaults.
    pub fn g(self) -> f64 {
        3.0 / (4.0 * self.c.cbrt()) * (self.beta / (4.0 - self.beta)).powf(4.0 / 3.0)
    }

    /// Smallest token bucket that lets one backlogged CUBIC flow reach rate R:
    /// B ≥ (G/D)·(R·D)^{4/3} with R in MSS/s, D in seconds and B in MSS (001 Eq. 12).
    pub fn single_flow_bucket_bytes(self, rate: Rate, rtt: Duration, mss: u64) -> u64 {
        let d = rtt.as_secs_f64();
        if d <= 0.0 {
            return 0;
        }
        let rd = bdp_packets(rate, rtt, mss);
        (self.g() / d * rd.powf(4.0 / 3.0) * mss as f64).round() as u64
    }

    /// FairPolicer's bucket B = (2G/D)·(R·D)^{4/3} (001 Eq. 15-16): the n-flow bound of Eq. 14
    /// (with its erratum: the first term is 1/n^{1/3}) is largest at n = 1, where it is twice
    /// the single-flow size. `rtt` is the maximum (or p99) RTT.
    pub fn fair_policer_bucket_bytes(self, rate: Rate, rtt: Duration, mss: u64) -> u64 {
        let d = rtt.as_secs_f64();
        if d <= 0.0 {
            return 0;
        }
        let rd = bdp_packets(rate, rtt, mss);
        (2.0 * self.g() / d * rd.powf(4.0 / 3.0) * mss as f64).round() as u64
    }
}

/// Per-enforcer sizes for one aggregate in the BC-PQP evaluation (000 §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvaluationSizes {
    /// "Policer": token bucket of the maximum BDP.
    pub policer: u64,
    /// FairPolicer: the larger of the New Reno (BDP²/18) and CUBIC (Eq. 16) requirements.
    pub fair_policer: u64,
    /// "Policer+": a token bucket sized like FairPolicer.
    pub policer_plus: u64,
    /// BC-PQP phantom queue: 10 × `fair_policer`. The text asks for "at least 10 × O(BDP²)";
    /// taking the larger of the Reno and CUBIC rules, as the public scripts do, satisfies it.
    pub bcpqp: u64,
    /// Each shaper queue.
    pub shaper_queue: u64,
}

impl EvaluationSizes {
    /// As the paper's text states them (000 §6.1), for a given rate and maximum RTT.
    pub fn paper(rate: Rate, max_rtt: Duration, mss: u64) -> Self {
        let bdp = bdp_bytes(rate, max_rtt);
        let reno = phantom_queue_bytes(rate, max_rtt, mss);
        let cubic = Cubic::default().fair_policer_bucket_bytes(rate, max_rtt, mss);
        let fp = reno.max(cubic);
        EvaluationSizes { policer: bdp, fair_policer: fp, policer_plus: fp, bcpqp: 10 * fp, shaper_queue: bdp }
    }

    /// As the authors' public scripts compute them (BCPQP `testbed/scripts/parameters.py`,
    /// algorithms.md §10), to reproduce their runs. Two differences from the text: the
    /// Policer and each shaper queue get 2 × BDP, and the CUBIC term evaluates
    /// (0.072/RTT)·BDP^{4/3} with the BDP in *bytes* instead of MSS, which inflates it by
    /// 1500^{1/3} ≈ 11.4 (at 10 Mbit/s and 100 ms: 4.5 MB instead of 390 KB).
    pub fn public_scripts(rate: Rate, max_rtt: Duration) -> Self {
        let bdp = rate.as_f64() * max_rtt.as_secs_f64();
        let reno = DEFAULT_MSS as f64 * (bdp / DEFAULT_MSS as f64).powi(2) / 18.0;
        let cubic = 0.072 / max_rtt.as_secs_f64() * bdp.powf(4.0 / 3.0);
        let fp = reno.max(cubic);
        EvaluationSizes {
            policer: (2.0 * bdp).round() as u64,
            fair_policer: fp.round() as u64,
            policer_plus: fp.round() as u64,
            bcpqp: (10.0 * fp).round() as u64,
            shaper_queue: (2.0 * bdp).round() as u64,
        }
    }
}
