//! The many-aggregate shaper does not allocate in steady state (buffers grow once, then reuse).

use ratekit_core::shaper::ShaperConfig;
use ratekit_core::shaper_set::ShaperSet;
use ratekit_core::{Bytes, Classify, Instant, Packet, QueueDiscipline, Rate};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

/// One period of the same traffic pattern: bursts into every aggregate, then drain to empty.
fn period(set: &mut ShaperSet, start: u64, aggregates: u64, drops: &mut Vec<ratekit_core::Dropped>) -> u64 {
    let mut id = 0;
    for agg in 0..aggregates {
        for k in 0..(1 + agg % 5) {
            let p = Packet { id, len: 200 + (k as u32 * 300), flow: agg * 7 + k, aggregate: agg, ..Default::default() };
            set.enqueue(Instant(start + agg * 1000), p, drops);
            id += 1;
        }
    }
    let mut now = start;
    while let Some(t) = set.next_wakeup() {
        now = now.max(t.0);
        while set.dequeue(Instant(now), drops).is_some() {}
    }
    now
}

#[test]
fn steady_state_does_not_allocate() {
    let cfg = ShaperConfig {
        rate: Rate(1_250_000),
        queues: 16,
        queue_size: Bytes(100_000),
        classify: Classify::Flow,
        policy: "weighted(fair(0, 1, 2, 3):2, fair(4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15):1)".into(),
        weights: None,
        mss: Bytes(1500),
        wheel_slot: None,
        wheel_slots: 1024,
    };
    let mut set = ShaperSet::new(&cfg).unwrap();
    // Periods start on a wheel rotation, so each reuses the same slots (a slot's vector
    // grows the first time it is used, i.e. once per slot over the first rotations).
    let rotation = set.slot_width().0 * 1024;
    let next_start = |t: u64| (t / rotation + 2) * rotation;
    let mut drops = Vec::new();
    let mut t = 0;
    for _ in 0..3 {
        t = period(&mut set, next_start(t), 500, &mut drops); // warm-up: buffers grow
    }
    let before = allocations();
    for _ in 0..3 {
        t = period(&mut set, next_start(t), 500, &mut drops);
    }
    assert_eq!(allocations() - before, 0, "allocations in steady state");
    assert_eq!(set.backlog_bytes(), 0);
}
