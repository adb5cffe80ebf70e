//! The reader on every supported encapsulation, and on bad input (errors, never panics).

use flate2::write::GzEncoder;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_trace::decode::{TcpPacket, TCP_ACK};
use ratekit_trace::writer::{header_len, Link, PcapNgWriter, PcapWriter};
use ratekit_trace::{read_tcp, ReadError};
use std::io::Write;
use std::net::IpAddr;

fn sample_packets(v6: bool) -> Vec<TcpPacket> {
    let (a, b): (IpAddr, IpAddr) = if v6 {
        ("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap())
    } else {
        ("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap())
    };
    (0..50u32)
        .map(|i| TcpPacket {
            ts_ns: 1_700_000_000_000_000_000 + i as u64 * 1_234_567,
            src: if i % 3 == 0 { b } else { a },
            dst: if i % 3 == 0 { a } else { b },
            sport: if i % 3 == 0 { 40000 } else { 443 },
            dport: if i % 3 == 0 { 443 } else { 40000 },
            seq: 0xffff_f000u32.wrapping_add(i * 1448),
            ack: 77 + i,
            flags: TCP_ACK,
            window: 512,
            ip_len: header_len(v6, (i % 3) as u8) + if i % 3 == 0 { 0 } else { 1448 },
            payload_len: if i % 3 == 0 { 0 } else { 1448 },
            sack: [(i, i + 10), (i + 20, i + 30), (0, 0), (0, 0)],
            sack_count: (i % 3) as u8,
        })
        .collect()
}

fn pcap(link: Link, pkts: &[TcpPacket], ng: bool, snaplen: u32) -> Vec<u8> {
    if ng {
        let mut w = PcapNgWriter::new(Vec::new(), link, snaplen).unwrap();
        pkts.iter().for_each(|p| w.write(p).unwrap());
        w.into_inner()
    } else {
        let mut w = PcapWriter::new(Vec::new(), link, snaplen).unwrap();
        pkts.iter().for_each(|p| w.write(p).unwrap());
        w.into_inner()
    }
}

fn read_all(bytes: &[u8]) -> (Vec<TcpPacket>, ratekit_trace::ReadOutcome) {
    let mut got = Vec::new();
    let outcome = read_tcp(bytes, |p| got.push(*p));
    (got, outcome)
}

#[test]
fn every_link_type_and_format_round_trips() {
    for link in [Link::Ethernet, Link::Vlan, Link::LinuxSll, Link::LinuxSll2, Link::RawIp] {
        for v6 in [false, true] {
            for ng in [false, true] {
                let pkts = sample_packets(v6);
                // snaplen 96 cuts IPv6 + SACK headers: lengths must still come from the IP header.
                let bytes = pcap(link, &pkts, ng, 96);
                let (got, outcome) = read_all(&bytes);
                assert!(outcome.error.is_none(), "{link:?} v6={v6} ng={ng}: {:?}", outcome.error);
                assert_eq!(outcome.stats.frames, pkts.len() as u64);
                assert_eq!(got.len(), pkts.len(), "{link:?} v6={v6} ng={ng}");
                for (g, p) in got.iter().zip(&pkts) {
                    let mut want = *p;
                    if g.sack_count < p.sack_count {
                        // Options beyond the snaplen are lost; what was captured must match.
                        want.sack_count = g.sack_count;
                        want.sack[g.sack_count as usize..].iter_mut().for_each(|s| *s = (0, 0));
                    }
                    let mut got = *g;
                    got.sack[got.sack_count as usize..].iter_mut().for_each(|s| *s = (0, 0));
                    want.sack[want.sack_count as usize..].iter_mut().for_each(|s| *s = (0, 0));
                    assert_eq!(got, want, "{link:?} v6={v6} ng={ng}");
                }
            }
        }
    }
}

#[test]
fn full_snaplen_keeps_sack_blocks() {
    let pkts = sample_packets(false);
    let (got, _) = read_all(&pcap(Link::Ethernet, &pkts, false, 65535));
    assert_eq!(got[2].sack_blocks(), &[(2, 12), (22, 32)]);
    assert_eq!(got[1].sack_blocks(), &[(1, 11)]);
}

#[test]
fn gzip_is_transparent() {
    let bytes = pcap(Link::Ethernet, &sample_packets(false), true, 96);
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).unwrap();
    let dir = std::env::temp_dir().join(format!("ratekit-trace-gz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.pcapng.gz");
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    let mut n = 0;
    let outcome = ratekit_trace::read_file(&path, |_| n += 1);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(n, 50);
}

#[test]
fn bad_files_are_errors_with_partial_results() {
    let good = pcap(Link::Ethernet, &sample_packets(false), false, 96);
    let (_, o) = read_all(&[]);
    assert!(matches!(o.error, Some(ReadError::Empty)), "{:?}", o.error);
    let (_, o) = read_all(b"this is not a capture file at all, just text\n");
    assert!(matches!(o.error, Some(ReadError::NotPcap)), "{:?}", o.error);
    // Cut in the middle of the 21st record: the first 20 packets survive, and the cut is reported.
    let offsets = record_offsets(&good);
    let cut = offsets[20] + 40;
    let (got, o) = read_all(&good[..cut]);
    assert_eq!(got.len(), 20);
    assert!(matches!(o.error, Some(ReadError::Truncated(_))), "{:?}", o.error);
    // An absurd captured length in record 3.
    let mut absurd = good.clone();
    let at = offsets[2] + 8;
    absurd[at..at + 4].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let (got, o) = read_all(&absurd);
    assert_eq!(got.len(), 2);
    assert!(o.error.is_some());
    // An unknown link type.
    let mut unknown = good.clone();
    unknown[20..24].copy_from_slice(&147u32.to_le_bytes());
    let (got, o) = read_all(&unknown);
    assert!(got.is_empty());
    assert!(matches!(o.error, Some(ReadError::UnsupportedLinktype(147))), "{:?}", o.error);
}

#[test]
fn corrupted_files_never_panic() {
    // Deterministic mutation fuzzing of valid files (cargo-fuzz runs the open-ended version).
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let bases = [
        pcap(Link::Ethernet, &sample_packets(false), false, 96),
        pcap(Link::Vlan, &sample_packets(true), true, 96),
        pcap(Link::LinuxSll2, &sample_packets(false), true, 128),
    ];
    for round in 0..3000 {
        let mut bytes = bases[round % bases.len()].clone();
        for _ in 0..rng.gen_range(1..8) {
            let i = rng.gen_range(0..bytes.len());
            bytes[i] = rng.gen();
        }
        if rng.gen_bool(0.2) {
            bytes.truncate(rng.gen_range(0..bytes.len()));
        }
        let (_, _) = read_all(&bytes);
        let _ = ratekit_trace::analyze(&bytes[..], &Default::default());
    }
}

/// Byte offsets of the records of a little-endian classic pcap.
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= bytes.len() {
        out.push(at);
        at += 16 + u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
    }
    out
}
