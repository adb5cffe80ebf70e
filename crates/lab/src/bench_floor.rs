//! A reference row for `ratekit bench`: the cheapest per-flow-fair phantom-queue policer we could
//! write, to tell how much of BC-PQP's cost over a token bucket any fair PQP must pay.
//!
//! It is PQP (000 §3) for a flat `fair` policy and nothing more: no burst control, no other
//! policies, no statistics, 16 queues fixed. Instead of core's exact nano-byte hand-out it keeps
//! fair service as a level in virtual time: every non-empty queue has received `level` nano-bytes
//! of service since the level started, so queue q holds finish[q] − level (0 if negative); the
//! service that does not divide evenly among the queues is carried to the next arrival. Queues
//! emptying are found by comparing the level with the smallest finish. It is not an enforcer of
//! ratekit (its remainder handling differs from core's by under one byte; a test bounds the
//! difference) and is never used outside the bench.

use ratekit_core::packet::mix64;
use ratekit_core::pqp::PqpConfig;
use ratekit_core::{Classify, DropReason, Instant, Packet, Policer, Verdict};

const QUEUES: usize = 16;
const NANOS_PER_SEC: u64 = 1_000_000_000;
/// Levels are rebased past this, long before u64 nano-bytes could wrap.
const REBASE_AT: u64 = 1 << 62;

#[derive(Debug, Clone)]
pub struct FairPqpFloor {
    /// Bytes per second: nano-bytes of service per nanosecond.
    rate: u64,
    size_nb: u64,
    last: u64,
    level: u64,
    carry: u64,
    active: u64,
    /// Smallest finish among non-empty queues (u64::MAX when none).
    next_empty: u64,
    finish: [u64; QUEUES],
}

impl FairPqpFloor {
    /// From the bench's `pqp_fair` config, which must be flat fair over 16 flow-hashed queues.
    pub fn new(cfg: &PqpConfig) -> anyhow::Result<Self> {
        if cfg.policy != "fair" || cfg.queues as usize != QUEUES || cfg.classify != Classify::Flow {
            anyhow::bail!("the floor reference needs policy = \"fair\" over 16 flow-hashed queues");
        }
        Ok(FairPqpFloor {
            rate: cfg.rate.0,
            size_nb: cfg.queue_size.0.saturating_mul(NANOS_PER_SEC),
            last: 0,
            level: 0,
            carry: 0,
            active: 0,
            next_empty: u64::MAX,
            finish: [0; QUEUES],
        })
    }

    #[inline]
    fn advance(&mut self, now: u64) {
        if now <= self.last {
            return;
        }
        let budget = (now - self.last).saturating_mul(self.rate).saturating_add(self.carry);
        self.last = now;
        if self.active == 0 {
            return;
        }
        // Below the next emptying every queue gets an equal part (the common case).
        let reach = self.next_empty - self.level;
        if budget / self.active < reach {
            let part = budget / self.active;
            self.level += part;
            self.carry = budget - part * self.active;
        } else {
            self.serve_past_emptying(budget);
        }
    }

    /// Serves `budget` while queues empty on the way, re-dividing among those left.
    #[inline(never)]
    fn serve_past_emptying(&mut self, mut budget: u64) {
        while self.active > 0 {
            let to_next = (self.next_empty - self.level).saturating_mul(self.active);
            if budget < to_next {
                let part = budget / self.active;
                self.level += part;
                budget -= part * self.active;
                break;
            }
            budget -= to_next;
            self.level = self.next_empty;
            self.recount();
        }
        self.carry = if self.active == 0 { 0 } else { budget };
        if self.level > REBASE_AT {
            for f in &mut self.finish {
                *f = f.saturating_sub(self.level);
            }
            self.next_empty = self.next_empty.saturating_sub(self.level);
            self.level = 0;
        }
    }

    fn recount(&mut self) {
        let (mut active, mut next) = (0, u64::MAX);
        for &f in &self.finish {
            if f > self.level {
                active += 1;
                next = next.min(f);
            }
        }
        (self.active, self.next_empty) = (active, next);
    }

    /// Occupancy of queue `q` in nano-bytes, as of the last arrival.
    #[cfg(test)]
    fn occupancy_nb(&self, q: usize) -> u64 {
        self.finish[q].saturating_sub(self.level)
    }
}

impl Policer for FairPqpFloor {
    #[inline]
    fn on_arrival(&mut self, now: Instant, pkt: &Packet) -> Verdict {
        let q = (mix64(pkt.flow) as usize) & (QUEUES - 1);
        self.advance(now.0);
        let finish = self.finish[q];
        let occupancy = finish.saturating_sub(self.level);
        let need = pkt.len as u64 * NANOS_PER_SEC;
        if occupancy + need > self.size_nb {
            return Verdict::Drop(DropReason::Overlimit);
        }
        if occupancy == 0 {
            let f = self.level + need;
            self.finish[q] = f;
            self.active += 1;
            self.next_empty = self.next_empty.min(f);
        } else {
            self.finish[q] = finish + need;
        }
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use ratekit_core::pqp::Pqp;
    use ratekit_core::EnforcerConfig;

    fn config() -> PqpConfig {
        let text = "kind = \"pqp\"\nrate = \"10mbit\"\nqueues = 16\nqueue_size = \"60kb\"\npolicy = \"fair\"\n";
        match EnforcerConfig::from_toml(text).unwrap() {
            EnforcerConfig::Pqp(c) => c,
            _ => unreachable!(),
        }
    }

    /// The floor is only a fair reference if it polices like core's PQP: same verdicts on the
    /// same arrivals except where the two remainder rules put an occupancy on different sides of
    /// the limit, and occupancies within a byte.
    #[test]
    fn polices_like_core_pqp() {
        let cfg = config();
        let (mut floor, mut pqp) = (FairPqpFloor::new(&cfg).unwrap(), Pqp::new(&cfg));
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (mut t, mut differ, mut passed) = (0u64, 0, 0);
        let n = 200_000;
        for i in 0..n {
            // Bursts and idle gaps, so queues fill, empty and restart; flows 0..40 over 16 queues.
            t += if i % 5000 < 4000 { rng.gen_range(0..400_000) } else { rng.gen_range(0..20_000_000) };
            let pkt = Packet { len: rng.gen_range(40..=1500), flow: rng.gen_range(0..40), ..Packet::default() };
            let (a, b) = (floor.on_arrival(Instant(t), &pkt), pqp.on_arrival(Instant(t), &pkt));
            differ += (a != b) as u32;
            passed += a.is_pass() as u32;
            for q in 0..QUEUES {
                let (x, y) = (floor.occupancy_nb(q), pqp.occupancy_nb(q));
                assert!(x.abs_diff(y) < NANOS_PER_SEC, "packet {i}, queue {q}: floor {x} nb, PQP {y} nb");
            }
        }
        assert!(passed > n / 4 && passed < n * 9 / 10, "both paths must run: {passed} of {n} passed");
        assert!(differ <= 2, "{differ} verdicts differ");
    }

    #[test]
    fn rejects_other_policies() {
        let mut cfg = config();
        cfg.policy = "priority".into();
        assert!(FairPqpFloor::new(&cfg).is_err());
    }
}
