//! The event list: a binary heap ordered by (time, sequence), integer nanoseconds, no globals
//! (htsim's `EventList` with a deterministic tie-break: two events at the same instant fire in
//! the order they were scheduled, so a run is a pure function of the scenario and the seed).

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

/// A priority queue of wake-ups. Components keep at most one pending wake-up each where they
/// can (see `Wakeup`), so the heap stays as small as the number of busy components.
#[derive(Default)]
pub struct EventList {
    heap: BinaryHeap<Reverse<Key>>,
    now: u64,
    next_seq: u64,
    executed: u64,
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
        self.heap.push(Reverse(Key { time, seq: self.next_seq, target }));
        self.next_seq += 1;
    }

    /// Pops the next event if it is due at or before `until`, advancing the clock to it.
    pub fn pop_until(&mut self, until: u64) -> Option<ComponentId> {
        let Reverse(key) = *self.heap.peek()?;
        if key.time > until {
            return None;
        }
        self.heap.pop();
        assert!(key.time >= self.now, "time went backwards: {} < {}", key.time, self.now);
        self.now = key.time;
        self.executed += 1;
        Some(key.target)
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
