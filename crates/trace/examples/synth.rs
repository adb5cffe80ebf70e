//! Writes a generated trace (ground truth known) as a pcap, for trying `ratekit detect` and for
//! the speed measurement in docs/detector.md.
//!
//! cargo run --release -p ratekit-trace --example synth -- OUT.pcap policer 1.5mbit 100kb [seed] [chunks] [flows]
//! cargo run --release -p ratekit-trace --example synth -- OUT.pcap droptail 3mbit 32kb
//! cargo run --release -p ratekit-trace --example synth -- OUT.pcap random 0.01

use ratekit_core::units::{parse_rate, parse_size};
use ratekit_trace::synth::{generate, Path, Scenario};
use std::io::BufWriter;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: synth OUT.pcap (policer RATE BURST | droptail RATE QUEUE | random P) [seed] [chunks] [flows]";
    let (out, kind) = (a.first().ok_or(usage)?, a.get(1).ok_or(usage)?.as_str());
    let (path, rest) = match kind {
        "policer" => (Path::Policer { rate: parse_rate(&a[2])?, burst: parse_size(&a[3])? }, 4),
        "droptail" => (Path::DropTail { rate: parse_rate(&a[2])?, queue: parse_size(&a[3])? }, 4),
        "random" => (Path::RandomLoss { p: a[2].parse()? }, 3),
        _ => return Err(usage.into()),
    };
    let num = |i: usize, d: u64| a.get(rest + i).map_or(Ok(d), |s| s.parse::<u64>());
    let mut sc = Scenario::new(path, num(0, 1)?);
    sc.chunks = num(1, 5)? as u32;
    sc.flows = num(2, 1)? as u32;
    let trace = generate(&sc);
    trace.write_pcap(BufWriter::new(std::fs::File::create(out)?))?;
    eprintln!("{out}: {} packets, {} data, {} dropped by the path", trace.packets.len(), trace.data_sent, trace.drops);
    Ok(())
}
