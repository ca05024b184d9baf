//! Version 3 of the stored types that changed since version 2. Frozen like
//! [`super::v1`] and [`super::v2`]: a later change is a `V4` type and an
//! upcaster.

use serde::{Deserialize, Serialize};

use super::v1::RaftV1;

/// `RaftPeerRemoved` v3 says whether the peer led the raft, so that
/// leadership had to move off it before it could be removed. v2 did not
/// say; its removals are read as `leader_moved: false`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RaftPeerRemovedV3 {
    pub node_id: String,
    pub raft: RaftV1,
    pub already_gone: bool,
    pub adapter: String,
    pub leader_moved: bool,
}
