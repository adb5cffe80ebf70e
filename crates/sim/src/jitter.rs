//! The hosts' timing noise on a path (the ACK path's `ack_jitter`): part of it drawn afresh for
//! every packet, part drifting slowly so that packets close in time share it, as the testbed's
//! captures show (docs/simulator.md, "The ACK path's noise drifts").

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The hosts' timing noise on a path: below `bound_ns` in all, `slow_share` of it drifting with a
/// memory of `memory_ns` (shared by packets close in time), the rest drawn afresh per packet.
#[derive(Debug, Clone, Copy)]
pub struct Jitter {
    pub bound_ns: u64,
    pub slow_share: f64,
    pub memory_ns: u64,
}

/// A Jitter's state: the drifting part is an Ornstein-Uhlenbeck process z (standard normal at any
/// one time) read through the normal CDF, so that it is uniform below its share of the bound.
pub struct Noise {
    cfg: Jitter,
    rng: ChaCha8Rng,
    z: f64,
    z_at_ns: Option<u64>,
    slow_ns: f64,
}

/// The drifting part is stepped at most once a millisecond: over that time it moves by a few
/// hundredths of its spread (memory 1 s), and the step is exact for any interval, so the packets
/// of one burst share it without biasing it.
const SLOW_STEP_NS: u64 = 1_000_000;

impl Noise {
    pub fn new(cfg: Jitter, rng: ChaCha8Rng) -> Self {
        Noise { cfg, rng, z: 0.0, z_at_ns: None, slow_ns: 0.0 }
    }

    /// The extra delay of a packet entering the path at `now` (called in time order).
    pub fn draw(&mut self, now: u64) -> u64 {
        let bound = self.cfg.bound_ns as f64;
        let slow = bound * self.cfg.slow_share;
        let fast = bound - slow;
        let extra = if fast >= 1.0 { self.rng.gen_range(0.0..fast) } else { 0.0 };
        if slow >= 1.0 && self.z_at_ns.map_or(true, |at| now - at >= SLOW_STEP_NS) {
            let normal = self.standard_normal();
            self.z = match self.z_at_ns {
                None => normal,
                Some(at) => {
                    let keep = (-((now - at) as f64) / self.cfg.memory_ns as f64).exp();
                    self.z * keep + normal * (1.0 - keep * keep).sqrt()
                }
            };
            self.z_at_ns = Some(now);
            self.slow_ns = slow * normal_cdf(self.z);
        }
        (extra + self.slow_ns) as u64
    }

    fn standard_normal(&mut self) -> f64 {
        let (u1, u2): (f64, f64) = (self.rng.gen_range(f64::MIN_POSITIVE..1.0), self.rng.gen());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Φ(z) from erfc's Chebyshev fit (Numerical Recipes' erfcc, relative error below 1.2e-7).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x);
    let poly = -x * x - 1.26551223
        + t * (1.00002368
            + t * (0.37409196
                + t * (0.09678418
                    + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    let erfc = t * poly.exp();
    if z >= 0.0 { 1.0 - erfc / 2.0 } else { erfc / 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const NOISE: Jitter = Jitter { bound_ns: 250_000, slow_share: 0.5, memory_ns: 1_000_000_000 };

    /// Median |difference| of the delays of packets `apart` packets apart.
    fn median_change(delays: &[u64], apart: usize) -> f64 {
        let mut d: Vec<u64> = delays.windows(apart + 1).map(|w| w[0].abs_diff(w[apart])).collect();
        d.sort_unstable();
        d[d.len() / 2] as f64
    }

    #[test]
    fn the_slow_share_of_the_noise_is_shared_by_packets_close_in_time_and_forgotten_over_seconds() {
        // One packet every 10 ms for 200 s.
        let delays = |slow_share| {
            let mut noise = Noise::new(Jitter { slow_share, ..NOISE }, ChaCha8Rng::seed_from_u64(1));
            (0..20_000u64).map(|i| noise.draw(i * 10_000_000)).collect::<Vec<_>>()
        };
        let (fresh, drifting) = (delays(0.0), delays(0.5));
        // Two uniforms below 250 µs differ by a median 250·(1 − 1/√2) = 73 µs, near or far; with
        // half the spread drifting, packets 10 ms apart differ by about as much as two draws
        // below 125 µs (37 µs), and packets 5 s apart as two independent sums of two such draws
        // (about 50 µs).
        for apart in [1, 500] {
            assert!((65_000.0..82_000.0).contains(&median_change(&fresh, apart)), "fresh noise, {apart} apart");
        }
        let (near, far) = (median_change(&drifting, 1), median_change(&drifting, 500));
        assert!((33_000.0..45_000.0).contains(&near), "near {near}");
        assert!((45_000.0..60_000.0).contains(&far) && far > near + 8_000.0, "far {far}");
        // The drifting part stays uniform below its share of the bound.
        let mean = drifting.iter().sum::<u64>() as f64 / drifting.len() as f64;
        assert!((115_000.0..135_000.0).contains(&mean), "mean {mean}");
        assert!(drifting.iter().all(|&d| d < 250_000));
    }

    #[test]
    fn packets_of_one_burst_share_the_drifting_part() {
        // Within a millisecond only the fresh half varies: below 125 µs apart.
        let mut noise = Noise::new(Jitter { slow_share: 0.5, ..NOISE }, ChaCha8Rng::seed_from_u64(2));
        let burst: Vec<u64> = (0..50u64).map(|i| noise.draw(5_000_000_000 + i * 10_000)).collect();
        assert!(burst.iter().max().unwrap() - burst.iter().min().unwrap() < 125_000, "{burst:?}");
    }
}
