//! The SQLite backend, the embedded default: WAL with `synchronous=FULL`,
//! so an acknowledged command survives a power cut. One connection writes
//! (`BEGIN IMMEDIATE` serializes writers, also across processes), through
//! SQLite's C API ([`write`]); a small pool reads through sqlx.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection};
use stratum_domain::log::Recorded;

mod bulk;
mod write;

use self::bulk::Bulk;
use self::write::Writer;
use super::read::Reads;
use super::sql;

/// The reads both backends share, on this one.
type R = Reads<sqlx::Sqlite>;
type Registry = crate::replicas::Registry<sqlx::Sqlite>;
use super::{
    Access, ChunkBuilder, EventStore, Head, IdempotencyRecord, Leadership, Numbers, ReplayChunk,
    SignedCheckpoint, StoreError, StoreResult, StoredReadModels, VerifyChunk, WriteTx,
};
use crate::replicas::SQLITE_NOW;

/// `SQLITE_READONLY_DIRECTORY`: a journal or shared-memory file would be
/// needed in a directory that cannot be written.
const SQLITE_READONLY_DIRECTORY: &str = "1544";

/// A connection, and the schema version its database is at (`None`: no
/// stratum schema yet).
async fn connect_reading_schema(
    opts: &SqliteConnectOptions,
) -> Result<(SqliteConnection, Option<i64>), sqlx::Error> {
    let mut conn = opts.connect().await?;
    let found = match sqlx::query_scalar::<_, Option<i64>>(
        "SELECT MAX(version) FROM _sqlx_migrations WHERE success",
    )
    .fetch_one(&mut conn)
    .await
    {
        Ok(v) => v,
        Err(sqlx::Error::Database(e)) if e.message().contains("no such table") => None,
        Err(e) => return Err(e),
    };
    Ok((conn, found))
}

pub struct SqliteStore {
    read: SqlitePool,
    /// The one connection that writes; none when opened read-only.
    writer: Option<Writer>,
    /// Reads of the whole log through SQLite's C API; none in memory.
    bulk: Option<Arc<Bulk>>,
}

impl SqliteStore {
    pub async fn open(url: &str) -> StoreResult<Self> {
        Self::open_as(url, Access::ReadWrite).await
    }

    pub async fn open_as(url: &str, access: Access) -> StoreResult<Self> {
        let read_only = access == Access::ReadOnly;
        let mut opts = SqliteConnectOptions::from_str(url)?
            .create_if_missing(!read_only)
            .read_only(read_only)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        if !read_only {
            // A read-only open keeps whatever journal the file has.
            opts = opts
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full);
        }
        let mut immutable = false;
        let (mut first, found) = match connect_reading_schema(&opts).await {
            // A WAL database in a directory this user may not write: its
            // shared-memory file cannot be made. With no `-wal` or `-shm`
            // beside it, no service has it open, and it is read as the
            // immutable file it is.
            Err(sqlx::Error::Database(e))
                if read_only && e.code().as_deref() == Some(SQLITE_READONLY_DIRECTORY) =>
            {
                // A service that has the file open keeps its `-wal` and
                // `-shm` beside it; a copy of a stopped one has neither.
                let file = opts.get_filename().display().to_string();
                if let Some(beside) = ["-wal", "-shm"]
                    .iter()
                    .map(|s| format!("{file}{s}"))
                    .find(|p| std::path::Path::new(p).exists())
                {
                    return Err(StoreError::Schema(format!(
                        "{beside} is beside the database: it may be in use, or hold writes not yet \
                         in the file, and its directory cannot be written to read it safely; \
                         copy the files to a directory that can be written, or copy the \
                         database of a stopped service"
                    )));
                }
                opts = opts.immutable(true);
                immutable = true;
                connect_reading_schema(&opts).await?
            }
            other => other?,
        };
        let migrator = &super::SQLITE_MIGRATIONS;
        super::check_schema(found, migrator, access)?;
        if !read_only {
            migrator.run(&mut first).await?;
            crate::replicas::expand_sqlite(&mut first).await?;
        }
        let bulk = Bulk::of(url, &opts, immutable);
        // Opened while sqlx's first connection still holds a database in
        // memory open, so both see the same one.
        let writing = if read_only {
            None
        } else {
            Some(write::open(url, &opts)?)
        };
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(opts)
            .await?;
        drop(first);
        Ok(Self {
            writer: writing.map(Writer::new),
            read,
            bulk,
        })
    }
}

fn sqlite_blob(b: &[u8]) -> String {
    format!("X'{}'", hex::encode(b))
}

#[async_trait]
impl EventStore for SqliteStore {
    fn pool_stats(&self) -> Option<(u32, u32)> {
        Some((self.read.size(), self.read.num_idle() as u32))
    }

    async fn begin_write(&self) -> StoreResult<Box<dyn WriteTx>> {
        let writer = self.writer.as_ref().ok_or_else(|| {
            StoreError::Unavailable("the database was opened read-only: it takes no writes".into())
        })?;
        Ok(Box::new(writer.begin(self).await?))
    }

    async fn head(&self) -> StoreResult<Head> {
        if let Some(head) = self.bulk.as_ref().and_then(|b| b.head_now()) {
            return Ok(head);
        }
        R::head(&self.read).await
    }

    async fn read_after(&self, after: u64, limit: u32) -> StoreResult<Vec<Recorded>> {
        R::after(&self.read, after, i64::from(limit)).await
    }

    /// The bulk read path: straight through SQLite's C API on a blocking
    /// thread ([`Bulk`]), the payloads copied once into the chunk's buffer.
    async fn read_for_replay(&self, after: u64, limit: u32) -> StoreResult<ReplayChunk> {
        let Some(bulk) = self.bulk.clone() else {
            return self.read_for_replay_rows(after, limit).await;
        };
        tokio::task::spawn_blocking(move || bulk.replay_chunk(after, limit))
            .await
            .map_err(|e| StoreError::Unavailable(format!("a read of the log stopped: {e}")))?
    }

    /// Straight through SQLite's C API on a blocking thread ([`Bulk`]).
    async fn read_for_verify(&self, after: u64, until: u64) -> StoreResult<VerifyChunk> {
        let Some(bulk) = self.bulk.clone() else {
            return crate::verify_chunk_by_rows(self, after, until).await;
        };
        tokio::task::spawn_blocking(move || bulk.verify_chunk(after, until))
            .await
            .map_err(|e| StoreError::Unavailable(format!("a read of the log stopped: {e}")))?
    }

    async fn read_stream(&self, stream_id: &str) -> StoreResult<Vec<Recorded>> {
        R::stream(&self.read, stream_id).await
    }

    async fn read_stream_page(
        &self,
        stream_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<Recorded>> {
        R::stream_page(&self.read, stream_id, after, limit).await
    }

    async fn token_docs(&self) -> StoreResult<Vec<(String, String)>> {
        R::token_docs(&self.read).await
    }

    async fn cluster_row(&self) -> StoreResult<(u64, u64)> {
        R::cluster_row(&self.read).await
    }

    async fn idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        R::idempotency(&self.read, principal, key).await
    }

    async fn read_models(&self) -> StoreResult<StoredReadModels> {
        let versioned = R::versioned(&self.read).await?;
        // A read transaction reads one snapshot of the WAL: rows and
        // their position agree.
        let mut tx = self.read.begin().await?;
        let rows = R::read_models(&mut tx, versioned).await?;
        tx.commit().await?;
        Ok(rows)
    }

    async fn other_version_rows(&self, limit: u32) -> StoreResult<Vec<(String, String)>> {
        R::other_version_rows(&self.read, limit).await
    }

    async fn other_version_kinds(&self) -> StoreResult<Vec<String>> {
        R::other_version_kinds(&self.read).await
    }

    async fn try_lead(&self, _key: i64) -> StoreResult<Option<Leadership>> {
        Ok(Some(Leadership(None)))
    }

    async fn subscribe(&self) -> StoreResult<Option<tokio::sync::mpsc::UnboundedReceiver<u64>>> {
        Ok(None)
    }

    async fn register_replica(&self, row: &crate::ReplicaRow) -> StoreResult<()> {
        Registry::register(&self.read, SQLITE_NOW, row).await
    }

    async fn replica_heartbeat(&self, id: &str) -> StoreResult<bool> {
        Registry::heartbeat(&self.read, SQLITE_NOW, id).await
    }

    async fn replica_stopped(&self, id: &str) -> StoreResult<()> {
        Registry::stopped(&self.read, SQLITE_NOW, id).await
    }

    async fn replicas(&self) -> StoreResult<crate::Replicas> {
        Registry::all(&self.read, SQLITE_NOW).await
    }

    async fn put_snapshot(&self, position: u64, state: &[u8]) -> StoreResult<()> {
        R::put_snapshot(&self.read, position, state).await
    }

    async fn snapshot_at_or_before(&self, position: u64) -> StoreResult<Option<(u64, Vec<u8>)>> {
        R::snapshot_at_or_before(&self.read, position).await
    }

    async fn ping(&self) -> StoreResult<()> {
        let mut c = self.read.acquire().await?;
        c.ping().await?;
        Ok(())
    }

    async fn entries(&self, start: u64, end: u64) -> StoreResult<Vec<[u8; 32]>> {
        R::entries(&self.read, start, end).await
    }

    async fn tree_rows(&self, level: u8, start: u64, end: u64) -> StoreResult<Vec<[u8; 32]>> {
        R::tree_rows(&self.read, level, start, end).await
    }

    async fn signed_checkpoint(&self) -> StoreResult<Option<SignedCheckpoint>> {
        R::signed(&self.read).await
    }

    async fn put_signed_checkpoint(
        &self,
        c: &SignedCheckpoint,
        replaces: Option<[u8; 32]>,
    ) -> StoreResult<()> {
        R::put_signed(&self.read, c, replaces).await
    }
}

impl SqliteStore {
    /// [`EventStore::read_for_replay`] one row per event through sqlx: for
    /// a database in memory, which the bulk reader cannot open.
    async fn read_for_replay_rows(&self, after: u64, limit: u32) -> StoreResult<ReplayChunk> {
        use futures::TryStreamExt;
        let mut rows = sqlx::query(sql::SELECT_FOR_REPLAY)
            .bind(after as i64)
            .bind(i64::from(limit))
            .fetch(&self.read);
        let mut chunk = ChunkBuilder::with_payloads(limit.min(2_000) as usize);
        while let Some(row) = rows.try_next().await? {
            use sqlx::Row;
            chunk.push(
                Numbers {
                    position: row.try_get::<i64, _>(0)? as u64,
                    stream_version: row.try_get::<i64, _>(2)? as u64,
                    schema_version: row.try_get::<i64, _>(4)? as u16,
                    occurred_at: stratum_domain::log::micros_to_time(row.try_get(5)?),
                },
                [row.try_get(1)?, row.try_get(3)?, row.try_get(6)?],
                row.try_get(7)?,
            )?;
        }
        Ok(chunk.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Executor;

    /// The bulk reader gives back a payload's zero and high bytes and text
    /// beyond ASCII exactly; a value that is not what stratum writes is
    /// `Corrupt`, never a panic; a database in memory has no bulk reader.
    #[tokio::test]
    async fn the_bulk_reader_reads_back_every_byte() {
        let path = std::env::temp_dir().join(format!("stratum-bulk-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let mut c = SqliteConnectOptions::from_str(&url)
            .unwrap()
            .connect()
            .await
            .unwrap();
        c.execute(
            "CREATE TABLE events (position INTEGER PRIMARY KEY, stream_id TEXT NOT NULL, stream_version INTEGER NOT NULL, event_type TEXT NOT NULL, schema_version INTEGER NOT NULL, occurred_at INTEGER NOT NULL, principal TEXT NOT NULL, payload BLOB NOT NULL)",
        )
        .await
        .unwrap();
        // Position, stream, version, type, principal, payload.
        type Row<'a> = (i64, &'a str, i64, &'a str, &'a str, &'a [u8]);
        let rows: [Row; 3] = [
            (
                1,
                "member/n-1",
                1,
                "MemberAdmitted",
                "user/ann",
                &[0, 1, 0, 255, b' '],
            ),
            (2, "member/n-ü", 7, "JoinProgressReported", "user/日本", &[]),
            (3, "", 2, "T", "node/n 2", b"12 34 "),
        ];
        for (p, s, v, t, who, payload) in rows {
            sqlx::query("INSERT INTO events VALUES ($1, $2, $3, $4, 2, $5, $6, $7)")
                .bind(p)
                .bind(s)
                .bind(v)
                .bind(t)
                .bind(-1_000_000 * p)
                .bind(who)
                .bind(payload)
                .execute(&mut c)
                .await
                .unwrap();
        }
        let bulk = Bulk::of(&url, &SqliteConnectOptions::from_str(&url).unwrap(), false).unwrap();
        let chunk = bulk.replay_chunk(0, 10).unwrap();
        assert_eq!(chunk.len(), 3);
        for ((p, s, v, t, who, payload), e) in rows.into_iter().zip(chunk.iter()) {
            assert_eq!(
                (e.position, e.stream_id, e.stream_version, e.event_type),
                (p as u64, s, v as u64, t)
            );
            assert_eq!(
                (e.schema_version, e.principal, e.payload),
                (2, who, payload)
            );
            assert_eq!(
                e.occurred_at,
                stratum_domain::log::micros_to_time(-1_000_000 * p)
            );
        }
        assert_eq!(bulk.replay_chunk(1, 1).unwrap().last_position(), Some(2));
        assert!(bulk.replay_chunk(3, 10).unwrap().is_empty());
        // Bytes that are not UTF-8 where a text belongs, a BLOB where a
        // text belongs, or a text where a number belongs.
        for tamper in [
            "UPDATE events SET principal = CAST(principal AS BLOB) WHERE position = 2",
            "UPDATE events SET stream_id = CAST(x'ff00' AS TEXT) WHERE position = 2",
            "UPDATE events SET stream_version = 'seven' WHERE position = 2",
        ] {
            c.execute(tamper).await.unwrap();
            match bulk.replay_chunk(0, 10) {
                Err(StoreError::Corrupt(why)) => assert!(why.contains("event 2"), "{why}"),
                other => panic!("{tamper}: {other:?}"),
            }
        }
        drop(c);
        let _ = std::fs::remove_file(&path);
        for memory in [
            "sqlite::memory:",
            "sqlite://?mode=memory",
            "sqlite://x.db?mode=memory",
        ] {
            let opts = SqliteConnectOptions::from_str(memory).unwrap();
            assert!(Bulk::of(memory, &opts, false).is_none(), "{memory}");
        }
    }
}
