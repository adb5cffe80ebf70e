//! NewReno's window rules (net/ipv4/tcp_cong.c: `tcp_reno_cong_avoid`, `tcp_reno_ssthresh`).
//! Linux counts acked segments, not ACKs (appropriate byte counting), so delayed ACKs do not
//! slow the additive increase.

use crate::cc::conn::{cong_avoid_ai, slow_start, Conn};

pub struct Reno;

pub fn reno_cong_avoid(c: &mut Conn, acked: u32) {
    if !c.cwnd_limited {
        return;
    }
    let mut acked = acked;
    if c.cwnd < c.ssthresh {
        acked = slow_start(c, acked);
        if acked == 0 {
            return;
        }
    }
    let w = c.cwnd;
    cong_avoid_ai(c, w, acked);
}

pub fn reno_ssthresh(c: &Conn) -> u32 {
    (c.cwnd / 2).max(2)
}
