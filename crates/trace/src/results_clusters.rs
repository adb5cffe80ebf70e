//! `ratekit detect --clusters RESULTS.csv --group-by COLUMN`: 002 §3.2 rate clusters per group.
//!
//! Reads the policed rows of a results CSV (per-segment rows; the per-client aggregate rows are
//! left out so a policer is not counted twice), groups their rates by any column, and writes one
//! row per chosen cluster: the group, how many policed rates it has, how many clusters cover
//! the requested fraction, and each cluster's centre and count, in the greedy order.

use anyhow::{bail, Context};
use crate::cluster::{rate_clusters, DEFAULT_WIDTH};
use std::collections::BTreeMap;
use std::path::Path;

/// Writes the rate clusters of the policed rows of `results`, grouped by column `group_by`, to `out`.
pub fn run(results: &Path, group_by: &str, coverage: f64, out: &Path) -> anyhow::Result<()> {
    if !(0.0..=1.0).contains(&coverage) {
        bail!("--coverage must lie in [0, 1]");
    }
    let mut rdr = csv::Reader::from_path(results).with_context(|| format!("cannot read {}", results.display()))?;
    let headers = rdr.headers()?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let Some(group_col) = col(group_by) else {
        bail!("{}: no column '{group_by}' (columns: {})", results.display(), headers.iter().collect::<Vec<_>>().join(", "));
    };
    let (Some(policed_col), Some(rate_col)) = (col("policed"), col("rate_bps")) else {
        bail!("{}: not a `ratekit detect` results file (needs policed and rate_bps columns)", results.display());
    };
    let direction_col = col("direction");
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (line, rec) in rdr.records().enumerate() {
        let rec = rec.with_context(|| format!("{}: bad row {}", results.display(), line + 2))?;
        if rec.get(policed_col) != Some("true") || direction_col.and_then(|c| rec.get(c)) == Some("aggregate") {
            continue;
        }
        let Some(rate) = rec.get(rate_col).and_then(|r| r.parse::<f64>().ok()) else { continue };
        groups.entry(rec.get(group_col).unwrap_or("").to_string()).or_default().push(rate);
    }
    let mut w = csv::Writer::from_path(out).with_context(|| format!("cannot write {}", out.display()))?;
    w.write_record(["group", "policed_segments", "clusters_needed", "cluster", "centre_bps", "count"])?;
    for (group, rates) in &groups {
        let clusters = rate_clusters(rates, DEFAULT_WIDTH, coverage);
        for (i, c) in clusters.iter().enumerate() {
            w.write_record([
                group.clone(),
                rates.len().to_string(),
                clusters.len().to_string(),
                (i + 1).to_string(),
                format!("{:.0}", c.centre),
                c.count.to_string(),
            ])?;
        }
        eprintln!("{group}: {} policed segments, {} clusters cover {:.0} %", rates.len(), clusters.len(), coverage * 100.0);
    }
    w.flush()?;
    eprintln!("{} groups -> {}", groups.len(), out.display());
    Ok(())
}
