//! What a PostgreSQL write appends and changes, kept until it runs as one
//! statement: one data-modifying CTE per table, each inserting from
//! arrays (`UNNEST`), so a batch is one round trip whatever it holds; a
//! statement names only the tables its rows go into, each text prepared
//! once per connection ([`write_text`]). Inside a transaction begun under
//! the lock, a batch is three round trips with the begin and the commit;
//! a write begun at a head sends it as a statement of its own, which
//! checks the head, writes and commits in one round trip.

use std::sync::OnceLock;

use sqlx::postgres::PgArguments;
use sqlx::{PgConnection, Postgres};
use stratum_domain::log::Recorded;
use stratum_domain::tree::TreeRow;
use stratum_projections::Changes;

use super::NOTIFY_CHANNEL;
use crate::{Head, IdempotencyRecord, StoreResult};

type PgQuery<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// The tables a write inserts into, one bit each, in the statement's
/// order: a statement names only the tables its write has rows for.
const EVENTS: u8 = 1;
const TREE: u8 = 2;
const MEMBERS: u8 = 4;
const JOIN_REQUESTS: u8 = 8;
const TOKENS: u8 = 16;
const DOCS: u8 = 32;
const IDEMPOTENCY: u8 = 64;
/// The bit of a statement of its own ([`write_text`]'s `at`).
const AT: u8 = 128;

/// The element types of each table's arrays, in the order they are bound
/// ([`Pending::bind`]).
const EVENT_ARRAYS: &[&str] = &[
    "int8", "text", "int8", "text", "int8", "text", "int8", "text", "text", "int8", "text",
    "bytea", "bytea", "bytea", "text",
];
const TREE_ARRAYS: &[&str] = &["int8", "int8", "bytea"];
const MEMBER_ARRAYS: &[&str] = &["text", "text", "text", "text", "int8", "int8", "text"];
const JOIN_REQUEST_ARRAYS: &[&str] = &["text", "text", "int8", "text"];
const TOKEN_ARRAYS: &[&str] = &[
    "text", "bytea", "text", "text", "text", "int8", "int8", "text",
];
const DOC_ARRAYS: &[&str] = &["text", "text", "int8", "text"];
const IDEMPOTENCY_ARRAYS: &[&str] = &["text", "text", "bytea", "int8", "text", "int8", "int8"];
/// The head's parameters of a statement of its own, before the arrays.
const HEAD_PARAMETERS: usize = 7;

/// Each statement text, made the first time a write needs it: a few
/// sets of tables occur (a command's event and its member row, with a
/// tree row now and then), so a connection prepares a few texts, and
/// PostgreSQL starts no plan for a table a write leaves alone.
static TEXTS: [OnceLock<String>; 256] = [const { OnceLock::new() }; 256];

fn text(at: bool, tables: u8) -> &'static str {
    let key = tables | if at { AT } else { 0 };
    TEXTS[usize::from(key)].get_or_init(|| write_text(at, tables))
}

/// The statement that inserts into `tables`, each from arrays, each
/// read-model row with this build's projection version for its kind,
/// written into the text.
///
/// Without `at`, it is sent inside a transaction that holds the log's
/// lock, and its arrays are `$1` on. With `at`, it is a statement of its
/// own (its own transaction), for a write begun without the lock: `h`
/// moves the head only where it still is where the writer expects (`$1`,
/// `$2`), to `$3` and `$4`, locking its row; every insert and the cluster
/// row (`$5` whether to set it, `$6`, `$7`) wait on `h` and write nothing
/// when it moved nothing; the arrays are `$8` on. It returns one row,
/// with the commit announced, only when it wrote.
fn write_text(at: bool, tables: u8) -> String {
    let gate = if at {
        " WHERE EXISTS (SELECT 1 FROM h)"
    } else {
        ""
    };
    let mut ctes = Vec::new();
    let mut taken = 0;
    if at {
        ctes.push(
            "h AS (UPDATE log_head SET position = $3, hash = $4 WHERE id = 1 AND position = $1 \
             AND hash = $2 RETURNING position)"
                .to_owned(),
        );
        taken = HEAD_PARAMETERS;
    }
    let mut arrays = |types: &[&str]| {
        let list = unnest(taken + 1, types);
        taken += types.len();
        list
    };
    if tables & EVENTS != 0 {
        let e = arrays(EVENT_ARRAYS);
        ctes.push(format!(
            concat!(
                "e AS (INSERT INTO events (",
                event_columns!(),
                ") SELECT {e}{gate})"
            ),
            e = e,
            gate = gate
        ));
    }
    if tables & TREE != 0 {
        let t = arrays(TREE_ARRAYS);
        ctes.push(format!(
            "t AS (INSERT INTO log_tree (level, idx, hash) SELECT {t}{gate})"
        ));
    }
    // The read models' rows, each upserted with this build's projection
    // version for its kind.
    let upserts = [
        (
            MEMBERS,
            MEMBER_ARRAYS,
            "m AS (INSERT INTO rm_members (node_id, state, role, rack, ordinal, version, doc, \
             projection_version)",
            "member",
            members_on_conflict!(),
        ),
        (
            JOIN_REQUESTS,
            JOIN_REQUEST_ARRAYS,
            "j AS (INSERT INTO rm_join_requests (request_id, status, version, doc, \
             projection_version)",
            "join-request",
            join_requests_on_conflict!(),
        ),
        (
            TOKENS,
            TOKEN_ARRAYS,
            "k AS (INSERT INTO rm_tokens (token_id, secret_sha256, secret_argon2id, principal, \
             policies, expires_at, revoked_at, doc, projection_version)",
            "token",
            tokens_on_conflict!(),
        ),
    ];
    for (table, types, insert, kind, on_conflict) in upserts {
        if tables & table != 0 {
            let rows = arrays(types);
            let v = crate::sql::pv(kind);
            ctes.push(format!("{insert} SELECT {rows}, {v}{gate}{on_conflict})"));
        }
    }
    if tables & DOCS != 0 {
        let d = arrays(DOC_ARRAYS);
        ctes.push(format!(
            concat!(
                "d AS (INSERT INTO rm_docs (kind, id, sort_key, doc, projection_version) \
                 SELECT u.*, {v} FROM (SELECT {d}{gate}) AS u (kind, id, sort_key, doc)",
                docs_on_conflict!(),
                ")"
            ),
            d = d,
            v = crate::sql::doc_pv("u.kind"),
            gate = gate
        ));
    }
    if tables & IDEMPOTENCY != 0 {
        let i = arrays(IDEMPOTENCY_ARRAYS);
        ctes.push(format!(
            "i AS (INSERT INTO idempotency (principal, idem_key, request_hash, status, body, \
             etag, position) SELECT {i}{gate})"
        ));
    }
    let tail = if at {
        ctes.push(
            "c AS (UPDATE rm_cluster SET generation = COALESCE($6, generation), checkpoint = $7 \
             WHERE id = 1 AND $5 AND EXISTS (SELECT 1 FROM h))"
                .to_owned(),
        );
        format!("SELECT pg_notify('{NOTIFY_CHANNEL}', position::text) FROM h")
    } else {
        "SELECT 1".to_owned()
    };
    if ctes.is_empty() {
        tail
    } else {
        format!("WITH {} {tail}", ctes.join(", "))
    }
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
    /// transaction, and forgets it; with no row to write, it sends nothing.
    pub(super) async fn send(&mut self, c: &mut PgConnection) -> StoreResult<()> {
        let p = std::mem::take(self);
        let tables = p.tables();
        if tables != 0 {
            p.bind(sqlx::query(text(false, tables))).execute(c).await?;
        }
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
        let q = sqlx::query(text(true, self.tables()))
            .bind(expected.position as i64)
            .bind(expected.hash.as_slice())
            .bind(head.position as i64)
            .bind(head.hash.as_slice())
            .bind(cluster.is_some())
            .bind(generation.map(|g| g as i64))
            .bind(checkpoint as i64);
        let written = self.bind(q).fetch_optional(c).await?;
        Ok(written.is_some())
    }

    /// The tables the kept rows go into.
    fn tables(&self) -> u8 {
        let c = &self.changes;
        [
            (EVENTS, self.events.is_empty()),
            (TREE, self.tree.is_empty()),
            (MEMBERS, c.members.is_empty()),
            (JOIN_REQUESTS, c.join_requests.is_empty()),
            (TOKENS, c.tokens.is_empty()),
            (DOCS, c.docs.is_empty()),
            (IDEMPOTENCY, self.idempotency.is_empty()),
        ]
        .into_iter()
        .filter(|(_, empty)| !empty)
        .fold(0, |tables, (table, _)| tables | table)
    }

    /// Binds the kept rows' arrays, those of each table [`Self::tables`]
    /// names, in [`write_text`]'s order, after what `q` holds.
    fn bind<'q>(&'q self, mut q: PgQuery<'q>) -> PgQuery<'q> {
        let e = &self.events;
        let (m, j, k, d, i) = (
            &self.changes.members,
            &self.changes.join_requests,
            &self.changes.tokens,
            &self.changes.docs,
            &self.idempotency,
        );
        let tree = &self.tree;
        let tables = self.tables();
        if tables & EVENTS != 0 {
            q = q
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
                );
        }
        if tables & TREE != 0 {
            q = q
                .bind(tree.iter().map(|r| i64::from(r.level)).collect::<Vec<_>>())
                .bind(tree.iter().map(|r| r.index as i64).collect::<Vec<_>>())
                .bind(tree.iter().map(|r| r.hash.as_slice()).collect::<Vec<_>>());
        }
        if tables & MEMBERS != 0 {
            q = q
                .bind(m.iter().map(|r| r.node_id.as_str()).collect::<Vec<_>>())
                .bind(m.iter().map(|r| r.state).collect::<Vec<_>>())
                .bind(m.iter().map(|r| r.role).collect::<Vec<_>>())
                .bind(m.iter().map(|r| r.rack.as_deref()).collect::<Vec<_>>())
                .bind(m.iter().map(|r| i64::from(r.ordinal)).collect::<Vec<_>>())
                .bind(m.iter().map(|r| r.version as i64).collect::<Vec<_>>())
                .bind(m.iter().map(|r| r.doc.as_str()).collect::<Vec<_>>());
        }
        if tables & JOIN_REQUESTS != 0 {
            q = q
                .bind(j.iter().map(|r| r.request_id.as_str()).collect::<Vec<_>>())
                .bind(j.iter().map(|r| r.status).collect::<Vec<_>>())
                .bind(j.iter().map(|r| r.version as i64).collect::<Vec<_>>())
                .bind(j.iter().map(|r| r.doc.as_str()).collect::<Vec<_>>());
        }
        if tables & TOKENS != 0 {
            q = q
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
                .bind(k.iter().map(|r| r.doc.as_str()).collect::<Vec<_>>());
        }
        if tables & DOCS != 0 {
            q = q
                .bind(d.iter().map(|r| r.kind).collect::<Vec<_>>())
                .bind(d.iter().map(|r| r.id.as_str()).collect::<Vec<_>>())
                .bind(d.iter().map(|r| r.sort_key).collect::<Vec<_>>())
                .bind(d.iter().map(|r| r.doc.as_str()).collect::<Vec<_>>());
        }
        if tables & IDEMPOTENCY != 0 {
            q = q
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
                .bind(i.iter().map(|r| r.position as i64).collect::<Vec<_>>());
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use sqlx::{Connection, Either, Executor};

    use super::*;

    /// Every statement text, with the head's check and without, for every
    /// set of tables: PostgreSQL prepares it against the schema, and it
    /// takes as many parameters as a write binds (the head's, then each
    /// table's arrays).
    #[tokio::test]
    async fn every_statement_text_is_prepared_by_postgresql_with_the_parameters_bound() {
        let Some(db) = crate::testing::postgres().await else {
            return;
        };
        drop(crate::connect(&db.url).await.expect("the schema is made"));
        let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
        let widths = [
            (EVENTS, EVENT_ARRAYS),
            (TREE, TREE_ARRAYS),
            (MEMBERS, MEMBER_ARRAYS),
            (JOIN_REQUESTS, JOIN_REQUEST_ARRAYS),
            (TOKENS, TOKEN_ARRAYS),
            (DOCS, DOC_ARRAYS),
            (IDEMPOTENCY, IDEMPOTENCY_ARRAYS),
        ];
        for at in [false, true] {
            for tables in 0..AT {
                let want = widths
                    .iter()
                    .filter(|(t, _)| tables & t != 0)
                    .map(|(_, a)| a.len())
                    .sum::<usize>()
                    + if at { HEAD_PARAMETERS } else { 0 };
                let d = (&mut c)
                    .describe(text(at, tables))
                    .await
                    .unwrap_or_else(|e| panic!("at {at}, tables {tables:#09b}: {e}"));
                let got = match d.parameters() {
                    Some(Either::Left(types)) => types.len(),
                    Some(Either::Right(n)) => n,
                    None => 0,
                };
                assert_eq!(got, want, "at {at}, tables {tables:#09b}");
            }
        }
    }
}
