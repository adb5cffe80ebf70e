//! Runs one scenario in memory and prints its summary: for measuring the engine alone
//! (`cargo run --release -p ratekit-sim --example simrun -- FILE [SEED]`).

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: simrun SCENARIO.toml [SEED]");
    let seed = args.next().map(|s| s.parse().expect("seed is an integer"));
    let r = ratekit_lab::scenario::load(std::path::Path::new(&path)).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let (s, _) = ratekit_sim::run(&r, seed, ratekit_sim::RunOptions::default()).expect("run");
    println!("{}", serde_json::to_string_pretty(&s).expect("json"));
}
