//! Domain events: what happened, in the past tense. This enum is what
//! `decide` returns and `evolve` folds; it is never stored as is (see
//! [`crate::stored`] for the versioned format the log keeps).

use serde::Serialize;

pub use crate::iam::{
    PolicyCreated, PrincipalPoliciesSet, ResourcePolicySet, TokenIssued, TokenRevoked,
};
pub use crate::membership::StringMap;
use crate::membership::{Raft, Role};
pub use crate::upgrade::{
    AlarmCleared, AlarmRaised, EventsLost, NodeFactsReported, ReleaseRegistered, RunningReleaseSet,
    UpgradeBackupReported, UpgradeCompleted, UpgradeFailed, UpgradeNodeReported,
    UpgradeNodeTurnStarted, UpgradePlanned, UpgradePrechecked, UpgradeRef, UpgradeRolledBack,
    UpgradeStateChanged,
};

/// Serializes (untagged, camelCase) as the payload auditors read in JSON;
/// the event type travels beside it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum DomainEvent {
    MemberAdmitted(MemberAdmitted),
    JoinProgressReported {
        node_id: String,
        step: String,
    },
    MemberJoinCompleted {
        node_id: String,
    },
    MemberJoinFailed(MemberJoinFailed),
    /// Written only after the raft's adapter said the peer is gone (or was
    /// already gone). `adapter` names which adapter said so:
    /// `record-only` means no raft was called, because none is configured.
    RaftPeerRemoved {
        node_id: String,
        raft: Raft,
        already_gone: bool,
        adapter: String,
        /// The peer led the raft: leadership was moved to another voter
        /// before it was removed (by a transfer where the raft needs one).
        leader_moved: bool,
        /// The digest of the process-manager settings the removal was made
        /// with (the agreed ones); `None` for removals stored before
        /// storage level 2, which did not record it.
        settings: Option<String>,
    },
    RaftCleanupCompleted {
        node_id: String,
    },
    /// A raft's own listing named the member again after its removal from
    /// that raft was recorded: the raft is owed a removal again.
    RaftPeerReturned(RaftPeerReturned),
    MemberJoinRetried {
        node_id: String,
    },
    MemberRemovalStarted(MemberRemovalStarted),
    MemberDecommissioned {
        node_id: String,
        reason: String,
        by: String,
    },
    MemberUpdated(MemberUpdated),
    AppliedGenerationReported {
        node_id: String,
        generation: u64,
    },
    JoinRequested(JoinRequested),
    JoinRequestApproved {
        request_id: String,
        node_id: String,
    },
    JoinRequestRejected {
        request_id: String,
        reason: String,
    },
    TokenIssued(TokenIssued),
    ReleaseRegistered(ReleaseRegistered),
    RunningReleaseSet(RunningReleaseSet),
    UpgradePlanned(UpgradePlanned),
    UpgradeStateChanged(UpgradeStateChanged),
    UpgradePrechecked(UpgradePrechecked),
    UpgradeNodeTurnStarted(UpgradeNodeTurnStarted),
    UpgradeNodeReported(UpgradeNodeReported),
    UpgradeBackupReported(UpgradeBackupReported),
    UpgradeFailed(UpgradeFailed),
    UpgradeCompleted(UpgradeCompleted),
    UpgradeCanceled(UpgradeRef),
    UpgradeRolledBack(UpgradeRolledBack),
    UpgradeAcknowledged(UpgradeRef),
    TokenRevoked(TokenRevoked),
    PolicyCreated(PolicyCreated),
    PrincipalPoliciesSet(PrincipalPoliciesSet),
    ResourcePolicySet(ResourcePolicySet),
    NodeFactsReported(NodeFactsReported),
    AlarmRaised(AlarmRaised),
    AlarmCleared(AlarmCleared),
    EventsLost(EventsLost),
    CheckpointForkFound(crate::upgrade::CheckpointForkFound),
    CheckpointForkAcknowledged(crate::upgrade::CheckpointForkAcknowledged),
    /// The log moved to a storage level (see [`crate::storage`]).
    StorageVersionFinalized(crate::storage::StorageVersionFinalized),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberAdmitted {
    pub node_id: String,
    pub role: Role,
    pub mgmt_ip: String,
    pub bindings: StringMap,
    pub labels: StringMap,
    pub ordinal: u32,
    pub join_request: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberJoinFailed {
    pub node_id: String,
    pub step: String,
    pub error: String,
    /// The rafts to take it back out of: those it reached and the failed
    /// step's own.
    pub rafts: Vec<Raft>,
}

/// A member whose removal from a raft is recorded is named by that raft's
/// own listing again (a node that went on running its raft member and was
/// taken back, by its own retry or by hand). The event's time is when the
/// listing was read; the removal it undoes is named by its position and
/// time. It raises the `raft-peer-returned` alarm and asks the raft
/// cleanup to remove the member again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RaftPeerReturned {
    pub node_id: String,
    pub raft: Raft,
    /// The position of the `RaftPeerRemoved` this return undoes.
    pub removed_position: u64,
    /// When that removal was recorded.
    pub removed_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberRemovalStarted {
    pub node_id: String,
    pub reason: String,
    pub forced: bool,
    pub rafts: Vec<Raft>,
}

/// A member's role, address, bindings or labels changed (a topology
/// change). It carries the values after the change, all four.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberUpdated {
    pub node_id: String,
    pub role: Role,
    pub mgmt_ip: String,
    pub bindings: StringMap,
    pub labels: StringMap,
    /// Sent with `force` past the quorum rule.
    pub forced: bool,
    /// The rafts a demoted voter is taken out of; empty otherwise.
    pub rafts: Vec<Raft>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JoinRequested {
    pub request_id: String,
    pub node_id: String,
    pub mgmt_ip: String,
    pub labels: StringMap,
    /// The facts the node reported, as canonical JSON text.
    pub facts: String,
}

/// What an event is about. The one place every event type is sorted by
/// its subject, in a match without a wildcard: a new event type does not
/// compile until it is sorted here, and the stream it is appended to, the
/// member or upgrade it changes, follow from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum About<'a> {
    Member(&'a str),
    Upgrade(&'a str),
    JoinRequest(&'a str),
    Token(&'a str),
    Policy(&'a str),
    Principal(&'a str),
    ResourcePolicy(&'a str),
    Release(&'a str),
    RunningRelease,
    Facts(&'a str),
    /// The log's storage version.
    Storage,
    /// An alarm by name, and the upgrade it belongs to, if any.
    Alarm {
        name: &'a str,
        upgrade: Option<&'a str>,
    },
}

impl DomainEvent {
    /// What the event is about.
    pub fn about(&self) -> About<'_> {
        match self {
            DomainEvent::MemberAdmitted(a) => About::Member(&a.node_id),
            DomainEvent::JoinProgressReported { node_id, .. }
            | DomainEvent::MemberJoinCompleted { node_id }
            | DomainEvent::RaftPeerRemoved { node_id, .. }
            | DomainEvent::RaftCleanupCompleted { node_id }
            | DomainEvent::MemberJoinRetried { node_id }
            | DomainEvent::MemberDecommissioned { node_id, .. }
            | DomainEvent::AppliedGenerationReported { node_id, .. } => About::Member(node_id),
            DomainEvent::MemberJoinFailed(e) => About::Member(&e.node_id),
            DomainEvent::RaftPeerReturned(e) => About::Member(&e.node_id),
            DomainEvent::MemberRemovalStarted(e) => About::Member(&e.node_id),
            DomainEvent::MemberUpdated(e) => About::Member(&e.node_id),
            DomainEvent::UpgradePlanned(e) => About::Upgrade(&e.upgrade_id),
            DomainEvent::UpgradeStateChanged(e) => About::Upgrade(&e.upgrade_id),
            DomainEvent::UpgradePrechecked(e) => About::Upgrade(&e.upgrade_id),
            DomainEvent::UpgradeNodeTurnStarted(e) => About::Upgrade(&e.upgrade_id),
            DomainEvent::UpgradeNodeReported(e) => About::Upgrade(&e.upgrade_id),
            DomainEvent::UpgradeBackupReported(e) => About::Upgrade(&e.upgrade_id),
            DomainEvent::UpgradeFailed(e) => About::Upgrade(&e.upgrade_id),
            DomainEvent::UpgradeCompleted(e) => About::Upgrade(&e.upgrade_id),
            DomainEvent::UpgradeRolledBack(e) => About::Upgrade(&e.upgrade_id),
            DomainEvent::UpgradeCanceled(e) | DomainEvent::UpgradeAcknowledged(e) => {
                About::Upgrade(&e.upgrade_id)
            }
            DomainEvent::JoinRequested(r) => About::JoinRequest(&r.request_id),
            DomainEvent::JoinRequestApproved { request_id, .. }
            | DomainEvent::JoinRequestRejected { request_id, .. } => About::JoinRequest(request_id),
            DomainEvent::TokenIssued(t) => About::Token(&t.token_id),
            DomainEvent::TokenRevoked(t) => About::Token(&t.token_id),
            DomainEvent::PolicyCreated(p) => About::Policy(&p.name),
            DomainEvent::PrincipalPoliciesSet(p) => About::Principal(&p.principal),
            DomainEvent::ResourcePolicySet(p) => About::ResourcePolicy(&p.resource),
            DomainEvent::ReleaseRegistered(r) => About::Release(&r.version),
            DomainEvent::RunningReleaseSet(_) => About::RunningRelease,
            DomainEvent::NodeFactsReported(f) => About::Facts(&f.node_id),
            DomainEvent::AlarmRaised(crate::upgrade::AlarmRaised {
                name, upgrade_id, ..
            })
            | DomainEvent::AlarmCleared(crate::upgrade::AlarmCleared {
                name, upgrade_id, ..
            }) => About::Alarm {
                name,
                upgrade: upgrade_id.as_deref(),
            },
            DomainEvent::EventsLost(_) => About::Alarm {
                name: crate::upgrade::model::LOG_EVENTS_LOST_ALARM,
                upgrade: None,
            },
            DomainEvent::StorageVersionFinalized(_) => About::Storage,
            DomainEvent::CheckpointForkFound(_) | DomainEvent::CheckpointForkAcknowledged(_) => {
                About::Alarm {
                    name: crate::upgrade::model::CHECKPOINT_FORK_ALARM,
                    upgrade: None,
                }
            }
        }
    }

    /// The event's type name as the log records it.
    pub fn event_type(&self) -> &'static str {
        match self {
            DomainEvent::MemberAdmitted(_) => "MemberAdmitted",
            DomainEvent::JoinProgressReported { .. } => "JoinProgressReported",
            DomainEvent::MemberJoinCompleted { .. } => "MemberJoinCompleted",
            DomainEvent::MemberJoinFailed(_) => "MemberJoinFailed",
            DomainEvent::RaftPeerRemoved { .. } => "RaftPeerRemoved",
            DomainEvent::RaftCleanupCompleted { .. } => "RaftCleanupCompleted",
            DomainEvent::RaftPeerReturned(_) => "RaftPeerReturned",
            DomainEvent::MemberJoinRetried { .. } => "MemberJoinRetried",
            DomainEvent::MemberRemovalStarted(_) => "MemberRemovalStarted",
            DomainEvent::MemberDecommissioned { .. } => "MemberDecommissioned",
            DomainEvent::MemberUpdated(_) => "MemberUpdated",
            DomainEvent::AppliedGenerationReported { .. } => "AppliedGenerationReported",
            DomainEvent::JoinRequested(_) => "JoinRequested",
            DomainEvent::JoinRequestApproved { .. } => "JoinRequestApproved",
            DomainEvent::JoinRequestRejected { .. } => "JoinRequestRejected",
            DomainEvent::TokenIssued(_) => "TokenIssued",
            DomainEvent::ReleaseRegistered(_) => "ReleaseRegistered",
            DomainEvent::RunningReleaseSet(_) => "RunningReleaseSet",
            DomainEvent::UpgradePlanned(_) => "UpgradePlanned",
            DomainEvent::UpgradeStateChanged(_) => "UpgradeStateChanged",
            DomainEvent::UpgradePrechecked(_) => "UpgradePrechecked",
            DomainEvent::UpgradeNodeTurnStarted(_) => "UpgradeNodeTurnStarted",
            DomainEvent::UpgradeNodeReported(_) => "UpgradeNodeReported",
            DomainEvent::UpgradeBackupReported(_) => "UpgradeBackupReported",
            DomainEvent::UpgradeFailed(_) => "UpgradeFailed",
            DomainEvent::UpgradeCompleted(_) => "UpgradeCompleted",
            DomainEvent::UpgradeCanceled(_) => "UpgradeCanceled",
            DomainEvent::UpgradeRolledBack(_) => "UpgradeRolledBack",
            DomainEvent::UpgradeAcknowledged(_) => "UpgradeAcknowledged",
            DomainEvent::TokenRevoked(_) => "TokenRevoked",
            DomainEvent::PolicyCreated(_) => "PolicyCreated",
            DomainEvent::PrincipalPoliciesSet(_) => "PrincipalPoliciesSet",
            DomainEvent::ResourcePolicySet(_) => "ResourcePolicySet",
            DomainEvent::NodeFactsReported(_) => "NodeFactsReported",
            DomainEvent::AlarmRaised(_) => "AlarmRaised",
            DomainEvent::AlarmCleared(_) => "AlarmCleared",
            DomainEvent::EventsLost(_) => "EventsLost",
            DomainEvent::CheckpointForkFound(_) => "CheckpointForkFound",
            DomainEvent::CheckpointForkAcknowledged(_) => "CheckpointForkAcknowledged",
            DomainEvent::StorageVersionFinalized(_) => "StorageVersionFinalized",
        }
    }

    /// Whether the event changes an input of some peer list, and so bumps
    /// the membership generation. Progress reports, applied-generation
    /// reports and raft cleanup bookkeeping do not: if a node's report of
    /// having applied generation G bumped it, no node could ever catch up.
    pub fn is_topology_change(&self) -> bool {
        matches!(
            self,
            DomainEvent::MemberAdmitted(_)
                | DomainEvent::MemberJoinCompleted { .. }
                | DomainEvent::MemberJoinFailed(_)
                | DomainEvent::MemberJoinRetried { .. }
                | DomainEvent::MemberRemovalStarted(_)
                | DomainEvent::MemberDecommissioned { .. }
                | DomainEvent::MemberUpdated(_)
        )
    }

    /// Whether the event asks the raft cleanup to take a member out of
    /// rafts: the cause a recorded removal names.
    pub fn asks_for_raft_cleanup(&self) -> bool {
        match self {
            DomainEvent::MemberJoinFailed(e) => !e.rafts.is_empty(),
            DomainEvent::MemberRemovalStarted(e) => !e.rafts.is_empty(),
            DomainEvent::MemberUpdated(e) => !e.rafts.is_empty(),
            DomainEvent::RaftPeerReturned(_) => true,
            // Named one by one: a new event type is decided here too.
            DomainEvent::MemberAdmitted(_)
            | DomainEvent::JoinProgressReported { .. }
            | DomainEvent::MemberJoinCompleted { .. }
            | DomainEvent::RaftPeerRemoved { .. }
            | DomainEvent::RaftCleanupCompleted { .. }
            | DomainEvent::MemberJoinRetried { .. }
            | DomainEvent::MemberDecommissioned { .. }
            | DomainEvent::AppliedGenerationReported { .. }
            | DomainEvent::JoinRequested(_)
            | DomainEvent::JoinRequestApproved { .. }
            | DomainEvent::JoinRequestRejected { .. }
            | DomainEvent::TokenIssued(_)
            | DomainEvent::TokenRevoked(_)
            | DomainEvent::PolicyCreated(_)
            | DomainEvent::PrincipalPoliciesSet(_)
            | DomainEvent::ResourcePolicySet(_)
            | DomainEvent::ReleaseRegistered(_)
            | DomainEvent::RunningReleaseSet(_)
            | DomainEvent::UpgradePlanned(_)
            | DomainEvent::UpgradeStateChanged(_)
            | DomainEvent::UpgradePrechecked(_)
            | DomainEvent::UpgradeNodeTurnStarted(_)
            | DomainEvent::UpgradeNodeReported(_)
            | DomainEvent::UpgradeBackupReported(_)
            | DomainEvent::UpgradeFailed(_)
            | DomainEvent::UpgradeCompleted(_)
            | DomainEvent::UpgradeCanceled(_)
            | DomainEvent::UpgradeRolledBack(_)
            | DomainEvent::UpgradeAcknowledged(_)
            | DomainEvent::NodeFactsReported(_)
            | DomainEvent::AlarmRaised(_)
            | DomainEvent::AlarmCleared(_)
            | DomainEvent::EventsLost(_)
            | DomainEvent::CheckpointForkFound(_)
            | DomainEvent::CheckpointForkAcknowledged(_)
            | DomainEvent::StorageVersionFinalized(_) => false,
        }
    }
}
