//! `ratekit demo`: arguments for ratekit_lab::demo, and its table printed.

use crate::progress_bar::Bar;
use ratekit_lab::demo::{self, DemoOptions};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Directory for trace.csv, flows.csv, aggregates.csv, table.txt and demo.json.
    #[arg(long, default_value = "out/demo")]
    pub out: PathBuf,
    /// Seed of the trace's arrival process.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Trace length in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let options = DemoOptions { out: args.out, seed: args.seed, seconds: args.seconds };
    print!("{}", demo::run(&options, &Bar::steps())?);
    println!(
        "wrote {0}/trace.csv (replay it with `ratekit replay`), {0}/flows.csv, {0}/aggregates.csv, {0}/table.txt, {0}/demo.json",
        options.out.display()
    );
    Ok(())
}
