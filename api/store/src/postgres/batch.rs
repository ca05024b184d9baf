//! What a PostgreSQL write appends and changes, kept until it runs as one
//! statement: one data-modifying CTE per table, each inserting from
//! arrays (`UNNEST`), so a batch is one round trip whatever it holds, one
//! statement text prepared once per connection. With the round trip that
//! begins the write and takes the lock, and the one that commits, a batch
//! is three round trips (it was one per table besides).

use std::sync::LazyLock;

use sqlx::PgConnection;
use stratum_domain::log::Recorded;
use stratum_domain::tree::TreeRow;
use stratum_projections::Changes;

use crate::{IdempotencyRecord, StoreResult};

/// Every table a write inserts into, each from arrays; an empty array
/// inserts nothing. Each read-model row gets this build's projection
/// version for its kind, written into the text.
static WRITE: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            "WITH e AS (INSERT INTO events (",
            event_columns!(),
            ") SELECT * FROM UNNEST($1::int8[], $2::text[], $3::int8[], $4::text[], $5::int8[], \
             $6::text[], $7::int8[], $8::text[], $9::text[], $10::int8[], $11::text[], $12::bytea[], \
             $13::bytea[], $14::bytea[], $15::text[])), \
             t AS (INSERT INTO log_tree (level, idx, hash) \
             SELECT * FROM UNNEST($16::int8[], $17::int8[], $18::bytea[])), \
             m AS (INSERT INTO rm_members (node_id, state, role, rack, ordinal, version, doc, \
             projection_version) SELECT *, {m} FROM UNNEST($19::text[], $20::text[], $21::text[], \
             $22::text[], $23::int8[], $24::int8[], $25::text[])",
            members_on_conflict!(),
            "), j AS (INSERT INTO rm_join_requests (request_id, status, version, doc, \
             projection_version) SELECT *, {j} FROM UNNEST($26::text[], $27::text[], $28::int8[], \
             $29::text[])",
            join_requests_on_conflict!(),
            "), k AS (INSERT INTO rm_tokens (token_id, secret_sha256, secret_argon2id, principal, \
             policies, expires_at, revoked_at, doc, projection_version) SELECT *, {k} FROM \
             UNNEST($30::text[], $31::bytea[], $32::text[], $33::text[], $34::text[], $35::int8[], \
             $36::int8[], $37::text[])",
            tokens_on_conflict!(),
            "), d AS (INSERT INTO rm_docs (kind, id, sort_key, doc, projection_version) \
             SELECT u.*, {d} FROM UNNEST($38::text[], $39::text[], $40::int8[], $41::text[]) \
             AS u (kind, id, sort_key, doc)",
            docs_on_conflict!(),
            "), i AS (INSERT INTO idempotency (principal, idem_key, request_hash, status, body, \
             etag, position) SELECT * FROM UNNEST($42::text[], $43::text[], $44::bytea[], \
             $45::int8[], $46::text[], $47::int8[], $48::int8[])) SELECT 1"
        ),
        m = crate::sql::pv("member"),
        j = crate::sql::pv("join-request"),
        k = crate::sql::pv("token"),
        d = crate::sql::doc_pv("u.kind"),
    )
});

/// The rows a write has not sent yet. Each kind holds one call's rows: a
/// second call of a kind sends what is kept first, so no statement
/// upserts one key twice.
#[derive(Default)]
pub(super) struct Pending {
    events: Vec<Recorded>,
    tree: Vec<TreeRow>,
    changes: Option<Changes>,
    idempotency: Vec<IdempotencyRecord>,
}

impl Pending {
    pub(super) fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.tree.is_empty()
            && self.changes.is_none()
            && self.idempotency.is_empty()
    }

    /// Whether rows of `events`, `tree` rows, changes or records must go
    /// out before more of the same kind are kept.
    pub(super) fn holds_events(&self) -> bool {
        !self.events.is_empty() || !self.tree.is_empty()
    }

    pub(super) fn holds_changes(&self) -> bool {
        self.changes.is_some()
    }

    pub(super) fn holds_idempotency(&self) -> bool {
        !self.idempotency.is_empty()
    }

    pub(super) fn keep_events(&mut self, events: &[Recorded], tree: Vec<TreeRow>) {
        self.events = events.to_vec();
        self.tree = tree;
    }

    pub(super) fn keep_changes(&mut self, changes: &Changes) {
        self.changes = Some(changes.clone());
    }

    pub(super) fn keep_idempotency(&mut self, records: &[IdempotencyRecord]) {
        self.idempotency = records.to_vec();
    }

    /// Sends what is kept, as one statement, and forgets it.
    pub(super) async fn send(&mut self, c: &mut PgConnection) -> StoreResult<()> {
        if self.is_empty() {
            return Ok(());
        }
        let p = std::mem::take(self);
        let e = &p.events;
        let changes = p.changes.unwrap_or_default();
        let (m, j, k, d, i) = (
            &changes.members,
            &changes.join_requests,
            &changes.tokens,
            &changes.docs,
            &p.idempotency,
        );
        let tree = &p.tree;
        sqlx::query(WRITE.as_str())
            .bind(e.iter().map(|e| e.position as i64).collect::<Vec<_>>())
            .bind(e.iter().map(|e| e.stream_id.as_str()).collect::<Vec<_>>())
            .bind(
                e.iter()
                    .map(|e| e.stream_version as i64)
                    .collect::<Vec<_>>(),
            )
            .bind(e.iter().map(|e| e.event_type.as_str()).collect::<Vec<_>>())
            .bind(
                e.iter()
                    .map(|e| i64::from(e.schema_version))
                    .collect::<Vec<_>>(),
            )
            .bind(e.iter().map(|e| e.event_id.to_string()).collect::<Vec<_>>())
            .bind(
                e.iter()
                    .map(|e| e.occurred_at.timestamp_micros())
                    .collect::<Vec<_>>(),
            )
            .bind(
                e.iter()
                    .map(|e| e.meta.principal.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(
                e.iter()
                    .map(|e| e.meta.request_id.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(
                e.iter()
                    .map(|e| e.meta.causation.map(|c| c as i64))
                    .collect::<Vec<_>>(),
            )
            .bind(
                e.iter()
                    .map(|e| e.meta.correlation.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(e.iter().map(|e| e.payload.as_slice()).collect::<Vec<_>>())
            .bind(e.iter().map(|e| e.prev_hash.as_slice()).collect::<Vec<_>>())
            .bind(e.iter().map(|e| e.hash.as_slice()).collect::<Vec<_>>())
            .bind(
                e.iter()
                    .map(|e| e.meta.client_request_id.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(tree.iter().map(|r| i64::from(r.level)).collect::<Vec<_>>())
            .bind(tree.iter().map(|r| r.index as i64).collect::<Vec<_>>())
            .bind(tree.iter().map(|r| r.hash.as_slice()).collect::<Vec<_>>())
            .bind(m.iter().map(|r| r.node_id.as_str()).collect::<Vec<_>>())
            .bind(m.iter().map(|r| r.state).collect::<Vec<_>>())
            .bind(m.iter().map(|r| r.role).collect::<Vec<_>>())
            .bind(m.iter().map(|r| r.rack.as_deref()).collect::<Vec<_>>())
            .bind(m.iter().map(|r| i64::from(r.ordinal)).collect::<Vec<_>>())
            .bind(m.iter().map(|r| r.version as i64).collect::<Vec<_>>())
            .bind(m.iter().map(|r| r.doc.as_str()).collect::<Vec<_>>())
            .bind(j.iter().map(|r| r.request_id.as_str()).collect::<Vec<_>>())
            .bind(j.iter().map(|r| r.status).collect::<Vec<_>>())
            .bind(j.iter().map(|r| r.version as i64).collect::<Vec<_>>())
            .bind(j.iter().map(|r| r.doc.as_str()).collect::<Vec<_>>())
            .bind(k.iter().map(|r| r.token_id.as_str()).collect::<Vec<_>>())
            .bind(
                k.iter()
                    .map(|r| r.secret_sha256.as_ref().map(|h| h.as_slice()))
                    .collect::<Vec<_>>(),
            )
            .bind(
                k.iter()
                    .map(|r| r.secret_argon2id.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(k.iter().map(|r| r.principal.as_str()).collect::<Vec<_>>())
            .bind(k.iter().map(|r| r.policies.as_str()).collect::<Vec<_>>())
            .bind(k.iter().map(|r| r.expires_at).collect::<Vec<_>>())
            .bind(k.iter().map(|r| r.revoked_at).collect::<Vec<_>>())
            .bind(k.iter().map(|r| r.doc.as_str()).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.kind).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.id.as_str()).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.sort_key).collect::<Vec<_>>())
            .bind(d.iter().map(|r| r.doc.as_str()).collect::<Vec<_>>())
            .bind(i.iter().map(|r| r.principal.as_str()).collect::<Vec<_>>())
            .bind(i.iter().map(|r| r.key.as_str()).collect::<Vec<_>>())
            .bind(
                i.iter()
                    .map(|r| r.request_hash.as_slice())
                    .collect::<Vec<_>>(),
            )
            .bind(i.iter().map(|r| i64::from(r.status)).collect::<Vec<_>>())
            .bind(i.iter().map(|r| r.body.as_str()).collect::<Vec<_>>())
            .bind(
                i.iter()
                    .map(|r| r.etag.map(|e| e as i64))
                    .collect::<Vec<_>>(),
            )
            .bind(i.iter().map(|r| r.position as i64).collect::<Vec<_>>())
            .execute(c)
            .await?;
        Ok(())
    }
}
