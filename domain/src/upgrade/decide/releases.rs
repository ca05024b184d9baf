//! Releases: one registered from its signed manifest (a release never
//! changes), and the running release set once at install.

use serde_json::json;

use crate::error::{ErrorCode, FieldError, Refusal};
use crate::event::DomainEvent;
use crate::state::{Decision, Subject};
use crate::upgrade::parse::NewRelease;

use super::*;

impl Upgrades {
    /// A release is registered once: the same manifest again appends
    /// nothing, another one under its version is refused.
    pub(super) fn register_release(&self, new: NewRelease) -> Result<Decision, Refusal> {
        let NewRelease {
            release,
            manifest: text,
            source,
        } = new;
        let subject = Subject::Release(release.version.clone());
        if let Some(known) = self.releases.get(&release.version) {
            if known.manifest == text {
                return Ok(Decision::none(subject));
            }
            return Err(Refusal::new(
                ErrorCode::ReleaseExists,
                format!(
                    "Release {} is registered with another manifest; a release never changes.",
                    release.version
                ),
            ));
        }
        Ok(Decision {
            events: vec![DomainEvent::ReleaseRegistered(ReleaseRegistered {
                version: release.version,
                manifest: text,
                source,
            })],
            subject,
        })
    }

    /// The running release, set at install to a registered release; after
    /// install only upgrades change it.
    pub(super) fn set_running_release(&self, version: String) -> Result<Decision, Refusal> {
        if !self.releases.contains_key(&version) {
            return Err(Refusal::invalid(vec![FieldError::new(
                "version",
                format!("release {version} is not registered"),
            )]));
        }
        match &self.running {
            Some(r) if r.version == version => Ok(Decision::none(Subject::RunningRelease)),
            Some(r) => Err(Refusal::new(
                ErrorCode::RunningReleaseAlreadySet,
                format!(
                    "The cluster runs release {}; after install only upgrades change it.",
                    r.version
                ),
            )
            .with_details(json!({ "version": r.version }))),
            None => Ok(Decision {
                events: vec![DomainEvent::RunningReleaseSet(RunningReleaseSet {
                    version,
                })],
                subject: Subject::RunningRelease,
            }),
        }
    }
}
