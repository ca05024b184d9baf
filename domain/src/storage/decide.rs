//! Deciding a finalization and folding it: the rules of [`super`] that
//! read the state, the events and the stored versions above it.

use serde_json::json;

use crate::error::{ErrorCode, Refusal};
use crate::event::DomainEvent;
use crate::state::{CommandContext, Decision, EventCtx, Subject};
use crate::stored::levels::{finalizable, writes_at};

use super::*;

impl ReplicaView {
    /// The `Type/version` pairs of `level` this replica cannot read.
    pub fn cannot_read(&self, level: u16) -> Vec<String> {
        writes_at(level)
            .into_iter()
            .filter(|(t, v)| self.reads.get(*t).is_none_or(|r| r < v))
            .map(|(t, v)| format!("{t}/{v}"))
            .collect()
    }
}

impl StorageVersion {
    /// Decides a finalization: refused while a live replica cannot read
    /// the level or has other settings; nothing to record when the log is
    /// at the level with these settings already.
    pub fn decide(&self, cmd: &Finalize, _ctx: &CommandContext) -> Result<Decision, Refusal> {
        let level = cmd.level.unwrap_or(NEWEST_LEVEL);
        let first = *finalizable().start();
        if !finalizable().contains(&level) {
            return Err(Refusal::new(
                ErrorCode::InvalidInput,
                format!(
                    "This build finalizes storage levels {first} to {NEWEST_LEVEL}; not level {level}. A newer level is finalized from a replica of the build that brings it."
                ),
            )
            .with_details(json!({ "newestLevel": NEWEST_LEVEL })));
        }
        if level < self.level {
            return Err(Refusal::new(
                ErrorCode::VersionConflict,
                format!(
                    "The log is finalized at storage level {} already; a level is never taken back.",
                    self.level
                ),
            )
            .with_details(json!({ "level": self.level })));
        }
        let unreadable: Vec<_> = cmd
            .replicas
            .iter()
            .filter_map(|r| {
                let missing = r.cannot_read(level);
                (!missing.is_empty()).then_some((r, missing))
            })
            .collect();
        if !unreadable.is_empty() {
            let names: Vec<String> = unreadable
                .iter()
                .map(|(r, missing)| format!("{} cannot read {}", r.named(), missing.join(", ")))
                .collect();
            return Err(Refusal::new(
                ErrorCode::VersionConflict,
                format!(
                    "Not finalized: {}. Replace or stop it first; until then every replica keeps writing what all of them read.",
                    names.join("; ")
                ),
            )
            .with_details(json!({
                "replicas": unreadable.iter().map(|(r, missing)| json!({
                    "id": r.id, "host": r.host, "version": r.version, "commit": r.commit,
                    "cannotRead": missing,
                })).collect::<Vec<_>>(),
            })));
        }
        if !cmd.unregistered.is_empty() {
            return Err(Refusal::new(
                ErrorCode::VersionConflict,
                format!(
                    "Not finalized: sessions of a build of stratum from before the replica registry are open on this database ({}); such a build reads only storage level {BASE_LEVEL}. Stop those replicas (and their host commands) first.",
                    cmd.unregistered.join("; ")
                ),
            )
            .with_details(json!({ "unregistered": cmd.unregistered })));
        }
        let differing: Vec<&ReplicaView> = cmd
            .replicas
            .iter()
            .filter(|r| r.settings != cmd.settings)
            .collect();
        if !differing.is_empty() {
            let names: Vec<String> = differing.iter().map(|r| r.named()).collect();
            return Err(Refusal::new(
                ErrorCode::VersionConflict,
                format!(
                    "Not finalized: the process-manager settings of {} differ from this replica's ({}). Give every replica the same raft adapters, upgrade driver and signer first (stratum replicas list shows each one's).",
                    names.join("; "),
                    short(&cmd.settings)
                ),
            )
            .with_details(json!({
                "settings": cmd.settings,
                "replicas": differing.iter().map(|r| json!({
                    "id": r.id, "host": r.host, "settings": r.settings,
                })).collect::<Vec<_>>(),
            })));
        }
        if level == self.level && self.agreed_settings() == Some(cmd.settings.as_str()) {
            return Ok(Decision::none(Subject::StorageVersion));
        }
        let mut replicas: Vec<String> = cmd.replicas.iter().map(|r| r.id.clone()).collect();
        replicas.sort();
        Ok(Decision {
            events: vec![DomainEvent::StorageVersionFinalized(
                StorageVersionFinalized {
                    level,
                    writes: writes_at(level)
                        .into_iter()
                        .map(|(t, v)| format!("{t}/{v}"))
                        .collect(),
                    settings: cmd.settings.clone(),
                    replicas,
                },
            )],
            subject: Subject::StorageVersion,
        })
    }

    pub fn evolve(&mut self, ctx: &EventCtx, event: &DomainEvent) {
        if let DomainEvent::StorageVersionFinalized(f) = event {
            self.level = f.level;
            self.finalized = Some(Finalization {
                position: ctx.position,
                at: ctx.occurred_at,
                by: ctx.principal.to_owned(),
                settings: f.settings.clone(),
                replicas: f.replicas.clone(),
            });
        }
    }
}
