//! The bulk reads of a SQLite log (replaying it, verifying it) straight through SQLite's
//! C API with `rusqlite`: one `sqlite3_step` per row on the calling
//! (blocking) thread, its columns borrowed where SQLite holds them. Through
//! sqlx every row, or every packed chunk, is handed over from its worker
//! thread, and packing a chunk in SQL (`printf`, concatenation) was most
//! of the work in the verify profile.
//!
//! Its connections are read-only and separate from sqlx's pool; a database
//! they cannot open (one in memory) is read through sqlx instead.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::super::{
    ChunkBuilder, Numbers, ReplayChunk, StoreError, StoreResult, VerifyBuilder, VerifyChunk,
    VerifyNumbers,
};
use crate::sql;

/// A few read-only connections to one database file, kept between reads.
#[derive(Debug)]
pub(super) struct Bulk {
    path: PathBuf,
    immutable: bool,
    idle: Mutex<Vec<Connection>>,
}

fn corrupt(position: i64, what: &'static str) -> StoreError {
    StoreError::Corrupt(format!("event {position} has a bad {what}"))
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Unavailable(e.to_string())
    }
}

impl Bulk {
    /// Bulk reads of the database at `path`; none for one in memory.
    pub(super) fn of(path: PathBuf, immutable: bool) -> Option<Arc<Self>> {
        let name = path.to_string_lossy();
        if name.is_empty() || name.starts_with(':') || name.contains("mode=memory") {
            return None;
        }
        Some(Arc::new(Bulk {
            path,
            immutable,
            idle: Mutex::new(Vec::new()),
        }))
    }

    /// Runs `f` on an idle connection (opened if none is), then keeps it.
    fn with<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match idle {
            Some(c) => c,
            None => self.open()?,
        };
        let out = f(&conn);
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(conn);
        out
    }

    fn open(&self) -> StoreResult<Connection> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let conn = if self.immutable {
            // A stopped service's copy in a directory this user cannot
            // write (see `SqliteStore::open_as`).
            let path = self
                .path
                .to_string_lossy()
                .replace('%', "%25")
                .replace('?', "%3f")
                .replace('#', "%23");
            Connection::open_with_flags(format!("file:{path}?immutable=1"), flags)?
        } else {
            Connection::open_with_flags(&self.path, flags)?
        };
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        Ok(conn)
    }

    /// [`EventStore::read_for_verify`](crate::EventStore::read_for_verify):
    /// the events at positions `after + 1 ..= until`, every column the
    /// chain covers, as SQLite holds them.
    pub(super) fn verify_chunk(&self, after: u64, until: u64) -> StoreResult<VerifyChunk> {
        self.with(|conn| {
            let mut stmt = conn.prepare_cached(concat!(
                sql::select_all!(),
                " WHERE position > ?1 AND position <= ?2 ORDER BY position"
            ))?;
            let mut rows = stmt.query((after as i64, until.min(i64::MAX as u64) as i64))?;
            let mut chunk =
                VerifyBuilder::with_capacity(until.saturating_sub(after).min(4096) as usize);
            let mut payloads = Vec::new();
            while let Some(row) = rows.next()? {
                let ValueRef::Integer(position) = row.get_ref(0)? else {
                    return Err(StoreError::Corrupt(
                        "an event's position is not an integer".into(),
                    ));
                };
                let int = |i: usize, what: &'static str| -> StoreResult<i64> {
                    row.get_ref(i)?
                        .as_i64()
                        .map_err(|_| corrupt(position, what))
                };
                let bytes = |i: usize, what: &'static str| -> StoreResult<Option<&[u8]>> {
                    match row.get_ref(i)? {
                        ValueRef::Null => Ok(None),
                        ValueRef::Text(b) | ValueRef::Blob(b) => Ok(Some(b)),
                        _ => Err(corrupt(position, what)),
                    }
                };
                let text = |i: usize, what: &'static str| -> StoreResult<Option<&str>> {
                    bytes(i, what)?
                        .map(|b| std::str::from_utf8(b).map_err(|_| corrupt(position, what)))
                        .transpose()
                };
                let required = |i: usize, what: &'static str| -> StoreResult<&str> {
                    text(i, what)?.ok_or_else(|| corrupt(position, what))
                };
                let payload = bytes(11, "payload")?.ok_or_else(|| corrupt(position, "payload"))?;
                let start = payloads.len();
                payloads.extend_from_slice(payload);
                let unsigned = |n: i64, what: &'static str| {
                    u64::try_from(n).map_err(|_| corrupt(position, what))
                };
                chunk.push(
                    VerifyNumbers {
                        position: unsigned(position, "position")?,
                        stream_version: unsigned(int(2, "stream version")?, "stream version")?,
                        schema_version: u16::try_from(int(4, "schema version")?)
                            .map_err(|_| corrupt(position, "schema version"))?,
                        occurred_at_micros: int(6, "time")?,
                        causation: match row.get_ref(9)? {
                            ValueRef::Null => None,
                            ValueRef::Integer(c) => Some(unsigned(c, "causation")?),
                            _ => return Err(corrupt(position, "causation")),
                        },
                    },
                    [
                        Some(required(1, "stream id")?),
                        Some(required(3, "event type")?),
                        Some(required(7, "principal")?),
                        text(8, "request id")?,
                        text(10, "correlation")?,
                        text(14, "caller's request id")?,
                    ],
                    bytes(5, "event id")?.unwrap_or_default(),
                    start..payloads.len(),
                    [
                        bytes(12, "prev_hash")?.unwrap_or_default(),
                        bytes(13, "hash")?.unwrap_or_default(),
                    ],
                )?;
            }
            Ok(chunk.finish_with(bytes::Bytes::from(payloads)))
        })
    }

    /// [`EventStore::read_for_replay`](crate::EventStore::read_for_replay):
    /// up to `limit` events after `after`, with what a fold reads.
    pub(super) fn replay_chunk(&self, after: u64, limit: u32) -> StoreResult<ReplayChunk> {
        self.with(|conn| {
            let mut stmt = conn.prepare_cached(sql::SELECT_FOR_REPLAY)?;
            let mut rows = stmt.query((after as i64, i64::from(limit)))?;
            let mut chunk = ChunkBuilder::with_capacity(limit.min(4096) as usize);
            while let Some(row) = rows.next()? {
                let ValueRef::Integer(position) = row.get_ref(0)? else {
                    return Err(StoreError::Corrupt(
                        "an event's position is not an integer".into(),
                    ));
                };
                let int = |i: usize, what: &'static str| -> StoreResult<i64> {
                    row.get_ref(i)?
                        .as_i64()
                        .map_err(|_| corrupt(position, what))
                };
                let text = |i: usize, what: &'static str| -> StoreResult<&str> {
                    row.get_ref(i)?
                        .as_str()
                        .map_err(|_| corrupt(position, what))
                };
                let unsigned = |n: i64, what: &'static str| {
                    u64::try_from(n).map_err(|_| corrupt(position, what))
                };
                chunk.push(
                    Numbers {
                        position: unsigned(position, "position")?,
                        stream_version: unsigned(int(2, "stream version")?, "stream version")?,
                        schema_version: u16::try_from(int(4, "schema version")?)
                            .map_err(|_| corrupt(position, "schema version"))?,
                        occurred_at: stratum_domain::log::micros_to_time(int(5, "time")?),
                    },
                    [
                        text(1, "stream id")?,
                        text(3, "event type")?,
                        text(6, "principal")?,
                    ],
                    row.get_ref(7)?
                        .as_bytes()
                        .map_err(|_| corrupt(position, "payload"))?,
                )?;
            }
            Ok(chunk.finish())
        })
    }
}
