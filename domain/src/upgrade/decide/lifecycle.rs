//! An upgrade's life as an operator steers it: plan one (create), apply a
//! staged one, cancel, acknowledge a failure's findings, roll back.

use serde_json::json;

use crate::error::{ErrorCode, FieldError, Refusal};
use crate::event::DomainEvent;
use crate::state::{Decision, State, Subject};
use crate::upgrade::parse::NewUpgrade;
use crate::upgrade::plan::PlanInput;

use super::*;

impl Upgrades {
    /// Ids are drawn at random by the caller; one already taken is refused
    /// rather than overwriting an upgrade's history.
    fn refuse_taken_id(&self, id: &str) -> Result<(), Refusal> {
        if self.upgrades.contains_key(id) {
            return Err(Refusal::new(
                ErrorCode::VersionConflict,
                format!("Upgrade id {id} is taken; retry."),
            ));
        }
        Ok(())
    }

    fn refuse_if_active(&self) -> Result<(), Refusal> {
        match self.active_upgrade() {
            Some(u) => Err(Refusal::new(
                ErrorCode::UpgradeAlreadyActive,
                format!(
                    "Upgrade {} is {}; one upgrade runs at a time.",
                    u.id,
                    u.state.as_str()
                ),
            )
            .with_details(json!({ "upgradeId": u.id, "state": u.state.as_str() }))),
            None => Ok(()),
        }
    }

    fn running_release(&self) -> Result<&str, Refusal> {
        self.running.as_ref().map(|r| r.version.as_str()).ok_or_else(|| {
            Refusal::new(
                ErrorCode::RunningReleaseNotSet,
                "The cluster's running release is not set; set it at install with PUT /v1/admin/cluster/release.",
            )
        })
    }

    /// A new upgrade is planned: one upgrade runs at a time, from the
    /// running release.
    pub(super) fn create(&self, state: &State, new: NewUpgrade<'_>) -> Result<Decision, Refusal> {
        let NewUpgrade {
            id: upgrade_id,
            target,
            mode,
            location,
            encrypted: backup_encrypted,
            config,
        } = new;
        self.refuse_if_active()?;
        self.refuse_taken_id(upgrade_id)?;
        let running = self.running_release()?;
        let plan = self.plan(
            state,
            &PlanInput {
                target: &target,
                from: running,
                mode,
                restore: false,
                settle_seconds: config.settle_seconds,
            },
        );
        let (backup_target, encrypted) = match (location, &config.backup_target) {
            (BackupLocation::Target, Some(t)) => (
                Some(t.url.clone()),
                t.recipient.is_some() || backup_encrypted.unwrap_or(false),
            ),
            _ => (None, backup_encrypted.unwrap_or(false)),
        };
        Ok(upgrade_decision(
            upgrade_id,
            vec![DomainEvent::UpgradePlanned(UpgradePlanned {
                upgrade_id: upgrade_id.to_owned(),
                mode,
                target_release: target,
                from_release: running.to_owned(),
                backup_location: location,
                backup_encrypted: encrypted,
                backup_target,
                rollback_of: None,
                restore_backup: false,
                plan,
            })],
        ))
    }

    pub(super) fn rollback(
        &self,
        state: &State,
        upgrade_id: &str,
        new_upgrade_id: &str,
        restore_backup: bool,
        config: &UpgradeConfig,
    ) -> Result<Decision, Refusal> {
        let u = self.upgrade(upgrade_id)?;
        if !matches!(u.state, UpgradeState::Done | UpgradeState::Failed) {
            return Err(state_conflict(
                u,
                "only a done or failed upgrade is rolled back.",
            ));
        }
        // A rollback that failed or was canceled undid nothing: the
        // upgrade may be rolled back again.
        if let Some(by) = u.rolled_back_by.as_deref().filter(|by| {
            self.upgrades
                .get(*by)
                .is_some_and(|r| !matches!(r.state, UpgradeState::Failed | UpgradeState::Canceled))
        }) {
            return Err(state_conflict(
                u,
                &format!("it was already rolled back by {by}."),
            ));
        }
        if restore_backup && u.backup.is_none() {
            return Err(Refusal::invalid(vec![FieldError::new(
                "restoreBackup",
                format!("upgrade {upgrade_id} took no backup to restore"),
            )]));
        }
        // The old control plane cannot run the new schema: only the backup
        // taken before the upgrade brings the cluster back.
        // Only an upgrade that reached a node's roll can have migrated the
        // schema; one that failed before has nothing to restore.
        let migrated = u.nodes.iter().any(|n| n.phase >= Phase::Roll);
        if u.plan.restore_required && migrated && !restore_backup {
            return Err(Refusal::new(
                ErrorCode::RestoreRequired,
                format!(
                    "Release {} cannot run on the schema {} migrated to: roll back with restoreBackup: true.",
                    u.from_release, u.target_release
                ),
            )
            .with_details(json!({ "upgradeId": upgrade_id, "restoreRequired": true })));
        }
        self.refuse_if_active()?;
        self.refuse_taken_id(new_upgrade_id)?;
        let running = self.running_release()?;
        let plan = self.plan(
            state,
            &PlanInput {
                target: &u.from_release,
                from: running,
                mode: UpgradeMode::Now,
                restore: restore_backup,
                settle_seconds: config.settle_seconds,
            },
        );
        Ok(upgrade_decision(
            new_upgrade_id,
            vec![
                DomainEvent::UpgradePlanned(UpgradePlanned {
                    upgrade_id: new_upgrade_id.to_owned(),
                    mode: UpgradeMode::Now,
                    target_release: u.from_release.clone(),
                    from_release: running.to_owned(),
                    backup_location: u.backup_location,
                    backup_encrypted: u.backup_encrypted,
                    backup_target: u.backup_target.clone(),
                    rollback_of: Some(upgrade_id.to_owned()),
                    restore_backup,
                    plan,
                }),
                DomainEvent::UpgradeRolledBack(UpgradeRolledBack {
                    upgrade_id: upgrade_id.to_owned(),
                    by: new_upgrade_id.to_owned(),
                }),
            ],
        ))
    }
    pub(super) fn apply(&self, upgrade_id: &str) -> Result<Decision, Refusal> {
        let u = self.upgrade(upgrade_id)?;
        if u.state != UpgradeState::Staged {
            return Err(state_conflict(u, "only a staged upgrade is applied."));
        }
        Ok(upgrade_decision(
            upgrade_id,
            vec![DomainEvent::UpgradeStateChanged(UpgradeStateChanged {
                upgrade_id: upgrade_id.to_owned(),
                from: UpgradeState::Staged,
                to: UpgradeState::BackingUp,
            })],
        ))
    }

    pub(super) fn cancel(&self, upgrade_id: &str) -> Result<Decision, Refusal> {
        let u = self.upgrade(upgrade_id)?;
        match u.state {
            UpgradeState::Canceled => Ok(Decision::none(Subject::Upgrade(upgrade_id.to_owned()))),
            s if s.cancelable() => Ok(upgrade_decision(
                upgrade_id,
                vec![DomainEvent::UpgradeCanceled(UpgradeRef {
                    upgrade_id: upgrade_id.to_owned(),
                })],
            )),
            s => Err(Refusal::new(
                ErrorCode::UpgradeNotCancelable,
                match s {
                    UpgradeState::Done => format!(
                        "Upgrade {upgrade_id} is done: there is nothing left to cancel; roll it back to return to the release before it."
                    ),
                    UpgradeState::Failed if u.backup.is_none() => format!(
                        "Upgrade {upgrade_id} failed before its backup, so nothing of it is left to cancel: acknowledge its findings, and plan a new upgrade once the cause is mended."
                    ),
                    UpgradeState::Failed => format!(
                        "Upgrade {upgrade_id} failed after its backup: there is nothing left to cancel; roll it back with that backup, or acknowledge its findings."
                    ),
                    _ => format!(
                        "Upgrade {upgrade_id} is {}: from the backup on it runs to its end; roll it back once it is done or failed.",
                        s.as_str()
                    ),
                },
            )
            .with_details(json!({ "state": s.as_str() }))),
        }
    }

    pub(super) fn acknowledge(&self, upgrade_id: &str) -> Result<Decision, Refusal> {
        let u = self.upgrade(upgrade_id)?;
        if u.state != UpgradeState::Failed {
            return Err(state_conflict(
                u,
                "only a failed upgrade's findings are acknowledged.",
            ));
        }
        let events = if u.acknowledged_at.is_some() {
            Vec::new()
        } else {
            vec![DomainEvent::UpgradeAcknowledged(UpgradeRef {
                upgrade_id: upgrade_id.to_owned(),
            })]
        };
        Ok(upgrade_decision(upgrade_id, events))
    }
}
