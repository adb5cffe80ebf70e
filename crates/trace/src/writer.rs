//! Writing traces: classic pcap (nanosecond timestamps) and a minimal pcapng, with frames built
//! from a [`TcpPacket`]. Used by the synthetic trace generator, the tests and the lab scripts;
//! real traces come from tcpdump.

use crate::decode::{linktype, TcpPacket};
use std::io::{self, Write};
use std::net::IpAddr;

/// How the frame's link layer is encapsulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Ethernet,
    /// Ethernet with one 802.1Q tag.
    Vlan,
    LinuxSll,
    LinuxSll2,
    RawIp,
}

impl Link {
    pub fn linktype(self) -> i32 {
        match self {
            Link::Ethernet | Link::Vlan => linktype::ETHERNET,
            Link::LinuxSll => linktype::LINUX_SLL,
            Link::LinuxSll2 => linktype::LINUX_SLL2,
            Link::RawIp => linktype::RAW,
        }
    }
}

/// IP plus TCP header bytes of a packet this writer builds: a timestamp option always (as Linux
/// sends), and a SACK option with up to three blocks. Callers set `ip_len` to this + payload.
pub fn header_len(ipv6: bool, sack_count: u8) -> u32 {
    let ip = if ipv6 { 40 } else { 20 };
    let sack = if sack_count > 0 { 4 + 8 * sack_count.min(3) as u32 } else { 0 };
    ip + 20 + 12 + sack
}

/// Builds the frame for `pkt` (headers only; the payload is zeros), returning (frame, wire length).
pub fn build_frame(link: Link, pkt: &TcpPacket) -> (Vec<u8>, u32) {
    let mut f = Vec::with_capacity(128);
    let ethertype: u16 = if pkt.src.is_ipv4() { 0x0800 } else { 0x86dd };
    match link {
        Link::Ethernet | Link::Vlan => {
            f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
            if link == Link::Vlan {
                f.extend_from_slice(&0x8100u16.to_be_bytes());
                f.extend_from_slice(&7u16.to_be_bytes());
            }
            f.extend_from_slice(&ethertype.to_be_bytes());
        }
        Link::LinuxSll => {
            f.extend_from_slice(&[0, 4, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
            f.extend_from_slice(&ethertype.to_be_bytes());
        }
        Link::LinuxSll2 => {
            f.extend_from_slice(&ethertype.to_be_bytes());
            f.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 1, 4, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
        }
        Link::RawIp => {}
    }
    let l2 = f.len() as u32;
    let blocks = &pkt.sack_blocks()[..pkt.sack_count.min(3) as usize];
    let tcp_hdr = (header_len(pkt.src.is_ipv6(), pkt.sack_count) - if pkt.src.is_ipv6() { 40 } else { 20 }) as usize;
    match (pkt.src, pkt.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[0x45, 0]);
            f.extend_from_slice(&(pkt.ip_len as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&((pkt.ip_len - 40) as u16).to_be_bytes());
            f.extend_from_slice(&[6, 64]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        _ => panic!("build_frame: mixed address families"),
    }
    f.extend_from_slice(&pkt.sport.to_be_bytes());
    f.extend_from_slice(&pkt.dport.to_be_bytes());
    f.extend_from_slice(&pkt.seq.to_be_bytes());
    f.extend_from_slice(&pkt.ack.to_be_bytes());
    f.push(((tcp_hdr / 4) as u8) << 4);
    f.push(pkt.flags);
    f.extend_from_slice(&pkt.window.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    // NOP, NOP, timestamps (value: the capture time in ms), then NOP, NOP, SACK: Linux's layout.
    f.extend_from_slice(&[1, 1, 8, 10]);
    f.extend_from_slice(&((pkt.ts_ns / 1_000_000) as u32).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    if !blocks.is_empty() {
        f.extend_from_slice(&[1, 1, 5, 2 + 8 * blocks.len() as u8]);
        for &(l, r) in blocks {
            f.extend_from_slice(&l.to_be_bytes());
            f.extend_from_slice(&r.to_be_bytes());
        }
    }
    let wire = l2 + pkt.ip_len;
    (f, wire)
}

/// Classic pcap with nanosecond timestamps (magic 0xa1b23c4d), truncating frames to `snaplen`.
pub struct PcapWriter<W: Write> {
    out: W,
    link: Link,
    snaplen: u32,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W, link: Link, snaplen: u32) -> io::Result<Self> {
        out.write_all(&0xa1b2_3c4du32.to_le_bytes())?;
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&[0; 8])?;
        out.write_all(&snaplen.to_le_bytes())?;
        out.write_all(&(link.linktype() as u32).to_le_bytes())?;
        Ok(PcapWriter { out, link, snaplen })
    }

    pub fn write(&mut self, pkt: &TcpPacket) -> io::Result<()> {
        let (frame, wire) = build_frame(self.link, pkt);
        let cap = (frame.len() as u32).min(self.snaplen).min(wire);
        self.out.write_all(&((pkt.ts_ns / 1_000_000_000) as u32).to_le_bytes())?;
        self.out.write_all(&((pkt.ts_ns % 1_000_000_000) as u32).to_le_bytes())?;
        self.out.write_all(&cap.to_le_bytes())?;
        self.out.write_all(&wire.to_le_bytes())?;
        self.out.write_all(&frame[..cap as usize])
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// A minimal pcapng writer (one section, one interface with nanosecond resolution, enhanced
/// packet blocks), enough to test the pcapng path of the reader.
pub struct PcapNgWriter<W: Write> {
    out: W,
    link: Link,
    snaplen: u32,
}

impl<W: Write> PcapNgWriter<W> {
    pub fn new(mut out: W, link: Link, snaplen: u32) -> io::Result<Self> {
        // Section header block: type, length, byte-order magic, version 1.0, unknown section length.
        let mut shb = Vec::new();
        shb.extend_from_slice(&0x0a0d_0d0au32.to_le_bytes());
        shb.extend_from_slice(&28u32.to_le_bytes());
        shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        shb.extend_from_slice(&28u32.to_le_bytes());
        out.write_all(&shb)?;
        // Interface description block with if_tsresol = 9 (nanoseconds).
        let mut idb = Vec::new();
        idb.extend_from_slice(&1u32.to_le_bytes());
        idb.extend_from_slice(&32u32.to_le_bytes());
        idb.extend_from_slice(&(link.linktype() as u16).to_le_bytes());
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&snaplen.to_le_bytes());
        idb.extend_from_slice(&9u16.to_le_bytes());
        idb.extend_from_slice(&1u16.to_le_bytes());
        idb.extend_from_slice(&[9, 0, 0, 0]);
        idb.extend_from_slice(&0u32.to_le_bytes()); // opt_endofopt
        idb.extend_from_slice(&32u32.to_le_bytes());
        out.write_all(&idb)?;
        Ok(PcapNgWriter { out, link, snaplen })
    }

    pub fn write(&mut self, pkt: &TcpPacket) -> io::Result<()> {
        let (frame, wire) = build_frame(self.link, pkt);
        let cap = (frame.len() as u32).min(self.snaplen).min(wire) as usize;
        let padded = cap.div_ceil(4) * 4;
        let block_len = (32 + padded) as u32;
        self.out.write_all(&6u32.to_le_bytes())?;
        self.out.write_all(&block_len.to_le_bytes())?;
        self.out.write_all(&0u32.to_le_bytes())?;
        self.out.write_all(&((pkt.ts_ns >> 32) as u32).to_le_bytes())?;
        self.out.write_all(&(pkt.ts_ns as u32).to_le_bytes())?;
        self.out.write_all(&(cap as u32).to_le_bytes())?;
        self.out.write_all(&wire.to_le_bytes())?;
        self.out.write_all(&frame[..cap])?;
        self.out.write_all(&vec![0u8; padded - cap])?;
        self.out.write_all(&block_len.to_le_bytes())
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}
