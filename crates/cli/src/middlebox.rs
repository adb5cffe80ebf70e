//! `ratekit middlebox`: a userspace forwarder between two interfaces with delay, random loss
//! and any ratekit-core enforcer (issue 5, deliverable 4).

use anyhow::Context;
use ratekit_dataplane::maps::Settings;
use ratekit_dataplane::pipeline::PipelineConfig;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    /// Interface packets arrive on (forward direction: enforced).
    #[arg(long = "in")]
    in_if: String,
    /// Interface packets leave on (reverse direction: delay only).
    #[arg(long = "out")]
    out_if: String,
    /// One-way delay added in each direction (e.g. "10ms").
    #[arg(long, default_value = "0ms")]
    delay: String,
    /// Random loss probability in the forward direction, before the enforcer.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Enforcer config (any kind: policers, shaper, fifo, red, cpq, dscd). None: forward only.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Rate of the link behind a queueing enforcer (RED, CPQ and DSCD need one).
    #[arg(long)]
    link_rate: Option<String>,
    /// Aggregate by source address instead of destination.
    #[arg(long)]
    match_src: bool,
    /// Seed of the loss process.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this long (default: run until Ctrl-C).
    #[arg(long)]
    duration: Option<String>,
    /// Write the final counters here as JSON.
    #[arg(long)]
    report: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let enforcer = match &args.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Some(ratekit_core::EnforcerConfig::from_toml(&text).with_context(|| format!("in {}", p.display()))?)
        }
        None => None,
    };
    let link_rate = args.link_rate.as_deref().map(ratekit_core::units::parse_rate).transpose().context("--link-rate")?;
    let cfg = PipelineConfig {
        enforcer,
        settings: Settings { match_dst: (!args.match_src) as u32, prefix4: 32, prefix6: 128, test_clock: 0 },
        delay: ratekit_core::units::parse_duration(&args.delay).context("--delay")?,
        loss: args.loss,
        seed: args.seed,
        link_rate,
        ..Default::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let duration = args.duration.as_deref().map(ratekit_core::units::parse_duration).transpose().context("--duration")?;
        install_stop(stop.clone());
        if let Some(d) = duration {
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_nanos(d.0));
                stop.store(true, Ordering::Relaxed);
            });
        }
    }
    let report = ratekit_dataplane::middlebox::run(&args.in_if, &args.out_if, cfg, &stop)?;
    let json = serde_json::to_string_pretty(&report)?;
    match &args.report {
        Some(p) => std::fs::write(p, json + "\n").with_context(|| format!("writing {}", p.display()))?,
        None => println!("{json}"),
    }
    Ok(())
}

/// SIGINT / SIGTERM end the run cleanly (the report is still written).
fn install_stop(stop: Arc<AtomicBool>) {
    static STOP: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    let _ = STOP.set(stop);
    extern "C" fn on_signal(_: libc::c_int) {
        if let Some(s) = STOP.get() {
            s.store(true, Ordering::Relaxed);
        }
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}
