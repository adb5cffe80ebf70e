//! TCP connection tracking and per-packet annotation of each direction's data (002 §2.2).
//!
//! Each connection has two directions; each is a data stream whose acknowledgements travel the
//! other way. Every data packet is annotated with:
//! - `RETRANS`: it repeats bytes already sent (below the cumulative ACK or still in flight); bytes
//!   in a hole below the highest sequence sent are an original transmission whose capture
//!   record was written out of order;
//! - `LOST`: a later retransmission covers (part of) it, unless a D-SACK (RFC 2883) shows that
//!   retransmission was spurious, i.e. the receiver got both copies;
//! - an RTT sample when an ACK first reports a packet that was never retransmitted (Karn's rule:
//!   a retransmitted range gives an ambiguous sample): a cumulative ACK that ends exactly at it
//!   while no hole is open (one that closes a hole measures the repair, not the path), or a
//!   SACK block, which reports the packet as it arrives, whatever hole lies below it.
//!
//! A direction's data is cut into application segments (a request and its response): a segment
//! ends when the other direction sends new data while this one has sent some since the last cut.
//! Without requests a direction is a single segment. Segments are handed out as soon as they end,
//! so memory is bounded by the largest segment, not by the trace.

use crate::decode::{TcpPacket, TCP_ACK, TCP_SYN};
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

pub const RETRANS: u8 = 1;
pub const LOST: u8 = 2;
/// A retransmission the receiver reported as a duplicate (D-SACK).
pub const SPURIOUS: u8 = 4;
/// The packet has given its RTT sample (from a SACK block or the cumulative ACK).
pub const RTT_SAMPLED: u8 = 8;

const NONE: u32 = u32::MAX;
/// Acked retransmissions remembered for matching late D-SACKs.
const RECENT_RETX: usize = 64;

/// One data packet of a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPkt {
    pub t_ns: u64,
    /// Sequence number relative to the direction's first byte, unwrapped to 64 bits.
    pub seq: u64,
    pub payload: u32,
    /// IP length: the bytes a policer charges for this packet.
    pub ip_len: u32,
    pub flags: u8,
    /// Which of the merged flows sent it (per-client aggregates; 0 in a single flow's segment).
    pub flow: u32,
}

impl DataPkt {
    pub fn lost(&self) -> bool {
        self.flags & LOST != 0
    }
    pub fn retransmission(&self) -> bool {
        self.flags & RETRANS != 0
    }
}

/// An RTT sample: the ACK's arrival time, when the acked packet was sent, and the delay between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttSample {
    pub t_ns: u64,
    pub sent_ns: u64,
    pub rtt_ns: u64,
    /// As `DataPkt::flow`.
    pub flow: u32,
}

/// A cumulative ACK that advanced, with how many bytes it newly acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckEvent {
    pub t_ns: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.addr {
            IpAddr::V4(a) => write!(f, "{a}:{}", self.port),
            IpAddr::V6(a) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

/// Who sent the data, when the handshake told us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ServerToClient,
    ClientToServer,
    Unknown,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::ServerToClient => "server_to_client",
            Direction::ClientToServer => "client_to_server",
            Direction::Unknown => "unknown",
        }
    }
}

/// One application segment of one direction, annotated.
#[derive(Debug, Clone)]
pub struct Segment {
    pub sender: Endpoint,
    pub receiver: Endpoint,
    pub direction: Direction,
    /// 0-based index of the segment within its direction.
    pub index: u32,
    pub packets: Vec<DataPkt>,
    pub rtts: Vec<RttSample>,
    pub acks: Vec<AckEvent>,
}

impl Segment {
    pub fn flow_label(&self) -> String {
        format!("{}>{}", self.sender, self.receiver)
    }
}

type SegmentParts = (u32, Vec<DataPkt>, Vec<RttSample>, Vec<AckEvent>);

#[derive(Clone, Copy)]
struct Range {
    start: u64,
    end: u64,
    idx: u32,
}

/// One direction's sender state, as inferred from the trace.
#[derive(Default)]
struct Dir {
    isn: Option<u32>,
    snd_max: u64,
    cum_ack: u64,
    /// Highest right edge of any SACK block: above `cum_ack` it means a hole is being repaired.
    sack_high: u64,
    /// Unacknowledged ranges, sorted and disjoint, each naming its latest transmission.
    inflight: VecDeque<Range>,
    recent_retx: VecDeque<Range>,
    /// Global index of `pkts[0]`; indices below it belong to segments already handed out.
    base: u32,
    pkts: Vec<DataPkt>,
    /// Per packet (parallel to `pkts`): the transmission it repeats, or NONE.
    prev_tx: Vec<u32>,
    rtts: Vec<RttSample>,
    acks: Vec<AckEvent>,
    segment: u32,
}

impl Dir {
    fn unwrap(&self, raw: u32) -> Option<u64> {
        let rel = raw.wrapping_sub(self.isn?);
        let diff = rel.wrapping_sub(self.snd_max as u32) as i32 as i64;
        Some((self.snd_max as i64 + diff).max(0) as u64)
    }

    fn pkt_mut(&mut self, idx: u32) -> Option<&mut DataPkt> {
        idx.checked_sub(self.base).and_then(|i| self.pkts.get_mut(i as usize))
    }

    fn on_data(&mut self, p: &TcpPacket) {
        if self.isn.is_none() {
            self.isn = Some(p.seq);
        }
        let Some(start) = self.unwrap(p.seq) else { return };
        let end = start + p.payload_len as u64;
        let idx = self.base + self.pkts.len() as u32;
        let mut flags = 0;
        let mut prev = NONE;
        if start < self.snd_max {
            // Bytes below the cumulative ACK or in a range already in flight were sent before;
            // bytes in a hole of the in-flight list were not (a capture record written out of
            // order), and this is their original transmission.
            if start < self.cum_ack {
                flags |= RETRANS;
            }
            let mut at = self.inflight.partition_point(|r| r.end <= start);
            let mut covered = start.max(self.cum_ack);
            while covered < end.min(self.snd_max) {
                match self.inflight.get(at).copied() {
                    Some(r) if r.start <= covered => {
                        flags |= RETRANS;
                        if prev == NONE {
                            prev = r.idx;
                        }
                        if let Some(o) = self.pkt_mut(r.idx) {
                            o.flags |= LOST;
                        }
                        self.inflight[at].idx = idx;
                        covered = r.end;
                        at += 1;
                    }
                    next => {
                        let hole_end = next.map_or(self.snd_max, |r| r.start).min(end);
                        self.inflight.insert(at, Range { start: covered, end: hole_end, idx });
                        covered = hole_end;
                        at += 1;
                    }
                }
            }
        }
        if end > self.snd_max {
            let new_from = start.max(self.snd_max);
            self.inflight.push_back(Range { start: new_from, end, idx });
            self.snd_max = end;
        }
        self.pkts.push(DataPkt { t_ns: p.ts_ns, seq: start, payload: p.payload_len, ip_len: p.ip_len, flags, flow: 0 });
        self.prev_tx.push(prev);
    }

    fn on_ack(&mut self, p: &TcpPacket) {
        let Some(ack) = self.unwrap(p.ack) else { return };
        // While a hole is open the cumulative ACK waits for its repair, so an ACK that closes it
        // measures the recovery, not the path: Karn's rule extended to SACK recovery.
        let clean = self.cum_ack >= self.sack_high;
        for &(_, r) in p.sack_blocks() {
            if let Some(r) = self.unwrap(r) {
                if r <= self.snd_max {
                    self.sack_high = self.sack_high.max(r);
                }
            }
        }
        // RFC 2018: the first block holds the segment whose arrival triggered this ACK.
        if let Some(&(_, r)) = p.sack_blocks().first() {
            if let Some(r) = self.unwrap(r).filter(|&r| r > ack.max(self.cum_ack)) {
                let at = self.inflight.partition_point(|x| x.end < r);
                if let Some(range) = self.inflight.get(at).copied().filter(|x| x.end == r) {
                    self.sample_rtt(range.idx, p.ts_ns);
                }
            }
        }
        if ack > self.cum_ack && ack <= self.snd_max {
            let acked = ack - self.cum_ack;
            self.cum_ack = ack;
            let mut last: Option<Range> = None;
            // Packets acknowledged together with a repair waited for it (seen without SACK too).
            let mut repaired = false;
            while let Some(r) = self.inflight.front().copied() {
                if r.end > ack {
                    break;
                }
                self.inflight.pop_front();
                if self.prev_of(r.idx) != NONE {
                    repaired = true;
                    if self.recent_retx.len() == RECENT_RETX {
                        self.recent_retx.pop_front();
                    }
                    self.recent_retx.push_back(r);
                }
                last = Some(r);
            }
            if let Some(r) = last.filter(|r| r.end == ack && clean && !repaired) {
                self.sample_rtt(r.idx, p.ts_ns);
            }
            if !self.pkts.is_empty() {
                self.acks.push(AckEvent { t_ns: p.ts_ns, bytes: acked });
            }
        }
        self.check_dsack(p, ack);
    }

    /// The first report of an original transmission gives its RTT sample.
    fn sample_rtt(&mut self, idx: u32, ack_ns: u64) {
        let Some(pkt) = self.pkt_mut(idx) else { return };
        if pkt.flags & (RETRANS | RTT_SAMPLED) != 0 || ack_ns < pkt.t_ns {
            return;
        }
        pkt.flags |= RTT_SAMPLED;
        let sent_ns = pkt.t_ns;
        self.rtts.push(RttSample { t_ns: ack_ns, sent_ns, rtt_ns: ack_ns - sent_ns, flow: 0 });
    }

    fn prev_of(&self, idx: u32) -> u32 {
        idx.checked_sub(self.base)
            .and_then(|i| self.prev_tx.get(i as usize).copied())
            .unwrap_or(NONE)
    }

    /// RFC 2883: the first SACK block reports a duplicate if it lies below the cumulative ACK or
    /// inside the second block.
    fn check_dsack(&mut self, p: &TcpPacket, ack: u64) {
        let blocks = p.sack_blocks();
        let Some(&(l, r)) = blocks.first() else { return };
        let (Some(l), Some(r)) = (self.unwrap(l), self.unwrap(r)) else { return };
        let inside_second = blocks
            .get(1)
            .and_then(|&(l2, r2)| Some((self.unwrap(l2)?, self.unwrap(r2)?)))
            .is_some_and(|(l2, r2)| l >= l2 && r <= r2);
        if !(r <= ack || inside_second) || l >= r {
            return;
        }
        let hit = self
            .recent_retx
            .iter()
            .chain(self.inflight.iter())
            .find(|x| x.start <= l && l < x.end)
            .map(|x| x.idx);
        let Some(retx) = hit else { return };
        let prev = self.prev_of(retx);
        if prev == NONE {
            return;
        }
        if let Some(pkt) = self.pkt_mut(retx) {
            pkt.flags |= SPURIOUS;
        }
        if let Some(orig) = self.pkt_mut(prev) {
            orig.flags &= !LOST;
        }
    }

    /// Hands out the current segment: (index, packets, RTT samples, ACK arrivals).
    fn take_segment(&mut self) -> Option<SegmentParts> {
        if self.pkts.is_empty() {
            return None;
        }
        self.base += self.pkts.len() as u32;
        self.prev_tx.clear();
        let seg = (self.segment, std::mem::take(&mut self.pkts), std::mem::take(&mut self.rtts), std::mem::take(&mut self.acks));
        self.segment += 1;
        Some(seg)
    }
}

struct Conn {
    ends: [Endpoint; 2],
    /// Index into `ends` of the side that sent the SYN.
    client: Option<usize>,
    dirs: [Dir; 2],
}

impl Conn {
    fn emit(&mut self, d: usize, out: &mut dyn FnMut(Segment)) {
        if let Some((index, packets, rtts, acks)) = self.dirs[d].take_segment() {
            let direction = match self.client {
                Some(c) if c == d => Direction::ClientToServer,
                Some(_) => Direction::ServerToClient,
                None => Direction::Unknown,
            };
            out(Segment { sender: self.ends[d], receiver: self.ends[1 - d], direction, index, packets, rtts, acks });
        }
    }
}

/// Tracks every connection of a trace and emits annotated segments.
#[derive(Default)]
pub struct Tracker {
    conns: HashMap<(Endpoint, Endpoint), Conn>,
}

impl Tracker {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, p: &TcpPacket, out: &mut dyn FnMut(Segment)) {
        let a = Endpoint { addr: p.src, port: p.sport };
        let b = Endpoint { addr: p.dst, port: p.dport };
        let key = if a <= b { (a, b) } else { (b, a) };
        let conn = self.conns.entry(key).or_insert_with(|| Conn {
            ends: [key.0, key.1],
            client: None,
            dirs: [Dir::default(), Dir::default()],
        });
        let d = if conn.ends[0] == a { 0 } else { 1 };
        let r = 1 - d;
        if p.has(TCP_SYN) {
            if conn.dirs[d].snd_max > 0 {
                // The 4-tuple is reused by a new connection: close the old one out.
                conn.emit(0, out);
                conn.emit(1, out);
                conn.dirs = [Dir::default(), Dir::default()];
                conn.client = None;
            }
            if !p.has(TCP_ACK) {
                conn.client = Some(d);
            }
            conn.dirs[d].isn = Some(p.seq.wrapping_add(1));
        }
        // The ACK first: it belongs to the other side's current segment, which new data may end.
        if p.has(TCP_ACK) {
            conn.dirs[r].on_ack(p);
        }
        if p.payload_len > 0 {
            let snd_max = conn.dirs[d].snd_max;
            let new_data = !matches!(conn.dirs[d].unwrap(p.seq), Some(s) if s < snd_max);
            if new_data && !conn.dirs[r].pkts.is_empty() {
                conn.emit(r, out); // a new request ends the other side's response
            }
            conn.dirs[d].on_data(p);
        }
    }

    /// Emits every segment still open (end of trace).
    pub fn finish(&mut self, out: &mut dyn FnMut(Segment)) {
        let mut conns: Vec<_> = self.conns.drain().collect();
        conns.sort_by_key(|(k, _)| *k); // deterministic output order
        for (_, mut c) in conns {
            c.emit(0, out);
            c.emit(1, out);
        }
    }
}
