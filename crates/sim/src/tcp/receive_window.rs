//! The receive window as Linux's receiver computes it, for the two things it drives: the right
//! edge every ACK advertises, beyond which the sender sends nothing new (`tcp_snd_wnd_test`), and
//! whether an arrival may be acknowledged at once. `__tcp_ack_snd_check` sends the every-second-segment
//! ACK only if the window it would advertise does not shrink (`__tcp_select_window(sk) >=
//! tp->rcv_wnd`); otherwise the ACK waits for the application's read (`tcp_cleanup_rbuf`). The
//! window is min(free buffer space, `rcv_ssthresh`). `rcv_ssthresh` grows by two segments per
//! arrival up to the free space (`tcp_grow_window`, which also asks for a quick ACK), and the
//! buffer grows to twice the most the application read in one receiver RTT (what is still queued
//! does not count), plus four times that scaled by the record's growth over the one before (a
//! slow-starting sender doubles again meanwhile), plus the span of the out-of-order queue
//! (`tcp_rcvbuf_grow` as Linux 6.18 has it), when a read sets that record (dynamic right-sizing,
//! `tcp_rcv_space_adjust`, over the receiver's RTT as the timestamps measure it) and on each
//! out-of-order arrival (`tcp_data_queue_ofo`).
//! So once the window has caught up with the buffer, data the application has not read yet
//! shrinks it: a burst arriving faster than the application
//! wakes is acknowledged once, by the read. Measured in a capture of four Reno flows behind a
//! 50 kB FairPolicer at 100 ms (Linux 6.18): each line-rate burst of 4-12 segments drew one ACK,
//! 0.19-0.24 ACKs per segment, and while the buffer grew every segment drew one, the advertised
//! window rising by 3 kB per ACK.
//!
//! Sizes are in segments: the window counts payload (`tcp_win_from_space` with the scaling ratio
//! learnt from the segments themselves), and a full segment is larger than the window's scale
//! granularity, so a shrink of one segment is always visible.

/// `tcp_rmem[1]` (131072 B) in window units at the scaling ratio of a 1448-byte segment in a
/// 2.3 kB skb (0.625): the window clamp before dynamic right-sizing first grows it.
const INITIAL_CLAMP: u32 = 56;
/// The SYN-ACK's window, 65535 B rounded down to whole segments (`tcp_select_initial_window`).
const INITIAL_SSTHRESH: u32 = 45;
/// `tcp_rmem[2]` (32 MB on the testbed's 6.18 kernel) in window units: the clamp never exceeds it.
const MAX_CLAMP: u32 = 14_483;
/// TCP_INIT_CWND: what the application is first expected to read in an RTT.
const INITIAL_SPACE: u32 = 10;

#[derive(Debug, Clone)]
pub struct ReceiveWindow {
    /// `tp->window_clamp`.
    clamp: u32,
    /// `tp->rcv_ssthresh`.
    ssthresh: u32,
    /// `tp->rcv_wnd`: the window the last ACK advertised, from `rcv_wup`.
    advertised: u32,
    /// `tp->rcvq_space`: the most read in one receiver RTT, and where and when this RTT began.
    space: u32,
    space_read: u64,
    space_since_ns: u64,
}

impl Default for ReceiveWindow {
    fn default() -> Self {
        ReceiveWindow {
            clamp: INITIAL_CLAMP,
            ssthresh: INITIAL_SSTHRESH,
            advertised: INITIAL_SSTHRESH,
            space: INITIAL_SPACE,
            space_read: 0,
            space_since_ns: 0,
        }
    }
}

impl ReceiveWindow {
    /// The window an ACK would advertise now, with `held` segments in the buffer (received and
    /// not yet read, in order or not).
    fn window(&self, held: u32) -> u32 {
        self.clamp.saturating_sub(held).min(self.ssthresh)
    }

    /// `tcp_grow_window` for an arriving segment, `held` counting it: whether it grew, in which
    /// case Linux acknowledges at once (`icsk_ack.quick |= 1`).
    pub fn grow(&mut self, held: u32) -> bool {
        let room = self.clamp.saturating_sub(held).saturating_sub(self.ssthresh);
        self.ssthresh += room.min(2);
        room > 0
    }

    /// Whether an ACK now would advertise no less than the last one did.
    pub fn ack_keeps_window(&self, held: u32) -> bool {
        self.window(held) >= self.advertised
    }

    /// The window the last ACK advertised (before any, the SYN-ACK's), in segments from it.
    pub fn advertised(&self) -> u32 {
        self.advertised
    }

    /// `tcp_select_window` as an ACK leaves, `acked` segments after the previous one: the right
    /// edge never moves back. Returns the window advertised, in segments from the ACK.
    pub fn advertise(&mut self, held: u32, acked: u32) -> u32 {
        self.advertised = self.window(held).max(self.advertised.saturating_sub(acked));
        self.advertised
    }

    /// The connection is established: the first RTT of reading starts (`tcp_init_buffer_space`).
    pub fn start(&mut self, now_ns: u64) {
        self.space_since_ns = now_ns;
    }

    /// `tcp_rcv_space_adjust` as a segment is read, with `read` segments read in all, `queued`
    /// still waiting in order behind it, the receiver's RTT and the out-of-order queue's span
    /// (segments from rcv_nxt to the end of the last one): once per RTT, a record amount read
    /// becomes the space and sizes the buffer. What is still queued does not count (`copied -=
    /// inq`), so a hole's filling, which makes a window's worth readable at once, is no rate.
    pub fn on_read(&mut self, now_ns: u64, read: u64, queued: u32, rtt_ns: Option<u64>, ooo_span: u32) {
        let Some(rtt_ns) = rtt_ns else { return };
        if now_ns - self.space_since_ns < rtt_ns {
            return;
        }
        let copied = (read - self.space_read).saturating_sub(queued as u64);
        if copied > self.space as u64 {
            self.size_buffer(copied.min(u32::MAX as u64) as u32, ooo_span);
        }
        self.space_read = read;
        self.space_since_ns = now_ns;
    }

    /// The window clamp and the record read in one RTT, in segments (for tests).
    #[cfg(test)]
    pub fn clamp_and_space(&self) -> (u32, u32) {
        (self.clamp, self.space)
    }

    /// `tcp_rcvbuf_grow` from an out-of-order arrival: the record stays, the span counts.
    pub fn grow_buffer(&mut self, ooo_span: u32) {
        self.size_buffer(self.space, ooo_span);
    }

    /// `tcp_rcvbuf_grow` (6.18, with "tcp: fix too slow tcp_rcvbuf_grow() action"): twice the
    /// record (DRS is an RTT late), plus four times it scaled by its growth over the last record
    /// (slow start), plus what the out-of-order queue spans; the buffer never shrinks.
    fn size_buffer(&mut self, record: u32, ooo_span: u32) {
        let (old, new) = (self.space as u64, record as u64);
        self.space = record;
        let window = 2 * new;
        let slow_start = window * (new - old) / old.max(1);
        let window = window + 2 * slow_start + ooo_span as u64;
        self.clamp = self.clamp.max(window.min(MAX_CLAMP as u64) as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_grows_two_segments_an_arrival_up_to_the_free_space() {
        let mut w = ReceiveWindow::default();
        let mut grew = 0;
        while w.grow(1) {
            grew += 1;
        }
        assert_eq!((w.ssthresh, grew), (INITIAL_CLAMP - 1, 5), "45 → 55 in steps of 2");
        w.advertise(0, 0);
        assert!(w.ack_keeps_window(1), "one unread segment leaves the window as advertised");
        assert!(!w.ack_keeps_window(2), "a second one would shrink it");
    }

    #[test]
    fn a_record_read_per_rtt_sizes_the_buffer_for_the_next_rtts_growth() {
        // tcp_rcvbuf_grow (6.18) in segments: 2·record + 2·(2·record)·(record − last)/last.
        const MS: u64 = 1_000_000;
        let rtt = Some(100 * MS);
        let mut w = ReceiveWindow::default();
        w.on_read(50 * MS, 15, 0, rtt, 0);
        assert_eq!((w.clamp, w.space), (INITIAL_CLAMP, INITIAL_SPACE), "not before an RTT has passed");
        w.on_read(100 * MS, 12, 0, rtt, 0);
        assert_eq!((w.clamp, w.space), (INITIAL_CLAMP, 12), "a record of 12 after 10: 24 + 2·4, under the initial buffer");
        w.on_read(200 * MS, 12 + 24, 0, rtt, 0);
        assert_eq!((w.clamp, w.space), (144, 24), "a doubled record: room for the rate to double again, 48 + 2·48");
        w.on_read(300 * MS, 36 + 20, 0, rtt, 0);
        assert_eq!((w.clamp, w.space), (144, 24), "20 read, less than the record");
        w.on_read(400 * MS, 56 + 30, 10, rtt, 0);
        assert_eq!((w.clamp, w.space), (144, 24), "30 read with 10 still queued (a hole filled): 20, no record");
        w.on_read(500 * MS, 86 + 25, 0, rtt, 0);
        assert_eq!((w.clamp, w.space), (144, 25), "a record of 25 after 24: 50 + 2·2, under the buffer");
        w.grow_buffer(120);
        assert_eq!(w.clamp, 170, "an out-of-order arrival: twice the record plus the span");
        w.grow_buffer(0);
        assert_eq!(w.clamp, 170, "the buffer never shrinks");
        w.on_read(600 * MS, 10_000_000, 0, None, 0);
        assert_eq!(w.space, 25, "no RTT measured, no right-sizing");
    }
}
