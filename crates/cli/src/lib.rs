//! The library half of the `ratekit` command: the drivers that the Python package (crates/py)
//! calls too, so both give identical results from one source.

pub mod csv_io;
pub mod dask;
pub mod detect;
pub mod detect_clusters;
pub mod replay;
pub mod sim_sweep;
pub mod summary;
