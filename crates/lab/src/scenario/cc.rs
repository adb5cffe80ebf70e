//! Which congestion control a flow runs: the simulator's models (crates/sim cc/) and the
//! testbed's Linux TCP (TCP_CONGESTION) know the same names. Copa and PCC Vivace are user-space
//! algorithms (genericCC, PCC-Uspace) that only the simulator has.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CcKind {
    #[serde(alias = "newreno")]
    Reno,
    Cubic,
    Bbr,
    Vegas,
    Copa,
    Vivace,
}

impl CcKind {
    /// The name in summary.json: Linux's name for the kernel's algorithms.
    pub fn as_str(self) -> &'static str {
        match self {
            CcKind::Reno => "reno",
            CcKind::Cubic => "cubic",
            CcKind::Bbr => "bbr",
            CcKind::Vegas => "vegas",
            CcKind::Copa => "copa",
            CcKind::Vivace => "vivace",
        }
    }
}
