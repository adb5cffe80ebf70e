//! Streaming pcap / pcapng reader (gzip-compressed files too) yielding decoded TCP segments.
//!
//! The container format is parsed by `pcap-parser`; link, IP and TCP headers by [`crate::decode`].
//! Memory is bounded by the read buffer whatever the file size. Bad input never panics: a file
//! that cannot be opened or recognised is an error; a file that breaks part-way yields every
//! packet before the break plus the error, so no result is lost.

use crate::decode::{decode_frame, is_supported_linktype, TcpPacket};
use pcap_parser::pcapng::Block;
use pcap_parser::{PcapBlockOwned, PcapError};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// Read buffer; grown on demand for large frames up to [`MAX_BUFFER`].
const INITIAL_BUFFER: usize = 1 << 16;
/// Frames (or pcapng blocks) larger than this are "absurd lengths": the file is abandoned there.
const MAX_BUFFER: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot open: {0}")]
    Open(#[from] io::Error),
    #[error("empty file")]
    Empty,
    #[error("not a pcap or pcapng file")]
    NotPcap,
    #[error("unsupported link type {0}")]
    UnsupportedLinktype(i32),
    #[error("file truncated after {0} bytes")]
    Truncated(usize),
    #[error("corrupt capture at byte {0}")]
    Corrupt(usize),
    #[error("block at byte {0} is larger than {MAX_BUFFER} bytes")]
    AbsurdLength(usize),
    #[error("read failed at byte {0}")]
    Io(usize),
}

/// What was read from one file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReadStats {
    /// Packet records in the file (decoded or not).
    pub frames: u64,
    /// Frames that were IPv4/IPv6 TCP and handed to the callback.
    pub tcp: u64,
    /// Frames of an unsupported link type (pcapng interfaces can differ).
    pub unsupported_link: u64,
}

/// The outcome of reading one file: what could be read, and the error that stopped it, if any.
#[derive(Debug)]
pub struct ReadOutcome {
    pub stats: ReadStats,
    pub error: Option<ReadError>,
}

/// Opens a capture file, transparently gunzipping it when it starts with the gzip magic.
pub fn open(path: &Path) -> Result<Box<dyn Read + Send>, ReadError> {
    let mut file = BufReader::with_capacity(1 << 16, File::open(path)?);
    let mut magic = [0u8; 2];
    let n = read_up_to(&mut file, &mut magic)?;
    let head = io::Cursor::new(magic[..n].to_vec()).chain(file);
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(head)))
    } else {
        Ok(Box::new(head))
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A reader whose `read` fills the buffer unless the input ends: pcap-parser probes the format
/// from a single `read`, which a chained or decompressing reader may answer with a few bytes.
struct Greedy<R>(R);

impl<R: Read> Read for Greedy<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read_up_to(&mut self.0, buf)
    }
}

/// Per-interface decoding parameters (pcapng allows several interfaces per section).
#[derive(Clone, Copy)]
struct Interface {
    linktype: i32,
    /// Timestamp units per second.
    units_per_sec: u64,
    offset_secs: i64,
}

fn to_ns(ts: u64, iface: &Interface) -> u64 {
    let ns = if iface.units_per_sec == 1_000_000_000 {
        ts as u128
    } else {
        ts as u128 * 1_000_000_000 / iface.units_per_sec.max(1) as u128
    };
    let ns = ns as i128 + iface.offset_secs as i128 * 1_000_000_000;
    ns.clamp(0, u64::MAX as i128) as u64
}

/// Units per second from pcapng's if_tsresol (high bit set: a power of two; else of ten).
/// pcap-parser's own helper rejects every power-of-two resolution, hence this one.
fn ts_units(tsresol: u8) -> Option<u64> {
    if tsresol & 0x80 != 0 {
        let e = tsresol & 0x7f;
        (e <= 63).then(|| 1u64 << e)
    } else {
        (tsresol <= 19).then(|| 10u64.pow(tsresol as u32))
    }
}

/// Reads every frame of `input`, calling `on_tcp` for each TCP segment in file order.
pub fn read_tcp(input: impl Read + Send, mut on_tcp: impl FnMut(&TcpPacket)) -> ReadOutcome {
    let mut stats = ReadStats::default();
    let error = read_inner(Greedy(input), &mut stats, &mut on_tcp).err();
    ReadOutcome { stats, error }
}

fn read_inner(
    input: impl Read + Send,
    stats: &mut ReadStats,
    on_tcp: &mut dyn FnMut(&TcpPacket),
) -> Result<(), ReadError> {
    let mut reader = match pcap_parser::create_reader(INITIAL_BUFFER, input) {
        Ok(r) => r,
        Err(PcapError::Eof) => return Err(ReadError::Empty),
        Err(PcapError::ReadError) => return Err(ReadError::Io(0)),
        Err(_) => return Err(ReadError::NotPcap),
    };
    let mut ifaces: Vec<Interface> = Vec::new();
    let mut legacy: Option<Interface> = None;
    let mut capacity = INITIAL_BUFFER;
    let mut stalled_refills = 0;
    loop {
        match reader.next() {
            Ok((used, block)) => {
                stalled_refills = 0;
                match block {
                    PcapBlockOwned::LegacyHeader(h) => {
                        let lt = h.network.0;
                        if !is_supported_linktype(lt) {
                            return Err(ReadError::UnsupportedLinktype(lt));
                        }
                        let units = if h.is_nanosecond_precision() { 1_000_000_000 } else { 1_000_000 };
                        legacy = Some(Interface { linktype: lt, units_per_sec: units, offset_secs: 0 });
                    }
                    PcapBlockOwned::Legacy(b) => {
                        stats.frames += 1;
                        let Some(iface) = legacy else { return Err(ReadError::Corrupt(reader.consumed())) };
                        let ts = b.ts_sec as u64 * iface.units_per_sec + b.ts_usec as u64;
                        let data = &b.data[..(b.caplen as usize).min(b.data.len())];
                        if let Some(p) = decode_frame(iface.linktype, data, b.origlen, to_ns(ts, &iface)) {
                            stats.tcp += 1;
                            on_tcp(&p);
                        }
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => ifaces.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        ifaces.push(Interface {
                            linktype: idb.linktype.0,
                            units_per_sec: ts_units(idb.if_tsresol).unwrap_or(1_000_000),
                            offset_secs: idb.if_tsoffset,
                        });
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        stats.frames += 1;
                        match ifaces.get(epb.if_id as usize) {
                            Some(iface) if is_supported_linktype(iface.linktype) => {
                                let ts = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                                let data = &epb.data[..(epb.caplen as usize).min(epb.data.len())];
                                if let Some(p) = decode_frame(iface.linktype, data, epb.origlen, to_ns(ts, iface)) {
                                    stats.tcp += 1;
                                    on_tcp(&p);
                                }
                            }
                            _ => stats.unsupported_link += 1,
                        }
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                        // Simple packet blocks carry no timestamp: they cannot be timed, so they
                        // are counted and skipped.
                        stats.frames += 1;
                        let _ = spb;
                    }
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(used);
            }
            Err(PcapError::Eof) => return Ok(()),
            Err(PcapError::Incomplete(_)) => {
                let before = reader.data().len();
                if reader.refill().is_err() {
                    return Err(ReadError::Io(reader.consumed()));
                }
                // A refill that adds nothing twice in a row means the input ended mid-block.
                if reader.data().len() == before {
                    stalled_refills += 1;
                    if stalled_refills > 2 {
                        return Err(ReadError::Truncated(reader.consumed()));
                    }
                }
            }
            Err(PcapError::BufferTooSmall) => {
                if capacity >= MAX_BUFFER {
                    return Err(ReadError::AbsurdLength(reader.consumed()));
                }
                capacity *= 4;
                if !reader.grow(capacity) {
                    return Err(ReadError::AbsurdLength(reader.consumed()));
                }
                if reader.refill().is_err() {
                    return Err(ReadError::Io(reader.consumed()));
                }
            }
            Err(PcapError::UnexpectedEof) => return Err(ReadError::Truncated(reader.consumed())),
            Err(PcapError::ReadError) => return Err(ReadError::Io(reader.consumed())),
            Err(_) => return Err(ReadError::Corrupt(reader.consumed())),
        }
    }
}

/// Reads a file (pcap, pcapng, optionally gzipped) from disk.
pub fn read_file(path: &Path, on_tcp: impl FnMut(&TcpPacket)) -> ReadOutcome {
    match open(path) {
        Ok(r) => read_tcp(r, on_tcp),
        Err(e) => ReadOutcome { stats: ReadStats::default(), error: Some(e) },
    }
}
