//! `ratekit reproduce`: re-runs the papers' evaluations (scenarios/paper/*.toml), computes every
//! claim's metric and writes claims.json, report.md, report.html and figures/
//! (docs/reproduce.md). The simulator, the trace generator and the detector sit above this
//! crate, so whoever drives a reproduction hands them in (`run::Simulate`, `detect::Judge`).
//!
//! Imports go one way: selector <- metrics <- sketch, detect, cost <- spec <- report <- run.

pub mod cost;
pub mod detect;
pub mod metrics;
pub mod report;
pub mod run;
pub mod selector;
pub mod sketch;
pub mod spec;
