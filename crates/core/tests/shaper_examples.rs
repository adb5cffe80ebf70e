//! The shipped queueing-enforcer examples parse, validate and build (with a link where needed).

use ratekit_core::{Enforcer, EnforcerConfig, Rate};

#[test]
fn queueing_examples_build() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/enforcers");
    for (name, kind) in [
        ("shaper-fair", "shaper"),
        ("shaper-weighted", "shaper"),
        ("fifo", "fifo"),
        ("red", "red"),
        ("cpq-afcp-a", "cpq"),
        ("dscd", "dscd"),
    ] {
        let text = std::fs::read_to_string(format!("{dir}/{name}.toml")).unwrap();
        let cfg = EnforcerConfig::from_toml(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(cfg.kind(), kind);
        assert!(cfg.is_queueing());
        let built = cfg.build(Some(Rate::from_mbps(10.0))).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(matches!(built, Enforcer::Queue(_)), "{name}");
    }
}
