//! Rows as both backends decode them: events, kept answers, the log's
//! head.

use sqlx::{ColumnIndex, Decode, Row, Type};
use stratum_domain::log::{micros_to_time, EventMeta, Recorded};

use crate::{Head, IdempotencyRecord, StoreError, StoreResult};

pub(crate) fn hash32(v: Vec<u8>, what: &str) -> StoreResult<[u8; 32]> {
    v.try_into()
        .map_err(|_| StoreError::Corrupt(format!("{what} is not 32 bytes")))
}

/// Decodes an `events` row selected with every column (`sql::SELECT_RANGE`'s),
/// on either backend.
pub(crate) fn recorded_from_row<'r, R>(row: &'r R) -> StoreResult<Recorded>
where
    R: Row,
    usize: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
{
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let position: i64 = row.try_get(0).map_err(corrupt)?;
    let event_id: String = row.try_get(5).map_err(corrupt)?;
    Ok(Recorded {
        position: position as u64,
        stream_id: row.try_get(1).map_err(corrupt)?,
        stream_version: row.try_get::<i64, _>(2).map_err(corrupt)? as u64,
        event_type: row.try_get(3).map_err(corrupt)?,
        schema_version: row.try_get::<i64, _>(4).map_err(corrupt)? as u16,
        event_id: event_id
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("event {position} has a bad event id")))?,
        occurred_at: micros_to_time(row.try_get(6).map_err(corrupt)?),
        meta: EventMeta {
            principal: row.try_get(7).map_err(corrupt)?,
            request_id: row.try_get(8).map_err(corrupt)?,
            causation: row
                .try_get::<Option<i64>, _>(9)
                .map_err(corrupt)?
                .map(|c| c as u64),
            correlation: row.try_get(10).map_err(corrupt)?,
            client_request_id: row.try_get(14).map_err(corrupt)?,
        },
        payload: row.try_get(11).map_err(corrupt)?,
        prev_hash: hash32(row.try_get(12).map_err(corrupt)?, "prev_hash")?,
        hash: hash32(row.try_get(13).map_err(corrupt)?, "hash")?,
    })
}

/// The events of an append must continue the chain from the locked head.
pub(crate) fn check_follows(head: Head, events: &[Recorded]) -> StoreResult<()> {
    let mut prev = head;
    for e in events {
        if e.position != prev.position + 1 || e.prev_hash != prev.hash {
            return Err(StoreError::Conflict(format!(
                "event at position {} does not follow the head {}",
                e.position, prev.position
            )));
        }
        prev = Head {
            position: e.position,
            hash: e.hash,
        };
    }
    Ok(())
}

pub(crate) fn idempotency_from_row<'r, R>(row: &'r R) -> StoreResult<IdempotencyRecord>
where
    R: Row,
    usize: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
{
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    Ok(IdempotencyRecord {
        principal: row.try_get(0).map_err(corrupt)?,
        key: row.try_get(1).map_err(corrupt)?,
        request_hash: row.try_get(2).map_err(corrupt)?,
        status: row.try_get::<i64, _>(3).map_err(corrupt)? as u16,
        body: row.try_get(4).map_err(corrupt)?,
        etag: row
            .try_get::<Option<i64>, _>(5)
            .map_err(corrupt)?
            .map(|e| e as u64),
        position: row.try_get::<i64, _>(6).map_err(corrupt)? as u64,
    })
}

pub(crate) fn head_from_row<'r, R>(row: &'r R) -> StoreResult<Head>
where
    R: Row,
    usize: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
{
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    Ok(Head {
        position: row.try_get::<i64, _>(0).map_err(corrupt)? as u64,
        hash: hash32(row.try_get(1).map_err(corrupt)?, "head hash")?,
    })
}
