//! Version 1 of the stored membership types: roles, rafts, the member
//! lifecycle and join requests. Frozen: see [`super`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::membership::{Raft, Role};

// ------------------------------------------------------------ membership

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoleV1 {
    Control,
    Compute,
    Storage,
    Hybrid,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
#[serde(rename_all = "camelCase")]
pub struct RaftPeerRemovedV1 {
    pub node_id: String,
    pub raft: RaftV1,
    pub already_gone: bool,
}

/// Written from the start with the removal it undoes; its instant is
/// microseconds since the epoch, as every v1 instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RaftPeerReturnedV1 {
    pub node_id: String,
    pub raft: RaftV1,
    pub removed_position: u64,
    pub removed_at: i64,
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
