//! `--dask ADDRESS`: hands a simulation sweep or a detection batch to the Python package's Dask
//! driver (`python -m ratekit.dask_run`, python/ratekit/dask_run.py), which runs the points or
//! files on that cluster and writes Parquet partitions. Dask is a Python engine, so the CLI reuses
//! the package's driver rather than speaking the scheduler's protocol itself.

use anyhow::{bail, Context};
use std::ffi::OsString;
use std::process::Command;

/// Runs `python -m ratekit.dask_run COMMAND ARGS... --dask ADDRESS` and maps its exit status
/// (0 all done, 1 some point or file failed, 2 bad input) to a result. `$RATEKIT_PYTHON` picks
/// the interpreter (default `python3`).
pub fn run(command: &str, args: Vec<OsString>, address: &str) -> anyhow::Result<()> {
    let python = std::env::var_os("RATEKIT_PYTHON").unwrap_or_else(|| "python3".into());
    let status = Command::new(&python)
        .args(["-m", "ratekit.dask_run", command])
        .args(args)
        .args(["--dask", address])
        .status()
        .with_context(|| format!("--dask: cannot start {}", python.to_string_lossy()))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(1) => bail!("--dask: the run failed (points or files listed above; is the Python package installed? `pip install .`)"),
        Some(2) => bail!("--dask: the Dask driver rejected its input (see above)"),
        _ => bail!("--dask: {} ended with {status}", python.to_string_lossy()),
    }
}
