//! 000 Table 1 and Fig. 7: what an enforcer costs per packet. Not a network simulation: the
//! arrivals of `ratekit bench` (crates/lab/src/bench.rs) through one enforcer, timed against the
//! token bucket on the same arrivals, repetition by repetition. The paper counts CPU cycles on its
//! DPDK middlebox; nanoseconds on this machine are not those cycles, but a ratio to a policer
//! timed back to back is what the paper's comparisons are ("5-7x fewer cycles than the shaper",
//! "marginally costlier than a simple policer"), and it is what a claim can judge on any machine.
//! Timing is only meaningful alone, so `ratekit reproduce` runs these after every simulation
//! (run.rs), one at a time.

use super::metrics::{offline_summary, RunResult};
use crate::bench;
use anyhow::bail;
use serde::Deserialize;

/// The `[base]` of a `kind = "cost"` paper file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostRun {
    /// A `ratekit bench` row (`token_bucket`, `bcpqp_fair`, `fair_policer`, ...) or `shaper`.
    pub enforcer: String,
    /// Aggregates of 10 Mbit/s, 64 flows and 16 queues each, offered twice their rate.
    pub aggregates: u32,
    /// Packets per timed pass (one untimed pass before it).
    pub packets: usize,
    /// Repetitions; the median ratio counts.
    pub reps: usize,
    pub seed: u64,
}

impl CostRun {
    pub fn validate(&self) -> anyhow::Result<()> {
        if !bench::cost_enforcers().contains(&self.enforcer.as_str()) {
            bail!("enforcer: '{}' is not one of {}", self.enforcer, bench::cost_enforcers().join(", "));
        }
        if self.aggregates == 0 || self.aggregates > 100_000 {
            bail!("aggregates: must be 1..=100000");
        }
        if !(10_000..=10_000_000).contains(&self.packets) {
            bail!("packets: must be 10000..=10000000 (fewer times too little to measure)");
        }
        if self.reps == 0 || self.reps > 101 {
            bail!("reps: must be 1..=101");
        }
        Ok(())
    }

    /// The progress bar's unit of work, on the simulations' scale (a pass of 200k packets takes
    /// about as long as a few simulated flow-seconds).
    pub fn cost(&self) -> f64 {
        (self.packets * self.reps * 2) as f64 / 1e5
    }
}

pub fn run(name: &str, cfg: &CostRun) -> anyhow::Result<RunResult> {
    let wall = std::time::Instant::now();
    let c = bench::relative_cost(&cfg.enforcer, cfg.aggregates, cfg.packets, cfg.reps, cfg.seed)?;
    let packets = (cfg.packets * cfg.reps * 2) as u64;
    let summary = offline_summary(name, cfg.seed, 0.0, packets, wall.elapsed().as_secs_f64());
    Ok(RunResult::costed(summary, c.ratio, c.ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reproduce::metrics::{Metric, Span};
    use crate::reproduce::selector::Selector;

    fn cfg(enforcer: &str) -> CostRun {
        CostRun { enforcer: enforcer.into(), aggregates: 10, packets: 20_000, reps: 3, seed: 1 }
    }

    #[test]
    fn every_enforcer_is_timed_against_the_token_bucket_and_nothing_else_reads_it() {
        // Timings are not asserted (DEVELOPERS.md): only that each enforcer ran and was compared.
        for e in ["token_bucket", "bcpqp_fair", "fair_policer", "shaper"] {
            let r = run("t", &cfg(e)).unwrap();
            let v = r.value(Metric::CostPerPacket, &Selector::default(), None, Span::default());
            assert!(v.is_finite() && v > 0.0, "{e}: {v}");
            assert!(r.value(Metric::parse("throughput_mean").unwrap(), &Selector::default(), None, Span::default()).is_nan());
        }
    }

    #[test]
    fn a_misnamed_enforcer_or_an_absurd_size_is_refused_by_field() {
        let err = cfg("bcpqp").validate().unwrap_err().to_string();
        assert!(err.starts_with("enforcer: 'bcpqp'") && err.contains("bcpqp_fair"), "{err}");
        let mut c = cfg("shaper");
        c.packets = 10;
        assert!(c.validate().unwrap_err().to_string().starts_with("packets:"));
        c.packets = 20_000;
        c.aggregates = 0;
        assert!(c.validate().unwrap_err().to_string().starts_with("aggregates:"));
    }
}
