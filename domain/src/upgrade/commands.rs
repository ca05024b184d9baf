//! The commands of upgrades, and the streams they address.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::release::{release_stream, SignedManifest, RUNNING_RELEASE_STREAM};

use super::*;

/// The commands of upgrades. Fields a request may leave out or get wrong
/// are options, so `decide` can name every problem at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpgradeCommand {
    /// Register a release: its manifest comes with the check of its
    /// signature against the trusted keys, and a manifest whose signature
    /// does not hold is refused naming `signature`.
    RegisterRelease {
        manifest: SignedManifest,
        source: ReleaseSource,
    },
    SetRunningRelease {
        version: Option<String>,
    },
    Create {
        upgrade_id: String,
        target_release: Option<String>,
        mode: Option<String>,
        backup_location: Option<String>,
        backup_encrypted: Option<bool>,
        config: UpgradeConfig,
    },
    /// The driver: take the step that is due for the active upgrade (the
    /// time-driven ones judged at the command's time).
    Advance,
    Apply {
        upgrade_id: String,
    },
    ReportNode {
        upgrade_id: String,
        node_id: String,
        phase: Option<String>,
        state: Option<String>,
        message: Option<String>,
        host_steps: Option<Vec<HostStep>>,
        rebooted_at: Option<DateTime<Utc>>,
        instances: Option<Vec<String>>,
        host_state: Option<String>,
        running_instances: Option<Vec<String>>,
    },
    ReportBackup {
        upgrade_id: String,
        location: Option<String>,
        bundle: Option<String>,
        encrypted: Option<bool>,
    },
    Cancel {
        upgrade_id: String,
    },
    Rollback {
        upgrade_id: String,
        new_upgrade_id: String,
        restore_backup: bool,
        config: UpgradeConfig,
    },
    Acknowledge {
        upgrade_id: String,
    },
    /// A node agent's report of what it runs and holds.
    ReportFacts {
        node_id: String,
        facts: NodeFacts,
    },
    /// A replica's report that the database no longer holds events it
    /// acknowledged (sent by the service itself, never over HTTP).
    RecordLostEvents(EventsLost),
    /// A signer's report that the log forks from the newest checkpoint it
    /// signed (sent by the service itself, never over HTTP).
    RecordCheckpointFork(CheckpointForkFound),
    /// An operator accepts a checkpoint fork, naming the signed checkpoint.
    AcknowledgeCheckpointFork {
        signed_size: u64,
        signed_root: String,
        reason: Option<String>,
    },
    /// A replica's view of the live replicas whose process-manager
    /// settings are not the agreed ones, each described for a person (sent
    /// by the service itself, never over HTTP): the
    /// `replica-settings-differ` alarm is raised while there are any and
    /// cleared once there are none.
    KeepReplicaSettingsAlarm {
        differing: Vec<String>,
    },
    /// A replica's view of the log's witnesses that fail to cosign its
    /// checkpoints, by name (sent by the service itself, never over HTTP):
    /// that replica's `log-witness-failing` alarm is raised while there are
    /// any and cleared once there are none. `replica` names it (its host
    /// and address, the same across its restarts).
    KeepWitnessAlarm {
        replica: String,
        failing: Vec<String>,
    },
}

/// The service's configuration an upgrade is planned with: recorded in the
/// plan, so a replay needs none of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpgradeConfig {
    pub backup_target: Option<BackupTarget>,
    /// How long the cluster settles after a restart (see
    /// [`Plan::settle_seconds`]).
    pub settle_seconds: u64,
}

/// A configured backup target and the recipient backups are encrypted to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupTarget {
    pub url: String,
    pub recipient: Option<String>,
}

impl UpgradeCommand {
    pub fn stream_id(&self) -> String {
        match self {
            UpgradeCommand::ReportFacts { node_id, .. } => facts_stream(node_id),
            UpgradeCommand::RegisterRelease { manifest, .. } => release_stream(
                manifest
                    .manifest()
                    .get("version")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
            UpgradeCommand::SetRunningRelease { .. } => RUNNING_RELEASE_STREAM.to_owned(),
            UpgradeCommand::Advance => "upgrade/".to_owned(),
            UpgradeCommand::RecordLostEvents(_) => format!("alarm/{LOG_EVENTS_LOST_ALARM}"),
            UpgradeCommand::RecordCheckpointFork(_)
            | UpgradeCommand::AcknowledgeCheckpointFork { .. } => {
                format!("alarm/{CHECKPOINT_FORK_ALARM}")
            }
            UpgradeCommand::KeepReplicaSettingsAlarm { .. } => {
                format!("alarm/{REPLICA_SETTINGS_DIFFER_ALARM}")
            }
            UpgradeCommand::KeepWitnessAlarm { .. } => format!("alarm/{LOG_WITNESS_FAILING_ALARM}"),
            UpgradeCommand::Create { upgrade_id, .. }
            | UpgradeCommand::Apply { upgrade_id }
            | UpgradeCommand::ReportNode { upgrade_id, .. }
            | UpgradeCommand::ReportBackup { upgrade_id, .. }
            | UpgradeCommand::Cancel { upgrade_id }
            | UpgradeCommand::Rollback { upgrade_id, .. }
            | UpgradeCommand::Acknowledge { upgrade_id } => upgrade_stream(upgrade_id),
        }
    }

    /// Whether the command may run during an upgrade's write freeze: the
    /// upgrade's own reports, the driver, and cancel (which answers its
    /// own 409).
    pub fn passes_write_freeze(&self) -> bool {
        matches!(
            self,
            UpgradeCommand::Advance
                | UpgradeCommand::ReportNode { .. }
                | UpgradeCommand::ReportBackup { .. }
                | UpgradeCommand::ReportFacts { .. }
                | UpgradeCommand::RecordLostEvents(_)
                | UpgradeCommand::RecordCheckpointFork(_)
                | UpgradeCommand::AcknowledgeCheckpointFork { .. }
                | UpgradeCommand::KeepReplicaSettingsAlarm { .. }
                | UpgradeCommand::KeepWitnessAlarm { .. }
                | UpgradeCommand::Cancel { .. }
        )
    }
}

pub fn upgrade_stream(id: &str) -> String {
    format!("upgrade/{id}")
}

/// `upg-` and 10 of `[0-9a-z]`.
pub fn valid_upgrade_id(id: &str) -> bool {
    id.strip_prefix("upg-").is_some_and(|rest| {
        rest.len() == 10
            && rest
                .bytes()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    })
}
