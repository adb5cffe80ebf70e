//! TCP at segment granularity, as Linux runs it: the sender (loss recovery, pacing, the
//! congestion-control hooks) and the receiver (in-order delivery, delayed and SACK-like ACKs),
//! which meet only through packets.

pub mod receive_window;
pub mod receiver;
pub mod sender;
pub mod timer_wheel;
