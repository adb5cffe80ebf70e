//! The native half of the `ratekit` Python package (python/ratekit wraps it with types and
//! docstrings). Every entry point works on whole arrays or files and releases the GIL while it
//! runs, so Dask threads and workers run in parallel and no Python code runs per packet.
//!
//! Replay's engine, its CSV reader and the sweep expander come from ratekit-lab, the detect
//! batch from ratekit-trace: the same code the `ratekit` command calls, so Python and the CLI
//! give identical results.

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use std::path::PathBuf;

use ratekit_lab::progress::Silent;
use ratekit_lab::{csv_io, replay, sweep as sim_sweep};
use ratekit_trace::{batch as detect, results_clusters as detect_clusters};

mod batch;

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Replays arrays of arrivals through one enforcer per aggregate (see `batch`).
#[pyfunction]
#[pyo3(signature = (config, time_ns, aggregate, flow, bytes, class_=None, link_rate=None))]
#[allow(clippy::too_many_arguments)]
fn enforce<'py>(
    py: Python<'py>,
    config: &str,
    time_ns: PyReadonlyArray1<'py, u64>,
    aggregate: PyReadonlyArray1<'py, u64>,
    flow: PyReadonlyArray1<'py, u64>,
    bytes: PyReadonlyArray1<'py, u32>,
    class_: Option<PyReadonlyArray1<'py, u16>>,
    link_rate: Option<&str>,
) -> PyResult<(Bound<'py, PyArray1<u8>>, Bound<'py, PyArray1<i64>>, bool)> {
    let input = batch::Input {
        time_ns: time_ns.as_slice()?,
        aggregate: aggregate.as_slice()?,
        flow: flow.as_slice()?,
        bytes: bytes.as_slice()?,
        class: match &class_ {
            Some(c) => Some(c.as_slice()?),
            None => None,
        },
    };
    let out = py.allow_threads(|| batch::run(config, link_rate, &input)).map_err(value_error)?;
    Ok((PyArray1::from_vec(py, out.verdict), PyArray1::from_vec(py, out.departure_ns), out.queueing))
}

/// The flow keys the enforcers hash, as `ratekit replay` derives them from the flow column's text.
#[pyfunction]
fn flow_keys<'py>(py: Python<'py>, flows: Vec<String>) -> Bound<'py, PyArray1<u64>> {
    PyArray1::from_vec(py, flows.iter().map(|f| csv_io::flow_key(f.trim())).collect())
}

/// Checks a config's TOML; returns its kind and whether it queues.
#[pyfunction]
fn check_config(config: &str) -> PyResult<(String, bool)> {
    let c = ratekit_core::EnforcerConfig::from_toml(config).map_err(value_error)?;
    Ok((c.kind().to_string(), c.is_queueing()))
}

/// Runs one scenario (TOML text) writing flows.csv, aggregates.csv and summary.json to `out_dir`,
/// exactly as `ratekit sim` does; returns summary.json's text.
#[pyfunction]
#[pyo3(signature = (scenario, name, out_dir, seed=None))]
fn simulate(py: Python<'_>, scenario: &str, name: &str, out_dir: PathBuf, seed: Option<u64>) -> PyResult<String> {
    py.allow_threads(|| {
        let resolved = ratekit_lab::scenario::parse(scenario, name).map_err(value_error)?;
        if resolved.scenario.testbed.pcap || resolved.scenario.testbed.pcap_receiver {
            return Err(value_error(format!("{name}: testbed.pcap: the simulator's captures are written by `ratekit sim`, not here")));
        }
        let opts = ratekit_sim::RunOptions { out_dir: Some(&out_dir), stop: None, progress: None, keep_series: false, tap: None };
        let (summary, _) = ratekit_sim::run(&resolved, seed, opts).map_err(|e| PyOSError::new_err(e.to_string()))?;
        serde_json::to_string(&summary).map_err(value_error)
    })
}

/// The points of `grid` (dotted field path -> list of values, as a scenario's `[sweep]` table;
/// `None`: the scenario's own `[sweep]`) over the scenario: (assignments as JSON, the point's
/// scenario as TOML) each, in `ratekit sim`'s order.
#[pyfunction]
#[pyo3(signature = (scenario, grid_json=None))]
fn sweep_points(scenario: &str, grid_json: Option<&str>) -> PyResult<Vec<(String, String)>> {
    let mut doc: toml::Value = toml::from_str(scenario).map_err(value_error)?;
    if let Some(grid) = grid_json {
        let grid: toml::Value = serde_json::from_str(grid).map_err(value_error)?;
        doc.as_table_mut().expect("a TOML document is a table").insert("sweep".into(), grid);
    }
    let points = sim_sweep::expand(&doc).map_err(|e| value_error(format!("sweep: {e}")))?;
    points
        .into_iter()
        .map(|p| {
            let assignments = serde_json::to_string(&p.assignments).map_err(value_error)?;
            let text = toml::to_string(&p.value).map_err(value_error)?;
            Ok((assignments, text))
        })
        .collect()
}

/// Runs `ratekit detect` over `inputs` (files or directories) writing the results CSV `out`.
#[pyfunction]
#[pyo3(signature = (inputs, out, all_directions=false, aggregate=true, jobs=None))]
fn detect_files(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    out: PathBuf,
    all_directions: bool,
    aggregate: bool,
    jobs: Option<usize>,
) -> PyResult<()> {
    let opts = ratekit_trace::Options { all_directions, aggregate, ..ratekit_trace::Options::default() };
    py.allow_threads(|| detect::detect_files(&inputs, &out, &opts, jobs, &Silent)?.ensure_readable())
        .map_err(|e| value_error(format!("{e:#}")))
}

/// `ratekit detect --clusters`: the rate clusters of a results CSV, written to `out`.
#[pyfunction]
#[pyo3(signature = (results, out, group_by="file", coverage=ratekit_trace::cluster::DEFAULT_COVERAGE))]
fn rate_clusters(py: Python<'_>, results: PathBuf, out: PathBuf, group_by: &str, coverage: f64) -> PyResult<()> {
    py.allow_threads(|| detect_clusters::run(&results, group_by, coverage, &out)).map_err(|e| value_error(format!("{e:#}")))
}

/// Writes a synthetic server-side pcap whose ground truth is known (ratekit-trace's generator,
/// 002 §3.1's lab setup): a download through a token-bucket policer of `policer_rate` (tc units)
/// and `burst` bytes, or, without a rate, through a drop-tail bottleneck of 20 Mbit/s.
#[pyfunction]
#[pyo3(signature = (path, seed, policer_rate=None, burst=100_000, chunks=5))]
fn synth_trace(py: Python<'_>, path: PathBuf, seed: u64, policer_rate: Option<&str>, burst: u64, chunks: u32) -> PyResult<()> {
    use ratekit_trace::synth;
    let route = match policer_rate {
        Some(r) => synth::Path::Policer { rate: ratekit_core::units::parse_rate(r).map_err(value_error)?, burst },
        None => synth::Path::DropTail { rate: ratekit_core::Rate::from_mbps(20.0), queue: 200_000 },
    };
    let mut scenario = synth::Scenario::new(route, seed);
    scenario.chunks = chunks;
    py.allow_threads(|| {
        let trace = synth::generate(&scenario);
        let file = std::fs::File::create(&path)?;
        trace.write_pcap(std::io::BufWriter::new(file))
    })
    .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(enforce, m)?)?;
    m.add_function(wrap_pyfunction!(flow_keys, m)?)?;
    m.add_function(wrap_pyfunction!(check_config, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_points, m)?)?;
    m.add_function(wrap_pyfunction!(detect_files, m)?)?;
    m.add_function(wrap_pyfunction!(rate_clusters, m)?)?;
    m.add_function(wrap_pyfunction!(synth_trace, m)?)?;
    Ok(())
}
