//! SQLite's writer: a connection of its own through SQLite's C API
//! (`rusqlite`), so a write is two calls on a blocking thread, not one
//! hand-off to sqlx's worker thread per statement. The first takes the
//! write lock and reads the head (`BEGIN IMMEDIATE`); what the write then
//! appends and changes is kept in memory and the second call runs it all,
//! each statement prepared once per connection and run once per row, and
//! commits. A read inside a write runs what the write kept so far first,
//! in the same call, so it reads what the write wrote.

use std::sync::Arc;

use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};
use sqlx::sqlite::SqliteConnectOptions;
use stratum_domain::log::Recorded;
use stratum_domain::tree::TreeRow;
use stratum_projections::Changes;
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::bulk::{file_uri, in_memory, params as url_params};
use crate::sql;
use crate::tree::{tree_of, TreeCache, TreeWrite};
use crate::{check_follows, hash32, Head, IdempotencyRecord, StoreError, StoreResult, WriteTx};

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        if let rusqlite::Error::SqliteFailure(code, message) = &e {
            let message = message.clone().unwrap_or_else(|| code.to_string());
            // As sqlx reads them: a unique or primary key constraint is
            // a race with another writer; a full disk is `Full`.
            match (code.code, code.extended_code) {
                (
                    ErrorCode::ConstraintViolation,
                    rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY,
                ) => return StoreError::Conflict(message),
                (ErrorCode::DiskFull, _) => return StoreError::Full(message),
                _ => {}
            }
        }
        StoreError::Unavailable(e.to_string())
    }
}

/// The writer's connection, opened as sqlx opens the database `url`
/// names (a database in memory through its shared cache, which sqlx's
/// connections use), with the durable settings of the store.
pub(super) fn open(url: &str, opts: &SqliteConnectOptions) -> StoreResult<Connection> {
    let memory = in_memory(url);
    let shared = memory || url_params(url).any(|p| p == ("cache", "shared"));
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if memory {
        flags |= OpenFlags::SQLITE_OPEN_MEMORY;
    }
    flags |= if shared {
        OpenFlags::SQLITE_OPEN_SHARED_CACHE
    } else {
        OpenFlags::SQLITE_OPEN_PRIVATE_CACHE
    };
    let path = opts.get_filename().to_string_lossy().into_owned();
    let name = match url_params(url).find(|(k, _)| *k == "vfs") {
        Some((_, vfs)) => file_uri(&path, &format!("vfs={vfs}")),
        None => path,
    };
    let conn = Connection::open_with_flags(name, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    // The store's settings (the journal mode is the file's, set by sqlx).
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")?;
    Ok(conn)
}

/// The writer: its connection, and the tree's edge after its last write.
pub(super) struct Writer {
    conn: Arc<Mutex<Connection>>,
    tree: Arc<TreeCache>,
}

/// Runs `f` with the connection on a blocking thread and gives both back.
async fn blocking<T: Send + 'static>(
    mut conn: OwnedMutexGuard<Connection>,
    f: impl FnOnce(&mut Connection) -> StoreResult<T> + Send + 'static,
) -> StoreResult<(OwnedMutexGuard<Connection>, T)> {
    tokio::task::spawn_blocking(move || {
        let out = f(&mut conn)?;
        Ok((conn, out))
    })
    .await
    .map_err(|e| StoreError::Unavailable(format!("the writer's thread stopped: {e}")))?
}

impl Writer {
    pub(super) fn new(conn: Connection) -> Self {
        Self {
            conn: Arc::new(Mutex::new(conn)),
            tree: Arc::default(),
        }
    }

    /// Takes the write lock and reads the head under it, in one call.
    pub(super) async fn begin(&self, store: &super::SqliteStore) -> StoreResult<SqliteTx> {
        let conn = self.conn.clone().lock_owned().await;
        let (conn, head) = blocking(conn, |c| {
            // A write whose task ended before it did.
            if !c.is_autocommit() {
                c.execute_batch("ROLLBACK")?;
            }
            c.execute_batch("BEGIN IMMEDIATE")?;
            let head = c
                .query_row(sql::SELECT_HEAD, [], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
                })
                .map_err(StoreError::from)
                .and_then(|(position, hash)| {
                    Ok(Head {
                        position: position as u64,
                        hash: hash32(hash, "head hash")?,
                    })
                });
            if head.is_err() {
                c.execute_batch("ROLLBACK")?;
            }
            head
        })
        .await?;
        let mut tx = SqliteTx {
            conn: Some(conn),
            head,
            head_moved: false,
            cluster: None,
            tree: Some(TreeWrite::begin(&self.tree, head)),
            writes: Vec::new(),
        };
        let tree = tree_of(&mut tx.tree)?;
        if tree.needs_load() {
            // Through the read pool: under the write lock what it reads is
            // committed, and no other write can move it. Rows of events
            // another build appended are built here and kept in this write.
            let mut repaired = Vec::new();
            tree.load(
                crate::tree::frontier_repairing(store, head.position)
                    .await
                    .map(|(f, rows)| {
                        repaired = rows;
                        f
                    }),
            );
            if !repaired.is_empty() {
                tx.writes.push(Write::Tree(repaired));
            }
        }
        Ok(tx)
    }
}

/// What a write changes, kept until its commit (or a read in it) runs it.
enum Write {
    Events(Vec<Recorded>),
    Tree(Vec<TreeRow>),
    Changes(Changes),
    Idempotency(Vec<IdempotencyRecord>),
    ClearReadModels,
    ClearTree,
}

pub(super) struct SqliteTx {
    /// Holds the write lock: `None` once the write has ended.
    conn: Option<OwnedMutexGuard<Connection>>,
    head: Head,
    /// Whether events were appended, so the commit moves the head.
    head_moved: bool,
    /// The generation and checkpoint the commit writes.
    cluster: Option<(Option<u64>, u64)>,
    /// The tree's right edge, moved on by each append.
    tree: Option<TreeWrite>,
    writes: Vec<Write>,
}

impl Drop for SqliteTx {
    /// A write dropped before its end (an error, a cancelled task) has
    /// written nothing yet: ending its transaction only lets the lock go.
    fn drop(&mut self) {
        if let Some(c) = self.conn.as_ref() {
            if !c.is_autocommit() {
                let _ = c.execute_batch("ROLLBACK");
            }
        }
    }
}

/// Runs a write's statements in order.
fn run(c: &Connection, writes: &[Write]) -> StoreResult<()> {
    for w in writes {
        match w {
            Write::Events(events) => {
                let mut st = c.prepare_cached(sql::INSERT_EVENT)?;
                for e in events {
                    st.execute(params![
                        e.position as i64,
                        e.stream_id,
                        e.stream_version as i64,
                        e.event_type,
                        i64::from(e.schema_version),
                        e.event_id.to_string(),
                        e.occurred_at.timestamp_micros(),
                        e.meta.principal,
                        e.meta.request_id,
                        e.meta.causation.map(|c| c as i64),
                        e.meta.correlation,
                        e.payload,
                        e.prev_hash.as_slice(),
                        e.hash.as_slice(),
                        e.meta.client_request_id,
                    ])?;
                }
            }
            Write::Tree(rows) => {
                let mut st = c.prepare_cached(sql::INSERT_TREE_ROW)?;
                for r in rows {
                    st.execute(params![
                        i64::from(r.level),
                        r.index as i64,
                        r.hash.as_slice()
                    ])?;
                }
            }
            Write::Changes(changes) => {
                let mut st = c.prepare_cached(&sql::UPSERT_MEMBER)?;
                for r in &changes.members {
                    st.execute(params![
                        r.node_id,
                        r.state,
                        r.role,
                        r.rack,
                        i64::from(r.ordinal),
                        r.version as i64,
                        r.doc
                    ])?;
                }
                let mut st = c.prepare_cached(&sql::UPSERT_TOKEN)?;
                for r in &changes.tokens {
                    st.execute(params![
                        r.token_id,
                        r.secret_sha256.as_ref().map(|h| h.as_slice()),
                        r.secret_argon2id,
                        r.principal,
                        r.policies,
                        r.expires_at,
                        r.revoked_at,
                        r.doc
                    ])?;
                }
                let mut st = c.prepare_cached(&sql::UPSERT_DOC)?;
                for r in &changes.docs {
                    st.execute(params![r.kind, r.id, r.sort_key, r.doc])?;
                }
                let mut st = c.prepare_cached(&sql::UPSERT_JOIN_REQUEST)?;
                for r in &changes.join_requests {
                    st.execute(params![r.request_id, r.status, r.version as i64, r.doc])?;
                }
                for (kind, id) in &changes.removed {
                    let stmt = sql::delete_row(kind).replace('$', "?");
                    let mut st = c.prepare_cached(&stmt)?;
                    if stmt.contains("?2") {
                        st.execute(params![id, kind])?;
                    } else {
                        st.execute(params![id])?;
                    }
                }
            }
            Write::Idempotency(records) => {
                let mut st = c.prepare_cached(sql::INSERT_IDEMPOTENCY)?;
                for r in records {
                    st.execute(params![
                        r.principal,
                        r.key,
                        r.request_hash,
                        i64::from(r.status),
                        r.body,
                        r.etag.map(|e| e as i64),
                        r.position as i64
                    ])?;
                }
            }
            Write::ClearReadModels => {
                for stmt in sql::CLEAR_READ_MODELS {
                    c.execute(stmt, [])?;
                }
            }
            Write::ClearTree => {
                c.execute("DELETE FROM log_tree", [])?;
            }
        }
    }
    Ok(())
}

impl SqliteTx {
    /// Runs what this write has kept so far, then `read`, in one call on
    /// the writer's connection: a write reads what it wrote.
    async fn read<T: Send + 'static>(
        &mut self,
        read: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let writes = std::mem::take(&mut self.writes);
        let conn = self
            .conn
            .take()
            .ok_or_else(|| StoreError::Unavailable("the write has ended".into()))?;
        let (conn, out) = blocking(conn, move |c| {
            run(c, &writes)?;
            read(c)
        })
        .await?;
        self.conn = Some(conn);
        Ok(out)
    }

    /// Ends the write with `sql` (`ROLLBACK`), in one call.
    async fn end(&mut self, sql: &'static str) -> StoreResult<()> {
        let conn = self
            .conn
            .take()
            .ok_or_else(|| StoreError::Unavailable("the write has ended".into()))?;
        blocking(conn, move |c| Ok(c.execute_batch(sql)?))
            .await
            .map(|_| ())
    }
}

#[async_trait::async_trait]
impl WriteTx for SqliteTx {
    fn head(&self) -> Head {
        self.head
    }

    async fn clear_read_models(&mut self) -> StoreResult<()> {
        self.writes.push(Write::ClearReadModels);
        Ok(())
    }

    async fn events_after(&mut self, after: u64) -> StoreResult<Vec<Recorded>> {
        self.read(move |c| {
            let chunk = super::bulk::range(c, after, u64::MAX)?;
            Ok(chunk.iter().map(|e| e.to_recorded()).collect())
        })
        .await
    }

    async fn stream_version(&mut self, stream_id: &str) -> StoreResult<u64> {
        let stream_id = stream_id.to_owned();
        self.read(move |c| {
            let v: i64 = c.query_row(sql::STREAM_VERSION, [stream_id], |r| r.get(0))?;
            Ok(v as u64)
        })
        .await
    }

    async fn idempotency(
        &mut self,
        principal: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        let (principal, key) = (principal.to_owned(), key.to_owned());
        self.read(move |c| {
            c.query_row(sql::SELECT_IDEMPOTENCY, [principal, key], |r| {
                Ok(IdempotencyRecord {
                    principal: r.get(0)?,
                    key: r.get(1)?,
                    request_hash: r.get(2)?,
                    status: r.get::<_, i64>(3)? as u16,
                    body: r.get(4)?,
                    etag: r.get::<_, Option<i64>>(5)?.map(|e| e as u64),
                    position: r.get::<_, i64>(6)? as u64,
                })
            })
            .optional()
            .map_err(|e| match e {
                rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::InvalidColumnType(..) => StoreError::Corrupt(e.to_string()),
                e => e.into(),
            })
        })
        .await
    }

    async fn append(&mut self, events: &[Recorded]) -> StoreResult<()> {
        let Some(last) = events.last() else {
            return Ok(());
        };
        check_follows(self.head, events)?;
        let rows = tree_of(&mut self.tree)?.extend(events)?;
        self.writes.push(Write::Events(events.to_vec()));
        self.writes.push(Write::Tree(rows));
        self.head_moved = true;
        self.head = Head {
            position: last.position,
            hash: last.hash,
        };
        Ok(())
    }

    async fn write_changes(&mut self, changes: &Changes, checkpoint: u64) -> StoreResult<()> {
        self.writes.push(Write::Changes(changes.clone()));
        self.cluster = Some((changes.generation, checkpoint));
        Ok(())
    }

    async fn put_idempotency(&mut self, records: &[IdempotencyRecord]) -> StoreResult<()> {
        if !records.is_empty() {
            self.writes.push(Write::Idempotency(records.to_vec()));
        }
        Ok(())
    }

    async fn commit(mut self: Box<Self>) -> StoreResult<()> {
        let finish = sql::finish(
            self.head_moved.then_some(self.head),
            self.cluster,
            super::sqlite_blob,
            None,
        );
        let writes = std::mem::take(&mut self.writes);
        let conn = self
            .conn
            .take()
            .ok_or_else(|| StoreError::Unavailable("the write has ended".into()))?;
        blocking(conn, move |c| {
            let r = run(c, &writes).and_then(|()| Ok(c.execute_batch(&finish)?));
            if r.is_err() && !c.is_autocommit() {
                let _ = c.execute_batch("ROLLBACK");
            }
            r
        })
        .await?;
        if let Some(t) = self.tree.take() {
            t.committed(self.head);
        }
        Ok(())
    }

    async fn replace_tree(&mut self, rows: &[TreeRow]) -> StoreResult<()> {
        if let Some(t) = self.tree.as_mut() {
            t.forget();
        }
        self.writes.push(Write::ClearTree);
        self.writes.push(Write::Tree(rows.to_vec()));
        Ok(())
    }

    async fn rollback(mut self: Box<Self>) -> StoreResult<()> {
        self.end("ROLLBACK").await
    }
}
