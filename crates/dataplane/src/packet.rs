//! Ethernet frames to ratekit-core `Packet`s, exactly as `rk_parse` in `bpf/common.h` does it, so
//! the userspace middlebox, the conformance tests and the BPF programs agree on every packet's
//! length, flow key, class and aggregate.

use crate::maps::{AggKey, Settings};
use ratekit_core::packet::mix64;
use ratekit_core::Packet;
use std::net::IpAddr;

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;

/// `rk_flow_hash`: h = mix64(h ^ w) over the two halves of each 16-byte (IPv4-mapped) address,
/// native-endian, then over (sport << 24 | dport << 8 | proto).
pub fn flow_hash(src: &[u8; 16], dst: &[u8; 16], sport: u16, dport: u16, proto: u8) -> u64 {
    let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().unwrap());
    let mut h = 0u64;
    for w in [word(&src[..8]), word(&src[8..]), word(&dst[..8]), word(&dst[8..])] {
        h = mix64(h ^ w);
    }
    mix64(h ^ ((sport as u64) << 24 | (dport as u64) << 8 | proto as u64))
}

/// What the parser found in a frame, besides the core's view of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub pkt: Packet,
    pub agg: AggKey,
}

fn mapped(v4: [u8; 4]) -> [u8; 16] {
    std::net::Ipv4Addr::from(v4).to_ipv6_mapped().octets()
}

/// Parses an Ethernet frame; `None` for anything that is not IPv4/IPv6 (left unpoliced).
pub fn parse(frame: &[u8], s: &Settings) -> Option<Parsed> {
    let ethertype = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let ip = &frame[14..];
    let (src, dst, proto, len, class, l4, prefix): ([u8; 16], [u8; 16], u8, u32, u16, Option<&[u8]>, u32) =
        match ethertype {
            ETH_P_IP => {
                let hdr = ip.get(..20)?;
                let ihl = (hdr[0] & 0x0f) as usize;
                if ihl < 5 {
                    return None;
                }
                let frag = u16::from_be_bytes([hdr[6], hdr[7]]) & 0x1fff;
                let l4 = if frag != 0 { None } else { ip.get(ihl * 4..) };
                (
                    mapped(hdr[12..16].try_into().unwrap()),
                    mapped(hdr[16..20].try_into().unwrap()),
                    hdr[9],
                    u16::from_be_bytes([hdr[2], hdr[3]]) as u32,
                    (hdr[1] >> 2) as u16,
                    l4,
                    96 + s.prefix4.min(32),
                )
            }
            ETH_P_IPV6 => {
                let hdr = ip.get(..40)?;
                let tclass = (hdr[0] << 4) | (hdr[1] >> 4);
                (
                    hdr[8..24].try_into().unwrap(),
                    hdr[24..40].try_into().unwrap(),
                    hdr[6],
                    u16::from_be_bytes([hdr[4], hdr[5]]) as u32 + 40,
                    (tclass >> 2) as u16,
                    ip.get(40..),
                    s.prefix6,
                )
            }
            _ => return None,
        };
    let (sport, dport) = match l4 {
        Some(l4) if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) && l4.len() >= 4 => {
            (u16::from_be_bytes([l4[0], l4[1]]), u16::from_be_bytes([l4[2], l4[3]]))
        }
        _ => (0, 0),
    };
    let addr = if s.match_dst != 0 { dst } else { src };
    let bits = u128::from_be_bytes(addr);
    let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix.min(128)) };
    let agg = AggKey { addr: (bits & mask).to_be_bytes() };
    let pkt = Packet { id: 0, len, flow: flow_hash(&src, &dst, sport, dport, proto), class, aggregate: agg.id() };
    Some(Parsed { pkt, agg })
}

/// The (source, destination) addresses of an IPv4 or IPv6 frame.
pub fn endpoints(frame: &[u8]) -> Option<(IpAddr, IpAddr)> {
    let ip = frame.get(14..)?;
    match u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?) {
        ETH_P_IP => {
            let a = |at: usize| -> Option<IpAddr> { Some(<[u8; 4]>::try_from(ip.get(at..at + 4)?).ok()?.into()) };
            Some((a(12)?, a(16)?))
        }
        ETH_P_IPV6 => {
            let a = |at: usize| -> Option<IpAddr> { Some(<[u8; 16]>::try_from(ip.get(at..at + 16)?).ok()?.into()) };
            Some((a(8)?, a(24)?))
        }
        _ => None,
    }
}

/// Builds an Ethernet frame carrying an IPv4 or IPv6 TCP/UDP packet of IP length `len`
/// (at least the headers), for tests and the conformance vectors. Checksums are left zero:
/// the policers never read them.
pub fn build_frame(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, proto: u8, dscp: u8, len: u16) -> Vec<u8> {
    let l4_hdr = if proto == IPPROTO_TCP { 20 } else { 8 };
    let mut f = vec![0u8; 14];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let len = len.max(20 + l4_hdr);
            f[12..14].copy_from_slice(&ETH_P_IP.to_be_bytes());
            let mut ip = [0u8; 20];
            ip[0] = 0x45;
            ip[1] = dscp << 2;
            ip[2..4].copy_from_slice(&len.to_be_bytes());
            ip[8] = 64;
            ip[9] = proto;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            f.extend_from_slice(&ip);
            f.resize(14 + len as usize, 0);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let len = len.max(40 + l4_hdr);
            f[12..14].copy_from_slice(&ETH_P_IPV6.to_be_bytes());
            let mut ip = [0u8; 40];
            ip[0] = 0x60 | (dscp >> 2);
            ip[1] = (dscp & 3) << 6;
            ip[4..6].copy_from_slice(&(len - 40).to_be_bytes());
            ip[6] = proto;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
            f.extend_from_slice(&ip);
            f.resize(14 + len as usize, 0);
        }
        _ => panic!("build_frame: mixed address families"),
    }
    let l4 = 14 + if src.is_ipv4() { 20 } else { 40 };
    f[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
    f[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
    if proto == IPPROTO_TCP {
        f[l4 + 12] = 5 << 4;
    } else {
        let udp_len = (f.len() - l4) as u16;
        f[l4 + 4..l4 + 6].copy_from_slice(&udp_len.to_be_bytes());
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_builds() {
        let s = Settings { match_dst: 1, prefix4: 24, prefix6: 64, test_clock: 0 };
        let f = build_frame("10.0.0.1".parse().unwrap(), "10.1.2.3".parse().unwrap(), 1000, 80, IPPROTO_TCP, 10, 1500);
        assert_eq!(f.len(), 1514);
        let p = parse(&f, &s).unwrap();
        assert_eq!((p.pkt.len, p.pkt.class), (1500, 10));
        assert_eq!(p.agg.ip(), "10.1.2.0".parse::<IpAddr>().unwrap());
        let f6 = build_frame("fd00::1".parse().unwrap(), "fd00:1:2:3:4::5".parse().unwrap(), 1, 2, IPPROTO_UDP, 46, 100);
        let p6 = parse(&f6, &s).unwrap();
        assert_eq!((p6.pkt.len, p6.pkt.class), (100, 46));
        assert_eq!(p6.agg.ip(), "fd00:1:2:3::".parse::<IpAddr>().unwrap());
        let other_port = parse(&build_frame("10.0.0.1".parse().unwrap(), "10.1.2.3".parse().unwrap(), 1001, 80, IPPROTO_TCP, 0, 1500), &s).unwrap();
        assert_ne!(p.pkt.flow, other_port.pkt.flow);
        assert_eq!(p.agg, other_port.agg);
    }
}
