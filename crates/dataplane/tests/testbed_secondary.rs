//! A scenario's secondary link in the testbed: a tbf behind the enforcer on the middlebox's egress.
//! One CUBIC flow through a 10 Mbit/s token bucket in tc-BPF with a 4 Mbit/s link behind it must
//! get the link's rate, 0.4 of the policed rate (× 0.965 for headers), where without the link it
//! would get nearly all of it.

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
    let got = summary.unwrap().aggregates[0].mean_normalized_throughput;
    println!("mean throughput {got:.3} of the policed rate (bounds 0.33-0.41)");
    assert!((0.33..=0.41).contains(&got), "mean throughput {got:.3} of the policed rate, the 4 Mbit/s link gives 0.386");
}
