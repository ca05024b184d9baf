//! The PostgreSQL backend, for scale-out: any number of `stratum serve`
//! replicas share one database. A write locks the `log_head` row
//! (`SELECT ... FOR UPDATE`), so positions stay gap-free and in commit order
//! across replicas; `synchronous_commit` stays on. Each commit notifies
//! `stratum_events` so every replica wakes its watchers.

use std::time::Duration;

use async_trait::async_trait;
use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use stratum_domain::log::Recorded;
use tokio::sync::{Mutex, Notify, OwnedMutexGuard};

use super::pg_target::{self, Target};
use super::read::Reads;
use super::sql::{self, CHUNK};

/// The reads both backends share, on this one.
type R = Reads<sqlx::Postgres>;
type Registry = crate::replicas::Registry<sqlx::Postgres>;
use super::tree::{TreeCache, TreeWrite};
use super::{
    head_from_row, Access, EventStore, Head, IdempotencyRecord, Leadership, ReplayChunk,
    SignedCheckpoint, StoreResult, StoredReadModels, VerifyChunk, WriteTx,
};
use crate::replicas::POSTGRES_NOW;

/// The channel every commit notifies with its last position.
pub const NOTIFY_CHANNEL: &str = "stratum_events";

/// How long the first connection may take before the start names the
/// server that does not answer (a filtered port never refuses).
const FIRST_CONNECT: Duration = Duration::from_secs(2);

pub struct PgStore {
    /// Its connect options are the chosen host's, moved with it.
    pool: PgPool,
    /// The connection this process writes through. Writes are serialized by
    /// the `log_head` row lock anyway, and one connection lets a write end
    /// in one round trip. `None` until first used, or after it broke.
    /// (Also the token the task that follows the chosen host lives by: it
    /// ends when the store is dropped.)
    writer: Arc<Mutex<Option<PgConnection>>>,
    /// The tree's right edge after this process's last write.
    tree: Arc<TreeCache>,
}

/// Which host of a [`Target`] the connections go to, and since when.
struct Chosen {
    target: Target,
    host: AtomicUsize,
    /// When the connections last moved: a pooled connection older than
    /// that was made to another host and is closed, not used.
    moved_at: std::sync::Mutex<Option<Instant>>,
    /// The sessions of a read-only open are read-only by our own setting;
    /// the server's state alone tells whether it is the host asked for.
    read_only_access: bool,
    /// Wakes the follower at once (a new connection landed on the wrong
    /// host).
    wake: Notify,
}

impl Chosen {
    /// Whether a new session is on a host of the kind asked for.
    async fn admit(&self, c: &mut PgConnection) -> Result<(), sqlx::Error> {
        let attrs = self.target.attrs;
        let (in_recovery, read_only) = pg_target::check(c).await.map_err(sqlx::Error::Protocol)?;
        let read_only = if self.read_only_access {
            in_recovery
        } else {
            read_only
        };
        // The follower decides where a standby is preferred.
        if attrs.to_keep().accepts(in_recovery, read_only) {
            return Ok(());
        }
        self.wake.notify_one();
        Err(sqlx::Error::Protocol(format!(
            "{} is no longer a {} session (target_session_attrs); moving",
            self.target.describe(self.host.load(Ordering::Acquire)),
            attrs.as_str()
        )))
    }

    fn fresh(&self, age: Duration) -> bool {
        match *self.moved_at.lock().expect("not poisoned") {
            Some(at) => age <= at.elapsed(),
            None => true,
        }
    }
}

/// Follows the host a [`Target`] chooses: every second, or at once when a
/// new session landed on the wrong host, it probes the chosen host (on a
/// session it keeps), and when that is no longer what was asked for (it
/// went down, or a failover made it a standby) it finds the one that is and
/// moves the pool and the writer's connection there; `LISTEN` and the
/// advisory lock follow through the pool when their sessions end. Ends when
/// the store is dropped.
async fn follow(
    chosen: Arc<Chosen>,
    pool: PgPool,
    writer: std::sync::Weak<Mutex<Option<PgConnection>>>,
) {
    let mut probe = None;
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = chosen.wake.notified() => {}
        }
        let Some(writer) = writer.upgrade() else {
            return;
        };
        let at = chosen.host.load(Ordering::Acquire);
        let keep = chosen.target.attrs.to_keep();
        let why = match chosen.target.probe_on(&mut probe, at, keep).await {
            Ok(()) => continue,
            Err(why) => why,
        };
        probe = None;
        let to = match chosen.target.locate().await {
            Ok(to) if to == at => continue,
            Ok(to) => to,
            Err(e) => {
                tracing::warn!(error = %e, "the database's chosen host is gone and no other answers yet");
                continue;
            }
        };
        tracing::warn!(
            from = %chosen.target.describe(at),
            to = %chosen.target.describe(to),
            %why,
            "moving the database connections to the host that is now the {} one",
            chosen.target.attrs.as_str()
        );
        pool.set_connect_options(options_for(&chosen.target, to, chosen.read_only_access));
        *chosen.moved_at.lock().expect("not poisoned") = Some(Instant::now());
        chosen.host.store(to, Ordering::Release);
        if let Ok(mut w) = writer.try_lock() {
            w.take();
        };
    }
}

fn options_for(target: &Target, i: usize, read_only: bool) -> PgConnectOptions {
    let opts = target.options(i).application_name(crate::APPLICATION_NAME);
    if read_only {
        // The server itself refuses every write of these sessions.
        opts.options([("default_transaction_read_only", "on")])
    } else {
        opts
    }
}

impl PgStore {
    /// `COPY (query) TO STDOUT (FORMAT binary)`: the rows as one byte
    /// stream instead of one protocol message and one driver row each.
    /// `COPY` takes no parameters, so the query's `$1`, `$2`... are
    /// written in as the integers `args` (nothing a caller passes reaches
    /// the text): the same statement the other backend binds.
    async fn copy_out(&self, query: &str, args: &[i64]) -> StoreResult<bytes::Bytes> {
        use futures::StreamExt;
        use sqlx::postgres::PgPoolCopyExt;
        // The highest first, so `$1` never takes the front of `$10`.
        let query = (1..=args.len()).rev().fold(query.to_owned(), |q, n| {
            q.replace(&format!("${n}"), &args[n - 1].to_string())
        });
        let statement = format!("COPY ({query}) TO STDOUT (FORMAT binary)");
        let mut stream = self.pool.copy_out_raw(&statement).await?;
        let mut data = bytes::BytesMut::new();
        while let Some(chunk) = stream.next().await {
            data.extend_from_slice(&chunk?);
        }
        Ok(data.freeze())
    }

    /// The writer's one connection, opened when it is not.
    async fn writer_connection(&self) -> StoreResult<OwnedMutexGuard<Option<PgConnection>>> {
        let mut conn = self.writer.clone().lock_owned().await;
        if conn.is_none() {
            // A writer that stalls holding the log's lock must not freeze
            // every replica: the server ends such a session.
            let opts = (*self.pool.connect_options())
                .clone()
                .options([("idle_in_transaction_session_timeout", "30s")]);
            // A host that went away without a word (a crash, no TCP
            // reset) must not hold every write of this replica.
            *conn = Some(
                tokio::time::timeout(FIRST_CONNECT * 5, opts.connect())
                    .await
                    .map_err(|_| {
                        super::StoreError::Unavailable(format!(
                            "the writer's connection to PostgreSQL did not open within {}s",
                            (FIRST_CONNECT * 5).as_secs()
                        ))
                    })??,
            );
        }
        Ok(conn)
    }

    /// Begins a write under the log's lock: one round trip.
    async fn begin_locked(&self, conn: OwnedMutexGuard<Option<PgConnection>>) -> StoreResult<PgTx> {
        let mut tx = PgTx::begin(conn).await?;
        let mut tree = TreeWrite::begin(&self.tree, tx.head);
        if tree.needs_load() {
            // Under the write lock, through the pool: what it reads is
            // committed and no other write can move it. Rows of events
            // another build appended are built here and kept in this write.
            match super::tree::frontier_repairing(self, tx.head.position).await {
                Ok((f, repaired)) => {
                    for chunk in repaired.chunks(CHUNK) {
                        sql::insert_tree_rows(chunk)
                            .build()
                            .execute(tx.conn())
                            .await?;
                    }
                    tree.load(Ok(f));
                }
                Err(e) => tree.load(Err(e)),
            }
        }
        tx.tree = Some(tree);
        Ok(tx)
    }

    pub async fn open(url: &str) -> StoreResult<Self> {
        Self::open_as(url, Access::ReadWrite).await
    }

    pub async fn open_as(url: &str, access: Access) -> StoreResult<Self> {
        let read_only = access == Access::ReadOnly;
        let target = Target::parse(url)?;
        let target = if read_only {
            target
        } else {
            target.for_writing()?
        };
        // A host list, or a session asked for: the hosts are probed in
        // order, and the first with the session asked for is chosen (or
        // every host's answer named).
        let host = if target.chooses() {
            target.locate().await?
        } else {
            0
        };
        let opts = options_for(&target, host, read_only);
        // One connection first, so a server that is down or refuses us is
        // named with its error at once, not as a pool timeout 10 s later.
        if !target.chooses() {
            use sqlx::Connection;
            let at = format!("{}:{}", opts.get_host(), opts.get_port());
            let first =
                tokio::time::timeout(FIRST_CONNECT, sqlx::PgConnection::connect_with(&opts))
                    .await
                    .map_err(|_| {
                        super::StoreError::Unavailable(format!(
                            "cannot connect to PostgreSQL at {at}: no answer within {}",
                            humantime::format_duration(FIRST_CONNECT)
                        ))
                    })?
                    .map_err(|e| {
                        super::StoreError::Unavailable(format!(
                            "cannot connect to PostgreSQL at {at}: {e}"
                        ))
                    })?;
            first.close().await.ok();
        }
        let chosen = target.chooses().then(|| {
            Arc::new(Chosen {
                target,
                host: AtomicUsize::new(host),
                moved_at: std::sync::Mutex::new(None),
                read_only_access: read_only,
                wake: Notify::new(),
            })
        });
        let mut pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            // A ping on every checkout costs 5-40% of throughput; a broken
            // connection fails its query instead, answered as UNAVAILABLE.
            .test_before_acquire(false);
        if let Some(chosen) = &chosen {
            // Every new session is checked to be on a host of the kind
            // asked for, and one made before the last move is closed.
            let (admit, fresh) = (chosen.clone(), chosen.clone());
            pool = pool
                .after_connect(move |c, _| {
                    let chosen = admit.clone();
                    Box::pin(async move { chosen.admit(c).await })
                })
                .before_acquire(move |_, meta| {
                    let fresh = fresh.fresh(meta.age);
                    Box::pin(async move { Ok(fresh) })
                });
        }
        let pool = pool.connect_with(opts.clone()).await?;
        let migrator = &super::POSTGRES_MIGRATIONS;
        let found: Option<i64> = match sqlx::query_scalar::<_, Option<i64>>(
            "SELECT MAX(version) FROM _sqlx_migrations WHERE success",
        )
        .fetch_one(&pool)
        .await
        {
            Ok(v) => v,
            // 42P01: undefined_table, a database stratum never migrated.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P01") => None,
            Err(e) => return Err(e.into()),
        };
        super::check_schema(found, migrator, access)?;
        if access == Access::ReadWrite {
            migrator.run(&pool).await?;
            crate::replicas::expand_postgres(&pool).await?;
        }
        let writer = Arc::new(Mutex::new(None));
        if let Some(chosen) = chosen {
            tokio::spawn(follow(chosen, pool.clone(), Arc::downgrade(&writer)));
        }
        Ok(Self {
            pool,
            writer,
            tree: Arc::default(),
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[async_trait]
impl EventStore for PgStore {
    fn pool_stats(&self) -> Option<(u32, u32)> {
        Some((self.pool.size(), self.pool.num_idle() as u32))
    }

    async fn begin_write(&self) -> StoreResult<Box<dyn WriteTx>> {
        let conn = self.writer_connection().await?;
        Ok(Box::new(self.begin_locked(conn).await?))
    }

    /// No round trip: the write is kept until its commit, which checks the
    /// head and writes the batch in one statement (`PgTx::commit`). Where
    /// the tree's edge is not the one `expected` leaves, the write begins
    /// under the lock as [`EventStore::begin_write`] does.
    async fn begin_write_at(&self, expected: Head) -> StoreResult<Box<dyn WriteTx>> {
        let conn = self.writer_connection().await?;
        let tree = TreeWrite::begin(&self.tree, expected);
        if tree.needs_load() {
            let tx = self.begin_locked(conn).await?;
            return crate::at_head(Box::new(tx), expected).await;
        }
        Ok(Box::new(PgTx::deferred(conn, expected, tree)))
    }

    /// A write begun at a head is kept until its commit's one statement.
    fn defers_writes(&self) -> bool {
        true
    }

    async fn head(&self) -> StoreResult<Head> {
        R::head(&self.pool).await
    }

    async fn read_after(&self, after: u64, limit: u32) -> StoreResult<Vec<Recorded>> {
        R::after(&self.pool, after, i64::from(limit)).await
    }

    /// The bulk read path: `COPY ... TO STDOUT (FORMAT binary)`, which
    /// streams the rows as one byte stream instead of one protocol message
    /// and one driver row per event.
    async fn read_for_replay(&self, after: u64, limit: u32) -> StoreResult<ReplayChunk> {
        let data = self
            .copy_out(sql::SELECT_FOR_REPLAY, &[after as i64, i64::from(limit)])
            .await?;
        copy_binary::events(data)
    }

    /// Every column the chain covers, by binary `COPY` as replay reads.
    async fn read_for_verify(&self, after: u64, until: u64) -> StoreResult<VerifyChunk> {
        let until = until.min(i64::MAX as u64) as i64;
        let data = self
            .copy_out(sql::SELECT_RANGE, &[after as i64, until])
            .await?;
        copy_binary::verify_events(data)
    }

    async fn read_stream(&self, stream_id: &str) -> StoreResult<Vec<Recorded>> {
        R::stream(&self.pool, stream_id).await
    }

    async fn read_stream_page(
        &self,
        stream_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<Recorded>> {
        R::stream_page(&self.pool, stream_id, after, limit).await
    }

    async fn token_docs(&self) -> StoreResult<Vec<(String, String)>> {
        R::token_docs(&self.pool).await
    }

    async fn cluster_row(&self) -> StoreResult<(u64, u64)> {
        R::cluster_row(&self.pool).await
    }

    async fn idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        R::idempotency(&self.pool, principal, key).await
    }

    async fn read_models(&self) -> StoreResult<StoredReadModels> {
        let versioned = R::versioned(&self.pool).await?;
        // One snapshot for every table: rows and their position agree.
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let rows = R::read_models(&mut tx, versioned).await?;
        tx.commit().await?;
        Ok(rows)
    }

    async fn other_version_rows(&self, limit: u32) -> StoreResult<Vec<(String, String)>> {
        R::other_version_rows(&self.pool, limit).await
    }

    async fn other_version_kinds(&self) -> StoreResult<Vec<String>> {
        R::other_version_kinds(&self.pool).await
    }

    async fn try_lead(&self, key: i64) -> StoreResult<Option<Leadership>> {
        // A dedicated connection: the lock lives as long as its session.
        let mut conn = self.pool.acquire().await?.detach();
        let won: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut conn)
            .await?;
        Ok(won.then(|| Leadership(Some(tokio::sync::Mutex::new(conn)))))
    }

    async fn subscribe(&self) -> StoreResult<Option<tokio::sync::mpsc::UnboundedReceiver<u64>>> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.listen(NOTIFY_CHANNEL).await?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                match listener.try_recv().await {
                    Ok(Some(n)) => {
                        if let Ok(p) = n.payload().parse::<u64>() {
                            if tx.send(p).is_err() {
                                return;
                            }
                        }
                    }
                    // The connection dropped; the listener reconnects on the
                    // next call, and polling covers what was missed.
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, "LISTEN failed; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(Some(rx))
    }

    async fn register_replica(&self, row: &crate::ReplicaRow) -> StoreResult<()> {
        Registry::register(&self.pool, POSTGRES_NOW, row).await
    }

    async fn replica_heartbeat(&self, id: &str) -> StoreResult<bool> {
        Registry::heartbeat(&self.pool, POSTGRES_NOW, id).await
    }

    async fn replica_stopped(&self, id: &str) -> StoreResult<()> {
        Registry::stopped(&self.pool, POSTGRES_NOW, id).await
    }

    async fn replicas(&self) -> StoreResult<crate::Replicas> {
        Registry::all(&self.pool, POSTGRES_NOW).await
    }

    async fn unregistered_clients(&self) -> StoreResult<Vec<String>> {
        let rows: Vec<(i32, String, String)> = sqlx::query_as(
            "SELECT pid, COALESCE(host(client_addr), 'a local socket'), \
                    to_char(backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') \
             FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = 'stratum' \
               AND pid <> pg_backend_pid() ORDER BY backend_start, pid",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(pid, from, since)| format!("pid {pid} from {from} since {since}"))
            .collect())
    }

    async fn put_snapshot(&self, position: u64, state: &[u8]) -> StoreResult<()> {
        R::put_snapshot(&self.pool, position, state).await
    }

    async fn snapshot_at_or_before(&self, position: u64) -> StoreResult<Option<(u64, Vec<u8>)>> {
        R::snapshot_at_or_before(&self.pool, position).await
    }

    async fn ping(&self) -> StoreResult<()> {
        let mut c = self.pool.acquire().await?;
        c.ping().await?;
        Ok(())
    }

    async fn entries(&self, start: u64, end: u64) -> StoreResult<Vec<[u8; 32]>> {
        R::entries(&self.pool, start, end).await
    }

    async fn tree_rows(&self, level: u8, start: u64, end: u64) -> StoreResult<Vec<[u8; 32]>> {
        R::tree_rows(&self.pool, level, start, end).await
    }

    async fn signed_checkpoint(&self) -> StoreResult<Option<SignedCheckpoint>> {
        R::signed(&self.pool).await
    }

    async fn put_signed_checkpoint(
        &self,
        c: &SignedCheckpoint,
        replaces: Option<[u8; 32]>,
    ) -> StoreResult<()> {
        R::put_signed(&self.pool, c, replaces).await
    }
}

mod batch;
mod copy_binary;
mod write;

use self::write::PgTx;
