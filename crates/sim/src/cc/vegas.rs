//! TCP Vegas as in net/ipv4/tcp_vegas.c: once per RTT compare the expected and actual rate
//! through diff = cwnd·(rtt − baseRTT)/baseRTT segments queued; α = 2, β = 4, γ = 1; Reno while
//! fewer than three RTT samples were taken in the round or outside the Open state.

use crate::cc::conn::{slow_start, CaState, Conn};
use crate::cc::reno;

const ALPHA: u64 = 2;
const BETA: u64 = 4;
const GAMMA: u64 = 1;

pub struct Vegas {
    enabled: bool,
    beg_snd_nxt: u32,
    cnt_rtt: u32,
    min_rtt_ns: u64,
    base_rtt_ns: u64,
}

impl Default for Vegas {
    fn default() -> Self {
        Vegas { enabled: true, beg_snd_nxt: 0, cnt_rtt: 0, min_rtt_ns: u64::MAX, base_rtt_ns: u64::MAX }
    }
}

impl Vegas {
    pub fn pkts_acked(&mut self, rtt_ns: Option<u64>) {
        let Some(rtt) = rtt_ns else { return };
        let v = rtt + 1;
        self.base_rtt_ns = self.base_rtt_ns.min(v);
        self.min_rtt_ns = self.min_rtt_ns.min(v);
        self.cnt_rtt += 1;
    }

    pub fn set_state(&mut self, state: CaState) {
        self.enabled = state == CaState::Open;
        self.cnt_rtt = 0;
        self.min_rtt_ns = u64::MAX;
    }

    pub fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        if !self.enabled {
            reno::reno_cong_avoid(c, acked);
            return;
        }
        if c.snd_una > self.beg_snd_nxt {
            self.beg_snd_nxt = c.snd_nxt;
            if self.cnt_rtt <= 2 {
                reno::reno_cong_avoid(c, acked);
            } else {
                let rtt = self.min_rtt_ns;
                let base = self.base_rtt_ns;
                let cwnd = c.cwnd as u64;
                let target = cwnd * base / rtt;
                let diff = cwnd * (rtt - base) / base;
                if diff > GAMMA && c.cwnd < c.ssthresh {
                    // Too much queued while slow-starting: drop to the rate we actually get.
                    c.cwnd = c.cwnd.min(target as u32 + 1);
                    c.ssthresh = c.ssthresh.min(c.cwnd.saturating_sub(1));
                } else if c.cwnd < c.ssthresh {
                    slow_start(c, acked);
                } else if diff > BETA {
                    c.cwnd -= 1;
                    c.ssthresh = c.ssthresh.min(c.cwnd.saturating_sub(1));
                } else if diff < ALPHA {
                    c.cwnd += 1;
                }
                c.cwnd = c.cwnd.max(2);
                c.ssthresh = c.ssthresh.max(c.cwnd * 3 / 4);
            }
            self.cnt_rtt = 0;
            self.min_rtt_ns = u64::MAX;
        } else if c.cwnd < c.ssthresh {
            slow_start(c, acked);
        }
    }
}
