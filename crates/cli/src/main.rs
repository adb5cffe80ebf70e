//! The `ratekit` command: thin drivers around ratekit-core's enforcers.

use clap::{Parser, Subcommand};

mod bench;
mod dask;
mod demo;
mod detect;
mod middlebox;
mod progress_bar;
mod replay;
mod reproduce;
mod sim;
mod sim_capture;
mod tc;
mod testbed;

#[derive(Parser)]
#[command(name = "ratekit", version, about = "Rate enforcement: BC-PQP, policers, shapers, CPQ, DSCD; simulator, replay, detector, data plane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay an arrivals CSV through an enforcer and write each packet's verdict.
    Replay(replay::Args),
    /// Show BC-PQP against the baseline enforcers on a generated overload trace.
    Demo(demo::Args),
    /// Measure ns per packet of every enforcer and write docs-ready tables.
    Bench(bench::Args),
    /// Run a simulation scenario (TOML) and write time series and summary.json.
    Sim(sim::Args),
    /// Find policers in pcap/pcapng traces and estimate their rate.
    Detect(detect::Args),
    /// Attach, detach or inspect the tc-BPF policers on a network interface.
    Tc(tc::Args),
    /// Forward packets between two interfaces through any enforcer, with delay and loss.
    Middlebox(middlebox::Args),
    /// Run a scenario with real Linux TCP between network namespaces.
    Testbed(testbed::Args),
    /// Re-run the papers' evaluations and write a report comparing every claim.
    Reproduce(reproduce::Args),
}

// The bench reports each enforcer's heap bytes per aggregate by counting allocations.
#[global_allocator]
static ALLOCATOR: ratekit_lab::bench::CountingAlloc = ratekit_lab::bench::CountingAlloc;

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(a) => replay::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Detect(a) => detect::run(a),
        Command::Tc(a) => tc::run(a),
        Command::Middlebox(a) => middlebox::run(a),
        Command::Testbed(a) => testbed::run(a),
        Command::Reproduce(a) => reproduce::run(a),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
