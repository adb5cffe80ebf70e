//! `ratekit detect`: find policers in packet traces (002 §2) and cluster their rates (§3.2).
//!
//! Files are read in parallel (one per core) and streamed, so memory stays bounded by the largest
//! application segment. A file that cannot be read, or breaks part-way, gets an error row in the
//! results (after whatever rows it did yield); the exit status is non-zero only if no file could
//! be read at all.

use crate::detect_clusters;
use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use ratekit_trace::{analyze, FileReport, Options, Row};
use rayon::prelude::*;
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

pub const COLUMNS: [&str; 17] = [
    "file",
    "flow",
    "segment",
    "direction",
    "client",
    "data_packets",
    "losses",
    "loss_rate",
    "policed",
    "rate_bps",
    "burst_bytes",
    "burst_throughput_bps",
    "median_rtt_ms",
    "pattern",
    "pass",
    "reason",
    "error",
];

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(results) = &args.clusters {
        let out = args.out.clone().unwrap_or_else(|| sibling(results, "-clusters.csv"));
        return detect_clusters::run(results, &args.group_by, args.coverage, &out);
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
        return crate::dask::run("detect", forwarded, address);
    }
    let files = collect_inputs(&args.inputs)?;
    if files.is_empty() {
        bail!("no capture files found in the given inputs");
    }
    let opts = Options { all_directions: args.all_directions, aggregate: !args.no_aggregate, ..Options::default() };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.jobs.unwrap_or(0)).build()?;
    let bar = ProgressBar::new(files.len() as u64);
    bar.set_style(ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} files {msg}")?.progress_chars("=> "));
    let reports: Vec<FileReport> = pool.install(|| {
        files
            .par_iter()
            .map(|f| {
                let report = match ratekit_trace::reader::open(f) {
                    Ok(input) => analyze(input, &opts),
                    Err(e) => FileReport { rows: Vec::new(), stats: Default::default(), error: Some(e) },
                };
                bar.inc(1);
                report
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut w = csv::Writer::from_path(&out).with_context(|| format!("cannot write {}", out.display()))?;
    w.write_record(COLUMNS)?;
    let (mut readable, mut segments, mut policed, mut packets) = (0, 0, 0, 0u64);
    for (file, report) in files.iter().zip(&reports) {
        let name = file.display().to_string();
        for row in &report.rows {
            w.write_record(record(&name, row))?;
            segments += 1;
            policed += usize::from(row.judgement.policed);
        }
        packets += report.stats.frames;
        if report.stats.frames > 0 || report.error.is_none() {
            readable += 1;
        }
        if let Some(e) = &report.error {
            eprintln!("{name}: {e}");
            let mut rec = vec![String::new(); COLUMNS.len()];
            rec[0] = name.clone();
            rec[15] = "read_error".into();
            rec[16] = e.to_string();
            w.write_record(&rec)?;
        }
    }
    w.flush()?;
    eprintln!(
        "{} files ({readable} readable), {packets} packets, {segments} segments, {policed} policed -> {}",
        files.len(),
        out.display()
    );
    if readable == 0 {
        bail!("no input file could be read");
    }
    Ok(())
}

fn record(file: &str, row: &Row) -> Vec<String> {
    let j = &row.judgement;
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.0}")).unwrap_or_default();
    vec![
        file.to_string(),
        row.flow.clone(),
        row.segment.clone(),
        row.direction.to_string(),
        row.client.clone(),
        j.data_packets.to_string(),
        j.losses.to_string(),
        format!("{:.4}", j.loss_rate()),
        j.policed.to_string(),
        opt(j.rate_bps),
        j.burst_bytes.to_string(),
        opt(j.burst_throughput_bps),
        j.median_rtt_ns.map(|r| format!("{:.3}", r as f64 / 1e6)).unwrap_or_default(),
        j.pattern.map(|p| p.as_str()).unwrap_or("").to_string(),
        j.pass.to_string(),
        j.reason.as_str().to_string(),
        String::new(),
    ]
}

/// Files as given, and directories walked recursively for capture-looking names, sorted.
fn collect_inputs(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).with_context(|| format!("cannot read {}", input.display()))?;
        if meta.is_dir() {
            walk(input, &mut files)?;
        } else {
            files.push(input.clone());
        }
    }
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, files)?;
        } else if looks_like_capture(&path) {
            files.push(path);
        }
    }
    Ok(())
}

fn looks_like_capture(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    [".pcap", ".pcapng", ".cap"].iter().any(|ext| name.ends_with(ext))
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "results".into());
    path.with_file_name(format!("{stem}{suffix}"))
}
