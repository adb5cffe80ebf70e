//! `ratekit tc attach|detach|stats`: the tc-BPF policers on a real interface (issue 5).

use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use ratekit_core::EnforcerConfig;
use ratekit_dataplane::maps::{Settings, BPF_DROP_REASONS};
use ratekit_dataplane::tc::{self, Attached, Direction, TcStats};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(ClapArgs)]
struct Hook {
    /// Network interface.
    #[arg(long)]
    dev: String,
    /// The interface lives in this network namespace (an `ip netns` name).
    #[arg(long)]
    netns: Option<String>,
    /// Police packets arriving on the interface (default).
    #[arg(long, conflicts_with = "egress")]
    ingress: bool,
    /// Police packets leaving the interface.
    #[arg(long)]
    egress: bool,
}

impl Hook {
    fn direction(&self) -> Direction {
        if self.egress {
            Direction::Egress
        } else {
            Direction::Ingress
        }
    }
    fn target(&self) -> tc::Hook {
        tc::Hook { netns: self.netns.clone(), dev: self.dev.clone(), dir: self.direction() }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Match {
    /// The aggregate is the destination address (downstream subscribers).
    Dst,
    /// The aggregate is the source address (upstream subscribers).
    Src,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Prometheus,
    Json,
}

#[derive(Subcommand)]
enum Action {
    /// Load and attach a policer; if the same kind is attached already, update its parameters
    /// live: counters are kept, and tokens, phantom queues and flows too unless the update
    /// changes what they are laid out for (queues, policy tree, queue size or flow bound of the
    /// exact-flow programs, fair classes, sketch or bucket), which restarts them.
    Attach {
        #[command(flatten)]
        hook: Hook,
        /// Enforcer config (the same TOML as replay and sim): token_bucket, pqp, bcpqp, fair_policer.
        #[arg(long)]
        config: PathBuf,
        /// Which address names a packet's aggregate.
        #[arg(long = "match", value_enum, default_value = "dst")]
        match_: Match,
        /// IPv4 aggregates are prefixes of this length (32: one per address).
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(0..=32))]
        prefix4: u32,
        /// IPv6 aggregates are prefixes of this length.
        #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(0..=128))]
        prefix6: u32,
        /// Most aggregates with state at once; packets of others pass unpoliced (and are counted).
        #[arg(long, default_value_t = 65536)]
        max_aggregates: u32,
    },
    /// Remove the policer and its pinned state.
    Detach {
        #[command(flatten)]
        hook: Hook,
    },
    /// Passed / dropped packets and bytes per aggregate.
    Stats {
        #[command(flatten)]
        hook: Hook,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.action {
        Action::Attach { hook, config, match_, prefix4, prefix6, max_aggregates } => {
            let text = std::fs::read_to_string(&config).with_context(|| format!("reading {}", config.display()))?;
            let cfg = EnforcerConfig::from_toml(&text).with_context(|| format!("in {}", config.display()))?;
            let settings = Settings { match_dst: matches!(match_, Match::Dst) as u32, prefix4, prefix6, test_clock: 0 };
            let dir = hook.direction();
            match tc::attach(&hook.target(), &cfg, settings, max_aggregates)? {
                Attached::Loaded { program } => println!("attached {program} to {} {}", hook.dev, dir.as_str()),
                Attached::Updated { program, state_kept: true } => {
                    println!("updated {program} on {} {} (state kept)", hook.dev, dir.as_str())
                }
                Attached::Updated { program, state_kept: false } => println!(
                    "updated {program} on {} {} (counters kept; queues restart at each aggregate's next packet: \
                     the update changed their layout)",
                    hook.dev,
                    dir.as_str()
                ),
            }
        }
        Action::Detach { hook } => {
            let dir = hook.direction();
            if tc::detach(&hook.target())? {
                println!("detached from {} {}", hook.dev, dir.as_str());
            } else {
                println!("nothing attached to {} {}", hook.dev, dir.as_str());
            }
        }
        Action::Stats { hook, format } => {
            let dir = hook.direction();
            let s = tc::stats(&hook.target())?;
            let out = match format {
                Format::Text => text(&s),
                Format::Prometheus => prometheus(&s, &hook.dev, dir),
                Format::Json => serde_json::to_string_pretty(&json(&s))? + "\n",
            };
            print!("{out}");
        }
    }
    Ok(())
}

fn text(s: &TcStats) -> String {
    let mut out = format!("program {}  untracked packets {}\n", s.program, s.untracked_packets);
    let _ = writeln!(out, "{:<40} {:>12} {:>14} {:>12} {:>14}", "aggregate", "passed_pkts", "passed_bytes", "dropped_pkts", "dropped_bytes");
    for (agg, st) in &s.aggregates {
        let _ = writeln!(
            out,
            "{:<40} {:>12} {:>14} {:>12} {:>14}",
            agg.ip().to_string(),
            st.passed_packets,
            st.passed_bytes,
            st.dropped_packets,
            st.dropped_bytes
        );
    }
    out
}

/// Prometheus text exposition format (version 0.0.4).
pub fn prometheus(s: &TcStats, dev: &str, dir: Direction) -> String {
    let mut out = String::new();
    let labels = |agg: &str| format!("dev=\"{dev}\",direction=\"{}\",program=\"{}\",aggregate=\"{agg}\"", dir.as_str(), s.program);
    let metrics: [(&str, &str, fn(&ratekit_dataplane::maps::Stats) -> u64); 4] = [
        ("ratekit_passed_packets_total", "Packets the tc-BPF policer passed.", |st| st.passed_packets),
        ("ratekit_passed_bytes_total", "IP bytes the tc-BPF policer passed.", |st| st.passed_bytes),
        ("ratekit_dropped_packets_total", "Packets the tc-BPF policer dropped.", |st| st.dropped_packets),
        ("ratekit_dropped_bytes_total", "IP bytes the tc-BPF policer dropped.", |st| st.dropped_bytes),
    ];
    for (name, help, get) in metrics {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (agg, st) in &s.aggregates {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(&agg.ip().to_string()), get(st));
        }
    }
    let name = "ratekit_drops_by_reason_total";
    let _ = writeln!(out, "# HELP {name} Packets dropped, by reason.\n# TYPE {name} counter");
    for (agg, st) in &s.aggregates {
        for (i, reason) in BPF_DROP_REASONS.iter().enumerate() {
            let _ = writeln!(out, "{name}{{{},reason=\"{}\"}} {}", labels(&agg.ip().to_string()), reason.as_str(), st.drops_by_reason[i]);
        }
    }
    let name = "ratekit_untracked_packets_total";
    let _ = writeln!(out, "# HELP {name} Packets passed unpoliced because the aggregate table was full.\n# TYPE {name} counter");
    let _ = writeln!(out, "{name}{{dev=\"{dev}\",direction=\"{}\",program=\"{}\"}} {}", dir.as_str(), s.program, s.untracked_packets);
    out
}

fn json(s: &TcStats) -> serde_json::Value {
    serde_json::json!({
        "program": s.program,
        "untracked_packets": s.untracked_packets,
        "aggregates": s.aggregates.iter().map(|(agg, st)| serde_json::json!({
            "aggregate": agg.ip().to_string(),
            "passed_packets": st.passed_packets,
            "passed_bytes": st.passed_bytes,
            "dropped_packets": st.dropped_packets,
            "dropped_bytes": st.dropped_bytes,
            "drops_by_reason": BPF_DROP_REASONS.iter().enumerate()
                .map(|(i, r)| (r.as_str().to_string(), serde_json::json!(st.drops_by_reason[i])))
                .collect::<serde_json::Map<_, _>>(),
        })).collect::<Vec<_>>(),
    })
}
