//! Upcasters: each turns a version into the next, small and separately
//! tested, so old bytes reach the newest shape step by step.

use super::{v1, v2};

/// What a v1 removal says of its adapter: it did not record one.
pub const UNRECORDED_ADAPTER: &str = "unrecorded";

/// An export keeps each payload as JSON, as the service decoded it on
/// the day of the export. An export made before an upcast added a field
/// lacks it; this adds what the upcasters add to an event stored at
/// `schema_version`, so old and new exports of the same bytes read the
/// same. Only fields an upcaster adds with a default are filled in, and
/// only where missing: a changed value still shows.
pub fn exported_payload(event_type: &str, schema_version: u16, payload: &mut serde_json::Value) {
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
