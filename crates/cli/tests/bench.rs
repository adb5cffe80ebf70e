//! `ratekit bench --quick` smoke test: the command runs and its table has the expected shape
//! and sane figures. Speed itself is measured, never asserted.

use std::process::Command;

#[test]
fn quick_bench_writes_a_sane_table() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("bench.md");
    let out = Command::new(env!("CARGO_BIN_EXE_ratekit"))
        .args(["bench", "--quick", "--out", out_file.to_str().unwrap()])
        .output()
        .expect("run ratekit bench");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = std::fs::read_to_string(&out_file).unwrap();
    assert!(table.contains("Command: `ratekit bench --quick"), "{table}");
    assert!(table.contains("Machine: "), "{table}");
    let header = table.lines().find(|l| l.starts_with("| enforcer")).expect("table header");
    assert!(header.contains("| 1 aggregate | passed |") && header.contains("| 10k aggregates | passed |"), "{header}");
    for name in ["token_bucket", "pqp_fair", "fair_pqp_floor", "bcpqp_fair", "bcpqp_weighted", "bcpqp_nested", "fair_policer"] {
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row for {name}: {table}"));
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 6, "{row}");
        for cell in [cells[2], cells[4]] {
            let ns: f64 = cell.split_whitespace().next().unwrap().parse().unwrap_or_else(|_| panic!("{row}"));
            assert!(ns > 0.0 && ns < 1e6, "{row}");
            assert!(cell.contains('×'), "ratio missing: {row}");
        }
        // Offered at twice the rate: with one aggregate a policer passes roughly half.
        let passed: f64 = cells[3].trim_end_matches('%').parse().unwrap();
        assert!((35.0..=75.0).contains(&passed), "{row}");
    }
    let base = table.lines().find(|l| l.starts_with("| token_bucket |")).unwrap();
    assert!(base.contains("(1.00×)"), "{base}");
    // The shaper's table at 1 and 10k aggregates: woken every 32 arrivals (enqueue and dequeue
    // timed apart) and on every arrival (their total only).
    for n in ["1", "10k"] {
        for (batch, timed_apart) in [("32", true), ("1", false)] {
            let row = table
                .lines()
                .find(|l| l.starts_with(&format!("| {n} | {batch} |")))
                .unwrap_or_else(|| panic!("no shaper row for {n} aggregates, batch {batch}: {table}"));
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 9, "{row}");
            for c in &cells[2..4] {
                assert_eq!(c.parse::<f64>().map(|x| x > 0.0).unwrap_or(false), timed_apart, "{row}");
            }
            assert!(cells[4].parse::<f64>().unwrap() > 0.0, "{row}");
            assert!(cells[5].ends_with('×') && cells[6].ends_with('×'), "{row}");
        }
    }
}
