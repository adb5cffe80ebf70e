//! The simulator's captures: `[testbed] pcap` / `pcap_receiver` write sender.pcap and
//! receiver.pcap at the points where the testbed's taps see Linux's packets (docs/testbed.md,
//! "Captures"), so one analysis reads both systems' runs of one file.

use anyhow::Context;
use ratekit_lab::scenario::Resolved;
use ratekit_sim::packet::{Kind, Pkt, HEADER, MSS};
use ratekit_sim::TapPoint;
use ratekit_trace::decode::{TcpPacket, TCP_ACK, TCP_SYN};
use ratekit_trace::writer::{header_len, Link, PcapWriter};
use std::fs::File;
use std::io::BufWriter;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

type Writer = PcapWriter<BufWriter<File>>;

/// The open capture files of one run, and the first write error (the run goes on; the error is
/// reported when it ends, with the results kept).
pub struct Captures {
    sender: Option<Writer>,
    receiver: Option<Writer>,
    error: Option<std::io::Error>,
}

/// Every flow's sender has an address of its own (the testbed's share one and differ by port);
/// the receiver's address and port are the testbed's.
fn sender_addr(flow: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 0)) + flow))
}
const RECEIVER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 199, 0, 10));
const SENDER_PORT: u16 = 40000;
const RECEIVER_PORT: u16 = 5001;

impl Captures {
    /// Opens the files the scenario's `[testbed]` table asks for, or `None` if it asks for none.
    pub fn open(r: &Resolved, dir: &Path) -> anyhow::Result<Option<Captures>> {
        let t = &r.scenario.testbed;
        if !t.pcap && !t.pcap_receiver {
            return Ok(None);
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let open = |wanted: bool, name: &str| -> anyhow::Result<Option<Writer>> {
            if !wanted {
                return Ok(None);
            }
            let path = dir.join(name);
            let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
            Ok(Some(PcapWriter::new(BufWriter::new(file), Link::Ethernet, t.pcap_snaplen)?))
        };
        Ok(Some(Captures { sender: open(t.pcap, "sender.pcap")?, receiver: open(t.pcap_receiver, "receiver.pcap")?, error: None }))
    }

    /// Records `p` at `point` at time `now_ns`. UDP datagrams are left out (the files hold TCP).
    pub fn record(&mut self, point: TapPoint, now_ns: u64, p: &Pkt) {
        let writer = match point {
            TapPoint::Sender => self.sender.as_mut(),
            TapPoint::Receiver => self.receiver.as_mut(),
        };
        let (Some(w), Some(pkt)) = (writer, tcp_packet(now_ns, p)) else { return };
        if let Err(e) = w.write(&pkt) {
            self.error.get_or_insert(e);
        }
    }

    /// Flushes the files; the first error of the run, if any.
    pub fn finish(self) -> std::io::Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        for w in [self.sender, self.receiver].into_iter().flatten() {
            std::io::Write::flush(&mut w.into_inner())?;
        }
        Ok(())
    }
}

/// The packet as Linux would have put it on the wire: segment numbers become byte sequence
/// numbers after an initial sequence number of 0, SACK runs become byte blocks. The model's
/// ACKs carry only the runs news since the previous ACK (`packet::Sacks`), not Linux's
/// repeated blocks.
fn tcp_packet(now_ns: u64, p: &Pkt) -> Option<TcpPacket> {
    let bytes = |segment: u32| segment.wrapping_mul(MSS).wrapping_add(1);
    let (sender, receiver) = ((sender_addr(p.flow), SENDER_PORT), (RECEIVER, RECEIVER_PORT));
    let (from, to) = if p.kind.is_reverse() { (receiver, sender) } else { (sender, receiver) };
    let mut pkt = TcpPacket::pure_ack(now_ns, from, to, u16::MAX, p.len);
    match p.kind {
        Kind::Udp => return None,
        // The frame carries the timestamp option only, so the SYN's other options' 8 bytes
        // would read as payload.
        Kind::Syn => (pkt.flags, pkt.ip_len) = (TCP_SYN, HEADER),
        Kind::SynAck => (pkt.flags, pkt.ack, pkt.ip_len) = (TCP_SYN | TCP_ACK, 1, HEADER),
        Kind::HandshakeAck => (pkt.seq, pkt.ack) = (1, 1),
        Kind::Data => {
            (pkt.seq, pkt.ack) = (bytes(p.seq), 1);
            pkt.payload_len = p.len.saturating_sub(HEADER);
        }
        Kind::Ack => {
            (pkt.seq, pkt.ack) = (1, bytes(p.ack));
            for run in p.sack.runs() {
                pkt.sack[pkt.sack_count as usize] = (bytes(run.start), bytes(run.end));
                pkt.sack_count += 1;
            }
            pkt.ip_len = header_len(false, pkt.sack_count);
        }
    }
    Some(pkt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_and_its_sack_carry_byte_numbers_and_each_flow_its_own_address() {
        let data = tcp_packet(5, &Pkt { flow: 3, kind: Kind::Data, seq: 2, len: HEADER + MSS, ..Pkt::default() }).unwrap();
        assert_eq!((data.seq, data.payload_len, data.ip_len, data.ts_ns), (2 * MSS + 1, MSS, HEADER + MSS, 5));
        assert_eq!((data.src, data.dst), (IpAddr::V4(Ipv4Addr::new(10, 128, 0, 3)), RECEIVER));
        let mut sack = ratekit_sim::packet::Sacks::default();
        sack.push(5);
        assert!(sack.extend(6));
        let ack = tcp_packet(9, &Pkt { flow: 3, kind: Kind::Ack, ack: 2, sack, len: HEADER, ..Pkt::default() }).unwrap();
        assert_eq!((ack.ack, ack.sack_blocks(), ack.src), (2 * MSS + 1, &[(5 * MSS + 1, 7 * MSS + 1)][..], RECEIVER));
        assert_eq!(ack.ip_len, header_len(false, 1));
        assert!(tcp_packet(0, &Pkt { kind: Kind::Udp, ..Pkt::default() }).is_none());
    }
}
