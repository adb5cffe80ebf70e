//! Which congestion control a flow runs: the simulator's models (crates/sim cc/) and the
//! testbed's Linux TCP (TCP_CONGESTION) know the same names.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CcKind {
    #[serde(alias = "newreno")]
    Reno,
    Cubic,
    Bbr,
    Vegas,
}

impl CcKind {
    /// The name in summary.json, which is also Linux's name for the algorithm.
    pub fn as_str(self) -> &'static str {
        match self {
            CcKind::Reno => "reno",
            CcKind::Cubic => "cubic",
            CcKind::Bbr => "bbr",
            CcKind::Vegas => "vegas",
        }
    }
}
