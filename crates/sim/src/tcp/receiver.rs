//! The receiving end of a TCP flow, as Linux acknowledges (net/ipv4/tcp_input.c).

use crate::ctx::Ctx;
use crate::engine::{ComponentId, Wakeup};
use crate::packet::{Kind, Pkt, HEADER, MSS, NO_SACK};
use std::collections::VecDeque;

/// The receiving end: in-order delivery, out-of-order buffer, delayed ACKs (every second
/// full segment or after 40 ms, Linux's minimum ATO; immediate while out-of-order data waits or
/// during the first 16 segments' quick-ack mode).
pub struct TcpReceiver {
    pub id: ComponentId,
    pub flow: u32,
    rcv_nxt: u32,
    ooo: VecDeque<bool>,
    ooo_count: u32,
    unacked: u32,
    quickacks: u32,
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
const QUICKACKS: u32 = 16;

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
                self.completed_ns = Some(ctx.ev.now());
            }
        }
        self.delivered_bytes += bytes;
        self.window_bytes += bytes;
        self.unacked += 1;
        if filled_hole || self.unacked >= 2 || self.quickacks > 0 {
            self.quickacks = self.quickacks.saturating_sub(1);
            self.send_ack(ctx, NO_SACK);
        } else if self.delack_deadline.is_none() {
            let t = ctx.ev.now() + DELACK_NS;
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
