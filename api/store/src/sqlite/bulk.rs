//! The bulk reads of a SQLite log (replaying it, verifying it) straight
//! through SQLite's C API with `rusqlite`: one `sqlite3_step` per row on the
//! calling (blocking) thread, its columns borrowed where SQLite holds them.
//! Through sqlx every row, or every packed chunk, is handed over from its
//! worker thread, and packing a chunk in SQL (`printf`, concatenation) was
//! most of the work in the verify profile.
//!
//! Its connections are read-only and separate from sqlx's pool, opened on
//! the same file with the same `immutable` and `vfs` options; a database in
//! memory (which another connection cannot see) is read through sqlx.

use std::sync::{Arc, Mutex};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Row};
use sqlx::sqlite::SqliteConnectOptions;

use super::super::{
    ChunkBuilder, Head, Numbers, ReplayChunk, StoreError, StoreResult, VerifyBuilder, VerifyChunk,
    VerifyNumbers,
};
use crate::sql;

/// A few read-only connections to one database file, kept between reads.
#[derive(Debug)]
pub(super) struct Bulk {
    /// The SQLite URI of the file, read-only, with sqlx's options.
    uri: String,
    idle: Mutex<Vec<Connection>>,
    /// The connection [`Bulk::head_now`] reads the head on, opened on
    /// first use.
    head: Mutex<Option<Connection>>,
}

fn corrupt(position: i64, what: &'static str) -> StoreError {
    StoreError::Corrupt(format!("event {position} has a bad {what}"))
}

/// One row of the events, its columns checked as the row readers (sqlx)
/// check them: a text only from TEXT, bytes only from a BLOB, a number
/// only from an INTEGER.
struct Columns<'r, 's> {
    row: &'r Row<'s>,
    position: i64,
}

impl<'r> Columns<'r, '_> {
    fn of<'s>(row: &'r Row<'s>) -> StoreResult<Columns<'r, 's>> {
        match row.get_ref(0)? {
            ValueRef::Integer(position) => Ok(Columns { row, position }),
            _ => Err(StoreError::Corrupt(
                "an event's position is not an integer".into(),
            )),
        }
    }

    fn int(&self, i: usize, what: &'static str) -> StoreResult<i64> {
        match self.row.get_ref(i)? {
            ValueRef::Integer(n) => Ok(n),
            _ => Err(corrupt(self.position, what)),
        }
    }

    fn optional_int(&self, i: usize, what: &'static str) -> StoreResult<Option<i64>> {
        match self.row.get_ref(i)? {
            ValueRef::Null => Ok(None),
            _ => self.int(i, what).map(Some),
        }
    }

    fn optional_text(&self, i: usize, what: &'static str) -> StoreResult<Option<&'r str>> {
        match self.row.get_ref(i)? {
            ValueRef::Null => Ok(None),
            ValueRef::Text(b) => std::str::from_utf8(b)
                .map(Some)
                .map_err(|_| corrupt(self.position, what)),
            _ => Err(corrupt(self.position, what)),
        }
    }

    fn text(&self, i: usize, what: &'static str) -> StoreResult<&'r str> {
        self.optional_text(i, what)?
            .ok_or_else(|| corrupt(self.position, what))
    }

    fn blob(&self, i: usize, what: &'static str) -> StoreResult<&'r [u8]> {
        match self.row.get_ref(i)? {
            ValueRef::Blob(b) => Ok(b),
            _ => Err(corrupt(self.position, what)),
        }
    }
}

impl Bulk {
    /// Bulk reads of the database that `url` names and sqlx opened with
    /// `opts` (`immutable` where the store opened it so); none for one in
    /// memory. The options sqlx reads from the URL's query that change
    /// which database, or how it is read, are given to SQLite too.
    pub(super) fn of(url: &str, opts: &SqliteConnectOptions, immutable: bool) -> Option<Arc<Self>> {
        if in_memory(url) {
            return None;
        }
        let mut query = String::from("mode=ro");
        if immutable {
            query.push_str("&immutable=1");
        }
        for (key, value) in params(url) {
            match (key, value) {
                ("immutable", "true" | "1") if !immutable => query.push_str("&immutable=1"),
                ("vfs", vfs) => query.push_str(&format!("&vfs={vfs}")),
                _ => {}
            }
        }
        Some(Arc::new(Bulk {
            uri: file_uri(&opts.get_filename().to_string_lossy(), &query),
            idle: Mutex::new(Vec::new()),
            head: Mutex::new(None),
        }))
    }

    fn open(&self) -> StoreResult<Connection> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        Ok(Connection::open_with_flags(&self.uri, flags)?)
    }

    /// The log's head, read on the calling thread when that costs no wait;
    /// `None` when it would, and the caller reads it through sqlx. Every
    /// request's freshness check reads the head (`api/src/reads.rs`), and
    /// through sqlx each read is two hand-offs between threads, which led
    /// the write path's profile (`finish_task_switch`); here it is one
    /// indexed row on the calling thread, a few microseconds. Its
    /// connection has no busy handler, so a lock held elsewhere answers at
    /// once; `None` too while another call holds the connection, and on
    /// any error, which the read through sqlx then reports as before. The
    /// statement ends with the row: no read transaction outlives the call.
    pub(super) fn head_now(&self) -> Option<Head> {
        let mut slot = self.head.try_lock().ok()?;
        if slot.is_none() {
            *slot = Some(self.open().ok()?);
        }
        let conn = slot.as_ref()?;
        let mut stmt = conn.prepare_cached(sql::SELECT_HEAD).ok()?;
        let (position, hash) = stmt
            .query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
            .ok()?;
        Some(Head {
            position: u64::try_from(position).ok()?,
            hash: hash.try_into().ok()?,
        })
    }

    /// Runs `f` on an idle connection (opened if none is), then keeps it.
    fn with<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match idle {
            Some(c) => c,
            None => {
                let conn = self.open()?;
                conn.busy_timeout(std::time::Duration::from_secs(10))?;
                conn
            }
        };
        let out = f(&conn);
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(conn);
        out
    }

    /// [`EventStore::read_for_verify`](crate::EventStore::read_for_verify),
    /// a [`range`].
    pub(super) fn verify_chunk(&self, after: u64, until: u64) -> StoreResult<VerifyChunk> {
        self.with(|conn| range(conn, after, until))
    }

    /// [`EventStore::read_for_replay`](crate::EventStore::read_for_replay):
    /// up to `limit` events after `after`, with what a fold reads.
    pub(super) fn replay_chunk(&self, after: u64, limit: u32) -> StoreResult<ReplayChunk> {
        self.with(|conn| {
            let mut stmt = conn.prepare_cached(sql::SELECT_FOR_REPLAY)?;
            let mut rows = stmt.query((after as i64, i64::from(limit)))?;
            let mut chunk = ChunkBuilder::with_payloads(limit.min(4096) as usize);
            while let Some(row) = rows.next()? {
                let c = Columns::of(row)?;
                let unsigned = |n: i64, what: &'static str| {
                    u64::try_from(n).map_err(|_| corrupt(c.position, what))
                };
                chunk.push(
                    Numbers {
                        position: unsigned(c.position, "position")?,
                        stream_version: unsigned(c.int(2, "stream version")?, "stream version")?,
                        schema_version: u16::try_from(c.int(4, "schema version")?)
                            .map_err(|_| corrupt(c.position, "schema version"))?,
                        occurred_at: stratum_domain::log::micros_to_time(c.int(5, "time")?),
                    },
                    [
                        c.text(1, "stream id")?,
                        c.text(3, "event type")?,
                        c.text(6, "principal")?,
                    ],
                    c.blob(7, "payload")?,
                )?;
            }
            Ok(chunk.finish())
        })
    }
}

/// The events at positions `after + 1 ..= until` on `conn`, every column
/// the chain covers, as SQLite holds them. Numbers are taken as the row
/// reader takes them (a negative version wraps), so a changed one is a
/// hash that does not match, at its position.
pub(super) fn range(conn: &Connection, after: u64, until: u64) -> StoreResult<VerifyChunk> {
    let mut stmt = conn.prepare_cached(sql::SELECT_RANGE)?;
    let mut rows = stmt.query((after as i64, until.min(i64::MAX as u64) as i64))?;
    let expected = until.saturating_sub(after).min(4096) as usize;
    let mut chunk = VerifyBuilder::with_capacity(expected);
    let mut payloads = Vec::with_capacity(expected * crate::chunk::PAYLOAD_BYTES);
    while let Some(row) = rows.next()? {
        let c = Columns::of(row)?;
        let start = payloads.len();
        payloads.extend_from_slice(c.blob(11, "payload")?);
        chunk.push(
            VerifyNumbers {
                position: c.position as u64,
                stream_version: c.int(2, "stream version")? as u64,
                schema_version: c.int(4, "schema version")? as u16,
                occurred_at_micros: c.int(6, "time")?,
                causation: c.optional_int(9, "causation")?.map(|n| n as u64),
            },
            [
                c.text(1, "stream id")?,
                c.text(3, "event type")?,
                c.text(7, "principal")?,
            ],
            [
                c.optional_text(8, "request id")?,
                c.optional_text(10, "correlation")?,
                c.optional_text(14, "caller's request id")?,
            ],
            c.text(5, "event id")?.as_bytes(),
            start..payloads.len(),
            [c.blob(12, "prev_hash")?, c.blob(13, "hash")?],
        )?;
    }
    Ok(chunk.finish_with(bytes::Bytes::from(payloads)))
}

/// The `key=value` pairs of a `sqlite:` URL's query.
pub(super) fn params(url: &str) -> impl Iterator<Item = (&str, &str)> {
    let params = url.split_once('?').map_or("", |(_, q)| q);
    params
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
}

/// Whether a `sqlite:` URL names a database in memory, as sqlx reads it.
pub(super) fn in_memory(url: &str) -> bool {
    let rest = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    let database = rest.split_once('?').map_or(rest, |(d, _)| d);
    database == ":memory:" || params(url).any(|p| p == ("mode", "memory"))
}

/// A SQLite URI of the file at `path` with `query`: `file:` then the path,
/// an absolute one after an empty authority, so a path that starts with
/// `//` is not read as a host.
pub(super) fn file_uri(path: &str, query: &str) -> String {
    let sep = if path.starts_with('/') { "//" } else { "" };
    format!("file:{sep}{}?{query}", escape(path))
}

/// A path or value as SQLite's URI reads it: `%`, `?`, `#` and `&`
/// escaped.
fn escape(s: &str) -> String {
    s.replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23")
        .replace('&', "%26")
}
