//! The stored format of events: a versioned payload type for every event
//! type, kept apart from the domain enum, and the upcasters that read every
//! version ever written.
//!
//! Postcard writes fields in definition order without names and enum
//! variants as numbers. So a stored type is never changed: not a field, not
//! a variant, not their order. A new shape is a new schema version with its
//! own type, and an upcaster from the previous one. Golden bytes of every
//! version live in `replay-tests/fixtures/events`, and of every variant of
//! every stored enum in `replay-tests/fixtures/enums`; they must keep
//! decoding.
//!
//! Every event type, the upgrade (SPEC §5) and IAM ones included, is
//! written through its own stored type in [`v1`] or [`v2`], never as a
//! domain struct. So the domain types ([`crate::upgrade`], [`crate::iam`],
//! [`crate::membership`]) are free to change: a change only touches the
//! conversions to and from the stored types, and a new stored shape is a
//! new version here.
//!
//! Each event type is declared once, in the table below ([`stored_events!`]
//! says how to read an entry): its stored versions, their upcasters, the
//! storage level that first writes a version, and the conversions of its
//! newest stored type. `encode`, `decode`, `decode_exported`,
//! `STORED_VERSIONS`, `FIRST_WRITTEN_AT` and `schema_version` are generated
//! from it, so a new version is its table entry, its stored type, its
//! upcaster and its golden bytes (`docs/replay-tests.md` shows one).

#[macro_use]
mod declare;
pub mod levels;
pub mod upcast;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::event::{
    DomainEvent, JoinRequested, MemberAdmitted, MemberJoinFailed, MemberRemovalStarted,
    MemberUpdated, RaftPeerReturned, TokenIssued,
};
use crate::membership::Raft;
use v1::*;
use v2::*;
use v3::*;
use v4::*;

/// An event ready for the log: type, schema version and postcard payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    pub event_type: &'static str,
    pub schema_version: u16,
    pub payload: Vec<u8>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("unknown event type {0}")]
    UnknownType(String),
    #[error("event type {0} has no schema version {1}")]
    UnknownVersion(String, u16),
    #[error("payload of {0} v{1} does not decode: {2}")]
    Payload(String, u16, String),
}

pub(crate) fn bytes<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_allocvec(v).expect("postcard encodes plain data")
}

fn rafts_v1(r: &[Raft]) -> Vec<RaftV1> {
    r.iter().map(|r| (*r).into()).collect()
}

fn raft_bits(r: &[Raft]) -> u8 {
    r.iter().fold(0, |bits, r| bits | raft_bit(*r))
}

fn rafts_from_bits(bits: u8) -> Result<Vec<Raft>, String> {
    rafts_of_bits(bits).ok_or_else(|| format!("unknown raft bits {bits:#x}"))
}

/// Stored bytes of one version of one type, read as a stored type.
struct Postcard<'a> {
    t: &'a str,
    v: u16,
    payload: &'a [u8],
}

impl Postcard<'_> {
    fn read<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        postcard::from_bytes(self.payload)
            .map_err(|e| DecodeError::Payload(self.t.to_owned(), self.v, e.to_string()))
    }
}

/// An exported payload, read as a stored type's JSON.
struct Json<'a>(&'a serde_json::Value);

impl Json<'_> {
    fn read<T: DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_value(self.0.clone()).ok()
    }
}

// The table: one entry per event type. A new stored version of a type is a
// change to its entry (the old newest moves to `upcast` with its upcaster,
// the new one is `newest`, `@` the storage level that first writes it), a
// stored type, an upcaster and its golden bytes. See `declare.rs`.
stored_events! {
    MemberAdmitted {
        newest: 1: MemberAdmittedV1,
        encode: DomainEvent::MemberAdmitted(a) => MemberAdmittedV1 {
            node_id: a.node_id.clone(),
            role: a.role.into(),
            mgmt_ip: a.mgmt_ip.clone(),
            bindings: a.bindings.clone(),
            labels: a.labels.clone(),
            ordinal: a.ordinal,
            join_request: a.join_request.clone(),
        },
        decode: |a| DomainEvent::MemberAdmitted(MemberAdmitted {
            node_id: a.node_id,
            role: a.role.into(),
            mgmt_ip: a.mgmt_ip,
            bindings: a.bindings,
            labels: a.labels,
            ordinal: a.ordinal,
            join_request: a.join_request,
        }),
    }
    JoinProgressReported {
        newest: 1: NodeStepV1,
        encode: DomainEvent::JoinProgressReported { node_id, step } => NodeStepV1 {
            node_id: node_id.clone(),
            step: step.clone(),
        },
        decode: |e| DomainEvent::JoinProgressReported {
            node_id: e.node_id,
            step: e.step,
        },
    }
    MemberJoinCompleted {
        newest: 1: NodeV1,
        encode: DomainEvent::MemberJoinCompleted { node_id } => NodeV1 {
            node_id: node_id.clone(),
        },
        decode: |e| DomainEvent::MemberJoinCompleted { node_id: e.node_id },
    }
    MemberJoinFailed {
        upcast: [1: MemberJoinFailedV1 => upcast::member_join_failed_v1_to_v2,],
        newest: 2: MemberJoinFailedV2,
        encode: DomainEvent::MemberJoinFailed(e) => MemberJoinFailedV2 {
            node_id: e.node_id.clone(),
            step: e.step.clone(),
            error: e.error.clone(),
            rafts: raft_bits(&e.rafts),
        },
        decode: |e| DomainEvent::MemberJoinFailed(MemberJoinFailed {
            node_id: e.node_id,
            step: e.step,
            error: e.error,
            rafts: rafts_from_bits(e.rafts)?,
        }),
    }
    RaftPeerRemoved {
        upcast: [
            1: RaftPeerRemovedV1 => upcast::raft_peer_removed_v1_to_v2,
            2: RaftPeerRemovedV2 => upcast::raft_peer_removed_v2_to_v3,
            3: RaftPeerRemovedV3 => upcast::raft_peer_removed_v3_to_v4,
        ],
        newest: 4 @ 2: RaftPeerRemovedV4,
        encode: DomainEvent::RaftPeerRemoved {
            node_id,
            raft,
            already_gone,
            adapter,
            leader_moved,
            settings,
        } => RaftPeerRemovedV4 {
            node_id: node_id.clone(),
            raft: (*raft).into(),
            already_gone: *already_gone,
            adapter: adapter.clone(),
            leader_moved: *leader_moved,
            settings: settings.clone(),
        },
        decode: |e| e.into(),
        older: [3 => upcast::raft_peer_removed_v4_to_v3,],
    }
    RaftCleanupCompleted {
        newest: 1: NodeV1,
        encode: DomainEvent::RaftCleanupCompleted { node_id } => NodeV1 {
            node_id: node_id.clone(),
        },
        decode: |e| DomainEvent::RaftCleanupCompleted { node_id: e.node_id },
    }
    RaftPeerReturned {
        newest: 1: RaftPeerReturnedV1,
        encode: DomainEvent::RaftPeerReturned(e) => RaftPeerReturnedV1 {
            node_id: e.node_id.clone(),
            raft: e.raft.into(),
            removed_position: e.removed_position,
            removed_at: micros(e.removed_at),
        },
        decode: |e| DomainEvent::RaftPeerReturned(RaftPeerReturned {
            node_id: e.node_id,
            raft: e.raft.into(),
            removed_position: e.removed_position,
            removed_at: time(e.removed_at),
        }),
    }
    MemberJoinRetried {
        newest: 1: NodeV1,
        encode: DomainEvent::MemberJoinRetried { node_id } => NodeV1 {
            node_id: node_id.clone(),
        },
        decode: |e| DomainEvent::MemberJoinRetried { node_id: e.node_id },
    }
    MemberRemovalStarted {
        newest: 1: MemberRemovalStartedV1,
        encode: DomainEvent::MemberRemovalStarted(e) => MemberRemovalStartedV1 {
            node_id: e.node_id.clone(),
            reason: e.reason.clone(),
            forced: e.forced,
            rafts: rafts_v1(&e.rafts),
        },
        decode: |e| DomainEvent::MemberRemovalStarted(MemberRemovalStarted {
            node_id: e.node_id,
            reason: e.reason,
            forced: e.forced,
            rafts: e.rafts.into_iter().map(Into::into).collect(),
        }),
    }
    MemberDecommissioned {
        newest: 1: MemberDecommissionedV1,
        encode: DomainEvent::MemberDecommissioned { node_id, reason, by } => MemberDecommissionedV1 {
            node_id: node_id.clone(),
            reason: reason.clone(),
            by: by.clone(),
        },
        decode: |e| DomainEvent::MemberDecommissioned {
            node_id: e.node_id,
            reason: e.reason,
            by: e.by,
        },
    }
    MemberUpdated {
        newest: 1: MemberUpdatedV1,
        encode: DomainEvent::MemberUpdated(e) => MemberUpdatedV1 {
            node_id: e.node_id.clone(),
            role: e.role.into(),
            mgmt_ip: e.mgmt_ip.clone(),
            bindings: e.bindings.clone(),
            labels: e.labels.clone(),
            forced: e.forced,
            rafts: raft_bits(&e.rafts),
        },
        decode: |e| DomainEvent::MemberUpdated(MemberUpdated {
            node_id: e.node_id,
            role: e.role.into(),
            mgmt_ip: e.mgmt_ip,
            bindings: e.bindings,
            labels: e.labels,
            forced: e.forced,
            rafts: rafts_from_bits(e.rafts)?,
        }),
    }
    AppliedGenerationReported {
        newest: 1: AppliedGenerationReportedV1,
        encode: DomainEvent::AppliedGenerationReported { node_id, generation } => {
            AppliedGenerationReportedV1 {
                node_id: node_id.clone(),
                generation: *generation,
            }
        },
        decode: |e| DomainEvent::AppliedGenerationReported {
            node_id: e.node_id,
            generation: e.generation,
        },
    }
    JoinRequested {
        newest: 1: JoinRequestedV1,
        encode: DomainEvent::JoinRequested(r) => JoinRequestedV1 {
            request_id: r.request_id.clone(),
            node_id: r.node_id.clone(),
            mgmt_ip: r.mgmt_ip.clone(),
            labels: r.labels.clone(),
            facts: r.facts.clone(),
        },
        decode: |e| DomainEvent::JoinRequested(JoinRequested {
            request_id: e.request_id,
            node_id: e.node_id,
            mgmt_ip: e.mgmt_ip,
            labels: e.labels,
            facts: e.facts,
        }),
    }
    JoinRequestApproved {
        newest: 1: JoinRequestApprovedV1,
        encode: DomainEvent::JoinRequestApproved { request_id, node_id } => JoinRequestApprovedV1 {
            request_id: request_id.clone(),
            node_id: node_id.clone(),
        },
        decode: |e| DomainEvent::JoinRequestApproved {
            request_id: e.request_id,
            node_id: e.node_id,
        },
    }
    JoinRequestRejected {
        newest: 1: JoinRequestRejectedV1,
        encode: DomainEvent::JoinRequestRejected { request_id, reason } => JoinRequestRejectedV1 {
            request_id: request_id.clone(),
            reason: reason.clone(),
        },
        decode: |e| DomainEvent::JoinRequestRejected {
            request_id: e.request_id,
            reason: e.reason,
        },
    }
    TokenIssued {
        upcast: [1: TokenIssuedV1 => upcast::token_issued_v1_to_v2,],
        newest: 2: TokenIssuedV2,
        encode: DomainEvent::TokenIssued(t) => TokenIssuedV2 {
            token_id: t.token_id.clone(),
            principal: t.principal.clone(),
            verifier: (&t.verifier).into(),
            policies: t.policies.clone(),
            expires_at: t.expires_at.map(|e| e.timestamp_micros()),
        },
        decode: |e| DomainEvent::TokenIssued(TokenIssued {
            token_id: e.token_id,
            principal: e.principal,
            verifier: e.verifier.into(),
            policies: e.policies,
            expires_at: e.expires_at.map(crate::log::micros_to_time),
        }),
    }
    ReleaseRegistered {
        upcast: [1: ReleaseRegisteredV1 => upcast::release_registered_v1_to_v2,],
        newest: 2: ReleaseRegisteredV2,
        encode: DomainEvent::ReleaseRegistered(e) => ReleaseRegisteredV2::from(e),
        decode: |e| DomainEvent::ReleaseRegistered(e.into()),
    }
    RunningReleaseSet {
        newest: 1: RunningReleaseSetV1,
        encode: DomainEvent::RunningReleaseSet(e) => RunningReleaseSetV1::from(e),
        decode: |e| DomainEvent::RunningReleaseSet(e.into()),
    }
    UpgradePlanned {
        upcast: [1: UpgradePlannedV1 => upcast::upgrade_planned_v1_to_v2,],
        newest: 2: UpgradePlannedV2,
        encode: DomainEvent::UpgradePlanned(e) => UpgradePlannedV2::from(e),
        decode: |e| DomainEvent::UpgradePlanned(e.into()),
    }
    UpgradeStateChanged {
        newest: 1: UpgradeStateChangedV1,
        encode: DomainEvent::UpgradeStateChanged(e) => UpgradeStateChangedV1::from(e),
        decode: |e| DomainEvent::UpgradeStateChanged(e.into()),
    }
    UpgradePrechecked {
        newest: 1: UpgradePrecheckedV1,
        encode: DomainEvent::UpgradePrechecked(e) => UpgradePrecheckedV1::from(e),
        decode: |e| DomainEvent::UpgradePrechecked(e.into()),
    }
    UpgradeNodeTurnStarted {
        newest: 1: UpgradeNodeTurnStartedV1,
        encode: DomainEvent::UpgradeNodeTurnStarted(e) => UpgradeNodeTurnStartedV1::from(e),
        decode: |e| DomainEvent::UpgradeNodeTurnStarted(e.into()),
    }
    UpgradeNodeReported {
        upcast: [1: UpgradeNodeReportedV1 => upcast::upgrade_node_reported_v1_to_v2,],
        newest: 2: UpgradeNodeReportedV2,
        encode: DomainEvent::UpgradeNodeReported(e) => UpgradeNodeReportedV2::from(e),
        decode: |e| DomainEvent::UpgradeNodeReported(e.into()),
    }
    UpgradeBackupReported {
        newest: 1: UpgradeBackupReportedV1,
        encode: DomainEvent::UpgradeBackupReported(e) => UpgradeBackupReportedV1::from(e),
        decode: |e| DomainEvent::UpgradeBackupReported(e.into()),
    }
    UpgradeFailed {
        newest: 1: UpgradeFailedV1,
        encode: DomainEvent::UpgradeFailed(e) => UpgradeFailedV1::from(e),
        decode: |e| DomainEvent::UpgradeFailed(e.into()),
    }
    UpgradeCompleted {
        newest: 1: UpgradeCompletedV1,
        encode: DomainEvent::UpgradeCompleted(e) => UpgradeCompletedV1::from(e),
        decode: |e| DomainEvent::UpgradeCompleted(e.into()),
    }
    UpgradeCanceled {
        newest: 1: UpgradeRefV1,
        encode: DomainEvent::UpgradeCanceled(e) => UpgradeRefV1::from(e),
        decode: |e| DomainEvent::UpgradeCanceled(e.into()),
    }
    UpgradeRolledBack {
        newest: 1: UpgradeRolledBackV1,
        encode: DomainEvent::UpgradeRolledBack(e) => UpgradeRolledBackV1::from(e),
        decode: |e| DomainEvent::UpgradeRolledBack(e.into()),
    }
    UpgradeAcknowledged {
        newest: 1: UpgradeRefV1,
        encode: DomainEvent::UpgradeAcknowledged(e) => UpgradeRefV1::from(e),
        decode: |e| DomainEvent::UpgradeAcknowledged(e.into()),
    }
    TokenRevoked {
        newest: 1: TokenRevokedV1,
        encode: DomainEvent::TokenRevoked(e) => TokenRevokedV1::from(e),
        decode: |e| DomainEvent::TokenRevoked(e.into()),
    }
    PolicyCreated {
        newest: 1: PolicyCreatedV1,
        encode: DomainEvent::PolicyCreated(e) => PolicyCreatedV1::from(e),
        decode: |e| DomainEvent::PolicyCreated(e.into()),
    }
    PrincipalPoliciesSet {
        newest: 1: PrincipalPoliciesSetV1,
        encode: DomainEvent::PrincipalPoliciesSet(e) => PrincipalPoliciesSetV1::from(e),
        decode: |e| DomainEvent::PrincipalPoliciesSet(e.into()),
    }
    ResourcePolicySet {
        newest: 1: ResourcePolicySetV1,
        encode: DomainEvent::ResourcePolicySet(e) => ResourcePolicySetV1::from(e),
        decode: |e| DomainEvent::ResourcePolicySet(e.into()),
    }
    NodeFactsReported {
        newest: 1: NodeFactsReportedV1,
        encode: DomainEvent::NodeFactsReported(e) => NodeFactsReportedV1::from(e),
        decode: |e| DomainEvent::NodeFactsReported(e.into()),
    }
    AlarmRaised {
        newest: 1: AlarmRaisedV1,
        encode: DomainEvent::AlarmRaised(e) => AlarmRaisedV1::from(e),
        decode: |e| DomainEvent::AlarmRaised(e.into()),
    }
    AlarmCleared {
        newest: 1: AlarmClearedV1,
        encode: DomainEvent::AlarmCleared(e) => AlarmClearedV1::from(e),
        decode: |e| DomainEvent::AlarmCleared(e.into()),
    }
    EventsLost {
        newest: 1: EventsLostV1,
        encode: DomainEvent::EventsLost(e) => EventsLostV1::from(e),
        decode: |e| DomainEvent::EventsLost(e.into()),
    }
    CheckpointForkFound {
        newest: 1: CheckpointForkFoundV1,
        encode: DomainEvent::CheckpointForkFound(e) => CheckpointForkFoundV1::from(e),
        decode: |e| DomainEvent::CheckpointForkFound(e.into()),
    }
    CheckpointForkAcknowledged {
        newest: 1: CheckpointForkAcknowledgedV1,
        encode: DomainEvent::CheckpointForkAcknowledged(e) => CheckpointForkAcknowledgedV1::from(e),
        decode: |e| DomainEvent::CheckpointForkAcknowledged(e.into()),
    }
    StorageVersionFinalized {
        newest: 1 @ 2: StorageVersionFinalizedV1,
        encode: DomainEvent::StorageVersionFinalized(e) => StorageVersionFinalizedV1::from(e),
        decode: |e| DomainEvent::StorageVersionFinalized(e.into()),
    }
}

/// Why an event cannot be written at the log's storage level.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NotWritable {
    #[error(
        "{event_type} is first written at storage level {needs}; the log is at level {level} until stratum replicas finalize moves it"
    )]
    NotYet {
        event_type: &'static str,
        needs: u16,
        level: u16,
    },
    #[error("this build has no way to write {event_type} as v{version}, which storage level {level} writes")]
    NoPrevious {
        event_type: &'static str,
        version: u16,
        level: u16,
    },
}

/// Encodes an event in the version the log's storage `level` allows: its
/// newest, or the older version the level writes while the log is not
/// finalized at the newest's level. A `StorageVersionFinalized` is written
/// at the level it finalizes (it is that level's first event).
pub fn encode_at(event: &DomainEvent, level: u16) -> Result<Encoded, NotWritable> {
    let level = if let DomainEvent::StorageVersionFinalized(f) = event {
        level.max(f.level)
    } else {
        level
    };
    let event_type = event.event_type();
    let newest = schema_version(event);
    match levels::version_at(event_type, level) {
        Some(v) if v == newest => Ok(encode(event)),
        Some(version) => encode_previous(event, version).ok_or(NotWritable::NoPrevious {
            event_type,
            version,
            level,
        }),
        None => Err(NotWritable::NotYet {
            event_type,
            needs: levels::level_of(event_type, 1),
            level,
        }),
    }
}

/// Each stored event type and the newest version [`decode`] reads of it
/// (it reads every older one too), by type name.
pub fn newest_versions() -> std::collections::BTreeMap<&'static str, u16> {
    let mut out = std::collections::BTreeMap::new();
    for (t, v) in STORED_VERSIONS {
        let newest = out.entry(*t).or_insert(*v);
        *newest = (*newest).max(*v);
    }
    out
}
