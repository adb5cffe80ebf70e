//! What Linux's TCP did during a run, from the sender namespace's counters (/proc/net/snmp and
//! /proc/net/netstat, read before and after): retransmitted segments, RTOs, tail loss probes and
//! recoveries, for comparison with the simulator's per-flow counts (scripts/calibrate.py). The
//! counters are per namespace, so they sum over the run's flows.

use crate::netns::{Netns, NetnsError};
use std::collections::BTreeMap;

/// (table, counter) pairs kept, named `table.counter` in summary.json.
const KEPT: [(&str, &str); 8] = [
    ("Tcp", "OutSegs"),
    ("Tcp", "RetransSegs"),
    ("TcpExt", "TCPTimeouts"),
    ("TcpExt", "TCPSpuriousRTOs"),
    ("TcpExt", "TCPLossProbes"),
    ("TcpExt", "TCPLossProbeRecovery"),
    ("TcpExt", "TCPSackRecovery"),
    ("TcpExt", "TCPFastRetrans"),
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
