//! The stored format of events: versioned payload types kept apart from the
//! domain enum, and the upcasters that read every version ever written.
//!
//! Postcard writes fields in definition order without names and enum
//! variants as numbers. So a stored type is never changed: not a field, not
//! a variant, not their order. A new shape is a new schema version with its
//! own type, and an upcaster from the previous one. Golden bytes of every
//! version live in `replay-tests/fixtures` and must keep decoding.
//!
//! The upgrade events (SPEC §5) and the IAM events after `TokenIssued`
//! are stored as their own payload types from [`crate::upgrade`] and
//! [`crate::iam`], which are therefore frozen at schema version 1 under
//! the same rule: a change to one of them (or to a type inside it, such as
//! `Plan` or `UpgradeState`) is a new version with a `v2` type here and an
//! upcaster, and the golden fixtures catch any change that forgets it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{
    DomainEvent, JoinRequested, MemberAdmitted, MemberJoinFailed, MemberRemovalStarted,
    MemberUpdated, TokenIssued,
};
use crate::membership::{Raft, Role};

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

/// Version 1 of every stored type.
pub mod v1 {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum RoleV1 {
        Control,
        Compute,
        Storage,
        Hybrid,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum RaftV1 {
        Patroni,
        Openbao,
        Ovn,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct MemberAdmittedV1 {
        pub node_id: String,
        pub role: RoleV1,
        pub mgmt_ip: String,
        pub bindings: BTreeMap<String, String>,
        pub labels: BTreeMap<String, String>,
        pub ordinal: u32,
        pub join_request: Option<String>,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct NodeStepV1 {
        pub node_id: String,
        pub step: String,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct NodeV1 {
        pub node_id: String,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct MemberJoinFailedV1 {
        pub node_id: String,
        pub step: String,
        pub error: String,
        pub rafts: Vec<RaftV1>,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct RaftPeerRemovedV1 {
        pub node_id: String,
        pub raft: RaftV1,
        pub already_gone: bool,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct MemberRemovalStartedV1 {
        pub node_id: String,
        pub reason: String,
        pub forced: bool,
        pub rafts: Vec<RaftV1>,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct MemberDecommissionedV1 {
        pub node_id: String,
        pub reason: String,
        pub by: String,
    }

    /// A member change: the values after it, all four.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct MemberUpdatedV1 {
        pub node_id: String,
        pub role: RoleV1,
        pub mgmt_ip: String,
        pub bindings: BTreeMap<String, String>,
        pub labels: BTreeMap<String, String>,
        pub forced: bool,
        /// The rafts a demoted voter is taken out of, as a bit set (see
        /// [`super::v2::raft_bit`]).
        pub rafts: u8,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct AppliedGenerationReportedV1 {
        pub node_id: String,
        pub generation: u64,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct JoinRequestedV1 {
        pub request_id: String,
        pub node_id: String,
        pub mgmt_ip: String,
        pub labels: BTreeMap<String, String>,
        pub facts: String,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct JoinRequestApprovedV1 {
        pub request_id: String,
        pub node_id: String,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct TokenIssuedV1 {
        pub token_id: String,
        pub principal: String,
        pub secret_sha256: [u8; 32],
        pub policies: Vec<String>,
        /// Microseconds since the epoch.
        pub expires_at: Option<i64>,
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct JoinRequestRejectedV1 {
        pub request_id: String,
        pub reason: String,
    }

    impl From<Role> for RoleV1 {
        fn from(r: Role) -> Self {
            match r {
                Role::Control => RoleV1::Control,
                Role::Compute => RoleV1::Compute,
                Role::Storage => RoleV1::Storage,
                Role::Hybrid => RoleV1::Hybrid,
            }
        }
    }

    impl From<RoleV1> for Role {
        fn from(r: RoleV1) -> Self {
            match r {
                RoleV1::Control => Role::Control,
                RoleV1::Compute => Role::Compute,
                RoleV1::Storage => Role::Storage,
                RoleV1::Hybrid => Role::Hybrid,
            }
        }
    }

    impl From<Raft> for RaftV1 {
        fn from(r: Raft) -> Self {
            match r {
                Raft::Patroni => RaftV1::Patroni,
                Raft::Openbao => RaftV1::Openbao,
                Raft::Ovn => RaftV1::Ovn,
            }
        }
    }

    impl From<RaftV1> for Raft {
        fn from(r: RaftV1) -> Self {
            match r {
                RaftV1::Patroni => Raft::Patroni,
                RaftV1::Openbao => Raft::Openbao,
                RaftV1::Ovn => Raft::Ovn,
            }
        }
    }
}

/// Version 2 of the types that changed since version 1.
pub mod v2 {
    use super::*;

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
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// Upcasters: each turns a version into the next, small and separately
/// tested, so old bytes reach the newest shape step by step.
pub mod upcast {
    use super::*;

    /// What a v1 removal says of its adapter: it did not record one.
    pub const UNRECORDED_ADAPTER: &str = "unrecorded";

    /// An export keeps each payload as JSON, as the service decoded it on
    /// the day of the export. An export made before an upcast added a field
    /// lacks it; this adds what the upcasters add to an event stored at
    /// `schema_version`, so old and new exports of the same bytes read the
    /// same. Only fields an upcaster adds with a default are filled in, and
    /// only where missing: a changed value still shows.
    pub fn exported_payload(
        event_type: &str,
        schema_version: u16,
        payload: &mut serde_json::Value,
    ) {
        if let ("RaftPeerRemoved", 1, serde_json::Value::Object(m)) =
            (event_type, schema_version, payload)
        {
            m.entry("adapter")
                .or_insert_with(|| UNRECORDED_ADAPTER.into());
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
}

use v1::*;
use v2::*;

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
        } => bytes(&RaftPeerRemovedV2 {
            node_id: node_id.clone(),
            raft: (*raft).into(),
            already_gone: *already_gone,
            adapter: adapter.clone(),
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
        DomainEvent::TokenIssued(t) => bytes(&TokenIssuedV1 {
            token_id: t.token_id.clone(),
            principal: t.principal.clone(),
            secret_sha256: t.secret_sha256,
            policies: t.policies.clone(),
            expires_at: t.expires_at.map(|e| e.timestamp_micros()),
        }),
        DomainEvent::ReleaseRegistered(e) => bytes(e),
        DomainEvent::RunningReleaseSet(e) => bytes(e),
        DomainEvent::UpgradePlanned(e) => bytes(e),
        DomainEvent::UpgradeStateChanged(e) => bytes(e),
        DomainEvent::UpgradePrechecked(e) => bytes(e),
        DomainEvent::UpgradeNodeTurnStarted(e) => bytes(e),
        DomainEvent::UpgradeNodeReported(e) => bytes(e),
        DomainEvent::UpgradeBackupReported(e) => bytes(e),
        DomainEvent::UpgradeFailed(e) => bytes(e),
        DomainEvent::UpgradeCompleted(e) => bytes(e),
        DomainEvent::UpgradeRolledBack(e) => bytes(e),
        DomainEvent::UpgradeCanceled(e) | DomainEvent::UpgradeAcknowledged(e) => bytes(e),
        DomainEvent::TokenRevoked(e) => bytes(e),
        DomainEvent::PolicyCreated(e) => bytes(e),
        DomainEvent::PrincipalPoliciesSet(e) => bytes(e),
        DomainEvent::ResourcePolicySet(e) => bytes(e),
    };
    Encoded {
        event_type: event.event_type(),
        schema_version: schema_version(event),
        payload,
    }
}

/// The version `encode` writes of an event's type: the newest.
pub fn schema_version(event: &DomainEvent) -> u16 {
    match event {
        DomainEvent::MemberJoinFailed(_) | DomainEvent::RaftPeerRemoved { .. } => 2,
        _ => 1,
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
        ("RaftPeerRemoved", 1 | 2) => {
            let e: RaftPeerRemovedV2 = if v == 1 {
                upcast::raft_peer_removed_v1_to_v2(de(t, v, payload)?)
            } else {
                de(t, v, payload)?
            };
            DomainEvent::RaftPeerRemoved {
                node_id: e.node_id,
                raft: e.raft.into(),
                already_gone: e.already_gone,
                adapter: e.adapter,
            }
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
        ("TokenIssued", 1) => {
            let e: TokenIssuedV1 = de(t, v, payload)?;
            DomainEvent::TokenIssued(TokenIssued {
                token_id: e.token_id,
                principal: e.principal,
                secret_sha256: e.secret_sha256,
                policies: e.policies,
                expires_at: e.expires_at.map(crate::log::micros_to_time),
            })
        }
        ("ReleaseRegistered", 1) => DomainEvent::ReleaseRegistered(de(t, v, payload)?),
        ("RunningReleaseSet", 1) => DomainEvent::RunningReleaseSet(de(t, v, payload)?),
        ("UpgradePlanned", 1) => DomainEvent::UpgradePlanned(de(t, v, payload)?),
        ("UpgradeStateChanged", 1) => DomainEvent::UpgradeStateChanged(de(t, v, payload)?),
        ("UpgradePrechecked", 1) => DomainEvent::UpgradePrechecked(de(t, v, payload)?),
        ("UpgradeNodeTurnStarted", 1) => DomainEvent::UpgradeNodeTurnStarted(de(t, v, payload)?),
        ("UpgradeNodeReported", 1) => DomainEvent::UpgradeNodeReported(de(t, v, payload)?),
        ("UpgradeBackupReported", 1) => DomainEvent::UpgradeBackupReported(de(t, v, payload)?),
        ("UpgradeFailed", 1) => DomainEvent::UpgradeFailed(de(t, v, payload)?),
        ("UpgradeCompleted", 1) => DomainEvent::UpgradeCompleted(de(t, v, payload)?),
        ("UpgradeCanceled", 1) => DomainEvent::UpgradeCanceled(de(t, v, payload)?),
        ("UpgradeRolledBack", 1) => DomainEvent::UpgradeRolledBack(de(t, v, payload)?),
        ("UpgradeAcknowledged", 1) => DomainEvent::UpgradeAcknowledged(de(t, v, payload)?),
        ("TokenRevoked", 1) => DomainEvent::TokenRevoked(de(t, v, payload)?),
        ("PolicyCreated", 1) => DomainEvent::PolicyCreated(de(t, v, payload)?),
        ("PrincipalPoliciesSet", 1) => DomainEvent::PrincipalPoliciesSet(de(t, v, payload)?),
        ("ResourcePolicySet", 1) => DomainEvent::ResourcePolicySet(de(t, v, payload)?),
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
            | "MemberRemovalStarted"
            | "MemberDecommissioned"
            | "MemberUpdated"
            | "AppliedGenerationReported"
            | "JoinRequested"
            | "JoinRequestApproved"
            | "JoinRequestRejected",
            _,
        ) => return Err(DecodeError::UnknownVersion(t.to_owned(), v)),
        _ => return Err(DecodeError::UnknownType(t.to_owned())),
    };
    Ok(event)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn an_export_made_before_the_v2_upcast_reads_like_one_made_after() {
        let v1 = RaftPeerRemovedV1 {
            node_id: "n-1".into(),
            raft: RaftV1::Ovn,
            already_gone: false,
        };
        let today =
            serde_json::to_value(decode("RaftPeerRemoved", 1, &bytes(&v1)).unwrap()).unwrap();
        let mut before = today.clone();
        before.as_object_mut().unwrap().remove("adapter");
        upcast::exported_payload("RaftPeerRemoved", 1, &mut before);
        assert_eq!(before, today);
        // A value that was changed still shows as changed.
        let mut tampered = today.clone();
        tampered["adapter"] = "openbao-http".into();
        upcast::exported_payload("RaftPeerRemoved", 1, &mut tampered);
        assert_ne!(tampered, today);
        // Version 2 was exported with its adapter: nothing is filled in.
        let mut v2 = before.clone();
        v2.as_object_mut().unwrap().remove("adapter");
        upcast::exported_payload("RaftPeerRemoved", 2, &mut v2);
        assert!(v2.get("adapter").is_none());
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
}
