//! The PostgreSQL backend, for scale-out: any number of `stratum serve`
//! replicas share one database. A write locks the `log_head` row
//! (`SELECT ... FOR UPDATE`), so positions stay gap-free and in commit order
//! across replicas; `synchronous_commit` stays on. Each commit notifies
//! `stratum_events` so every replica wakes its watchers.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, Postgres, Row, Transaction};
use stratum_domain::log::Recorded;
use stratum_projections::Changes;

use super::sql::{self, CHUNK};
use super::{
    check_follows, head_from_row, idempotency_from_row, recorded_from_row, token_from_row, Backend,
    EventStore, Head, IdempotencyRecord, Leadership, MemberFilter, StoreResult, StoredReadModels,
    TokenAuth, WriteTx,
};

/// The channel every commit notifies with its last position.
pub const NOTIFY_CHANNEL: &str = "stratum_events";

pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    pub async fn open(url: &str) -> StoreResult<Self> {
        let opts = PgConnectOptions::from_str(url)?.application_name("stratum");
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            // A ping on every checkout costs 5-40% of throughput; a broken
            // connection fails its query instead, answered as UNAVAILABLE.
            .test_before_acquire(false)
            .connect_with(opts)
            .await?;
        sqlx::migrate!("../migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    async fn docs(
        &self,
        q: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
    ) -> StoreResult<Vec<String>> {
        Ok(q.fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| r.get::<String, _>(0))
            .collect())
    }
}

struct PgTx {
    tx: Transaction<'static, Postgres>,
    head: Head,
}

#[async_trait]
impl EventStore for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn begin_write(&self) -> StoreResult<Box<dyn WriteTx>> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query("SELECT position, hash FROM log_head WHERE id = 1 FOR UPDATE")
            .fetch_one(&mut *tx)
            .await?;
        let head = head_from_row(&row)?;
        Ok(Box::new(PgTx { tx, head }))
    }

    async fn head(&self) -> StoreResult<Head> {
        head_from_row(&sqlx::query(sql::SELECT_HEAD).fetch_one(&self.pool).await?)
    }

    async fn read_after(&self, after: u64, limit: u32) -> StoreResult<Vec<Recorded>> {
        sqlx::query(sql::SELECT_AFTER)
            .bind(after as i64)
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(recorded_from_row)
            .collect()
    }

    async fn read_stream(&self, stream_id: &str) -> StoreResult<Vec<Recorded>> {
        sqlx::query(sql::SELECT_STREAM)
            .bind(stream_id)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(recorded_from_row)
            .collect()
    }

    async fn member_doc(&self, node_id: &str) -> StoreResult<Option<String>> {
        Ok(self
            .docs(sqlx::query(sql::SELECT_MEMBER).bind(node_id))
            .await?
            .pop())
    }

    async fn member_docs(&self, f: &MemberFilter) -> StoreResult<Vec<String>> {
        self.docs(
            sqlx::query(sql::SELECT_MEMBERS)
                .bind(f.state.as_deref())
                .bind(f.role.as_deref())
                .bind(f.rack.as_deref())
                .bind(f.after.as_deref())
                .bind(f.limit as i64),
        )
        .await
    }

    async fn join_request_docs(
        &self,
        status: Option<&str>,
        after: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<String>> {
        self.docs(
            sqlx::query(sql::SELECT_JOIN_REQUESTS)
                .bind(status)
                .bind(after)
                .bind(limit as i64),
        )
        .await
    }

    async fn join_request_doc(&self, request_id: &str) -> StoreResult<Option<String>> {
        Ok(self
            .docs(sqlx::query(sql::SELECT_JOIN_REQUEST).bind(request_id))
            .await?
            .pop())
    }

    async fn token_by_secret(&self, secret_sha256: &[u8; 32]) -> StoreResult<Option<TokenAuth>> {
        sqlx::query(sql::SELECT_TOKEN_BY_SECRET)
            .bind(secret_sha256.as_slice())
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(token_from_row)
            .transpose()
    }

    async fn token_docs(&self) -> StoreResult<Vec<(String, String)>> {
        Ok(sqlx::query(sql::ALL_TOKENS)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| (r.get::<String, _>(0), r.get::<String, _>(1)))
            .collect())
    }

    async fn cluster_row(&self) -> StoreResult<(u64, u64)> {
        let row = sqlx::query(sql::SELECT_CLUSTER)
            .fetch_one(&self.pool)
            .await?;
        Ok((row.get::<i64, _>(0) as u64, row.get::<i64, _>(1) as u64))
    }

    async fn idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        sqlx::query(sql::SELECT_IDEMPOTENCY)
            .bind(principal)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(idempotency_from_row)
            .transpose()
    }

    async fn read_models(&self) -> StoreResult<StoredReadModels> {
        let pairs = |rows: Vec<sqlx::postgres::PgRow>| {
            rows.iter()
                .map(|r| (r.get::<String, _>(0), r.get::<String, _>(1)))
                .collect::<Vec<_>>()
        };
        let members = pairs(sqlx::query(sql::ALL_MEMBERS).fetch_all(&self.pool).await?);
        let join_requests = pairs(
            sqlx::query(sql::ALL_JOIN_REQUESTS)
                .fetch_all(&self.pool)
                .await?,
        );
        let tokens = self.token_docs().await?;
        let (generation, checkpoint) = self.cluster_row().await?;
        Ok(StoredReadModels {
            members,
            join_requests,
            tokens,
            generation,
            checkpoint,
        })
    }

    async fn try_lead(&self, key: i64) -> StoreResult<Option<Leadership>> {
        // A dedicated connection: the lock lives as long as its session.
        let mut conn = self.pool.acquire().await?.detach();
        let won: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut conn)
            .await?;
        Ok(won.then(|| Leadership(Box::new(std::sync::Mutex::new(conn)))))
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

    async fn ping(&self) -> StoreResult<()> {
        let mut c = self.pool.acquire().await?;
        c.ping().await?;
        Ok(())
    }
}

#[async_trait]
impl WriteTx for PgTx {
    fn head(&self) -> Head {
        self.head
    }

    async fn clear_read_models(&mut self) -> StoreResult<()> {
        for stmt in sql::CLEAR_READ_MODELS {
            sqlx::query(stmt).execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    async fn events_after(&mut self, after: u64) -> StoreResult<Vec<Recorded>> {
        sqlx::query(sql::SELECT_AFTER)
            .bind(after as i64)
            .bind(i64::MAX)
            .fetch_all(&mut *self.tx)
            .await?
            .iter()
            .map(recorded_from_row)
            .collect()
    }

    async fn stream_version(&mut self, stream_id: &str) -> StoreResult<u64> {
        let row = sqlx::query(sql::STREAM_VERSION)
            .bind(stream_id)
            .fetch_one(&mut *self.tx)
            .await?;
        Ok(row.get::<i64, _>(0) as u64)
    }

    async fn idempotency(
        &mut self,
        principal: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        sqlx::query(sql::SELECT_IDEMPOTENCY)
            .bind(principal)
            .bind(key)
            .fetch_optional(&mut *self.tx)
            .await?
            .as_ref()
            .map(idempotency_from_row)
            .transpose()
    }

    async fn append(&mut self, events: &[Recorded]) -> StoreResult<()> {
        let Some(last) = events.last() else {
            return Ok(());
        };
        check_follows(self.head, events)?;
        for chunk in events.chunks(CHUNK) {
            sql::insert_events(chunk)
                .build()
                .execute(&mut *self.tx)
                .await?;
        }
        sqlx::query(sql::UPDATE_HEAD)
            .bind(last.position as i64)
            .bind(last.hash.as_slice())
            .execute(&mut *self.tx)
            .await?;
        self.head = Head {
            position: last.position,
            hash: last.hash,
        };
        Ok(())
    }

    async fn write_changes(&mut self, changes: &Changes, checkpoint: u64) -> StoreResult<()> {
        for chunk in changes.members.chunks(CHUNK) {
            sql::upsert_members(chunk)
                .build()
                .execute(&mut *self.tx)
                .await?;
        }
        for chunk in changes.tokens.chunks(CHUNK) {
            sql::upsert_tokens(chunk)
                .build()
                .execute(&mut *self.tx)
                .await?;
        }
        for chunk in changes.join_requests.chunks(CHUNK) {
            sql::upsert_join_requests(chunk)
                .build()
                .execute(&mut *self.tx)
                .await?;
        }
        sqlx::query(sql::UPDATE_CLUSTER)
            .bind(changes.generation.map(|g| g as i64))
            .bind(checkpoint as i64)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn put_idempotency(&mut self, records: &[IdempotencyRecord]) -> StoreResult<()> {
        for chunk in records.chunks(CHUNK) {
            sql::insert_idempotency(chunk)
                .build()
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(())
    }

    async fn commit(mut self: Box<Self>) -> StoreResult<()> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(NOTIFY_CHANNEL)
            .bind(self.head.position.to_string())
            .execute(&mut *self.tx)
            .await?;
        self.tx.commit().await?;
        Ok(())
    }

    async fn rollback(self: Box<Self>) -> StoreResult<()> {
        self.tx.rollback().await?;
        Ok(())
    }
}
