//! Many capture files through the detector (002 §2) into one results CSV: files are read in
//! parallel (one per worker) and streamed, so memory stays bounded by the largest application
//! segment. A file that cannot be read, or breaks part-way, gets an error row in the results
//! (after whatever rows it did yield); the batch counts as failed only if no file could be
//! read at all (`BatchTotals::ensure_readable`).

use crate::{analyze, FileReport, Options, Row};
use anyhow::{bail, Context};
use ratekit_lab::progress::Progress;
use rayon::prelude::*;
use std::path::{Path, PathBuf};

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

/// What a batch read.
#[derive(Debug, Clone, Default)]
pub struct BatchTotals {
    pub files: usize,
    pub readable: usize,
    pub packets: u64,
    pub segments: usize,
    pub policed: usize,
}

impl BatchTotals {
    /// The batch failed if no file could be read at all.
    pub fn ensure_readable(&self) -> anyhow::Result<()> {
        if self.readable == 0 {
            bail!("no input file could be read");
        }
        Ok(())
    }
}

/// Judges every capture in `inputs` (files, or directories walked for capture names) and
/// writes one row per segment to `out`. `jobs`: worker threads (None: one per core). Files
/// that cannot be read are reported through `progress.note` and get an error row.
pub fn detect_files(inputs: &[PathBuf], out: &Path, opts: &Options, jobs: Option<usize>, progress: &dyn Progress) -> anyhow::Result<BatchTotals> {
    let files = collect_inputs(inputs)?;
    if files.is_empty() {
        bail!("no capture files found in the given inputs");
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs.unwrap_or(0)).build()?;
    progress.start(files.len() as u64, "files");
    let reports: Vec<FileReport> = pool.install(|| {
        files
            .par_iter()
            .map(|f| {
                let report = match crate::reader::open(f) {
                    Ok(input) => analyze(input, opts),
                    Err(e) => FileReport { rows: Vec::new(), stats: Default::default(), error: Some(e) },
                };
                progress.advance(1);
                report
            })
            .collect()
    });
    progress.finish();
    let mut w = csv::Writer::from_path(out).with_context(|| format!("cannot write {}", out.display()))?;
    w.write_record(COLUMNS)?;
    let mut totals = BatchTotals { files: files.len(), ..BatchTotals::default() };
    for (file, report) in files.iter().zip(&reports) {
        let name = file.display().to_string();
        for row in &report.rows {
            w.write_record(record(&name, row))?;
            totals.segments += 1;
            totals.policed += usize::from(row.judgement.policed);
        }
        totals.packets += report.stats.frames;
        if report.stats.frames > 0 || report.error.is_none() {
            totals.readable += 1;
        }
        if let Some(e) = &report.error {
            progress.note(&format!("{name}: {e}"));
            let mut rec = vec![String::new(); COLUMNS.len()];
            rec[0] = name.clone();
            rec[15] = "read_error".into();
            rec[16] = e.to_string();
            w.write_record(&rec)?;
        }
    }
    w.flush()?;
    Ok(totals)
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
