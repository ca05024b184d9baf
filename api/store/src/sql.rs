//! SQL shared by both backends: the statements are the same text (`$n`
//! placeholders work on SQLite and PostgreSQL alike); only execution differs.

use std::sync::LazyLock;

use sqlx::{Database, Encode, QueryBuilder, Type};
use stratum_domain::tree::TreeRow;

/// Rows per multi-row statement, well inside SQLite's variable limit.
pub(crate) const CHUNK: usize = 500;

macro_rules! event_columns {
    () => {
        "position, stream_id, stream_version, event_type, schema_version, event_id, occurred_at, principal, request_id, causation, correlation, payload, prev_hash, hash, client_request_id"
    };
}
macro_rules! select_all {
    () => {
        concat!("SELECT ", event_columns!(), " FROM events")
    };
}
/// One row per statement, for a writer that keeps its statements prepared
/// (SQLite's, [`crate::sqlite`]); the multi-row builders below end with the
/// same conflict clauses.
pub(crate) const INSERT_EVENT: &str = concat!(
    "INSERT INTO events (",
    event_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
);
pub(crate) const INSERT_TREE_ROW: &str =
    "INSERT INTO log_tree (level, idx, hash) VALUES (?1, ?2, ?3)";
pub(crate) const INSERT_IDEMPOTENCY: &str = "INSERT INTO idempotency (principal, idem_key, request_hash, status, body, etag, position) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
/// Shared with PostgreSQL's upsert from arrays. Each ends with the row's
/// projection version ([`pv`]), which the insert sets.
macro_rules! members_on_conflict {
    () => {
        " ON CONFLICT (node_id) DO UPDATE SET state = excluded.state, role = excluded.role, rack = excluded.rack, ordinal = excluded.ordinal, version = excluded.version, doc = excluded.doc, projection_version = excluded.projection_version"
    };
}
macro_rules! join_requests_on_conflict {
    () => {
        " ON CONFLICT (request_id) DO UPDATE SET status = excluded.status, version = excluded.version, doc = excluded.doc, projection_version = excluded.projection_version"
    };
}
macro_rules! tokens_on_conflict {
    () => {
        " ON CONFLICT (token_id) DO UPDATE SET principal = excluded.principal, policies = excluded.policies, expires_at = excluded.expires_at, revoked_at = excluded.revoked_at, doc = excluded.doc, projection_version = excluded.projection_version"
    };
}
macro_rules! docs_on_conflict {
    () => {
        " ON CONFLICT (kind, id) DO UPDATE SET sort_key = excluded.sort_key, doc = excluded.doc, projection_version = excluded.projection_version"
    };
}

/// The projection version of the rows of one entity kind, as SQL: this
/// build's, a number written into the statement (never caller input).
pub(crate) fn pv(kind: &str) -> String {
    stratum_projections::versions::version_of_kind(kind).to_string()
}

/// The projection version of an `rm_docs` row whose kind is `column`: a
/// `CASE` over every document kind this build writes.
pub(crate) fn doc_pv(column: &str) -> String {
    use stratum_projections::dump::KINDS;
    let mut case = format!("CASE {column}");
    for (kind, _) in KINDS {
        if !matches!(*kind, "member" | "join-request" | "token" | "generation") {
            case.push_str(&format!(" WHEN '{kind}' THEN {}", pv(kind)));
        }
    }
    case.push_str(" ELSE 0 END");
    case
}

pub(crate) static UPSERT_MEMBER: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO rm_members (node_id, state, role, rack, ordinal, version, doc, projection_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, {}){}",
        pv("member"),
        members_on_conflict!()
    )
});
pub(crate) static UPSERT_JOIN_REQUEST: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO rm_join_requests (request_id, status, version, doc, projection_version) VALUES (?1, ?2, ?3, ?4, {}){}",
        pv("join-request"),
        join_requests_on_conflict!()
    )
});
pub(crate) static UPSERT_TOKEN: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO rm_tokens (token_id, secret_sha256, secret_argon2id, principal, policies, expires_at, revoked_at, doc, projection_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, {}){}",
        pv("token"),
        tokens_on_conflict!()
    )
});
pub(crate) static UPSERT_DOC: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO rm_docs (kind, id, sort_key, doc, projection_version) VALUES (?1, ?2, ?3, ?4, {}){}",
        doc_pv("?1"),
        docs_on_conflict!()
    )
});

/// The table and key column of an entity kind's rows.
pub(crate) fn table_of(kind: &str) -> (&'static str, &'static str) {
    match kind {
        "member" => ("rm_members", "node_id"),
        "join-request" => ("rm_join_requests", "request_id"),
        "token" => ("rm_tokens", "token_id"),
        _ => ("rm_docs", "id"),
    }
}

/// The statement that deletes the row of one entity: `$1` its id and, for
/// a document, `$2` its kind.
pub(crate) fn delete_row(kind: &str) -> String {
    match table_of(kind) {
        ("rm_docs", _) => "DELETE FROM rm_docs WHERE id = $1 AND kind = $2".to_owned(),
        (table, key) => format!("DELETE FROM {table} WHERE {key} = $1"),
    }
}

/// Every row, as (kind, id), whose projection version is not this build's.
fn other_version_union() -> String {
    format!(
        "SELECT 'member' AS kind, node_id AS id FROM rm_members WHERE projection_version <> {m} \
         UNION ALL SELECT 'join-request', request_id FROM rm_join_requests WHERE projection_version <> {j} \
         UNION ALL SELECT 'token', token_id FROM rm_tokens WHERE projection_version <> {t} \
         UNION ALL SELECT kind, id FROM rm_docs WHERE projection_version <> {d}",
        m = pv("member"),
        j = pv("join-request"),
        t = pv("token"),
        d = doc_pv("kind"),
    )
}

/// Up to `$1` rows, as (kind, id), whose projection version is not this
/// build's.
pub(crate) static OTHER_VERSION_ROWS: LazyLock<String> =
    LazyLock::new(|| format!("SELECT * FROM ({}) AS r LIMIT $1", other_version_union()));
/// The kinds of every row whose projection version is not this build's.
pub(crate) static OTHER_VERSION_KINDS: LazyLock<String> =
    LazyLock::new(|| format!("SELECT DISTINCT kind FROM ({}) AS r", other_version_union()));
/// Whether the rows have projection versions (expand step 0002 applied):
/// a read-only open of a database no build with them has opened yet finds
/// none, and its every row is of version 1.
pub(crate) const HAS_PROJECTION_VERSIONS: &str =
    "SELECT projection_version FROM rm_docs WHERE 1 = 0";

/// The events at positions `$1 < position <= $2`, every column.
pub(crate) const SELECT_RANGE: &str = concat!(
    select_all!(),
    " WHERE position > $1 AND position <= $2 ORDER BY position"
);
pub(crate) const SELECT_AFTER: &str = concat!(
    select_all!(),
    " WHERE position > $1 ORDER BY position LIMIT $2"
);
/// What a fold reads of up to `$2` events after `$1`.
pub(crate) const SELECT_FOR_REPLAY: &str = "SELECT position, stream_id, stream_version, event_type, schema_version, occurred_at, principal, payload FROM events WHERE position > $1 ORDER BY position LIMIT $2";
pub(crate) const PUT_SNAPSHOT: &str = "INSERT INTO rm_snapshots (position, state) VALUES ($1, $2) ON CONFLICT (position) DO UPDATE SET state = excluded.state";
/// The pruning rule, the one place it is written (see
/// [`crate::SNAPSHOTS_NEWEST`]): keep the newest $1 and the first at or after
/// each multiple of $2; delete the rest. Integer division on both backends.
pub(crate) const PRUNE_SNAPSHOTS: &str = "DELETE FROM rm_snapshots WHERE position NOT IN (SELECT position FROM rm_snapshots ORDER BY position DESC LIMIT $1) AND position NOT IN (SELECT MIN(position) FROM rm_snapshots GROUP BY position / $2)";
pub(crate) const SELECT_SNAPSHOT: &str =
    "SELECT position, state FROM rm_snapshots WHERE position <= $1 ORDER BY position DESC LIMIT 1";
pub(crate) const SELECT_STREAM_PAGE: &str = concat!(
    select_all!(),
    " WHERE stream_id = $1 AND stream_version > $2 ORDER BY stream_version LIMIT $3"
);
pub(crate) const SELECT_STREAM: &str = concat!(
    select_all!(),
    " WHERE stream_id = $1 ORDER BY stream_version"
);
pub(crate) const STREAM_VERSION: &str =
    "SELECT COALESCE(MAX(stream_version), 0) FROM events WHERE stream_id = $1";
pub(crate) const SELECT_ENTRIES: &str =
    "SELECT hash FROM events WHERE position > $1 AND position <= $2 ORDER BY position";
pub(crate) const SELECT_TREE_ROWS: &str =
    "SELECT hash FROM log_tree WHERE level = $1 AND idx >= $2 AND idx < $3 ORDER BY idx";
pub(crate) const SELECT_SIGNED: &str = "SELECT size, root, note FROM log_signed WHERE id = 1";
/// The newest signed checkpoint only moves forward, but for the one an
/// acknowledged fork left behind ($4, its root), which the new base replaces.
pub(crate) const PUT_SIGNED: &str = "INSERT INTO log_signed (id, size, root, note) VALUES (1, $1, $2, $3) ON CONFLICT (id) DO UPDATE SET size = excluded.size, root = excluded.root, note = excluded.note WHERE excluded.size > log_signed.size OR log_signed.root = $4";
pub(crate) const SELECT_HEAD: &str = "SELECT position, hash FROM log_head WHERE id = 1";
pub(crate) const SELECT_CLUSTER: &str =
    "SELECT generation, checkpoint FROM rm_cluster WHERE id = 1";
pub(crate) const SELECT_IDEMPOTENCY: &str = "SELECT principal, idem_key, request_hash, status, body, etag, position FROM idempotency WHERE principal = $1 AND idem_key = $2";
pub(crate) const ALL_MEMBERS: &str = "SELECT node_id, doc FROM rm_members ORDER BY node_id";
pub(crate) const ALL_JOIN_REQUESTS: &str =
    "SELECT request_id, doc FROM rm_join_requests ORDER BY request_id";
pub(crate) const ALL_TOKENS: &str = "SELECT token_id, doc FROM rm_tokens ORDER BY token_id";
pub(crate) const ALL_DOCS: &str = "SELECT kind || '/' || id, doc FROM rm_docs ORDER BY kind, id";
/// The same rows with their projection versions (see [`HAS_PROJECTION_VERSIONS`]).
pub(crate) const ALL_MEMBERS_PV: &str =
    "SELECT node_id, doc, CAST(projection_version AS BIGINT) FROM rm_members ORDER BY node_id";
pub(crate) const ALL_JOIN_REQUESTS_PV: &str =
    "SELECT request_id, doc, CAST(projection_version AS BIGINT) FROM rm_join_requests ORDER BY request_id";
pub(crate) const ALL_TOKENS_PV: &str =
    "SELECT token_id, doc, CAST(projection_version AS BIGINT) FROM rm_tokens ORDER BY token_id";
pub(crate) const ALL_DOCS_PV: &str =
    "SELECT kind || '/' || id, doc, CAST(projection_version AS BIGINT) FROM rm_docs ORDER BY kind, id";
pub(crate) const CLEAR_READ_MODELS: [&str; 4] = [
    "DELETE FROM rm_members",
    "DELETE FROM rm_join_requests",
    "DELETE FROM rm_tokens",
    "DELETE FROM rm_docs",
];

/// The statements that end a write, in one round trip: move the head, the
/// generation and the checkpoint, announce the commit, and commit. Only
/// numbers and a hash are written into the text, never caller input.
pub(crate) fn finish(
    head: Option<super::Head>,
    cluster: Option<(Option<u64>, u64)>,
    bytea: fn(&[u8]) -> String,
    notify: Option<&'static str>,
) -> String {
    let mut sql = String::new();
    if let Some(h) = head {
        sql.push_str(&format!(
            "UPDATE log_head SET position = {}, hash = {} WHERE id = 1; ",
            h.position,
            bytea(&h.hash)
        ));
        if let Some(channel) = notify {
            sql.push_str(&format!(
                "SELECT pg_notify('{channel}', '{}'); ",
                h.position
            ));
        }
    }
    if let Some((generation, checkpoint)) = cluster {
        let generation = generation.map_or("generation".to_owned(), |g| g.to_string());
        sql.push_str(&format!(
            "UPDATE rm_cluster SET generation = {generation}, checkpoint = {checkpoint} WHERE id = 1; "
        ));
    }
    sql.push_str("COMMIT");
    sql
}

pub(crate) fn insert_tree_rows<'a, DB>(rows: &'a [TreeRow]) -> QueryBuilder<'a, DB>
where
    DB: Database,
    i64: Encode<'a, DB> + Type<DB>,
    &'a [u8]: Encode<'a, DB> + Type<DB>,
{
    let mut qb = QueryBuilder::new("INSERT INTO log_tree (level, idx, hash) ");
    qb.push_values(rows, |mut b, r| {
        b.push_bind(i64::from(r.level))
            .push_bind(r.index as i64)
            .push_bind(r.hash.as_slice());
    });
    qb
}
