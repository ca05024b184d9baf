//! The read half both backends share. The statements are the same text on
//! SQLite and PostgreSQL (`sql.rs`), and so is what is made of their rows:
//! these functions run them on any executor of either database, a read
//! pool or the writer's connection inside a write.
//!
//! What differs stays in the backends: how a write begins and ends, the
//! bulk replay read (one JSON aggregate on SQLite, binary `COPY` on
//! PostgreSQL), advisory locks and notifications.

use std::marker::PhantomData;

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};
use stratum_domain::log::Recorded;

use super::sql;
use super::{
    hash32, head_from_row, idempotency_from_row, recorded_from_row, Head, IdempotencyRecord,
    SignedCheckpoint, StoreResult, StoredReadModels,
};

/// The shared reads on the database `DB`: `Reads::<Sqlite>::head(&pool)`.
pub(crate) struct Reads<DB>(PhantomData<DB>);

impl<DB> Reads<DB>
where
    DB: Database,
    for<'q> <DB as Database>::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> &'q [u8]: Encode<'q, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
    for<'r> i64: Decode<'r, DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> Option<String>: Decode<'r, DB>,
    for<'r> Option<i64>: Decode<'r, DB>,
    for<'r> Vec<u8>: Decode<'r, DB> + Type<DB>,
{
    pub(crate) async fn head<'e, E: Executor<'e, Database = DB>>(e: E) -> StoreResult<Head> {
        head_from_row(&sqlx::query(sql::SELECT_HEAD).fetch_one(e).await?)
    }

    /// Up to `limit` events after `after`, in position order.
    pub(crate) async fn after<'e, E: Executor<'e, Database = DB>>(
        e: E,
        after: u64,
        limit: i64,
    ) -> StoreResult<Vec<Recorded>> {
        sqlx::query(sql::SELECT_AFTER)
            .bind(after as i64)
            .bind(limit)
            .fetch_all(e)
            .await?
            .iter()
            .map(recorded_from_row)
            .collect()
    }

    pub(crate) async fn stream<'e, E: Executor<'e, Database = DB>>(
        e: E,
        stream_id: &str,
    ) -> StoreResult<Vec<Recorded>> {
        sqlx::query(sql::SELECT_STREAM)
            .bind(stream_id)
            .fetch_all(e)
            .await?
            .iter()
            .map(recorded_from_row)
            .collect()
    }

    pub(crate) async fn stream_page<'e, E: Executor<'e, Database = DB>>(
        e: E,
        stream_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<Recorded>> {
        sqlx::query(sql::SELECT_STREAM_PAGE)
            .bind(stream_id)
            .bind(after as i64)
            .bind(i64::from(limit))
            .fetch_all(e)
            .await?
            .iter()
            .map(recorded_from_row)
            .collect()
    }

    pub(crate) async fn stream_version<'e, E: Executor<'e, Database = DB>>(
        e: E,
        stream_id: &str,
    ) -> StoreResult<u64> {
        let row = sqlx::query(sql::STREAM_VERSION)
            .bind(stream_id)
            .fetch_one(e)
            .await?;
        Ok(row.try_get::<i64, _>(0)? as u64)
    }

    /// `(id, doc)` pairs, for the read model listings.
    async fn pairs<'e, E: Executor<'e, Database = DB>>(
        e: E,
        statement: &'static str,
    ) -> StoreResult<Vec<(String, String)>> {
        sqlx::query(statement)
            .fetch_all(e)
            .await?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }

    pub(crate) async fn token_docs<'e, E: Executor<'e, Database = DB>>(
        e: E,
    ) -> StoreResult<Vec<(String, String)>> {
        Self::pairs(e, sql::ALL_TOKENS).await
    }

    pub(crate) async fn cluster_row<'e, E: Executor<'e, Database = DB>>(
        e: E,
    ) -> StoreResult<(u64, u64)> {
        let row = sqlx::query(sql::SELECT_CLUSTER).fetch_one(e).await?;
        Ok((
            row.try_get::<i64, _>(0)? as u64,
            row.try_get::<i64, _>(1)? as u64,
        ))
    }

    pub(crate) async fn idempotency<'e, E: Executor<'e, Database = DB>>(
        e: E,
        principal: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        sqlx::query(sql::SELECT_IDEMPOTENCY)
            .bind(principal)
            .bind(key)
            .fetch_optional(e)
            .await?
            .as_ref()
            .map(idempotency_from_row)
            .transpose()
    }

    /// Every read-model row and the position they stand at, on one
    /// connection: in a transaction the backend began with a snapshot of
    /// one moment, so the rows and their position agree while others
    /// write. `versioned`: the rows have projection versions (see
    /// [`sql::HAS_PROJECTION_VERSIONS`]); without, every row is version 1.
    pub(crate) async fn read_models(
        conn: &mut DB::Connection,
        versioned: bool,
    ) -> StoreResult<StoredReadModels>
    where
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    {
        let mut other_versions = Vec::new();
        let mut table = [
            ("member", sql::ALL_MEMBERS, sql::ALL_MEMBERS_PV),
            (
                "join-request",
                sql::ALL_JOIN_REQUESTS,
                sql::ALL_JOIN_REQUESTS_PV,
            ),
            ("token", sql::ALL_TOKENS, sql::ALL_TOKENS_PV),
            ("doc", sql::ALL_DOCS, sql::ALL_DOCS_PV),
        ]
        .into_iter();
        let mut next = async |conn: &mut DB::Connection| -> StoreResult<Vec<(String, String)>> {
            let (kind, plain, with_pv) = table.next().expect("four tables");
            let rows = sqlx::query(if versioned { with_pv } else { plain })
                .fetch_all(&mut *conn)
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                let (id, doc): (String, String) = (r.try_get(0)?, r.try_get(1)?);
                let v: i64 = if versioned { r.try_get(2)? } else { 1 };
                let (k, i) = match kind {
                    "doc" => id.split_once('/').unwrap_or((id.as_str(), "")),
                    _ => (kind, id.as_str()),
                };
                if v != i64::from(stratum_projections::versions::version_of_kind(k)) {
                    other_versions.push((k.to_owned(), i.to_owned(), v as u32));
                }
                out.push((id, doc));
            }
            Ok(out)
        };
        let members = next(&mut *conn).await?;
        let join_requests = next(&mut *conn).await?;
        let tokens = next(&mut *conn).await?;
        let docs = next(&mut *conn).await?;
        let (generation, checkpoint) = Self::cluster_row(&mut *conn).await?;
        Ok(StoredReadModels {
            members,
            join_requests,
            tokens,
            docs,
            generation,
            checkpoint,
            other_versions,
        })
    }

    /// Whether the read-model rows have projection versions: false only
    /// where the database says the column is not there.
    pub(crate) async fn versioned<'e, E: Executor<'e, Database = DB>>(e: E) -> StoreResult<bool> {
        match sqlx::query(sql::HAS_PROJECTION_VERSIONS).fetch_all(e).await {
            Ok(_) => Ok(true),
            Err(sqlx::Error::Database(db)) if db.message().contains("projection_version") => {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The kinds of every row of other projection versions than this
    /// build's.
    pub(crate) async fn other_version_kinds<'e, E: Executor<'e, Database = DB>>(
        e: E,
    ) -> StoreResult<Vec<String>> {
        sqlx::query(sql::OTHER_VERSION_KINDS.as_str())
            .fetch_all(e)
            .await?
            .iter()
            .map(|r| Ok(r.try_get(0)?))
            .collect()
    }

    /// Up to `limit` rows, as (kind, id), of other projection versions
    /// than this build's.
    pub(crate) async fn other_version_rows<'e, E: Executor<'e, Database = DB>>(
        e: E,
        limit: u32,
    ) -> StoreResult<Vec<(String, String)>> {
        sqlx::query(sql::OTHER_VERSION_ROWS.as_str())
            .bind(i64::from(limit))
            .fetch_all(e)
            .await?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }

    /// Keeps a snapshot and prunes the others (`sql::PRUNE_SNAPSHOTS`), in
    /// one transaction on one connection of `pool`.
    pub(crate) async fn put_snapshot(
        pool: &sqlx::Pool<DB>,
        position: u64,
        state: &[u8],
    ) -> StoreResult<()>
    where
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    {
        let mut tx = pool.begin().await?;
        sqlx::query(sql::PUT_SNAPSHOT)
            .bind(position as i64)
            .bind(state)
            .execute(&mut *tx)
            .await?;
        sqlx::query(sql::PRUNE_SNAPSHOTS)
            .bind(crate::SNAPSHOTS_NEWEST as i64)
            .bind(crate::SNAPSHOT_SPACING as i64)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn snapshot_at_or_before<'e, E: Executor<'e, Database = DB>>(
        e: E,
        position: u64,
    ) -> StoreResult<Option<(u64, Vec<u8>)>> {
        sqlx::query(sql::SELECT_SNAPSHOT)
            .bind(position as i64)
            .fetch_optional(e)
            .await?
            .map(|r| Ok((r.try_get::<i64, _>(0)? as u64, r.try_get(1)?)))
            .transpose()
    }

    /// The chain hashes of the events at positions `start + 1 ..= end`.
    pub(crate) async fn entries<'e, E: Executor<'e, Database = DB>>(
        e: E,
        start: u64,
        end: u64,
    ) -> StoreResult<Vec<[u8; 32]>> {
        sqlx::query(sql::SELECT_ENTRIES)
            .bind(start as i64)
            .bind(end as i64)
            .fetch_all(e)
            .await?
            .iter()
            .map(|r| hash32(r.try_get(0)?, "an event's hash"))
            .collect()
    }

    /// The kept tree rows of tile level `level` at indexes `start..end`.
    pub(crate) async fn tree_rows<'e, E: Executor<'e, Database = DB>>(
        e: E,
        level: u8,
        start: u64,
        end: u64,
    ) -> StoreResult<Vec<[u8; 32]>> {
        sqlx::query(sql::SELECT_TREE_ROWS)
            .bind(i64::from(level))
            .bind(start as i64)
            .bind(end as i64)
            .fetch_all(e)
            .await?
            .iter()
            .map(|r| hash32(r.try_get(0)?, "a tree hash"))
            .collect()
    }

    pub(crate) async fn signed<'e, E: Executor<'e, Database = DB>>(
        e: E,
    ) -> StoreResult<Option<SignedCheckpoint>> {
        sqlx::query(sql::SELECT_SIGNED)
            .fetch_optional(e)
            .await?
            .map(|r| {
                Ok(SignedCheckpoint {
                    size: r.try_get::<i64, _>(0)? as u64,
                    root: hash32(r.try_get(1)?, "a signed root")?,
                    note: r.try_get(2)?,
                })
            })
            .transpose()
    }

    pub(crate) async fn put_signed<'e, E: Executor<'e, Database = DB>>(
        e: E,
        c: &SignedCheckpoint,
        replaces: Option<[u8; 32]>,
    ) -> StoreResult<()> {
        let replaces = replaces.unwrap_or([0; 32]);
        sqlx::query(sql::PUT_SIGNED)
            .bind(c.size as i64)
            .bind(c.root.as_slice())
            .bind(c.note.as_str())
            .bind(replaces.as_slice())
            .execute(e)
            .await?;
        Ok(())
    }
}
