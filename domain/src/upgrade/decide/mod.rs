//! Deciding the upgrade commands, one function per command, split by
//! family: [`lifecycle`] (plan, apply, cancel, acknowledge, roll back),
//! [`reports`] (what nodes report: their part, the backup, their facts),
//! [`releases`] (register a release, set the running one) and [`alarms`]
//! (the alarms the service keeps, and the checkpoint forks). Each command's
//! fields are parsed first, in [`super::parse`]: the functions here take
//! the typed value and hold only the rules. The driver's next step is in
//! [`super::driver`].

mod alarms;
mod lifecycle;
mod releases;
mod reports;

use serde_json::json;

use crate::error::{ErrorCode, Refusal};
use crate::event::DomainEvent;
use crate::state::{CommandContext, Decision, State, Subject};

use super::parse::{self, NodeReportInput};
use super::*;

fn upgrade_decision(id: &str, events: Vec<DomainEvent>) -> Decision {
    Decision {
        events,
        subject: Subject::Upgrade(id.to_owned()),
    }
}

fn state_conflict(u: &Upgrade, what: &str) -> Refusal {
    Refusal::new(
        ErrorCode::UpgradeStateConflict,
        format!("Upgrade {} is {}: {what}", u.id, u.state.as_str()),
    )
    .with_details(json!({ "state": u.state.as_str() }))
}

impl Upgrades {
    /// Decides an upgrade command: its fields parsed at the edge, then the
    /// rules of its function; every decision's events then clear the
    /// alarms they end.
    pub fn decide(
        &self,
        state: &State,
        cmd: &UpgradeCommand,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        let mut decision = match cmd {
            UpgradeCommand::RegisterRelease { manifest, source } => {
                self.register_release(parse::new_release(manifest, *source)?)
            }
            UpgradeCommand::SetRunningRelease { version } => {
                self.set_running_release(parse::running_version(version)?)
            }
            UpgradeCommand::Create {
                upgrade_id,
                target_release,
                mode,
                backup_location,
                backup_encrypted,
                config,
            } => self.create(
                state,
                parse::new_upgrade(
                    upgrade_id,
                    target_release,
                    mode,
                    (backup_location, backup_encrypted),
                    config,
                )?,
            ),
            UpgradeCommand::Advance => match self.active_upgrade() {
                Some(u) => Ok(upgrade_decision(&u.id, u.next_step(state, ctx.now))),
                None => Err(Refusal::new(ErrorCode::NotFound, "No upgrade is active.")),
            },
            UpgradeCommand::Apply { upgrade_id } => self.apply(upgrade_id),
            UpgradeCommand::ReportNode {
                upgrade_id,
                node_id,
                phase,
                state: status,
                message,
                host_steps,
                rebooted_at,
                instances,
                host_state,
                running_instances,
            } => self.report_node(
                upgrade_id,
                node_id,
                parse::node_report(NodeReportInput {
                    phase,
                    status,
                    message,
                    host_steps,
                    rebooted_at: *rebooted_at,
                    instances,
                    host_state,
                    running_instances,
                })?,
            ),
            UpgradeCommand::ReportBackup {
                upgrade_id,
                location,
                bundle,
                encrypted,
            } => self.report_backup(upgrade_id, parse::backup(location, bundle, encrypted)?),
            UpgradeCommand::Cancel { upgrade_id } => self.cancel(upgrade_id),
            UpgradeCommand::Rollback {
                upgrade_id,
                new_upgrade_id,
                restore_backup,
                config,
            } => self.rollback(state, upgrade_id, new_upgrade_id, *restore_backup, config),
            UpgradeCommand::Acknowledge { upgrade_id } => self.acknowledge(upgrade_id),
            // Who reports is judged before what: the facts' refusal waits
            // for the member's.
            UpgradeCommand::ReportFacts { node_id, facts } => {
                self.report_facts(state, node_id, parse::facts(facts))
            }
            UpgradeCommand::RecordLostEvents(lost) => {
                self.record_lost_events(parse::events_lost(lost)?)
            }
            UpgradeCommand::RecordCheckpointFork(fork) => {
                self.record_checkpoint_fork(parse::checkpoint_fork(fork)?)
            }
            UpgradeCommand::AcknowledgeCheckpointFork {
                signed_size,
                signed_root,
                reason,
            } => self.acknowledge_checkpoint_fork(parse::fork_acknowledgement(
                *signed_size,
                signed_root,
                reason,
            )?),
            UpgradeCommand::KeepReplicaSettingsAlarm { differing } => {
                Ok(self.keep_replica_settings_alarm(differing))
            }
            UpgradeCommand::KeepWitnessAlarm { replica, failing } => {
                Ok(self.keep_witness_alarm(replica, failing))
            }
        }?;
        let clears = self.alarms_cleared_by(&decision.events);
        decision.events.extend(clears);
        Ok(decision)
    }
}
