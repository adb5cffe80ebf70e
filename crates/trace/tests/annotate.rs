//! Per-packet annotation: losses from later retransmissions, D-SACK, Karn's rule, segments.

use ratekit_core::Rate;
use ratekit_trace::decode::{TcpPacket, TCP_ACK, TCP_SYN};
use ratekit_trace::flow::{Direction, Segment, Tracker};
use ratekit_trace::synth::{generate, Path, Scenario};

const MSS: u32 = 1000;
const ISN: u32 = 0xffff_fc00; // wraps after the first packet

struct Script {
    t: u64,
    pkts: Vec<TcpPacket>,
}

impl Script {
    fn base(&self, from_server: bool) -> TcpPacket {
        let s = ("192.0.2.1".parse().unwrap(), 80);
        let c = ("198.51.100.7".parse().unwrap(), 5555);
        let (from, to) = if from_server { (s, c) } else { (c, s) };
        TcpPacket::pure_ack(self.t, from, to, 100, 40)
    }
    fn at(&mut self, ms: u64) -> &mut Self {
        self.t = ms * 1_000_000;
        self
    }
    fn handshake(&mut self) -> &mut Self {
        let mut syn = self.base(false);
        syn.flags = TCP_SYN;
        syn.seq = 5;
        let mut synack = self.base(true);
        synack.flags = TCP_SYN | TCP_ACK;
        synack.seq = ISN.wrapping_sub(1);
        self.pkts.extend([syn, synack]);
        self
    }
    /// Server data packet number `n` (0-based).
    fn data(&mut self, n: u32) -> &mut Self {
        let mut p = self.base(true);
        p.seq = ISN.wrapping_add(n * MSS);
        p.payload_len = MSS;
        p.ip_len = 40 + MSS;
        self.pkts.push(p);
        self
    }
    /// Client ACK of packets below `cum`, with SACK blocks in packet numbers.
    fn ack(&mut self, cum: u32, sack: &[(u32, u32)]) -> &mut Self {
        let mut p = self.base(false);
        p.seq = 6;
        p.ack = ISN.wrapping_add(cum * MSS);
        for (i, &(l, r)) in sack.iter().enumerate() {
            p.sack[i] = (ISN.wrapping_add(l * MSS), ISN.wrapping_add(r * MSS));
        }
        p.sack_count = sack.len() as u8;
        self.pkts.push(p);
        self
    }
    fn request(&mut self, k: u32) -> &mut Self {
        let mut p = self.base(false);
        p.seq = 6 + k * 100;
        p.payload_len = 100;
        p.ip_len = 140;
        self.pkts.push(p);
        self
    }
    fn segments(&self) -> Vec<Segment> {
        let mut out = Vec::new();
        let mut tr = Tracker::new();
        for p in &self.pkts {
            tr.push(p, &mut |s| out.push(s));
        }
        tr.finish(&mut |s| out.push(s));
        out.retain(|s| s.direction == Direction::ServerToClient);
        out
    }
}

fn script() -> Script {
    Script { t: 0, pkts: Vec::new() }
}

#[test]
fn a_later_retransmission_marks_the_original_lost() {
    let mut s = script();
    s.handshake().at(1).data(0).data(1).data(2).data(3);
    s.at(50).ack(1, &[]).ack(1, &[(2, 3)]).ack(1, &[(2, 4)]);
    s.at(60).data(1); // fast retransmit of packet 1
    s.at(110).ack(4, &[]);
    let segs = s.segments();
    assert_eq!(segs.len(), 1);
    let p = &segs[0].packets;
    assert_eq!(p.len(), 5);
    let lost: Vec<bool> = p.iter().map(|x| x.lost()).collect();
    assert_eq!(lost, [false, true, false, false, false]);
    assert!(p[4].retransmission() && !p[1].retransmission());
    // Sequence numbers are unwrapped across the 2^32 boundary.
    assert_eq!(p[3].seq, 3 * MSS as u64);
}

#[test]
fn dsack_shows_a_spurious_retransmission() {
    let mut s = script();
    s.handshake().at(1).data(0).data(1).data(2);
    s.at(300).data(0); // a timeout retransmission, but packet 0 had arrived
    s.at(320).ack(3, &[]);
    s.at(360).ack(3, &[(0, 1)]); // D-SACK: the receiver got packet 0 twice
    let segs = s.segments();
    let p = &segs[0].packets;
    assert!(!p[0].lost(), "D-SACK must clear the loss");
    assert!(p[3].retransmission() && p[3].flags & ratekit_trace::flow::SPURIOUS != 0);
    // Without the D-SACK the original counts as lost.
    let mut s = script();
    s.handshake().at(1).data(0).data(1).data(2);
    s.at(300).data(0);
    s.at(320).ack(3, &[]);
    assert!(s.segments()[0].packets[0].lost());
}

#[test]
fn karn_rule_skips_ambiguous_rtt_samples() {
    let mut s = script();
    s.handshake().at(0).data(0).data(1).data(2).data(3);
    s.at(100).ack(1, &[]); // clean: 100 ms
    s.at(101).ack(1, &[(2, 3)]); // packet 2 arrives above the hole: its SACK measures 101 ms
    s.at(102).ack(1, &[(2, 4)]);
    s.at(120).data(1);
    s.at(220).ack(4, &[]); // closes the hole: would measure 220 ms for packet 3 (and 100 for the repair)
    s.at(221).ack(4, &[(2, 4)]); // a repeated report gives no second sample
    let segs = s.segments();
    let rtts: Vec<(u64, u64)> = segs[0].rtts.iter().map(|r| (r.sent_ns / 1_000_000, r.rtt_ns / 1_000_000)).collect();
    assert_eq!(rtts, [(0, 100), (0, 101), (0, 102)]);
}

#[test]
fn requests_cut_segments() {
    let mut s = script();
    s.handshake().at(1).request(0).at(2).data(0).data(1).at(50).ack(2, &[]);
    s.at(1000).request(1).at(1001).data(2).data(3).data(4).at(1050).ack(5, &[]);
    let segs = s.segments();
    assert_eq!(segs.len(), 2);
    assert_eq!((segs[0].index, segs[0].packets.len()), (0, 2));
    assert_eq!((segs[1].index, segs[1].packets.len()), (1, 3));
    assert_eq!(segs[1].acks.iter().map(|a| a.bytes).sum::<u64>(), 3 * MSS as u64);
}

#[test]
fn annotated_losses_match_what_the_path_dropped() {
    for path in [
        Path::Policer { rate: Rate::from_mbps(1.5), burst: 100_000 },
        Path::DropTail { rate: Rate::from_mbps(3.0), queue: 32_000 },
        Path::RandomLoss { p: 0.02 },
    ] {
        let mut sc = Scenario::new(path, 11);
        sc.chunks = 2;
        let trace = generate(&sc);
        let mut bytes = Vec::new();
        trace.write_pcap(&mut bytes).unwrap();
        let mut segs = Vec::new();
        let mut tr = Tracker::new();
        let outcome = ratekit_trace::read_tcp(&bytes[..], |p| tr.push(p, &mut |s| segs.push(s)));
        assert!(outcome.error.is_none());
        tr.finish(&mut |s| segs.push(s));
        segs.retain(|s| s.direction == Direction::ServerToClient);
        let lost: usize = segs.iter().flat_map(|s| &s.packets).filter(|p| p.lost()).count();
        let data: usize = segs.iter().map(|s| s.packets.len()).sum();
        assert!(trace.drops > 15, "{path:?}: the scenario must lose packets");
        assert_eq!(lost as u64, trace.drops, "{path:?}");
        assert_eq!(data as u64, trace.data_sent, "{path:?}");
        assert_eq!(segs.len(), 2, "{path:?}: one segment per chunk");
    }
}

#[test]
fn a_capture_record_written_out_of_order_is_an_original_not_a_retransmission() {
    // Real capture points write a record up to ~0.5 ms before records captured earlier: here
    // packet 1 is written before packet 0, with its (later) capture time. Packet 0 is then lost
    // downstream and repaired; that repair must mark packet 0's transmission lost.
    let mut s = script();
    s.handshake();
    s.t = 1_300_000;
    s.data(1);
    s.t = 1_000_000;
    s.data(0);
    s.at(2).data(2).data(3);
    s.at(50).ack(0, &[(1, 2)]).ack(0, &[(1, 3)]).ack(0, &[(1, 4)]);
    s.at(60).data(0); // fast retransmit of packet 0
    s.at(110).ack(4, &[]);
    let p = &s.segments()[0].packets;
    let flags: Vec<(bool, bool)> = p.iter().map(|x| (x.retransmission(), x.lost())).collect();
    // records: 1, 0, 2, 3, 0 (repair)
    assert_eq!(flags, [(false, false), (false, true), (false, false), (false, false), (true, false)]);
}
