//! What a PostgreSQL write appends and changes, kept until it runs as one
//! statement: one data-modifying CTE per table, each inserting from
//! arrays (`UNNEST`), so a batch is one round trip whatever it holds, one
//! statement text prepared once per connection. Inside a transaction
//! begun under the lock ([`WRITE`]), a batch is three round trips with
//! the begin and the commit; a write begun at a head sends it as a
//! statement of its own ([`WRITE_AT`]), which checks the head, writes and
//! commits in one round trip.

use std::sync::LazyLock;

use sqlx::postgres::PgArguments;
use sqlx::{PgConnection, Postgres};
use stratum_domain::log::Recorded;
use stratum_domain::tree::TreeRow;
use stratum_projections::Changes;

use super::NOTIFY_CHANNEL;
use crate::{Head, IdempotencyRecord, StoreResult};

type PgQuery<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// Every table a write inserts into, each from arrays; an empty array
/// inserts nothing. Each read-model row gets this build's projection
/// version for its kind, written into the text. Sent inside a transaction
/// that holds the log's lock.
static WRITE: LazyLock<String> = LazyLock::new(|| write_text(false));

/// [`WRITE`] as a statement of its own (its own transaction), for a write
/// begun without the lock: `h` moves the head only where it still is where
/// the writer expects ($49, $50), to $51 and $52, locking its row; every
/// insert and the cluster row ($53 whether to set it, $54, $55) wait on
/// `h` and write nothing when it moved nothing. It returns one row, with
/// the commit announced, only when it wrote.
static WRITE_AT: LazyLock<String> = LazyLock::new(|| write_text(true));

fn write_text(at: bool) -> String {
    let (head, gate, tail) = if at {
        (
            "h AS (UPDATE log_head SET position = $51, hash = $52 WHERE id = 1 AND position = $49 \
             AND hash = $50 RETURNING position), "
                .to_owned(),
            " WHERE EXISTS (SELECT 1 FROM h)",
            format!(
                "), c AS (UPDATE rm_cluster SET generation = COALESCE($54, generation), \
                 checkpoint = $55 WHERE id = 1 AND $53 AND EXISTS (SELECT 1 FROM h)) \
                 SELECT pg_notify('{NOTIFY_CHANNEL}', position::text) FROM h"
            ),
        )
    } else {
        (String::new(), "", ") SELECT 1".to_owned())
    };
    let e = unnest(
        1,
        &[
            "int8", "text", "int8", "text", "int8", "text", "int8", "text", "text", "int8", "text",
            "bytea", "bytea", "bytea", "text",
        ],
    );
    let t = unnest(16, &["int8", "int8", "bytea"]);
    let m = unnest(
        19,
        &["text", "text", "text", "text", "int8", "int8", "text"],
    );
    let j = unnest(26, &["text", "text", "int8", "text"]);
    let k = unnest(
        30,
        &[
            "text", "bytea", "text", "text", "text", "int8", "int8", "text",
        ],
    );
    let d = unnest(38, &["text", "text", "int8", "text"]);
    let i = unnest(
        42,
        &["text", "text", "bytea", "int8", "text", "int8", "int8"],
    );
    format!(
        concat!(
            "WITH {head}e AS (INSERT INTO events (",
            event_columns!(),
            ") SELECT {e}{gate}), \
             t AS (INSERT INTO log_tree (level, idx, hash) SELECT {t}{gate}), \
             m AS (INSERT INTO rm_members (node_id, state, role, rack, ordinal, version, doc, \
             projection_version) SELECT {m}, {mv}{gate}",
            members_on_conflict!(),
            "), j AS (INSERT INTO rm_join_requests (request_id, status, version, doc, \
             projection_version) SELECT {j}, {jv}{gate}",
            join_requests_on_conflict!(),
            "), k AS (INSERT INTO rm_tokens (token_id, secret_sha256, secret_argon2id, principal, \
             policies, expires_at, revoked_at, doc, projection_version) SELECT {k}, {kv}{gate}",
            tokens_on_conflict!(),
            "), d AS (INSERT INTO rm_docs (kind, id, sort_key, doc, projection_version) \
             SELECT u.*, {dv} FROM (SELECT {d}{gate}) AS u (kind, id, sort_key, doc)",
            docs_on_conflict!(),
            "), i AS (INSERT INTO idempotency (principal, idem_key, request_hash, status, body, \
             etag, position) SELECT {i}{gate}{tail}"
        ),
        head = head,
        gate = gate,
        tail = tail,
        e = e,
        t = t,
        m = m,
        j = j,
        k = k,
        d = d,
        i = i,
        mv = crate::sql::pv("member"),
        jv = crate::sql::pv("join-request"),
        kv = crate::sql::pv("token"),
        dv = crate::sql::doc_pv("u.kind"),
    )
}

/// One `UNNEST` per array parameter, from `$first` on, each of the given
/// element type: set-returning functions in a select list, which
/// PostgreSQL runs in step, a row at a time, where `FROM UNNEST(...)`
/// would first copy every row into a tuple store.
fn unnest(first: usize, types: &[&str]) -> String {
    types
        .iter()
        .enumerate()
        .map(|(n, t)| format!("UNNEST(${}::{t}[])", first + n))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rows a write has not sent yet. Each kind holds one call's rows: a
/// second call of a kind sends what is kept first, so no statement
/// upserts one key twice.
#[derive(Default)]
pub(super) struct Pending {
    events: Vec<Recorded>,
    tree: Vec<TreeRow>,
    changes: Changes,
    /// Whether `changes` holds a call's changes (they may be empty).
    changed: bool,
    idempotency: Vec<IdempotencyRecord>,
}

impl Pending {
    pub(super) fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.tree.is_empty()
            && !self.changed
            && self.idempotency.is_empty()
    }

    /// Whether rows of `events`, `tree` rows, changes or records must go
    /// out before more of the same kind are kept.
    pub(super) fn holds_events(&self) -> bool {
        !self.events.is_empty() || !self.tree.is_empty()
    }

    pub(super) fn holds_changes(&self) -> bool {
        self.changed
    }

    pub(super) fn holds_idempotency(&self) -> bool {
        !self.idempotency.is_empty()
    }

    pub(super) fn keep_events(&mut self, events: &[Recorded], tree: Vec<TreeRow>) {
        self.events = events.to_vec();
        self.tree = tree;
    }

    pub(super) fn keep_changes(&mut self, changes: &Changes) {
        self.changes = changes.clone();
        self.changed = true;
    }

    pub(super) fn keep_idempotency(&mut self, records: &[IdempotencyRecord]) {
        self.idempotency = records.to_vec();
    }

    /// Sends what is kept, as one statement inside the write's
    /// transaction, and forgets it.
    pub(super) async fn send(&mut self, c: &mut PgConnection) -> StoreResult<()> {
        if self.is_empty() {
            return Ok(());
        }
        let p = std::mem::take(self);
        p.bind(sqlx::query(WRITE.as_str())).execute(c).await?;
        Ok(())
    }

    /// Sends what is kept as one statement in its own transaction, which
    /// moves the head from `expected` to `head` (and the cluster row to
    /// `cluster`) and writes the rows only where the head was still
    /// `expected`: whether it wrote.
    pub(super) async fn send_at(
        self,
        c: &mut PgConnection,
        expected: Head,
        head: Head,
        cluster: Option<(Option<u64>, u64)>,
    ) -> Result<bool, sqlx::Error> {
        let (generation, checkpoint) = cluster.unwrap_or_default();
        let written = self
            .bind(sqlx::query(WRITE_AT.as_str()))
            .bind(expected.position as i64)
            .bind(expected.hash.as_slice())
            .bind(head.position as i64)
            .bind(head.hash.as_slice())
            .bind(cluster.is_some())
            .bind(generation.map(|g| g as i64))
            .bind(checkpoint as i64)
            .fetch_optional(c)
            .await?;
        Ok(written.is_some())
    }

    /// Binds the kept rows: `$1` to `$48` of both statements.
    fn bind<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        let e = &self.events;
        let (m, j, k, d, i) = (
            &self.changes.members,
            &self.changes.join_requests,
            &self.changes.tokens,
            &self.changes.docs,
            &self.idempotency,
        );
        let tree = &self.tree;
        q.bind(e.iter().map(|e| e.position as i64).collect::<Vec<_>>())
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
    }
}
