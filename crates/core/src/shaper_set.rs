//! Many shaped aggregates on one hashed timing wheel (Varghese & Lauck 1987, scheme 6;
//! algorithms.md §5).
//!
//! Each backlogged aggregate is due again at its shaper's next departure (last departure +
//! len/r). The wheel has `wheel_slots` slots of width g (`ShaperConfig::wheel_slot_width`, by
//! default half an MSS's transmission time at the aggregate rate, as the BC-PQP authors' shaper):
//! an aggregate due at d sits in slot ⌈d/g⌉ mod slots, together with d so that entries a whole
//! rotation or more ahead stay put when their slot comes round. Granularity: a packet leaves at
//! most one slot (g) after its exact departure time, never before it; the shaper's virtual
//! clock absorbs the lateness, so the long-run rate is exact. Aggregates due in the same slot
//! are served round robin, one packet each. `next_wakeup` may name a slot whose entries are a
//! rotation ahead (a spurious wake-up, at most once per rotation).
//! Steady state does not allocate: slot vectors, the ready list and each aggregate's queues keep
//! their capacity; only a never-seen aggregate allocates its shaper.

use crate::validate::ConfigError;
use crate::shaper::{Shaper, ShaperConfig};
use crate::{Dropped, Instant, Packet, QueueDiscipline};
use crate::fast_hash::FastMap;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy)]
struct Entry {
    aggregate: u32,
    due: u64,
}

pub struct ShaperSet {
    prototype: Shaper,
    /// The same hasher as the policers' `Aggregates`, so that the bench compares enforcers,
    /// not hash functions.
    index: FastMap<u64, u32>,
    shapers: Vec<Shaper>,
    scheduled: Vec<bool>,
    slot_ns: u64,
    slots: Vec<Vec<Entry>>,
    /// One bit per slot: set iff the slot holds entries.
    occupied: Vec<u64>,
    entries: usize,
    /// Every tick ≤ cursor has been processed (tick k covers time k·g).
    cursor: u64,
    ready: VecDeque<u32>,
    backlog: u64,
    /// The latest `now` seen: ready aggregates are due by then.
    last_now: Instant,
}

impl ShaperSet {
    pub fn new(cfg: &ShaperConfig) -> Result<Self, ConfigError> {
        let prototype = Shaper::new(cfg, None)?;
        let n = cfg.wheel_slots as usize;
        Ok(ShaperSet {
            prototype,
            index: FastMap::default(),
            shapers: Vec::new(),
            scheduled: Vec::new(),
            slot_ns: cfg.wheel_slot_width().0,
            slots: vec![Vec::new(); n],
            occupied: vec![0; n.div_ceil(64)],
            entries: 0,
            cursor: 0,
            ready: VecDeque::new(),
            backlog: 0,
            last_now: Instant::ZERO,
        })
    }

    /// The slot width g.
    pub fn slot_width(&self) -> crate::Duration {
        crate::Duration(self.slot_ns)
    }

    /// Aggregates seen so far.
    pub fn aggregates(&self) -> usize {
        self.shapers.len()
    }

    /// The shaper of one aggregate, if it has been seen.
    pub fn shaper(&self, aggregate: u64) -> Option<&Shaper> {
        self.index.get(&aggregate).map(|&i| &self.shapers[i as usize])
    }

    fn slot_of(&self, tick: u64) -> usize {
        (tick % self.slots.len() as u64) as usize
    }

    fn schedule(&mut self, aggregate: u32, due: Instant) {
        self.scheduled[aggregate as usize] = true;
        let tick = due.0.div_ceil(self.slot_ns);
        if tick <= self.cursor {
            self.ready.push_back(aggregate);
            return;
        }
        let s = self.slot_of(tick);
        self.slots[s].push(Entry { aggregate, due: due.0 });
        self.occupied[s / 64] |= 1 << (s % 64);
        self.entries += 1;
    }

    /// Moves every entry due by `now` from the slots up to now's tick to the ready list.
    fn advance(&mut self, now: Instant) {
        let now_tick = now.0 / self.slot_ns;
        if now_tick <= self.cursor {
            return;
        }
        let n = self.slots.len() as u64;
        let first = if now_tick - self.cursor > n { now_tick - n + 1 } else { self.cursor + 1 };
        self.cursor = now_tick;
        if self.entries == 0 {
            return;
        }
        for tick in first..=now_tick {
            let s = self.slot_of(tick);
            if self.occupied[s / 64] & (1 << (s % 64)) == 0 {
                continue;
            }
            let slot = &mut self.slots[s];
            let mut i = 0;
            while i < slot.len() {
                if slot[i].due <= now.0 {
                    self.ready.push_back(slot.swap_remove(i).aggregate);
                    self.entries -= 1;
                } else {
                    i += 1;
                }
            }
            if slot.is_empty() {
                self.occupied[s / 64] &= !(1 << (s % 64));
            }
        }
    }

    /// The first tick after the cursor whose slot holds entries (a word-wise bitmap scan).
    fn next_occupied_tick(&self) -> Option<u64> {
        if self.entries == 0 {
            return None;
        }
        let n = self.slots.len();
        let start = self.slot_of(self.cursor + 1);
        let words = self.occupied.len();
        // Visit start's word (from start's bit), every other word, then start's word again.
        for k in 0..=words {
            let w = (start / 64 + k) % words;
            let mut bits = self.occupied[w];
            if k == 0 {
                bits &= u64::MAX << (start % 64);
            }
            if bits != 0 {
                let s = w * 64 + bits.trailing_zeros() as usize;
                let distance = (s + n - start) % n;
                return Some(self.cursor + 1 + distance as u64);
            }
        }
        None
    }
}

impl QueueDiscipline for ShaperSet {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.last_now = self.last_now.max(now);
        let next = self.shapers.len() as u32;
        let i = *self.index.entry(pkt.aggregate).or_insert(next);
        if i == next {
            self.shapers.push(self.prototype.clone());
            self.scheduled.push(false);
        }
        let shaper = &mut self.shapers[i as usize];
        let before = shaper.backlog_bytes();
        shaper.enqueue(now, pkt, drops);
        self.backlog += shaper.backlog_bytes() - before;
        if !self.scheduled[i as usize] {
            if let Some(due) = shaper.next_wakeup() {
                self.schedule(i, due);
            }
        }
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Option<Packet> {
        self.last_now = self.last_now.max(now);
        self.advance(now);
        while let Some(i) = self.ready.pop_front() {
            self.scheduled[i as usize] = false;
            let shaper = &mut self.shapers[i as usize];
            let pkt = shaper.dequeue(now, drops);
            if let Some(due) = shaper.next_wakeup() {
                self.schedule(i, due);
            }
            if let Some(pkt) = pkt {
                self.backlog -= pkt.len as u64;
                return Some(pkt);
            }
        }
        None
    }

    fn next_wakeup(&self) -> Option<Instant> {
        if !self.ready.is_empty() {
            return Some(self.last_now);
        }
        // The cursor only moves in dequeue, so a slot's time may already lie behind `now`.
        self.next_occupied_tick().map(|t| Instant(t.saturating_mul(self.slot_ns)).max(self.last_now))
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog
    }
}
