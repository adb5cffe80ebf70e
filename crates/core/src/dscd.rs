//! PLACEHOLDER: to be replaced by the owning helper.

use crate::config::ConfigError;
use crate::{Dropped, Instant, Packet, QueueDiscipline, Rate};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DscdConfig {}

impl DscdConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        Err(ConfigError::new("kind", "not implemented yet"))
    }
}

pub struct Dscd;

impl Dscd {
    pub fn new(_cfg: &DscdConfig, _link_rate: Option<Rate>) -> Result<Self, ConfigError> {
        Err(ConfigError::new("kind", "not implemented yet"))
    }
}

impl QueueDiscipline for Dscd {
    fn enqueue(&mut self, _now: Instant, _pkt: Packet, _drops: &mut Vec<Dropped>) {
        unimplemented!()
    }
    fn dequeue(&mut self, _now: Instant, _drops: &mut Vec<Dropped>) -> Option<Packet> {
        unimplemented!()
    }
    fn next_wakeup(&self) -> Option<Instant> {
        unimplemented!()
    }
    fn backlog_bytes(&self) -> u64 {
        unimplemented!()
    }
}
