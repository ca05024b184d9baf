//! Version 2 of the stored types that changed since version 1. Frozen like
//! [`super::v1`]: a later change is a `V3` type and an upcaster.

use serde::{Deserialize, Serialize};

use super::v1::RaftV1;
use crate::membership::Raft;

/// `MemberJoinFailed` v2 keeps the rafts to clean as a bit set
/// (patroni 1, openbao 2, ovn 4): they are a set, and a set cannot hold
/// a raft twice or in another order. v1 kept a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberJoinFailedV2 {
    pub node_id: String,
    pub step: String,
    pub error: String,
    pub rafts: u8,
}

/// `RaftPeerRemoved` v2 names the adapter that said the peer is gone,
/// so an auditor can tell a removal from a raft from a record-only
/// default that called nothing. v1 did not say.
///
/// Its serde names are camelCase, as exports showed its payload before v3
/// (postcard writes no names, so the stored bytes are the same).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RaftPeerRemovedV2 {
    pub node_id: String,
    pub raft: RaftV1,
    pub already_gone: bool,
    pub adapter: String,
}

pub fn raft_bit(r: Raft) -> u8 {
    match r {
        Raft::Patroni => 1,
        Raft::Openbao => 2,
        Raft::Ovn => 4,
    }
}

/// The rafts of a bit set, in order; `None` for bits no raft has.
pub fn rafts_of_bits(bits: u8) -> Option<Vec<Raft>> {
    if bits & !7 != 0 {
        return None;
    }
    Some(
        Raft::ALL
            .into_iter()
            .filter(|r| bits & raft_bit(*r) != 0)
            .collect(),
    )
}

// ------------------------------------------------------------- upgrades

use super::v1::{
    micros, time, BackupLocationV1, ComponentChangeV1, NodeKindV1, PhaseV1, UpgradeModeV1,
};
use crate::upgrade::{
    HostStep, NodeStatus, Plan, PlanNode, PlanStep, ReleaseRegistered, ReleaseSource, StepKind,
    UpgradeNodeReported, UpgradePlanned,
};

/// A node's status; v2 adds `RolledBack`, appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeStatusV2 {
    Pending,
    Running,
    Done,
    Failed,
    RolledBack,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReleaseSourceV2 {
    Manifest,
    Media,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepKindV2 {
    Cluster,
    EveryNode,
    Node,
}

/// `ReleaseRegistered` v2 says where the release came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseRegisteredV2 {
    pub version: String,
    pub manifest: String,
    pub source: ReleaseSourceV2,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStepV2 {
    pub name: String,
    pub node_id: Option<String>,
    pub kind: StepKindV2,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanNodeV2 {
    pub node_id: String,
    pub ordinal: u32,
    pub kind: NodeKindV1,
    pub restarts: Vec<String>,
    pub changes: Vec<String>,
    pub fetched: bool,
}

/// The plan v2: seed 004's whole plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanV2 {
    pub summary: String,
    pub signed_by: String,
    pub source_kind: ReleaseSourceV2,
    pub kind: NodeKindV1,
    pub reboot_reason: Option<String>,
    pub cves: Vec<String>,
    pub component_changes: Vec<ComponentChangeV1>,
    pub components_from: String,
    pub nodes: Vec<PlanNodeV2>,
    pub steps: Vec<PlanStepV2>,
    pub previous_os_bootable: bool,
    pub restore_required: bool,
    pub settle_seconds: u64,
}

/// `UpgradePlanned` v2: the plan v2 and the configured backup target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradePlannedV2 {
    pub upgrade_id: String,
    pub mode: UpgradeModeV1,
    pub target_release: String,
    pub from_release: String,
    pub backup_location: BackupLocationV1,
    pub backup_encrypted: bool,
    pub backup_target: Option<String>,
    pub rollback_of: Option<String>,
    pub restore_backup: bool,
    pub plan: PlanV2,
}

/// A host step v2 carries its unit and system-extension lists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostStepV2 {
    pub name: String,
    pub state: String,
    pub reboot_mode: String,
    pub detail: String,
    pub pending_units: Vec<String>,
    pub restarted_units: Vec<String>,
    pub stopped_units: Vec<String>,
    pub switched_sysexts: Vec<String>,
}

/// `UpgradeNodeReported` v2: `rolled_back`, host steps v2, the helper's
/// intent and the instances running again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeNodeReportedV2 {
    pub upgrade_id: String,
    pub node_id: String,
    pub phase: PhaseV1,
    pub state: NodeStatusV2,
    pub message: String,
    pub host_steps: Option<Vec<HostStepV2>>,
    /// Microseconds since the epoch.
    pub rebooted_at: Option<i64>,
    pub instances: Option<Vec<String>>,
    pub host_state: Option<String>,
    pub running_instances: Option<Vec<String>>,
}

impl From<NodeStatus> for NodeStatusV2 {
    fn from(s: NodeStatus) -> Self {
        match s {
            NodeStatus::Pending => NodeStatusV2::Pending,
            NodeStatus::Running => NodeStatusV2::Running,
            NodeStatus::Done => NodeStatusV2::Done,
            NodeStatus::Failed => NodeStatusV2::Failed,
            NodeStatus::RolledBack => NodeStatusV2::RolledBack,
        }
    }
}

impl From<NodeStatusV2> for NodeStatus {
    fn from(s: NodeStatusV2) -> Self {
        match s {
            NodeStatusV2::Pending => NodeStatus::Pending,
            NodeStatusV2::Running => NodeStatus::Running,
            NodeStatusV2::Done => NodeStatus::Done,
            NodeStatusV2::Failed => NodeStatus::Failed,
            NodeStatusV2::RolledBack => NodeStatus::RolledBack,
        }
    }
}

impl From<ReleaseSource> for ReleaseSourceV2 {
    fn from(s: ReleaseSource) -> Self {
        match s {
            ReleaseSource::Manifest => ReleaseSourceV2::Manifest,
            ReleaseSource::Media => ReleaseSourceV2::Media,
        }
    }
}

impl From<ReleaseSourceV2> for ReleaseSource {
    fn from(s: ReleaseSourceV2) -> Self {
        match s {
            ReleaseSourceV2::Manifest => ReleaseSource::Manifest,
            ReleaseSourceV2::Media => ReleaseSource::Media,
        }
    }
}

impl From<StepKind> for StepKindV2 {
    fn from(k: StepKind) -> Self {
        match k {
            StepKind::Cluster => StepKindV2::Cluster,
            StepKind::EveryNode => StepKindV2::EveryNode,
            StepKind::Node => StepKindV2::Node,
        }
    }
}

impl From<StepKindV2> for StepKind {
    fn from(k: StepKindV2) -> Self {
        match k {
            StepKindV2::Cluster => StepKind::Cluster,
            StepKindV2::EveryNode => StepKind::EveryNode,
            StepKindV2::Node => StepKind::Node,
        }
    }
}

impl From<&ReleaseRegistered> for ReleaseRegisteredV2 {
    fn from(e: &ReleaseRegistered) -> Self {
        ReleaseRegisteredV2 {
            version: e.version.clone(),
            manifest: e.manifest.clone(),
            source: e.source.into(),
        }
    }
}

impl From<ReleaseRegisteredV2> for ReleaseRegistered {
    fn from(e: ReleaseRegisteredV2) -> Self {
        ReleaseRegistered {
            version: e.version,
            manifest: e.manifest,
            source: e.source.into(),
        }
    }
}

impl From<&Plan> for PlanV2 {
    fn from(p: &Plan) -> Self {
        PlanV2 {
            summary: p.summary.clone(),
            signed_by: p.signed_by.clone(),
            source_kind: p.source_kind.into(),
            kind: p.kind.into(),
            reboot_reason: p.reboot_reason.clone(),
            cves: p.cves.clone(),
            component_changes: p.component_changes.iter().map(Into::into).collect(),
            components_from: p.components_from.clone(),
            nodes: p
                .nodes
                .iter()
                .map(|n| PlanNodeV2 {
                    node_id: n.node_id.clone(),
                    ordinal: n.ordinal,
                    kind: n.kind.into(),
                    restarts: n.restarts.clone(),
                    changes: n.changes.clone(),
                    fetched: n.fetched,
                })
                .collect(),
            steps: p
                .steps
                .iter()
                .map(|s| PlanStepV2 {
                    name: s.name.clone(),
                    node_id: s.node_id.clone(),
                    kind: s.kind.into(),
                })
                .collect(),
            previous_os_bootable: p.previous_os_bootable,
            restore_required: p.restore_required,
            settle_seconds: p.settle_seconds,
        }
    }
}

impl From<PlanV2> for Plan {
    fn from(p: PlanV2) -> Self {
        Plan {
            summary: p.summary,
            signed_by: p.signed_by,
            source_kind: p.source_kind.into(),
            kind: p.kind.into(),
            reboot_reason: p.reboot_reason,
            cves: p.cves,
            component_changes: p.component_changes.into_iter().map(Into::into).collect(),
            components_from: p.components_from,
            nodes: p
                .nodes
                .into_iter()
                .map(|n| PlanNode {
                    node_id: n.node_id,
                    ordinal: n.ordinal,
                    kind: n.kind.into(),
                    restarts: n.restarts,
                    changes: n.changes,
                    fetched: n.fetched,
                })
                .collect(),
            steps: p
                .steps
                .into_iter()
                .map(|s| PlanStep {
                    name: s.name,
                    node_id: s.node_id,
                    kind: s.kind.into(),
                })
                .collect(),
            previous_os_bootable: p.previous_os_bootable,
            restore_required: p.restore_required,
            settle_seconds: p.settle_seconds,
        }
    }
}

impl From<&UpgradePlanned> for UpgradePlannedV2 {
    fn from(e: &UpgradePlanned) -> Self {
        UpgradePlannedV2 {
            upgrade_id: e.upgrade_id.clone(),
            mode: e.mode.into(),
            target_release: e.target_release.clone(),
            from_release: e.from_release.clone(),
            backup_location: e.backup_location.into(),
            backup_encrypted: e.backup_encrypted,
            backup_target: e.backup_target.clone(),
            rollback_of: e.rollback_of.clone(),
            restore_backup: e.restore_backup,
            plan: (&e.plan).into(),
        }
    }
}

impl From<UpgradePlannedV2> for UpgradePlanned {
    fn from(e: UpgradePlannedV2) -> Self {
        UpgradePlanned {
            upgrade_id: e.upgrade_id,
            mode: e.mode.into(),
            target_release: e.target_release,
            from_release: e.from_release,
            backup_location: e.backup_location.into(),
            backup_encrypted: e.backup_encrypted,
            backup_target: e.backup_target,
            rollback_of: e.rollback_of,
            restore_backup: e.restore_backup,
            plan: e.plan.into(),
        }
    }
}

impl From<&HostStep> for HostStepV2 {
    fn from(h: &HostStep) -> Self {
        HostStepV2 {
            name: h.name.clone(),
            state: h.state.clone(),
            reboot_mode: h.reboot_mode.clone(),
            detail: h.detail.clone(),
            pending_units: h.pending_units.clone(),
            restarted_units: h.restarted_units.clone(),
            stopped_units: h.stopped_units.clone(),
            switched_sysexts: h.switched_sysexts.clone(),
        }
    }
}

impl From<HostStepV2> for HostStep {
    fn from(h: HostStepV2) -> Self {
        HostStep {
            name: h.name,
            state: h.state,
            reboot_mode: h.reboot_mode,
            detail: h.detail,
            pending_units: h.pending_units,
            restarted_units: h.restarted_units,
            stopped_units: h.stopped_units,
            switched_sysexts: h.switched_sysexts,
        }
    }
}

impl From<&UpgradeNodeReported> for UpgradeNodeReportedV2 {
    fn from(e: &UpgradeNodeReported) -> Self {
        UpgradeNodeReportedV2 {
            upgrade_id: e.upgrade_id.clone(),
            node_id: e.node_id.clone(),
            phase: e.phase.into(),
            state: e.state.into(),
            message: e.message.clone(),
            host_steps: e
                .host_steps
                .as_ref()
                .map(|h| h.iter().map(Into::into).collect()),
            rebooted_at: e.rebooted_at.map(micros),
            instances: e.instances.clone(),
            host_state: e.host_state.clone(),
            running_instances: e.running_instances.clone(),
        }
    }
}

impl From<UpgradeNodeReportedV2> for UpgradeNodeReported {
    fn from(e: UpgradeNodeReportedV2) -> Self {
        UpgradeNodeReported {
            upgrade_id: e.upgrade_id,
            node_id: e.node_id,
            phase: e.phase.into(),
            state: e.state.into(),
            message: e.message,
            host_steps: e
                .host_steps
                .map(|h| h.into_iter().map(Into::into).collect()),
            rebooted_at: e.rebooted_at.map(time),
            instances: e.instances,
            host_state: e.host_state,
            running_instances: e.running_instances,
        }
    }
}

/// `TokenIssued` v2 says how the secret is recognized: by its SHA-256 (a
/// generated secret) or by a salted Argon2id hash (a secret an operator
/// chose, which could be guessed from a fast hash). v1 kept only a SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenIssuedV2 {
    pub token_id: String,
    pub principal: String,
    pub verifier: SecretVerifierV2,
    pub policies: Vec<String>,
    /// Microseconds since the epoch.
    pub expires_at: Option<i64>,
}

/// Frozen: a variant may only ever be appended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecretVerifierV2 {
    Sha256([u8; 32]),
    /// The PHC string (`$argon2id$v=19$m=...,t=...,p=...$salt$hash`).
    Argon2id(String),
}

impl From<&crate::iam::SecretVerifier> for SecretVerifierV2 {
    fn from(v: &crate::iam::SecretVerifier) -> Self {
        match v {
            crate::iam::SecretVerifier::Sha256(h) => SecretVerifierV2::Sha256(*h),
            crate::iam::SecretVerifier::Argon2id(p) => SecretVerifierV2::Argon2id(p.clone()),
        }
    }
}

impl From<SecretVerifierV2> for crate::iam::SecretVerifier {
    fn from(v: SecretVerifierV2) -> Self {
        match v {
            SecretVerifierV2::Sha256(h) => crate::iam::SecretVerifier::Sha256(h),
            SecretVerifierV2::Argon2id(p) => crate::iam::SecretVerifier::Argon2id(p),
        }
    }
}
