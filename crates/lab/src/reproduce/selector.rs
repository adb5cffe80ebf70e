//! Which flows a claim's or a figure's metric looks at: named in the paper files (spec.rs) and
//! applied by the metrics (metrics.rs), so both import it from here.

use serde::{Deserialize, Serialize};

/// Which flows a metric looks at. Empty = all flows.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<u16>,
    /// Flow ids (in the order flows are listed, aggregates first to last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<u32>,
}
