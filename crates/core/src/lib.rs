//! ratekit-core: every rate enforcer as a sans-IO state machine.
//!
//! Nothing here reads a clock, opens a socket or spawns a thread: `now` is an argument, and
//! queueing enforcers say when they next want to be woken. The same code runs in the simulator,
//! in trace replay, in the userspace middlebox, and is mirrored by the tc-BPF programs.

pub mod config;
pub mod enforcer;
pub mod metrics;
pub mod packet;
pub mod policy;
pub mod sizing;
pub mod time;
pub mod units;
pub mod validate;

// Policers and their parts.
pub mod aggregates;
pub mod bcpqp;
pub mod bcpqp_class_flows;
pub mod bcpqp_flows;
pub mod colour;
pub mod count_min;
pub mod fair_policer;
pub mod fast_hash;
pub mod phantom;
pub mod pqp;
pub mod pqp_class_flows;
pub mod pqp_flows;
pub mod srtcm;
pub mod token_bucket;
pub mod trtcm;

// Queueing disciplines and their parts.
pub mod cpq;
pub mod drr;
pub mod dscd;
pub mod exp_decay;
pub mod fifo_shaper;
pub mod queue_stats;
pub mod red;
pub mod shaper;
pub mod shaper_set;
pub mod utema;

pub use config::{AnyPolicer, AnyQueue, Enforcer, EnforcerConfig};
pub use enforcer::{DropReason, Dropped, Policer, QueueDiscipline, Verdict};
pub use packet::{Classify, Packet};
pub use policy::PolicyNode;
pub use time::{Duration, Instant};
pub use units::{Bytes, Rate};
pub use validate::ConfigError;
