//! The upgrade record, its plan and the running release (the alarms are in
//! [`super::alarms`], re-exported here as before; the commands, which name
//! this module's types, are in [`super::commands`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::Refusal;
use crate::release::{ComponentChange, Release};

pub use super::alarms::*;

string_enum! {
    /// Where an upgrade is.
    pub enum UpgradeState {
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
    pub enum UpgradeMode {
        Now = "now",
        StageOnly = "stage-only",
    }
}

string_enum! {
    /// How much of a node an upgrade touches, smallest first.
    pub enum NodeKind {
        Containers = "containers",
        Host = "host",
        Os = "os",
    }
}

string_enum! {
    pub enum BackupLocation {
        Node = "node",
        Target = "target",
    }
}

string_enum! {
    /// The part of an upgrade a node reports on.
    pub enum Phase {
        Fetch = "fetch",
        Roll = "roll",
        Verify = "verify",
    }
}

string_enum! {
    /// How far a node is in its current phase; `rolled_back`: the node
    /// switched itself back to the release it ran before.
    pub enum NodeStatus {
        Pending = "pending",
        Running = "running",
        Done = "done",
        Failed = "failed",
        RolledBack = "rolled_back",
    }
}

string_enum! {
    /// Where a release came from: a signed manifest registered over the
    /// API, or install media loaded on the host (`stratum releases import`).
    pub enum ReleaseSource {
        Manifest = "manifest",
        Media = "media",
    }
}

string_enum! {
    /// What a plan step acts on: the cluster once, every node at once, or
    /// one node in its turn.
    pub enum StepKind {
        Cluster = "cluster",
        EveryNode = "every-node",
        Node = "node",
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostStep {
    pub name: String,
    pub state: String,
    pub reboot_mode: String,
    pub detail: String,
    /// Units the restart step still has to restart.
    pub pending_units: Vec<String>,
    /// Units the restart step restarted onto their pin, or switch-sysext
    /// restarted.
    pub restarted_units: Vec<String>,
    /// Units the restore step stopped; the step that renders the release's
    /// pins starts them again.
    pub stopped_units: Vec<String>,
    /// The system extensions the switch-sysext step switched.
    pub switched_sysexts: Vec<String>,
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
            ..Default::default()
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
    /// What restarts, in order.
    pub restarts: Vec<String>,
    /// What the manifests change on the node: a subset of `os`, `kernel`,
    /// `kernelArgs`, `hostBinaries`, `sysext`.
    pub changes: Vec<String>,
    /// The node fetched the target release for an earlier upgrade: its
    /// fetch starts done.
    pub fetched: bool,
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStep {
    pub name: String,
    pub node_id: Option<String>,
    pub kind: StepKind,
}

impl PlanStep {
    pub fn new(name: &str, kind: StepKind) -> Self {
        Self {
            name: name.to_owned(),
            node_id: None,
            kind,
        }
    }

    pub fn on_node(name: &str, node_id: &str) -> Self {
        Self {
            name: name.to_owned(),
            node_id: Some(node_id.to_owned()),
            kind: StepKind::Node,
        }
    }
}

/// Where an upgrade's backup goes, as planned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanBackup {
    pub location: BackupLocation,
    /// The configured backup target, when the location is `target`.
    pub target: Option<String>,
    pub encrypted: bool,
}

/// What an upgrade will do, decided when it is planned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// What the operator will see, in a sentence or two.
    pub summary: String,
    /// The release key that signed the target manifest.
    pub signed_by: String,
    /// Where the target release came from.
    pub source_kind: ReleaseSource,
    pub kind: NodeKind,
    /// `security` when the OS change fixes vulnerabilities.
    pub reboot_reason: Option<String>,
    pub cves: Vec<String>,
    pub component_changes: Vec<ComponentChange>,
    /// `release` (the running release's list), `nodes` (what the nodes
    /// report) or `none`.
    pub components_from: String,
    /// The nodes in roll order (their ordinals).
    pub nodes: Vec<PlanNode>,
    pub steps: Vec<PlanStep>,
    /// The previous OS stays bootable (A/B OS, or no OS change).
    pub previous_os_bootable: bool,
    /// The old control plane cannot run on the new schema: going back
    /// means a restore.
    pub restore_required: bool,
    /// How long the driver lets the cluster settle after a restart before
    /// the next node's turn or the end.
    pub settle_seconds: u64,
}

/// One precheck's finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Precheck {
    pub name: String,
    pub passed: bool,
    pub message: String,
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
    /// The host-helper's current intent, as the node reports it.
    pub host_state: String,
    pub previous_release: String,
    /// The instances that ran on the node when it rebooted.
    pub instances: Vec<String>,
    /// The instances the node reports running again since.
    pub running_instances: Vec<String>,
    pub rebooted_at: Option<DateTime<Utc>>,
}

impl UpgradeNode {
    /// Whether the node finished `phase` (or is past it). A rebooted
    /// node's verify counts only once every instance that ran on it when it
    /// rebooted runs again.
    pub fn finished(&self, phase: Phase) -> bool {
        let done = self.phase > phase || (self.phase == phase && self.state == NodeStatus::Done);
        done && (phase != Phase::Verify || self.instances_back().is_empty())
    }

    /// The instances that ran when the node rebooted and are not reported
    /// running again.
    pub fn instances_back(&self) -> Vec<&str> {
        if self.rebooted_at.is_none() {
            return Vec::new();
        }
        self.instances
            .iter()
            .filter(|i| !self.running_instances.contains(i))
            .map(String::as_str)
            .collect()
    }

    /// Whether it still waits for a reboot its plan gives it.
    pub fn reboot_pending(&self) -> bool {
        reboot_of(self.kind) != "none" && self.rebooted_at.is_none()
    }
}

/// A warning on an upgrade's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    pub code: String,
    pub node_id: String,
    pub since: DateTime<Utc>,
    pub message: String,
}

/// What a node agent reports it runs and holds (newest report wins).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
    /// The image pins it runs: `{kind: image, name, version, digest}`.
    pub images: Vec<crate::release::Component>,
    /// The host packages it lists, by NEVRA.
    pub packages: Vec<crate::release::Component>,
    /// Free bytes where fetched bundles go.
    pub bundle_free_bytes: Option<u64>,
    /// Free bytes where a backup on the node goes.
    pub backup_free_bytes: Option<u64>,
    /// The bytes a backup of what this node holds takes.
    pub backup_bytes: Option<u64>,
    /// The database schema version it runs.
    pub schema_version: Option<u32>,
    /// Whether its services are ready.
    pub ready: Option<bool>,
    /// Whether it is shut down (or shutting down).
    pub shut_down: Option<bool>,
}

/// A node's facts as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedFacts {
    pub facts: NodeFacts,
    pub reported_by: String,
    pub reported_at: DateTime<Utc>,
    pub version: u64,
}

pub fn facts_stream(node_id: &str) -> String {
    format!("facts/{node_id}")
}

/// The bounds of [`Upgrade::retry_after`], in seconds.
pub const RETRY_AFTER_MIN: u64 = 5;
pub const RETRY_AFTER_MAX: u64 = 600;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upgrade {
    pub id: String,
    pub mode: UpgradeMode,
    pub state: UpgradeState,
    pub target_release: String,
    pub from_release: String,
    pub backup_location: BackupLocation,
    pub backup_encrypted: bool,
    /// The configured backup target, when the location is `target`.
    pub backup_target: Option<String>,
    pub backup: Option<Backup>,
    pub plan: Plan,
    pub prechecks: Vec<Precheck>,
    pub nodes: Vec<UpgradeNode>,
    /// The index in `nodes` of the node whose roll turn it is.
    pub turn: Option<usize>,
    pub failure_reason: Option<String>,
    pub last_restart_at: Option<DateTime<Utc>>,
    /// When it entered `staged`.
    pub staged_at: Option<DateTime<Utc>>,
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

    /// How long a writer the freeze refused should wait before it asks
    /// again, in seconds: until the settling ends when the upgrade waits on
    /// the clock, a minute when it waits on a report (a backup, a node's
    /// restart or verify); never under 5 s nor over 10 min.
    pub fn retry_after(&self, now: DateTime<Utc>) -> u64 {
        const REPORT: u64 = 60;
        let secs = match self.settled_at() {
            Some(t) if t > now => (t - now).num_seconds().max(0) as u64 + 1,
            _ => REPORT,
        };
        secs.clamp(RETRY_AFTER_MIN, RETRY_AFTER_MAX)
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
                Some(n) if n.finished(Phase::Roll) => match self.settled_at() {
                    Some(t) => format!(
                        "{} rolled; the cluster settles until {} before the next node's turn.",
                        n.node_id,
                        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    ),
                    None => format!("{} rolled; starting the next node's turn.", n.node_id),
                },
                Some(n) => format!(
                    "Waiting for {} to report roll done (node {} of {}).",
                    n.node_id,
                    self.turn.unwrap_or(0) + 1,
                    self.nodes.len()
                ),
                None => "Rolling: choosing the next node.".into(),
            },
            UpgradeState::Verifying => {
                let to_report: Vec<&UpgradeNode> = self
                    .nodes
                    .iter()
                    .filter(|n| !(n.phase == Phase::Verify && n.state == NodeStatus::Done))
                    .collect();
                let instances: Vec<String> = self
                    .nodes
                    .iter()
                    .filter(|n| n.phase == Phase::Verify && n.state == NodeStatus::Done)
                    .filter(|n| !n.instances_back().is_empty())
                    .map(|n| format!("{}'s {}", n.node_id, n.instances_back().join(", ")))
                    .collect();
                let mut parts = Vec::new();
                if !to_report.is_empty() {
                    parts.push(format!(
                        "{} to report verify done",
                        Self::node_list(&to_report)
                    ));
                }
                if !instances.is_empty() {
                    parts.push(format!("{} to run again", instances.join("; ")));
                }
                match (parts.is_empty(), self.settled_at()) {
                    (false, _) => format!("Waiting for {}.", parts.join(", and for ")),
                    (true, Some(t)) => format!(
                        "Every node has verified; the cluster settles until {} before the end.",
                        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    ),
                    (true, None) => "Every node has verified; finishing.".into(),
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
    pub source: ReleaseSource,
    pub manifest: String,
    pub registered_by: String,
    pub registered_at: DateTime<Utc>,
    /// The position of its registration (lists sort by it).
    pub registered_position: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upgrades {
    pub releases: crate::Map<String, RegisteredRelease>,
    pub running: Option<RunningRelease>,
    pub upgrades: crate::Map<String, Upgrade>,
    /// The one upgrade not in a terminal state, if any.
    pub active: Option<String>,
    /// Each node's newest facts report.
    pub facts: crate::Map<String, RecordedFacts>,
    /// The releases each node fetched (and keeps for a later upgrade).
    pub fetched: crate::Map<String, std::collections::BTreeSet<String>>,
    /// Every alarm ever raised, by [`alarm_key`].
    pub alarms: crate::Map<String, Alarm>,
    /// Every checkpoint fork found, by [`checkpoint_fork_key`], and who
    /// acknowledged it.
    pub checkpoint_forks: crate::Map<String, CheckpointFork>,
}

/// The log no longer extends the newest checkpoint the service signed (a
/// database restored from an older backup, a failover that lost a
/// tail): an event, kept in the record as found: it raises the `log-checkpoint-fork` alarm, and no checkpoint is
/// signed until an operator acknowledges this fork.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointForkFound {
    /// The newest signed checkpoint: its size and root (hex).
    pub signed_size: u64,
    pub signed_root: String,
    /// The log when the fork was found: its size and root (hex).
    pub log_size: u64,
    pub log_root: String,
}

/// A fork of the signed checkpoints, as the log recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointFork {
    pub found: CheckpointForkFound,
    /// Who acknowledged it and why; `None` while it stops signing.
    pub acknowledged: Option<(String, String)>,
}

impl Upgrades {
    /// The fork from the signed checkpoint of `size` and `root`, if found.
    pub fn checkpoint_fork(&self, size: u64, root: &str) -> Option<&CheckpointFork> {
        self.checkpoint_forks.get(&checkpoint_fork_key(size, root))
    }
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
