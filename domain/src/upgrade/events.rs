//! The upgrade events: what happened to releases and upgrades.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRegistered {
    pub version: String,
    /// The manifest's canonical JSON (RFC 8785), signature included.
    pub manifest: String,
    pub source: ReleaseSource,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunningReleaseSet {
    pub version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePlanned {
    pub upgrade_id: String,
    pub mode: UpgradeMode,
    pub target_release: String,
    pub from_release: String,
    pub backup_location: BackupLocation,
    pub backup_encrypted: bool,
    /// The configured backup target, when the location is `target`.
    pub backup_target: Option<String>,
    pub rollback_of: Option<String>,
    pub restore_backup: bool,
    pub plan: Plan,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeStateChanged {
    pub upgrade_id: String,
    pub from: UpgradeState,
    pub to: UpgradeState,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePrechecked {
    pub upgrade_id: String,
    pub prechecks: Vec<Precheck>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeNodeTurnStarted {
    pub upgrade_id: String,
    pub node_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeNodeReported {
    pub upgrade_id: String,
    pub node_id: String,
    pub phase: Phase,
    pub state: NodeStatus,
    pub message: String,
    pub host_steps: Option<Vec<HostStep>>,
    pub rebooted_at: Option<DateTime<Utc>>,
    pub instances: Option<Vec<String>>,
    /// The host-helper's current intent.
    pub host_state: Option<String>,
    /// The instances it reports running again.
    pub running_instances: Option<Vec<String>>,
}

/// A node agent's facts report; the newest wins.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFactsReported {
    pub node_id: String,
    pub facts: NodeFacts,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmRaised {
    pub name: String,
    pub node_id: Option<String>,
    pub upgrade_id: Option<String>,
    pub message: String,
}

/// Acknowledged events the database no longer holds: a replica found the
/// log it had served gone (a failover to a standby that had not received
/// its tail). Raises the `log-events-lost` alarm. Recorded once per loss:
/// `first` is where the database's log forks from the one the replica held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventsLost {
    /// The first position whose event was lost.
    pub first: u64,
    /// The last lost position the replica knew of.
    pub last: u64,
    /// The database's head when the loss was found.
    pub database_position: u64,
    /// Its hash, hex.
    pub database_hash: String,
    /// The lost events the replica still knew, in position order.
    pub lost: Vec<LostEvent>,
}

/// One lost event: its position and the hash it had in the lost log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LostEvent {
    pub position: u64,
    /// Hex SHA-256 of the event in the chain it belonged to.
    pub hash: String,
}

/// An operator's word that the log as it now is continues the record: the
/// fork of the signed checkpoint it names is accepted, and signing resumes
/// from the log's tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointForkAcknowledged {
    pub signed_size: u64,
    pub signed_root: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmCleared {
    pub name: String,
    pub node_id: Option<String>,
    pub upgrade_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeBackupReported {
    pub upgrade_id: String,
    pub location: BackupLocation,
    pub bundle: String,
    pub encrypted: bool,
}

/// An upgrade's end or mark that carries only a text (a reason, a release,
/// the rollback's id) or nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeFailed {
    pub upgrade_id: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeCompleted {
    pub upgrade_id: String,
    /// The release the cluster runs from now on.
    pub release: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeRolledBack {
    pub upgrade_id: String,
    /// The upgrade that undoes it.
    pub by: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeRef {
    pub upgrade_id: String,
}
