//! PLACEHOLDER: to be replaced by the owning helper.

use crate::config::ConfigError;
use crate::{Instant, Packet, Policer, Verdict};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenBucketConfig {}

impl TokenBucketConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        Err(ConfigError::new("kind", "not implemented yet"))
    }
}

pub struct TokenBucket;

impl TokenBucket {
    pub fn new(_cfg: &TokenBucketConfig) -> Self {
        TokenBucket
    }
}

impl Policer for TokenBucket {
    fn on_arrival(&mut self, _now: Instant, _pkt: &Packet) -> Verdict {
        unimplemented!()
    }
}
