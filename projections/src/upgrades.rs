//! The upgrade read models (SPEC §5): upgrade records, releases and the
//! running release, rendered as the API shows them.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use stratum_domain::release::ComponentChange;
use stratum_domain::upgrade::{
    reboot_of, Alarm, HostStep, RecordedFacts, RegisteredRelease, RunningRelease, Upgrade,
};

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
    /// The reboot it needs: none, soft or full.
    pub reboot: String,
    /// What restarts, in order.
    pub restarts: Vec<String>,
    /// Os, kernel, kernelArgs, hostBinaries, sysext: what the manifests
    /// change on the node.
    pub changes: Vec<String>,
    /// The node fetched this release for an earlier upgrade: its fetch
    /// starts done.
    pub fetched: bool,
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanStepRecord {
    /// prechecks, fetch, stage, apply, backup, restore, roll or verify.
    pub name: String,
    /// The node, for a step one node takes in its turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// cluster (once), every-node (every node at once) or node (one node).
    pub kind: String,
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
    /// node: on the node, with no backup target set. target: the backup
    /// target.
    pub location: String,
    /// The configured backup target, when the location is target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Encrypted to the backup recipient; otherwise readable by root only.
    pub encrypted: bool,
}

/// What the upgrade will do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanRecord {
    /// What the operator will see, in a sentence or two.
    pub summary: String,
    /// The release key that signed the manifest.
    pub signed_by: String,
    /// manifest: registered over the API; media: loaded from install media
    /// on the host.
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
    pub steps: Vec<PlanStepRecord>,
    /// The previous OS stays bootable.
    pub previous_os_bootable: bool,
    /// The old control plane cannot run on the new schema; going back
    /// means a restore.
    pub restore_required: bool,
    /// How long the cluster settles after a restart before the next node's
    /// turn or the end.
    pub settle_seconds: u64,
    pub component_changes: Vec<ComponentChangeRecord>,
    /// release, nodes or none.
    pub components_from: String,
    pub prechecks: Vec<PrecheckRecord>,
}

/// One step of a node's host-helper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostStepRecord {
    /// restore runs first in a rollback that restores the pre-upgrade
    /// backup; switch-sysext switches the system extensions (kind host).
    pub name: String,
    pub state: String,
    pub reboot_mode: String,
    /// What the step found or did.
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

impl From<&HostStep> for HostStepRecord {
    fn from(h: &HostStep) -> Self {
        Self {
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

/// A warning on an upgrade's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WarningRecord {
    /// NodeRebootPending: a staged upgrade's node waits for a security reboot.
    pub code: String,
    pub node_id: String,
    pub since: String,
    pub message: String,
}

/// An alarm, raised and perhaps cleared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlarmRecord {
    /// node-reboot-pending: a staged security upgrade's node has waited 7
    /// days for its reboot. log-events-lost: acknowledged events were lost
    /// in a database failover; the message names the range and the position
    /// of the EventsLost event that lists the lost events' hashes.
    /// log-checkpoint-fork: the log no longer extends the newest signed
    /// checkpoint; the message names both; cleared when acknowledged.
    /// log-witness-failing: witnesses of the log's checkpoints fail to
    /// cosign what one replica submits (nodeId: that replica's host and
    /// address); the message names the witnesses; cleared once every
    /// witness cosigns again.
    pub name: String,
    pub node_id: Option<String>,
    pub upgrade_id: Option<String>,
    pub raised_at: String,
    /// When the reboot happened or the upgrade ended; null while active.
    pub cleared_at: Option<String>,
    pub message: String,
}

pub fn alarm_record(a: &Alarm) -> AlarmRecord {
    AlarmRecord {
        name: a.name.clone(),
        node_id: a.node_id.clone(),
        upgrade_id: a.upgrade_id.clone(),
        raised_at: rfc3339(&a.raised_at),
        cleared_at: a.cleared_at.as_ref().map(rfc3339),
        message: a.message.clone(),
    }
}

/// A node's newest facts report, as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FactsRecord {
    pub node_id: String,
    /// What the node reported: its image pins, host packages, free space,
    /// schema and readiness, and whether it is shut down.
    #[schema(value_type = Object)]
    pub facts: Value,
    pub reported_by: String,
    pub reported_at: String,
    pub version: u64,
}

pub fn facts_record(node_id: &str, f: &RecordedFacts) -> FactsRecord {
    FactsRecord {
        node_id: node_id.to_owned(),
        facts: serde_json::to_value(&f.facts).expect("facts serialize"),
        reported_by: f.reported_by.clone(),
        reported_at: rfc3339(&f.reported_at),
        version: f.version,
    }
}

/// One node's part of an upgrade.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeNodeRecord {
    pub node_id: String,
    pub kind: String,
    /// pending, running, done, failed or rolled_back (the node switched
    /// itself back to the release it ran before), in its current phase.
    pub state: String,
    /// fetch, roll or verify.
    pub phase: String,
    pub reboot_mode: String,
    /// The node's current host-helper intent, as it reports it.
    pub host_state: String,
    pub host_steps: Vec<HostStepRecord>,
    /// The node's last reported message.
    pub message: String,
    /// The release the node ran before.
    pub previous_release: String,
    /// The instances that ran on the node when it rebooted; verify waits
    /// for each to run again.
    pub instances: Vec<String>,
    /// The instances it reports running again.
    pub running_instances: Vec<String>,
    /// When it rebooted, as it reported.
    pub rebooted_at: Option<String>,
}

/// An upgrade and how far it got: planned, prechecking, fetching, staged
/// (stage-only, waiting for apply), backing_up, rolling, verifying, then
/// done, failed or canceled. writeFreeze is true from the backup until the
/// end: changes through the API answer 503 UPGRADE_IN_PROGRESS. A rollback
/// is an upgrade to the release the cluster ran before, naming the upgrade
/// it undoes in rollbackOf.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "id": "upg-4k2j9x0qpa", "mode": "now", "state": "planned", "kind": "",
    "backup": {"location": "node"},
    "plan": {"sourceKind": "media", "kind": "", "nodes": [{"kind": "", "reboot": "none"}],
             "rebootReason": "security", "backup": {"location": "node"},
             "componentChanges": [{"kind": "image"}], "componentsFrom": "release",
             "prechecks": [{"status": "pass"}]},
    "nodes": [{"kind": "containers", "state": "pending", "phase": "fetch", "rebootMode": "soft",
               "hostState": "running",
               "hostSteps": [{"name": "restore", "state": "pending", "rebootMode": "soft"}]}]
}))]
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
    /// The last restart or reboot it caused; settling starts again from it.
    pub last_restart_at: Option<String>,
    /// While a staged security upgrade's nodes wait for their reboot.
    pub warnings: Vec<WarningRecord>,
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
        warnings: u
            .warnings()
            .iter()
            .map(|w| WarningRecord {
                code: w.code.clone(),
                node_id: w.node_id.clone(),
                since: rfc3339(&w.since),
                message: w.message.clone(),
            })
            .collect(),
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
            summary: u.plan.summary.clone(),
            signed_by: u.plan.signed_by.clone(),
            source_kind: u.plan.source_kind.as_str().to_owned(),
            kind: kind(u.plan.kind),
            nodes: u
                .plan
                .nodes
                .iter()
                .map(|n| PlanNodeRecord {
                    node_id: n.node_id.clone(),
                    kind: kind(n.kind),
                    reboot: reboot_of(n.kind).to_owned(),
                    restarts: n.restarts.clone(),
                    changes: n.changes.clone(),
                    fetched: n.fetched,
                })
                .collect(),
            backup: PlanBackupRecord {
                location: u.backup_location.as_str().to_owned(),
                target: u.backup_target.clone(),
                encrypted: u.backup_encrypted,
            },
            reboot_reason: u.plan.reboot_reason.clone(),
            cves: u.plan.cves.clone(),
            steps: u
                .plan
                .steps
                .iter()
                .map(|s| PlanStepRecord {
                    name: s.name.clone(),
                    node_id: s.node_id.clone(),
                    kind: s.kind.as_str().to_owned(),
                })
                .collect(),
            previous_os_bootable: u.plan.previous_os_bootable,
            restore_required: u.plan.restore_required,
            settle_seconds: u.plan.settle_seconds,
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
                host_state: n.host_state.clone(),
                host_steps: n.host_steps.iter().map(Into::into).collect(),
                message: n.message.clone(),
                previous_release: n.previous_release.clone(),
                instances: n.instances.clone(),
                running_instances: n.running_instances.clone(),
                rebooted_at: n.rebooted_at.as_ref().map(rfc3339),
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
        m.insert("sourceKind".into(), r.source.as_str().into());
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
