//! Impossible scenarios are rejected before running, and every error names the file and field.

fn err(text: &str) -> ratekit_lab::scenario::ScenarioError {
    match ratekit_lab::scenario::parse(text, "bad.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

const GOOD: &str = r#"
duration = "1s"
[enforcer]
kind = "token_bucket"
rate = "10mbit"
burst = "50kb"
[[aggregates]]
flows = [{ cc = "bbr", rtt = "10ms" }]
"#;

#[test]
fn the_reference_scenario_is_valid() {
    let r = ratekit_lab::scenario::parse(GOOD, "good.toml").unwrap();
    assert_eq!(r.aggregates[0].rate.bits_per_sec(), 10_000_000, "rate defaults to the enforcer's");
}

#[test]
fn errors_name_file_and_field() {
    let cases: [(&str, &str, &str); 21] = [
        ("zero rate", &GOOD.replace("rate = \"10mbit\"", "rate = \"0mbit\""), "enforcer.rate"),
        ("zero aggregate rate", &GOOD.replace("[[aggregates]]", "[[aggregates]]\nrate = 0"), "aggregates.rate"),
        ("negative delay", &GOOD.replace("rtt = \"10ms\"", "rtt = \"-10ms\""), "aggregates.flows.rtt"),
        ("unknown cc", &GOOD.replace("cc = \"bbr\"", "cc = \"bbr3\""), "aggregates.flows.cc"),
        ("aggregate without enforcer", &GOOD.replace("[enforcer]\nkind = \"token_bucket\"\nrate = \"10mbit\"\nburst = \"50kb\"\n", ""), "aggregates[0].enforcer"),
        ("unknown field", &GOOD.replace("duration", "durashun"), "durashun"),
        ("zero duration", &GOOD.replace("\"1s\"", "\"0s\""), "duration"),
        ("loss of 1", &GOOD.replace("[[aggregates]]", "[[aggregates]]\nloss = 1.0"), "aggregates[0].loss"),
        ("start after the end", &GOOD.replace("rtt = \"10ms\"", "rtt = \"10ms\", start = \"2s\""), "aggregates[0].flows[0].start"),
        ("stop before start", &GOOD.replace("rtt = \"10ms\"", "rtt = \"10ms\", start = \"0.5s\", stop = \"0.5s\""), "aggregates[0].flows[0].stop"),
        ("kernel HZ Linux does not offer", &GOOD.replace("rtt = \"10ms\"", "rtt = \"10ms\", kernel_hz = 200"), "aggregates[0].flows[0].kernel_hz"),
        ("ACK noise of a second", &GOOD.replace("rtt = \"10ms\"", "rtt = \"10ms\", ack_jitter = \"1s\""), "aggregates[0].flows[0].ack_jitter"),
        ("a drifting share above 1", &GOOD.replace("rtt = \"10ms\"", "rtt = \"10ms\", ack_jitter_slow = 1.5"), "aggregates[0].flows[0].ack_jitter_slow"),
        ("a drift without memory", &GOOD.replace("rtt = \"10ms\"", "rtt = \"10ms\", ack_jitter_memory = \"0s\""), "aggregates[0].flows[0].ack_jitter_memory"),
        ("a reader asleep for a second", &GOOD.replace("rtt = \"10ms\"", "rtt = \"10ms\", receiver_wakeup = \"1s\""), "aggregates[0].flows[0].receiver_wakeup"),
        ("link step to zero", &GOOD.replace("[[aggregates]]", "[[aggregates]]\nlink_steps = [{ at = \"0.5s\", rate = 0 }]"), "aggregates.link_steps.rate"),
        ("link step after the end", &GOOD.replace("[[aggregates]]", "[[aggregates]]\nlink_steps = [{ at = \"1s\", rate = \"5mbit\" }]"), "aggregates[0].link_steps[0].at"),
        (
            "link steps out of order",
            &GOOD.replace("[[aggregates]]", "[[aggregates]]\nlink_steps = [{ at = \"0.5s\", rate = \"5mbit\" }, { at = \"0.2s\", rate = \"8mbit\" }]"),
            "aggregates[0].link_steps[1].at",
        ),
        (
            "class fraction above 1",
            &GOOD.replace("cc = \"bbr\", rtt = \"10ms\"", "rtt = \"10ms\", app = { kind = \"lognormal\", rate = \"1mbit\", class_fraction = 1.5 }"),
            "aggregates[0].flows[0].app.class_fraction",
        ),
        (
            "periodic app of no transfers",
            &GOOD.replace("rtt = \"10ms\"", "rtt = \"10ms\", app = { kind = \"periodic\", size = \"100kb\", period = \"6s\", count = 0 }"),
            "aggregates[0].flows[0].app.count",
        ),
        (
            "periodic transfers all at once",
            &GOOD.replace("rtt = \"10ms\"", "rtt = \"10ms\", app = { kind = \"periodic\", size = \"100kb\", period = \"0s\", count = 5 }"),
            "aggregates[0].flows[0].app.period",
        ),
    ];
    for (what, text, field) in cases {
        let e = err(text);
        assert_eq!(e.file, "bad.toml", "{what}");
        assert!(e.field.contains(field), "{what}: field '{}' should name '{field}' ({e})", e.field);
        assert!(e.to_string().starts_with("bad.toml: "), "{what}: {e}");
    }
}

#[test]
fn a_missing_file_is_named() {
    let Err(e) = ratekit_lab::scenario::load(std::path::Path::new("/nonexistent/x.toml")) else { panic!("loaded") };
    assert!(e.to_string().contains("/nonexistent/x.toml"), "{e}");
}

#[test]
fn via_names_single_existing_aggregates_once() {
    let two = |first: &str, second: &str| {
        format!(
            "duration = \"1s\"\n[enforcer]\nkind = \"token_bucket\"\nrate = \"10mbit\"\nburst = \"50kb\"\n\
             [[aggregates]]\n{first}\n[[aggregates]]\n{second}\n"
        )
    };
    let ok = two("name = \"a\"\nflows = [{ rtt = \"10ms\", via = [\"b\"] }]", "name = \"b\"\nflows = [{ rtt = \"10ms\" }]");
    let r = ratekit_lab::scenario::parse(&ok, "ok.toml").unwrap();
    assert_eq!(r.aggregates[0].flows[0].via, vec![1]);
    let cases = [
        ("unknown name", two("flows = [{ rtt = \"10ms\", via = [\"c\"] }]", "name = \"b\"\nflows = [{ rtt = \"10ms\" }]"), "aggregates[0].flows[0].via", "no aggregate"),
        ("own aggregate", two("name = \"a\"\nflows = [{ rtt = \"10ms\", via = [\"a\"] }]", "flows = [{ rtt = \"10ms\" }]"), "aggregates[0].flows[0].via", "twice"),
        ("twice", two("flows = [{ rtt = \"10ms\", via = [\"b\", \"b\"] }]", "name = \"b\"\nflows = [{ rtt = \"10ms\" }]"), "aggregates[0].flows[0].via", "twice"),
        ("copies", two("flows = [{ rtt = \"10ms\", via = [\"b\"] }]", "name = \"b\"\ncount = 2\nflows = [{ rtt = \"10ms\" }]"), "aggregates[0].flows[0].via", "count = 2"),
        ("duplicate name", two("name = \"b\"\nflows = [{ rtt = \"10ms\" }]", "name = \"b\"\nflows = [{ rtt = \"10ms\" }]"), "aggregates[1].name", "two aggregates"),
    ];
    for (what, text, field, msg) in cases {
        let e = err(&text);
        assert_eq!(e.field, field, "{what}: {e}");
        assert!(e.message.contains(msg), "{what}: {e}");
    }
}

/// Every impossible video player is refused by the app field at fault.
#[test]
fn video_errors_name_the_field() {
    let video = |app: &str| GOOD.replace("rtt = \"10ms\"", &format!("rtt = \"10ms\", app = {{ kind = \"video\", {app} }}"));
    assert!(ratekit_lab::scenario::parse(&video("length = \"8s\", ladder = [\"300kbit\", \"1mbit\"]"), "good.toml").is_ok());
    let cases = [
        ("no ladder", "length = \"8s\", ladder = []", "app.ladder"),
        ("a ladder that descends", "length = \"8s\", ladder = [\"1mbit\", \"300kbit\"]", "app.ladder"),
        // serde reads a tagged table whole, so a bad value inside it is named by the table.
        ("a zero bitrate", "length = \"8s\", ladder = [0]", "app"),
        ("a partial segment", "length = \"9s\", ladder = [\"1mbit\"]", "app.length"),
        ("a zero segment", "length = \"8s\", segment = \"0s\", ladder = [\"1mbit\"]", "app.segment"),
        ("no room above the startup", "length = \"8s\", startup = \"8s\", max_buffer = \"10s\", ladder = [\"1mbit\"]", "app.max_buffer"),
        ("a safety above 1", "length = \"8s\", safety = 1.5, ladder = [\"1mbit\"]", "app.safety"),
        ("an empty history", "length = \"8s\", history = 0, ladder = [\"1mbit\"]", "app.history"),
        ("an unknown key", "length = \"8s\", ladders = [\"1mbit\"]", "app"),
    ];
    for (what, app, field) in cases {
        let e = err(&video(app));
        assert!(e.field.contains(field), "{what}: field '{}' should name '{field}' ({e})", e.field);
    }
}
