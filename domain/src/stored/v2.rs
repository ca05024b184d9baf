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
