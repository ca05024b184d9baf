//! Reads PostgreSQL's binary `COPY` format (the documented file format of
//! `COPY ... (FORMAT binary)`: a signature, flags and a header extension,
//! then per row a 16-bit field count and per field a 32-bit length and the
//! value in its binary send format, then a -1 trailer) for the replay
//! columns: BIGINT is 8 bytes big-endian, TEXT is UTF-8, BYTEA is raw.

use super::super::{
    ChunkBuilder, Numbers, ReplayChunk, StoreError, StoreResult, VerifyBuilder, VerifyChunk,
    VerifyNumbers,
};

const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("binary COPY of the events: {what}"))
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> StoreResult<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.data.len());
        let end = end.ok_or_else(|| corrupt("it ends inside a row"))?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn i16(&mut self) -> StoreResult<i16> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn i32(&mut self) -> StoreResult<i32> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn field(&mut self) -> StoreResult<&'a [u8]> {
        let len = self.i32()?;
        let len = usize::try_from(len).map_err(|_| corrupt("a NULL where none may be"))?;
        self.take(len)
    }
    fn int8(&mut self) -> StoreResult<i64> {
        let f = self.field()?;
        Ok(i64::from_be_bytes(
            f.try_into()
                .map_err(|_| corrupt("a BIGINT is not 8 bytes"))?,
        ))
    }
    fn text(&mut self) -> StoreResult<&'a str> {
        std::str::from_utf8(self.field()?).map_err(|_| corrupt("TEXT is not UTF-8"))
    }
    /// A field that may be NULL (length -1).
    fn optional(&mut self) -> StoreResult<Option<&'a [u8]>> {
        let len = self.i32()?;
        match usize::try_from(len) {
            Ok(len) => self.take(len).map(Some),
            Err(_) if len == -1 => Ok(None),
            Err(_) => Err(corrupt("a negative length")),
        }
    }
    fn optional_text(&mut self) -> StoreResult<Option<&'a str>> {
        self.optional()?
            .map(|f| std::str::from_utf8(f).map_err(|_| corrupt("TEXT is not UTF-8")))
            .transpose()
    }
    /// The header, checked.
    fn header(&mut self) -> StoreResult<()> {
        if self.take(SIGNATURE.len())? != SIGNATURE {
            return Err(corrupt("no PGCOPY signature"));
        }
        let _flags = self.i32()?;
        let extension = usize::try_from(self.i32()?).map_err(|_| corrupt("a bad header"))?;
        self.take(extension)?;
        Ok(())
    }
    /// The next row's field count: `None` at the trailer.
    fn row(&mut self, fields: i16) -> StoreResult<Option<()>> {
        match self.i16()? {
            -1 => Ok(None),
            n if n == fields => Ok(Some(())),
            n => Err(corrupt(&format!("a row of {n} fields, not {fields}"))),
        }
    }
    /// Where the field just read ends in the data, as a range of `len`.
    fn just_read(&self, len: usize) -> std::ops::Range<usize> {
        self.at - len..self.at
    }
}

/// The rows of `SELECT_AFTER`'s columns (every field the chain covers), in
/// order; their payloads stay where they are in `data`.
pub(super) fn verify_events(data: bytes::Bytes) -> StoreResult<VerifyChunk> {
    let mut r = Reader { data: &data, at: 0 };
    r.header()?;
    let mut out = VerifyBuilder::with_capacity(data.len() / 256);
    while r.row(15)?.is_some() {
        let position = r.int8()? as u64;
        let stream_id = r.text()?;
        let stream_version = r.int8()? as u64;
        let event_type = r.text()?;
        let schema_version = r.int8()? as u16;
        let event_id = r.field()?;
        let occurred_at_micros = r.int8()?;
        let principal = r.text()?;
        let request_id = r.optional_text()?;
        let causation = r
            .optional()?
            .map(|f| f.try_into().map(i64::from_be_bytes))
            .transpose()
            .map_err(|_| corrupt("a BIGINT is not 8 bytes"))?;
        let correlation = r.optional_text()?;
        let payload = r.field()?;
        let payload = r.just_read(payload.len());
        let prev_hash = r.field()?;
        let hash = r.field()?;
        let client_request_id = r.optional_text()?;
        out.push(
            VerifyNumbers {
                position,
                stream_version,
                schema_version,
                occurred_at_micros,
                causation: causation.map(|c| c as u64),
            },
            [stream_id, event_type, principal],
            [request_id, correlation, client_request_id],
            event_id,
            payload,
            [prev_hash, hash],
        )?;
    }
    Ok(out.finish_with(data.clone()))
}

/// The rows of `SELECT_FOR_REPLAY`, in order; their payloads stay
/// where they are in `data`.
pub(super) fn events(data: bytes::Bytes) -> StoreResult<ReplayChunk> {
    let mut r = Reader { data: &data, at: 0 };
    r.header()?;
    let mut out = ChunkBuilder::with_capacity(data.len() / 256);
    loop {
        if r.row(8)?.is_none() {
            return Ok(out.finish_with(data.clone()));
        }
        let position = r.int8()? as u64;
        let stream_id = r.text()?;
        let stream_version = r.int8()? as u64;
        let event_type = r.text()?;
        let schema_version = r.int8()? as u16;
        let occurred_at = stratum_domain::log::micros_to_time(r.int8()?);
        let principal = r.text()?;
        let payload = r.field()?;
        // Where the payload is in `data`.
        let end = r.at;
        out.push_at(
            Numbers {
                position,
                stream_version,
                schema_version,
                occurred_at,
            },
            [stream_id, event_type, principal],
            end - payload.len()..end,
        )?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(out: &mut Vec<u8>, v: &[u8]) {
        out.extend_from_slice(&(v.len() as i32).to_be_bytes());
        out.extend_from_slice(v);
    }

    /// One row as PostgreSQL writes it, after the header.
    fn copy_of(position: i64, payload: &[u8]) -> Vec<u8> {
        let mut out = SIGNATURE.to_vec();
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&8i16.to_be_bytes());
        field(&mut out, &position.to_be_bytes());
        field(&mut out, b"member-n-1");
        field(&mut out, &3i64.to_be_bytes());
        field(&mut out, b"JoinProgressReported");
        field(&mut out, &1i64.to_be_bytes());
        field(&mut out, &1_700_000_000_000_000i64.to_be_bytes());
        field(&mut out, b"user/ann");
        field(&mut out, payload);
        out.extend_from_slice(&(-1i16).to_be_bytes());
        out
    }

    /// One row of every column (`SELECT_RANGE`), as PostgreSQL writes it.
    fn verify_copy_of(position: i64) -> Vec<u8> {
        let null = |out: &mut Vec<u8>| out.extend_from_slice(&(-1i32).to_be_bytes());
        let mut out = SIGNATURE.to_vec();
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&15i16.to_be_bytes());
        field(&mut out, &position.to_be_bytes());
        field(&mut out, b"member/n-1");
        field(&mut out, &3i64.to_be_bytes());
        field(&mut out, b"JoinProgressReported");
        field(&mut out, &1i64.to_be_bytes());
        field(&mut out, b"00000000-0000-0000-0000-000000000007");
        field(&mut out, &1_700_000_000_000_000i64.to_be_bytes());
        field(&mut out, b"user/ann");
        null(&mut out);
        field(&mut out, &6i64.to_be_bytes());
        null(&mut out);
        field(&mut out, b"payload");
        field(&mut out, &[1; 32]);
        field(&mut out, &[2; 32]);
        field(&mut out, b"deploy-42");
        out.extend_from_slice(&(-1i16).to_be_bytes());
        out
    }

    #[test]
    fn reads_every_column_postgres_writes_and_a_cut_is_corrupt() {
        let whole = verify_copy_of(7);
        let chunk = verify_events(whole.clone().into()).unwrap();
        let e = chunk.iter().next().unwrap();
        assert_eq!(
            (e.position, e.stream_id, e.stream_version, e.schema_version),
            (7, "member/n-1", 3, 1)
        );
        assert_eq!(e.event_id, uuid::Uuid::from_u128(7));
        assert_eq!(
            (
                e.request_id,
                e.causation,
                e.correlation,
                e.client_request_id
            ),
            (None, Some(6), None, Some("deploy-42"))
        );
        assert_eq!(
            (e.payload, e.prev_hash, e.hash),
            (&b"payload"[..], [1; 32], [2; 32])
        );
        for cut in 0..whole.len() {
            assert!(
                verify_events(whole[..cut].to_vec().into()).is_err(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn reads_the_rows_postgres_writes() {
        let events = events(copy_of(42, &[1, 2, 3]).into()).unwrap();
        assert_eq!(events.len(), 1);
        let e = events.get(0).unwrap();
        assert_eq!((e.position, e.stream_version, e.schema_version), (42, 3, 1));
        assert_eq!(e.stream_id, "member-n-1");
        assert_eq!(e.event_type, "JoinProgressReported");
        assert_eq!(e.principal, "user/ann");
        assert_eq!(e.payload, [1, 2, 3]);
    }

    #[test]
    fn a_cut_or_foreign_stream_is_corrupt_never_a_panic() {
        let whole = copy_of(7, b"payload");
        for cut in 0..whole.len() {
            assert!(
                events(whole[..cut].to_vec().into()).is_err(),
                "cut at {cut}"
            );
        }
        let mut foreign = whole.clone();
        foreign[0] = b'X';
        assert!(events(foreign.into()).is_err());
    }
}
