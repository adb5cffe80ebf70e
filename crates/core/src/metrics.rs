//! The measurements every driver reports (algorithms.md §9; 000 §6.1), defined once so that the
//! simulator, the testbed, replay and the reproduction report mean the same thing by "Jain's
//! index" and "p99". Which flows count as active in a window is the caller's decision.

/// Jain's fairness index (Σx)² / (n·Σx²) over `xs`: 1 when all are equal, 1/n when one takes
/// everything. `None` for an empty set, and when every x is zero (nobody was served, so there is
/// no share to judge).
pub fn jain(xs: &[f64]) -> Option<f64> {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    (squares > 0.0).then(|| sum * sum / (xs.len() as f64 * squares))
}

/// Nearest-rank percentile (`q` in [0, 1]) of samples sorted ascending; 0 for no samples.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    // 99.9 / 100 reads 0.99900000000000001 in binary: the slack keeps a decimal percentile from
    // stepping up one rank.
    let rank = (q * sorted.len() as f64 - 1e-9).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Arithmetic mean; 0 for no samples.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_extremes() {
        assert_eq!(jain(&[2.0, 2.0, 2.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]).unwrap() - 0.25).abs() < 1e-12);
        assert!((jain(&[0.9, 0.1]).unwrap() - 1.0 / (2.0 * 0.82)).abs() < 1e-12);
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=1000).map(|x| x as f64).collect();
        assert_eq!(percentile(&v, 0.99), 990.0);
        assert_eq!(percentile(&v, 0.999), 999.0);
        assert_eq!(percentile(&v, 1.0), 1000.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
    }
}
