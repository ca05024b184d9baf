//! Upgrades (SPEC §5): releases, the running release, and the upgrade
//! aggregate with its plan, prechecks, node reports, write freeze, cancel
//! and rollback.
//!
//! The states and the only moves between them:
//!
//! ```text
//! planned → prechecking → fetching → [staged →] backing_up → rolling → verifying → done
//! prechecking ..= verifying → failed
//! planned, prechecking, fetching, staged → canceled
//! ```
//!
//! The upgrade driver (a process manager in the API crate) moves an upgrade
//! on by sending [`UpgradeCommand::Advance`]: `decide` looks at the recorded
//! facts (node reports, the backup report) and answers the one step that is
//! due, or nothing. So every step is an event, decided under the log's write
//! lock like any command, and a restarted service resumes from the log.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{ErrorCode, FieldError, Findings, Refusal};
use crate::event::DomainEvent;
use crate::membership::MemberState;
use crate::release::{
    canonical, compare_versions, component_changes, parse_manifest, release_stream,
    ComponentChange, Release, RUNNING_RELEASE_STREAM,
};
use crate::state::{CommandContext, Decision, EventCtx, State, Subject};

macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The accepted values, for error messages.
            pub fn one_of() -> String {
                [$($text),+].join(", ")
            }
        }
    };
}

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

// ---------------------------------------------------------------- events

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRegistered {
    pub version: String,
    /// The manifest's canonical JSON (RFC 8785), signature included.
    pub manifest: String,
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
    /// Microseconds since the epoch.
    pub rebooted_at: Option<i64>,
    pub instances: Option<Vec<String>>,
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

    fn not_finished(&self, phase: Phase) -> Vec<&UpgradeNode> {
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

    /// The step the driver takes next, from the recorded facts; empty when
    /// the upgrade waits for someone.
    fn next_step(&self, state: &State) -> Vec<DomainEvent> {
        let id = || self.id.clone();
        let moved = |to| {
            DomainEvent::UpgradeStateChanged(UpgradeStateChanged {
                upgrade_id: id(),
                from: self.state,
                to,
            })
        };
        match self.state {
            UpgradeState::Planned => vec![moved(UpgradeState::Prechecking)],
            UpgradeState::Prechecking => {
                let prechecks = prechecks(state, self);
                let failed: Vec<String> = prechecks
                    .iter()
                    .filter(|p| !p.passed)
                    .map(|p| format!("{}: {}", p.name, p.message))
                    .collect();
                let checked = DomainEvent::UpgradePrechecked(UpgradePrechecked {
                    upgrade_id: id(),
                    prechecks,
                });
                if failed.is_empty() {
                    vec![checked, moved(UpgradeState::Fetching)]
                } else {
                    vec![
                        checked,
                        DomainEvent::UpgradeFailed(UpgradeFailed {
                            upgrade_id: id(),
                            reason: format!("Prechecks failed: {}", failed.join("; ")),
                        }),
                    ]
                }
            }
            UpgradeState::Fetching if self.not_finished(Phase::Fetch).is_empty() => {
                vec![moved(match self.mode {
                    UpgradeMode::Now => UpgradeState::BackingUp,
                    UpgradeMode::StageOnly => UpgradeState::Staged,
                })]
            }
            UpgradeState::BackingUp if self.backup.is_some() => {
                let mut events = vec![moved(UpgradeState::Rolling)];
                events.extend(self.turn_after(None));
                if self.nodes.is_empty() {
                    events.push(DomainEvent::UpgradeStateChanged(UpgradeStateChanged {
                        upgrade_id: id(),
                        from: UpgradeState::Rolling,
                        to: UpgradeState::Verifying,
                    }));
                }
                events
            }
            UpgradeState::Rolling => match self.turn {
                Some(i) if self.nodes[i].finished(Phase::Roll) => match self.turn_after(Some(i)) {
                    Some(next) => vec![next],
                    None => vec![moved(UpgradeState::Verifying)],
                },
                Some(_) => Vec::new(),
                None => vec![moved(UpgradeState::Verifying)],
            },
            UpgradeState::Verifying if self.not_finished(Phase::Verify).is_empty() => {
                vec![DomainEvent::UpgradeCompleted(UpgradeCompleted {
                    upgrade_id: id(),
                    release: self.target_release.clone(),
                })]
            }
            _ => Vec::new(),
        }
    }

    fn turn_after(&self, i: Option<usize>) -> Option<DomainEvent> {
        let next = i.map_or(0, |i| i + 1);
        self.nodes.get(next).map(|n| {
            DomainEvent::UpgradeNodeTurnStarted(UpgradeNodeTurnStarted {
                upgrade_id: self.id.clone(),
                node_id: n.node_id.clone(),
            })
        })
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

    /// The plan of an upgrade from the running release to `target`, over
    /// the members not decommissioned, in ordinal order.
    fn plan(&self, state: &State, target: &str, from: &str, mode: UpgradeMode) -> Plan {
        let target_release = self.releases.get(target).map(|r| &r.release);
        let from_release = self.releases.get(from).map(|r| &r.release);
        let (changes, components_from) = match (from_release, target_release) {
            (Some(f), Some(t)) if !f.components.is_empty() => {
                (component_changes(&f.components, &t.components), "release")
            }
            _ => (Vec::new(), "none"),
        };
        let os_changes = match (from_release, target_release) {
            (Some(f), Some(t)) => f.os != t.os,
            _ => false,
        };
        let kind = if os_changes {
            NodeKind::Os
        } else if changes.iter().any(|c| c.kind == "package") {
            NodeKind::Host
        } else {
            NodeKind::Containers
        };
        let cves = match target_release {
            Some(t) if kind == NodeKind::Os => t.cves.clone(),
            _ => Vec::new(),
        };
        let mut members: Vec<_> = state
            .membership
            .members
            .values()
            .filter(|m| m.state != MemberState::Decommissioned)
            .collect();
        members.sort_by_key(|m| m.ordinal);
        let nodes: Vec<PlanNode> = members
            .iter()
            .map(|m| PlanNode {
                node_id: m.node_id.clone(),
                ordinal: m.ordinal,
                kind,
            })
            .collect();
        let mut steps = vec!["prechecks".to_owned(), "fetch".to_owned()];
        if mode == UpgradeMode::StageOnly {
            steps.extend(["stage".to_owned(), "apply".to_owned()]);
        }
        steps.push("backup".to_owned());
        steps.extend(nodes.iter().map(|n| format!("roll {}", n.node_id)));
        steps.push("verify".to_owned());
        Plan {
            kind,
            reboot_reason: (!cves.is_empty()).then(|| "security".to_owned()),
            cves,
            component_changes: changes,
            components_from: components_from.to_owned(),
            nodes,
            steps,
        }
    }

    pub fn decide(
        &self,
        state: &State,
        cmd: &UpgradeCommand,
        _ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        match cmd {
            UpgradeCommand::RegisterRelease { manifest } => {
                let release = parse_manifest(manifest).map_err(Refusal::invalid)?;
                let text = canonical(manifest);
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
                    })],
                    subject,
                })
            }
            UpgradeCommand::SetRunningRelease { version } => {
                let mut f = Findings::default();
                let version = f.required("version", version).cloned();
                if let Some(v) = &version {
                    if !self.releases.contains_key(v) {
                        f.push("version", format!("release {v} is not registered"));
                    }
                }
                f.into_result()?;
                let version = version.expect("validated");
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
            UpgradeCommand::Create {
                upgrade_id,
                target_release,
                mode,
                backup_location,
                backup_encrypted,
            } => {
                let mut f = Findings::default();
                let target = f.required("targetRelease", target_release).cloned();
                if target.as_deref() == Some("") {
                    f.push("targetRelease", "is required");
                }
                let mode = match mode.as_deref() {
                    None => Some(UpgradeMode::Now),
                    Some(m) => UpgradeMode::parse(m).or_else(|| {
                        f.push("mode", format!("must be one of {}", UpgradeMode::one_of()));
                        None
                    }),
                };
                let location = match backup_location.as_deref() {
                    None => Some(BackupLocation::Node),
                    Some(l) => BackupLocation::parse(l).or_else(|| {
                        f.push(
                            "backup.location",
                            format!("must be one of {}", BackupLocation::one_of()),
                        );
                        None
                    }),
                };
                if !valid_upgrade_id(upgrade_id) {
                    f.push("id", "is not upg- and 10 of [0-9a-z]");
                }
                f.into_result()?;
                self.refuse_if_active()?;
                self.refuse_taken_id(upgrade_id)?;
                let running = self.running_release()?;
                let target = target.expect("validated");
                let mode = mode.expect("validated");
                let plan = self.plan(state, &target, running, mode);
                Ok(upgrade_decision(
                    upgrade_id,
                    vec![DomainEvent::UpgradePlanned(UpgradePlanned {
                        upgrade_id: upgrade_id.clone(),
                        mode,
                        target_release: target,
                        from_release: running.to_owned(),
                        backup_location: location.expect("validated"),
                        backup_encrypted: backup_encrypted.unwrap_or(false),
                        rollback_of: None,
                        restore_backup: false,
                        plan,
                    })],
                ))
            }
            UpgradeCommand::Advance => match self.active_upgrade() {
                Some(u) => Ok(upgrade_decision(&u.id, u.next_step(state))),
                None => Err(Refusal::new(ErrorCode::NotFound, "No upgrade is active.")),
            },
            UpgradeCommand::Apply { upgrade_id } => {
                let u = self.upgrade(upgrade_id)?;
                if u.state != UpgradeState::Staged {
                    return Err(state_conflict(u, "only a staged upgrade is applied."));
                }
                Ok(upgrade_decision(
                    upgrade_id,
                    vec![DomainEvent::UpgradeStateChanged(UpgradeStateChanged {
                        upgrade_id: upgrade_id.clone(),
                        from: UpgradeState::Staged,
                        to: UpgradeState::BackingUp,
                    })],
                ))
            }
            UpgradeCommand::ReportNode {
                upgrade_id,
                node_id,
                phase,
                state: status,
                message,
                host_steps,
                rebooted_at,
                instances,
            } => self.report_node(
                upgrade_id,
                node_id,
                (phase, status),
                message,
                host_steps,
                *rebooted_at,
                instances,
            ),
            UpgradeCommand::ReportBackup {
                upgrade_id,
                location,
                bundle,
                encrypted,
            } => {
                let mut f = Findings::default();
                let location = f.required("location", location).and_then(|l| {
                    BackupLocation::parse(l).or_else(|| {
                        f.push(
                            "location",
                            format!("must be one of {}", BackupLocation::one_of()),
                        );
                        None
                    })
                });
                let bundle = f.required("bundle", bundle).cloned();
                if bundle.as_deref() == Some("") {
                    f.push("bundle", "is required");
                }
                let encrypted = f.required("encrypted", encrypted).copied();
                f.into_result()?;
                let u = self.upgrade(upgrade_id)?;
                let backup = Backup {
                    location: location.expect("validated"),
                    bundle: bundle.expect("validated"),
                    encrypted: encrypted.expect("validated"),
                };
                if u.backup.as_ref() == Some(&backup) {
                    return Ok(Decision::none(Subject::Upgrade(upgrade_id.clone())));
                }
                if u.state != UpgradeState::BackingUp {
                    return Err(state_conflict(u, "a backup is reported while backing_up."));
                }
                Ok(upgrade_decision(
                    upgrade_id,
                    vec![DomainEvent::UpgradeBackupReported(UpgradeBackupReported {
                        upgrade_id: upgrade_id.clone(),
                        location: backup.location,
                        bundle: backup.bundle,
                        encrypted: backup.encrypted,
                    })],
                ))
            }
            UpgradeCommand::Cancel { upgrade_id } => {
                let u = self.upgrade(upgrade_id)?;
                match u.state {
                    UpgradeState::Canceled => Ok(Decision::none(Subject::Upgrade(upgrade_id.clone()))),
                    s if s.cancelable() => Ok(upgrade_decision(
                        upgrade_id,
                        vec![DomainEvent::UpgradeCanceled(UpgradeRef {
                            upgrade_id: upgrade_id.clone(),
                        })],
                    )),
                    s => Err(Refusal::new(
                        ErrorCode::UpgradeNotCancelable,
                        match s {
                            UpgradeState::Done | UpgradeState::Failed => format!(
                                "Upgrade {upgrade_id} is {}; only an upgrade that has not taken its backup is canceled.",
                                s.as_str()
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
            UpgradeCommand::Rollback {
                upgrade_id,
                new_upgrade_id,
                restore_backup,
            } => {
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
                    self.upgrades.get(*by).is_some_and(|r| {
                        !matches!(r.state, UpgradeState::Failed | UpgradeState::Canceled)
                    })
                }) {
                    return Err(state_conflict(
                        u,
                        &format!("it was already rolled back by {by}."),
                    ));
                }
                if *restore_backup && u.backup.is_none() {
                    return Err(Refusal::invalid(vec![FieldError::new(
                        "restoreBackup",
                        format!("upgrade {upgrade_id} took no backup to restore"),
                    )]));
                }
                self.refuse_if_active()?;
                self.refuse_taken_id(new_upgrade_id)?;
                let running = self.running_release()?;
                let mut plan = self.plan(state, &u.from_release, running, UpgradeMode::Now);
                if *restore_backup {
                    // Each node restores the backup first, in its roll turn.
                    let at = plan
                        .steps
                        .iter()
                        .position(|s| s == "backup")
                        .map_or(0, |i| i + 1);
                    plan.steps.insert(at, "restore".to_owned());
                }
                Ok(upgrade_decision(
                    new_upgrade_id,
                    vec![
                        DomainEvent::UpgradePlanned(UpgradePlanned {
                            upgrade_id: new_upgrade_id.clone(),
                            mode: UpgradeMode::Now,
                            target_release: u.from_release.clone(),
                            from_release: running.to_owned(),
                            backup_location: u.backup_location,
                            backup_encrypted: u.backup_encrypted,
                            rollback_of: Some(upgrade_id.clone()),
                            restore_backup: *restore_backup,
                            plan,
                        }),
                        DomainEvent::UpgradeRolledBack(UpgradeRolledBack {
                            upgrade_id: upgrade_id.clone(),
                            by: new_upgrade_id.clone(),
                        }),
                    ],
                ))
            }
            UpgradeCommand::Acknowledge { upgrade_id } => {
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
                        upgrade_id: upgrade_id.clone(),
                    })]
                };
                Ok(upgrade_decision(upgrade_id, events))
            }
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

    #[allow(clippy::too_many_arguments)]
    fn report_node(
        &self,
        upgrade_id: &str,
        node_id: &str,
        (phase, status): (&Option<String>, &Option<String>),
        message: &Option<String>,
        host_steps: &Option<Vec<HostStep>>,
        rebooted_at: Option<DateTime<Utc>>,
        instances: &Option<Vec<String>>,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        let phase = f.required("phase", phase).and_then(|p| {
            Phase::parse(p).or_else(|| {
                f.push("phase", format!("must be one of {}", Phase::one_of()));
                None
            })
        });
        let status = f.required("state", status).and_then(|s| {
            NodeStatus::parse(s)
                .filter(|s| *s != NodeStatus::Pending)
                .or_else(|| {
                    f.push("state", "must be one of running, done, failed");
                    None
                })
        });
        for (i, step) in host_steps.iter().flatten().enumerate() {
            if step.name.is_empty() {
                f.push(&format!("hostSteps[{i}].name"), "is required");
            }
            if !HOST_STEP_STATES.contains(&step.state.as_str()) {
                f.push(
                    &format!("hostSteps[{i}].state"),
                    format!("must be one of {}", HOST_STEP_STATES.join(", ")),
                );
            }
        }
        f.into_result()?;
        let (phase, status) = (phase.expect("validated"), status.expect("validated"));
        let u = self.upgrade(upgrade_id)?;
        let Some(idx) = u.nodes.iter().position(|n| n.node_id == node_id) else {
            return Err(Refusal::not_found(format!(
                "Node {node_id} of upgrade {upgrade_id}"
            )));
        };
        let node = &u.nodes[idx];
        let message = message.clone().unwrap_or_default();
        let unchanged = node.phase == phase
            && node.state == status
            && (message.is_empty() || message == node.message)
            && host_steps.as_ref().is_none_or(|h| *h == node.host_steps)
            && rebooted_at.is_none()
            && instances.as_ref().is_none_or(|i| *i == node.instances);
        if unchanged {
            return Ok(Decision::none(Subject::Upgrade(upgrade_id.to_owned())));
        }
        if u.state.is_terminal() {
            return Err(state_conflict(u, "it takes no more reports."));
        }
        // A node whose fetch or verify fails, whenever it reports it, fails
        // the upgrade: from the prechecks on, any state but `planned` can
        // go to `failed`. A roll is only ever reported in the node's turn.
        let fails_it = status == NodeStatus::Failed
            && phase != Phase::Roll
            && u.state.can_move_to(UpgradeState::Failed);
        match phase {
            _ if fails_it => {}
            Phase::Roll if u.state != UpgradeState::Rolling || u.turn != Some(idx) => {
                let turn = u
                    .turn
                    .filter(|_| u.state == UpgradeState::Rolling)
                    .map(|i| u.nodes[i].node_id.clone());
                return Err(Refusal::new(
                    ErrorCode::NotNodeTurn,
                    match &turn {
                        Some(t) => format!("It is {t}'s turn to roll, not {node_id}'s."),
                        None => format!(
                            "Upgrade {upgrade_id} is {}; no node rolls now.",
                            u.state.as_str()
                        ),
                    },
                )
                .with_details(json!({ "turn": turn, "state": u.state.as_str() })));
            }
            Phase::Fetch if u.state != UpgradeState::Fetching => {
                return Err(state_conflict(u, "fetch is reported while fetching."));
            }
            Phase::Verify if u.state != UpgradeState::Verifying => {
                return Err(state_conflict(u, "verify is reported while verifying."));
            }
            _ => {}
        }
        let mut events = vec![DomainEvent::UpgradeNodeReported(UpgradeNodeReported {
            upgrade_id: upgrade_id.to_owned(),
            node_id: node_id.to_owned(),
            phase,
            state: status,
            message: message.clone(),
            host_steps: host_steps.clone(),
            rebooted_at: rebooted_at.map(|t| t.timestamp_micros()),
            instances: instances.clone(),
        })];
        if status == NodeStatus::Failed {
            let why = if message.is_empty() {
                "no message".to_owned()
            } else {
                message
            };
            events.push(DomainEvent::UpgradeFailed(UpgradeFailed {
                upgrade_id: upgrade_id.to_owned(),
                reason: format!("{node_id} failed {}: {why}", phase.as_str()),
            }));
        }
        Ok(upgrade_decision(upgrade_id, events))
    }

    /// Folds one event. Events were decided against this very state, so
    /// an unknown upgrade here is a corrupt log, and ignored.
    pub fn evolve(&mut self, ctx: &EventCtx, event: &DomainEvent) {
        let at = ctx.occurred_at;
        match event {
            DomainEvent::ReleaseRegistered(e) => {
                // Validated when registered; read as recorded since.
                let mut release = crate::release::read_recorded(&e.manifest);
                release.version = e.version.clone();
                self.releases.insert(
                    e.version.clone(),
                    RegisteredRelease {
                        release,
                        manifest: e.manifest.clone(),
                        registered_by: ctx.principal.to_owned(),
                        registered_at: at,
                        registered_position: ctx.position,
                    },
                );
                return;
            }
            DomainEvent::RunningReleaseSet(e) => {
                self.running = Some(RunningRelease {
                    version: e.version.clone(),
                    set_by: ctx.principal.to_owned(),
                    set_at: at,
                    changes: 1,
                });
                return;
            }
            DomainEvent::UpgradePlanned(e) => {
                let restore = e.restore_backup;
                let nodes = e
                    .plan
                    .nodes
                    .iter()
                    .map(|n| UpgradeNode {
                        node_id: n.node_id.clone(),
                        ordinal: n.ordinal,
                        kind: n.kind,
                        phase: Phase::Fetch,
                        state: NodeStatus::Pending,
                        message: String::new(),
                        host_steps: host_steps(n.kind, restore),
                        previous_release: e.from_release.clone(),
                        instances: Vec::new(),
                    })
                    .collect();
                self.upgrades.insert(
                    e.upgrade_id.clone(),
                    Upgrade {
                        id: e.upgrade_id.clone(),
                        mode: e.mode,
                        state: UpgradeState::Planned,
                        target_release: e.target_release.clone(),
                        from_release: e.from_release.clone(),
                        backup_location: e.backup_location,
                        backup_encrypted: e.backup_encrypted,
                        backup: None,
                        plan: e.plan.clone(),
                        prechecks: Vec::new(),
                        nodes,
                        turn: None,
                        failure_reason: None,
                        last_restart_at: None,
                        rollback_of: e.rollback_of.clone(),
                        restore_backup: restore,
                        rolled_back_by: None,
                        acknowledged_at: None,
                        created_by: ctx.principal.to_owned(),
                        created_at: at,
                        canceled_by: None,
                        canceled_at: None,
                        updated_at: at,
                        created_position: ctx.position,
                        version: ctx.stream_version,
                    },
                );
                self.active = Some(e.upgrade_id.clone());
                return;
            }
            _ => {}
        }
        let Some(id) = upgrade_of(event) else {
            return;
        };
        let Some(u) = self.upgrades.get_mut(id) else {
            return;
        };
        u.updated_at = at;
        u.version = ctx.stream_version;
        match event {
            DomainEvent::UpgradeStateChanged(e) => {
                u.state = e.to;
                if e.to == UpgradeState::Verifying {
                    u.turn = None;
                    for n in &mut u.nodes {
                        n.phase = Phase::Verify;
                        n.state = NodeStatus::Pending;
                    }
                }
            }
            DomainEvent::UpgradePrechecked(e) => u.prechecks = e.prechecks.clone(),
            DomainEvent::UpgradeNodeTurnStarted(e) => {
                u.turn = u.nodes.iter().position(|n| n.node_id == e.node_id);
                if let Some(n) = u.nodes.iter_mut().find(|n| n.node_id == e.node_id) {
                    n.phase = Phase::Roll;
                    n.state = NodeStatus::Pending;
                }
            }
            DomainEvent::UpgradeNodeReported(e) => {
                if let Some(n) = u.nodes.iter_mut().find(|n| n.node_id == e.node_id) {
                    n.phase = e.phase;
                    n.state = e.state;
                    if !e.message.is_empty() {
                        n.message = e.message.clone();
                    }
                    if let Some(h) = &e.host_steps {
                        n.host_steps = h.clone();
                    }
                    if let Some(i) = &e.instances {
                        n.instances = i.clone();
                    }
                }
                if let Some(t) = e.rebooted_at {
                    u.last_restart_at = Some(crate::log::micros_to_time(t));
                }
            }
            DomainEvent::UpgradeBackupReported(e) => {
                u.backup = Some(Backup {
                    location: e.location,
                    bundle: e.bundle.clone(),
                    encrypted: e.encrypted,
                });
            }
            DomainEvent::UpgradeFailed(e) => {
                u.state = UpgradeState::Failed;
                u.failure_reason = Some(e.reason.clone());
            }
            DomainEvent::UpgradeCompleted(e) => {
                u.state = UpgradeState::Done;
                self.running = Some(RunningRelease {
                    version: e.release.clone(),
                    set_by: e.upgrade_id.clone(),
                    set_at: at,
                    changes: self.running.as_ref().map_or(0, |r| r.changes) + 1,
                });
            }
            DomainEvent::UpgradeCanceled(_) => {
                u.state = UpgradeState::Canceled;
                u.canceled_by = Some(ctx.principal.to_owned());
                u.canceled_at = Some(at);
            }
            DomainEvent::UpgradeRolledBack(e) => u.rolled_back_by = Some(e.by.clone()),
            DomainEvent::UpgradeAcknowledged(_) => u.acknowledged_at = Some(at),
            _ => {}
        }
        if self.active.as_deref() == Some(id)
            && self.upgrades.get(id).is_some_and(|u| u.state.is_terminal())
        {
            self.active = None;
        }
    }
}

/// Runs every precheck of an upgrade against the recorded state. Pure: the
/// same log gives the same findings.
pub fn prechecks(state: &State, u: &Upgrade) -> Vec<Precheck> {
    let up = &state.upgrades;
    let target = up.releases.get(&u.target_release).map(|r| &r.release);
    let from = up.releases.get(&u.from_release).map(|r| &r.release);
    let running = up
        .running
        .as_ref()
        .map(|r| r.version.as_str())
        .unwrap_or("");
    let rollback = u.rollback_of.is_some();
    let check = |name: &str, passed: bool, message: String| Precheck {
        name: name.to_owned(),
        passed,
        message,
    };
    let mut out = Vec::with_capacity(PRECHECKS.len());

    out.push(match target {
        Some(_) => check(
            "release",
            true,
            format!("Release {} is registered.", u.target_release),
        ),
        None => check(
            "release",
            false,
            format!(
                "Release {} is not registered; register its signed manifest first.",
                u.target_release
            ),
        ),
    });

    let newer = compare_versions(&u.target_release, running) == std::cmp::Ordering::Greater;
    out.push(if rollback {
        check(
            "version",
            true,
            format!("A rollback returns to {}.", u.target_release),
        )
    } else if newer {
        check(
            "version",
            true,
            format!("{} is newer than the running {running}.", u.target_release),
        )
    } else {
        check(
            "version",
            false,
            format!(
                "{} is not newer than the running release {running}.",
                u.target_release
            ),
        )
    });

    out.push(upgrade_path(target, &u.from_release, &u.target_release));

    out.push(
        match up
            .upgrades
            .values()
            .find(|o| o.id != u.id && !o.state.is_terminal())
        {
            Some(o) => check(
                "upgrade",
                false,
                format!("Upgrade {} is {}.", o.id, o.state.as_str()),
            ),
            None => check("upgrade", true, "No other upgrade is active.".into()),
        },
    );

    out.push(check(
        "cluster-shutdown",
        true,
        "No cluster shutdown is recorded; the service holds no shutdown fact to judge by.".into(),
    ));

    let generation = state.membership.generation;
    let not_ready: Vec<String> = state
        .membership
        .members
        .values()
        .filter(|m| m.state != MemberState::Decommissioned)
        .filter_map(|m| {
            if m.state != MemberState::Active {
                Some(format!("{} is {}", m.node_id, m.state.as_str()))
            } else if crate::membership::lagging(m.state, m.applied_generation, generation) {
                Some(format!(
                    "{} is lagging (applied generation {} of {generation})",
                    m.node_id, m.applied_generation
                ))
            } else {
                None
            }
        })
        .collect();
    out.push(if not_ready.is_empty() {
        check(
            "readiness",
            true,
            "Every member is active and current.".into(),
        )
    } else {
        check(
            "readiness",
            false,
            format!("Not ready: {}.", not_ready.join("; ")),
        )
    });

    out.push(check(
        "schema",
        true,
        "No schema versions are recorded for the releases; the service holds no schema fact to judge by.".into(),
    ));

    let gone: Vec<&str> = u
        .nodes
        .iter()
        .filter(|n| {
            state
                .membership
                .members
                .get(&n.node_id)
                .is_none_or(|m| m.state == MemberState::Decommissioned)
        })
        .map(|n| n.node_id.as_str())
        .collect();
    out.push(if u.nodes.is_empty() {
        check("node", false, "The plan has no node to upgrade.".into())
    } else if !gone.is_empty() {
        check(
            "node",
            false,
            format!("No longer members: {}.", gone.join(", ")),
        )
    } else {
        check(
            "node",
            true,
            format!("{} nodes, rolled in ordinal order.", u.nodes.len()),
        )
    });

    out.push(match u.plan.components_from.as_str() {
        "release" => check(
            "components",
            true,
            format!(
                "{} component changes against the running release's list.",
                u.plan.component_changes.len()
            ),
        ),
        _ => check(
            "components",
            true,
            "The running release lists no components; nothing could be compared.".into(),
        ),
    });

    out.push(match (from, target) {
        _ if rollback => check(
            "release-differs",
            true,
            "A rollback renders the release it returns to again.".into(),
        ),
        (Some(f), Some(t)) if f.components == t.components && f.os == t.os => check(
            "release-differs",
            false,
            format!("{} changes nothing the cluster runs.", u.target_release),
        ),
        (Some(_), Some(_)) => check(
            "release-differs",
            true,
            "The target release differs from the running one.".into(),
        ),
        _ => check(
            "release-differs",
            true,
            "One of the releases is not registered; nothing to compare.".into(),
        ),
    });

    out.push(check(
        "space",
        true,
        "No node has reported its free space; the service holds no space fact to judge by.".into(),
    ));
    out.push(check(
        "backup-space",
        true,
        format!(
            "No free space is reported for a backup at {}; the service holds no space fact to judge by.",
            u.backup_location.as_str()
        ),
    ));
    out
}

/// `upgrade-path`: a known-broken path, or a required stop skipped, fails
/// and says the way round.
fn upgrade_path(target: Option<&Release>, from: &str, to: &str) -> Precheck {
    let check = |passed: bool, message: String| Precheck {
        name: "upgrade-path".to_owned(),
        passed,
        message,
    };
    let Some(target) = target else {
        return check(
            true,
            format!("Release {to} is not registered; no path to judge."),
        );
    };
    if let Some(k) = target.known_broken.iter().find(|k| k.from == from) {
        return check(
            false,
            format!(
                "Upgrading from {from} to {to} is known to be broken: {}. Way round: {}.",
                k.reason, k.way_round
            ),
        );
    }
    let mut skipped: Vec<&String> = target
        .required_stops
        .iter()
        .filter(|s| {
            compare_versions(s, from) == std::cmp::Ordering::Greater
                && compare_versions(s, to) == std::cmp::Ordering::Less
        })
        .collect();
    skipped.sort_by(|a, b| compare_versions(a, b));
    match skipped.first() {
        Some(stop) => check(
            false,
            format!(
                "{to} requires a stop at {stop}: upgrade from {from} to {stop} first, then to {to}."
            ),
        ),
        None => check(true, format!("{from} to {to} skips no required stop.")),
    }
}
