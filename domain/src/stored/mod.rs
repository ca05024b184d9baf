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

pub mod upcast;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;

use serde::{Deserialize, Serialize};

use crate::event::{
    DomainEvent, JoinRequested, MemberAdmitted, MemberJoinFailed, MemberRemovalStarted,
    MemberUpdated, TokenIssued,
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

fn bytes<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_allocvec(v).expect("postcard encodes plain data")
}

fn rafts_v1(r: &[Raft]) -> Vec<RaftV1> {
    r.iter().map(|r| (*r).into()).collect()
}

fn raft_bits(r: &[Raft]) -> u8 {
    r.iter().fold(0, |bits, r| bits | raft_bit(*r))
}

fn rafts_from_bits(t: &str, v: u16, bits: u8) -> Result<Vec<Raft>, DecodeError> {
    rafts_of_bits(bits).ok_or_else(|| {
        DecodeError::Payload(t.to_owned(), v, format!("unknown raft bits {bits:#x}"))
    })
}

/// Encodes a domain event in its newest stored version.
pub fn encode(event: &DomainEvent) -> Encoded {
    let payload = match event {
        DomainEvent::MemberAdmitted(a) => bytes(&MemberAdmittedV1 {
            node_id: a.node_id.clone(),
            role: a.role.into(),
            mgmt_ip: a.mgmt_ip.clone(),
            bindings: a.bindings.clone(),
            labels: a.labels.clone(),
            ordinal: a.ordinal,
            join_request: a.join_request.clone(),
        }),
        DomainEvent::JoinProgressReported { node_id, step } => bytes(&NodeStepV1 {
            node_id: node_id.clone(),
            step: step.clone(),
        }),
        DomainEvent::MemberJoinCompleted { node_id }
        | DomainEvent::RaftCleanupCompleted { node_id }
        | DomainEvent::MemberJoinRetried { node_id } => bytes(&NodeV1 {
            node_id: node_id.clone(),
        }),
        DomainEvent::MemberJoinFailed(e) => bytes(&MemberJoinFailedV2 {
            node_id: e.node_id.clone(),
            step: e.step.clone(),
            error: e.error.clone(),
            rafts: raft_bits(&e.rafts),
        }),
        DomainEvent::RaftPeerRemoved {
            node_id,
            raft,
            already_gone,
            adapter,
            leader_moved,
            settings,
        } => bytes(&RaftPeerRemovedV4 {
            node_id: node_id.clone(),
            raft: (*raft).into(),
            already_gone: *already_gone,
            adapter: adapter.clone(),
            leader_moved: *leader_moved,
            settings: settings.clone(),
        }),
        DomainEvent::RaftPeerReturned(e) => bytes(&RaftPeerReturnedV1 {
            node_id: e.node_id.clone(),
            raft: e.raft.into(),
            removed_position: e.removed_position,
            removed_at: micros(e.removed_at),
        }),
        DomainEvent::MemberUpdated(e) => bytes(&MemberUpdatedV1 {
            node_id: e.node_id.clone(),
            role: e.role.into(),
            mgmt_ip: e.mgmt_ip.clone(),
            bindings: e.bindings.clone(),
            labels: e.labels.clone(),
            forced: e.forced,
            rafts: raft_bits(&e.rafts),
        }),
        DomainEvent::MemberRemovalStarted(e) => bytes(&MemberRemovalStartedV1 {
            node_id: e.node_id.clone(),
            reason: e.reason.clone(),
            forced: e.forced,
            rafts: rafts_v1(&e.rafts),
        }),
        DomainEvent::MemberDecommissioned {
            node_id,
            reason,
            by,
        } => bytes(&MemberDecommissionedV1 {
            node_id: node_id.clone(),
            reason: reason.clone(),
            by: by.clone(),
        }),
        DomainEvent::AppliedGenerationReported {
            node_id,
            generation,
        } => bytes(&AppliedGenerationReportedV1 {
            node_id: node_id.clone(),
            generation: *generation,
        }),
        DomainEvent::JoinRequested(r) => bytes(&JoinRequestedV1 {
            request_id: r.request_id.clone(),
            node_id: r.node_id.clone(),
            mgmt_ip: r.mgmt_ip.clone(),
            labels: r.labels.clone(),
            facts: r.facts.clone(),
        }),
        DomainEvent::JoinRequestApproved {
            request_id,
            node_id,
        } => bytes(&JoinRequestApprovedV1 {
            request_id: request_id.clone(),
            node_id: node_id.clone(),
        }),
        DomainEvent::JoinRequestRejected { request_id, reason } => bytes(&JoinRequestRejectedV1 {
            request_id: request_id.clone(),
            reason: reason.clone(),
        }),
        DomainEvent::TokenIssued(t) => bytes(&TokenIssuedV2 {
            token_id: t.token_id.clone(),
            principal: t.principal.clone(),
            verifier: (&t.verifier).into(),
            policies: t.policies.clone(),
            expires_at: t.expires_at.map(|e| e.timestamp_micros()),
        }),
        DomainEvent::ReleaseRegistered(e) => bytes(&ReleaseRegisteredV2::from(e)),
        DomainEvent::RunningReleaseSet(e) => bytes(&RunningReleaseSetV1::from(e)),
        DomainEvent::UpgradePlanned(e) => bytes(&UpgradePlannedV2::from(e)),
        DomainEvent::UpgradeStateChanged(e) => bytes(&UpgradeStateChangedV1::from(e)),
        DomainEvent::UpgradePrechecked(e) => bytes(&UpgradePrecheckedV1::from(e)),
        DomainEvent::UpgradeNodeTurnStarted(e) => bytes(&UpgradeNodeTurnStartedV1::from(e)),
        DomainEvent::UpgradeNodeReported(e) => bytes(&UpgradeNodeReportedV2::from(e)),
        DomainEvent::UpgradeBackupReported(e) => bytes(&UpgradeBackupReportedV1::from(e)),
        DomainEvent::UpgradeFailed(e) => bytes(&UpgradeFailedV1::from(e)),
        DomainEvent::UpgradeCompleted(e) => bytes(&UpgradeCompletedV1::from(e)),
        DomainEvent::UpgradeRolledBack(e) => bytes(&UpgradeRolledBackV1::from(e)),
        DomainEvent::UpgradeCanceled(e) | DomainEvent::UpgradeAcknowledged(e) => {
            bytes(&UpgradeRefV1::from(e))
        }
        DomainEvent::TokenRevoked(e) => bytes(&TokenRevokedV1::from(e)),
        DomainEvent::PolicyCreated(e) => bytes(&PolicyCreatedV1::from(e)),
        DomainEvent::PrincipalPoliciesSet(e) => bytes(&PrincipalPoliciesSetV1::from(e)),
        DomainEvent::ResourcePolicySet(e) => bytes(&ResourcePolicySetV1::from(e)),
        DomainEvent::NodeFactsReported(e) => bytes(&NodeFactsReportedV1::from(e)),
        DomainEvent::AlarmRaised(e) => bytes(&AlarmRaisedV1::from(e)),
        DomainEvent::AlarmCleared(e) => bytes(&AlarmClearedV1::from(e)),
        DomainEvent::EventsLost(e) => bytes(&EventsLostV1::from(e)),
        DomainEvent::CheckpointForkFound(e) => bytes(&CheckpointForkFoundV1::from(e)),
        DomainEvent::CheckpointForkAcknowledged(e) => bytes(&CheckpointForkAcknowledgedV1::from(e)),
        DomainEvent::StorageVersionFinalized(e) => bytes(&StorageVersionFinalizedV1::from(e)),
    };
    Encoded {
        event_type: event.event_type(),
        schema_version: schema_version(event),
        payload,
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
    match crate::storage::version_at(event_type, level) {
        Some(v) if v == newest => Ok(encode(event)),
        Some(version) => encode_previous(event, version).ok_or(NotWritable::NoPrevious {
            event_type,
            version,
            level,
        }),
        None => Err(NotWritable::NotYet {
            event_type,
            needs: crate::storage::level_of(event_type, 1),
            level,
        }),
    }
}

/// An event in an older stored version, for a log not yet finalized at
/// the level of its newest: what the older version cannot say is left out,
/// as the build that wrote that version left it.
fn encode_previous(event: &DomainEvent, version: u16) -> Option<Encoded> {
    let payload = match (event, version) {
        (
            DomainEvent::RaftPeerRemoved {
                node_id,
                raft,
                already_gone,
                adapter,
                leader_moved,
                settings: _,
            },
            3,
        ) => bytes(&RaftPeerRemovedV3 {
            node_id: node_id.clone(),
            raft: (*raft).into(),
            already_gone: *already_gone,
            adapter: adapter.clone(),
            leader_moved: *leader_moved,
        }),
        _ => return None,
    };
    Some(Encoded {
        event_type: event.event_type(),
        schema_version: version,
        payload,
    })
}

/// Every (event type, schema version) ever written: what [`decode`] reads.
/// A test holds it to the golden bytes in `replay-tests/fixtures/events`.
pub const STORED_VERSIONS: &[(&str, u16)] = &[
    ("AlarmCleared", 1),
    ("AlarmRaised", 1),
    ("AppliedGenerationReported", 1),
    ("CheckpointForkAcknowledged", 1),
    ("CheckpointForkFound", 1),
    ("EventsLost", 1),
    ("JoinProgressReported", 1),
    ("JoinRequestApproved", 1),
    ("JoinRequestRejected", 1),
    ("JoinRequested", 1),
    ("MemberAdmitted", 1),
    ("MemberDecommissioned", 1),
    ("MemberJoinCompleted", 1),
    ("MemberJoinFailed", 1),
    ("MemberJoinFailed", 2),
    ("MemberJoinRetried", 1),
    ("MemberRemovalStarted", 1),
    ("MemberUpdated", 1),
    ("NodeFactsReported", 1),
    ("PolicyCreated", 1),
    ("PrincipalPoliciesSet", 1),
    ("RaftCleanupCompleted", 1),
    ("RaftPeerRemoved", 1),
    ("RaftPeerRemoved", 2),
    ("RaftPeerRemoved", 3),
    ("RaftPeerRemoved", 4),
    ("RaftPeerReturned", 1),
    ("ReleaseRegistered", 1),
    ("ReleaseRegistered", 2),
    ("ResourcePolicySet", 1),
    ("RunningReleaseSet", 1),
    ("StorageVersionFinalized", 1),
    ("TokenIssued", 1),
    ("TokenIssued", 2),
    ("TokenRevoked", 1),
    ("UpgradeAcknowledged", 1),
    ("UpgradeBackupReported", 1),
    ("UpgradeCanceled", 1),
    ("UpgradeCompleted", 1),
    ("UpgradeFailed", 1),
    ("UpgradeNodeReported", 1),
    ("UpgradeNodeReported", 2),
    ("UpgradeNodeTurnStarted", 1),
    ("UpgradePlanned", 1),
    ("UpgradePlanned", 2),
    ("UpgradePrechecked", 1),
    ("UpgradeRolledBack", 1),
    ("UpgradeStateChanged", 1),
];

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

/// The version `encode` writes of an event's type: the newest.
/// Every event type is named, with no catch-all: a new one does not
/// compile until it is given its version.
pub fn schema_version(event: &DomainEvent) -> u16 {
    match event {
        DomainEvent::RaftPeerRemoved { .. } => 4,
        DomainEvent::MemberJoinFailed(_)
        | DomainEvent::ReleaseRegistered(_)
        | DomainEvent::UpgradePlanned(_)
        | DomainEvent::UpgradeNodeReported(_)
        | DomainEvent::TokenIssued(_) => 2,
        DomainEvent::MemberAdmitted(_)
        | DomainEvent::JoinProgressReported { .. }
        | DomainEvent::MemberJoinCompleted { .. }
        | DomainEvent::RaftCleanupCompleted { .. }
        | DomainEvent::RaftPeerReturned(_)
        | DomainEvent::MemberJoinRetried { .. }
        | DomainEvent::MemberRemovalStarted(_)
        | DomainEvent::MemberDecommissioned { .. }
        | DomainEvent::MemberUpdated(_)
        | DomainEvent::AppliedGenerationReported { .. }
        | DomainEvent::JoinRequested(_)
        | DomainEvent::JoinRequestApproved { .. }
        | DomainEvent::JoinRequestRejected { .. }
        | DomainEvent::RunningReleaseSet(_)
        | DomainEvent::UpgradeStateChanged(_)
        | DomainEvent::UpgradePrechecked(_)
        | DomainEvent::UpgradeNodeTurnStarted(_)
        | DomainEvent::UpgradeBackupReported(_)
        | DomainEvent::UpgradeFailed(_)
        | DomainEvent::UpgradeCompleted(_)
        | DomainEvent::UpgradeCanceled(_)
        | DomainEvent::UpgradeRolledBack(_)
        | DomainEvent::UpgradeAcknowledged(_)
        | DomainEvent::TokenRevoked(_)
        | DomainEvent::PolicyCreated(_)
        | DomainEvent::PrincipalPoliciesSet(_)
        | DomainEvent::ResourcePolicySet(_)
        | DomainEvent::NodeFactsReported(_)
        | DomainEvent::AlarmRaised(_)
        | DomainEvent::AlarmCleared(_)
        | DomainEvent::EventsLost(_)
        | DomainEvent::CheckpointForkFound(_)
        | DomainEvent::CheckpointForkAcknowledged(_)
        | DomainEvent::StorageVersionFinalized(_) => 1,
    }
}

/// Decodes any version ever written of any event type.
pub fn decode(
    event_type: &str,
    schema_version: u16,
    payload: &[u8],
) -> Result<DomainEvent, DecodeError> {
    fn de<'a, T: Deserialize<'a>>(t: &str, v: u16, p: &'a [u8]) -> Result<T, DecodeError> {
        postcard::from_bytes(p).map_err(|e| DecodeError::Payload(t.to_owned(), v, e.to_string()))
    }
    let t = event_type;
    let v = schema_version;
    let event = match (t, v) {
        ("MemberAdmitted", 1) => {
            let a: MemberAdmittedV1 = de(t, v, payload)?;
            DomainEvent::MemberAdmitted(MemberAdmitted {
                node_id: a.node_id,
                role: a.role.into(),
                mgmt_ip: a.mgmt_ip,
                bindings: a.bindings,
                labels: a.labels,
                ordinal: a.ordinal,
                join_request: a.join_request,
            })
        }
        ("JoinProgressReported", 1) => {
            let e: NodeStepV1 = de(t, v, payload)?;
            DomainEvent::JoinProgressReported {
                node_id: e.node_id,
                step: e.step,
            }
        }
        ("MemberJoinCompleted", 1) => DomainEvent::MemberJoinCompleted {
            node_id: de::<NodeV1>(t, v, payload)?.node_id,
        },
        ("RaftCleanupCompleted", 1) => DomainEvent::RaftCleanupCompleted {
            node_id: de::<NodeV1>(t, v, payload)?.node_id,
        },
        ("MemberJoinRetried", 1) => DomainEvent::MemberJoinRetried {
            node_id: de::<NodeV1>(t, v, payload)?.node_id,
        },
        ("MemberJoinFailed", 1 | 2) => {
            let e: MemberJoinFailedV2 = if v == 1 {
                upcast::member_join_failed_v1_to_v2(de(t, v, payload)?)
            } else {
                de(t, v, payload)?
            };
            DomainEvent::MemberJoinFailed(MemberJoinFailed {
                node_id: e.node_id,
                step: e.step,
                error: e.error,
                rafts: rafts_from_bits(t, v, e.rafts)?,
            })
        }
        ("RaftPeerRemoved", 1) => {
            upcast::raft_peer_removed_v3_to_v4(upcast::raft_peer_removed_v2_to_v3(
                upcast::raft_peer_removed_v1_to_v2(de(t, v, payload)?),
            ))
            .into()
        }
        ("RaftPeerRemoved", 2) => upcast::raft_peer_removed_v3_to_v4(
            upcast::raft_peer_removed_v2_to_v3(de(t, v, payload)?),
        )
        .into(),
        ("RaftPeerRemoved", 3) => {
            upcast::raft_peer_removed_v3_to_v4(de::<RaftPeerRemovedV3>(t, v, payload)?).into()
        }
        ("RaftPeerRemoved", 4) => de::<RaftPeerRemovedV4>(t, v, payload)?.into(),
        ("StorageVersionFinalized", 1) => DomainEvent::StorageVersionFinalized(
            de::<StorageVersionFinalizedV1>(t, v, payload)?.into(),
        ),
        ("RaftPeerReturned", 1) => {
            let e: RaftPeerReturnedV1 = de(t, v, payload)?;
            DomainEvent::RaftPeerReturned(crate::event::RaftPeerReturned {
                node_id: e.node_id,
                raft: e.raft.into(),
                removed_position: e.removed_position,
                removed_at: time(e.removed_at),
            })
        }
        ("MemberUpdated", 1) => {
            let e: MemberUpdatedV1 = de(t, v, payload)?;
            DomainEvent::MemberUpdated(MemberUpdated {
                node_id: e.node_id,
                role: e.role.into(),
                mgmt_ip: e.mgmt_ip,
                bindings: e.bindings,
                labels: e.labels,
                forced: e.forced,
                rafts: rafts_from_bits(t, v, e.rafts)?,
            })
        }
        ("MemberRemovalStarted", 1) => {
            let e: MemberRemovalStartedV1 = de(t, v, payload)?;
            DomainEvent::MemberRemovalStarted(MemberRemovalStarted {
                node_id: e.node_id,
                reason: e.reason,
                forced: e.forced,
                rafts: e.rafts.into_iter().map(Into::into).collect(),
            })
        }
        ("MemberDecommissioned", 1) => {
            let e: MemberDecommissionedV1 = de(t, v, payload)?;
            DomainEvent::MemberDecommissioned {
                node_id: e.node_id,
                reason: e.reason,
                by: e.by,
            }
        }
        ("AppliedGenerationReported", 1) => {
            let e: AppliedGenerationReportedV1 = de(t, v, payload)?;
            DomainEvent::AppliedGenerationReported {
                node_id: e.node_id,
                generation: e.generation,
            }
        }
        ("JoinRequested", 1) => {
            let e: JoinRequestedV1 = de(t, v, payload)?;
            DomainEvent::JoinRequested(JoinRequested {
                request_id: e.request_id,
                node_id: e.node_id,
                mgmt_ip: e.mgmt_ip,
                labels: e.labels,
                facts: e.facts,
            })
        }
        ("JoinRequestApproved", 1) => {
            let e: JoinRequestApprovedV1 = de(t, v, payload)?;
            DomainEvent::JoinRequestApproved {
                request_id: e.request_id,
                node_id: e.node_id,
            }
        }
        ("JoinRequestRejected", 1) => {
            let e: JoinRequestRejectedV1 = de(t, v, payload)?;
            DomainEvent::JoinRequestRejected {
                request_id: e.request_id,
                reason: e.reason,
            }
        }
        ("TokenIssued", 1 | 2) => {
            let e: TokenIssuedV2 = if v == 1 {
                upcast::token_issued_v1_to_v2(de(t, v, payload)?)
            } else {
                de(t, v, payload)?
            };
            DomainEvent::TokenIssued(TokenIssued {
                token_id: e.token_id,
                principal: e.principal,
                verifier: e.verifier.into(),
                policies: e.policies,
                expires_at: e.expires_at.map(crate::log::micros_to_time),
            })
        }
        ("ReleaseRegistered", 1) => DomainEvent::ReleaseRegistered(
            upcast::release_registered_v1_to_v2(de(t, v, payload)?).into(),
        ),
        ("ReleaseRegistered", 2) => {
            DomainEvent::ReleaseRegistered(de::<ReleaseRegisteredV2>(t, v, payload)?.into())
        }
        ("RunningReleaseSet", 1) => {
            DomainEvent::RunningReleaseSet(de::<RunningReleaseSetV1>(t, v, payload)?.into())
        }
        ("UpgradePlanned", 1) => {
            DomainEvent::UpgradePlanned(upcast::upgrade_planned_v1_to_v2(de(t, v, payload)?).into())
        }
        ("UpgradePlanned", 2) => {
            DomainEvent::UpgradePlanned(de::<UpgradePlannedV2>(t, v, payload)?.into())
        }
        ("UpgradeStateChanged", 1) => {
            DomainEvent::UpgradeStateChanged(de::<UpgradeStateChangedV1>(t, v, payload)?.into())
        }
        ("UpgradePrechecked", 1) => {
            DomainEvent::UpgradePrechecked(de::<UpgradePrecheckedV1>(t, v, payload)?.into())
        }
        ("UpgradeNodeTurnStarted", 1) => DomainEvent::UpgradeNodeTurnStarted(
            de::<UpgradeNodeTurnStartedV1>(t, v, payload)?.into(),
        ),
        ("UpgradeNodeReported", 1) => DomainEvent::UpgradeNodeReported(
            upcast::upgrade_node_reported_v1_to_v2(de(t, v, payload)?).into(),
        ),
        ("UpgradeNodeReported", 2) => {
            DomainEvent::UpgradeNodeReported(de::<UpgradeNodeReportedV2>(t, v, payload)?.into())
        }
        ("NodeFactsReported", 1) => {
            DomainEvent::NodeFactsReported(de::<NodeFactsReportedV1>(t, v, payload)?.into())
        }
        ("AlarmRaised", 1) => DomainEvent::AlarmRaised(de::<AlarmRaisedV1>(t, v, payload)?.into()),
        ("AlarmCleared", 1) => {
            DomainEvent::AlarmCleared(de::<AlarmClearedV1>(t, v, payload)?.into())
        }
        ("EventsLost", 1) => DomainEvent::EventsLost(de::<EventsLostV1>(t, v, payload)?.into()),
        ("CheckpointForkFound", 1) => {
            DomainEvent::CheckpointForkFound(de::<CheckpointForkFoundV1>(t, v, payload)?.into())
        }
        ("CheckpointForkAcknowledged", 1) => DomainEvent::CheckpointForkAcknowledged(
            de::<CheckpointForkAcknowledgedV1>(t, v, payload)?.into(),
        ),
        ("UpgradeBackupReported", 1) => {
            DomainEvent::UpgradeBackupReported(de::<UpgradeBackupReportedV1>(t, v, payload)?.into())
        }
        ("UpgradeFailed", 1) => {
            DomainEvent::UpgradeFailed(de::<UpgradeFailedV1>(t, v, payload)?.into())
        }
        ("UpgradeCompleted", 1) => {
            DomainEvent::UpgradeCompleted(de::<UpgradeCompletedV1>(t, v, payload)?.into())
        }
        ("UpgradeCanceled", 1) => {
            DomainEvent::UpgradeCanceled(de::<UpgradeRefV1>(t, v, payload)?.into())
        }
        ("UpgradeRolledBack", 1) => {
            DomainEvent::UpgradeRolledBack(de::<UpgradeRolledBackV1>(t, v, payload)?.into())
        }
        ("UpgradeAcknowledged", 1) => {
            DomainEvent::UpgradeAcknowledged(de::<UpgradeRefV1>(t, v, payload)?.into())
        }
        ("TokenRevoked", 1) => {
            DomainEvent::TokenRevoked(de::<TokenRevokedV1>(t, v, payload)?.into())
        }
        ("PolicyCreated", 1) => {
            DomainEvent::PolicyCreated(de::<PolicyCreatedV1>(t, v, payload)?.into())
        }
        ("PrincipalPoliciesSet", 1) => {
            DomainEvent::PrincipalPoliciesSet(de::<PrincipalPoliciesSetV1>(t, v, payload)?.into())
        }
        ("ResourcePolicySet", 1) => {
            DomainEvent::ResourcePolicySet(de::<ResourcePolicySetV1>(t, v, payload)?.into())
        }
        ("TokenRevoked" | "PolicyCreated" | "PrincipalPoliciesSet" | "ResourcePolicySet", _) => {
            return Err(DecodeError::UnknownVersion(t.to_owned(), v))
        }
        (
            "ReleaseRegistered"
            | "RunningReleaseSet"
            | "UpgradePlanned"
            | "UpgradeStateChanged"
            | "UpgradePrechecked"
            | "UpgradeNodeTurnStarted"
            | "UpgradeNodeReported"
            | "UpgradeBackupReported"
            | "UpgradeFailed"
            | "UpgradeCompleted"
            | "UpgradeCanceled"
            | "UpgradeRolledBack"
            | "UpgradeAcknowledged"
            | "TokenIssued"
            | "MemberAdmitted"
            | "JoinProgressReported"
            | "MemberJoinCompleted"
            | "RaftCleanupCompleted"
            | "MemberJoinRetried"
            | "MemberJoinFailed"
            | "RaftPeerRemoved"
            | "RaftPeerReturned"
            | "MemberRemovalStarted"
            | "MemberDecommissioned"
            | "MemberUpdated"
            | "AppliedGenerationReported"
            | "JoinRequested"
            | "JoinRequestApproved"
            | "JoinRequestRejected"
            | "NodeFactsReported"
            | "AlarmRaised"
            | "AlarmCleared"
            | "EventsLost"
            | "CheckpointForkFound"
            | "CheckpointForkAcknowledged"
            | "StorageVersionFinalized",
            _,
        ) => return Err(DecodeError::UnknownVersion(t.to_owned(), v)),
        _ => return Err(DecodeError::UnknownType(t.to_owned())),
    };
    Ok(event)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::membership::Role;
    use crate::upgrade::{BackupLocation, NodeKind, NodeStatus, Phase, UpgradeMode, UpgradeState};

    #[test]
    fn every_event_round_trips() {
        for e in crate::testing::one_of_each() {
            let enc = encode(&e);
            assert_eq!(enc.event_type, e.event_type());
            let back = decode(enc.event_type, enc.schema_version, &enc.payload).unwrap();
            assert_eq!(back, e);
        }
    }

    #[test]
    fn member_join_failed_v1_upcasts_to_the_v2_shape() {
        let v1 = MemberJoinFailedV1 {
            node_id: "n-1".into(),
            step: "join/raft-openbao".into(),
            error: "boom".into(),
            rafts: vec![RaftV1::Patroni, RaftV1::Openbao],
        };
        let v2 = upcast::member_join_failed_v1_to_v2(v1.clone());
        assert_eq!(v2.rafts, 0b011);
        let from_v1 = decode("MemberJoinFailed", 1, &bytes(&v1)).unwrap();
        let from_v2 = decode("MemberJoinFailed", 2, &bytes(&v2)).unwrap();
        assert_eq!(from_v1, from_v2);
        let bad = MemberJoinFailedV2 { rafts: 8, ..v2 };
        assert!(decode("MemberJoinFailed", 2, &bytes(&bad)).is_err());
    }

    #[test]
    fn raft_peer_removed_v1_upcasts_to_v2_with_an_unrecorded_adapter() {
        let v1 = RaftPeerRemovedV1 {
            node_id: "n-1".into(),
            raft: RaftV1::Ovn,
            already_gone: true,
        };
        let v2 = upcast::raft_peer_removed_v1_to_v2(v1.clone());
        assert_eq!(v2.adapter, "unrecorded");
        assert_eq!(
            decode("RaftPeerRemoved", 1, &bytes(&v1)).unwrap(),
            decode("RaftPeerRemoved", 2, &bytes(&v2)).unwrap()
        );
        let DomainEvent::RaftPeerRemoved { adapter, raft, .. } =
            decode("RaftPeerRemoved", 1, &bytes(&v1)).unwrap()
        else {
            panic!("a removal decodes as a removal")
        };
        assert_eq!((adapter.as_str(), raft), ("unrecorded", Raft::Ovn));
    }

    #[test]
    fn raft_peer_removed_v2_upcasts_to_v3_with_no_leader_moved() {
        let v2 = RaftPeerRemovedV2 {
            node_id: "n-1".into(),
            raft: RaftV1::Patroni,
            already_gone: false,
            adapter: "patroni-syncobj".into(),
        };
        let v3 = upcast::raft_peer_removed_v2_to_v3(v2.clone());
        assert!(!v3.leader_moved);
        assert_eq!(
            decode("RaftPeerRemoved", 2, &bytes(&v2)).unwrap(),
            decode("RaftPeerRemoved", 3, &bytes(&v3)).unwrap()
        );
        // What an export showed of a v2 removal before v3 existed reads as
        // its bytes do now.
        let old = serde_json::json!({"nodeId": "n-1", "raft": "patroni", "alreadyGone": false, "adapter": "patroni-syncobj"});
        assert_eq!(
            upcast::decode_exported("RaftPeerRemoved", 2, &old),
            Some(decode("RaftPeerRemoved", 2, &bytes(&v2)).unwrap())
        );
        let moved = RaftPeerRemovedV3 {
            leader_moved: true,
            ..v3
        };
        let DomainEvent::RaftPeerRemoved { leader_moved, .. } =
            decode("RaftPeerRemoved", 3, &bytes(&moved)).unwrap()
        else {
            panic!("a removal decodes as a removal")
        };
        assert!(leader_moved);
    }

    #[test]
    fn raft_peer_removed_v3_upcasts_to_v4_naming_no_settings() {
        let v3 = RaftPeerRemovedV3 {
            node_id: "n-1".into(),
            raft: RaftV1::Openbao,
            already_gone: true,
            adapter: "openbao-http".into(),
            leader_moved: true,
        };
        let v4 = upcast::raft_peer_removed_v3_to_v4(v3.clone());
        assert_eq!(v4.settings, None);
        let from_bytes = decode("RaftPeerRemoved", 3, &bytes(&v3)).unwrap();
        assert_eq!(
            from_bytes,
            decode("RaftPeerRemoved", 4, &bytes(&v4)).unwrap()
        );
        // What an export showed of a v3 removal before v4 existed, and what
        // it shows of one now (the decoded event, `settings: null`), read
        // as its bytes do.
        let before = serde_json::json!({"nodeId": "n-1", "raft": "openbao", "alreadyGone": true, "adapter": "openbao-http", "leaderMoved": true});
        let now = serde_json::json!({"nodeId": "n-1", "raft": "openbao", "alreadyGone": true, "adapter": "openbao-http", "leaderMoved": true, "settings": null});
        for shown in [before, now] {
            assert_eq!(
                upcast::decode_exported("RaftPeerRemoved", 3, &shown),
                Some(from_bytes.clone())
            );
        }
        let named = RaftPeerRemovedV4 {
            settings: Some("5e".repeat(32)),
            ..v4
        };
        let DomainEvent::RaftPeerRemoved { settings, .. } =
            decode("RaftPeerRemoved", 4, &bytes(&named)).unwrap()
        else {
            panic!("a removal decodes as a removal")
        };
        assert_eq!(settings, Some("5e".repeat(32)));
    }

    #[test]
    fn an_export_made_before_an_upcast_reads_like_one_made_after() {
        // What an export showed of a v1 removal before v2 existed.
        let old = serde_json::json!({"nodeId": "n-1", "raft": "ovn", "alreadyGone": false});
        let v1 = RaftPeerRemovedV1 {
            node_id: "n-1".into(),
            raft: RaftV1::Ovn,
            already_gone: false,
        };
        let from_bytes = decode("RaftPeerRemoved", 1, &bytes(&v1)).unwrap();
        assert_eq!(
            upcast::decode_exported("RaftPeerRemoved", 1, &old),
            Some(from_bytes.clone())
        );
        // A changed value still shows as changed.
        let tampered =
            serde_json::json!({"nodeId": "n-1", "raft": "patroni", "alreadyGone": false});
        assert_ne!(
            upcast::decode_exported("RaftPeerRemoved", 1, &tampered),
            Some(from_bytes)
        );
        // A payload that is not the version's shape is read as it is.
        assert_eq!(upcast::decode_exported("RaftPeerRemoved", 2, &old), None);
    }

    #[test]
    fn member_updated_refuses_unknown_raft_bits() {
        let e = MemberUpdatedV1 {
            node_id: "n-1".into(),
            role: RoleV1::Compute,
            mgmt_ip: "192.0.2.1".into(),
            bindings: BTreeMap::new(),
            labels: BTreeMap::new(),
            forced: false,
            rafts: 0b1000,
        };
        assert!(decode("MemberUpdated", 1, &bytes(&e)).is_err());
    }

    #[test]
    fn unknown_versions_and_types_are_refused() {
        assert!(matches!(
            decode("MemberJoinCompleted", 99, &[]),
            Err(DecodeError::UnknownVersion(_, 99))
        ));
        assert!(matches!(
            decode("Nope", 1, &[]),
            Err(DecodeError::UnknownType(_))
        ));
    }

    /// The committed v1 bytes of the event types that were once written as
    /// their domain structs; their stored types must write the same bytes.
    fn golden_v1(event_type: &str) -> Option<&'static [u8]> {
        macro_rules! golden {
            ($($t:literal),+ $(,)?) => {
                match event_type {
                    $($t => Some(include_bytes!(concat!(
                        "../../../replay-tests/fixtures/events/", $t, ".v1.bin"
                    )).as_slice()),)+
                    _ => None,
                }
            };
        }
        golden!(
            "ReleaseRegistered",
            "RunningReleaseSet",
            "UpgradePlanned",
            "UpgradeStateChanged",
            "UpgradePrechecked",
            "UpgradeNodeTurnStarted",
            "UpgradeNodeReported",
            "UpgradeBackupReported",
            "UpgradeFailed",
            "UpgradeCompleted",
            "UpgradeCanceled",
            "UpgradeRolledBack",
            "UpgradeAcknowledged",
            "TokenRevoked",
            "PolicyCreated",
            "PrincipalPoliciesSet",
            "ResourcePolicySet",
        )
    }

    #[test]
    fn stored_types_write_the_bytes_the_domain_structs_wrote() {
        let mut compared = Vec::new();
        for e in crate::testing::one_of_each() {
            let Some(golden) = golden_v1(e.event_type()) else {
                continue;
            };
            let enc = encode(&e);
            if enc.schema_version == 1 {
                // Still written at v1: the very same bytes.
                assert_eq!(enc.payload, golden, "{}", enc.event_type);
                assert_eq!(decode(enc.event_type, 1, golden).unwrap(), e);
            } else {
                // Upcast since: the old bytes still decode.
                assert!(
                    decode(enc.event_type, 1, golden).is_ok(),
                    "{}",
                    enc.event_type
                );
            }
            compared.push(enc.event_type);
        }
        assert_eq!(compared.len(), 17, "{compared:?}");
    }

    /// Checks a stored enum against `replay-tests/fixtures/enums/<Enum>.bin`:
    /// the postcard bytes of a `Vec` of every variant in declaration order.
    /// The match has no catch-all, so a variant added to the enum and not
    /// listed here does not compile; the golden bytes catch one inserted or
    /// moved. A variant may only ever be appended, and its index then
    /// appended to the fixture (with the length in front grown by one).
    macro_rules! golden_enum {
        ($v1:ident <=> $domain:ty { $($variant:ident),+ $(,)? }) => {{
            let all = vec![$($v1::$variant),+];
            let golden: &[u8] = include_bytes!(concat!(
                "../../../replay-tests/fixtures/enums/",
                stringify!($v1),
                ".bin"
            ));
            assert_eq!(bytes(&all), golden, "{}", stringify!($v1));
            assert_eq!(postcard::from_bytes::<Vec<$v1>>(golden).unwrap(), all);
            for (index, x) in all.iter().enumerate() {
                let name = match x {
                    $($v1::$variant => stringify!($variant)),+
                };
                assert_eq!(format!("{x:?}"), name);
                // Alone, a variant is its index.
                assert_eq!(bytes(x), bytes(&index), "{name}");
                assert_eq!(postcard::from_bytes::<$v1>(&bytes(x)).unwrap(), *x);
                // It converts to the domain's variant of the same name, and back.
                let domain: $domain = (*x).into();
                assert_eq!(format!("{domain:?}"), name);
                assert_eq!($v1::from(domain), *x);
            }
        }};
    }

    #[test]
    fn every_variant_of_every_stored_enum_keeps_its_golden_bytes() {
        use crate::upgrade::{ReleaseSource, StepKind};
        golden_enum!(RoleV1 <=> Role {
            Control,
            Compute,
            Storage,
            Hybrid,
        });
        golden_enum!(RaftV1 <=> Raft {
            Patroni,
            Openbao,
            Ovn,
        });
        golden_enum!(UpgradeStateV1 <=> UpgradeState {
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
        });
        golden_enum!(UpgradeModeV1 <=> UpgradeMode { Now, StageOnly });
        golden_enum!(NodeKindV1 <=> NodeKind {
            Containers,
            Host,
            Os,
        });
        golden_enum!(BackupLocationV1 <=> BackupLocation { Node, Target });
        golden_enum!(PhaseV1 <=> Phase {
            Fetch,
            Roll,
            Verify,
        });
        golden_enum!(NodeStatusV2 <=> NodeStatus {
            Pending,
            Running,
            Done,
            Failed,
            RolledBack,
        });
        golden_enum!(ReleaseSourceV2 <=> ReleaseSource { Manifest, Media });
        golden_enum!(StepKindV2 <=> StepKind {
            Cluster,
            EveryNode,
            Node,
        });
        golden_enum!(ComponentKindV1 <=> crate::release::ComponentKind { Image, Package });
        // NodeStatusV1 keeps its own bytes; it reaches the domain through
        // NodeStatusV2, whose first four variants are its four.
        let v1_all = vec![
            NodeStatusV1::Pending,
            NodeStatusV1::Running,
            NodeStatusV1::Done,
            NodeStatusV1::Failed,
        ];
        let golden: &[u8] = include_bytes!("../../../replay-tests/fixtures/enums/NodeStatusV1.bin");
        assert_eq!(bytes(&v1_all), golden);
    }

    #[test]
    fn a_token_of_a_chosen_secret_keeps_only_its_argon2id_hash() {
        use crate::iam::SecretVerifier;
        let phc = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA".to_owned();
        let e = DomainEvent::TokenIssued(TokenIssued {
            token_id: "tok-boot".into(),
            principal: "user/admin".into(),
            verifier: SecretVerifier::Argon2id(phc.clone()),
            policies: vec!["AdministratorAccess".into()],
            expires_at: None,
        });
        let enc = encode(&e);
        assert_eq!((enc.event_type, enc.schema_version), ("TokenIssued", 2));
        assert_eq!(decode("TokenIssued", 2, &enc.payload).unwrap(), e);
        // What auditors read: the slow hash, and no fast one.
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["secretArgon2id"], phc.as_str(), "{json}");
        assert!(json.get("secretSha256").is_none(), "{json}");
        // A v1 token reads as one recognized by its SHA-256, and shows as
        // v1 events always showed.
        let v1 = bytes(&TokenIssuedV1 {
            token_id: "tok-1".into(),
            principal: "user/alice".into(),
            secret_sha256: [7; 32],
            policies: vec![],
            expires_at: None,
        });
        let DomainEvent::TokenIssued(old) = decode("TokenIssued", 1, &v1).unwrap() else {
            panic!()
        };
        assert_eq!(old.verifier, SecretVerifier::Sha256([7; 32]));
        let json = serde_json::to_value(DomainEvent::TokenIssued(old)).unwrap();
        assert_eq!(json["secretSha256"], hex::encode([7; 32]), "{json}");
    }

    #[test]
    #[allow(clippy::disallowed_methods, reason = "a test reads the golden files")]
    fn the_stored_versions_are_those_with_golden_bytes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../replay-tests/fixtures/events");
        let mut golden: Vec<(String, u16)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                let stem = name.strip_suffix(".bin").unwrap().to_owned();
                let (t, v) = stem.rsplit_once(".v").unwrap();
                (t.to_owned(), v.parse().unwrap())
            })
            .collect();
        golden.sort();
        let listed: Vec<(String, u16)> = STORED_VERSIONS
            .iter()
            .map(|(t, v)| ((*t).to_owned(), *v))
            .collect();
        assert_eq!(listed, golden);
    }
}
