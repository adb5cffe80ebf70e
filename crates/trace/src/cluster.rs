//! Rate clustering of 002 §3.2: a cluster with centre v covers [0.95·v, 1.05·v]; clusters are
//! chosen by the greedy algorithm for partial set cover until at least 75 % of the rates are
//! covered. Candidate centres are the rates themselves (an optimal cover can always be shifted
//! so that some covered rate sits at a cluster's edge, but centring on samples is what the
//! paper's "1-Mbps cluster" reading suggests, and it keeps centres interpretable).

/// One rate cluster: its centre and how many rates it newly covered when chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cluster {
    pub centre: f64,
    pub count: usize,
}

pub const DEFAULT_WIDTH: f64 = 0.05;
pub const DEFAULT_COVERAGE: f64 = 0.75;

/// Greedy partial set cover of `rates` (non-finite and non-positive values are ignored).
pub fn rate_clusters(rates: &[f64], width: f64, coverage: f64) -> Vec<Cluster> {
    let mut sorted: Vec<f64> = rates.iter().copied().filter(|r| r.is_finite() && *r > 0.0).collect();
    sorted.sort_unstable_by(f64::total_cmp);
    let n = sorted.len();
    let need = (coverage * n as f64).ceil() as usize;
    let mut covered = vec![false; n];
    let mut done = 0;
    let mut clusters = Vec::new();
    // Each candidate's range [lo, hi) of indices in `sorted`, fixed for the whole run.
    let ranges: Vec<(usize, usize)> = sorted
        .iter()
        .map(|&v| {
            let lo = sorted.partition_point(|&x| x < v * (1.0 - width));
            let hi = sorted.partition_point(|&x| x <= v * (1.0 + width));
            (lo, hi)
        })
        .collect();
    while done < need {
        let mut prefix = Vec::with_capacity(n + 1);
        prefix.push(0usize);
        for &c in &covered {
            prefix.push(prefix.last().unwrap() + usize::from(!c));
        }
        // Ties go to the smallest centre, so the result is deterministic.
        let (best, gain) = ranges
            .iter()
            .enumerate()
            .map(|(i, &(lo, hi))| (i, prefix[hi] - prefix[lo]))
            .fold((0, 0), |acc, x| if x.1 > acc.1 { x } else { acc });
        if gain == 0 {
            break;
        }
        let (lo, hi) = ranges[best];
        covered[lo..hi].iter_mut().for_each(|c| *c = true);
        done += gain;
        clusters.push(Cluster { centre: sorted[best], count: gain });
    }
    clusters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_rates_give_few_clusters() {
        // 60 % near 1 Mbit/s, 30 % near 2 Mbit/s, 10 % scattered.
        let mut rates = Vec::new();
        for i in 0..60 {
            rates.push(1e6 * (0.97 + 0.001 * i as f64));
        }
        for i in 0..30 {
            rates.push(2e6 * (0.98 + 0.001 * i as f64));
        }
        for i in 0..10 {
            rates.push(3e6 + 7e5 * i as f64);
        }
        let c = rate_clusters(&rates, DEFAULT_WIDTH, DEFAULT_COVERAGE);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!((c[0].centre - 1e6).abs() < 5e4 && c[0].count == 60, "{c:?}");
        assert!((c[1].centre - 2e6).abs() < 1e5 && c[1].count == 30, "{c:?}");
    }

    #[test]
    fn dispersed_rates_need_many_clusters() {
        // Geometric spread by 12 % steps: no two rates share a ±5 % cluster.
        let rates: Vec<f64> = (0..40).map(|i| 1e5 * 1.12f64.powi(i)).collect();
        assert_eq!(rate_clusters(&rates, DEFAULT_WIDTH, DEFAULT_COVERAGE).len(), 30);
        assert!(rate_clusters(&[], DEFAULT_WIDTH, DEFAULT_COVERAGE).is_empty());
        assert!(rate_clusters(&[f64::NAN, -1.0], DEFAULT_WIDTH, DEFAULT_COVERAGE).is_empty());
    }
}
