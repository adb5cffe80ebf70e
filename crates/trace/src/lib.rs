//! ratekit-trace: read packet traces, annotate TCP flows, find policers (002 §2-§4).
//!
//! - [`reader`]: streaming pcap / pcapng (optionally gzipped) reader; bad input is an error, never a panic.
//! - [`decode`]: Ethernet (VLAN), Linux SLL / SLL2, raw IP, IPv4 / IPv6, TCP with SACK.
//! - [`flow`]: connection tracking and per-packet annotation (lost, retransmitted, RTT, segments).
//! - [`detector`]: the policing detector of 002 §2.1 with its safeguards and §4.4 patterns.
//! - [`cluster`]: rate clusters of 002 §3.2.
//! - [`analyze`]: a whole file to result rows, with the per-client aggregate judgement.
//! - [`batch`]: many capture files into one results CSV; [`results_clusters`]: rate clusters of a results CSV.
//! - [`writer`], [`synth`]: writing pcaps, and generating traces whose verdict is known.
//! - [`accuracy`]: the detector judged on generated traces, for `ratekit reproduce` (002 Table 3).

pub mod accuracy;
pub mod analyze;
pub mod batch;
pub mod cluster;
pub mod decode;
pub mod detector;
pub mod flow;
pub mod reader;
pub mod results_clusters;
pub mod synth;
pub mod writer;

pub use analyze::{analyze, analyze_packets, FileReport, Options, Row};
pub use detector::{judge, Judgement, Params, Pattern, Reason};
pub use reader::{read_file, read_tcp, ReadError, ReadOutcome, ReadStats};
