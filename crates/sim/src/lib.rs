//! ratekit-sim: a deterministic packet-level discrete-event simulator with TCP models that
//! follow Linux, driving ratekit-core's enforcers. It reads ratekit-lab's scenario and writes
//! its summary. See docs/simulator.md.

pub mod app;
pub mod cc;
pub mod ctx;
pub mod engine;
pub mod jitter;
pub mod net;
pub mod packet;
pub mod stats;
pub mod tcp;
pub mod video;
pub mod world;

use ratekit_lab::scenario::Resolved;
use ratekit_lab::series::Series;
use ratekit_lab::summary::Summary;
pub use world::run::{RunOptions, Tap, TapPoint};
pub use world::World;

/// Builds and runs a resolved scenario with `seed` (the scenario's own unless overridden).
pub fn run(r: &Resolved, seed: Option<u64>, opts: RunOptions) -> std::io::Result<(Summary, Series)> {
    let seed = seed.unwrap_or(r.scenario.seed);
    let world = World::build(r, seed).map_err(std::io::Error::other)?;
    world.run(r, seed, opts)
}
