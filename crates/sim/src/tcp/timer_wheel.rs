//! When Linux's TCP timers fire: the retransmission, loss-probe and RACK reorder timers and the
//! delayed ACK are `timer_list`s on the kernel's timer wheel (kernel/time/timer.c), not hrtimers.
//! A timeout is counted in jiffies (rounded up) from the current jiffy, and the wheel files it in
//! a bucket of its level's granularity (1 jiffy below 63, 8 below 504, 64 below 4032, ...),
//! rounded up past the expiry, so it fires on a tick boundary up to a bucket late. With
//! CONFIG_HZ=250 (the default: the testbed's kernel, and Ubuntu's generic ones; a flow's
//! `kernel_hz` sets it) a 240 ms RTO fires 244-248 ms
//! after it is armed and its first backoff (480 ms) 484-512 ms after. Firing on exact multiples
//! of the timeout instead phase-locks a flow's backed-off retransmissions to the other flows'
//! ACK clocks: behind a policer the same empty-bucket moment met every retry (measured: one of
//! four Reno flows at 2 Mbit/s held at cwnd 1 from 2.3 s to 5.7 s by three retransmissions of one
//! segment dropped 480 and 960 ms apart, 240 ms being 6 of its 40 ms RTTs).

/// One kernel's wheel: its tick length (1 s / CONFIG_HZ).
#[derive(Debug, Clone, Copy)]
pub struct TimerWheel {
    pub jiffy_ns: u64,
}

impl Default for TimerWheel {
    fn default() -> Self {
        TimerWheel::hz(250)
    }
}

impl TimerWheel {
    pub fn hz(hz: u32) -> Self {
        TimerWheel { jiffy_ns: 1_000_000_000 / hz as u64 }
    }

    /// The time a timer armed at `now_ns` for `timeout_ns` fires.
    pub fn expiry(&self, now_ns: u64, timeout_ns: u64) -> u64 {
        expiry_on(self.jiffy_ns, now_ns, timeout_ns)
    }
}

fn expiry_on(jiffy_ns: u64, now_ns: u64, timeout_ns: u64) -> u64 {
    let delta = timeout_ns.div_ceil(jiffy_ns).max(1);
    let expires = now_ns / jiffy_ns + delta;
    // LVL_START(n) = 63 << 3(n − 1): the levels' bounds on the distance from now.
    let shift = match delta {
        d if d < 63 => 0,
        d if d < 504 => 3,
        d if d < 4032 => 6,
        d if d < 32256 => 9,
        _ => 12,
    };
    (((expires >> shift) + 1) << shift) * jiffy_ns
}

#[cfg(test)]
mod tests {
    use super::*;
    const MS: u64 = 1_000_000;
    const JIFFY_NS: u64 = 4_000_000;

    fn expiry(now_ns: u64, timeout_ns: u64) -> u64 {
        TimerWheel::default().expiry(now_ns, timeout_ns)
    }

    #[test]
    fn short_timers_fire_a_tick_after_their_jiffy_and_long_ones_on_coarser_buckets() {
        // 240 ms = 60 jiffies (level 0): the tick after jiffy 60, whatever the phase inside jiffy 0.
        assert_eq!(expiry(0, 240 * MS), 244 * MS);
        assert_eq!(expiry(3 * MS, 240 * MS), 244 * MS);
        // 40 ms delayed ACK: 10 jiffies, one more tick.
        assert_eq!(expiry(5 * MS, 40 * MS), 48 * MS);
        // 480 ms = 120 jiffies (level 1, 8 jiffies a bucket): next multiple of 32 ms past 480.
        assert_eq!(expiry(0, 480 * MS), 512 * MS);
        assert_eq!(expiry(20 * MS, 480 * MS), 512 * MS);
        assert_eq!(expiry(40 * MS, 480 * MS), 544 * MS);
        // 3 s = 750 jiffies (level 2, 64 jiffies = 256 ms a bucket).
        assert_eq!(expiry(0, 3_000 * MS), 3_072 * MS);
        // Never early, never before the next tick.
        for now in (0..2_000 * MS).step_by(7 * MS as usize + 13) {
            for t in [1, 2 * MS, 40 * MS, 201 * MS, 999 * MS, 5_000 * MS] {
                let at = expiry(now, t);
                assert!(at >= now + t && at % JIFFY_NS == 0, "{now} {t} {at}");
            }
        }
    }

    #[test]
    fn a_1000_hz_kernel_fires_on_millisecond_ticks() {
        let wheel = TimerWheel::hz(1000);
        // 240 ms = 240 jiffies (level 1 at 1000 Hz: 8 ms buckets): the next multiple of 8 ms past 240.
        assert_eq!(wheel.expiry(0, 240 * MS), 248 * MS);
        assert_eq!(wheel.expiry(0, 40 * MS), 41 * MS);
    }
}
