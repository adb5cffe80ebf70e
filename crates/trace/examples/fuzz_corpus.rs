//! Writes the small seed corpus of the reader's fuzz target: the opening packets of a generated
//! policed download (handshake, data, SACKs, retransmissions) in every supported encapsulation.
//!
//! cargo run --release -p ratekit-trace --example fuzz_corpus -- crates/trace/fuzz/corpus/read_trace

use ratekit_core::Rate;
use ratekit_trace::synth::{generate, Path, Scenario};
use ratekit_trace::writer::{Link, PcapNgWriter, PcapWriter};

fn main() -> std::io::Result<()> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: fuzz_corpus DIR"));
    std::fs::create_dir_all(&dir)?;
    let mut sc = Scenario::new(Path::Policer { rate: Rate::from_mbps(1.5), burst: 20_000 }, 1);
    sc.chunks = 1;
    sc.chunk_bytes = 60_000;
    let trace = generate(&sc);
    let pkts = &trace.packets[..trace.packets.len().min(40)];
    for (name, link) in [("eth", Link::Ethernet), ("vlan", Link::Vlan), ("sll", Link::LinuxSll), ("sll2", Link::LinuxSll2), ("raw", Link::RawIp)] {
        let mut w = PcapWriter::new(Vec::new(), link, 96)?;
        pkts.iter().try_for_each(|p| w.write(p))?;
        std::fs::write(dir.join(format!("{name}.pcap")), w.into_inner())?;
        let mut w = PcapNgWriter::new(Vec::new(), link, 96)?;
        pkts.iter().try_for_each(|p| w.write(p))?;
        std::fs::write(dir.join(format!("{name}.pcapng")), w.into_inner())?;
    }
    Ok(())
}
