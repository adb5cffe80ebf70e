//! The error every config check returns, and the checks several enforcers share. Apart from
//! `config.rs` so that an enforcer's own `validate` never depends on the module that builds
//! every enforcer (issue 13: no module cycles).

use crate::units::{Rate, MAX_RATE_BYTES_PER_SEC, MAX_SIZE_BYTES};

/// A configuration error that names the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { field: field.into(), message: message.into() }
    }
}

/// Rejects a zero or absurd rate with the field's name.
pub(crate) fn check_rate(field: &str, rate: Rate) -> Result<(), ConfigError> {
    if rate.0 == 0 {
        return Err(ConfigError::new(field, "must be greater than zero"));
    }
    if rate.0 > MAX_RATE_BYTES_PER_SEC {
        return Err(ConfigError::new(field, "exceeds the maximum of 1tbit"));
    }
    Ok(())
}

/// Rejects a zero or absurd size with the field's name.
pub(crate) fn check_size(field: &str, bytes: u64) -> Result<(), ConfigError> {
    if bytes == 0 {
        return Err(ConfigError::new(field, "must be greater than zero"));
    }
    if bytes > MAX_SIZE_BYTES {
        return Err(ConfigError::new(field, "exceeds the maximum of 16gb"));
    }
    Ok(())
}

/// The link rate a queueing enforcer cannot be built without; `why` says what needs it.
pub(crate) fn require_link(link_rate: Option<Rate>, why: &str) -> Result<Rate, ConfigError> {
    match link_rate {
        Some(r) if r.0 > 0 => Ok(r),
        _ => Err(ConfigError::new("link_rate", format!("is required ({why})"))),
    }
}
