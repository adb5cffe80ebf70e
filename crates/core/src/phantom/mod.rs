//! Phantom queues served by a policy tree: the data-path half of PQP and BC-PQP (000 §3.2).
//!
//! A [`PhantomPolicy`] is the [`PolicyNode`] tree compiled into a flat node array, shared by
//! every aggregate (it is immutable). A [`PhantomQueues`] is one aggregate's state: a byte
//! counter per queue and, per inner node, its backlog and the list of its non-empty children.
//!
//! Service is the fluid analogue of the shaper (algorithms.md §0, §2): `serve(S)` hands out `S`
//! nano-bytes exactly as hierarchical GPS would over an interval without arrivals:
//! strict order at `priority` nodes, max-min water-filling by weight at `fair`/`weighted` nodes,
//! each child capped by its backlog, nothing left idle while any queue is non-empty. The active
//! lists make a service batch touch only non-empty queues (000 §4 footnote 6).
//!
//! Integer arithmetic only (the eBPF mirror must agree bit for bit); docs/bcpqp.md spells out
//! every operation.
//!
//! [`PolicyNode`]: crate::policy::PolicyNode

mod block;
mod compile;
mod flow_index;
mod flows;
mod service;
mod share;
mod state;
#[cfg(test)]
mod tests;

pub use compile::{CompileError, PhantomPolicy, MAX_DEPTH};
pub use flows::{FlowQueues, FlowStats};
pub use state::{div_rem_by_reciprocal, PhantomQueues};
