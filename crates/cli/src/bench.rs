//! `ratekit bench`: arguments for ratekit_lab::bench, and its table printed.

use crate::progress_bar::Bar;
use ratekit_lab::bench::{self, BenchOptions};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// A few seconds instead of minutes: fewer packets, 1 and 10k aggregates only. For smoke
    /// tests; the figures are noisier.
    #[arg(long)]
    pub quick: bool,
    /// Markdown file for the results table (also printed).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of the arrival arrays.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Measure only these enforcers (comma-separated names from the table, `shaper` for the
    /// shaper), e.g. to profile one with perf. The token bucket is always kept as the baseline.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Aggregate counts to measure instead of the default 1, 10k (and 1M without `--quick`),
    /// e.g. `--aggregates 1` for an instruction count under callgrind.
    #[arg(long, value_delimiter = ',')]
    pub aggregates: Vec<u32>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let options = BenchOptions { quick: args.quick, out: args.out, seed: args.seed, only: args.only, aggregates: args.aggregates };
    print!("{}", bench::run(&options, &Bar::steps())?);
    if let Some(out) = &options.out {
        println!("wrote {}", out.display());
    }
    Ok(())
}
