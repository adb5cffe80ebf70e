//! Memory per aggregate and allocations on the data path, measured with a counting allocator
//! (one test in this binary, so no other test allocates concurrently). Prints the table quoted in docs/policers.md
//! (`cargo test --release -p ratekit-core --test aggregates_memory -- --nocapture`).

use ratekit_core::aggregates::{Aggregate, Aggregates, ConfigFactory, Factory};
use ratekit_core::fair_policer::{FairPolicer, FairPolicerConfig};
use ratekit_core::srtcm::{SrTcm, SrTcmConfig};
use ratekit_core::token_bucket::{TokenBucket, TokenBucketConfig};
use ratekit_core::trtcm::{TrTcm, TrTcmConfig};
use ratekit_core::{AnyPolicer, EnforcerConfig, Instant, Packet, Policer, Rate};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Allocation calls made by this thread: the test harness's own threads may allocate
    /// meanwhile (e.g. its "running for over 60 seconds" notice on a loaded machine), and
    /// what counts is the data path's. A const-initialised Cell needs no allocation itself.
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

fn count_call() {
    CALLS.with(|c| c.set(c.get() + 1));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count_call();
        LIVE.fetch_add(l.size(), Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        count_call();
        LIVE.fetch_add(new, Relaxed);
        LIVE.fetch_sub(l.size(), Relaxed);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Bytes per aggregate after `n` aggregates have each seen one packet (2 flows for FairPolicer).
fn measure<P: Policer, F: Factory<P>>(name: &str, n: u64, factory: F) -> f64 {
    let before = LIVE.load(Relaxed);
    let mut aggs = Aggregates::with_capacity(n as usize, factory);
    for a in 0..n {
        for flow in 0..2 {
            aggs.on_arrival(Instant(0), &Packet { aggregate: a, flow, len: 100, ..Packet::default() });
        }
    }
    let per = (LIVE.load(Relaxed) - before) as f64 / n as f64;
    let slot = std::mem::size_of::<(u64, Aggregate<P>)>();
    eprintln!("| {name} | {n} | {} | {slot} | {per:.0} |", std::mem::size_of::<P>());
    assert!(per >= slot as f64 && aggs.table_bytes() as f64 <= per * n as f64 * 1.001);
    per
}

/// After a warm-up over the same aggregates and flows, the data path allocates nothing.
fn no_allocation_per_packet<P: Policer, F: Factory<P>>(name: &str, factory: F) {
    let mut aggs = Aggregates::with_capacity(1000, factory);
    let mut run = |from: u64, to: u64| {
        for i in from..to {
            let p = Packet { aggregate: i % 1000, flow: (i / 7) % 50, len: 200 + (i % 1300) as u32, ..Packet::default() };
            aggs.on_arrival(Instant(i * 2_000), &p);
        }
    };
    run(0, 200_000);
    let before = CALLS.with(Cell::get);
    run(200_000, 700_000);
    assert_eq!(CALLS.with(Cell::get), before, "{name} allocated on the data path");
}

#[test]
fn memory_per_aggregate() {
    no_allocation_per_packet("token_bucket", |_| TokenBucket::new(&TokenBucketConfig::new(Rate(125_000), 3000)));
    no_allocation_per_packet("srtcm", |_| SrTcm::new(&SrTcmConfig::new(Rate(125_000), 3000, 3000)));
    no_allocation_per_packet("fair_policer", |_| FairPolicer::new(&FairPolicerConfig::new(Rate(125_000), 30_000)));

    const M: u64 = 1_000_000;
    eprintln!("| policer | aggregates | size_of policer | slot bytes | measured bytes/aggregate |");
    eprintln!("|---|---|---|---|---|");
    let tb = TokenBucketConfig::new(Rate(1_250_000), 125_000);
    let per_tb = measure("token_bucket", M, |_| TokenBucket::new(&tb));
    // A million-slot table is 2^21 buckets (load 0.48): slot + control byte, × 2.1 at most.
    assert!(per_tb <= 2.1 * (std::mem::size_of::<(u64, Aggregate<TokenBucket>)>() + 1) as f64, "{per_tb}");
    // At a load of 7/8 (917 504 keys in 2^20 buckets) the same table costs far less per key.
    let per_tb_full = measure("token_bucket", 917_504, |_| TokenBucket::new(&tb));
    assert!(per_tb_full < 0.6 * per_tb);

    let sr = SrTcmConfig::new(Rate(1_250_000), 65_536, 65_536);
    measure("srtcm", M, |_| SrTcm::new(&sr));
    let tr = TrTcmConfig::new(Rate(1_250_000), 65_536, Rate(1_500_000), 98_304);
    measure("trtcm", M, |_| TrTcm::new(&tr));

    // FairPolicer carries its sketch: d × w × 4 bytes (16 KiB at 4 × 1024) plus its list.
    let fp = FairPolicerConfig::new(Rate(1_250_000), 181_056);
    let per_fp = measure("fair_policer 4x1024", 2000, |_| FairPolicer::new(&fp));
    assert!(per_fp > 16_384.0 && per_fp < 20_000.0, "{per_fp}");
    let mut small = fp.clone();
    small.sketch_width = 64;
    measure("fair_policer 4x64", 100_000, |_| FairPolicer::new(&small));

    // Through the enum every aggregate pays for the largest variant.
    let any = EnforcerConfig::TokenBucket(tb.clone());
    measure("AnyPolicer(token_bucket)", M, ConfigFactory::new(any).unwrap());
    eprintln!("size_of::<AnyPolicer>() = {}", std::mem::size_of::<AnyPolicer>());
}
