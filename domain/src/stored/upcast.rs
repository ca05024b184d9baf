//! Upcasters: each turns a version into the next, small and separately
//! tested, so old bytes reach the newest shape step by step.

use super::{v1, v2, v3, v4};

/// What a v1 removal says of its adapter: it did not record one.
pub const UNRECORDED_ADAPTER: &str = "unrecorded";

/// v1 tokens were all recognized by the SHA-256 of their secret.
pub fn token_issued_v1_to_v2(e: v1::TokenIssuedV1) -> v2::TokenIssuedV2 {
    v2::TokenIssuedV2 {
        token_id: e.token_id,
        principal: e.principal,
        verifier: v2::SecretVerifierV2::Sha256(e.secret_sha256),
        policies: e.policies,
        expires_at: e.expires_at,
    }
}

/// v1 releases were all registered over the API, as signed manifests.
pub fn release_registered_v1_to_v2(e: v1::ReleaseRegisteredV1) -> v2::ReleaseRegisteredV2 {
    v2::ReleaseRegisteredV2 {
        version: e.version,
        manifest: e.manifest,
        source: v2::ReleaseSourceV2::Manifest,
    }
}

/// The step objects of v1's step names: `prechecks`, `stage`, `apply`,
/// `backup` and `restore` are the cluster's; `fetch` and `verify` every
/// node's; `roll <nodeId>` one node's.
fn step_v1_to_v2(name: &str) -> v2::PlanStepV2 {
    match name.split_once(' ') {
        Some((step, node)) => v2::PlanStepV2 {
            name: step.to_owned(),
            node_id: Some(node.to_owned()),
            kind: v2::StepKindV2::Node,
        },
        None => v2::PlanStepV2 {
            name: name.to_owned(),
            node_id: None,
            kind: if matches!(name, "fetch" | "verify") {
                v2::StepKindV2::EveryNode
            } else {
                v2::StepKindV2::Cluster
            },
        },
    }
}

/// v1 plans knew less. The defaults, documented in docs/upgrades.md:
/// - `summary` says which releases and how many nodes, from the v1 plan;
/// - `signedBy` is empty (v1 did not record it); `sourceKind` is
///   `manifest`;
/// - per node, `restarts` is empty, `changes` follows its kind (`os`,
///   `hostBinaries`, or none), `fetched` is false;
/// - `previousOsBootable` is true unless the OS changes; `restoreRequired`
///   is false; `settleSeconds` is 0 (v1 did not settle); no backup target.
pub fn upgrade_planned_v1_to_v2(e: v1::UpgradePlannedV1) -> v2::UpgradePlannedV2 {
    let p = e.plan;
    let os = p.kind == v1::NodeKindV1::Os;
    let changes = |k: v1::NodeKindV1| -> Vec<String> {
        match k {
            v1::NodeKindV1::Os => vec!["os".to_owned()],
            v1::NodeKindV1::Host => vec!["hostBinaries".to_owned()],
            v1::NodeKindV1::Containers => Vec::new(),
        }
    };
    v2::UpgradePlannedV2 {
        plan: v2::PlanV2 {
            summary: format!(
                "Upgrade from {} to {} on {} node(s), one at a time.",
                e.from_release,
                e.target_release,
                p.nodes.len()
            ),
            signed_by: String::new(),
            source_kind: v2::ReleaseSourceV2::Manifest,
            kind: p.kind,
            reboot_reason: p.reboot_reason,
            cves: p.cves,
            component_changes: p.component_changes,
            components_from: p.components_from,
            nodes: p
                .nodes
                .into_iter()
                .map(|n| v2::PlanNodeV2 {
                    node_id: n.node_id,
                    ordinal: n.ordinal,
                    kind: n.kind,
                    restarts: Vec::new(),
                    changes: changes(n.kind),
                    fetched: false,
                })
                .collect(),
            steps: p.steps.iter().map(|s| step_v1_to_v2(s)).collect(),
            previous_os_bootable: !os,
            restore_required: false,
            settle_seconds: 0,
        },
        upgrade_id: e.upgrade_id,
        mode: e.mode,
        target_release: e.target_release,
        from_release: e.from_release,
        backup_location: e.backup_location,
        backup_encrypted: e.backup_encrypted,
        backup_target: None,
        rollback_of: e.rollback_of,
        restore_backup: e.restore_backup,
    }
}

fn node_status_v1_to_v2(s: v1::NodeStatusV1) -> v2::NodeStatusV2 {
    match s {
        v1::NodeStatusV1::Pending => v2::NodeStatusV2::Pending,
        v1::NodeStatusV1::Running => v2::NodeStatusV2::Running,
        v1::NodeStatusV1::Done => v2::NodeStatusV2::Done,
        v1::NodeStatusV1::Failed => v2::NodeStatusV2::Failed,
    }
}

/// v1 host steps had no lists (empty in v2); v1 reports carried no intent
/// and no instances running again (none).
pub fn upgrade_node_reported_v1_to_v2(e: v1::UpgradeNodeReportedV1) -> v2::UpgradeNodeReportedV2 {
    v2::UpgradeNodeReportedV2 {
        upgrade_id: e.upgrade_id,
        node_id: e.node_id,
        phase: e.phase,
        state: node_status_v1_to_v2(e.state),
        message: e.message,
        host_steps: e.host_steps.map(|steps| {
            steps
                .into_iter()
                .map(|h| v2::HostStepV2 {
                    name: h.name,
                    state: h.state,
                    reboot_mode: h.reboot_mode,
                    detail: h.detail,
                    pending_units: Vec::new(),
                    restarted_units: Vec::new(),
                    stopped_units: Vec::new(),
                    switched_sysexts: Vec::new(),
                })
                .collect()
        }),
        rebooted_at: e.rebooted_at,
        instances: e.instances,
        host_state: None,
        running_instances: None,
    }
}

pub fn raft_peer_removed_v1_to_v2(e: v1::RaftPeerRemovedV1) -> v2::RaftPeerRemovedV2 {
    v2::RaftPeerRemovedV2 {
        node_id: e.node_id,
        raft: e.raft,
        already_gone: e.already_gone,
        adapter: UNRECORDED_ADAPTER.to_owned(),
    }
}

pub fn member_join_failed_v1_to_v2(e: v1::MemberJoinFailedV1) -> v2::MemberJoinFailedV2 {
    v2::MemberJoinFailedV2 {
        node_id: e.node_id,
        step: e.step,
        error: e.error,
        rafts: e
            .rafts
            .into_iter()
            .fold(0, |bits, r| bits | v2::raft_bit(r.into())),
    }
}

/// v2 removals did not say whether the peer led the raft; none of their
/// adapters moved a leader.
pub fn raft_peer_removed_v2_to_v3(e: v2::RaftPeerRemovedV2) -> v3::RaftPeerRemovedV3 {
    v3::RaftPeerRemovedV3 {
        node_id: e.node_id,
        raft: e.raft,
        already_gone: e.already_gone,
        adapter: e.adapter,
        leader_moved: false,
    }
}

/// v3 removals did not name the settings they were made with.
pub fn raft_peer_removed_v3_to_v4(e: v3::RaftPeerRemovedV3) -> v4::RaftPeerRemovedV4 {
    v4::RaftPeerRemovedV4 {
        node_id: e.node_id,
        raft: e.raft,
        already_gone: e.already_gone,
        adapter: e.adapter,
        leader_moved: e.leader_moved,
        settings: None,
    }
}

/// What a build writes of a removal while the log is not finalized at
/// level 2: v3, which cannot name the settings.
pub fn raft_peer_removed_v4_to_v3(e: v4::RaftPeerRemovedV4) -> v3::RaftPeerRemovedV3 {
    v3::RaftPeerRemovedV3 {
        node_id: e.node_id,
        raft: e.raft,
        already_gone: e.already_gone,
        adapter: e.adapter,
        leader_moved: e.leader_moved,
    }
}

impl From<v4::RaftPeerRemovedV4> for crate::event::DomainEvent {
    fn from(e: v4::RaftPeerRemovedV4) -> Self {
        crate::event::DomainEvent::RaftPeerRemoved {
            node_id: e.node_id,
            raft: e.raft.into(),
            already_gone: e.already_gone,
            adapter: e.adapter,
            leader_moved: e.leader_moved,
            settings: e.settings,
        }
    }
}
