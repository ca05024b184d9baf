//! PostgreSQL's write transaction: the log's lock taken (`log_head` row
//! locked) as it begins, or, for a write begun at a head, by its commit's
//! one statement; what it appends and changes kept and sent in batches;
//! and its commit, whose failure says whether anything may have been
//! stored.

use async_trait::async_trait;
use sqlx::{Executor, PgConnection};
use stratum_domain::log::Recorded;
use stratum_domain::tree::TreeRow;
use stratum_projections::Changes;
use tokio::sync::OwnedMutexGuard;

use super::batch::Pending;
use super::{head_from_row, NOTIFY_CHANNEL, R};
use crate::sql::{self, CHUNK};
use crate::tree::{tree_of, TreeWrite};
use crate::{check_follows, Head, IdempotencyRecord, StoreResult, WriteTx};

pub(super) struct PgTx {
    pub(super) conn: OwnedMutexGuard<Option<PgConnection>>,
    pub(super) head: Head,
    head_moved: bool,
    cluster: Option<(Option<u64>, u64)>,
    /// Whether a transaction (or the commit's one statement) is open on the
    /// server: a write dropped then drops its connection.
    open: bool,
    /// The tree's right edge, moved on by each append.
    pub(super) tree: Option<TreeWrite>,
    /// What the write has not sent yet.
    pending: Pending,
    /// The head a write begun without a round trip expects: nothing is on
    /// the server yet. Its commit checks the head and writes in one
    /// statement; anything else the write does first begins it under the
    /// lock ([`PgTx::begun`]).
    deferred: Option<Head>,
}

/// Begins a transaction and takes the log's write lock, reading the head:
/// one simple query (several statements, one round trip).
const BEGIN_LOCKED: &str = "BEGIN; SELECT position, hash FROM log_head WHERE id = 1 FOR UPDATE";

impl PgTx {
    /// Begins a write under the log's lock; its tree is the caller's to set.
    pub(super) async fn begin(
        mut conn: OwnedMutexGuard<Option<PgConnection>>,
    ) -> StoreResult<Self> {
        let c = conn.as_mut().expect("a write holds a connection");
        let row = c.fetch_one(BEGIN_LOCKED).await;
        let mut tx = Self::new(conn, Head::default(), None);
        // A failed begin may leave a transaction open: dropped with it.
        tx.open = true;
        tx.head = head_from_row(&row?)?;
        Ok(tx)
    }

    /// A write begun without a round trip, expecting the head at
    /// `expected` with the tree's edge there.
    pub(super) fn deferred(
        conn: OwnedMutexGuard<Option<PgConnection>>,
        expected: Head,
        tree: TreeWrite,
    ) -> Self {
        let mut tx = Self::new(conn, expected, Some(tree));
        tx.deferred = Some(expected);
        tx
    }

    fn new(
        conn: OwnedMutexGuard<Option<PgConnection>>,
        head: Head,
        tree: Option<TreeWrite>,
    ) -> Self {
        Self {
            conn,
            head,
            head_moved: false,
            cluster: None,
            open: false,
            tree,
            pending: Pending::default(),
            deferred: None,
        }
    }

    pub(super) fn conn(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("a write holds a connection")
    }

    /// A deferred write begins here, under the lock, before it reads or
    /// sends anything: the head must be the one it expected. One that
    /// found it moved stays deferred, so nothing after it writes outside
    /// the lock (its commit's statement would write nothing either).
    async fn begun(&mut self) -> StoreResult<()> {
        let Some(expected) = self.deferred else {
            return Ok(());
        };
        self.open = true;
        let row = self.conn().fetch_one(BEGIN_LOCKED).await?;
        let head = head_from_row(&row)?;
        if head != expected {
            self.conn().execute("ROLLBACK").await?;
            self.open = false;
            return Err(crate::head_moved(head, expected));
        }
        self.deferred = None;
        Ok(())
    }

    /// Begins a deferred write under the lock, and sends what the write
    /// kept, so what follows reads or replaces it.
    async fn send(&mut self) -> StoreResult<()> {
        self.begun().await?;
        let c = self.conn.as_mut().expect("a write holds a connection");
        self.pending.send(c).await
    }
}

impl Drop for PgTx {
    fn drop(&mut self) {
        // A write abandoned mid-way leaves its transaction open: drop the
        // connection (the server rolls it back) and reconnect next time.
        if self.open {
            self.conn.take();
        }
    }
}

fn pg_bytea(b: &[u8]) -> String {
    // decode() reads the same whatever standard_conforming_strings says.
    format!("decode('{}', 'hex')", hex::encode(b))
}

#[async_trait]
impl WriteTx for PgTx {
    fn head(&self) -> Head {
        self.head
    }

    async fn clear_read_models(&mut self) -> StoreResult<()> {
        self.send().await?;
        for stmt in sql::CLEAR_READ_MODELS {
            sqlx::query(stmt).execute(self.conn()).await?;
        }
        Ok(())
    }

    async fn events_after(&mut self, after: u64) -> StoreResult<Vec<Recorded>> {
        self.send().await?;
        R::after(self.conn(), after, i64::MAX).await
    }

    async fn stream_version(&mut self, stream_id: &str) -> StoreResult<u64> {
        self.send().await?;
        R::stream_version(self.conn(), stream_id).await
    }

    async fn idempotency(
        &mut self,
        principal: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        self.send().await?;
        R::idempotency(self.conn(), principal, key).await
    }

    async fn append(&mut self, events: &[Recorded]) -> StoreResult<()> {
        let Some(last) = events.last() else {
            return Ok(());
        };
        check_follows(self.head, events)?;
        if self.pending.holds_events() {
            self.send().await?;
        }
        let rows = tree_of(&mut self.tree)?.extend(events)?;
        self.pending.keep_events(events, rows);
        self.head_moved = true;
        self.head = Head {
            position: last.position,
            hash: last.hash,
        };
        Ok(())
    }

    async fn write_changes(&mut self, changes: &Changes, checkpoint: u64) -> StoreResult<()> {
        // Removals run under the lock, before this call's rows go out.
        if self.pending.holds_changes() || !changes.removed.is_empty() {
            self.send().await?;
        }
        for (kind, id) in &changes.removed {
            let stmt = sql::delete_row(kind);
            let q = sqlx::query(&stmt).bind(id.as_str());
            let q = if stmt.contains("$2") {
                q.bind(kind.as_str())
            } else {
                q
            };
            q.execute(self.conn()).await?;
        }
        self.pending.keep_changes(changes);
        self.cluster = Some((changes.generation, checkpoint));
        Ok(())
    }

    async fn put_idempotency(&mut self, records: &[IdempotencyRecord]) -> StoreResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        if self.pending.holds_idempotency() {
            self.send().await?;
        }
        self.pending.keep_idempotency(records);
        Ok(())
    }

    async fn commit(mut self: Box<Self>) -> StoreResult<()> {
        if let (Some(expected), true) = (self.deferred, self.head_moved) {
            // One statement, its own transaction: it writes only where the
            // head is still `expected`, and says so.
            self.open = true;
            let head = self.head;
            let cluster = self.cluster;
            let pending = std::mem::take(&mut self.pending);
            let c = self.conn.as_mut().expect("a write holds a connection");
            let written = pending
                .send_at(c, expected, head, cluster)
                .await
                .map_err(commit_error)?;
            self.open = false;
            if !written {
                return Err(crate::StoreError::Conflict(format!(
                    "the log's head moved from position {} before this writer's commit",
                    expected.position
                )));
            }
            if let Some(t) = self.tree.take() {
                t.committed(head);
            }
            return Ok(());
        }
        let finish = sql::finish(
            self.head_moved.then_some(self.head),
            self.cluster,
            pg_bytea,
            Some(NOTIFY_CHANNEL),
        );
        // A failed statement or commit leaves `open` set: the connection
        // is dropped, as it may be broken or hold an aborted transaction.
        // Until the COMMIT is sent, nothing can have been stored.
        self.send().await?;
        self.conn()
            .execute(finish.as_str())
            .await
            .map_err(commit_error)?;
        self.open = false;
        if let Some(t) = self.tree.take() {
            t.committed(self.head);
        }
        Ok(())
    }

    async fn replace_tree(&mut self, rows: &[TreeRow]) -> StoreResult<()> {
        if let Some(t) = self.tree.as_mut() {
            t.forget();
        }
        self.send().await?;
        self.conn().execute("DELETE FROM log_tree").await?;
        for chunk in rows.chunks(CHUNK) {
            sql::insert_tree_rows(chunk)
                .build()
                .execute(self.conn())
                .await?;
        }
        Ok(())
    }

    async fn rollback(mut self: Box<Self>) -> StoreResult<()> {
        if !self.open {
            // Nothing is open on the server (a deferred write).
            return Ok(());
        }
        self.conn().execute("ROLLBACK").await?;
        self.open = false;
        Ok(())
    }
}

/// What a failed `COMMIT` means. The server's refusal of one of the
/// batch's statements is definite: nothing was stored. A connection that
/// broke, or a server that ended the session while the commit was in flight
/// (`57P01`–`57P03`, `08xxx`: a primary shut down while it waited for its
/// synchronous standby says the commit "has already committed locally"),
/// leaves the outcome unknown.
fn commit_error(e: sqlx::Error) -> crate::StoreError {
    match &e {
        sqlx::Error::Database(db)
            if !db
                .code()
                .is_some_and(|c| c.starts_with("57P") || c.starts_with("08")) =>
        {
            e.into()
        }
        _ => crate::StoreError::OutcomeUnknown(e.to_string()),
    }
}

#[cfg(test)]
mod commit_tests {
    use super::*;

    #[test]
    fn a_commit_whose_connection_broke_has_an_unknown_outcome() {
        let broke = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(matches!(
            commit_error(broke),
            crate::StoreError::OutcomeUnknown(_)
        ));
        let closed = sqlx::Error::Protocol("the server closed the connection".into());
        assert!(matches!(
            commit_error(closed),
            crate::StoreError::OutcomeUnknown(_)
        ));
    }
}
