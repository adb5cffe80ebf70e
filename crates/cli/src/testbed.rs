//! `ratekit testbed run`: a scenario with real Linux TCP between namespaces (issue 5).

use anyhow::Context;
use ratekit_dataplane::testbed;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Build sender, middlebox and receiver namespaces, run the scenario's flows through the
    /// enforcer, write summary.json (the same fields as `ratekit sim`) and windows.csv, and tear
    /// everything down, also on error or Ctrl-C. Needs root.
    Run {
        /// Scenario TOML: a `ratekit sim` scenario with an optional [testbed] table (enforcer_at =
        /// "middlebox", "tc", "tbf" or "htb"; pcap = true for a sender-side capture). Keys of the
        /// simulated path (link_rate, buffer, host_rate) are ignored; a `secondary` link becomes a
        /// tbf behind the enforcer (tc or middlebox placement, one aggregate); each flow's
        /// start_jitter is drawn from the seed as in the simulator; what
        /// the testbed cannot run (a cc other than cubic/reno/bbr, lognormal or Pareto apps, stop,
        /// via, customer, pacing, more than 9 distinct RTTs) is an error naming the field.
        scenario: PathBuf,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Override the scenario's duration (e.g. "5s") for a quick look.
        #[arg(long)]
        duration: Option<String>,
    },
    /// Delete namespaces left behind by testbed runs that were killed with SIGKILL.
    Sweep,
    /// Print the scenario as `ratekit sim` reads it, after checking it. The simulator reads the
    /// testbed's file as is (of the [testbed] table it uses only enforcer_at, to put the forward
    /// delay where the testbed has it), so this prints the file unchanged; it stays for scripts
    /// that convert explicitly (scripts/calibrate.py).
    SimScenario { scenario: PathBuf },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.action {
        Action::Run { scenario, out, duration } => {
            let mut plan = testbed::plan::load(&scenario)?;
            let sc = &mut plan.resolved.scenario;
            if let Some(d) = duration {
                let d = ratekit_core::units::parse_duration(&d).context("--duration")?;
                anyhow::ensure!(d > sc.measure.warmup, "--duration must be longer than measure.warmup");
                sc.duration = d;
            }
            if sc.name.is_empty() {
                sc.name = scenario.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            }
            let summary = testbed::run(&plan, &out, |msg| eprintln!("testbed: {msg}"))?;
            if let Some(tb) = &summary.testbed {
                let forwarded: u64 = tb.middlebox_forwarded.iter().sum();
                // One frame in a thousand over 1 ms late is about the worst seen on a quiet 2-core machine.
                if tb.middlebox_late_frames[1] * 1000 > forwarded {
                    eprintln!(
                        "testbed: warning: {} of {forwarded} frames left the delay line over 1 ms late (worst {} µs): the machine was too busy for this run, whose bursts are partly the middlebox's",
                        tb.middlebox_late_frames[1], tb.middlebox_max_late_us
                    );
                }
            }
            for a in &summary.aggregates {
                println!(
                    "aggregate {}: {}  throughput/rate mean {:.3} p99 {:.3}  Jain {:.3}  drop rate {:.4}  shares {:?}",
                    a.id,
                    a.enforcer,
                    a.mean_normalized_throughput,
                    a.p99_normalized_throughput,
                    a.mean_jain,
                    a.drop_rate,
                    a.shares.iter().flatten().map(|s| (s * 1000.0).round() / 1000.0).collect::<Vec<_>>()
                );
            }
            println!("wrote {}", out.join("summary.json").display());
        }
        Action::SimScenario { scenario } => {
            let text = std::fs::read_to_string(&scenario).with_context(|| format!("reading {}", scenario.display()))?;
            ratekit_lab::scenario::parse(&text, &scenario.display().to_string())?;
            print!("{text}");
        }
        Action::Sweep => {
            for ns in ratekit_dataplane::netns::sweep_stale() {
                println!("removed {ns}");
            }
        }
    }
    Ok(())
}
