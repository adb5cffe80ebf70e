//! `ratekit replay` end to end: the real binary on small hand-made inputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TOKEN_BUCKET: &str = "kind = \"token_bucket\"\nrate = 8000\nburst = 1500\n";

fn ratekit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ratekit")).args(args).output().expect("run ratekit")
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new(config: &str, input: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("enforcer.toml"), config).unwrap();
        std::fs::write(dir.path().join("in.csv"), input).unwrap();
        Case { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn replay(&self, extra: &[&str]) -> Output {
        let (c, i, o) = (self.path("enforcer.toml"), self.path("in.csv"), self.path("out.csv"));
        let mut args = vec!["replay", "--config", c.to_str().unwrap(), "--input", i.to_str().unwrap(), "--output", o.to_str().unwrap()];
        args.extend_from_slice(extra);
        ratekit(&args)
    }

    /// Files in the case's directory other than the two inputs.
    fn outputs(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "enforcer.toml" && n != "in.csv")
            .collect();
        v.sort();
        v
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// 1000 B/s, 1500 B bucket, full at start; aggregates have buckets of their own.
/// t=0 a 1000 B: 1500 tokens → pass (500 left); t=0 a 1000 B: drop; t=0.5 s: 500 + 500 = 1000
/// → pass (0 left); t=0.5 s b 1500 B: b's own full bucket → pass; t=0.6 s a 200 B: 100 tokens
/// → drop; t=2 s a 1500 B: refilled to the 1500 cap → pass.
#[test]
fn token_bucket_verdicts_match_hand_computation_in_input_order() {
    let input = "time_ns,aggregate,flow,bytes,note\n\
                 0,a,1,1000,first\n\
                 0,a,2,1000,second\n\
                 500000000,a,1,1000,third\n\
                 500000000,b,1,1500,\"quoted, kept\"\n\
                 600000000,a,1,200,fifth\n\
                 2000000000,a,2,1500,last\n";
    let case = Case::new(TOKEN_BUCKET, input);
    let out = case.replay(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = "time_ns,aggregate,flow,bytes,note,verdict\n\
                    0,a,1,1000,first,pass\n\
                    0,a,2,1000,second,drop\n\
                    500000000,a,1,1000,third,pass\n\
                    500000000,b,1,1500,\"quoted, kept\",pass\n\
                    600000000,a,1,200,fifth,drop\n\
                    2000000000,a,2,1500,last,pass\n";
    assert_eq!(read(&case.path("out.csv")), expected);

    let summary: serde_json::Value = serde_json::from_str(&read(&case.path("out.summary.json"))).unwrap();
    assert_eq!(summary["enforcer"], "token_bucket");
    assert_eq!(summary["offered_packets"], 6);
    assert_eq!(summary["passed_packets"], 4);
    assert_eq!(summary["drops"]["overlimit"], 2);
    let a = &summary["aggregates"][0];
    assert_eq!(a["aggregate"], "a");
    assert_eq!(a["passed_bytes"], 3500);
    // 3500 B over the 2 s trace = 14 kbit/s.
    assert_eq!(a["passed_bps"], 14000.0);
    assert_eq!(a["flows"][1]["flow"], "2");
    assert_eq!(a["flows"][1]["drop_rate"], 0.5);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("14.000kbit"), "{printed}");
    assert_eq!(case.outputs(), vec!["out.csv", "out.summary.json"]);
}

/// Every bad input: an error naming the line or field, a non-zero exit and no output at all.
#[test]
fn bad_inputs_fail_cleanly_without_output() {
    let header = "time_ns,aggregate,flow,bytes,class\n";
    // A long valid prefix, so the bad row comes after output has been written to disk.
    let prefix: String = (0..5000).map(|i| format!("{i},a,{},100,0\n", i % 7)).collect();
    let cases: Vec<(&str, String, &[&str])> = vec![
        (TOKEN_BUCKET, format!("{header}{prefix}4000,a,1,100,0\n"), &["line 5002", "time_ns", "earlier"]),
        (TOKEN_BUCKET, format!("{header}{prefix}6000,a,1\n"), &["line 5002", "fields"]),
        (TOKEN_BUCKET, format!("{header}{prefix}6000,a,1,big,0\n"), &["line 5002", "bytes"]),
        (TOKEN_BUCKET, format!("{header}1,a,1,-100,0\n"), &["line 2", "bytes"]),
        (TOKEN_BUCKET, "time,aggregate,flow,bytes\n1,a,1,100\n".into(), &["time_ns"]),
        ("kind = \"token_bucket\"\nrate = \"0mbit\"\nburst = 1500\n", format!("{header}1,a,1,100,0\n"), &["rate"]),
        ("kind = \"token_bucket\"\nrate = -5\nburst = 1500\n", format!("{header}1,a,1,100,0\n"), &["rate"]),
        ("kind = \"token_bucket\"\nrate = \"10mbit\"\n", format!("{header}1,a,1,100,0\n"), &["burst"]),
        (
            "kind = \"pqp\"\nrate = \"10mbit\"\nqueues = 2\nqueue_size = 100000\npolicy = \"roundrobin\"\n",
            format!("{header}1,a,1,100,0\n"),
            &["policy", "roundrobin"],
        ),
        (
            "kind = \"pqp\"\nrate = \"10mbit\"\nqueues = 2\nqueue_size = 100000\nclassify = \"class\"\npolicy = \"priority\"\n",
            format!("{header}{prefix}6000,a,1,100,2\n"),
            &["line 5002", "class"],
        ),
    ];
    for (config, input, needles) in cases {
        let case = Case::new(config, &input);
        let out = case.replay(&[]);
        let err = stderr(&out);
        assert!(!out.status.success(), "expected failure for {needles:?}");
        for n in needles {
            assert!(err.contains(n), "error should mention '{n}': {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(case.outputs(), Vec::<String>::new(), "no output may be left for {needles:?}");
    }
}

#[test]
fn missing_files_are_named() {
    let case = Case::new(TOKEN_BUCKET, "time_ns,aggregate,flow,bytes\n");
    let out = ratekit(&["replay", "--config", "/nonexistent/x.toml", "--input", "in.csv", "--output", "o.csv"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("/nonexistent/x.toml"), "{}", stderr(&out));
    let out = case.replay(&["--link-rate", "0mbit"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("link-rate"), "{}", stderr(&out));
    assert_eq!(case.outputs(), Vec::<String>::new());
}

/// A tbf-style FIFO shaper of 1000 B/s with a 1000 B bucket (full at start) and 2000 B of queue.
/// Four 1000 B packets of `a` at t = 0: the first leaves at once, the next two when the bucket
/// has refilled (1 s, 2 s), the fourth finds the queue full. `b` has its own shaper.
/// With a 2000 B/s link after each shaper, every departure is 0.5 s (one packet time) later.
#[test]
fn fifo_shaper_departures_with_and_without_a_link() {
    let config = "kind = \"fifo\"\nrate = 8000\nburst = 1000\nlimit = 2000\n";
    let input = "time_ns,aggregate,flow,bytes\n0,a,1,1000\n0,a,1,1000\n0,a,2,1000\n0,a,2,1000\n200000000,b,1,1000\n";
    let case = Case::new(config, input);
    let out = case.replay(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        read(&case.path("out.csv")),
        "time_ns,aggregate,flow,bytes,verdict,departure_ns\n\
         0,a,1,1000,pass,0\n\
         0,a,1,1000,pass,1000000000\n\
         0,a,2,1000,pass,2000000000\n\
         0,a,2,1000,drop,\n\
         200000000,b,1,1000,pass,200000000\n"
    );
    let summary: serde_json::Value = serde_json::from_str(&read(&case.path("out.summary.json"))).unwrap();
    assert_eq!(summary["drops"]["queue_full"], 1);

    let out = case.replay(&["--link-rate", "16kbit"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        read(&case.path("out.csv")),
        "time_ns,aggregate,flow,bytes,verdict,departure_ns\n\
         0,a,1,1000,pass,500000000\n\
         0,a,1,1000,pass,1500000000\n\
         0,a,2,1000,pass,2500000000\n\
         0,a,2,1000,drop,\n\
         200000000,b,1,1000,pass,700000000\n"
    );
}
