//! `ratekit replay`: arguments for ratekit_lab::replay, and its summary printed.

use crate::progress_bar::Bar;
use ratekit_core::Rate;
use ratekit_lab::replay::{self, ReplayOptions};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Enforcer config (TOML), e.g. examples/enforcers/bcpqp-fair.toml.
    #[arg(long)]
    pub config: PathBuf,
    /// Arrivals CSV with header time_ns,aggregate,flow,bytes[,class] (rows sorted by time).
    #[arg(long)]
    pub input: PathBuf,
    /// Verdicts CSV: the input rows in input order plus `verdict` (and `departure_ns` for queueing
    /// enforcers). The summary goes beside it as <name>.summary.json.
    #[arg(long)]
    pub output: PathBuf,
    /// Rate of the link each aggregate's queueing enforcer feeds (tc units, e.g. 10mbit).
    #[arg(long, value_parser = parse_rate_arg)]
    pub link_rate: Option<Rate>,
    /// Aggregates and flows shown in the printed summary (the JSON has all).
    #[arg(long, default_value_t = 20)]
    pub show: usize,
}

pub fn parse_rate_arg(s: &str) -> Result<Rate, String> {
    ratekit_core::units::parse_rate(s).map_err(|e| e.to_string())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let options = ReplayOptions { config: args.config, input: args.input, output: args.output, link_rate: args.link_rate };
    let report = replay::run(&options, &Bar::bytes())?;
    print!("{}", report.summary.render(args.show));
    println!("wrote {} and {}", options.output.display(), report.summary_file.display());
    Ok(())
}
