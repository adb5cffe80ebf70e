//! TCP at segment granularity, as Linux runs it: the sender (loss recovery, pacing, the
//! congestion-control hooks) and the receiver (in-order delivery, delayed and SACK-like ACKs),
//! which meet only through packets.

pub mod receive_window;
pub mod receiver;
pub mod sender;
pub mod timer_wheel;

/// The TSval clock: milliseconds, never 0 (a TSecr of 0 means no timestamp).
pub(crate) fn ts_clock_ms(now_ns: u64) -> u32 {
    (now_ns / 1_000_000) as u32 + 1
}
