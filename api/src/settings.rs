//! What every setting shares: the error that names a setting which cannot
//! be used, and the parsing of durations. The settings themselves live
//! with what they configure (`raft::config`, `tls`, `listener`).

use std::time::Duration;

/// A setting that cannot be used, as one sentence naming its variable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// A duration setting such as `500ms`, `1s` or `2m`, above zero.
pub fn duration(var: &str, v: &str) -> Result<Duration, ConfigError> {
    let d = humantime::parse_duration(v.trim()).map_err(|e| {
        ConfigError(format!(
            "{var} must be a duration such as 500ms, 1s or 2m, not `{v}`: {e}"
        ))
    })?;
    if d.is_zero() {
        return Err(ConfigError(format!("{var} must be above zero")));
    }
    Ok(d)
}
