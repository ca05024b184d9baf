//! The release keys setting, read by `serve` (for the API) and by
//! `releases import` (for install media) alike.

use std::path::PathBuf;

use clap::Args;
use stratum_domain::release::TrustedKeys;

/// The keys release manifests must be signed with.
#[derive(Args, Debug, Clone, Default)]
pub struct ReleaseKeyArgs {
    /// Trusted release keys, `keyId=base64-public-key`, comma-separated.
    #[arg(long, env = "STRATUM_RELEASE_KEYS")]
    pub release_keys: Option<String>,
    /// A file of trusted release keys, one `keyId=base64-public-key` a
    /// line, `#` comments.
    #[arg(long, env = "STRATUM_RELEASE_KEYS_FILE")]
    pub release_keys_file: Option<PathBuf>,
}

impl ReleaseKeyArgs {
    /// The keys both settings name.
    pub fn keys(&self) -> anyhow::Result<TrustedKeys> {
        let mut spec = self.release_keys.clone().unwrap_or_default();
        if let Some(path) = &self.release_keys_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("release keys file {}: {e}", path.display()))?;
            for line in text.lines().map(str::trim) {
                if !line.is_empty() && !line.starts_with('#') {
                    spec.push(',');
                    spec.push_str(line);
                }
            }
        }
        let keys = TrustedKeys::parse(&spec).map_err(|e| anyhow::anyhow!("release keys: {e}"))?;
        if keys.0.is_empty() {
            tracing::warn!("no trusted release keys (STRATUM_RELEASE_KEYS): every release registration will be refused");
        }
        Ok(keys)
    }
}
