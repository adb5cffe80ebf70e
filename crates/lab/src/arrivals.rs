//! Random draws every traffic source shares: exponential gaps and sizes (Poisson arrivals) and
//! Pareto sizes, by inverse transform from the caller's seeded generator, so every source that
//! draws the same numbers gets the same arrivals.

use crate::scenario::Dist;
use rand::Rng;

/// 1 − U for U uniform in [0, 1): in (0, 1], so its logarithm is finite and its power defined.
#[inline]
fn open_unit(rng: &mut impl Rng) -> f64 {
    1.0 - rng.gen::<f64>()
}

/// An exponentially distributed value of mean `mean` (a Poisson process's gap).
#[inline]
pub fn exponential(rng: &mut impl Rng, mean: f64) -> f64 {
    -mean * open_unit(rng).ln()
}

/// A Pareto value of mean `mean` and shape `shape` (> 1): scale x_m = mean·(shape − 1)/shape.
#[inline]
pub fn pareto(rng: &mut impl Rng, mean: f64, shape: f64) -> f64 {
    let xm = mean * (shape - 1.0) / shape;
    xm / open_unit(rng).powf(1.0 / shape)
}

/// A value of mean `mean` from `dist` (`shape` is the Pareto shape): a scenario's on-off sizes
/// and gaps, drawn alike by the simulator and the testbed.
#[inline]
pub fn draw(rng: &mut impl Rng, dist: Dist, mean: f64, shape: f64) -> f64 {
    match dist {
        Dist::Exp => exponential(rng, mean),
        Dist::Pareto => pareto(rng, mean, shape),
    }
}

/// The arrival times in [0, end) of a Poisson process with mean gap `mean_gap`.
pub fn poisson_times(rng: &mut impl Rng, mean_gap: f64, end: f64) -> impl Iterator<Item = f64> + '_ {
    let mut t = 0.0;
    std::iter::from_fn(move || {
        t += exponential(rng, mean_gap);
        (t < end).then_some(t)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn means_match_their_distribution() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 200_000;
        let exp: f64 = (0..n).map(|_| exponential(&mut rng, 3.0)).sum::<f64>() / n as f64;
        assert!((exp - 3.0).abs() < 0.03, "exponential mean {exp}");
        // Shape 3 has finite variance, so the sample mean converges at the usual rate.
        let par: f64 = (0..n).map(|_| pareto(&mut rng, 3.0, 3.0)).sum::<f64>() / n as f64;
        assert!((par - 3.0).abs() < 0.05, "pareto mean {par}");
        let count = poisson_times(&mut rng, 0.5, 10_000.0).count() as f64;
        assert!((count - 20_000.0).abs() < 3.0 * 20_000f64.sqrt(), "{count} arrivals, 20,000 expected");
    }

    #[test]
    fn a_zero_uniform_draw_stays_finite() {
        // U = 0 is possible from gen::<f64>(); 1 − U = 1 gives a zero gap, never infinity.
        struct Zero;
        impl rand::RngCore for Zero {
            fn next_u32(&mut self) -> u32 { 0 }
            fn next_u64(&mut self) -> u64 { 0 }
            fn fill_bytes(&mut self, d: &mut [u8]) { d.fill(0) }
            fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), rand::Error> { d.fill(0); Ok(()) }
        }
        assert_eq!(exponential(&mut Zero, 5.0), 0.0);
        assert!(pareto(&mut Zero, 5.0, 1.5).is_finite());
    }
}
