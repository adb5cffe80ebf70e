//! What Linux's TCP did during a run, from the sender namespace's counters (/proc/net/snmp and
//! /proc/net/netstat, read before and after): retransmitted segments, RTOs, tail loss probes and
//! recoveries, for comparison with the simulator's per-flow counts (scripts/calibrate.py). The
//! counters are per namespace, so they sum over the run's flows; each flow's own RTTs and
//! retransmissions come from its socket (TCP_INFO).

use crate::netns::{Netns, NetnsError};
pub use ratekit_lab::summary::FlowTcpInfo;
use std::collections::BTreeMap;

/// (table, counter) pairs kept, named `table.counter` in summary.json.
const KEPT: [(&str, &str); 18] = [
    ("Tcp", "OutSegs"),
    ("Tcp", "RetransSegs"),
    ("TcpExt", "TCPTimeouts"),
    ("TcpExt", "TCPSpuriousRTOs"),
    ("TcpExt", "TCPLossProbes"),
    ("TcpExt", "TCPLossProbeRecovery"),
    ("TcpExt", "TCPSackRecovery"),
    ("TcpExt", "TCPRenoRecovery"),
    ("TcpExt", "TCPFastRetrans"),
    // How CUBIC left slow start (HyStart's two detectors) and at what window, summed over flows.
    ("TcpExt", "TCPHystartTrainDetect"),
    ("TcpExt", "TCPHystartTrainCwnd"),
    ("TcpExt", "TCPHystartDelayDetect"),
    ("TcpExt", "TCPHystartDelayCwnd"),
    // Reductions Linux took back as spurious (timestamps or DSACKs), which the simulator never does.
    ("TcpExt", "TCPFullUndo"),
    ("TcpExt", "TCPPartialUndo"),
    ("TcpExt", "TCPDSACKUndo"),
    ("TcpExt", "TCPLossUndo"),
    ("TcpExt", "TCPDSACKRecv"),
];

pub type Counters = BTreeMap<String, u64>;

pub fn read(ns: &Netns) -> Result<Counters, NetnsError> {
    Ok(parse(&ns.exec(&["cat", "/proc/net/snmp", "/proc/net/netstat"])?))
}

/// The files hold pairs of lines, `Table: Name Name ...` then `Table: value value ...`.
fn parse(text: &str) -> Counters {
    let mut out = Counters::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((table, names)), Some((_, values))) = (names.split_once(':'), values.split_once(':')) else { continue };
        for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
            if KEPT.contains(&(table, name)) {
                if let Ok(v) = value.parse() {
                    out.insert(format!("{table}.{name}"), v);
                }
            }
        }
    }
    out
}

/// `after − before` for every counter read both times (a counter never goes back, but a reset
/// namespace must not underflow).
pub fn delta(before: &Counters, after: &Counters) -> Counters {
    after.iter().filter_map(|(k, &a)| before.get(k).map(|&b| (k.clone(), a.saturating_sub(b)))).collect()
}

// Byte offsets in Linux's struct tcp_info (include/uapi/linux/tcp.h), which only grows at its
// end; libc's copy of the struct stops before min_rtt and data_segs_out.
const RTT_US: usize = 68;
const SND_CWND: usize = 80;
const TOTAL_RETRANS: usize = 100;
const MIN_RTT_US: usize = 148;
const DATA_SEGS_OUT: usize = 156;
const BUSY_TIME_US: usize = 168;
const RWND_LIMITED_US: usize = 176;
const SNDBUF_LIMITED_US: usize = 184;
const DSACK_DUPS: usize = 216;
const REORD_SEEN: usize = 220;

/// The socket's TCP_INFO, refused when the kernel's struct ends before tcpi_reord_seen (4.19).
fn tcp_info(sock: &impl std::os::fd::AsRawFd) -> std::io::Result<[u8; 256]> {
    let mut buf = [0u8; 256];
    let mut len = buf.len() as libc::socklen_t;
    let rc = unsafe { libc::getsockopt(sock.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if (len as usize) < REORD_SEEN + 4 {
        return Err(std::io::Error::other(format!("TCP_INFO of {len} bytes: this kernel predates tcpi_reord_seen (4.19)")));
    }
    Ok(buf)
}

fn u32_at(buf: &[u8; 256], at: usize) -> u32 {
    u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap())
}

/// The congestion window (segments) and smoothed RTT (µs) now.
pub fn window_state(sock: &impl std::os::fd::AsRawFd) -> std::io::Result<(u32, u32)> {
    let buf = tcp_info(sock)?;
    Ok((u32_at(&buf, SND_CWND), u32_at(&buf, RTT_US)))
}

/// BBR's model of the path from TCP_CC_INFO (`struct tcp_bbr_info`: bandwidth in bytes/s as two
/// u32 halves, min_rtt in µs, the pacing gain × 256); None for a socket whose congestion control
/// reports nothing (CUBIC and Reno fill no tcp_cc_info).
pub fn bbr_model(sock: &impl std::os::fd::AsRawFd) -> std::io::Result<Option<BbrSample>> {
    let mut buf = [0u32; 5];
    let mut len = std::mem::size_of_val(&buf) as libc::socklen_t;
    let rc = unsafe { libc::getsockopt(sock.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CC_INFO, buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if (len as usize) < std::mem::size_of_val(&buf) {
        return Ok(None);
    }
    let [bw_lo, bw_hi, min_rtt_us, pacing_gain, _cwnd_gain] = buf;
    Ok(Some(BbrSample { bw_bytes_per_sec: (bw_hi as u64) << 32 | bw_lo as u64, min_rtt_us, pacing_gain_x256: pacing_gain }))
}

/// One TCP_CC_INFO reading of a BBR socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BbrSample {
    pub bw_bytes_per_sec: u64,
    pub min_rtt_us: u32,
    pub pacing_gain_x256: u32,
}

/// A connected TCP socket's TCP_INFO: the RTTs Linux measured and its retransmissions.
pub fn socket_info(sock: &impl std::os::fd::AsRawFd, flow: u32) -> std::io::Result<FlowTcpInfo> {
    let buf = tcp_info(sock)?;
    let ms_at = |at: usize| u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap()) as f64 / 1e3;
    Ok(FlowTcpInfo {
        flow,
        min_rtt_ms: u32_at(&buf, MIN_RTT_US) as f64 / 1e3,
        srtt_ms: u32_at(&buf, RTT_US) as f64 / 1e3,
        retransmits: u32_at(&buf, TOTAL_RETRANS) as u64,
        data_segs_out: u32_at(&buf, DATA_SEGS_OUT) as u64,
        busy_ms: ms_at(BUSY_TIME_US),
        rwnd_limited_ms: ms_at(RWND_LIMITED_US),
        sndbuf_limited_ms: ms_at(SNDBUF_LIMITED_US),
        dsack_dups: u32_at(&buf, DSACK_DUPS) as u64,
        reord_seen: u32_at(&buf, REORD_SEEN) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_of_lines_give_the_kept_counters() {
        let text = "Tcp: RtoAlgorithm OutSegs RetransSegs\nTcp: 1 120 7\nUdp: InDatagrams\nUdp: 3\n\
                    TcpExt: TCPTimeouts SyncookiesSent TCPLossProbes\nTcpExt: 2 9 4\n";
        let c = parse(text);
        let want: Counters = [("Tcp.OutSegs", 120), ("Tcp.RetransSegs", 7), ("TcpExt.TCPTimeouts", 2), ("TcpExt.TCPLossProbes", 4)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(c, want);
        let later = parse(&text.replace("1 120 7", "1 150 9"));
        assert_eq!(delta(&c, &later)["Tcp.RetransSegs"], 2);
        assert_eq!(delta(&c, &later)["TcpExt.TCPTimeouts"], 0);
    }
}
