//! The event list: events ordered by (time, sequence), integer nanoseconds, no globals
//! (htsim's `EventList` with a deterministic tie-break: two events at the same instant fire in
//! the order they were scheduled, so a run is a pure function of the scenario and the seed).
//!
//! Layout: a timing wheel of 2¹⁴ slots of 2¹² ns (a 67 ms horizon, which covers link
//! transmissions and most propagation delays) whose slots are linked lists in one node arena
//! (freed nodes are reused first, so pushes touch warm memory), a bitmap of non-empty slots, the
//! slot being executed as a small vector sorted by (time, seq), and a binary heap for events
//! beyond the horizon (RTO timers, long pipes), moved into the wheel as time reaches them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Index of a component in the world (sender, receiver, link, pipe, ...).
pub type ComponentId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    time: u64,
    seq: u64,
    target: ComponentId,
}

#[derive(Clone, Copy)]
struct Node {
    key: Key,
    next: u32,
}

const SLOT_SHIFT: u32 = 12;
const SLOTS: u64 = 1 << 14;
const MASK: u64 = SLOTS - 1;
const WORDS: usize = (SLOTS / 64) as usize;
const NIL: u32 = u32::MAX;

/// A priority queue of wake-ups. Components keep at most one pending wake-up each where they
/// can (see `Wakeup`), so the queue stays as small as the number of busy components.
pub struct EventList {
    now: u64,
    next_seq: u64,
    executed: u64,
    /// Absolute slot (time >> SLOT_SHIFT) whose events are in `current`.
    cur_slot: u64,
    /// The current slot's events, sorted by descending (time, seq): the next one is last.
    current: Vec<Key>,
    heads: Vec<u32>,
    nodes: Vec<Node>,
    free: u32,
    occupied: [u64; WORDS],
    in_wheel: usize,
    overflow: BinaryHeap<Reverse<Key>>,
}

impl Default for EventList {
    fn default() -> Self {
        EventList {
            now: 0,
            next_seq: 0,
            executed: 0,
            cur_slot: 0,
            current: Vec::new(),
            heads: vec![NIL; SLOTS as usize],
            nodes: Vec::new(),
            free: NIL,
            occupied: [0; WORDS],
            in_wheel: 0,
            overflow: BinaryHeap::new(),
        }
    }
}

impl EventList {
    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn executed(&self) -> u64 {
        self.executed
    }

    /// Schedules `target` to be woken at `time` (ns). Scheduling into the past is a bug in a
    /// component, not bad input, so it aborts the run.
    pub fn schedule(&mut self, time: u64, target: ComponentId) {
        assert!(time >= self.now, "event scheduled in the past: {time} < {}", self.now);
        let key = Key { time, seq: self.next_seq, target };
        self.next_seq += 1;
        self.place(key);
    }

    #[inline]
    fn place(&mut self, key: Key) {
        let slot = key.time >> SLOT_SHIFT;
        if slot <= self.cur_slot {
            // Descending order: the insertion point keeps every later key before it.
            let at = self.current.partition_point(|k| *k > key);
            self.current.insert(at, key);
        } else if slot < self.cur_slot + SLOTS {
            let i = (slot & MASK) as usize;
            let node = Node { key, next: self.heads[i] };
            let n = if self.free != NIL {
                let n = self.free;
                self.free = self.nodes[n as usize].next;
                self.nodes[n as usize] = node;
                n
            } else {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            };
            self.heads[i] = n;
            self.occupied[i / 64] |= 1 << (i % 64);
            self.in_wheel += 1;
        } else {
            self.overflow.push(Reverse(key));
        }
    }

    /// The next occupied wheel slot after `cur_slot` (absolute), if any.
    fn next_occupied(&self) -> Option<u64> {
        if self.in_wheel == 0 {
            return None;
        }
        let start = (self.cur_slot + 1) & MASK;
        let mut i = start as usize;
        // At most WORDS + 1 words: the partial first word, the others, the wrapped remainder.
        for _ in 0..=WORDS {
            let w = i / 64;
            let bits = self.occupied[w] & (!0u64 << (i % 64));
            if bits != 0 {
                let found = (w * 64 + bits.trailing_zeros() as usize) as u64;
                let delta = (found + SLOTS - start) & MASK;
                return Some(self.cur_slot + 1 + delta);
            }
            i = ((w + 1) % WORDS) * 64;
        }
        unreachable!("in_wheel > 0 but no occupied slot")
    }

    /// Makes `slot` the current one: its wheel events, and overflow events now inside the
    /// horizon, move to where they belong.
    fn enter(&mut self, slot: u64) {
        self.cur_slot = slot;
        let i = (slot & MASK) as usize;
        if self.occupied[i / 64] & (1 << (i % 64)) != 0 {
            self.occupied[i / 64] &= !(1 << (i % 64));
            let mut n = std::mem::replace(&mut self.heads[i], NIL);
            while n != NIL {
                let node = self.nodes[n as usize];
                self.current.push(node.key);
                self.nodes[n as usize].next = self.free;
                self.free = n;
                self.in_wheel -= 1;
                n = node.next;
            }
            self.current.sort_unstable_by(|a, b| b.cmp(a));
        }
        while let Some(Reverse(k)) = self.overflow.peek() {
            if k.time >> SLOT_SHIFT >= self.cur_slot + SLOTS {
                break;
            }
            let k = self.overflow.pop().expect("peeked").0;
            self.place(k);
        }
    }

    /// Pops the next event if it is due at or before `until`, advancing the clock to it.
    pub fn pop_until(&mut self, until: u64) -> Option<ComponentId> {
        loop {
            if let Some(k) = self.current.last() {
                if k.time > until {
                    return None;
                }
                let k = self.current.pop().expect("non-empty");
                assert!(k.time >= self.now, "time went backwards: {} < {}", k.time, self.now);
                self.now = k.time;
                self.executed += 1;
                return Some(k.target);
            }
            let next = match self.next_occupied() {
                Some(s) => s,
                None => match self.overflow.peek() {
                    Some(Reverse(k)) => k.time >> SLOT_SHIFT,
                    None => return None,
                },
            };
            if next << SLOT_SHIFT > until {
                return None;
            }
            self.enter(next);
        }
    }

    /// Moves the clock forward to `t` when no event is left before it.
    pub fn advance_to(&mut self, t: u64) {
        assert!(t >= self.now, "time went backwards");
        self.now = t;
    }
}

/// A component's single pending wake-up: it asks for the earliest time it needs and ignores
/// stale wake-ups (the htsim pattern of one event per component, with lazy cancellation).
#[derive(Debug, Clone, Copy, Default)]
pub struct Wakeup {
    pending: Option<u64>,
}

impl Wakeup {
    /// Ensures a wake-up at or before `t`. Returns whether a new event must be scheduled.
    #[inline]
    pub fn want(&mut self, t: u64) -> bool {
        match self.pending {
            Some(p) if p <= t => false,
            _ => {
                self.pending = Some(t);
                true
            }
        }
    }

    /// Called when an event for this component fires at `now`; false if it is stale (a later
    /// or earlier request superseded it and another event is still pending).
    #[inline]
    pub fn fire(&mut self, now: u64) -> bool {
        match self.pending {
            Some(p) if p == now => {
                self.pending = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_fire_in_schedule_order_and_time_is_monotone() {
        let mut ev = EventList::default();
        ev.schedule(10, 3);
        ev.schedule(5, 1);
        ev.schedule(10, 2);
        ev.schedule(10, 7);
        let order: Vec<_> = std::iter::from_fn(|| ev.pop_until(u64::MAX)).collect();
        assert_eq!(order, vec![1, 3, 2, 7]);
        assert_eq!(ev.now(), 10);
    }

    #[test]
    #[should_panic(expected = "past")]
    fn scheduling_into_the_past_aborts() {
        let mut ev = EventList::default();
        ev.schedule(10, 0);
        ev.pop_until(u64::MAX);
        ev.schedule(9, 0);
    }

    /// The wheel against a plain (time, seq) heap on random schedules with near, far and
    /// same-instant events, interleaved with pops.
    #[test]
    fn matches_a_reference_heap() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut ev = EventList::default();
        let mut reference = BinaryHeap::new();
        let mut seq = 0u64;
        let mut popped = 0;
        for round in 0..20_000u32 {
            for _ in 0..rng.gen_range(0..4) {
                let now = ev.now();
                let dt = match rng.gen_range(0..4) {
                    0 => 0,
                    1 => rng.gen_range(0..10_000),
                    2 => rng.gen_range(0..100_000_000),
                    _ => rng.gen_range(0..3_000_000_000),
                };
                ev.schedule(now + dt, round);
                reference.push(Reverse((now + dt, seq, round)));
                seq += 1;
            }
            let until = ev.now() + rng.gen_range(0..50_000_000);
            while let Some(t) = ev.pop_until(until) {
                let Reverse((time, _, target)) = reference.pop().unwrap();
                assert_eq!((ev.now(), t), (time, target));
                popped += 1;
            }
            assert!(reference.peek().is_none_or(|Reverse((t, _, _))| *t > until));
            ev.advance_to(until);
        }
        assert!(popped > 10_000);
    }

    #[test]
    fn stale_wakeups_are_ignored() {
        let mut w = Wakeup::default();
        assert!(w.want(100));
        assert!(w.want(50)); // earlier: a second event is needed
        assert!(!w.want(70)); // the pending one at 50 covers it
        assert!(w.fire(50));
        assert!(!w.fire(100)); // stale
    }
}
