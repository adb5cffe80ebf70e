//! Link, IP and TCP header decoding for captured frames (snaplen-truncated frames included).
//!
//! Lengths come from the IP header, never from the captured length, so a trace captured with
//! snaplen 96 still yields each segment's true payload size. Every read is bounds-checked: a
//! malformed frame is skipped (and counted by the reader), never a panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Link-layer header types ratekit reads (tcpdump's LINKTYPE_* numbers).
pub mod linktype {
    pub const NULL: i32 = 0;
    pub const ETHERNET: i32 = 1;
    pub const RAW: i32 = 101;
    pub const LOOP: i32 = 108;
    pub const LINUX_SLL: i32 = 113;
    pub const IPV4: i32 = 228;
    pub const IPV6: i32 = 229;
    pub const LINUX_SLL2: i32 = 276;
}

pub fn is_supported_linktype(lt: i32) -> bool {
    use linktype::*;
    matches!(lt, NULL | ETHERNET | RAW | LOOP | LINUX_SLL | IPV4 | IPV6 | LINUX_SLL2)
}

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_ACK: u8 = 0x10;

/// The most SACK blocks a TCP header can carry (40 option bytes / 8 per block, minus kind/len).
pub const MAX_SACK_BLOCKS: usize = 4;

/// One TCP segment as seen on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket {
    /// Capture time in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// IP packet length (IPv4 total length, or IPv6 payload length + 40): what a policer counts.
    pub ip_len: u32,
    /// TCP payload bytes, from the IP lengths (not from what was captured).
    pub payload_len: u32,
    pub sack: [(u32, u32); MAX_SACK_BLOCKS],
    pub sack_count: u8,
}

impl TcpPacket {
    /// A pure ACK from `from` to `to` (address, port) at `ts_ns`: sequence and acknowledgement
    /// numbers 0, no payload, no SACK. Writers of synthetic traces start from it.
    pub fn pure_ack(ts_ns: u64, from: (IpAddr, u16), to: (IpAddr, u16), window: u16, ip_len: u32) -> TcpPacket {
        TcpPacket {
            ts_ns,
            src: from.0,
            dst: to.0,
            sport: from.1,
            dport: to.1,
            seq: 0,
            ack: 0,
            flags: TCP_ACK,
            window,
            ip_len,
            payload_len: 0,
            sack: [(0, 0); MAX_SACK_BLOCKS],
            sack_count: 0,
        }
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
    pub fn sack_blocks(&self) -> &[(u32, u32)] {
        &self.sack[..self.sack_count as usize]
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const ETHERTYPE_VLAN_OLD_QINQ: u16 = 0x9100;

/// Decodes one captured frame. `orig_len` is the frame's length on the wire, used only when an
/// IPv4 header carries total length 0 (TSO super-frames captured before segmentation).
/// Returns `None` for anything that is not a well-formed IPv4/IPv6 TCP segment.
pub fn decode_frame(linktype: i32, frame: &[u8], orig_len: u32, ts_ns: u64) -> Option<TcpPacket> {
    let (ip_at, ethertype) = match linktype {
        linktype::ETHERNET => {
            let mut at = 12;
            let mut ethertype = be16(frame, at)?;
            // Stacked 802.1Q / 802.1ad tags: each adds four bytes before the real ethertype.
            while matches!(ethertype, ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_VLAN_OLD_QINQ) {
                at += 4;
                ethertype = be16(frame, at)?;
            }
            (at + 2, Some(ethertype))
        }
        linktype::LINUX_SLL => (16, Some(be16(frame, 14)?)),
        linktype::LINUX_SLL2 => (20, Some(be16(frame, 0)?)),
        linktype::RAW | linktype::IPV4 | linktype::IPV6 => (0, None),
        // BSD loopback: a 4-byte address family in host (NULL) or network (LOOP) order; the IP
        // version nibble tells us the rest.
        linktype::NULL | linktype::LOOP => (4, None),
        _ => return None,
    };
    let ip = frame.get(ip_at..)?;
    let l2_len = ip_at as u32;
    match ethertype {
        Some(ETHERTYPE_IPV4) => decode_ipv4(ip, orig_len.saturating_sub(l2_len), ts_ns),
        Some(ETHERTYPE_IPV6) => decode_ipv6(ip, ts_ns),
        Some(_) => None,
        None => match ip.first()? >> 4 {
            4 => decode_ipv4(ip, orig_len.saturating_sub(l2_len), ts_ns),
            6 => decode_ipv6(ip, ts_ns),
            _ => None,
        },
    }
}

fn decode_ipv4(ip: &[u8], wire_len: u32, ts_ns: u64) -> Option<TcpPacket> {
    let first = *ip.first()?;
    if first >> 4 != 4 {
        return None;
    }
    let ihl = ((first & 0x0f) as usize) * 4;
    if ihl < 20 {
        return None;
    }
    let mut total = be16(ip, 2)? as u32;
    if total == 0 {
        total = wire_len;
    }
    let frag = be16(ip, 6)?;
    if frag & 0x1fff != 0 || *ip.get(9)? != 6 || total < ihl as u32 {
        return None; // a non-first fragment carries no TCP header; not TCP; or a lying header
    }
    let src = IpAddr::V4(Ipv4Addr::from(be32(ip, 12)?));
    let dst = IpAddr::V4(Ipv4Addr::from(be32(ip, 16)?));
    decode_tcp(ip.get(ihl..)?, src, dst, total, total - ihl as u32, ts_ns)
}

fn decode_ipv6(ip: &[u8], ts_ns: u64) -> Option<TcpPacket> {
    if ip.first()? >> 4 != 6 {
        return None;
    }
    let payload = be16(ip, 4)? as u32;
    let src = IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(ip.get(8..24)?).ok()?));
    let dst = IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(ip.get(24..40)?).ok()?));
    let mut next = *ip.get(6)?;
    let mut at = 40usize;
    // Walk the extension headers that may precede TCP; give up on anything else.
    for _ in 0..8 {
        match next {
            6 => {
                let l4 = (payload + 40).checked_sub(at as u32)?;
                return decode_tcp(ip.get(at..)?, src, dst, payload + 40, l4, ts_ns);
            }
            0 | 43 | 60 => {
                next = *ip.get(at)?;
                at += (*ip.get(at + 1)? as usize + 1) * 8;
            }
            44 => {
                if be16(ip, at + 2)? & 0xfff8 != 0 {
                    return None; // not the first fragment
                }
                next = *ip.get(at)?;
                at += 8;
            }
            _ => return None,
        }
    }
    None
}

fn decode_tcp(tcp: &[u8], src: IpAddr, dst: IpAddr, ip_len: u32, l4_len: u32, ts_ns: u64) -> Option<TcpPacket> {
    let data_off = ((*tcp.get(12)? >> 4) as usize) * 4;
    if data_off < 20 || (data_off as u32) > l4_len {
        return None;
    }
    let mut pkt = TcpPacket {
        ts_ns,
        src,
        dst,
        sport: be16(tcp, 0)?,
        dport: be16(tcp, 2)?,
        seq: be32(tcp, 4)?,
        ack: be32(tcp, 8)?,
        flags: *tcp.get(13)?,
        window: be16(tcp, 14)?,
        ip_len,
        payload_len: l4_len - data_off as u32,
        sack: [(0, 0); MAX_SACK_BLOCKS],
        sack_count: 0,
    };
    // Options may be cut off by the snaplen; read what was captured.
    let options = tcp.get(20..data_off.min(tcp.len())).unwrap_or(&[]);
    parse_sack(options, &mut pkt);
    Some(pkt)
}

fn parse_sack(mut opts: &[u8], pkt: &mut TcpPacket) {
    while let Some(&kind) = opts.first() {
        match kind {
            0 => return,
            1 => opts = &opts[1..],
            _ => {
                let Some(&len) = opts.get(1) else { return };
                let len = len as usize;
                if len < 2 || len > opts.len() {
                    return;
                }
                if kind == 5 {
                    for block in opts[2..len].chunks_exact(8) {
                        if (pkt.sack_count as usize) < MAX_SACK_BLOCKS {
                            let l = u32::from_be_bytes([block[0], block[1], block[2], block[3]]);
                            let r = u32::from_be_bytes([block[4], block[5], block[6], block[7]]);
                            pkt.sack[pkt.sack_count as usize] = (l, r);
                            pkt.sack_count += 1;
                        }
                    }
                }
                opts = &opts[len..];
            }
        }
    }
}
