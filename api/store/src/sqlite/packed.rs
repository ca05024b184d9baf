//! The values SQLite packs a chunk of the log into on its own thread
//! (`sql::SELECT_FOR_REPLAY_PACKED`, `sql::SELECT_FOR_VERIFY_PACKED`):
//! decimal numbers each followed by a space, then the values' bytes by
//! those lengths. Read here without copying the payloads.

use std::ops::Range;

use super::super::{
    ChunkBuilder, Numbers, ReplayChunk, StoreError, StoreResult, VerifyBuilder, VerifyChunk,
    VerifyNumbers,
};

fn corrupt() -> StoreError {
    StoreError::Corrupt("a chunk of the events".into())
}

/// A cursor over one packed value.
struct Packed<'a> {
    data: &'a [u8],
    at: usize,
}

impl Packed<'_> {
    fn more(&self) -> bool {
        self.at < self.data.len()
    }

    fn number(&mut self) -> StoreResult<i64> {
        let rest = &self.data[self.at..];
        let end = rest.iter().position(|&b| b == b' ').ok_or_else(corrupt)?;
        let n = std::str::from_utf8(&rest[..end])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(corrupt)?;
        self.at += end + 1;
        Ok(n)
    }

    fn numbers<const N: usize>(&mut self) -> StoreResult<[i64; N]> {
        let mut n = [0; N];
        for v in &mut n {
            *v = self.number()?;
        }
        Ok(n)
    }

    /// The next `len` bytes; `None` for a NULL (-1).
    fn optional(&mut self, len: i64) -> StoreResult<Option<Range<usize>>> {
        if len == -1 {
            return Ok(None);
        }
        self.range(len).map(Some)
    }

    fn range(&mut self, len: i64) -> StoreResult<Range<usize>> {
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| self.at.checked_add(len))
            .filter(|&end| end <= self.data.len())
            .ok_or_else(corrupt)?;
        let r = self.at..end;
        self.at = end;
        Ok(r)
    }

    fn text(&self, r: Range<usize>) -> StoreResult<&str> {
        std::str::from_utf8(&self.data[r]).map_err(|_| corrupt())
    }
}

fn unsigned<T: TryFrom<i64>>(n: i64) -> StoreResult<T> {
    T::try_from(n).map_err(|_| corrupt())
}

/// The events of one `SELECT_FOR_REPLAY_PACKED` value: their payloads stay
/// where they are in it, their texts are checked and gathered.
pub(super) fn unpack(data: Vec<u8>) -> StoreResult<ReplayChunk> {
    let mut chunk = ChunkBuilder::with_capacity(data.len() / 256);
    let mut p = Packed { data: &data, at: 0 };
    while p.more() {
        let [position, stream_version, schema_version, time, stream_id, event_type, principal, payload] =
            p.numbers()?;
        let stream_id = p.range(stream_id)?;
        let event_type = p.range(event_type)?;
        let principal = p.range(principal)?;
        let payload = p.range(payload)?;
        chunk.push_at(
            Numbers {
                position: unsigned(position)?,
                stream_version: unsigned(stream_version)?,
                schema_version: unsigned(schema_version)?,
                occurred_at: stratum_domain::log::micros_to_time(time),
            },
            [p.text(stream_id)?, p.text(event_type)?, p.text(principal)?],
            payload,
        )?;
    }
    Ok(chunk.finish_with(bytes::Bytes::from(data)))
}

/// The four values of one `SELECT_FOR_VERIFY_PACKED` row (the numbers, the
/// texts, the payloads, the hashes): every field the chain covers. The
/// payloads stay where they are.
pub(super) fn unpack_verify(
    [numbers, texts, payloads, hashes]: [Vec<u8>; 4],
) -> StoreResult<VerifyChunk> {
    let mut chunk = VerifyBuilder::with_capacity(numbers.len() / 64);
    let mut n = Packed {
        data: &numbers,
        at: 0,
    };
    let mut t = Packed {
        data: &texts,
        at: 0,
    };
    let mut p = Packed {
        data: &payloads,
        at: 0,
    };
    let mut h = Packed {
        data: &hashes,
        at: 0,
    };
    while n.more() {
        let [position, stream_version, schema_version, time, no_causation, causation, stream_id, event_type, event_id, principal, request_id, correlation, client_request_id, payload, prev_hash, hash] =
            n.numbers()?;
        let stream_id = t.range(stream_id)?;
        let event_type = t.range(event_type)?;
        let event_id = t.range(event_id)?;
        let principal = t.range(principal)?;
        let request_id = t.optional(request_id)?;
        let correlation = t.optional(correlation)?;
        let client_request_id = t.optional(client_request_id)?;
        let payload = p.range(payload)?;
        let prev_hash = h.range(prev_hash)?;
        let hash = h.range(hash)?;
        let optional = |r: Option<Range<usize>>| r.map(|r| t.text(r)).transpose();
        chunk.push(
            VerifyNumbers {
                position: unsigned(position)?,
                stream_version: unsigned(stream_version)?,
                schema_version: unsigned(schema_version)?,
                occurred_at_micros: time,
                causation: match no_causation {
                    0 => Some(unsigned(causation)?),
                    _ => None,
                },
            },
            [
                Some(t.text(stream_id)?),
                Some(t.text(event_type)?),
                Some(t.text(principal)?),
                optional(request_id)?,
                optional(correlation)?,
                optional(client_request_id)?,
            ],
            &texts[event_id],
            payload,
            [&hashes[prev_hash], &hashes[hash]],
        )?;
    }
    if t.more() || p.more() || h.more() {
        return Err(corrupt());
    }
    Ok(chunk.finish_with(bytes::Bytes::from(payloads)))
}
