//! Open-loop constant-rate sources for long-run share tests: each flow sends fixed-size
//! packets at a fixed rate from a seeded random phase, in its own class (= queue).

use ratekit_core::{Instant, Packet, Policer};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub const PKT: u64 = 1000;

/// Per flow: bytes offered and bytes passed in `[from, to)`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub offered: u64,
    pub passed: u64,
}

/// Flow `i` starts at `starts[i]` (ns), sends at `rates[i]` bytes/s until `stops[i]`, then at
/// `after[i]` bytes/s (0: silent). Returns per-flow tallies over `[from, to)`.
pub struct Source {
    pub rate: u64,
    pub start: u64,
    pub stop: u64,
    pub after: u64,
}

impl Source {
    pub fn steady(rate: u64) -> Self {
        Source { rate, start: 0, stop: u64::MAX, after: 0 }
    }
}

/// Replays the sources through `p` up to `end` ns, tallying `[from, end)`; `observe` sees
/// every arrival after the verdict.
pub fn run(
    p: &mut impl Policer,
    sources: &[Source],
    seed: u64,
    from: u64,
    end: u64,
    mut observe: impl FnMut(u64, usize, bool),
) -> Vec<Tally> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let gap = |rate: u64| PKT * 1_000_000_000 / rate;
    let mut next: Vec<u64> = sources
        .iter()
        .map(|s| if s.rate == 0 { u64::MAX } else { s.start + rng.gen_range(0..gap(s.rate)) })
        .collect();
    let mut tally = vec![Tally::default(); sources.len()];
    loop {
        let (i, &t) = next.iter().enumerate().min_by_key(|(_, t)| **t).unwrap();
        if t >= end {
            break;
        }
        let pkt = Packet { id: 0, len: PKT as u32, flow: i as u64, class: i as u16, aggregate: 0 };
        let pass = p.on_arrival(Instant(t), &pkt).is_pass();
        observe(t, i, pass);
        if t >= from {
            tally[i].offered += PKT;
            tally[i].passed += PKT * pass as u64;
        }
        let s = &sources[i];
        let rate = if t >= s.stop { s.after } else { s.rate };
        next[i] = if rate == 0 { u64::MAX } else { t + gap(rate) };
    }
    tally
}
