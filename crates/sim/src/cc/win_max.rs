//! The windowed running maximum of Linux's lib/win_minmax.c (Kathleen Nichols' algorithm), which
//! BBR's bandwidth filter uses: the best, second and third best samples of the window, each with
//! its time. It ages only when a sample is inserted. A sender that inserts nothing for longer
//! than the window (BBR in ProbeRTT, whose app-limited samples below the maximum are skipped)
//! keeps its estimate, and its first sample afterwards replaces it; a filter that expired entries
//! by the clock instead let BBR's bandwidth fall to ProbeRTT's own rate once ProbeRTT outlasted
//! ten rounds (every path under 20 ms).

#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    t: u64,
    v: f64,
}

#[derive(Clone, Debug, Default)]
pub struct WinMax {
    s: [Sample; 3],
}

impl WinMax {
    pub fn get(&self) -> f64 {
        self.s[0].v
    }

    fn reset(&mut self, val: Sample) -> f64 {
        self.s = [val; 3];
        val.v
    }

    /// Inserts `v` measured at time `t` (any monotonic unit; BBR uses its round count) into a
    /// window of `win` such units and returns the maximum.
    pub fn update(&mut self, win: u64, t: u64, v: f64) -> f64 {
        let val = Sample { t, v };
        if v >= self.s[0].v || t.saturating_sub(self.s[2].t) > win {
            return self.reset(val);
        }
        if v >= self.s[1].v {
            self.s[1] = val;
            self.s[2] = val;
        } else if v >= self.s[2].v {
            self.s[2] = val;
        }
        self.age(win, val)
    }

    /// The best sample left the window: promote the others. While the window's first quarter
    /// (half) has passed with the best and second (third) best still one sample, a newer sample
    /// takes the lower place, so the filter has a fallback when the best expires.
    fn age(&mut self, win: u64, val: Sample) -> f64 {
        let dt = val.t.saturating_sub(self.s[0].t);
        if dt > win {
            self.s = [self.s[1], self.s[2], val];
            if val.t.saturating_sub(self.s[0].t) > win {
                self.s = [self.s[1], self.s[2], val];
            }
        } else if self.s[1].t == self.s[0].t && dt > win / 4 {
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].t == self.s[1].t && dt > win / 2 {
            self.s[2] = val;
        }
        self.s[0].v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_left_alone_keeps_its_maximum_and_its_next_sample_replaces_it() {
        let mut f = WinMax::default();
        f.update(10, 0, 50.0);
        assert_eq!(f.get(), 50.0, "no insertion, no ageing, however long");
        assert_eq!(f.update(10, 25, 5.0), 5.0, "the window has passed: the new sample is the filter");
    }

    #[test]
    fn the_maximum_expires_after_the_window_and_the_runner_up_takes_over() {
        let mut f = WinMax::default();
        f.update(10, 0, 100.0);
        for t in 1..=10 {
            assert_eq!(f.update(10, t, 60.0 - t as f64), 100.0, "round {t} is inside the window");
        }
        let after = f.update(10, 11, 30.0);
        assert!(after < 100.0 && after >= 30.0, "the best sample left the window: {after}");
    }
}
