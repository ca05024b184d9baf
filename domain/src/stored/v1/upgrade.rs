//! Version 1 of the stored upgrade types: the enums, the parts of a plan
//! and the upgrade events. Frozen: see [`super`].

use serde::{Deserialize, Serialize};

use crate::release::ComponentChange;
use crate::upgrade::{
    BackupLocation, NodeKind, Phase, Precheck, RunningReleaseSet, UpgradeBackupReported,
    UpgradeCompleted, UpgradeFailed, UpgradeMode, UpgradeNodeTurnStarted, UpgradePrechecked,
    UpgradeRef, UpgradeRolledBack, UpgradeState, UpgradeStateChanged,
};

// -------------------------------------------------------- upgrade enums

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpgradeStateV1 {
    Planned,
    Prechecking,
    Fetching,
    Staged,
    BackingUp,
    Rolling,
    Verifying,
    Done,
    Failed,
    Canceled,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpgradeModeV1 {
    #[serde(rename = "now")]
    Now,
    #[serde(rename = "stage-only")]
    StageOnly,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKindV1 {
    Containers,
    Host,
    Os,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackupLocationV1 {
    Node,
    Target,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseV1 {
    Fetch,
    Roll,
    Verify,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeStatusV1 {
    Pending,
    Running,
    Done,
    Failed,
}

impl From<UpgradeState> for UpgradeStateV1 {
    fn from(s: UpgradeState) -> Self {
        match s {
            UpgradeState::Planned => UpgradeStateV1::Planned,
            UpgradeState::Prechecking => UpgradeStateV1::Prechecking,
            UpgradeState::Fetching => UpgradeStateV1::Fetching,
            UpgradeState::Staged => UpgradeStateV1::Staged,
            UpgradeState::BackingUp => UpgradeStateV1::BackingUp,
            UpgradeState::Rolling => UpgradeStateV1::Rolling,
            UpgradeState::Verifying => UpgradeStateV1::Verifying,
            UpgradeState::Done => UpgradeStateV1::Done,
            UpgradeState::Failed => UpgradeStateV1::Failed,
            UpgradeState::Canceled => UpgradeStateV1::Canceled,
        }
    }
}

impl From<UpgradeStateV1> for UpgradeState {
    fn from(s: UpgradeStateV1) -> Self {
        match s {
            UpgradeStateV1::Planned => UpgradeState::Planned,
            UpgradeStateV1::Prechecking => UpgradeState::Prechecking,
            UpgradeStateV1::Fetching => UpgradeState::Fetching,
            UpgradeStateV1::Staged => UpgradeState::Staged,
            UpgradeStateV1::BackingUp => UpgradeState::BackingUp,
            UpgradeStateV1::Rolling => UpgradeState::Rolling,
            UpgradeStateV1::Verifying => UpgradeState::Verifying,
            UpgradeStateV1::Done => UpgradeState::Done,
            UpgradeStateV1::Failed => UpgradeState::Failed,
            UpgradeStateV1::Canceled => UpgradeState::Canceled,
        }
    }
}

impl From<UpgradeMode> for UpgradeModeV1 {
    fn from(m: UpgradeMode) -> Self {
        match m {
            UpgradeMode::Now => UpgradeModeV1::Now,
            UpgradeMode::StageOnly => UpgradeModeV1::StageOnly,
        }
    }
}

impl From<UpgradeModeV1> for UpgradeMode {
    fn from(m: UpgradeModeV1) -> Self {
        match m {
            UpgradeModeV1::Now => UpgradeMode::Now,
            UpgradeModeV1::StageOnly => UpgradeMode::StageOnly,
        }
    }
}

impl From<NodeKind> for NodeKindV1 {
    fn from(k: NodeKind) -> Self {
        match k {
            NodeKind::Containers => NodeKindV1::Containers,
            NodeKind::Host => NodeKindV1::Host,
            NodeKind::Os => NodeKindV1::Os,
        }
    }
}

impl From<NodeKindV1> for NodeKind {
    fn from(k: NodeKindV1) -> Self {
        match k {
            NodeKindV1::Containers => NodeKind::Containers,
            NodeKindV1::Host => NodeKind::Host,
            NodeKindV1::Os => NodeKind::Os,
        }
    }
}

impl From<BackupLocation> for BackupLocationV1 {
    fn from(l: BackupLocation) -> Self {
        match l {
            BackupLocation::Node => BackupLocationV1::Node,
            BackupLocation::Target => BackupLocationV1::Target,
        }
    }
}

impl From<BackupLocationV1> for BackupLocation {
    fn from(l: BackupLocationV1) -> Self {
        match l {
            BackupLocationV1::Node => BackupLocation::Node,
            BackupLocationV1::Target => BackupLocation::Target,
        }
    }
}

impl From<Phase> for PhaseV1 {
    fn from(p: Phase) -> Self {
        match p {
            Phase::Fetch => PhaseV1::Fetch,
            Phase::Roll => PhaseV1::Roll,
            Phase::Verify => PhaseV1::Verify,
        }
    }
}

impl From<PhaseV1> for Phase {
    fn from(p: PhaseV1) -> Self {
        match p {
            PhaseV1::Fetch => Phase::Fetch,
            PhaseV1::Roll => Phase::Roll,
            PhaseV1::Verify => Phase::Verify,
        }
    }
}

// ------------------------------------------------------- upgrade parts

/// One pinned component an upgrade changes. `kind` was written as text
/// (`image`, `package`), not as an enum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentChangeV1 {
    pub kind: String,
    pub name: String,
    pub from: String,
    pub to: String,
    pub from_id: String,
    pub to_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanNodeV1 {
    pub node_id: String,
    pub ordinal: u32,
    pub kind: NodeKindV1,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanV1 {
    pub kind: NodeKindV1,
    pub reboot_reason: Option<String>,
    pub cves: Vec<String>,
    pub component_changes: Vec<ComponentChangeV1>,
    pub components_from: String,
    pub nodes: Vec<PlanNodeV1>,
    pub steps: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrecheckV1 {
    pub name: String,
    pub passed: bool,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostStepV1 {
    pub name: String,
    pub state: String,
    pub reboot_mode: String,
    pub detail: String,
}

impl From<&ComponentChange> for ComponentChangeV1 {
    fn from(c: &ComponentChange) -> Self {
        ComponentChangeV1 {
            kind: c.kind.clone(),
            name: c.name.clone(),
            from: c.from.clone(),
            to: c.to.clone(),
            from_id: c.from_id.clone(),
            to_id: c.to_id.clone(),
        }
    }
}

impl From<ComponentChangeV1> for ComponentChange {
    fn from(c: ComponentChangeV1) -> Self {
        ComponentChange {
            kind: c.kind,
            name: c.name,
            from: c.from,
            to: c.to,
            from_id: c.from_id,
            to_id: c.to_id,
        }
    }
}

impl From<&Precheck> for PrecheckV1 {
    fn from(p: &Precheck) -> Self {
        PrecheckV1 {
            name: p.name.clone(),
            passed: p.passed,
            message: p.message.clone(),
        }
    }
}

impl From<PrecheckV1> for Precheck {
    fn from(p: PrecheckV1) -> Self {
        Precheck {
            name: p.name,
            passed: p.passed,
            message: p.message,
        }
    }
}

/// The type of an instant in the domain's upgrade events; v1 stores it as
/// microseconds since the epoch. `micros` and `time` are the only places
/// that know what it is.
/// The domain holds instants as `DateTime<Utc>`; v1 stores microseconds
/// since the epoch.
type DomainTime = chrono::DateTime<chrono::Utc>;

/// A domain instant as v1 stores it.
pub(in crate::stored) fn micros(t: DomainTime) -> i64 {
    t.timestamp_micros()
}

/// A stored v1 instant as the domain holds it.
pub(in crate::stored) fn time(m: i64) -> DomainTime {
    crate::log::micros_to_time(m)
}

// ------------------------------------------------------ upgrade events

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRegisteredV1 {
    pub version: String,
    /// The manifest's canonical JSON (RFC 8785), signature included.
    pub manifest: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningReleaseSetV1 {
    pub version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePlannedV1 {
    pub upgrade_id: String,
    pub mode: UpgradeModeV1,
    pub target_release: String,
    pub from_release: String,
    pub backup_location: BackupLocationV1,
    pub backup_encrypted: bool,
    pub rollback_of: Option<String>,
    pub restore_backup: bool,
    pub plan: PlanV1,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeStateChangedV1 {
    pub upgrade_id: String,
    pub from: UpgradeStateV1,
    pub to: UpgradeStateV1,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradePrecheckedV1 {
    pub upgrade_id: String,
    pub prechecks: Vec<PrecheckV1>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeNodeTurnStartedV1 {
    pub upgrade_id: String,
    pub node_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeNodeReportedV1 {
    pub upgrade_id: String,
    pub node_id: String,
    pub phase: PhaseV1,
    pub state: NodeStatusV1,
    pub message: String,
    pub host_steps: Option<Vec<HostStepV1>>,
    /// Microseconds since the epoch.
    pub rebooted_at: Option<i64>,
    pub instances: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeBackupReportedV1 {
    pub upgrade_id: String,
    pub location: BackupLocationV1,
    pub bundle: String,
    pub encrypted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeFailedV1 {
    pub upgrade_id: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeCompletedV1 {
    pub upgrade_id: String,
    pub release: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeRolledBackV1 {
    pub upgrade_id: String,
    pub by: String,
}

/// `UpgradeCanceled` and `UpgradeAcknowledged`: the upgrade only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeRefV1 {
    pub upgrade_id: String,
}

impl From<&RunningReleaseSet> for RunningReleaseSetV1 {
    fn from(e: &RunningReleaseSet) -> Self {
        RunningReleaseSetV1 {
            version: e.version.clone(),
        }
    }
}

impl From<RunningReleaseSetV1> for RunningReleaseSet {
    fn from(e: RunningReleaseSetV1) -> Self {
        RunningReleaseSet { version: e.version }
    }
}

impl From<&UpgradeStateChanged> for UpgradeStateChangedV1 {
    fn from(e: &UpgradeStateChanged) -> Self {
        UpgradeStateChangedV1 {
            upgrade_id: e.upgrade_id.clone(),
            from: e.from.into(),
            to: e.to.into(),
        }
    }
}

impl From<UpgradeStateChangedV1> for UpgradeStateChanged {
    fn from(e: UpgradeStateChangedV1) -> Self {
        UpgradeStateChanged {
            upgrade_id: e.upgrade_id,
            from: e.from.into(),
            to: e.to.into(),
        }
    }
}

impl From<&UpgradePrechecked> for UpgradePrecheckedV1 {
    fn from(e: &UpgradePrechecked) -> Self {
        UpgradePrecheckedV1 {
            upgrade_id: e.upgrade_id.clone(),
            prechecks: e.prechecks.iter().map(Into::into).collect(),
        }
    }
}

impl From<UpgradePrecheckedV1> for UpgradePrechecked {
    fn from(e: UpgradePrecheckedV1) -> Self {
        UpgradePrechecked {
            upgrade_id: e.upgrade_id,
            prechecks: e.prechecks.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<&UpgradeNodeTurnStarted> for UpgradeNodeTurnStartedV1 {
    fn from(e: &UpgradeNodeTurnStarted) -> Self {
        UpgradeNodeTurnStartedV1 {
            upgrade_id: e.upgrade_id.clone(),
            node_id: e.node_id.clone(),
        }
    }
}

impl From<UpgradeNodeTurnStartedV1> for UpgradeNodeTurnStarted {
    fn from(e: UpgradeNodeTurnStartedV1) -> Self {
        UpgradeNodeTurnStarted {
            upgrade_id: e.upgrade_id,
            node_id: e.node_id,
        }
    }
}

impl From<&UpgradeBackupReported> for UpgradeBackupReportedV1 {
    fn from(e: &UpgradeBackupReported) -> Self {
        UpgradeBackupReportedV1 {
            upgrade_id: e.upgrade_id.clone(),
            location: e.location.into(),
            bundle: e.bundle.clone(),
            encrypted: e.encrypted,
        }
    }
}

impl From<UpgradeBackupReportedV1> for UpgradeBackupReported {
    fn from(e: UpgradeBackupReportedV1) -> Self {
        UpgradeBackupReported {
            upgrade_id: e.upgrade_id,
            location: e.location.into(),
            bundle: e.bundle,
            encrypted: e.encrypted,
        }
    }
}

impl From<&UpgradeFailed> for UpgradeFailedV1 {
    fn from(e: &UpgradeFailed) -> Self {
        UpgradeFailedV1 {
            upgrade_id: e.upgrade_id.clone(),
            reason: e.reason.clone(),
        }
    }
}

impl From<UpgradeFailedV1> for UpgradeFailed {
    fn from(e: UpgradeFailedV1) -> Self {
        UpgradeFailed {
            upgrade_id: e.upgrade_id,
            reason: e.reason,
        }
    }
}

impl From<&UpgradeCompleted> for UpgradeCompletedV1 {
    fn from(e: &UpgradeCompleted) -> Self {
        UpgradeCompletedV1 {
            upgrade_id: e.upgrade_id.clone(),
            release: e.release.clone(),
        }
    }
}

impl From<UpgradeCompletedV1> for UpgradeCompleted {
    fn from(e: UpgradeCompletedV1) -> Self {
        UpgradeCompleted {
            upgrade_id: e.upgrade_id,
            release: e.release,
        }
    }
}

impl From<&UpgradeRolledBack> for UpgradeRolledBackV1 {
    fn from(e: &UpgradeRolledBack) -> Self {
        UpgradeRolledBackV1 {
            upgrade_id: e.upgrade_id.clone(),
            by: e.by.clone(),
        }
    }
}

impl From<UpgradeRolledBackV1> for UpgradeRolledBack {
    fn from(e: UpgradeRolledBackV1) -> Self {
        UpgradeRolledBack {
            upgrade_id: e.upgrade_id,
            by: e.by,
        }
    }
}

impl From<&UpgradeRef> for UpgradeRefV1 {
    fn from(e: &UpgradeRef) -> Self {
        UpgradeRefV1 {
            upgrade_id: e.upgrade_id.clone(),
        }
    }
}

impl From<UpgradeRefV1> for UpgradeRef {
    fn from(e: UpgradeRefV1) -> Self {
        UpgradeRef {
            upgrade_id: e.upgrade_id,
        }
    }
}
