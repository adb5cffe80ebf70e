//! Synthetic server-side traces whose ground truth is known: chunked downloads by a SACK/RACK
//! Reno sender through a token-bucket policer (ratekit-core's), a drop-tail bottleneck, or
//! random loss. Used to test and calibrate the detector, and to measure its speed.
//!
//! The model follows Linux where it matters to the detector: initial window 10, slow start and
//! Reno congestion avoidance, RACK loss detection (a packet is lost once a packet sent after it
//! is delivered), one window reduction per recovery episode, RTO with 200 ms minimum and
//! exponential backoff, SACK and D-SACK from the receiver (which ACKs every packet, or delays its
//! ACKs as Linux does), cwnd reset
//! to the initial window after an idle longer than the RTO. The server's capture sees each data
//! packet when the NIC sends it and each ACK when it arrives.
//!
//! Why not the simulator's TCP (`ratekit-sim`): its packets are segment numbers with one SACK block
//! per ACK (the minimum its scoreboard needs), not byte sequence numbers with the receiver's up to
//! three blocks and D-SACK, and its hosts are components of its own event engine; a trace needs the
//! wire's headers at one capture point, and the detector reads exactly those (unwrapped sequence
//! numbers, SACK edges, D-SACK). Bridging would mean a header encoder inside the simulator for one
//! test generator. The generator stays small and deterministic, and the detector's reference is the
//! lab's real Linux TCP (docs/detector.md), which neither model replaces.

use crate::decode::{TcpPacket, TCP_ACK, TCP_SYN};
use ratekit_core::token_bucket::{TokenBucket, TokenBucketConfig};
use ratekit_core::{Instant, Packet, Policer, Rate};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};

/// What sits between the server and the clients.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Path {
    /// A token-bucket policer (rate, bucket bytes), then an uncongested access link.
    Policer { rate: Rate, burst: u64 },
    /// A bottleneck link with a drop-tail FIFO of `queue` bytes.
    DropTail { rate: Rate, queue: u64 },
    /// Independent random loss with probability `p`, no congestion.
    RandomLoss { p: f64 },
}

/// One generated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub seed: u64,
    pub path: Path,
    /// Base round-trip time between server and client.
    pub rtt_ns: u64,
    /// TCP payload per packet; IP length is payload + 52 (20 IP + 32 TCP with timestamps).
    pub mss: u32,
    pub chunks: u32,
    pub chunk_bytes: u64,
    pub pause_ns: u64,
    /// Captured flows (all towards one client when `same_client`).
    pub flows: u32,
    pub same_client: bool,
    /// Extra uncaptured flows through the same path (cross traffic), towards other clients.
    pub cross_flows: u32,
    /// The cross flows are bulk downloads that start `BULK_LEAD_NS` before the captured flows and
    /// outlast them, so a bottleneck's queue never drains while they are captured (the lab's H).
    /// Otherwise they are chunked like the captured flows.
    pub cross_bulk: bool,
    /// Gap between the starts of successive flows.
    pub stagger_ns: u64,
    /// Server NIC and access-link rate (the burst throughput).
    pub line_rate: Rate,
    /// Uniform extra delay on the ACK path (kept in order), so that seeds differ.
    pub ack_jitter_ns: u64,
    /// The receiver delays its ACKs as Linux does by default: one ACK per two in-order segments,
    /// or when the 40 ms timer fires; at once for out-of-order data, a filled hole or a
    /// duplicate. Off: one ACK per segment (Linux in quick-ACK mode).
    pub delayed_acks: bool,
}

impl Scenario {
    /// Five 2 MB chunks with 1 s pauses, one flow, 100 ms RTT: the lab setup of 002 §3.1.
    pub fn new(path: Path, seed: u64) -> Self {
        Scenario {
            seed,
            path,
            rtt_ns: 100_000_000,
            mss: 1448,
            chunks: 5,
            chunk_bytes: 2_000_000,
            pause_ns: 1_000_000_000,
            flows: 1,
            same_client: true,
            cross_flows: 0,
            cross_bulk: false,
            stagger_ns: 300_000_000,
            line_rate: Rate::from_mbps(1000.0),
            ack_jitter_ns: 2_000_000,
            delayed_acks: false,
        }
    }
}

/// The generated trace and what the path actually did.
#[derive(Debug, Clone)]
pub struct Trace {
    pub packets: Vec<TcpPacket>,
    /// Data packets the path dropped, for captured flows only.
    pub drops: u64,
    pub data_sent: u64,
}

const HEADER: u32 = 52;
const IW: f64 = 10.0;
const MIN_RTO: u64 = 200_000_000;
const MAX_RTO: u64 = 60_000_000_000;
const EPOCH_NS: u64 = 1_700_000_000_000_000_000;
const SERVER_PORT: u16 = 443;
const REQUEST_LEN: u32 = 200;
/// Server to policer / bottleneck: the enforcer sits near the server, as in 002's lab.
const NEAR_NS: u64 = 500_000;
/// How long bulk cross traffic runs before the captured flows start (the lab's 2 s).
const BULK_LEAD_NS: u64 = 2_000_000_000;
/// A bulk cross flow sends this many times a captured flow's bytes, so that it outlasts it.
const BULK_FACTOR: u32 = 4;
/// Linux's delayed-ACK timer (TCP_DELACK_MIN).
const DELACK_NS: u64 = 40_000_000;

#[derive(Clone, Copy, Default)]
struct TxState {
    sent_ns: u64,
    sacked: bool,
    lost: bool,
    retx: u32,
}

struct Flow {
    captured: bool,
    client: IpAddr,
    cport: u16,
    chunk_pkts: u32,
    chunks: u32,
    chunks_left: u32,
    tx: Vec<TxState>,
    app_end: u32,
    una: u32,
    nxt: u32,
    sacked_out: u32,
    lost_out: u32,
    cwnd: f64,
    ssthresh: f64,
    in_recovery: bool,
    recovery_point: u32,
    srtt: f64,
    rttvar: f64,
    min_rtt: u64,
    backoff: u32,
    rto_gen: u64,
    rto_armed: bool,
    rack_xmit: u64,
    last_send: u64,
    send_pending: bool,
    /// Arrival time of the last ACK at the server (ACKs stay in order despite jitter).
    last_ack_at: u64,
    // Receiver side.
    rcv_nxt: u32,
    ooo: BTreeSet<u32>,
    requests: u32,
    /// In-order segments received since the last ACK (delayed ACKs only).
    unacked: u32,
    /// Generation of the delayed-ACK timer; a fired timer of an older one is stale.
    delack_gen: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    ServerSend(u32),
    AtEnforcer(u32, u32),
    LinkDone,
    AtClient(u32, u32),
    /// flow, cumulative ack, up to 3 SACK blocks (packet numbers), DSACK flag.
    Ack(u32, u32, [(u32, u32); 3], u8, bool),
    ClientRequest(u32),
    RequestAtServer(u32),
    Rto(u32, u64),
    /// flow, timer generation.
    DelayedAck(u32, u64),
}

struct Sim {
    sc: Scenario,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    flows: Vec<Flow>,
    nic_free: u64,
    policer: Option<TokenBucket>,
    rng: ChaCha8Rng,
    link_rate: Rate,
    link_queue: VecDeque<(u32, u32, u32)>,
    link_bytes: u64,
    link_cap: u64,
    link_busy: bool,
    out: Trace,
}

/// Runs a scenario to completion (every chunk delivered, or a 30-minute safety horizon).
pub fn generate(sc: &Scenario) -> Trace {
    let (link_rate, link_cap) = match sc.path {
        Path::DropTail { rate, queue } => (rate, queue),
        _ => (sc.line_rate, u64::MAX),
    };
    let policer = match sc.path {
        Path::Policer { rate, burst } => Some(TokenBucket::new(&TokenBucketConfig::new(rate, burst))),
        _ => None,
    };
    let chunk_pkts = sc.chunk_bytes.div_ceil(sc.mss as u64) as u32;
    let total = sc.flows + sc.cross_flows;
    let flows = (0..total)
        .map(|i| {
            let captured = i < sc.flows;
            let bulk = !captured && sc.cross_bulk;
            let (chunks, chunk_pkts) =
                if bulk { (1, chunk_pkts * sc.chunks * BULK_FACTOR) } else { (sc.chunks, chunk_pkts) };
            let host = if captured && sc.same_client { 2 } else { 2 + i as u8 };
            Flow {
                captured,
                client: IpAddr::V4(Ipv4Addr::new(10, 0, 1, host)),
                cport: 40_000 + i as u16,
                chunk_pkts,
                chunks,
                chunks_left: chunks,
                tx: Vec::new(),
                app_end: 0,
                una: 0,
                nxt: 0,
                sacked_out: 0,
                lost_out: 0,
                cwnd: IW,
                ssthresh: f64::INFINITY,
                in_recovery: false,
                recovery_point: 0,
                srtt: 0.0,
                rttvar: 0.0,
                min_rtt: u64::MAX,
                backoff: 1,
                rto_gen: 0,
                rto_armed: false,
                rack_xmit: 0,
                last_send: 0,
                send_pending: false,
                last_ack_at: 0,
                rcv_nxt: 0,
                ooo: BTreeSet::new(),
                requests: 0,
                unacked: 0,
                delack_gen: 0,
            }
        })
        .collect();
    let mut sim = Sim {
        sc: sc.clone(),
        now: 0,
        seq: 0,
        events: BinaryHeap::new(),
        flows,
        nic_free: 0,
        policer,
        rng: ChaCha8Rng::seed_from_u64(sc.seed),
        link_rate,
        link_queue: VecDeque::new(),
        link_bytes: 0,
        link_cap,
        link_busy: false,
        out: Trace { packets: Vec::new(), drops: 0, data_sent: 0 },
    };
    for f in 0..total {
        let bulk = f >= sc.flows && sc.cross_bulk;
        let lead = if sc.cross_bulk { BULK_LEAD_NS } else { 0 };
        let start = if bulk { (f - sc.flows) as u64 * sc.stagger_ns } else { lead + f as u64 * sc.stagger_ns };
        sim.handshake(f, start);
        sim.at(start + sc.rtt_ns, Ev::ClientRequest(f));
    }
    let horizon = 1_800_000_000_000;
    while let Some(Reverse((t, _, ev))) = sim.events.pop() {
        if t > horizon {
            break;
        }
        sim.now = t;
        sim.handle(ev);
    }
    // The handshakes were recorded ahead of the event loop; everything else is in time order.
    sim.out.packets.sort_by_key(|p| p.ts_ns);
    sim.out
}

impl Sim {
    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, ev)));
    }

    fn half_rtt(&self) -> u64 {
        self.sc.rtt_ns / 2
    }

    fn tcp(&self, f: u32, from_server: bool, t: u64) -> TcpPacket {
        let fl = &self.flows[f as usize];
        let server = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), SERVER_PORT);
        let client = (fl.client, fl.cport);
        let (from, to) = if from_server { (server, client) } else { (client, server) };
        TcpPacket::pure_ack(EPOCH_NS + t, from, to, 65535, HEADER)
    }

    fn server_isn(f: u32) -> u32 {
        0x1000_0000u32.wrapping_mul(f + 1).wrapping_add(0xfff0_0000)
    }

    fn client_isn(f: u32) -> u32 {
        0x2000_0000u32.wrapping_mul(f + 3)
    }

    fn capture(&mut self, f: u32, p: TcpPacket) {
        if self.flows[f as usize].captured {
            self.out.packets.push(p);
        }
    }

    fn handshake(&mut self, f: u32, start: u64) {
        // Captured at the server: SYN arrives, SYN-ACK leaves, the client's ACK arrives one RTT later.
        let mut syn = self.tcp(f, false, start);
        syn.flags = TCP_SYN;
        syn.seq = Self::client_isn(f);
        let mut synack = self.tcp(f, true, start);
        synack.flags = TCP_SYN | TCP_ACK;
        synack.seq = Self::server_isn(f);
        synack.ack = Self::client_isn(f).wrapping_add(1);
        let mut ack = self.tcp(f, false, start + self.sc.rtt_ns);
        ack.seq = Self::client_isn(f).wrapping_add(1);
        ack.ack = Self::server_isn(f).wrapping_add(1);
        for p in [syn, synack, ack] {
            self.capture(f, p);
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::ServerSend(f) => {
                self.flows[f as usize].send_pending = false;
                self.try_send(f);
            }
            Ev::AtEnforcer(f, n) => self.at_enforcer(f, n),
            Ev::LinkDone => self.link_done(),
            Ev::AtClient(f, n) => self.at_client(f, n),
            Ev::DelayedAck(f, gen) => {
                let fl = &self.flows[f as usize];
                if fl.delack_gen == gen && fl.unacked > 0 {
                    self.send_ack(f, fl.rcv_nxt, [(0, 0); 3], 0, false);
                }
            }
            Ev::Ack(f, cum, sack, count, dsack) => self.on_ack(f, cum, &sack[..count as usize], dsack),
            Ev::ClientRequest(f) => {
                let fl = &mut self.flows[f as usize];
                if fl.chunks_left == 0 {
                    return;
                }
                fl.chunks_left -= 1;
                let t = self.now + self.half_rtt();
                self.at(t, Ev::RequestAtServer(f));
            }
            Ev::RequestAtServer(f) => {
                let mut req = self.tcp(f, false, self.now);
                let fl = &mut self.flows[f as usize];
                req.seq = Self::client_isn(f).wrapping_add(1 + fl.requests * REQUEST_LEN);
                req.ack = Self::server_isn(f).wrapping_add(1).wrapping_add(fl.rcv_nxt.wrapping_mul(self.sc.mss));
                req.payload_len = REQUEST_LEN;
                req.ip_len = HEADER + REQUEST_LEN;
                fl.requests += 1;
                // Linux's slow start after idle: back to the initial window after an RTO of silence.
                if fl.una == fl.nxt && self.now.saturating_sub(fl.last_send) > Self::rto_of(fl) {
                    fl.cwnd = fl.cwnd.min(IW);
                }
                fl.app_end += fl.chunk_pkts;
                let new_len = fl.app_end as usize;
                fl.tx.resize(new_len, TxState::default());
                self.capture(f, req);
                self.try_send(f);
            }
            Ev::Rto(f, gen) => self.on_rto(f, gen),
        }
    }

    fn rto_of(fl: &Flow) -> u64 {
        let base = if fl.srtt == 0.0 { 1e9 } else { fl.srtt + 4.0 * fl.rttvar };
        ((base as u64).max(MIN_RTO) * fl.backoff as u64).min(MAX_RTO)
    }

    fn arm_rto(&mut self, f: u32) {
        let fl = &mut self.flows[f as usize];
        fl.rto_gen += 1;
        fl.rto_armed = true;
        let (gen, t) = (fl.rto_gen, self.now + Self::rto_of(fl));
        self.at(t, Ev::Rto(f, gen));
    }

    fn try_send(&mut self, f: u32) {
        if self.now < self.nic_free {
            let fl = &mut self.flows[f as usize];
            if !fl.send_pending {
                fl.send_pending = true;
                let t = self.nic_free;
                self.at(t, Ev::ServerSend(f));
            }
            return;
        }
        let fl = &mut self.flows[f as usize];
        let pipe = fl.nxt - fl.una - fl.sacked_out - fl.lost_out;
        if pipe as f64 >= fl.cwnd.floor().max(1.0) {
            return;
        }
        let n = if fl.lost_out > 0 {
            (fl.una..fl.nxt).find(|&i| fl.tx[i as usize].lost && !fl.tx[i as usize].sacked)
        } else {
            None
        };
        let n = match n {
            Some(n) => {
                let s = &mut fl.tx[n as usize];
                s.lost = false;
                s.retx += 1;
                fl.lost_out -= 1;
                n
            }
            None if fl.nxt < fl.app_end => {
                fl.nxt += 1;
                fl.nxt - 1
            }
            None => return,
        };
        fl.tx[n as usize].sent_ns = self.now;
        fl.last_send = self.now;
        let ip_len = HEADER + self.sc.mss;
        let mut p = self.tcp(f, true, self.now);
        let fl = &self.flows[f as usize];
        p.seq = Self::server_isn(f).wrapping_add(1).wrapping_add(n.wrapping_mul(self.sc.mss));
        p.ack = Self::client_isn(f).wrapping_add(1 + fl.requests * REQUEST_LEN);
        p.payload_len = self.sc.mss;
        p.ip_len = ip_len;
        let armed = fl.rto_armed;
        self.capture(f, p);
        if self.flows[f as usize].captured {
            self.out.data_sent += 1;
        }
        self.nic_free = self.now + self.sc.line_rate.time_to_send(ip_len as u64).0;
        self.at(self.now + NEAR_NS, Ev::AtEnforcer(f, n));
        if !armed {
            self.arm_rto(f);
        }
        let fl = &mut self.flows[f as usize];
        fl.send_pending = true;
        let t = self.nic_free;
        self.at(t, Ev::ServerSend(f));
    }

    fn at_enforcer(&mut self, f: u32, n: u32) {
        let len = HEADER + self.sc.mss;
        let pass = match self.sc.path {
            Path::Policer { .. } => {
                let pkt = Packet { id: 0, len, flow: f as u64, class: 0, aggregate: 0 };
                self.policer.as_mut().expect("policer path").on_arrival(Instant(self.now), &pkt).is_pass()
            }
            Path::RandomLoss { p } => self.rng.gen::<f64>() >= p,
            Path::DropTail { .. } => true,
        };
        if !pass {
            self.drop_data(f);
            return;
        }
        if self.link_bytes + len as u64 > self.link_cap {
            self.drop_data(f);
            return;
        }
        self.link_queue.push_back((f, n, len));
        self.link_bytes += len as u64;
        if !self.link_busy {
            self.start_link();
        }
    }

    fn drop_data(&mut self, f: u32) {
        if self.flows[f as usize].captured {
            self.out.drops += 1;
        }
    }

    fn start_link(&mut self) {
        if let Some(&(_, _, len)) = self.link_queue.front() {
            self.link_busy = true;
            let t = self.now + self.link_rate.time_to_send(len as u64).0;
            self.at(t, Ev::LinkDone);
        } else {
            self.link_busy = false;
        }
    }

    fn link_done(&mut self) {
        if let Some((f, n, len)) = self.link_queue.pop_front() {
            self.link_bytes -= len as u64;
            let t = self.now + self.half_rtt().saturating_sub(NEAR_NS);
            self.at(t, Ev::AtClient(f, n));
        }
        self.start_link();
    }

    fn at_client(&mut self, f: u32, n: u32) {
        let fl = &mut self.flows[f as usize];
        let duplicate = n < fl.rcv_nxt || fl.ooo.contains(&n);
        let out_of_order = n != fl.rcv_nxt || !fl.ooo.is_empty();
        if !duplicate {
            if n == fl.rcv_nxt {
                fl.rcv_nxt += 1;
                while fl.ooo.remove(&fl.rcv_nxt) {
                    fl.rcv_nxt += 1;
                }
            } else {
                fl.ooo.insert(n);
            }
        }
        // SACK blocks: D-SACK first if any, then the block holding this packet, then the highest others.
        let mut blocks = [(0u32, 0u32); 3];
        let mut count = 0usize;
        if duplicate {
            blocks[0] = (n, n + 1);
            count = 1;
        }
        let ranges = sack_ranges(&fl.ooo);
        if let Some(&r) = ranges.iter().find(|r| r.0 <= n && n < r.1) {
            blocks[count] = r;
            count += 1;
        }
        for &r in ranges.iter().rev() {
            if count == 3 {
                break;
            }
            if !blocks[..count].contains(&r) {
                blocks[count] = r;
                count += 1;
            }
        }
        let requested = (fl.chunks - fl.chunks_left) * fl.chunk_pkts;
        let chunk_done = !duplicate && fl.rcv_nxt == requested && fl.ooo.is_empty();
        let (cum, more) = (fl.rcv_nxt, fl.chunks_left > 0);
        fl.unacked += 1;
        // The end of a chunk is acknowledged at once: the next request carries it.
        if !self.sc.delayed_acks || out_of_order || duplicate || chunk_done || fl.unacked >= 2 {
            self.send_ack(f, cum, blocks, count as u8, duplicate);
        } else {
            fl.delack_gen += 1;
            let (t, gen) = (self.now + DELACK_NS, fl.delack_gen);
            self.at(t, Ev::DelayedAck(f, gen));
        }
        if chunk_done && more {
            // Think time varies by ±20 % so that seeds give different traces.
            let t = self.now + (self.sc.pause_ns as f64 * self.rng.gen_range(0.8..1.2)) as u64;
            self.at(t, Ev::ClientRequest(f));
        }
    }

    fn send_ack(&mut self, f: u32, cum: u32, blocks: [(u32, u32); 3], count: u8, dsack: bool) {
        let jitter = self.rng.gen_range(0..=self.sc.ack_jitter_ns);
        let fl = &mut self.flows[f as usize];
        fl.unacked = 0;
        fl.delack_gen += 1;
        let t = (self.now + self.sc.rtt_ns / 2 + jitter).max(fl.last_ack_at);
        fl.last_ack_at = t;
        self.at(t, Ev::Ack(f, cum, blocks, count, dsack));
    }

    fn on_ack(&mut self, f: u32, cum: u32, sack: &[(u32, u32)], dsack: bool) {
        let mss = self.sc.mss;
        let mut p = self.tcp(f, false, self.now);
        {
            let fl = &self.flows[f as usize];
            p.seq = Self::client_isn(f).wrapping_add(1 + fl.requests * REQUEST_LEN);
            let base = Self::server_isn(f).wrapping_add(1);
            p.ack = base.wrapping_add(cum.wrapping_mul(mss));
            for (i, &(l, r)) in sack.iter().enumerate() {
                p.sack[i] = (base.wrapping_add(l.wrapping_mul(mss)), base.wrapping_add(r.wrapping_mul(mss)));
            }
            p.sack_count = sack.len() as u8;
            p.ip_len = crate::writer::header_len(false, p.sack_count);
        }
        self.capture(f, p);
        let now = self.now;
        let fl = &mut self.flows[f as usize];
        let mut rack = 0u64;
        let mut newly_acked = 0u32;
        let mut rtt_sample = None;
        while fl.una < cum.min(fl.nxt) {
            let s = fl.tx[fl.una as usize];
            if s.sacked {
                fl.sacked_out -= 1;
            } else {
                newly_acked += 1;
            }
            if s.lost {
                fl.lost_out -= 1;
            }
            rack = rack.max(s.sent_ns);
            if s.retx == 0 {
                rtt_sample = Some(now.saturating_sub(s.sent_ns));
            }
            fl.una += 1;
        }
        for &(l, r) in sack.iter().skip(usize::from(dsack)) {
            for i in l.max(fl.una)..r.min(fl.nxt) {
                let s = &mut fl.tx[i as usize];
                if !s.sacked {
                    s.sacked = true;
                    fl.sacked_out += 1;
                    newly_acked += 1;
                    if s.lost {
                        s.lost = false;
                        fl.lost_out -= 1;
                    }
                    rack = rack.max(s.sent_ns);
                }
            }
        }
        if let Some(r) = rtt_sample {
            let r = r as f64;
            if fl.srtt == 0.0 {
                fl.srtt = r;
                fl.rttvar = r / 2.0;
            } else {
                fl.rttvar = 0.75 * fl.rttvar + 0.25 * (fl.srtt - r).abs();
                fl.srtt = 0.875 * fl.srtt + 0.125 * r;
            }
            fl.min_rtt = fl.min_rtt.min(r as u64);
            fl.backoff = 1;
        }
        fl.rack_xmit = fl.rack_xmit.max(rack);
        // RACK: anything sent before a delivered packet (by more than the reordering window,
        // a quarter of min RTT outside recovery) is lost.
        let reo = if fl.in_recovery { 0 } else { fl.min_rtt.min(1_000_000_000) / 4 };
        let mut newly_lost = false;
        for i in fl.una..fl.nxt {
            let s = &mut fl.tx[i as usize];
            if !s.sacked && !s.lost && s.sent_ns + reo < fl.rack_xmit {
                s.lost = true;
                fl.lost_out += 1;
                newly_lost = true;
            }
        }
        if fl.in_recovery && fl.una >= fl.recovery_point {
            fl.in_recovery = false;
        }
        if newly_lost && !fl.in_recovery {
            fl.ssthresh = (fl.cwnd * 0.5).max(2.0);
            fl.cwnd = fl.ssthresh;
            fl.in_recovery = true;
            fl.recovery_point = fl.nxt;
        } else if !fl.in_recovery && newly_acked > 0 {
            if fl.cwnd < fl.ssthresh {
                fl.cwnd += newly_acked as f64;
            } else {
                fl.cwnd += newly_acked as f64 / fl.cwnd;
            }
        }
        let progressed = rtt_sample.is_some() || newly_acked > 0;
        if fl.una == fl.nxt {
            fl.rto_armed = false;
            fl.rto_gen += 1;
        } else if progressed {
            self.arm_rto(f);
        }
        self.try_send(f);
    }

    fn on_rto(&mut self, f: u32, gen: u64) {
        let fl = &mut self.flows[f as usize];
        if gen != fl.rto_gen || fl.una == fl.nxt {
            return;
        }
        for i in fl.una..fl.nxt {
            let s = &mut fl.tx[i as usize];
            if !s.sacked && !s.lost {
                s.lost = true;
                fl.lost_out += 1;
            }
        }
        fl.ssthresh = (fl.cwnd * 0.5).max(2.0);
        fl.cwnd = 1.0;
        fl.in_recovery = false;
        fl.backoff = (fl.backoff * 2).min(64);
        fl.rto_armed = false;
        self.try_send(f);
        if !self.flows[f as usize].rto_armed {
            self.arm_rto(f);
        }
    }
}

fn sack_ranges(ooo: &BTreeSet<u32>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &n in ooo {
        match out.last_mut() {
            Some(r) if r.1 == n => r.1 = n + 1,
            _ => out.push((n, n + 1)),
        }
    }
    out
}

impl Trace {
    /// Writes the trace as a classic pcap (Ethernet, snaplen 96, nanosecond timestamps).
    pub fn write_pcap(&self, out: impl std::io::Write) -> std::io::Result<()> {
        let mut w = crate::writer::PcapWriter::new(out, crate::writer::Link::Ethernet, 96)?;
        for p in &self.packets {
            w.write(p)?;
        }
        Ok(())
    }
}
