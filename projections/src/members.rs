//! The member read models: member records, the membership summary, peer
//! lists and transport admission (SPEC §4).

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use stratum_domain::event::StringMap;
use stratum_domain::membership::{JoinRequest, Member, MemberState, Membership, Raft, Role};

fn rfc3339(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A node's cluster membership.
///
/// Membership is the cluster's topology: every peer list a node renders
/// (Patroni, OpenBao and OVN raft peers, keepalived priorities, vmstorage
/// nodes, Alertmanager peers) is derived from the members in joining or
/// active, by a per-node reconciler, and every change bumps the membership
/// generation. Membership also decides transport access: the
/// node-transport listener refuses a peer that is not a member, even when
/// its certificate is valid and cluster-signed. Decommissioning a node IS
/// how you revoke it; there is no CRL. Records are never deleted, only
/// moved to decommissioned, so a refusal can say who revoked the node,
/// when, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"nodeId": "n-msst0002", "state": "joining", "role": "hybrid", "mgmtIp": "192.0.2.12"}))]
pub struct MemberRecord {
    pub node_id: String,
    /// joining: admitted and installing (already in every peer list);
    /// active; failed: a join that did not finish (out of every peer list,
    /// taken back out of every raft it reached); removing; decommissioned.
    #[schema(value_type = String, pattern = "^(joining|active|failed|removing|decommissioned)$")]
    pub state: MemberState,
    /// The node role: control, compute, storage or hybrid.
    #[schema(value_type = String, pattern = "^(control|compute|storage|hybrid)$")]
    pub role: Role,
    /// The management address every peer list names.
    pub mgmt_ip: String,
    /// Optional storage/overlay bindings, keyed by traffic class.
    pub bindings: StringMap,
    /// Declared labels; topology.rack is the rack.
    pub labels: StringMap,
    /// The declared rack (labels["topology.rack"]).
    pub rack: Option<String>,
    /// Orders every peer list and the keepalived priorities (1 = the founder).
    pub ordinal: u32,
    /// The membership generation this node reports it has rendered and
    /// applied (its own report). A member below the cluster's generation is
    /// lagging.
    pub applied_generation: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lagging: Option<bool>,
    pub join_step: Option<String>,
    #[schema(value_type = Vec<String>)]
    pub rafts_reached: Vec<Raft>,
    /// The join step a failed member stopped in.
    pub failed_step: Option<String>,
    /// The last error line of that step.
    pub failed_error: Option<String>,
    /// The rafts a cleanup still has to take the member out of.
    #[schema(value_type = Vec<String>)]
    pub raft_cleanup_pending: Vec<Raft>,
    /// When a failed member was taken back out of every raft it reached
    /// (each removal recorded; see `raftsRecordedOnly`).
    pub raft_cleanup_at: Option<String>,
    /// The rafts whose removal was recorded without calling the raft (the
    /// `record-only` adapter, where none was configured): in the record,
    /// not known to be out of the raft. Left out when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<String>)]
    pub rafts_recorded_only: Vec<Raft>,
    /// Why the node was decommissioned. Required when decommissioning.
    pub decommission_reason: Option<String>,
    /// Who decommissioned it: a user id, or stratum-installer for
    /// membership the install declared.
    pub decommissioned_by: Option<String>,
    /// When decommissioning began (the member went to removing).
    #[serde(default)]
    pub removal_started_at: Option<String>,
    pub decommissioned_at: Option<String>,
    pub join_request: Option<String>,
    pub admitted_by: String,
    pub admitted_at: String,
    pub updated_at: String,
    pub version: u64,
}

/// Renders a member; `generation` adds `lagging` against it.
pub fn member_record(m: &Member, generation: Option<u64>) -> MemberRecord {
    MemberRecord {
        node_id: m.node_id.clone(),
        state: m.state,
        role: m.role,
        mgmt_ip: m.mgmt_ip.clone(),
        bindings: m.bindings.clone(),
        labels: m.labels.clone(),
        rack: m.rack().map(str::to_owned),
        ordinal: m.ordinal,
        applied_generation: m.applied_generation,
        lagging: generation.map(|g| lagging(m.state, m.applied_generation, g)),
        join_step: m.join_step.clone(),
        rafts_reached: m.rafts_reached.iter().copied().collect(),
        failed_step: m.failed_step.clone(),
        failed_error: m.failed_error.clone(),
        // Failed and removing members, and demoted voters, still active.
        raft_cleanup_pending: m.pending_cleanup(),
        raft_cleanup_at: m.raft_cleanup_at.as_ref().map(rfc3339),
        rafts_recorded_only: m.rafts_recorded_only.iter().copied().collect(),
        decommission_reason: m.decommission_reason.clone(),
        decommissioned_by: m
            .decommissioned_by
            .clone()
            .or_else(|| m.removal_requested_by.clone()),
        removal_started_at: m.removal_started_at.as_ref().map(rfc3339),
        decommissioned_at: m.decommissioned_at.as_ref().map(rfc3339),
        join_request: m.join_request.clone(),
        admitted_by: m.admitted_by.clone(),
        admitted_at: rfc3339(&m.admitted_at),
        updated_at: rfc3339(&m.updated_at),
        version: m.version,
    }
}

pub use stratum_domain::membership::lagging;

/// Adds `lagging` to a stored member document.
pub fn with_lagging(mut doc: Value, generation: u64) -> Value {
    let state = doc
        .get("state")
        .and_then(Value::as_str)
        .and_then(MemberState::parse);
    let applied = doc
        .get("appliedGeneration")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if let (Some(state), Value::Object(map)) = (state, &mut doc) {
        map.insert(
            "lagging".into(),
            Value::Bool(lagging(state, applied, generation)),
        );
    }
    doc
}

/// A node's request to join, and its decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JoinRequestRecord {
    pub id: String,
    pub node_id: String,
    pub mgmt_ip: String,
    pub labels: StringMap,
    /// The facts the node reported with its request.
    #[schema(value_type = Object)]
    pub facts: Value,
    /// pending, approved or rejected.
    #[schema(value_type = String, pattern = "^(pending|approved|rejected)$")]
    pub status: stratum_domain::membership::JoinRequestStatus,
    pub reason: Option<String>,
    pub requested_by: String,
    pub requested_at: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub version: u64,
}

impl From<&JoinRequest> for JoinRequestRecord {
    fn from(r: &JoinRequest) -> Self {
        Self {
            id: r.request_id.clone(),
            node_id: r.node_id.clone(),
            mgmt_ip: r.mgmt_ip.clone(),
            labels: r.labels.clone(),
            facts: serde_json::from_str(&r.facts).unwrap_or(Value::Null),
            status: r.status,
            reason: r.reason.clone(),
            requested_by: r.requested_by.clone(),
            requested_at: rfc3339(&r.requested_at),
            decided_by: r.decided_by.clone(),
            decided_at: r.decided_at.as_ref().map(rfc3339),
            version: r.version,
        }
    }
}

/// `GET /cluster/membership`: the generation, members by state, who is
/// lagging, and the digest of the membership read model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MembershipSummary {
    /// The global position of the latest topology event.
    pub generation: u64,
    /// Members by state.
    #[schema(value_type = BTreeMap<String, u64>)]
    pub counts: BTreeMap<&'static str, usize>,
    /// The members below the cluster's generation.
    pub lagging: Vec<String>,
    /// SHA-256 of the membership read model (see [`membership_digest`]),
    /// which an auditor reproduces by replaying an export to the same
    /// position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// The digest of the membership read model: SHA-256 over a version tag, the
/// generation, and every member's stored document in node id order.
pub fn membership_digest<'a>(
    generation: u64,
    members: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(format!("stratum-membership-v1\ngeneration {generation}\n"));
    let mut sorted: Vec<(&str, &str)> = members.into_iter().collect();
    sorted.sort();
    for (node_id, doc) in sorted {
        h.update(node_id.as_bytes());
        h.update(b"\n");
        h.update(doc.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// The generation, the members counted by state, and the lagging ones, of
/// an in-memory membership (the digest is [`ReadModels::membership_digest`],
/// left out here).
///
/// [`ReadModels::membership_digest`]: crate::ReadModels::membership_digest
pub fn membership_summary(m: &Membership) -> MembershipSummary {
    let mut counts: BTreeMap<&'static str, usize> =
        MemberState::ALL.iter().map(|s| (s.as_str(), 0)).collect();
    let mut lagging_ids = Vec::new();
    // In node id order: the map's.
    for member in m.members.values() {
        *counts.entry(member.state.as_str()).or_default() += 1;
        if lagging(member.state, member.applied_generation, m.generation) {
            lagging_ids.push(member.node_id.clone());
        }
    }
    MembershipSummary {
        generation: m.generation,
        counts,
        lagging: lagging_ids,
        digest: None,
    }
}

/// Renders every member of an in-memory membership, ordered by node id.
pub fn member_records(m: &Membership) -> Vec<MemberRecord> {
    m.members
        .values()
        .map(|member| member_record(member, Some(m.generation)))
        .collect()
}

/// One peer of a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Peer {
    pub node_id: String,
    pub address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
}

/// The lists every node renders (SPEC §4, peer lists).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Peers {
    pub generation: u64,
    pub patroni: Vec<Peer>,
    pub openbao: Vec<Peer>,
    pub ovn: Vec<Peer>,
    pub keepalived: Vec<Peer>,
    pub vmstorage: Vec<Peer>,
    pub alertmanager: Vec<Peer>,
}

/// The peer lists of a membership: its members in joining or active,
/// ordered by ordinal. Read straight from the members, not from their
/// records: every node agent asks for them after each change, and a
/// record renders every field of a member (its labels, its bindings, its
/// times as text) where the lists want four.
pub fn peers(m: &Membership) -> Peers {
    let mut listed: Vec<&Member> = m
        .members
        .values()
        .filter(|member| member.state.in_peer_lists())
        .collect();
    listed.sort_by_key(|member| member.ordinal);
    let list = |pick: fn(Role) -> bool| -> Vec<Peer> {
        listed
            .iter()
            .filter(|member| pick(member.role))
            .map(|member| Peer {
                node_id: member.node_id.clone(),
                address: member.mgmt_ip.clone(),
                priority: None,
            })
            .collect()
    };
    let voters = list(Role::is_voter);
    let keepalived = voters
        .iter()
        .enumerate()
        .map(|(rank, p)| Peer {
            priority: Some(254 - rank.min(253) as u32),
            ..p.clone()
        })
        .collect();
    Peers {
        generation: m.generation,
        patroni: voters.clone(),
        openbao: voters.clone(),
        ovn: voters.clone(),
        keepalived,
        vmstorage: list(Role::is_storage),
        alertmanager: voters,
    }
}

/// Why the node transport refuses a peer: the decommission reason as
/// recorded, who revoked it and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub reason: String,
    pub revoked_by: Option<String>,
    pub revoked_at: Option<String>,
}

/// Whether the node-transport listener may accept this peer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    pub node_id: String,
    pub admitted: bool,
    /// The member's state; null for a node that is no member.
    #[schema(value_type = Option<String>)]
    pub state: Option<MemberState>,
    pub generation: u64,
    pub refusal: Option<Refusal>,
}

/// Whether the node transport may accept `node_id`: only joining and active
/// members are admitted; a certificate is never enough.
pub fn transport_admission(
    node_id: &str,
    member: Option<&MemberRecord>,
    generation: u64,
) -> Admission {
    let refusal = match member {
        None => Some(Refusal {
            reason: "not a member of this cluster".into(),
            revoked_by: None,
            revoked_at: None,
        }),
        Some(m) if m.state.in_peer_lists() => None,
        Some(m) => Some(match m.state {
            MemberState::Decommissioned | MemberState::Removing => Refusal {
                // The reason as recorded, with nothing added: state says
                // whether decommissioning has finished.
                reason: m.decommission_reason.clone().unwrap_or_default(),
                // Revoked the moment decommissioning began.
                revoked_by: m.decommissioned_by.clone(),
                revoked_at: m
                    .removal_started_at
                    .clone()
                    .or_else(|| m.decommissioned_at.clone()),
            },
            _ => Refusal {
                reason: format!(
                    "join failed at {}: {}",
                    m.failed_step.clone().unwrap_or_default(),
                    m.failed_error.clone().unwrap_or_default()
                ),
                revoked_by: None,
                revoked_at: None,
            },
        }),
    };
    Admission {
        node_id: node_id.to_owned(),
        admitted: refusal.is_none(),
        state: member.map(|m| m.state),
        generation,
        refusal,
    }
}
