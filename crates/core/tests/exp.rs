//! The fixed-point exp of DSCD (004 §IV-B) against 2^(−x), over its whole range.

use ratekit_core::exp_decay::{a, ExpMode, EXP_SCALE};
use ratekit_core::Duration;

/// 004 Fig. 3b: the larger of the two error curves at their crossing z and f's peak beyond it,
/// max |h(x) − 2^(−x)| over [0, 1) ≈ 0.0431; on [k, k+1) the error scales by 2^(−k).
const FIG3B_ABS_ERROR: f64 = 0.0432;

fn exact(n: u64, y: u64) -> f64 {
    n as f64 * (-(y as f64) / (1u64 << EXP_SCALE) as f64).exp2()
}

#[test]
fn fixed_point_within_fig3b_bound_over_whole_range() {
    for &n in &[1u64 << 10, 1 << 20, 123_456_789, 1 << 40, (1 << 50) + 12345] {
        // x from 0 to 64 in steps of 2^-12, plus odd offsets to hit non-grid points.
        let mut y = 0u64;
        while y < 64 << EXP_SCALE {
            let got = a(n, y, EXP_SCALE) as f64;
            let want = exact(n, y);
            let whole = (y >> EXP_SCALE) as i32;
            // Integer division loses at most a couple of units.
            let bound = FIG3B_ABS_ERROR * n as f64 * 2f64.powi(-whole) + 2.0;
            assert!((got - want).abs() <= bound, "n={n} x={} got {got} want {want}", y as f64 / (1u64 << 20) as f64);
            y += (1 << (EXP_SCALE - 12)) + 7;
        }
        assert_eq!(a(n, 64 << EXP_SCALE, EXP_SCALE), 0);
    }
}

#[test]
fn fixed_point_relative_error_below_paper_bound_for_small_x() {
    // 004 §IV-B3: for x < 0.034 the relative error is about 0.029 %.
    let n = 1u64 << 40;
    let limit = (0.034 * (1u64 << EXP_SCALE) as f64) as u64;
    let mut worst: f64 = 0.0;
    for y in (0..limit).step_by(17) {
        let rel = (a(n, y, EXP_SCALE) as f64 - exact(n, y)).abs() / exact(n, y);
        worst = worst.max(rel);
    }
    assert!(worst <= 0.00030, "worst relative error {worst}");
    assert!(worst >= 0.00020, "the linear branch must be in use (worst {worst})");
}

#[test]
fn decay_helpers_match_their_definitions() {
    let n = 1u64 << 30;
    let t = Duration::from_millis(100);
    for mode in [ExpMode::Fixed, ExpMode::Float] {
        assert_eq!(mode.halve(n, t, t), n / 2, "{mode:?}");
        assert_eq!(mode.halve(n, Duration(3 * t.0), t), n / 8, "{mode:?}");
        let e = mode.decay(n, Duration::from_millis(1), Duration::from_millis(50)) as f64;
        let want = n as f64 * (-0.02f64).exp();
        assert!((e - want).abs() / want < 3e-4, "{mode:?}: {e} vs {want}");
    }
}
