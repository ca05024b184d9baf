//! The event store: one trait over the append-only log and the inline read
//! model tables, with a SQLite and a PostgreSQL implementation that each own
//! their migrations. `connect` picks the backend from the URL.
//!
//! Writing happens only through a [`WriteTx`]: beginning one takes the log's
//! write lock (the `log_head` row), so positions are assigned in exactly one
//! place, gap-free and in commit order, whichever process writes.

// First: its statement macros (the conflict clauses) serve both backends.
#[macro_use]
mod sql;
mod chunk;
mod pg_target;
mod postgres;
mod read;
mod redact;
pub mod replicas;
mod rows;
mod sqlite;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tree;
mod verify;

use std::sync::Arc;

use async_trait::async_trait;
use stratum_domain::log::Recorded;
use stratum_projections::Changes;

pub(crate) use chunk::{ChunkBuilder, Numbers, VerifyBuilder, VerifyNumbers};
pub use chunk::{ReplayChunk, ReplayEvent, VerifyChunk};
pub use pg_target::{SessionAttrs, Target};
pub use postgres::PgStore;
pub use redact::redact_url;
pub use replicas::{ReplicaRow, Replicas};
pub(crate) use rows::{
    check_follows, hash32, head_from_row, idempotency_from_row, recorded_from_row,
};
pub use sqlite::SqliteStore;
pub use verify::{verify_chain, Verification};

#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// An append raced another one on a stream version or position.
    #[error("version conflict on {0}")]
    Conflict(String),
    /// The database could not be reached or refused the work.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The connection broke while a commit was in flight: the write may or
    /// may not have been stored.
    #[error("the outcome of a commit is unknown: {0}")]
    OutcomeUnknown(String),
    /// What the database holds is not what stratum wrote.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// Data derived from the log (the tree's rows) does not cover it yet:
    /// another build appended events without it, and a write of this
    /// build fills it. Not corruption: the log itself is whole.
    #[error("the log's derived data is catching up: {0}")]
    Behind(String),
    /// The database cannot grow: its disk (or its size limit) is full.
    #[error("the database is full: {0}")]
    Full(String),
    /// The database's schema is not the one this build reads.
    #[error("{0}")]
    Schema(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &e {
            if db.is_unique_violation() {
                return StoreError::Conflict(db.message().to_owned());
            }
            // SQLITE_FULL (13) and PostgreSQL's disk_full (53100).
            if matches!(db.code().as_deref(), Some("13" | "53100")) {
                return StoreError::Full(db.message().to_owned());
            }
        }
        StoreError::Unavailable(e.to_string())
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        StoreError::Unavailable(format!("migration failed: {e}"))
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Why a write that expected the log's head at `expected` found it at
/// `found`.
pub(crate) fn head_moved(found: Head, expected: Head) -> StoreError {
    StoreError::Conflict(format!(
        "the log's head is position {}, not {} where this writer's last commit left it",
        found.position, expected.position
    ))
}

/// `tx`, begun under the lock, if it found the head at `expected`; else it
/// is rolled back.
pub(crate) async fn at_head(tx: Box<dyn WriteTx>, expected: Head) -> StoreResult<Box<dyn WriteTx>> {
    let head = tx.head();
    if head != expected {
        let _ = tx.rollback().await;
        return Err(head_moved(head, expected));
    }
    Ok(tx)
}

/// How many events one read of the log asks for: a replay, a catch-up, a
/// verification or an export reads the log in chunks of this size.
pub const READ_CHUNK: u32 = 10_000;

/// Snapshots kept after each [`EventStore::put_snapshot`]: the newest
/// [`SNAPSHOTS_NEWEST`] (start-up folds from the newest), and the first at or
/// after each multiple of [`SNAPSHOT_SPACING`] positions (so time travel to
/// any position finds one at most about that far before it). Every other
/// snapshot is deleted: with a snapshot every 10,000 events, a log of
/// 10,000,000 keeps 102 instead of 1,000.
pub const SNAPSHOTS_NEWEST: u64 = 2;
/// See [`SNAPSHOTS_NEWEST`].
pub const SNAPSHOT_SPACING: u64 = 100_000;

/// The last position of the log and its hash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Head {
    pub position: u64,
    pub hash: [u8; 32],
}

/// The newest checkpoint signed over a database: its size, root and the
/// signed note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedCheckpoint {
    pub size: u64,
    pub root: [u8; 32],
    pub note: String,
}

/// A response kept for an `Idempotency-Key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub principal: String,
    pub key: String,
    pub request_hash: Vec<u8>,
    pub status: u16,
    pub body: String,
    pub etag: Option<u64>,
    pub position: u64,
}

/// Holds a background role while it lives. On PostgreSQL it owns the
/// connection whose session holds the advisory lock.
pub struct Leadership(pub(crate) Option<tokio::sync::Mutex<sqlx::PgConnection>>);

impl Leadership {
    /// Whether the role is still held: the lock's session still answers.
    /// A lost session lost the lock, and another replica may have taken it.
    pub async fn still_held(&self) -> bool {
        match &self.0 {
            None => true,
            Some(conn) => {
                use sqlx::Connection;
                conn.lock().await.ping().await.is_ok()
            }
        }
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Leadership")
    }
}

/// The stored rows of every read model, for `replay --check`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredReadModels {
    pub members: Vec<(String, String)>,
    pub join_requests: Vec<(String, String)>,
    pub tokens: Vec<(String, String)>,
    /// `kind/id` and document of every `rm_docs` row.
    pub docs: Vec<(String, String)>,
    pub generation: u64,
    pub checkpoint: u64,
    /// The rows of other projection versions than this build's, as
    /// (entity kind, id, version): a fold of this build is not compared
    /// with them (`replay --check`), and a server of this build rewrites
    /// them.
    pub other_versions: Vec<(String, String, u32)>,
}

impl StoredReadModels {
    /// The rows a rebuild from the log would write, in the same form.
    pub fn from_changes(c: &Changes, checkpoint: u64) -> Self {
        let mut members: Vec<_> = c
            .members
            .iter()
            .map(|r| (r.node_id.clone(), r.doc.clone()))
            .collect();
        members.sort();
        let mut join_requests: Vec<_> = c
            .join_requests
            .iter()
            .map(|r| (r.request_id.clone(), r.doc.clone()))
            .collect();
        join_requests.sort();
        let mut tokens: Vec<_> = c
            .tokens
            .iter()
            .map(|r| (r.token_id.clone(), r.doc.clone()))
            .collect();
        tokens.sort();
        let mut docs: Vec<_> = c
            .docs
            .iter()
            .map(|r| (format!("{}/{}", r.kind, r.id), r.doc.clone()))
            .collect();
        docs.sort();
        Self {
            members,
            join_requests,
            tokens,
            docs,
            generation: c.generation.unwrap_or(0),
            checkpoint,
            other_versions: Vec::new(),
        }
    }
}

#[async_trait]
pub trait EventStore: Send + Sync + 'static {
    /// Begins a write: takes the log's write lock and reads its head.
    async fn begin_write(&self) -> StoreResult<Box<dyn WriteTx>>;

    /// Begins a write that must find the log's head at `expected` (where
    /// this writer's last commit left it), or else fails with
    /// [`StoreError::Conflict`] and nothing written: another process wrote
    /// in between. A backend may defer the lock to the commit, which then
    /// checks the head and writes in one statement; its commit's
    /// `Conflict` likewise means nothing was stored.
    async fn begin_write_at(&self, expected: Head) -> StoreResult<Box<dyn WriteTx>> {
        at_head(self.begin_write().await?, expected).await
    }

    /// Whether a write begun at a head ([`Self::begin_write_at`]) is, as a
    /// rule, kept until its commit, which checks the head, writes and
    /// commits in one round trip: a writer may then send it before other
    /// work (a write that must lock first, or remove rows, takes a round
    /// trip before).
    fn defers_writes(&self) -> bool {
        false
    }

    /// The head as last committed.
    async fn head(&self) -> StoreResult<Head>;

    /// Up to `limit` events after `after`, in position order.
    async fn read_after(&self, after: u64, limit: u32) -> StoreResult<Vec<Recorded>>;

    /// Up to `limit` events after `after`, with only what a fold reads.
    async fn read_for_replay(&self, after: u64, limit: u32) -> StoreResult<ReplayChunk>;

    /// The events at positions `after + 1 ..= until` with every field the
    /// hash chain covers and their stored hashes: what [`verify_chain`]
    /// checks. Backends read them in bulk; this default reads rows.
    async fn read_for_verify(&self, after: u64, until: u64) -> StoreResult<VerifyChunk> {
        verify_chunk_by_rows(self, after, until).await
    }

    /// Every event of one stream, in version order.
    async fn read_stream(&self, stream_id: &str) -> StoreResult<Vec<Recorded>>;

    /// At most `limit` events of a stream after its version `after`, in
    /// stream order: one page of a history.
    async fn read_stream_page(
        &self,
        stream_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<Recorded>>;

    /// Token documents (never secrets), by id.
    async fn token_docs(&self) -> StoreResult<Vec<(String, String)>>;

    /// The membership generation and the read models' checkpoint.
    async fn cluster_row(&self) -> StoreResult<(u64, u64)>;

    /// A kept idempotent response, outside any write.
    async fn idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotencyRecord>>;

    /// Every stored read model row.
    async fn read_models(&self) -> StoreResult<StoredReadModels>;

    /// Up to `limit` read-model rows, as (entity kind, id), of other
    /// projection versions than this build's: what the online rebuild
    /// rewrites.
    async fn other_version_rows(&self, limit: u32) -> StoreResult<Vec<(String, String)>>;

    /// The entity kinds of every read-model row of other projection
    /// versions than this build's.
    async fn other_version_kinds(&self) -> StoreResult<Vec<String>>;

    /// Replaces every read model row (a rebuild), under the write lock.
    async fn replace_read_models(&self, rows: &Changes, checkpoint: u64) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        tx.clear_read_models().await?;
        tx.write_changes(rows, checkpoint).await?;
        tx.commit().await
    }

    /// Whether the database answers.
    async fn ping(&self) -> StoreResult<()>;

    /// The chain hashes of the events at positions `start + 1 ..= end`:
    /// the tree's entries (leaf indexes `start..end`).
    async fn entries(&self, start: u64, end: u64) -> StoreResult<Vec<[u8; 32]>>;

    /// The kept hashes of tile level `level` (≥ 1) at indexes `start..end`.
    async fn tree_rows(&self, level: u8, start: u64, end: u64) -> StoreResult<Vec<[u8; 32]>>;

    /// The newest checkpoint signed over this database.
    async fn signed_checkpoint(&self) -> StoreResult<Option<SignedCheckpoint>>;

    /// Keeps a signed checkpoint if it is newer than the kept one, or if
    /// the kept one has the root `replaces` (the checkpoint an acknowledged
    /// fork left behind, which the new base replaces).
    async fn put_signed_checkpoint(
        &self,
        c: &SignedCheckpoint,
        replaces: Option<[u8; 32]>,
    ) -> StoreResult<()>;

    /// The connections of the read pool: open, and idle among them.
    fn pool_stats(&self) -> Option<(u32, u32)> {
        None
    }

    /// Keeps a snapshot of the fold at `position` (a cache), then prunes the
    /// snapshots to those [`SNAPSHOTS_NEWEST`] describes, in the same
    /// transaction.
    async fn put_snapshot(&self, position: u64, state: &[u8]) -> StoreResult<()>;

    /// The newest snapshot at or before `position`.
    async fn snapshot_at_or_before(&self, position: u64) -> StoreResult<Option<(u64, Vec<u8>)>>;

    /// Tries to become the one process that runs the background work named
    /// by `key`; the returned guard holds that role until dropped. On
    /// PostgreSQL this is a session advisory lock, so among replicas exactly
    /// one runs it; the embedded SQLite store has one process.
    async fn try_lead(&self, key: i64) -> StoreResult<Option<Leadership>>;

    /// Positions other processes committed, as they announce them (LISTEN on
    /// PostgreSQL); `None` where the backend announces nothing, and watchers
    /// fall back to polling.
    async fn subscribe(&self) -> StoreResult<Option<tokio::sync::mpsc::UnboundedReceiver<u64>>>;

    /// Registers a replica (replacing a row of the same id), its start and
    /// heartbeat set to the database's time.
    async fn register_replica(&self, row: &ReplicaRow) -> StoreResult<()>;

    /// A replica's heartbeat, in the database's time; `false` when its row
    /// is gone (it registers again). Rows stopped or silent for longer
    /// than [`replicas::KEPT_FOR_MICROS`] are removed.
    async fn replica_heartbeat(&self, id: &str) -> StoreResult<bool>;

    /// A replica stopped (as it stops, or as an operator says).
    async fn replica_stopped(&self, id: &str) -> StoreResult<()>;

    /// Every registered replica, by start, and the database's time.
    async fn replicas(&self) -> StoreResult<Replicas>;

    /// Other sessions on this database of a build of stratum from before
    /// the replica registry (their `application_name` is `stratum`; this
    /// build's is [`APPLICATION_NAME`]), each as `pid N from ADDR since
    /// TIME`: replicas that registered nothing and read only what they
    /// were built with. None on SQLite, whose clients cannot be seen.
    async fn unregistered_clients(&self) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
    }
}

/// [`EventStore::read_for_verify`] by rows, through [`EventStore::read_after`]:
/// for a backend, or a database, without a bulk read.
pub(crate) async fn verify_chunk_by_rows<S: EventStore + ?Sized>(
    store: &S,
    after: u64,
    until: u64,
) -> StoreResult<VerifyChunk> {
    let limit = u32::try_from(until.saturating_sub(after)).unwrap_or(u32::MAX);
    let mut events = store.read_after(after, limit).await?;
    events.retain(|e| e.position <= until);
    VerifyChunk::of(&events)
}

/// The `application_name` this build's PostgreSQL sessions carry. Builds
/// from before the replica registry say `stratum`, which is how they are
/// told apart ([`EventStore::unregistered_clients`]).
pub const APPLICATION_NAME: &str = concat!("stratum/", env!("CARGO_PKG_VERSION"));

/// One write, holding the log's write lock until commit or rollback.
#[async_trait]
pub trait WriteTx: Send {
    /// The head when the lock was taken, moved on by each append.
    fn head(&self) -> Head;

    /// Deletes every read model row (before a rebuild writes them all).
    async fn clear_read_models(&mut self) -> StoreResult<()>;

    /// Events committed after `after` (by other writers), in order.
    async fn events_after(&mut self, after: u64) -> StoreResult<Vec<Recorded>>;

    async fn stream_version(&mut self, stream_id: &str) -> StoreResult<u64>;

    async fn idempotency(
        &mut self,
        principal: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotencyRecord>>;

    /// Inserts events (positioned and sealed after the head) and moves the head.
    async fn append(&mut self, events: &[Recorded]) -> StoreResult<()>;

    /// Writes changed read model rows and the checkpoint.
    async fn write_changes(&mut self, changes: &Changes, checkpoint: u64) -> StoreResult<()>;

    async fn put_idempotency(&mut self, records: &[IdempotencyRecord]) -> StoreResult<()>;

    /// Replaces every kept tree row (a rebuild of the tree from the log).
    async fn replace_tree(&mut self, rows: &[stratum_domain::tree::TreeRow]) -> StoreResult<()>;

    async fn commit(self: Box<Self>) -> StoreResult<()>;

    async fn rollback(self: Box<Self>) -> StoreResult<()>;
}

/// Opens the store a URL names (`sqlite://...` or `postgres://...`) and
/// runs its migrations.
pub async fn connect(url: &str) -> StoreResult<Arc<dyn EventStore>> {
    connect_as(url, Access::ReadWrite).await
}

/// How a database is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Migrated to this build's schema at open; SQLite creates a missing file.
    ReadWrite,
    /// For the auditor's tools: never created, never migrated, every write
    /// refused by the database itself, so a read-only copy works.
    ReadOnly,
}

pub async fn connect_as(url: &str, access: Access) -> StoreResult<Arc<dyn EventStore>> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::open_as(url, access).await?))
    } else if url.starts_with("postgres:")
        || url.starts_with("postgresql:")
        || (!url.contains("://") && url.contains('='))
    {
        // A URL (one host, or libpq's host list), or libpq's key=value form.
        Ok(Arc::new(PgStore::open_as(url, access).await?))
    } else {
        Err(StoreError::Unavailable(format!(
            "unsupported database URL scheme in {}; use sqlite://, postgres:// or libpq's host=... dbname=...",
            redact_url(url)
        )))
    }
}

/// The schema versions (`_sqlx_migrations`) this build runs on: the oldest
/// it serves beside the build that migrated to it, and the newest it
/// migrates to. The same numbers on both backends.
pub fn schema_range() -> (i64, i64) {
    let newest = SQLITE_MIGRATIONS
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0);
    (OLDEST_SCHEMA.min(newest), newest)
}

/// Each backend's migrations, embedded once.
pub(crate) static SQLITE_MIGRATIONS: sqlx::migrate::Migrator =
    sqlx::migrate!("../../migrations/sqlite");
pub(crate) static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator =
    sqlx::migrate!("../../migrations/postgres");

/// The oldest schema this build serves on: it added no migration a build
/// of that schema cannot live with (what it adds is an expand step, see
/// [`replicas`]).
pub const OLDEST_SCHEMA: i64 = 6;

/// Holds the schema version a database is at (`None`: no stratum schema
/// yet) to the one this build's migrations end at, before anything reads or
/// migrates it: a newer schema is never migrated down or misread, and a
/// read-only open reads only the schema it knows.
pub(crate) fn check_schema(
    found: Option<i64>,
    migrator: &sqlx::migrate::Migrator,
    access: Access,
) -> StoreResult<()> {
    let ours = migrator.iter().map(|m| m.version).max().unwrap_or(0);
    match found {
        Some(v) if v > ours => Err(StoreError::Schema(format!(
            "the database's schema is version {v}, newer than this stratum's ({ours}): \
             use the stratum that wrote it, or a newer one"
        ))),
        Some(v) if v < ours && access == Access::ReadOnly => Err(StoreError::Schema(format!(
            "the database's schema is version {v}, older than this stratum's ({ours}), \
             and a read-only open does not migrate: use the stratum that wrote it, \
             or start `stratum serve` on it once"
        ))),
        None if access == Access::ReadOnly => Err(StoreError::Schema(
            "the database holds no stratum schema (no _sqlx_migrations table)".into(),
        )),
        _ => Ok(()),
    }
}

/// The export lines (`stratum events export`) of the events after `at`, up
/// to `until`, one read's worth, and the last position they hold; `None`
/// once there are no more.
pub async fn export_chunk(
    store: &dyn EventStore,
    at: u64,
    until: u64,
) -> Result<Option<(Vec<u8>, u64)>, String> {
    if at >= until {
        return Ok(None);
    }
    let chunk = store
        .read_after(at, READ_CHUNK)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut last = at;
    for e in chunk.iter().take_while(|e| e.position <= until) {
        out.extend(stratum_domain::export::line(e)?);
        last = e.position;
    }
    Ok((last > at).then_some((out, last)))
}
