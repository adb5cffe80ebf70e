//! `ratekit detect`: arguments for ratekit_trace::batch (find policers in packet traces, 002 §2)
//! and ratekit_trace::results_clusters (cluster their rates, §3.2). The exit status is non-zero
//! only if no file could be read at all.

use crate::progress_bar::Bar;
use crate::dask;
use anyhow::bail;
use ratekit_trace::{batch, results_clusters, Options};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// pcap / pcapng files (optionally gzipped) or directories, read recursively.
    #[arg(required_unless_present = "clusters")]
    pub inputs: Vec<PathBuf>,
    /// Results CSV: one row per segment (with --clusters: the clusters CSV, default RESULTS-clusters.csv).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Cluster the policing rates of an existing results CSV instead of reading traces.
    #[arg(long, value_name = "RESULTS.csv", conflicts_with = "inputs")]
    pub clusters: Option<PathBuf>,
    /// Column of the results to group rates by (e.g. client, file, or a column you added such as asn).
    #[arg(long, default_value = "file", requires = "clusters")]
    pub group_by: String,
    /// Fraction of each group's policed rates the clusters must cover (002 §3.2: 0.75).
    #[arg(long, default_value_t = ratekit_trace::cluster::DEFAULT_COVERAGE, requires = "clusters")]
    pub coverage: f64,
    /// Also report client-to-server data (uploads).
    #[arg(long)]
    pub all_directions: bool,
    /// Do not judge the flows towards each client together.
    #[arg(long)]
    pub no_aggregate: bool,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Judge the files on the Dask cluster at ADDRESS (one task per file) through the Python
    /// package; --out is then a directory of Parquet partitions (docs/python.md).
    #[arg(long, value_name = "ADDRESS", conflicts_with = "clusters")]
    pub dask: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(results) = &args.clusters {
        let out = args.out.clone().unwrap_or_else(|| sibling(results, "-clusters.csv"));
        return results_clusters::run(results, &args.group_by, args.coverage, &out);
    }
    let Some(out) = args.out.clone() else { bail!("--out RESULTS.csv is required") };
    if let Some(address) = &args.dask {
        let mut forwarded: Vec<std::ffi::OsString> = args.inputs.iter().map(|p| p.clone().into_os_string()).collect();
        forwarded.extend(["--out".into(), out.into_os_string()]);
        if args.all_directions {
            forwarded.push("--all-directions".into());
        }
        if args.no_aggregate {
            forwarded.push("--no-aggregate".into());
        }
        return dask::run("detect", forwarded, address);
    }
    let opts = Options { all_directions: args.all_directions, aggregate: !args.no_aggregate, ..Options::default() };
    let totals = batch::detect_files(&args.inputs, &out, &opts, args.jobs, &Bar::new("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}"))?;
    eprintln!(
        "{} files ({} readable), {} packets, {} segments, {} policed -> {}",
        totals.files,
        totals.readable,
        totals.packets,
        totals.segments,
        totals.policed,
        out.display()
    );
    totals.ensure_readable()
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "results".into());
    path.with_file_name(format!("{stem}{suffix}"))
}
