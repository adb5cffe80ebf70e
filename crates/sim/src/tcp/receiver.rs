//! The receiving end of a TCP flow, as Linux acknowledges (net/ipv4/tcp_input.c).

use crate::ctx::Ctx;
use crate::engine::{ComponentId, Wakeup};
use crate::packet::{Kind, Pkt, HEADER, MSS, NO_SACK};
use std::collections::VecDeque;

/// The receiving end: in-order delivery, out-of-order buffer, delayed ACKs (every second
/// full segment or after 40 ms, Linux's minimum ATO; immediate while out-of-order data waits or
/// in quick-ack mode: for the first 16 segments, and for 16 more after in-order data resumes
/// from a gap longer than the receiver's RTO or after a duplicate segment).
pub struct TcpReceiver {
    pub id: ComponentId,
    pub flow: u32,
    rcv_nxt: u32,
    ooo: VecDeque<bool>,
    ooo_count: u32,
    unacked: u32,
    quickacks: u32,
    /// When in-order data last arrived (Linux's `icsk_ack.lrcvtime`).
    last_in_order_ns: Option<u64>,
    delack_deadline: Option<u64>,
    wake: Wakeup,
    /// Payload bytes delivered in order to the application.
    pub delivered_bytes: u64,
    pub window_bytes: u64,
    /// For a finite transfer: its segment count and the last segment's payload.
    finite: Option<(u32, u32)>,
    pub completed_ns: Option<u64>,
}

const DELACK_NS: u64 = 40_000_000;
/// Linux's TCP_MAX_QUICKACKS (the receive window never limits it here).
const QUICKACKS: u32 = 16;
/// The receiver's own RTO, against which `tcp_event_data_recv` judges a gap in the data. Linux
/// sets it from the handshake's RTT sample (RTT + max(2·RTT, rto_min)); the model has no
/// handshake, so the receiver takes rto_min, which RTT-scale gaps never reach and the silence
/// before a sender's retransmission timeout (at least rto_min + 2·RTT here) always exceeds.
const RECEIVER_RTO_NS: u64 = 200_000_000;

impl TcpReceiver {
    pub fn new(id: ComponentId, flow: u32, finite: Option<(u32, u32)>) -> Self {
        TcpReceiver {
            finite,
            completed_ns: None,
            id,
            flow,
            rcv_nxt: 0,
            ooo: VecDeque::new(),
            ooo_count: 0,
            unacked: 0,
            quickacks: QUICKACKS,
            last_in_order_ns: None,
            delack_deadline: None,
            wake: Wakeup::default(),
            delivered_bytes: 0,
            window_bytes: 0,
        }
    }

    pub fn rcv_nxt(&self) -> u32 {
        self.rcv_nxt
    }

    pub fn on_data(&mut self, ctx: &mut Ctx, seq: u32, payload: u32) {
        if seq < self.rcv_nxt {
            // tcp_data_queue: a duplicate means an ACK was lost or late; tcp_enter_quickack_mode.
            self.quickacks = self.quickacks.max(QUICKACKS);
            self.send_ack(ctx, NO_SACK);
            return;
        }
        if seq > self.rcv_nxt {
            let i = (seq - self.rcv_nxt) as usize;
            if self.ooo.len() <= i {
                self.ooo.resize(i + 1, false);
            }
            if !self.ooo[i] {
                self.ooo[i] = true;
                self.ooo_count += 1;
            }
            self.send_ack(ctx, seq);
            return;
        }
        // tcp_event_data_recv: data resuming after a gap longer than the RTO means the sender
        // failed to restart its window (a timeout); ACK quickly so that its window reopens.
        let now = ctx.ev.now();
        if self.last_in_order_ns.is_some_and(|t| now - t > RECEIVER_RTO_NS) {
            self.quickacks = self.quickacks.max(QUICKACKS);
        }
        self.last_in_order_ns = Some(now);
        let filled_hole = self.ooo_count > 0;
        let mut bytes = payload as u64;
        self.rcv_nxt += 1;
        self.ooo.pop_front();
        while self.ooo.front() == Some(&true) {
            self.ooo.pop_front();
            self.ooo_count -= 1;
            bytes += self.payload_of(self.rcv_nxt) as u64;
            self.rcv_nxt += 1;
        }
        if let Some((segments, _)) = self.finite {
            if self.rcv_nxt >= segments && self.completed_ns.is_none() {
                self.completed_ns = Some(now);
            }
        }
        self.delivered_bytes += bytes;
        self.window_bytes += bytes;
        self.unacked += 1;
        if filled_hole || self.unacked >= 2 || self.quickacks > 0 {
            self.quickacks = self.quickacks.saturating_sub(1);
            self.send_ack(ctx, NO_SACK);
        } else if self.delack_deadline.is_none() {
            let t = now + DELACK_NS;
            self.delack_deadline = Some(t);
            if self.wake.want(t) {
                ctx.ev.schedule(t, self.id);
            }
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
        if let Some(d) = self.delack_deadline {
            if now >= d && self.unacked > 0 {
                self.send_ack(ctx, NO_SACK);
            } else if now < d && self.wake.want(d) {
                ctx.ev.schedule(d, self.id);
            }
        }
    }

    fn send_ack(&mut self, ctx: &mut Ctx, sack: u32) {
        self.unacked = 0;
        self.delack_deadline = None;
        ctx.send(Pkt { flow: self.flow, kind: Kind::Ack, ack: self.rcv_nxt, sack, len: HEADER, ..Pkt::default() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Delivers `seq` at `t_ns` and returns whether an ACK left at once.
    fn arrive(rx: &mut TcpReceiver, ctx: &mut Ctx, t_ns: u64, seq: u32) -> bool {
        ctx.ev.advance_to(t_ns);
        rx.on_data(ctx, seq, MSS);
        let acked = !ctx.out.is_empty();
        for i in std::mem::take(&mut ctx.out) {
            ctx.pool.release(i);
        }
        acked
    }

    /// A receiver past its start-up quick-acks: 16 segments 1 ms apart, all acknowledged at once.
    fn past_quickacks(ctx: &mut Ctx) -> TcpReceiver {
        let mut rx = TcpReceiver::new(0, 0, None);
        for seq in 0..QUICKACKS {
            assert!(arrive(&mut rx, ctx, seq as u64 * MS, seq), "start-up quick-ack {seq}");
        }
        assert!(!arrive(&mut rx, ctx, 16 * MS, 16), "delayed: one full segment");
        assert!(arrive(&mut rx, ctx, 17 * MS, 17), "every second full segment");
        rx
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
}
