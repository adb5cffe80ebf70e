//! `ratekit demo` end to end: it runs, writes its files, and shows what BC-PQP does that a
//! plain policer does not.

use std::process::Command;

#[test]
fn demo_shows_bcpqp_fairer_than_the_token_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_ratekit"))
        .args(["demo", "--out", out_dir.to_str().unwrap(), "--seed", "3"])
        .output()
        .expect("run ratekit demo");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    for name in ["trace.csv", "flows.csv", "aggregates.csv", "table.txt", "demo.json"] {
        assert!(out_dir.join(name).is_file(), "{name} missing");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("demo.json")).unwrap()).unwrap();
    let rows = report["aggregates"].as_array().unwrap();
    let row = |enforcer: &str, aggregate: &str| {
        rows.iter()
            .find(|r| r["enforcer"] == enforcer && r["aggregate"] == aggregate)
            .unwrap_or_else(|| panic!("{enforcer} / {aggregate} missing from demo.json"))
    };
    for e in [
        "token_bucket",
        "fifo_shaper",
        "fair_policer",
        "pqp_fair",
        "bcpqp_fair",
        "bcpqp_exact",
        "bcpqp_weighted",
        "bcpqp_priority",
        "bcpqp_nested",
        "shaper_fair",
        "shaper_nested",
    ] {
        assert!(printed.contains(e), "{e} missing from the printed table");
        row(e, "mixed");
    }
    let jain = |e: &str| row(e, "mixed")["jain_index"].as_f64().unwrap();
    // Flows of 1, 3, 6 and 12 Mbit/s under 10 Mbit/s: the token bucket passes in proportion to
    // what is offered (J ≈ 0.72 against max-min), BC-PQP gives max-min shares (J ≈ 1).
    assert!(jain("bcpqp_fair") > 0.97, "{}", jain("bcpqp_fair"));
    assert!(jain("token_bucket") < 0.85, "{}", jain("token_bucket"));
    assert!(jain("bcpqp_fair") > jain("token_bucket"));
    let error = |e: &str, a: &str| row(e, a)["policy_error"].as_f64().unwrap();
    assert!(error("bcpqp_fair", "mixed") < 0.05 && error("token_bucket", "mixed") > 0.3);
    // Per-flow queues found by flow key give the same max-min shares without classes.
    assert!(jain("bcpqp_exact") > 0.97 && error("bcpqp_exact", "mixed") < 0.05, "{}", jain("bcpqp_exact"));

    // Weights 1:2:3:4 over four 5 Mbit/s flows: 1, 2, 3 and 4 Mbit/s.
    assert!(error("bcpqp_weighted", "equal") < 0.05, "{}", error("bcpqp_weighted", "equal"));
    // Every enforcer of the rate holds its aggregate near 10 Mbit/s; BC-PQP's burst control
    // keeps its peak 250 ms window well under PQP's (whose big queues absorb the first seconds).
    let passed = row("bcpqp_fair", "mixed")["passed_bps"].as_f64().unwrap();
    assert!((passed / 10e6 - 1.0).abs() < 0.05, "{passed}");
    let peak = |e: &str| row(e, "equal")["peak_window"].as_f64().unwrap();
    assert!(peak("bcpqp_fair") < peak("pqp_fair"), "{} vs {}", peak("bcpqp_fair"), peak("pqp_fair"));
    // The flows below the rate pass untouched through every enforcer of the fair family.
    let light = row("bcpqp_fair", "light");
    assert!(light["drop_rate"].as_f64().unwrap() < 0.01, "{light}");
}

#[test]
fn demo_is_deterministic_for_a_seed() {
    let dir = tempfile::tempdir().unwrap();
    let run = |sub: &str| {
        let d = dir.path().join(sub);
        let out = Command::new(env!("CARGO_BIN_EXE_ratekit"))
            .args(["demo", "--out", d.to_str().unwrap(), "--seed", "9", "--seconds", "2"])
            .output()
            .unwrap();
        assert!(out.status.success());
        std::fs::read_to_string(d.join("flows.csv")).unwrap()
    };
    assert_eq!(run("a"), run("b"));
}
