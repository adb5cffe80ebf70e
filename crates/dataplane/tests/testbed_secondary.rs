//! A scenario's secondary link in the testbed: a tbf behind the enforcer on the middlebox's egress.
//! One CUBIC flow through a 10 Mbit/s token bucket in tc-BPF with a 4 Mbit/s link behind it must
//! get the link's rate, 0.4 of the policed rate (× 0.965 for headers), where without the link it
//! would get nearly all of it, and summary.json must count the link's drops.

use ratekit_dataplane::testbed::{plan, run};

#[test]
#[ignore = "needs root: namespaces, tc-BPF, tbf and real TCP; scripts/test.sh runs it with --include-ignored as root"]
fn the_secondary_link_limits_the_flow_behind_the_enforcer() {
    ratekit_dataplane::netns::require_root("the testbed (namespaces, AF_PACKET, tc)");
    let dir = std::env::temp_dir().join(format!("rk-testbed-secondary-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = "name = \"secondary\"\nduration = \"8s\"\nseed = 1\n[measure]\nwindow = \"250ms\"\nwarmup = \"3s\"\n\
                [testbed]\nenforcer_at = \"tc\"\n[enforcer]\nkind = \"token_bucket\"\nrate = \"10mbit\"\nburst = \"100kb\"\n\
                [[aggregates]]\nrate = \"10mbit\"\nsecondary = { rate = \"4mbit\", buffer = \"30kb\" }\n\
                flows = [{ cc = \"cubic\", rtt = \"20ms\" }]\n";
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    let summary = run(&plan::load(&path).unwrap(), &dir.join("out"), |_| {});
    let _ = std::fs::remove_dir_all(&dir);
    let summary = summary.unwrap();
    let got = summary.aggregates[0].mean_normalized_throughput;
    println!("mean throughput {got:.3} of the policed rate (bounds 0.33-0.41)");
    assert!((0.33..=0.41).contains(&got), "mean throughput {got:.3} of the policed rate, the 4 Mbit/s link gives 0.386");
    // CUBIC fills the 30 kB queue behind the link, so the link drops, and it saw every data packet.
    let link = summary.testbed.as_ref().and_then(|t| t.secondary_link).expect("the secondary link's counts");
    let sent: u64 = summary.flows.iter().map(|f| f.delivered_bytes).sum::<u64>() / 1448;
    println!("secondary link: {} packets, {} dropped; {sent} full segments delivered", link.packets, link.drops);
    assert!(link.drops > 0 && link.packets >= sent, "{link:?} for {sent} segments delivered");
}
