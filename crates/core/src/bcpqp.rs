//! PLACEHOLDER: to be replaced by the owning helper.

use crate::config::ConfigError;
use crate::{Instant, Packet, Policer, Verdict};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BcPqpConfig {}

impl BcPqpConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        Err(ConfigError::new("kind", "not implemented yet"))
    }
}

pub struct BcPqp;

impl BcPqp {
    pub fn new(_cfg: &BcPqpConfig) -> Self {
        BcPqp
    }
}

impl Policer for BcPqp {
    fn on_arrival(&mut self, _now: Instant, _pkt: &Packet) -> Verdict {
        unimplemented!()
    }
}
