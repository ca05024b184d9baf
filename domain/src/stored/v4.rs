//! Version 4 of the stored types that changed since version 3. Frozen like
//! [`super::v1`], [`super::v2`] and [`super::v3`]: a later change is a `V5`
//! type and an upcaster.

use serde::{Deserialize, Serialize};

use super::v1::RaftV1;

/// `RaftPeerRemoved` v4 names the digest of the process-manager settings
/// the removal was made with (storage level 2). v3 did not; its removals
/// are read as `settings: None`. Until the log is finalized at level 2 a
/// build writes v3, which every replica of the previous build reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RaftPeerRemovedV4 {
    pub node_id: String,
    pub raft: RaftV1,
    pub already_gone: bool,
    pub adapter: String,
    pub leader_moved: bool,
    pub settings: Option<String>,
}
