//! The upgrade record, its plan, the running release and the commands.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Refusal;
use crate::event::DomainEvent;
use crate::release::{release_stream, ComponentChange, Release, RUNNING_RELEASE_STREAM};

string_enum! {
    /// Where an upgrade is.
    UpgradeState {
        Planned = "planned",
        Prechecking = "prechecking",
        Fetching = "fetching",
        Staged = "staged",
        BackingUp = "backing_up",
        Rolling = "rolling",
        Verifying = "verifying",
        Done = "done",
        Failed = "failed",
        Canceled = "canceled",
    }
}

impl UpgradeState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            UpgradeState::Done | UpgradeState::Failed | UpgradeState::Canceled
        )
    }

    /// From the backup until the end, changes through the API wait.
    pub fn freezes_writes(self) -> bool {
        matches!(
            self,
            UpgradeState::BackingUp | UpgradeState::Rolling | UpgradeState::Verifying
        )
    }

    /// Until the backup nothing that runs has changed.
    pub fn cancelable(self) -> bool {
        matches!(
            self,
            UpgradeState::Planned
                | UpgradeState::Prechecking
                | UpgradeState::Fetching
                | UpgradeState::Staged
        )
    }

    /// Whether the state machine has an edge from `self` to `to`.
    pub fn can_move_to(self, to: UpgradeState) -> bool {
        use UpgradeState::*;
        match (self, to) {
            (Planned, Prechecking)
            | (Prechecking, Fetching)
            | (Fetching, Staged)
            | (Fetching, BackingUp)
            | (Staged, BackingUp)
            | (BackingUp, Rolling)
            | (Rolling, Verifying)
            | (Verifying, Done) => true,
            (from, Failed) => matches!(
                from,
                Prechecking | Fetching | Staged | BackingUp | Rolling | Verifying
            ),
            (from, Canceled) => from.cancelable(),
            _ => false,
        }
    }
}

string_enum! {
    /// `now`, or `stage-only`: fetch, then wait in `staged` for apply.
    UpgradeMode {
        Now = "now",
        StageOnly = "stage-only",
    }
}

string_enum! {
    /// How much of a node an upgrade touches, smallest first.
    NodeKind {
        Containers = "containers",
        Host = "host",
        Os = "os",
    }
}

string_enum! {
    BackupLocation {
        Node = "node",
        Target = "target",
    }
}

string_enum! {
    /// The part of an upgrade a node reports on.
    Phase {
        Fetch = "fetch",
        Roll = "roll",
        Verify = "verify",
    }
}

string_enum! {
    /// How far a node is in its current phase.
    NodeStatus {
        Pending = "pending",
        Running = "running",
        Done = "done",
        Failed = "failed",
    }
}

/// The reboot a node's part needs: none for containers, a soft reboot
/// (userspace restart) for host packages, a full one for the OS.
pub fn reboot_of(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::Containers => "none",
        NodeKind::Host => "soft",
        NodeKind::Os => "full",
    }
}

/// One step of a node's host-helper for its part of the upgrade.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostStep {
    pub name: String,
    pub state: String,
    pub reboot_mode: String,
    pub detail: String,
}

/// The states a host step can be in.
pub const HOST_STEP_STATES: [&str; 5] = ["pending", "running", "done", "failed", "skipped"];

/// The host steps a node of `kind` runs, in order; `restore` first when a
/// rollback restores the pre-upgrade backup.
pub fn host_steps(kind: NodeKind, restore: bool) -> Vec<HostStep> {
    let names: &[&str] = match kind {
        NodeKind::Containers => &["pull", "restart"],
        NodeKind::Host => &["pull", "switch-sysext", "restart"],
        NodeKind::Os => &["pull", "stage-os", "reboot"],
    };
    let restore = restore.then_some("restore");
    restore
        .into_iter()
        .chain(names.iter().copied())
        .map(|name| HostStep {
            name: name.to_owned(),
            state: "pending".to_owned(),
            reboot_mode: match name {
                "reboot" => "full",
                "switch-sysext" => "soft",
                _ => "none",
            }
            .to_owned(),
            detail: String::new(),
        })
        .collect()
}

/// One node's part of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanNode {
    pub node_id: String,
    pub ordinal: u32,
    pub kind: NodeKind,
}

/// What an upgrade will do, decided when it is planned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub kind: NodeKind,
    /// `security` when the OS change fixes vulnerabilities.
    pub reboot_reason: Option<String>,
    pub cves: Vec<String>,
    pub component_changes: Vec<ComponentChange>,
    /// `release` (the running release's list) or `none`.
    pub components_from: String,
    /// The nodes in roll order (their ordinals).
    pub nodes: Vec<PlanNode>,
    pub steps: Vec<String>,
}

/// One precheck's finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Precheck {
    pub name: String,
    pub passed: bool,
    pub message: String,
}

/// The prechecks, in the order they run and are listed.
pub const PRECHECKS: [&str; 12] = [
    "release",
    "version",
    "upgrade-path",
    "upgrade",
    "cluster-shutdown",
    "readiness",
    "schema",
    "node",
    "components",
    "release-differs",
    "space",
    "backup-space",
];

// ---------------------------------------------------------------- state

/// The backup an upgrade took, as reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backup {
    pub location: BackupLocation,
    pub bundle: String,
    pub encrypted: bool,
}

/// One node's part of an upgrade.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeNode {
    pub node_id: String,
    pub ordinal: u32,
    pub kind: NodeKind,
    pub phase: Phase,
    pub state: NodeStatus,
    pub message: String,
    pub host_steps: Vec<HostStep>,
    pub previous_release: String,
    pub instances: Vec<String>,
}

impl UpgradeNode {
    /// Whether the node finished `phase` (or is past it).
    pub fn finished(&self, phase: Phase) -> bool {
        self.phase > phase || (self.phase == phase && self.state == NodeStatus::Done)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upgrade {
    pub id: String,
    pub mode: UpgradeMode,
    pub state: UpgradeState,
    pub target_release: String,
    pub from_release: String,
    pub backup_location: BackupLocation,
    pub backup_encrypted: bool,
    pub backup: Option<Backup>,
    pub plan: Plan,
    pub prechecks: Vec<Precheck>,
    pub nodes: Vec<UpgradeNode>,
    /// The index in `nodes` of the node whose roll turn it is.
    pub turn: Option<usize>,
    pub failure_reason: Option<String>,
    pub last_restart_at: Option<DateTime<Utc>>,
    pub rollback_of: Option<String>,
    pub restore_backup: bool,
    pub rolled_back_by: Option<String>,
    pub acknowledged_at: Option<DateTime<Utc>>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub canceled_by: Option<String>,
    pub canceled_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    /// The position of the event that planned it (lists sort by it).
    pub created_position: u64,
    pub version: u64,
}

impl Upgrade {
    /// Whether the prechecks ran (the upgrade's `kind` is shown from then).
    pub fn prechecked(&self) -> bool {
        !self.prechecks.is_empty()
    }

    fn node_list(nodes: &[&UpgradeNode]) -> String {
        nodes
            .iter()
            .map(|n| n.node_id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(super) fn not_finished(&self, phase: Phase) -> Vec<&UpgradeNode> {
        self.nodes.iter().filter(|n| !n.finished(phase)).collect()
    }

    /// What the upgrade is doing or waiting for, in a sentence.
    pub fn waiting_for(&self) -> String {
        match self.state {
            UpgradeState::Planned => "Waiting for the upgrade driver to run the prechecks.".into(),
            UpgradeState::Prechecking => "Running the prechecks.".into(),
            UpgradeState::Fetching => {
                let left = self.not_finished(Phase::Fetch);
                if left.is_empty() {
                    "Every node has fetched the release; moving on.".into()
                } else {
                    format!(
                        "Waiting for {} to report fetch done.",
                        Self::node_list(&left)
                    )
                }
            }
            UpgradeState::Staged => format!(
                "Staged: waiting for an operator to apply it (POST /v1/admin/upgrades/{}/apply).",
                self.id
            ),
            UpgradeState::BackingUp => match &self.backup {
                None => format!(
                    "Waiting for the backup report (location {}).",
                    self.backup_location.as_str()
                ),
                Some(_) => "The backup is reported; moving on to rolling.".into(),
            },
            UpgradeState::Rolling => match self.turn.and_then(|i| self.nodes.get(i)) {
                Some(n) => format!(
                    "Waiting for {} to report roll done (node {} of {}).",
                    n.node_id,
                    self.turn.unwrap_or(0) + 1,
                    self.nodes.len()
                ),
                None => "Rolling: choosing the next node.".into(),
            },
            UpgradeState::Verifying => {
                let left = self.not_finished(Phase::Verify);
                if left.is_empty() {
                    "Every node has verified; finishing.".into()
                } else {
                    format!(
                        "Waiting for {} to report verify done.",
                        Self::node_list(&left)
                    )
                }
            }
            UpgradeState::Done => {
                format!("Nothing: the cluster runs release {}.", self.target_release)
            }
            UpgradeState::Failed if self.acknowledged_at.is_some() => {
                "Nothing: it failed and its findings were acknowledged.".into()
            }
            UpgradeState::Failed => {
                "Nothing: it failed; acknowledge its findings or roll it back.".into()
            }
            UpgradeState::Canceled => "Nothing: it was canceled.".into(),
        }
    }
}

/// The running release: set once at install, then moved by upgrades.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningRelease {
    pub version: String,
    /// The principal that set it at install, or the upgrade that moved it.
    pub set_by: String,
    pub set_at: DateTime<Utc>,
    /// How often it was set (once at install, then once per upgrade done):
    /// the `ETag` of the running release.
    pub changes: u64,
}

/// A registered release: its parsed manifest and the canonical text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredRelease {
    pub release: Release,
    pub manifest: String,
    pub registered_by: String,
    pub registered_at: DateTime<Utc>,
    /// The position of its registration (lists sort by it).
    pub registered_position: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upgrades {
    pub releases: BTreeMap<String, RegisteredRelease>,
    pub running: Option<RunningRelease>,
    pub upgrades: BTreeMap<String, Upgrade>,
    /// The one upgrade not in a terminal state, if any.
    pub active: Option<String>,
}

// ---------------------------------------------------------------- commands

/// The commands of upgrades. Fields a request may leave out or get wrong
/// are options, so `decide` can name every problem at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpgradeCommand {
    /// Register a release whose signature the caller has checked against
    /// the trusted keys (configuration, not state).
    RegisterRelease {
        manifest: Value,
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
    },
    /// The driver: take the step that is due for the active upgrade.
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
    },
    Acknowledge {
        upgrade_id: String,
    },
}

impl UpgradeCommand {
    pub fn stream_id(&self) -> String {
        match self {
            UpgradeCommand::RegisterRelease { manifest } => release_stream(
                manifest
                    .get("version")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
            UpgradeCommand::SetRunningRelease { .. } => RUNNING_RELEASE_STREAM.to_owned(),
            UpgradeCommand::Advance => "upgrade/".to_owned(),
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

/// The upgrade an upgrade event belongs to.
pub fn upgrade_of(event: &DomainEvent) -> Option<&str> {
    Some(match event {
        DomainEvent::UpgradePlanned(e) => &e.upgrade_id,
        DomainEvent::UpgradeStateChanged(e) => &e.upgrade_id,
        DomainEvent::UpgradePrechecked(e) => &e.upgrade_id,
        DomainEvent::UpgradeNodeTurnStarted(e) => &e.upgrade_id,
        DomainEvent::UpgradeNodeReported(e) => &e.upgrade_id,
        DomainEvent::UpgradeBackupReported(e) => &e.upgrade_id,
        DomainEvent::UpgradeFailed(e) => &e.upgrade_id,
        DomainEvent::UpgradeCompleted(e) => &e.upgrade_id,
        DomainEvent::UpgradeRolledBack(e) => &e.upgrade_id,
        DomainEvent::UpgradeCanceled(e) | DomainEvent::UpgradeAcknowledged(e) => &e.upgrade_id,
        _ => return None,
    })
}

impl Upgrades {
    pub fn upgrade(&self, id: &str) -> Result<&Upgrade, Refusal> {
        self.upgrades
            .get(id)
            .ok_or_else(|| Refusal::not_found(format!("Upgrade {id}")))
    }

    pub fn active_upgrade(&self) -> Option<&Upgrade> {
        self.active.as_ref().and_then(|id| self.upgrades.get(id))
    }

    /// The write freeze, when one holds: the upgrade and its state.
    pub fn write_freeze(&self) -> Option<&Upgrade> {
        self.active_upgrade().filter(|u| u.state.freezes_writes())
    }
}
