//! The receiving end of a TCP flow, as Linux acknowledges (net/ipv4/tcp_input.c).

use super::receive_window::ReceiveWindow;
use super::timer_wheel::TimerWheel;
use super::ts_clock_ms;
use crate::ctx::Ctx;
use crate::engine::{ComponentId, Wakeup};
use crate::packet::{Kind, Pkt, Sacks, HEADER, MSS, SYN_LEN};
use ratekit_lab::scenario::DEFAULT_RECEIVER_WAKEUP;
use std::collections::VecDeque;

/// The receiving end: in-order delivery, out-of-order buffer, the application reading what
/// arrived, and Linux's ACK policy (`__tcp_ack_snd_check`): at once for more than one full
/// segment if the receive window would not shrink (else at the application's read), in
/// quick-ack mode (the first 16 ACKs, 16 more after in-order data resumes from a gap longer than
/// the receiver's RTO or after a duplicate segment, and one while the window grows) or when a
/// hole closes; otherwise delayed (by the ACK timeout, ATO, which Linux adapts: 40 ms to the
/// receiver's RTT) while nothing waits out of order, and compressed while something does.
/// A receiver marked `ack_each` (the user-space transports of Copa and PCC Vivace) has each
/// acknowledged at once, and advertises no window: those run over UDP without TCP's.
pub struct TcpReceiver {
    pub id: ComponentId,
    pub flow: u32,
    rcv_nxt: u32,
    /// rcv_nxt when the last ACK left, and the TSval that ACKs echo.
    rcv_wup: u32,
    /// The receiving host kernel's timer ticks (the delayed ACK).
    wheel: TimerWheel,
    ts_recent: u32,
    ooo: VecDeque<bool>,
    ooo_count: u32,
    /// In-order segments since the last ACK (`rcv_nxt - rcv_wup` in segments).
    unacked: u32,
    window: ReceiveWindow,
    /// In-order segments the application has not read (`rcv_nxt - copied_seq`), and all it read.
    unread: u32,
    read: u64,
    /// When the application, woken by the first unread arrival, reads, and how long it sleeps.
    read_deadline: Option<u64>,
    read_wakeup_ns: u64,
    /// The RTT from the handshake (the receiving socket's srtt, which only data of its own would
    /// update): the cap of the delayed ACK's timeout.
    rtt_ns: Option<u64>,
    /// `rcv_rtt_est`, the receiver's period for sizing its buffer: from the segments' echoes of
    /// its ACKs' timestamps, so it follows the queueing delay (`rcv_rtt_measure`).
    rcv_rtt_ns: Option<u64>,
    /// The TSecr last timed (`rcv_rtt_last_tsecr`): each ACK's timestamp is timed once.
    rcv_rtt_last_tsecr: u16,
    quickacks: u32,
    /// When in-order data last arrived (Linux's `icsk_ack.lrcvtime`).
    last_in_order_ns: Option<u64>,
    /// The delayed ACK's timeout (`icsk_ack.ato`): deflated towards ATO_MIN by closely spaced
    /// data, inflated by data spaced wider and doubled by a delayed ACK that had to fire.
    ato_ns: u64,
    delack_deadline: Option<u64>,
    /// Out-of-order arrivals since the last ACK, most recent first: what it will SACK.
    news: Sacks,
    /// SACK compression (`tp->compressed_ack`, `dup_ack_counter`, `compressed_ack_rcv_nxt`).
    compressed: u32,
    dupacks: u32,
    dupacks_rcv_nxt: u32,
    comp_deadline: Option<u64>,
    comp_delay_ns: u64,
    /// When the latest SYN-ACK left, until the handshake's ACK (or the first data) measures
    /// the RTT from it (`tcp_synack_rtt_meas`).
    synack_sent_ns: Option<u64>,
    /// The receiver's own RTO, against which `tcp_event_data_recv` judges a gap in the data:
    /// from the handshake's RTT sample, RTT + max(2·RTT, rto_min) (`tcp_rtt_estimator`'s first
    /// sample); TCP_TIMEOUT_INIT before it.
    rto_ns: u64,
    /// The flow is a user-space transport's (Copa, PCC Vivace), whose receiver acknowledges each
    /// packet at once and limits nothing.
    pub ack_each: bool,
    wake: Wakeup,
    /// Payload bytes delivered in order to the application.
    pub delivered_bytes: u64,
    /// A video player reads this flow: the world reports each in-order arrival to it (a field
    /// here, not in the world's flow table, which the hot path would otherwise touch per packet).
    pub video: bool,
    pub window_bytes: u64,
    /// For a finite transfer: its segment count and the last segment's payload.
    finite: Option<(u32, u32)>,
    pub completed_ns: Option<u64>,
}

/// TCP_ATO_MIN and TCP_DELACK_MIN (HZ / 25).
const ATO_MIN_NS: u64 = 40_000_000;
/// `tcp_send_delayed_ack`'s cap on a bulk receiver's ATO (HZ / 2), before its RTT's.
const ATO_MAX_NS: u64 = 500_000_000;
/// Linux's TCP_MAX_QUICKACKS (the receive window never limits it here).
const QUICKACKS: u32 = 16;
const RTO_MIN_NS: u64 = 200_000_000;
/// TCP_TIMEOUT_INIT: the RTO before an RTT sample.
const RTO_INIT_NS: u64 = 1_000_000_000;
/// TCP_FASTRETRANS_THRESH: dupacks per `rcv_nxt` sent before SACKs are compressed, so that a
/// sender counting dupacks still sees three.
const DUPACKS_UNCOMPRESSED: u32 = 3;
/// `net.ipv4.tcp_comp_sack_nr`: at most this many ACKs compressed into one.
const COMP_SACK_NR: u32 = 44;
/// `net.ipv4.tcp_comp_sack_delay_ns`: the compressed ACK waits at most this long.
const COMP_SACK_DELAY_NS: u64 = 1_000_000;

impl TcpReceiver {
    pub fn new(id: ComponentId, flow: u32, finite: Option<(u32, u32)>) -> Self {
        TcpReceiver {
            finite,
            completed_ns: None,
            id,
            flow,
            rcv_nxt: 0,
            rcv_wup: 0,
            wheel: TimerWheel::default(),
            ts_recent: 0,
            ooo: VecDeque::new(),
            ooo_count: 0,
            unacked: 0,
            window: ReceiveWindow::default(),
            unread: 0,
            read: 0,
            read_deadline: None,
            read_wakeup_ns: DEFAULT_RECEIVER_WAKEUP.0,
            rtt_ns: None,
            rcv_rtt_ns: None,
            rcv_rtt_last_tsecr: 0,
            quickacks: QUICKACKS,
            last_in_order_ns: None,
            ato_ns: ATO_MIN_NS,
            delack_deadline: None,
            news: Sacks::default(),
            compressed: 0,
            dupacks: 0,
            dupacks_rcv_nxt: 0,
            comp_deadline: None,
            comp_delay_ns: COMP_SACK_DELAY_NS,
            synack_sent_ns: None,
            rto_ns: RTO_INIT_NS,
            ack_each: false,
            wake: Wakeup::default(),
            delivered_bytes: 0,
            video: false,
            window_bytes: 0,
        }
    }

    pub fn rcv_nxt(&self) -> u32 {
        self.rcv_nxt
    }

    /// A packet from the sender: the SYN (answered at once; a retransmitted one again), the
    /// handshake's ACK, or data, whose ACK flag completes the handshake if that ACK was lost.
    pub fn on_packet(&mut self, ctx: &mut Ctx, p: &Pkt) {
        if p.kind == Kind::Syn {
            self.synack_sent_ns = Some(ctx.ev.now());
            ctx.send(Pkt { flow: self.flow, kind: Kind::SynAck, seq: self.window.advertised(), len: SYN_LEN, receiver_ts_ms: receiver_ts_clock(ctx.ev.now()), ..Pkt::default() });
            return;
        }
        if let Some(t) = self.synack_sent_ns.take() {
            self.handshake_rtt(ctx.ev.now() - t);
            self.window.start(ctx.ev.now());
        }
        if p.kind == Kind::Data {
            // tcp_replace_ts_recent: the TSval to echo comes from a segment at or left of the
            // window's edge at the last ACK sent (a hole-filling retransmission, not the
            // out-of-order data behind it), never an older one (PAWS).
            if p.seq <= self.rcv_wup && p.ts_ms >= self.ts_recent {
                self.ts_recent = p.ts_ms;
            }
            self.measure_rcv_rtt(ctx.ev.now(), p);
            self.on_data(ctx, p.seq, p.len - HEADER);
        }
    }

    pub fn set_kernel_hz(&mut self, hz: u32) {
        self.wheel = TimerWheel::hz(hz);
    }

    pub fn set_read_wakeup(&mut self, ns: u64) {
        self.read_wakeup_ns = ns;
    }

    /// The receiver's RTT from the handshake sets its RTO and the compressed-ACK delay, 5 % of
    /// the RTT (`tcp_sack_compress_send_ack` takes srtt when below its `rcv_rtt_est`).
    /// `rcv_rtt_est` is not seeded here: as in Linux, the first segment's echo of the SYN-ACK's
    /// timestamp gives it, in whole milliseconds.
    fn handshake_rtt(&mut self, rtt_ns: u64) {
        self.rto_ns = rtt_ns + (2 * rtt_ns).max(RTO_MIN_NS);
        self.rtt_ns = Some(rtt_ns);
        self.comp_delay_ns = COMP_SACK_DELAY_NS.min(rtt_ns / 20);
    }

    fn on_data(&mut self, ctx: &mut Ctx, seq: u32, payload: u32) {
        if seq < self.rcv_nxt {
            // tcp_data_queue: a duplicate means an ACK was lost or late; tcp_enter_quickack_mode.
            self.quickacks = self.quickacks.max(QUICKACKS);
            self.ato_ns = ATO_MIN_NS;
            self.send_ack(ctx);
            return;
        }
        let now = ctx.ev.now();
        if seq > self.rcv_nxt {
            let i = (seq - self.rcv_nxt) as usize;
            if self.ooo.len() <= i {
                self.ooo.resize(i + 1, false);
            }
            if !self.ooo[i] {
                // tcp_data_queue_ofo grows the window before it charges the segment to the buffer
                // (an in-order one is charged first), so after a loss rcv_ssthresh reaches the
                // whole free space, as TCP_INFO shows in the testbed (docs/simulator.md, "The
                // receive window after a loss").
                self.grow_window();
                self.ooo[i] = true;
                self.ooo_count += 1;
                // tcp_data_queue_ofo then sizes the buffer for what the queue spans (6.16+).
                self.window.grow_buffer(self.ooo_span());
                self.note_out_of_order(ctx, seq);
            }
            self.ack_check(ctx, now, false);
            return;
        }
        self.on_in_order_arrival(now);
        let filled_hole = self.ooo_count > 0;
        let mut bytes = payload as u64;
        let mut segments = 1;
        self.rcv_nxt += 1;
        self.ooo.pop_front();
        while self.ooo.front() == Some(&true) {
            self.ooo.pop_front();
            self.ooo_count -= 1;
            bytes += self.payload_of(self.rcv_nxt) as u64;
            self.rcv_nxt += 1;
            segments += 1;
        }
        if let Some((segments, _)) = self.finite {
            if self.rcv_nxt >= segments && self.completed_ns.is_none() {
                self.completed_ns = Some(now);
            }
        }
        self.delivered_bytes += bytes;
        self.window_bytes += bytes;
        self.unacked += segments;
        self.unread += segments;
        self.grow_window();
        if self.read_deadline.is_none() {
            self.arm(ctx, now + self.read_wakeup_ns, Timer::Read);
        }
        // tcp_data_queue: ICSK_ACK_NOW once the out-of-order queue has drained (RFC 5681 4.2).
        self.ack_check(ctx, now, filled_hole && self.ooo_count == 0);
    }

    /// `tcp_sack_new_ofo_skb`, for the blocks' news: the arrival joins or starts a run, and a
    /// run beyond the three an ACK carries first sends the compressed ACK
    /// (`tcp_sack_compress_send_ack`), so that no arrival goes unreported.
    fn note_out_of_order(&mut self, ctx: &mut Ctx, seq: u32) {
        if self.news.extend(seq) {
            return;
        }
        if self.news.is_full() {
            self.send_ack(ctx);
        }
        self.news.push(seq);
    }

    /// `tcp_event_data_recv` for in-order data: the ATO follows the data's spacing (closely
    /// spaced data pull it towards ATO_MIN, a gap under it raises it to half of it plus the gap),
    /// and data resuming after a gap longer than the RTO means the sender failed to restart its
    /// window (a timeout): ACK quickly so that its window reopens.
    fn on_in_order_arrival(&mut self, now: u64) {
        if let Some(last) = self.last_in_order_ns {
            let gap = now - last;
            if gap <= ATO_MIN_NS / 2 {
                self.ato_ns = self.ato_ns / 2 + ATO_MIN_NS / 2;
            } else if gap < self.ato_ns {
                self.ato_ns = (self.ato_ns / 2 + gap).min(self.rto_ns);
            } else if gap > self.rto_ns {
                self.quickacks = self.quickacks.max(QUICKACKS);
            }
        }
        self.last_in_order_ns = Some(now);
    }

    /// `tcp_send_delayed_ack`: the ATO, capped for a bulk receiver by its RTT (at least
    /// TCP_DELACK_MIN); a pending delayed ACK about to fire (within a quarter of the ATO) leaves
    /// now, else the earlier of the two timeouts stands.
    fn delay_ack(&mut self, ctx: &mut Ctx, now: u64) {
        let mut ato = self.ato_ns;
        if ato > ATO_MIN_NS {
            let max_ato = self.rtt_ns.map_or(ATO_MAX_NS, |rtt| ATO_MAX_NS.min(rtt.max(ATO_MIN_NS)));
            ato = ato.min(max_ato);
        }
        let timeout = self.wheel.expiry(now, ato);
        match self.delack_deadline {
            Some(pending) if pending <= now + ato / 4 => self.send_ack(ctx),
            Some(pending) if pending <= timeout => {}
            _ => self.arm(ctx, timeout, Timer::Delack),
        }
    }

    /// `__tcp_ack_snd_check` after data arrived; `ack_now` is ICSK_ACK_NOW.
    fn ack_check(&mut self, ctx: &mut Ctx, now: u64, ack_now: bool) {
        // More than one full segment unacknowledged (`rcv_nxt - rcv_wup > rcv_mss`), and the
        // window kept (or nothing left to read: `rcv_nxt - copied_seq < sk_rcvlowat`).
        let full = self.unacked >= 2 && (self.unread == 0 || self.window.ack_keeps_window(self.held()));
        if full || self.quickacks > 0 || ack_now || self.ack_each {
            self.send_ack(ctx);
            return;
        }
        if self.ooo_count == 0 {
            return self.delay_ack(ctx, now);
        }
        // SACK compression (Linux 4.18+): the first three dupacks per rcv_nxt leave at once, later
        // ones wait for the compressed-ACK timer or the next ACK sent.
        if self.compressed >= COMP_SACK_NR {
            self.send_ack(ctx);
            return;
        }
        if self.dupacks_rcv_nxt != self.rcv_nxt {
            self.dupacks_rcv_nxt = self.rcv_nxt;
            self.dupacks = 0;
        }
        if self.dupacks < DUPACKS_UNCOMPRESSED {
            self.dupacks += 1;
            self.send_ack(ctx);
            return;
        }
        self.compressed += 1;
        if self.comp_deadline.is_none() {
            self.arm(ctx, now + self.comp_delay_ns, Timer::Compressed);
        }
    }

    fn arm(&mut self, ctx: &mut Ctx, t: u64, timer: Timer) {
        *match timer {
            Timer::Delack => &mut self.delack_deadline,
            Timer::Compressed => &mut self.comp_deadline,
            Timer::Read => &mut self.read_deadline,
        } = Some(t);
        if self.wake.want(t) {
            ctx.ev.schedule(t, self.id);
        }
    }

    fn payload_of(&self, seq: u32) -> u32 {
        match self.finite {
            Some((segments, last)) if seq + 1 == segments => last,
            _ => MSS,
        }
    }

    pub fn on_timer(&mut self, ctx: &mut Ctx) {
        let now = ctx.ev.now();
        if !self.wake.fire(now) {
            return;
        }
        if self.read_deadline.is_some_and(|d| now >= d) {
            self.app_read(ctx, now);
        }
        // tcp_compressed_ack_kick, then tcp_delack_timer_handler, which inflates the ATO for a
        // delayed ACK that had to fire ("Delayed ACK missed"); an ACK sent clears both.
        let compressed_fired = self.comp_deadline.is_some_and(|d| now >= d);
        let delack_fired = self.delack_deadline.is_some_and(|d| now >= d);
        if delack_fired && !compressed_fired {
            self.ato_ns = (self.ato_ns * 2).min(self.rto_ns);
        }
        if compressed_fired || delack_fired {
            self.send_ack(ctx);
        }
        if let Some(t) = self.comp_deadline.into_iter().chain(self.delack_deadline).chain(self.read_deadline).min() {
            if self.wake.want(t) {
                ctx.ev.schedule(t, self.id);
            }
        }
    }

    /// The application reads all that is in order (`tcp_recvmsg`), which may size the buffer
    /// (`tcp_rcv_space_adjust`), and sends the ACK that waited for it: one is pending and more
    /// than one full segment is unacknowledged (`tcp_cleanup_rbuf`).
    fn app_read(&mut self, ctx: &mut Ctx, now: u64) {
        self.read_deadline = None;
        // tcp_recvmsg adjusts the space after each segment it copies; only the first can close
        // an RTT's measure, which the rest then starts.
        if self.unread > 0 {
            self.window.on_read(now, self.read + 1, self.unread - 1, self.rcv_rtt_ns, self.ooo_span());
        }
        self.read += self.unread as u64;
        self.unread = 0;
        if self.delack_deadline.is_some() && self.unacked >= 2 {
            self.send_ack(ctx);
        }
    }

    /// Segments from rcv_nxt to the end of the last out-of-order one (0 with none).
    fn ooo_span(&self) -> u32 {
        if self.ooo_count == 0 { 0 } else { self.ooo.len() as u32 }
    }

    /// Segments taking buffer space: unread in order, and out of order.
    fn held(&self) -> u32 {
        self.unread + self.ooo_count
    }

    /// `tcp_rcv_rtt_measure_ts` (Linux 6.16+, `tcp_rcv_rtt_update`): a full segment echoing an ACK
    /// not timed yet gives the time since that ACK left, in the timestamps' whole milliseconds; a
    /// sample below the estimate replaces it, a larger one moves it an eighth of the way.
    fn measure_rcv_rtt(&mut self, now: u64, p: &Pkt) {
        if p.receiver_ts_ms == self.rcv_rtt_last_tsecr {
            return;
        }
        self.rcv_rtt_last_tsecr = p.receiver_ts_ms;
        let elapsed_ms = receiver_ts_clock(now).wrapping_sub(p.receiver_ts_ms);
        if p.len - HEADER < MSS || elapsed_ms == 0 || elapsed_ms >= 1 << 15 {
            return;
        }
        let sample = u64::from(elapsed_ms) * 1_000_000;
        self.rcv_rtt_ns = Some(match self.rcv_rtt_ns {
            Some(old) if sample >= old => old - old / 8 + sample / 8,
            _ => sample,
        });
    }

    /// `tcp_grow_window` on an arrival; growing, it asks for a quick ACK (`icsk_ack.quick |= 1`).
    fn grow_window(&mut self) {
        if self.window.grow(self.held()) {
            self.quickacks = self.quickacks.max(1);
        }
    }

    /// `tcp_send_ack` and `tcp_event_ack_sent`: every ACK leaves quick-ack mode one step and
    /// ends the pending delayed and compressed ACKs.
    fn send_ack(&mut self, ctx: &mut Ctx) {
        let window = self.window.advertise(self.held(), self.rcv_nxt - self.rcv_wup);
        self.unacked = 0;
        self.quickacks = self.quickacks.saturating_sub(1);
        self.delack_deadline = None;
        self.comp_deadline = None;
        self.compressed = 0;
        let sack = std::mem::take(&mut self.news);
        self.rcv_wup = self.rcv_nxt;
        let receiver_ts_ms = receiver_ts_clock(ctx.ev.now());
        let edge = if self.ack_each { u32::MAX } else { self.rcv_nxt + window };
        ctx.send(Pkt { flow: self.flow, kind: Kind::Ack, seq: edge, ack: self.rcv_nxt, sack, len: HEADER, ts_ms: self.ts_recent, receiver_ts_ms, ..Pkt::default() });
    }
}

/// The receiving host's timestamp clock as its ACKs carry it: Linux's milliseconds, low 16 bits.
fn receiver_ts_clock(now_ns: u64) -> u16 {
    ts_clock_ms(now_ns) as u16
}

#[derive(Clone, Copy)]
enum Timer {
    Delack,
    Compressed,
    Read,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Delivers `seq` at `t_ns`, after the timers due before (the application's reads among
    /// them), and returns whether an ACK left at once.
    fn arrive(rx: &mut TcpReceiver, ctx: &mut Ctx, t_ns: u64, seq: u32) -> bool {
        !acks_on(rx, ctx, t_ns, seq).is_empty()
    }

    /// Delivers `seq` at `t_ns`, after the timers due before, and returns the ACKs that left at
    /// once.
    fn acks_on(rx: &mut TcpReceiver, ctx: &mut Ctx, t_ns: u64, seq: u32) -> Vec<Pkt> {
        timers_until(rx, ctx, t_ns);
        ctx.ev.advance_to(t_ns);
        rx.on_data(ctx, seq, MSS);
        take_acks(ctx)
    }

    fn take_acks(ctx: &mut Ctx) -> Vec<Pkt> {
        std::mem::take(&mut ctx.out).into_iter().map(|i| {
            let p = *ctx.pool.get(i);
            ctx.pool.release(i);
            p
        }).collect()
    }

    /// Runs the receiver's timers up to `t_ns`; returns each ACK they sent with its time.
    fn timers_until(rx: &mut TcpReceiver, ctx: &mut Ctx, t_ns: u64) -> Vec<(u64, Pkt)> {
        let mut acks = Vec::new();
        while ctx.ev.pop_until(t_ns).is_some() {
            rx.on_timer(ctx);
            let now = ctx.ev.now();
            acks.extend(take_acks(ctx).into_iter().map(|p| (now, p)));
        }
        acks
    }

    fn sacked(p: &Pkt) -> Vec<u32> {
        let mut v: Vec<u32> = p.sack.runs().flatten().collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn acks_echo_the_timestamp_of_the_segment_at_the_window_edge() {
        // In order: each ACK echoes the segment it acknowledges. Out of order behind a hole: the
        // dupack still echoes the last in-order segment. The retransmission filling the hole
        // (sent later) is echoed, not the out-of-order data it releases: the sender's RTT sample
        // for an ACK of retransmitted data then measures the retransmission's round trip.
        let mut ctx = Ctx::default();
        let mut rx = TcpReceiver::new(0, 0, None);
        let mut on = |seq: u32, ts_ms: u32| {
            rx.on_packet(&mut ctx, &Pkt { kind: Kind::Data, seq, len: HEADER + MSS, ts_ms, ..Pkt::default() });
            take_acks(&mut ctx).into_iter().map(|a| (a.ack, a.ts_ms)).collect::<Vec<_>>()
        };
        assert_eq!(on(0, 5), [(1, 5)], "quick-ack mode: every segment acknowledged at once");
        assert_eq!(on(2, 7), [(1, 5)], "a dupack echoes the in-order segment's TSval");
        assert_eq!(on(3, 8), [(1, 5)]);
        assert_eq!(on(1, 30), [(4, 30)], "the hole-filling retransmission's TSval");
        assert_eq!(on(1, 9), [(4, 30)], "an older TSval never replaces a newer one (PAWS)");
    }

    #[test]
    fn sacks_after_the_third_dupack_are_compressed_for_a_millisecond() {
        // Segment 18 is lost; 19.. arrive 0.4 ms apart (Linux's __tcp_ack_snd_check: three
        // dupacks at once, then one ACK per tcp_comp_sack_delay_ns = min(1 ms, RTT/20)).
        let mut ctx = Ctx::default();
        let mut rx = past_quickacks_full_window(&mut ctx);
        let t = |k: u64| 18 * MS + k * 400_000;
        for (k, seq) in (19..22).enumerate() {
            let acks = acks_on(&mut rx, &mut ctx, t(k as u64), seq);
            assert_eq!(acks.len(), 1, "dupack {} leaves at once", k + 1);
            assert_eq!((acks[0].ack, sacked(&acks[0])), (18, vec![seq]));
        }
        assert!(acks_on(&mut rx, &mut ctx, t(3), 22).is_empty(), "the fourth is compressed");
        assert!(acks_on(&mut rx, &mut ctx, t(4), 23).is_empty());
        let fired = timers_until(&mut rx, &mut ctx, t(5));
        assert!(fired.is_empty(), "{fired:?}");
        assert!(acks_on(&mut rx, &mut ctx, t(5), 24).is_empty());
        let fired = timers_until(&mut rx, &mut ctx, t(3) + 2 * MS);
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].0, t(3) + MS, "the timer runs from the first compressed arrival");
        assert_eq!(sacked(&fired[0].1), vec![22, 23, 24], "one ACK reports every arrival since the last");
        // The retransmission fills the hole: ACK at once, and the dupack count starts again.
        let acks = acks_on(&mut rx, &mut ctx, t(10), 18);
        assert_eq!((acks.len(), acks[0].ack), (1, 25));
        // A 10 ms path compresses for 0.5 ms (5 % of the RTT).
        let mut rx = TcpReceiver::new(0, 0, None);
        rx.handshake_rtt(10 * MS);
        let mut ctx = Ctx::default();
        rx.quickacks = 0;
        while rx.window.grow(0) {} // a window grown to the whole buffer asks for no quick ACKs
        for seq in 1..4 {
            assert_eq!(acks_on(&mut rx, &mut ctx, seq as u64 * MS, seq).len(), 1);
        }
        assert!(acks_on(&mut rx, &mut ctx, 4 * MS, 4).is_empty());
        let fired = timers_until(&mut rx, &mut ctx, 10 * MS);
        assert_eq!(fired.iter().map(|(t, p)| (*t, sacked(p))).collect::<Vec<_>>(), vec![(4 * MS + MS / 2, vec![4])]);
    }

    #[test]
    fn a_fourth_run_of_out_of_order_data_sends_the_compressed_ack_first() {
        // tcp_sack_new_ofo_skb: three SACK blocks fit an ACK; an arrival that would need a
        // fourth sends the pending compressed ACK (tcp_sack_compress_send_ack).
        let mut ctx = Ctx::default();
        let mut rx = past_quickacks_full_window(&mut ctx);
        for seq in 19..22 {
            assert_eq!(acks_on(&mut rx, &mut ctx, 18 * MS, seq).len(), 1);
        }
        for seq in [23, 25, 27] {
            assert!(acks_on(&mut rx, &mut ctx, 18 * MS, seq).is_empty());
        }
        let acks = acks_on(&mut rx, &mut ctx, 18 * MS, 29);
        assert_eq!(acks.len(), 1);
        assert_eq!(sacked(&acks[0]), vec![23, 25, 27]);
        assert_eq!(acks[0].sack.runs().next(), Some(27..28), "most recent first");
        let fired = timers_until(&mut rx, &mut ctx, 30 * MS);
        assert_eq!(fired.len(), 1);
        assert_eq!(sacked(&fired[0].1), vec![29]);
    }

    /// `past_quickacks` with rcv_ssthresh at the whole buffer, as any earlier loss leaves it: the
    /// first out-of-order arrival would otherwise grow the window and be acknowledged as a quick
    /// ACK, which Linux does not count among the three dupacks sent before compressing.
    fn past_quickacks_full_window(ctx: &mut Ctx) -> TcpReceiver {
        let mut rx = past_quickacks(ctx);
        while rx.window.grow(0) {}
        rx
    }

    /// A receiver past its start-up quick-acks: 16 segments 1 ms apart, all acknowledged at once.
    fn past_quickacks(ctx: &mut Ctx) -> TcpReceiver {
        let mut rx = TcpReceiver::new(0, 0, None);
        rx.handshake_rtt(20 * MS);
        // What the first data segment's echo of the SYN-ACK's timestamp would time.
        rx.rcv_rtt_ns = Some(20 * MS);
        for seq in 0..QUICKACKS {
            assert!(arrive(&mut rx, ctx, seq as u64 * MS, seq), "start-up quick-ack {seq}");
        }
        assert!(!arrive(&mut rx, ctx, 16 * MS, 16), "delayed: one full segment");
        assert!(arrive(&mut rx, ctx, 17 * MS, 17), "every second full segment");
        rx
    }

    /// Delivers segments `seqs` back to back at `t_ns` and lets the application read them; returns
    /// the ACKs sent on arrival, then those sent by the read (and any timer within 1 ms).
    fn run_then_read(rx: &mut TcpReceiver, ctx: &mut Ctx, t_ns: u64, seqs: std::ops::Range<u32>) -> (Vec<Pkt>, Vec<Pkt>) {
        let at_once = seqs.flat_map(|seq| acks_on(rx, ctx, t_ns, seq)).collect();
        (at_once, timers_until(rx, ctx, t_ns + MS).into_iter().map(|(_, p)| p).collect())
    }

    #[test]
    fn after_a_loss_a_lone_segment_and_the_next_run_wait_for_the_read() {
        // Runs of three, each read before the next (25 ms apart: too little per RTT for the buffer
        // to grow, and 40 runs for rcv_ssthresh to catch up with the buffer the start-up sized).
        // In order, rcv_ssthresh reaches the free space less the segment just charged, so an
        // ACK with one segment unread advertises what the read's ACK did: a lone segment
        // left unacknowledged is acknowledged at once with the next run's first. An out-of-order
        // arrival grows the window before it is charged (tcp_data_queue_ofo), to the whole free
        // space; from then on one unread segment shrinks the window and the ACK waits for the
        // read, as Linux's receiver does (one ACK of four segments).
        let receiver = |with_loss: bool| {
            let mut ctx = Ctx::default();
            let mut rx = past_quickacks(&mut ctx);
            let mut seq = 18;
            let mut t = 20 * MS;
            for run in 0..40 {
                if with_loss && run == 36 {
                    assert_eq!(run_then_read(&mut rx, &mut ctx, t, seq + 1..seq + 3).0.len(), 2, "two dupacks");
                    assert_eq!(run_then_read(&mut rx, &mut ctx, t + 5 * MS, seq..seq + 1).0.len(), 1, "the hole filled");
                } else {
                    run_then_read(&mut rx, &mut ctx, t, seq..seq + 3);
                }
                (seq, t) = (seq + 3, t + 25 * MS);
            }
            let (at_once, read) = run_then_read(&mut rx, &mut ctx, t, seq..seq + 1);
            assert!(at_once.is_empty() && read.is_empty(), "a lone segment waits for the delayed ACK");
            let (at_once, read) = run_then_read(&mut rx, &mut ctx, t + 25 * MS, seq + 1..seq + 4);
            (at_once.iter().map(|a| a.ack - seq).collect::<Vec<_>>(), read.iter().map(|a| a.ack - seq).collect::<Vec<_>>())
        };
        assert_eq!(receiver(false), (vec![2], vec![4]), "no loss: the lone segment and the run's first at once");
        assert_eq!(receiver(true), (vec![], vec![4]), "after a loss: all four by the read");
    }

    #[test]
    fn a_user_space_transport_gets_an_ack_per_packet_in_order_or_not() {
        // Past start-up, Linux's policy would hold a lone segment and compress dupacks; genericCC's
        // and PCC-Uspace's receivers answer every packet as it arrives.
        let mut ctx = Ctx::default();
        let mut rx = past_quickacks(&mut ctx);
        rx.ack_each = true;
        let t = 20 * MS;
        for (i, seq) in [18, 20, 21, 22, 23, 24, 19].into_iter().enumerate() {
            assert_eq!(acks_on(&mut rx, &mut ctx, t + i as u64 * 100_000, seq).len(), 1, "segment {seq}");
        }
    }

    #[test]
    fn a_burst_faster_than_the_reader_is_acknowledged_once_at_the_read() {
        // Past start-up the window has caught up with the buffer: a second unread segment would
        // shrink it, so the every-second-segment ACK waits for the read, which acknowledges the
        // whole burst (8 segments 1.2 µs apart, as from a 10 Gbit/s host).
        let mut ctx = Ctx::default();
        let mut rx = past_quickacks(&mut ctx);
        rx.rtt_ns = None; // no right-sizing: the buffer stays as it is
        let start = 30 * MS;
        for k in 0..8 {
            let acks = acks_on(&mut rx, &mut ctx, start + k as u64 * 1_200, 18 + k);
            assert!(acks.is_empty(), "segment {k} of the burst: {acks:?}");
        }
        let fired = timers_until(&mut rx, &mut ctx, start + MS);
        assert_eq!(fired.iter().map(|(t, p)| (*t, p.ack)).collect::<Vec<_>>(), [(start + DEFAULT_RECEIVER_WAKEUP.0, 26)]);
        // Segments further apart than the reader's wake-up: every second one at once, as before.
        assert!(!arrive(&mut rx, &mut ctx, start + 2 * MS, 26));
        assert!(arrive(&mut rx, &mut ctx, start + 3 * MS, 27));
        // A reader that wakes at once (`receiver_wakeup = "0us"`) has read the burst's previous
        // segment when the next arrives: every second one is acknowledged as it arrives.
        rx.set_read_wakeup(0);
        let acked: Vec<bool> = (0..8).map(|k| arrive(&mut rx, &mut ctx, start + 10 * MS + k as u64 * 1_200, 28 + k)).collect();
        assert_eq!(acked, [false, true, false, true, false, true, false, true]);
    }

    #[test]
    fn a_buffer_grown_by_a_record_read_is_filled_with_quick_acks() {
        // 20 ms RTT: the first RTT's 19 segments, a record over the initial 10, size the buffer
        // to 2·19 + 2·(2·19·9/10) = 106 segments. The next RTT reads 60, a record over 19: the
        // buffer grows to 2·60 + 2·(2·60·41/19) = 636 (tcp_rcvbuf_grow, room for a sender still
        // doubling), and the window then grows two segments per arrival, each acknowledged at
        // once, until it has caught up.
        let mut ctx = Ctx::default();
        let mut rx = past_quickacks(&mut ctx);
        let mut t = 20 * MS;
        for seq in 18..78 {
            t += 200_000;
            arrive(&mut rx, &mut ctx, t, seq);
        }
        let before = rx.window.clone();
        arrive(&mut rx, &mut ctx, 41 * MS, 78);
        timers_until(&mut rx, &mut ctx, 42 * MS);
        assert!(format!("{:?}", rx.window) != format!("{before:?}"), "the record read sized the buffer");
        assert_eq!(rx.window.clamp_and_space(), (636, 60));
        let quick = (79..600).take_while(|&seq| arrive(&mut rx, &mut ctx, 43 * MS + seq as u64 * 1_200, seq)).count();
        assert!((240..260).contains(&quick), "{quick} segments acknowledged one by one");
    }

    #[test]
    fn data_after_a_gap_longer_than_the_rto_is_acknowledged_at_once() {
        let mut ctx = Ctx::default();
        let mut rx = past_quickacks(&mut ctx);
        // The sender's retransmission timeout: the next segment comes 300 ms later.
        assert!(arrive(&mut rx, &mut ctx, 317 * MS, 18), "tcp_event_data_recv: quick-ack after the gap");
        assert!(arrive(&mut rx, &mut ctx, 318 * MS, 19), "and for the segments that follow");
        // Gaps of an RTT leave delayed ACKs alone.
        let mut ctx = Ctx::default();
        let mut rx = past_quickacks(&mut ctx);
        assert!(!arrive(&mut rx, &mut ctx, 37 * MS, 18));
    }

    #[test]
    fn a_duplicate_segment_restarts_quick_acks() {
        let mut ctx = Ctx::default();
        let mut rx = past_quickacks(&mut ctx);
        assert!(arrive(&mut rx, &mut ctx, 18 * MS, 5), "a duplicate is acknowledged at once");
        assert!(arrive(&mut rx, &mut ctx, 19 * MS, 18), "tcp_enter_quickack_mode: so is the next segment");
    }

    #[test]
    fn the_receivers_rto_comes_from_the_handshake() {
        // A SYN is answered with a SYN-ACK; the handshake's ACK 100 ms later gives the receiver
        // an RTO of 300 ms (RTT + max(2·RTT, rto_min)), so a 250 ms gap in the data is no
        // reason to quick-ack, and a 350 ms one is.
        let mut ctx = Ctx::default();
        let mut rx = TcpReceiver::new(0, 0, None);
        rx.on_packet(&mut ctx, &Pkt { kind: Kind::Syn, ..Pkt::default() });
        assert_eq!(take_acks(&mut ctx).iter().map(|p| p.kind).collect::<Vec<_>>(), [Kind::SynAck]);
        ctx.ev.advance_to(100 * MS);
        rx.on_packet(&mut ctx, &Pkt { kind: Kind::HandshakeAck, len: HEADER, ..Pkt::default() });
        assert!(take_acks(&mut ctx).is_empty());
        assert_eq!((rx.rto_ns, rx.comp_delay_ns), (300 * MS, MS));
        for seq in 0..QUICKACKS + 2 {
            arrive(&mut rx, &mut ctx, 101 * MS + seq as u64 * MS, seq);
        }
        assert!(!arrive(&mut rx, &mut ctx, 119 * MS + 250 * MS, 18), "delayed after 250 ms");
        assert!(arrive(&mut rx, &mut ctx, 119 * MS + 600 * MS, 19), "quick-ack after 350 ms");
    }

    #[test]
    fn the_receivers_rtt_follows_the_timestamps_its_acks_get_back() {
        // tcp_rcv_rtt_measure_ts (6.16+): a full segment echoing an ACK's TSval not timed before
        // gives the time since that ACK left; a sample under the estimate replaces it, a larger
        // one moves it an eighth of the way. The handshake does not time it (Linux's receiver
        // starts with none): the first segment's echo does, in whole milliseconds.
        let mut ctx = Ctx::default();
        let mut rx = TcpReceiver::new(0, 0, None);
        rx.handshake_rtt(100 * MS);
        assert_eq!(rx.rcv_rtt_ns, None);
        let mut segment = |t_ms: u64, seq: u32, ack_left_ms: u64, payload: u32| {
            ctx.ev.advance_to(t_ms * MS);
            let echo = receiver_ts_clock(ack_left_ms * MS);
            rx.on_packet(&mut ctx, &Pkt { kind: Kind::Data, seq, len: HEADER + payload, receiver_ts_ms: echo, ..Pkt::default() });
            take_acks(&mut ctx);
            rx.rcv_rtt_ns.map(|r| r / 100_000)
        };
        assert_eq!(segment(1_000, 0, 800, MSS), Some(2_000), "the first sample, 200 ms, in 0.1 ms");
        assert_eq!(segment(1_001, 1, 800, MSS), Some(2_000), "the same echo is timed once");
        assert_eq!(segment(1_010, 2, 950, 100), Some(2_000), "a short segment is not timed");
        assert_eq!(segment(1_020, 3, 960, MSS), Some(600), "a 60 ms sample is latched at once");
        assert_eq!(segment(1_100, 4, 1_000, MSS), Some(650), "a 100 ms one moves it an eighth of the way");
    }

    /// A receiver past its start-up quick ACKs, its window grown: a lone segment's ACK is delayed.
    fn settled(rtt_ns: u64) -> TcpReceiver {
        let mut rx = TcpReceiver::new(0, 0, None);
        rx.handshake_rtt(rtt_ns);
        rx.quickacks = 0;
        while rx.window.grow(1) {}
        rx
    }

    #[test]
    fn the_delayed_acks_timeout_adapts_between_40_ms_and_the_rtt() {
        // A 100 ms path (receiver's RTO 300 ms), past quick-acks, lone segments 200 ms apart:
        // the first delayed ACK waits TCP_ATO_MIN; each that had to fire doubles the ATO
        // (tcp_delack_timer_handler), which tcp_send_delayed_ack caps at the RTT. Segments
        // closely spaced deflate it again (tcp_event_data_recv), towards 40 ms.
        let mut ctx = Ctx::default();
        let mut rx = settled(100 * MS);
        let mut delays = Vec::new();
        for (k, seq) in (0..4).enumerate() {
            let t = k as u64 * 200 * MS;
            assert!(!arrive(&mut rx, &mut ctx, t, seq));
            let fired = timers_until(&mut rx, &mut ctx, t + 150 * MS);
            assert_eq!(fired.len(), 1, "one delayed ACK for segment {seq}");
            delays.push((fired[0].0 - t) / MS);
        }
        // Whole jiffies at 250 Hz: 40 ms is 10 ticks, 80 ms 20, 100 ms 25, each a tick later at most.
        assert!(matches!(delays[..], [40..=44, 80..=84, 100..=104, 100..=104]), "{delays:?}");
        // Six segments 1 ms apart (the first 200 ms after the last: ATO 300 ms, the RTO): each
        // after the first halves it and adds 20 ms, 170, 105, 72.5, 56.3, 48.1 ms.
        for seq in 4..10 {
            arrive(&mut rx, &mut ctx, 800 * MS + (seq - 4) as u64 * MS, seq);
        }
        assert!(!arrive(&mut rx, &mut ctx, 900 * MS, 10));
        let fired = timers_until(&mut rx, &mut ctx, 1_000 * MS);
        assert!((48..=56).contains(&((fired[0].0 - 900 * MS) / MS)), "{fired:?}");
    }

    #[test]
    fn a_path_shorter_than_40_ms_keeps_the_40_ms_delayed_ack() {
        // TCP_DELACK_MIN bounds the RTT's cap from below, so a 20 ms path's ATO, inflated by each
        // delayed ACK that fires, still waits 40 ms.
        let mut ctx = Ctx::default();
        let mut rx = settled(20 * MS);
        for k in 0..3u64 {
            let t = k * 100 * MS;
            assert!(!arrive(&mut rx, &mut ctx, t, k as u32));
            let fired = timers_until(&mut rx, &mut ctx, t + 90 * MS);
            assert!((40..=44).contains(&((fired[0].0 - t) / MS)), "{fired:?}");
        }
    }
}
