//! Exponential decay, as a float and in the fixed-point form of DSCD (004 §IV-B).
//!
//! The fixed-point form computes a(n, y, s) = n·2^(−y/2^s) with integer arithmetic only, from the
//! piecewise approximation h(x) of 2^(−x) (004 Eq. 4-6, 9):
//!   h(x) = 1 − ln2·x                        for 0 ≤ x ≤ z ≈ 0.4443   (Eq. 5)
//!   h(x) = (⌊x⌋ − x + 2) / 2^(⌊x⌋+1)        for x > z                 (Eq. 4)
//! with ln2 ≈ 2^12/5909 (Eq. 7) and z ≈ 2^12/9219 (Eq. 8).
//! Error (004 Fig. 3b): |h(x) − 2^(−x)| ≤ 0.0432·2^(−⌊x⌋) over the whole range, and a relative
//! error of about 0.029 % for x < 0.034, where DSCD calls it under realistic conditions.

use crate::time::Duration;

/// The exponent scaling of 004 §IV-B3: y = x·2^20.
pub const EXP_SCALE: u32 = 20;

/// Which implementation of exp() an enforcer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpMode {
    /// The paper's integer approximation a(n, y, s), as in the Linux qdisc.
    #[default]
    Fixed,
    /// f64 `exp2`, the reference the approximation is judged against.
    Float,
}

/// a(n, y, s) = n·2^(−y/2^s) (004 Eq. 9), integer arithmetic only; `s` must be ≥ 12.
///
/// Deviation from the kernel code, which returns 0 once y/2^s ≥ 20: we keep computing until the
/// shift empties the value (⌊x⌋ ≥ 64), so large n keep their (tiny) remainder.
pub fn a(n: u64, y: u64, s: u32) -> u64 {
    debug_assert!(s >= 12, "Eq. 9 divides by 2^(s-12)");
    let (n, y) = (n as u128, y as u128);
    if y * 9219 <= 1u128 << (s + 12) {
        // Eq. 9, first case: n − y·n / (5909·2^(s−12)).
        let sub = (y * n) / (5909u128 << (s - 12));
        return n.saturating_sub(sub) as u64;
    }
    let whole = y >> s; // ⌊x⌋
    if whole >= 64 {
        return 0;
    }
    // Eq. 9, second case: (n·(⌊x⌋ + 2) − n·y/2^s) / 2^(⌊x⌋+1).
    let num = n * (whole + 2) - ((n * y) >> s);
    (num >> (whole + 1)) as u64
}

/// y for a(·, y, 20) such that a(n, y, 20) ≈ n·2^(−dt/half_life) (004 §IV-B3, DevaluateCredit).
pub fn half_life_exponent(dt: Duration, half_life: Duration) -> u64 {
    let y = ((dt.0 as u128) << EXP_SCALE) / half_life.0.max(1) as u128;
    y.min(u64::MAX as u128) as u64
}

/// y for a(·, y, 20) such that a(n, y, 20) ≈ n·e^(−dt/memory) (004 §IV-B3, EstimateBandwidth):
/// y = (dt/M)·5909·2^(s−12), i.e. x/ln2 with ln2 ≈ 2^12/5909.
pub fn e_folding_exponent(dt: Duration, memory: Duration) -> u64 {
    let y = (dt.0 as u128 * 5909 * (1u128 << (EXP_SCALE - 12))) / memory.0.max(1) as u128;
    y.min(u64::MAX as u128) as u64
}

impl ExpMode {
    /// n·2^(−dt/half_life).
    pub fn halve(self, n: u64, dt: Duration, half_life: Duration) -> u64 {
        match self {
            ExpMode::Fixed => a(n, half_life_exponent(dt, half_life), EXP_SCALE),
            ExpMode::Float => {
                (n as f64 * (-(dt.0 as f64) / half_life.0.max(1) as f64).exp2()).round() as u64
            }
        }
    }

    /// n·e^(−dt/memory).
    pub fn decay(self, n: u64, dt: Duration, memory: Duration) -> u64 {
        match self {
            ExpMode::Fixed => a(n, e_folding_exponent(dt, memory), EXP_SCALE),
            ExpMode::Float => (n as f64 * (-(dt.0 as f64) / memory.0.max(1) as f64).exp()).round() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_at_integer_exponents() {
        let n = 1u64 << 30;
        assert_eq!(a(n, 0, 20), n);
        assert_eq!(a(n, 1 << 20, 20), n / 2);
        assert_eq!(a(n, 3 << 20, 20), n / 8);
        assert_eq!(a(n, 64 << 20, 20), 0);
    }
}
