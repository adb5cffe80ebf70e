//! `ratekit tc` on a veth pair between two namespaces this test creates (deleted on drop):
//! a UDP flood far above the policed rate is held to rate + burst, a live config update keeps
//! the counters, stats come out as Prometheus text, and bad input gets a clear error.

use ratekit_dataplane::netns::{veth, Netns};
use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

fn ratekit(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ratekit")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// Sends 1400-byte UDP datagrams from `a` to 10.77.0.2:9000 as fast as possible for `secs`.
fn flood(a: &Netns, secs: f64) {
    std::thread::scope(|s| {
        s.spawn(|| {
            a.enter().unwrap();
            let sock = UdpSocket::bind("10.77.0.1:0").unwrap();
            let buf = [0u8; 1400];
            let end = Instant::now() + Duration::from_secs_f64(secs);
            while Instant::now() < end {
                let _ = sock.send_to(&buf, "10.77.0.2:9000");
            }
        });
    });
}

fn passed_bytes(ns: &str) -> u64 {
    let (ok, out) = ratekit(&["tc", "stats", "--netns", ns, "--dev", "b0", "--format", "json"]);
    assert!(ok, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["aggregates"].as_array().unwrap().iter().map(|a| a["passed_bytes"].as_u64().unwrap()).sum()
}

#[test]
fn tc_policer_holds_rate_and_updates_live() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: tc-BPF and namespaces need root");
        return;
    }
    let a = Netns::create("tc-a").unwrap();
    let b = Netns::create("tc-b").unwrap();
    veth(&a, "a0", "10.77.0.1/24", &b, "b0", "10.77.0.2/24").unwrap();
    let dir = std::env::temp_dir().join(format!("rk-tc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = |rate: &str| {
        let p = dir.join(format!("tb-{rate}.toml"));
        std::fs::write(&p, format!("kind = \"token_bucket\"\nrate = \"{rate}\"\nburst = \"20kb\"\n")).unwrap();
        p.to_string_lossy().into_owned()
    };
    let (ok, out) = ratekit(&["tc", "attach", "--netns", &b.name, "--dev", "b0", "--ingress", "--config", &cfg("8mbit")]);
    assert!(ok && out.contains("attached token_bucket"), "{out}");
    // Receiver: UDP to a closed port is dropped after the tc hook has counted it, which is enough.
    let secs = 1.5;
    flood(&a, secs);
    let first = passed_bytes(&b.name);
    let (rate, burst) = (1_000_000.0, 20.0 * 1024.0);
    let expect = rate * secs + burst;
    assert!((first as f64) < expect * 1.05 + 3000.0, "passed {first} B in {secs} s at 8mbit (max {expect})");
    assert!((first as f64) > rate * secs * 0.9, "passed only {first} B in {secs} s at 8mbit");

    // Live update: same kind, new rate; counters (state) survive.
    let (ok, out) = ratekit(&["tc", "attach", "--netns", &b.name, "--dev", "b0", "--config", &cfg("16mbit")]);
    assert!(ok && out.contains("state kept"), "{out}");
    assert_eq!(passed_bytes(&b.name), first);
    flood(&a, secs);
    let second = passed_bytes(&b.name) - first;
    assert!((second as f64) > 2.0 * rate * secs * 0.9 && (second as f64) < 2.0 * rate * secs * 1.05 + burst + 3000.0, "passed {second} B at 16mbit");

    let (ok, prom) = ratekit(&["tc", "stats", "--netns", &b.name, "--dev", "b0", "--format", "prometheus"]);
    assert!(ok, "{prom}");
    assert!(prom.contains("# TYPE ratekit_passed_bytes_total counter"), "{prom}");
    assert!(prom.contains("aggregate=\"10.77.0.2\""), "{prom}");
    assert!(prom.contains("ratekit_drops_by_reason_total{") && prom.contains("reason=\"overlimit\""), "{prom}");

    let (ok, out) = ratekit(&["tc", "detach", "--netns", &b.name, "--dev", "b0"]);
    assert!(ok && out.contains("detached"), "{out}");
    let (ok, out) = ratekit(&["tc", "stats", "--netns", &b.name, "--dev", "b0"]);
    assert!(!ok && out.contains("no ratekit tc-BPF program is attached"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tc_bad_input_is_named() {
    let (ok, out) = ratekit(&["tc", "attach", "--dev", "rk-no-such-if0", "--config", "/nonexistent.toml"]);
    assert!(!ok && out.contains("/nonexistent.toml"), "{out}");
    let cfg = std::env::temp_dir().join(format!("rk-tc-bad-{}.toml", std::process::id()));
    std::fs::write(&cfg, "kind = \"token_bucket\"\nrate = \"8mbit\"\nburst = \"20kb\"\n").unwrap();
    let (ok, out) = ratekit(&["tc", "attach", "--dev", "rk-no-such-if0", "--config", cfg.to_str().unwrap()]);
    assert!(!ok, "{out}");
    if unsafe { libc::geteuid() } == 0 {
        assert!(out.contains("no network interface named 'rk-no-such-if0'"), "{out}");
    }
    std::fs::write(&cfg, "kind = \"token_bucket\"\nrate = \"0mbit\"\nburst = \"20kb\"\n").unwrap();
    let (ok, out) = ratekit(&["tc", "attach", "--dev", "lo", "--config", cfg.to_str().unwrap()]);
    assert!(!ok && out.contains("0mbit"), "{out}");
    std::fs::remove_file(&cfg).unwrap();
}

/// BC-PQP as tc-BPF: a one-flow flood is held to rate + queue size, a live rate change keeps the
/// state, and a tree beyond the program's bounds is refused with the bound named.
#[test]
fn tc_bcpqp_holds_rate_and_updates_live() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: tc-BPF and namespaces need root");
        return;
    }
    let a = Netns::create("tcq-a").unwrap();
    let b = Netns::create("tcq-b").unwrap();
    veth(&a, "a0", "10.77.0.1/24", &b, "b0", "10.77.0.2/24").unwrap();
    let dir = std::env::temp_dir().join(format!("rk-tcq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = |rate: &str, queues: u32| {
        let p = dir.join(format!("bc-{rate}-{queues}.toml"));
        std::fs::write(&p, format!("kind = \"bcpqp\"\nrate = \"{rate}\"\nqueues = {queues}\nqueue_size = \"20kb\"\n")).unwrap();
        p.to_string_lossy().into_owned()
    };
    let (ok, out) = ratekit(&["tc", "attach", "--netns", &b.name, "--dev", "b0", "--config", &cfg("8mbit", 32)]);
    assert!(!ok && out.contains("queues = 32") && out.contains("at most 16 queues"), "{out}");
    let (ok, out) = ratekit(&["tc", "attach", "--netns", &b.name, "--dev", "b0", "--config", &cfg("8mbit", 4)]);
    assert!(ok && out.contains("attached bcpqp"), "{out}");
    let secs = 1.5;
    flood(&a, secs);
    let first = passed_bytes(&b.name);
    let (rate, queue) = (1_000_000.0, 20.0 * 1024.0);
    assert!((first as f64) < rate * secs * 1.05 + queue + 3000.0, "passed {first} B in {secs} s at 8mbit");
    assert!((first as f64) > rate * secs * 0.9, "passed only {first} B in {secs} s at 8mbit");
    let (ok, out) = ratekit(&["tc", "attach", "--netns", &b.name, "--dev", "b0", "--config", &cfg("16mbit", 4)]);
    assert!(ok && out.contains("state kept"), "{out}");
    assert_eq!(passed_bytes(&b.name), first);
    flood(&a, secs);
    let second = passed_bytes(&b.name) - first;
    assert!((second as f64) > 2.0 * rate * secs * 0.9 && (second as f64) < 2.0 * rate * secs * 1.05 + queue + 3000.0, "passed {second} B at 16mbit");
    let (ok, out) = ratekit(&["tc", "detach", "--netns", &b.name, "--dev", "b0"]);
    assert!(ok && out.contains("detached"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// FairPolicer as tc-BPF: a one-flow flood is held to rate + bucket, a live rate change keeps
/// the state, and a sketch beyond the program's bounds is refused naming the field.
#[test]
fn tc_fair_policer_holds_rate_and_updates_live() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: tc-BPF and namespaces need root");
        return;
    }
    let a = Netns::create("tcf-a").unwrap();
    let b = Netns::create("tcf-b").unwrap();
    veth(&a, "a0", "10.77.0.1/24", &b, "b0", "10.77.0.2/24").unwrap();
    let dir = std::env::temp_dir().join(format!("rk-tcf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = |rate: &str, width: u32| {
        let p = dir.join(format!("fp-{rate}-{width}.toml"));
        std::fs::write(&p, format!("kind = \"fair_policer\"\nrate = \"{rate}\"\nbucket = \"20kb\"\nsketch_width = {width}\n")).unwrap();
        p.to_string_lossy().into_owned()
    };
    let (ok, out) = ratekit(&["tc", "attach", "--netns", &b.name, "--dev", "b0", "--config", &cfg("8mbit", 8192)]);
    assert!(!ok && out.contains("sketch_width") && out.contains("at most 4 x 4096"), "{out}");
    let (ok, out) = ratekit(&["tc", "attach", "--netns", &b.name, "--dev", "b0", "--config", &cfg("8mbit", 1024)]);
    assert!(ok && out.contains("attached fair_policer"), "{out}");
    let secs = 1.5;
    flood(&a, secs);
    let first = passed_bytes(&b.name);
    let (rate, bucket) = (1_000_000.0, 20.0 * 1024.0);
    assert!((first as f64) < rate * secs * 1.05 + bucket + 3000.0, "passed {first} B in {secs} s at 8mbit");
    assert!((first as f64) > rate * secs * 0.9, "passed only {first} B in {secs} s at 8mbit");
    let (ok, out) = ratekit(&["tc", "attach", "--netns", &b.name, "--dev", "b0", "--config", &cfg("16mbit", 1024)]);
    assert!(ok && out.contains("state kept"), "{out}");
    assert_eq!(passed_bytes(&b.name), first);
    flood(&a, secs);
    let second = passed_bytes(&b.name) - first;
    assert!((second as f64) > 2.0 * rate * secs * 0.9 && (second as f64) < 2.0 * rate * secs * 1.05 + bucket + 3000.0, "passed {second} B at 16mbit");
    let (ok, out) = ratekit(&["tc", "detach", "--netns", &b.name, "--dev", "b0"]);
    assert!(ok && out.contains("detached"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
