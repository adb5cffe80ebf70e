//! The simulated network, in three parts: `build` makes the components from a resolved
//! scenario, `run` drives the event loop and writes the per-window time series, `measure`
//! turns what was counted into the summary.
//!
//! Topology per flow: sender → NIC link (host_rate) → the aggregate's enforcement point (random
//! loss, policer) → the aggregate's link (link_rate; drop-tail, or the queueing enforcer) → the
//! enforcement points and links of the aggregates named in its `via`, in order → optional
//! secondary bottleneck → forward pipe (RTT/2) → receiver; ACKs: reverse pipe (RTT/2)
//! → sender. Zero-delay hops are function calls in FIFO order; only timers and transmissions
//! are events.

mod build;
mod measure;
pub mod run;

use crate::app::UdpSource;
use crate::ctx::Ctx;
use crate::engine::ComponentId;
use crate::net::{EnforcementPoint, Link, Pipe};
use crate::tcp::receiver::TcpReceiver;
use crate::tcp::sender::TcpSender;
use ratekit_lab::scenario::CcKind;

/// Small variants inline, big ones boxed: the component array is walked in event order, so
/// its footprint decides the cache misses per event.
enum Comp {
    Sender(Box<TcpSender>),
    Udp(Box<UdpSource>),
    Receiver(Box<TcpReceiver>),
    Sink { bytes: u64, window_bytes: u64 },
    Link(Box<Link>),
    Pipe(Pipe),
    Enf(Box<EnforcementPoint>),
}

struct FlowMeta {
    aggregate: u32,
    cc: Option<CcKind>,
    rtt_ms: f64,
    start_ns: u64,
    sender: ComponentId,
    receiver: ComponentId,
    continuous: bool,
    finite: bool,
    /// When the application stops offering data (u64::MAX: never).
    stop_ns: u64,
}

pub struct World {
    ctx: Ctx,
    comps: Vec<Comp>,
    flows: Vec<FlowMeta>,
    /// Every route's hops back to back: flow f's data route starts at `route_start[2f]`, its
    /// ACK route at `route_start[2f + 1]`.
    route_hops: Vec<ComponentId>,
    route_start: Vec<u32>,
    agg_rates_bps: Vec<f64>,
    agg_kinds: Vec<&'static str>,
    /// Each aggregate's own link (its rate may step; a queueing enforcer on it may estimate it).
    agg_links: Vec<ComponentId>,
    /// Per flow: payload bytes arrived at the receiver in the current window.
    wire_window: Vec<u64>,
    /// Per flow id, the scenario flow it belongs to: itself, or for the relabel ids after the
    /// scenario's flows (a UDP source's `class_fraction` datagrams), the source's flow.
    owner: Vec<u32>,
}
