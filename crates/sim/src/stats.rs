//! What the run counts as it goes: per-aggregate counters and the statistics at the enforcement
//! points, each able to report itself as its part of summary.json.

use std::collections::BTreeMap;
use ratekit_lab::summary::{ClassSummary, EnforcerCounts, PathCounts};

/// Per-aggregate counters, shared by the elements that see the aggregate's packets.
#[derive(Debug, Clone, Copy, Default)]
pub struct AggCounters {
    pub arrivals: u64,
    pub enforcer_drops: u64,
    pub queue_drops: u64,
    pub random_losses: u64,
    /// IP bytes the aggregate's own link sent after the warm-up.
    pub link_bytes: u64,
}

impl AggCounters {
    pub fn enforcer_counts(&self, drops_by_reason: BTreeMap<&'static str, u64>) -> EnforcerCounts {
        EnforcerCounts { arrivals: self.arrivals, drops: self.enforcer_drops, drops_by_reason }
    }

    pub fn path_counts(&self, link_utilization: f64, classes: Vec<ClassSummary>) -> PathCounts {
        PathCounts { queue_drops: self.queue_drops, random_losses: self.random_losses, link_utilization, classes }
    }
}

/// Sojourn times: exact count, mean and maximum; percentiles from a log-linear histogram of
/// nanoseconds (exact below 64 ns, then 64 buckets per power of two, reported at the bucket's
/// midpoint: within 1/128 ≈ 0.8 % of the exact nearest-rank value). It grows only to the largest
/// delay seen (≈ 13 KB for 1 s), so memory stays bounded on long runs at any packet rate.
#[derive(Debug, Clone, Default)]
pub struct DelayHist {
    counts: Vec<u64>,
    n: u64,
    sum_ns: u128,
    max_ns: u64,
}

const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;

impl DelayHist {
    #[inline]
    fn index(v: u64) -> usize {
        if v < SUB {
            v as usize
        } else {
            let e = 63 - v.leading_zeros();
            (((e - SUB_BITS + 1) as u64) * SUB + ((v >> (e - SUB_BITS)) & (SUB - 1))) as usize
        }
    }

    /// The bucket's [low, low + width) range.
    fn bucket(i: usize) -> (u64, u64) {
        let i = i as u64;
        if i < SUB {
            (i, 1)
        } else {
            let shift = i / SUB - 1;
            ((SUB + i % SUB) << shift, 1 << shift)
        }
    }

    #[inline]
    pub fn record(&mut self, ns: u64) {
        let i = Self::index(ns);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.n += 1;
        self.sum_ns += ns as u128;
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn mean_ms(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.n as f64 / 1e6
        }
    }

    pub fn max_ms(&self) -> f64 {
        self.max_ns as f64 / 1e6
    }

    /// Nearest-rank percentile (`q` in [0, 1]) in ms; 0 without samples.
    pub fn percentile_ms(&self, q: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let rank = ((q * self.n as f64 - 1e-9).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, width) = Self::bucket(i);
                return (low + width / 2).min(self.max_ns) as f64 / 1e6;
            }
        }
        unreachable!("rank ≤ n")
    }
}

/// A flow's packets at its own aggregate's enforcer.
#[derive(Debug, Clone, Default)]
pub struct FlowEnf {
    pub arrivals: u64,
    pub drops: u64,
    pub delay: DelayHist,
}

#[derive(Debug, Clone, Default)]
pub struct ClassEnf {
    pub class: u16,
    pub arrivals: u64,
    pub sent: u64,
    pub drops: u64,
    pub delay: DelayHist,
}

impl ClassEnf {
    pub fn summary(&self) -> ClassSummary {
        let d = &self.delay;
        ClassSummary {
            class: self.class,
            arrivals: self.arrivals,
            sent: self.sent,
            drops: self.drops,
            delay_mean_ms: d.mean_ms(),
            delay_p50_ms: d.percentile_ms(0.5),
            delay_p95_ms: d.percentile_ms(0.95),
            delay_p99_ms: d.percentile_ms(0.99),
            delay_max_ms: d.max_ms(),
        }
    }
}

/// Statistics at the enforcement points, counted from `from_ns` (the warm-up) on: per flow at
/// its own aggregate's enforcer, per (aggregate, class) at every enforcer.
#[derive(Debug, Default)]
pub struct EnfStats {
    pub from_ns: u64,
    pub flow_agg: Vec<u32>,
    pub flows: Vec<FlowEnf>,
    /// Per aggregate, the classes seen so far (few: a linear search beats hashing).
    pub classes: Vec<Vec<ClassEnf>>,
}

impl EnfStats {
    #[inline]
    fn class(&mut self, agg: u32, class: u16) -> &mut ClassEnf {
        let v = &mut self.classes[agg as usize];
        let i = match v.iter().position(|c| c.class == class) {
            Some(i) => i,
            None => {
                v.push(ClassEnf { class, ..ClassEnf::default() });
                v.len() - 1
            }
        };
        &mut v[i]
    }

    #[inline]
    pub fn arrival(&mut self, now: u64, agg: u32, flow: u32, class: u16) {
        if now < self.from_ns {
            return;
        }
        if self.flow_agg[flow as usize] == agg {
            self.flows[flow as usize].arrivals += 1;
        }
        self.class(agg, class).arrivals += 1;
    }

    #[inline]
    pub fn drop(&mut self, now: u64, agg: u32, flow: u32, class: u16) {
        if now < self.from_ns {
            return;
        }
        if self.flow_agg[flow as usize] == agg {
            self.flows[flow as usize].drops += 1;
        }
        self.class(agg, class).drops += 1;
    }

    #[inline]
    pub fn sent(&mut self, now: u64, agg: u32, flow: u32, class: u16, sojourn_ns: u64) {
        if now < self.from_ns {
            return;
        }
        if self.flow_agg[flow as usize] == agg {
            self.flows[flow as usize].delay.record(sojourn_ns);
        }
        let c = self.class(agg, class);
        c.sent += 1;
        c.delay.record(sojourn_ns);
    }

    /// The aggregate's classes, ascending.
    pub fn class_summaries(&self, agg: usize) -> Vec<ClassSummary> {
        let mut v: Vec<ClassSummary> = self.classes[agg].iter().map(ClassEnf::summary).collect();
        v.sort_by_key(|c| c.class);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::DelayHist;

    /// Percentiles against exact nearest-rank ones on spread-out values: within the documented
    /// 1/128 relative error; mean and max exact.
    #[test]
    fn histogram_percentiles_are_within_a_bucket_of_exact() {
        let mut h = DelayHist::default();
        let mut exact = Vec::new();
        let mut x: u64 = 1;
        for i in 0..20_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = (x >> 40) % (1 + (i % 7) * 30_000_000); // 0 .. 180 ms, many scales
            h.record(v);
            exact.push(v);
        }
        exact.sort();
        for q in [0.01, 0.5, 0.95, 0.99, 0.999, 1.0] {
            let rank = ((q * exact.len() as f64 - 1e-9).ceil() as usize).clamp(1, exact.len());
            let e = exact[rank - 1] as f64 / 1e6;
            let got = h.percentile_ms(q);
            assert!((got - e).abs() <= e / 128.0 + 1e-6, "q {q}: {got} vs {e}");
        }
        let mean = exact.iter().sum::<u64>() as f64 / exact.len() as f64 / 1e6;
        assert!((h.mean_ms() - mean).abs() < 1e-9);
        assert_eq!(h.max_ms(), *exact.last().unwrap() as f64 / 1e6);
        for v in [0u64, 1, 63, 64, 65, 127, 128, 1000, 1 << 40] {
            let (low, width) = DelayHist::bucket(DelayHist::index(v));
            assert!(low <= v && v < low + width, "{v} not in [{low}, {})", low + width);
        }
    }
}
