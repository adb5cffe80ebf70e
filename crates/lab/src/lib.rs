//! What every ratekit driver shares, so that the command line, the Python package, the
//! simulator and the data plane give identical results from one source: replay of arrival
//! traces, the demo, the bench, parameter sweeps, the scenario format and summary.json of the
//! simulator and the testbed, the papers' reproduction, and progress reporting. The command
//! line (crates/cli) and the Python package (crates/py) only translate arguments and results.

pub mod arrivals;
pub mod bench;
pub mod bench_floor;
pub mod csv_io;
pub mod demo;
pub mod driver;
pub mod progress;
pub mod replay;
pub mod replay_summary;
pub mod reproduce;
pub mod scenario;
pub mod series;
pub mod summary;
pub mod sweep;
