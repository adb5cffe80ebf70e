//! `ratekit reproduce`: re-runs the papers' evaluations (scenarios/paper/*.toml), computes every
//! claim's metric and writes claims.json, report.md, report.html and figures/
//! (docs/reproduce.md). The simulator sits above this crate, so whoever drives a reproduction
//! hands it in (`run::Simulate`).
//!
//! Imports go one way: selector <- metrics <- sketch <- spec <- report <- run.

pub mod metrics;
pub mod report;
pub mod run;
pub mod selector;
pub mod sketch;
pub mod spec;
