//! The upgrade read models (SPEC §5): upgrade records, releases and the
//! running release, rendered as the API shows them.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use stratum_domain::release::ComponentChange;
use stratum_domain::upgrade::{reboot_of, HostStep, RegisteredRelease, RunningRelease, Upgrade};

fn rfc3339(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// The backup of an upgrade: where it goes, and once reported, the bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupRecord {
    /// node: on the node, with no backup target set. target: the backup target.
    pub location: String,
    /// The bundle on the node; empty until the backup is reported.
    pub bundle: String,
    /// Encrypted to the backup recipient; otherwise readable by root only.
    pub encrypted: bool,
}

/// One node's part of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanNodeRecord {
    pub node_id: String,
    /// containers, host or os; empty before the prechecks.
    pub kind: String,
    /// What restarts: none, soft or full.
    pub reboot: String,
}

/// One precheck's finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PrecheckRecord {
    /// release, version, upgrade-path, upgrade, cluster-shutdown, readiness,
    /// schema, node, components, release-differs, space or backup-space.
    pub name: String,
    /// pass or fail.
    pub status: String,
    pub message: String,
}

/// One pinned component the upgrade changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentChangeRecord {
    /// image or package.
    pub kind: String,
    pub name: String,
    pub from: String,
    pub to: String,
    pub from_id: String,
    pub to_id: String,
}

impl From<&ComponentChange> for ComponentChangeRecord {
    fn from(c: &ComponentChange) -> Self {
        Self {
            kind: c.kind.clone(),
            name: c.name.clone(),
            from: c.from.clone(),
            to: c.to.clone(),
            from_id: c.from_id.clone(),
            to_id: c.to_id.clone(),
        }
    }
}

/// Where an upgrade's backup goes, as planned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanBackupRecord {
    /// node or target.
    pub location: String,
    pub encrypted: bool,
}

/// What the upgrade will do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanRecord {
    /// Where the release came from: a signed manifest registered with the API.
    pub source_kind: String,
    /// The largest kind of the nodes; empty before the prechecks.
    pub kind: String,
    pub nodes: Vec<PlanNodeRecord>,
    /// Where the backup goes.
    pub backup: PlanBackupRecord,
    /// security when the OS change fixes a vulnerability; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cves: Vec<String>,
    /// The upgrade's steps, in order.
    pub steps: Vec<String>,
    pub component_changes: Vec<ComponentChangeRecord>,
    /// release, nodes or none.
    pub components_from: String,
    pub prechecks: Vec<PrecheckRecord>,
}

/// One step of a node's host-helper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostStepRecord {
    /// restore runs first in a rollback that restores the backup.
    pub name: String,
    pub state: String,
    pub reboot_mode: String,
    pub detail: String,
}

impl From<&HostStep> for HostStepRecord {
    fn from(h: &HostStep) -> Self {
        Self {
            name: h.name.clone(),
            state: h.state.clone(),
            reboot_mode: h.reboot_mode.clone(),
            detail: h.detail.clone(),
        }
    }
}

/// One node's part of an upgrade.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeNodeRecord {
    pub node_id: String,
    pub kind: String,
    /// pending, running, done or failed, in its current phase.
    pub state: String,
    /// fetch, roll or verify.
    pub phase: String,
    pub reboot_mode: String,
    /// The node's current host-helper intent: its state in its phase.
    pub host_state: String,
    pub host_steps: Vec<HostStepRecord>,
    /// The node's last reported message.
    pub message: String,
    /// The release the node ran before.
    pub previous_release: String,
    /// The instances that ran on the node when it rebooted.
    pub instances: Vec<String>,
}

/// An upgrade and how far it got (seed 004).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeRecord {
    pub id: String,
    /// now or stage-only.
    pub mode: String,
    /// planned, prechecking, fetching, staged, backing_up, rolling,
    /// verifying, done, failed or canceled.
    pub state: String,
    /// The largest kind of the nodes, once prechecked; empty before.
    pub kind: String,
    pub target_release: String,
    /// The release the cluster ran when the upgrade was requested.
    pub from_release: String,
    /// True from the backup until the end.
    pub write_freeze: bool,
    /// What the upgrade is doing or waiting for.
    pub waiting_for: String,
    pub failure_reason: Option<String>,
    pub last_restart_at: Option<String>,
    pub backup: BackupRecord,
    pub plan: PlanRecord,
    pub nodes: Vec<UpgradeNodeRecord>,
    pub rollback_of: Option<String>,
    pub restore_backup: bool,
    pub rolled_back_by: Option<String>,
    pub acknowledged_at: Option<String>,
    pub created_by: String,
    pub created_at: String,
    pub canceled_by: Option<String>,
    pub canceled_at: Option<String>,
    pub updated_at: String,
    pub version: u64,
}

pub fn upgrade_record(u: &Upgrade) -> UpgradeRecord {
    let kind = |k: stratum_domain::upgrade::NodeKind| {
        if u.prechecked() {
            k.as_str().to_owned()
        } else {
            String::new()
        }
    };
    UpgradeRecord {
        id: u.id.clone(),
        mode: u.mode.as_str().to_owned(),
        state: u.state.as_str().to_owned(),
        kind: kind(u.plan.kind),
        target_release: u.target_release.clone(),
        from_release: u.from_release.clone(),
        write_freeze: u.state.freezes_writes(),
        waiting_for: u.waiting_for(),
        failure_reason: u.failure_reason.clone(),
        last_restart_at: u.last_restart_at.as_ref().map(rfc3339),
        backup: match &u.backup {
            Some(b) => BackupRecord {
                location: b.location.as_str().to_owned(),
                bundle: b.bundle.clone(),
                encrypted: b.encrypted,
            },
            None => BackupRecord {
                location: u.backup_location.as_str().to_owned(),
                bundle: String::new(),
                encrypted: u.backup_encrypted,
            },
        },
        plan: PlanRecord {
            source_kind: "manifest".to_owned(),
            kind: kind(u.plan.kind),
            nodes: u
                .plan
                .nodes
                .iter()
                .map(|n| PlanNodeRecord {
                    node_id: n.node_id.clone(),
                    kind: kind(n.kind),
                    reboot: reboot_of(n.kind).to_owned(),
                })
                .collect(),
            backup: PlanBackupRecord {
                location: u.backup_location.as_str().to_owned(),
                encrypted: u.backup_encrypted,
            },
            reboot_reason: u.plan.reboot_reason.clone(),
            cves: u.plan.cves.clone(),
            steps: u.plan.steps.clone(),
            component_changes: u.plan.component_changes.iter().map(Into::into).collect(),
            components_from: u.plan.components_from.clone(),
            prechecks: u
                .prechecks
                .iter()
                .map(|p| PrecheckRecord {
                    name: p.name.clone(),
                    status: if p.passed { "pass" } else { "fail" }.to_owned(),
                    message: p.message.clone(),
                })
                .collect(),
        },
        nodes: u
            .nodes
            .iter()
            .map(|n| UpgradeNodeRecord {
                node_id: n.node_id.clone(),
                kind: n.kind.as_str().to_owned(),
                state: n.state.as_str().to_owned(),
                phase: n.phase.as_str().to_owned(),
                reboot_mode: reboot_of(n.kind).to_owned(),
                host_state: n.state.as_str().to_owned(),
                host_steps: n.host_steps.iter().map(Into::into).collect(),
                message: n.message.clone(),
                previous_release: n.previous_release.clone(),
                instances: n.instances.clone(),
            })
            .collect(),
        rollback_of: u.rollback_of.clone(),
        restore_backup: u.restore_backup,
        rolled_back_by: u.rolled_back_by.clone(),
        acknowledged_at: u.acknowledged_at.as_ref().map(rfc3339),
        created_by: u.created_by.clone(),
        created_at: rfc3339(&u.created_at),
        canceled_by: u.canceled_by.clone(),
        canceled_at: u.canceled_at.as_ref().map(rfc3339),
        updated_at: rfc3339(&u.updated_at),
        version: u.version,
    }
}

/// A registered release: its manifest exactly as signed, and who
/// registered it when.
pub fn release_record(r: &RegisteredRelease) -> Value {
    let mut doc: Value = serde_json::from_str(&r.manifest).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut doc {
        m.insert("registeredBy".into(), r.registered_by.clone().into());
        m.insert("registeredAt".into(), rfc3339(&r.registered_at).into());
    }
    doc
}

/// The release the cluster runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunningReleaseRecord {
    pub version: String,
    /// The principal that set it at install, or the upgrade that moved it.
    pub set_by: String,
    pub set_at: String,
}

pub fn running_release_record(r: &RunningRelease) -> RunningReleaseRecord {
    RunningReleaseRecord {
        version: r.version.clone(),
        set_by: r.set_by.clone(),
        set_at: rfc3339(&r.set_at),
    }
}
