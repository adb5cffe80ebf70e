//! Real Linux TCP through the tc-BPF BC-PQP over classes of exact flows (`bpf/pqp_class_flows.c`):
//! two classes weighted 3:1, each with 2 CUBIC and 2 BBR flows at 20 Mbit/s and 20 ms RTT, 12 s.
//! The classes must split the delivered bytes 3:1 and each class's flows equally.

use ratekit_dataplane::testbed::{plan, run};

/// `fair_classes` as given, or every class when `None`.
fn three_to_one(dir: &std::path::Path, fair_classes: Option<&str>) -> Vec<f64> {
    let fair = fair_classes.map_or(String::new(), |list| format!("fair_classes = {list}\n"));
    let text = format!(
        "name = \"classes\"\nduration = \"12s\"\nseed = 5\n[measure]\nwindow = \"250ms\"\nwarmup = \"4s\"\n\
         [testbed]\nenforcer_at = \"tc\"\n[enforcer]\nkind = \"bcpqp\"\nrate = \"20mbit\"\nqueues = 2\nclassify = \"class\"\n\
         policy = \"weighted\"\nweights = [3, 1]\nflows = \"exact\"\nmax_flows = 512\nqueue_size = \"5800kb\"\n{fair}\
         [[aggregates]]\nrate = \"20mbit\"\nflows = [\n\
         {{ cc = \"cubic\", rtt = \"20ms\", count = 2, class = 0 }},\n{{ cc = \"bbr\", rtt = \"20ms\", count = 2, class = 0 }},\n\
         {{ cc = \"cubic\", rtt = \"20ms\", count = 2, class = 1 }},\n{{ cc = \"bbr\", rtt = \"20ms\", count = 2, class = 1 }},\n]\n"
    );
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    let summary = run(&plan::load(&path).unwrap(), &dir.join("out"), |_| {}).unwrap();
    summary.aggregates[0].shares.clone().expect("the testbed reports shares")
}

fn jain(x: &[f64]) -> f64 {
    x.iter().sum::<f64>().powi(2) / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>())
}

#[test]
#[ignore = "needs root: namespaces, tc-BPF and real TCP; scripts/test.sh runs it with --include-ignored as root"]
fn classes_of_exact_flows_share_3_to_1_and_per_flow_inside() {
    ratekit_dataplane::netns::require_root("the testbed (namespaces, AF_PACKET, tc)");
    let dir = std::env::temp_dir().join(format!("rk-testbed-classes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shares = three_to_one(&dir, None);
    let _ = std::fs::remove_dir_all(&dir);
    let class0: f64 = shares[..4].iter().sum();
    let (j0, j1) = (jain(&shares[..4]), jain(&shares[4..]));
    println!("class 0 takes {class0:.3} of the bytes (bound 0.72-0.78), Jain inside class 0 {j0:.4}, class 1 {j1:.4} (bound 0.98); shares {shares:.3?}");
    assert!((0.72..=0.78).contains(&class0), "class 0 share {class0:.3}: {shares:?}");
    assert!(j0 >= 0.98 && j1 >= 0.98, "Jain inside the classes {j0:.4}, {j1:.4}: {shares:?}");
}
