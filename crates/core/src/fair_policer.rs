//! PLACEHOLDER: to be replaced by the owning helper.

use crate::config::ConfigError;
use crate::{Instant, Packet, Policer, Verdict};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairPolicerConfig {}

impl FairPolicerConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        Err(ConfigError::new("kind", "not implemented yet"))
    }
}

pub struct FairPolicer;

impl FairPolicer {
    pub fn new(_cfg: &FairPolicerConfig) -> Self {
        FairPolicer
    }
}

impl Policer for FairPolicer {
    fn on_arrival(&mut self, _now: Instant, _pkt: &Packet) -> Verdict {
        unimplemented!()
    }
}
