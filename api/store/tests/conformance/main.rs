//! The store's conformance: every method of [`EventStore`] and [`WriteTx`]
//! behaves the same on SQLite and on PostgreSQL. Each test runs on a fresh
//! database of every backend that answers (`STRATUM_REQUIRE_POSTGRES=1`
//! makes a missing PostgreSQL a failure).

mod opening;
mod reads;
mod rows;
mod verify;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection;

use stratum_domain::log::{ChainVerifier, EventMeta, Recorded, Verification};
use stratum_projections::{doc_kind, Changes, DocRow, JoinRequestRow, MemberRow, TokenRow};
use stratum_store::testing::{append_to_stream, each_backend, seal, tamper, NewEvent, TestDb};
use stratum_store::{
    connect, connect_as, export_chunk, verify_chain, Access, EventStore, Head, IdempotencyRecord,
    StoreError, StoredReadModels, SNAPSHOTS_NEWEST, SNAPSHOT_SPACING,
};

fn event(n: u8) -> NewEvent {
    NewEvent {
        event_type: "MemberJoinCompleted".into(),
        schema_version: 1,
        event_id: uuid::Uuid::from_u128(0x1000 + u128::from(n)),
        occurred_at: chrono::DateTime::from_timestamp(1_700_000_000 + i64::from(n), 0).unwrap(),
        meta: EventMeta {
            principal: format!("user/u{n}"),
            request_id: Some(format!("req-{n}")),
            causation: (n > 1).then_some(u64::from(n) - 1),
            correlation: Some("corr".into()),
            client_request_id: None,
        },
        payload: vec![n; 8],
    }
}

async fn open(db: &TestDb) -> Arc<dyn EventStore> {
    connect(&db.url).await.unwrap()
}

/// Appends `n` events to `stream` through one write, as the write path does.
async fn append(s: &dyn EventStore, stream: &str, first: u8, n: u8) -> Vec<Recorded> {
    let version = s.read_stream(stream).await.unwrap().len() as u64;
    append_to_stream(s, stream, version, (first..first + n).map(event).collect())
        .await
        .unwrap()
}

fn member(node: &str, version: u64) -> MemberRow {
    MemberRow {
        node_id: node.into(),
        state: "active",
        role: "compute",
        rack: Some("r1".into()),
        ordinal: 1,
        version,
        doc: format!(r#"{{"nodeId":"{node}","version":{version}}}"#),
    }
}

fn rows(version: u64, generation: Option<u64>) -> Changes {
    Changes {
        members: vec![member("n-1", version), member("n-2", version)],
        join_requests: vec![JoinRequestRow {
            request_id: "jr-1".into(),
            status: "pending",
            version,
            doc: format!(r#"{{"id":"jr-1","v":{version}}}"#),
        }],
        tokens: vec![TokenRow {
            token_id: "tok-1".into(),
            secret_sha256: Some([7; 32]),
            secret_argon2id: None,
            principal: "user/ops".into(),
            policies: r#"["admin"]"#.into(),
            expires_at: None,
            revoked_at: None,
            doc: format!(r#"{{"id":"tok-1","v":{version}}}"#),
        }],
        docs: vec![DocRow {
            kind: doc_kind::UPGRADE,
            id: "up-1".into(),
            sort_key: 1,
            doc: format!(r#"{{"id":"up-1","v":{version}}}"#),
        }],
        generation,
        removed: vec![],
    }
}

/// The first event and [`rows`] at version 1, in one write.
async fn write_first(s: &dyn EventStore) {
    let mut tx = s.begin_write().await.unwrap();
    let recs = seal(tx.head(), "member/n-1", 0, vec![event(1)]);
    tx.append(&recs).await.unwrap();
    tx.write_changes(&rows(1, Some(1)), 1).await.unwrap();
    tx.commit().await.unwrap();
}

fn idem(principal: &str, key: &str, position: u64) -> IdempotencyRecord {
    IdempotencyRecord {
        principal: principal.into(),
        key: key.into(),
        request_hash: vec![1, 2, 3],
        status: 201,
        body: r#"{"ok":true}"#.into(),
        etag: Some(position),
        position,
    }
}
