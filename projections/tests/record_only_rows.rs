//! A member's row holds its record-only removals only from the finalization
//! of the storage level that shows them: until then the previous build may
//! write the same rows, and they stay what it writes. Its record (what the
//! API answers) shows them always.

use stratum_domain::log::{EventMeta, Recorded, GENESIS_HASH};
use stratum_domain::membership::{MemberCommand, Raft, RECORD_ONLY_ADAPTER};
use stratum_domain::state::stream_of;
use stratum_domain::storage::Finalize;
use stratum_domain::stored::encode_at;
use stratum_domain::{Command, CommandContext};
use stratum_projections::ReadModels;

fn run(rm: &mut ReadModels, prev: &mut [u8; 32], cmd: Command) {
    let ctx = CommandContext {
        now: stratum_domain::testing::t0(),
        principal: "user/admin".into(),
        held_policies: None,
    };
    let decision = rm.state.decide(&cmd, &ctx).expect("decided");
    for event in decision.events {
        let stream_id = stream_of(&event);
        let enc = encode_at(&event, rm.state.storage.level).unwrap();
        let mut rec = Recorded {
            position: rm.state.position + 1,
            stream_version: rm.state.stream_version(&stream_id) + 1,
            stream_id,
            event_type: enc.event_type.to_owned(),
            schema_version: enc.schema_version,
            event_id: uuid::Uuid::from_u128(u128::from(rm.state.position)),
            occurred_at: ctx.now,
            meta: EventMeta {
                principal: ctx.principal.clone(),
                ..Default::default()
            },
            payload: enc.payload,
            prev_hash: [0; 32],
            hash: [0; 32],
        };
        rec.seal(*prev);
        *prev = rec.hash;
        rm.apply(&rec, &event);
    }
}

fn row_of(rm: &mut ReadModels, node: &str) -> Option<serde_json::Value> {
    rm.take_changes()
        .members
        .into_iter()
        .find(|r| r.node_id == node)
        .map(|r| serde_json::from_str(&r.doc).unwrap())
}

#[test]
fn record_only_removals_reach_the_rows_with_the_finalization() {
    let mut rm = ReadModels::default();
    let mut prev = GENESIS_HASH;
    let member = |c| Command::Member(c);
    run(
        &mut rm,
        &mut prev,
        member(MemberCommand::Admit {
            node_id: Some("n-1".into()),
            role: Some("hybrid".into()),
            mgmt_ip: Some("192.0.2.1".into()),
            bindings: Default::default(),
            labels: Default::default(),
        }),
    );
    run(
        &mut rm,
        &mut prev,
        member(MemberCommand::ReportJoinFailure {
            node_id: "n-1".into(),
            step: Some("join/raft-patroni".into()),
            error: Some("timed out".into()),
        }),
    );
    run(
        &mut rm,
        &mut prev,
        member(MemberCommand::RecordRaftRemoval {
            node_id: "n-1".into(),
            raft: Raft::Patroni,
            already_gone: false,
            adapter: RECORD_ONLY_ADAPTER.into(),
            leader_moved: false,
            settings: None,
        }),
    );
    let row = row_of(&mut rm, "n-1").expect("the removal changed the row");
    assert!(row.get("raftsRecordedOnly").is_none(), "{row}");
    // The record the API answers shows it.
    let record = stratum_projections::member_record(&rm.state.membership.members["n-1"], None);
    assert_eq!(record.rafts_recorded_only, vec![Raft::Patroni]);

    run(
        &mut rm,
        &mut prev,
        Command::Finalize(Finalize {
            level: None,
            settings: "5e".repeat(32),
            replicas: Vec::new(),
            unregistered: Vec::new(),
        }),
    );
    let row = row_of(&mut rm, "n-1").expect("the finalization wrote the row again");
    assert_eq!(row["raftsRecordedOnly"], serde_json::json!(["patroni"]));
}
