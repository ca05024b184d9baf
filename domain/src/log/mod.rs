//! The shape of one entry of the event log, and the hash chain over it.
//!
//! `Recorded` is the envelope every stored event travels in: global position,
//! stream, stream version, type, schema version, id, time, metadata, the
//! postcard payload, and the chain hashes. The canonical bytes that the chain
//! hashes are defined here, once, so the store, the CLI and an offline
//! verifier of an export compute the very same thing. An export's lines
//! and the postcard form of a recorded log are in [`line`].

use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

mod line;

pub use line::*;

/// Why a line of an export or a recorded log cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct LogFormatError(pub String);

pub(crate) fn hash_from_hex(s: &str, what: &str) -> Result<[u8; 32], LogFormatError> {
    hex::decode(s)
        .ok()
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| LogFormatError(format!("{what} is not 32 bytes of hex")))
}

/// 32 zero bytes: the `prevHash` of the first event.
pub const GENESIS_HASH: [u8; 32] = [0; 32];

/// Who caused an event and in answer to what.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventMeta {
    /// The acting principal (`user/alice`, `node/n-1`, `stratum-installer`,
    /// `stratum` for the service's own process managers).
    pub principal: String,
    /// The request id of the HTTP request that caused it, if any.
    pub request_id: Option<String>,
    /// The global position of the event that caused it (process managers).
    pub causation: Option<u64>,
    /// A correlation id shared by everything one operation caused (the
    /// upgrade driver's steps carry their upgrade's id).
    pub correlation: Option<String>,
    /// The caller's own `X-Request-Id`, as it sent it (validated): several
    /// requests may share one, so it is kept apart from `request_id`.
    pub client_request_id: Option<String>,
}

/// One event as the log stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub position: u64,
    pub stream_id: String,
    pub stream_version: u64,
    pub event_type: String,
    pub schema_version: u16,
    pub event_id: Uuid,
    pub occurred_at: DateTime<Utc>,
    pub meta: EventMeta,
    pub payload: Vec<u8>,
    pub prev_hash: [u8; 32],
    pub hash: [u8; 32],
}

/// What follows the canonical fields when the caller's request id is
/// covered too.
const CLIENT_REQUEST_ID_TAG: u8 = 1;

/// The fields the chain covers, in a fixed order. Changing this struct
/// changes every hash ever written: it must never change.
#[derive(Serialize)]
struct Canonical<'a> {
    position: u64,
    stream_id: &'a str,
    stream_version: u64,
    event_type: &'a str,
    schema_version: u16,
    event_id: [u8; 16],
    occurred_at_micros: i64,
    principal: &'a str,
    request_id: Option<&'a str>,
    causation: Option<u64>,
    correlation: Option<&'a str>,
    payload: Bytes<'a>,
}

/// Bytes as postcard writes a `[u8]` (its length, then each byte as
/// itself), written at once rather than element by element: the same
/// bytes, a fraction of the work on a long payload.
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

impl Recorded {
    /// The event's fields, borrowed: what the chain covers and its hashes.
    pub fn as_ref(&self) -> RecordedRef<'_> {
        RecordedRef {
            position: self.position,
            stream_id: &self.stream_id,
            stream_version: self.stream_version,
            event_type: &self.event_type,
            schema_version: self.schema_version,
            event_id: self.event_id,
            occurred_at_micros: self.occurred_at.timestamp_micros(),
            principal: &self.meta.principal,
            request_id: self.meta.request_id.as_deref(),
            causation: self.meta.causation,
            correlation: self.meta.correlation.as_deref(),
            client_request_id: self.meta.client_request_id.as_deref(),
            payload: &self.payload,
            prev_hash: self.prev_hash,
            hash: self.hash,
        }
    }

    /// The canonical bytes of the event (see [`RecordedRef::canonical_into`]).
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.as_ref().canonical_into(&mut bytes);
        bytes
    }

    /// `SHA-256(prev_hash ‖ canonical bytes)`.
    pub fn compute_hash(&self, prev_hash: &[u8; 32]) -> [u8; 32] {
        self.as_ref().compute_hash(prev_hash, &mut Vec::new())
    }

    /// Sets `prev_hash` and `hash` as the successor of `prev_hash`.
    pub fn seal(&mut self, prev_hash: [u8; 32]) {
        self.prev_hash = prev_hash;
        self.hash = self.compute_hash(&prev_hash);
    }
}

/// One event of the log with its fields borrowed (from a chunk the
/// store read, or from a [`Recorded`]): everything the chain covers, and
/// the hashes stored with it. The time is the stored microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedRef<'a> {
    pub position: u64,
    pub stream_id: &'a str,
    pub stream_version: u64,
    pub event_type: &'a str,
    pub schema_version: u16,
    pub event_id: Uuid,
    pub occurred_at_micros: i64,
    pub principal: &'a str,
    pub request_id: Option<&'a str>,
    pub causation: Option<u64>,
    pub correlation: Option<&'a str>,
    pub client_request_id: Option<&'a str>,
    pub payload: &'a [u8],
    pub prev_hash: [u8; 32],
    pub hash: [u8; 32],
}

impl RecordedRef<'_> {
    /// The event with its fields owned.
    pub fn to_recorded(&self) -> Recorded {
        Recorded {
            position: self.position,
            stream_id: self.stream_id.to_owned(),
            stream_version: self.stream_version,
            event_type: self.event_type.to_owned(),
            schema_version: self.schema_version,
            event_id: self.event_id,
            occurred_at: micros_to_time(self.occurred_at_micros),
            meta: EventMeta {
                principal: self.principal.to_owned(),
                request_id: self.request_id.map(str::to_owned),
                causation: self.causation,
                correlation: self.correlation.map(str::to_owned),
                client_request_id: self.client_request_id.map(str::to_owned),
            },
            payload: self.payload.to_vec(),
            prev_hash: self.prev_hash,
            hash: self.hash,
        }
    }

    /// Appends the canonical bytes of the event to `out`: postcard of the
    /// covered fields, then, only for an event that has one, the caller's
    /// request id after a tag byte. An event without one has the bytes it
    /// always had, so every hash written before the field existed still
    /// verifies.
    pub fn canonical_into(&self, out: &mut Vec<u8>) {
        let c = Canonical {
            position: self.position,
            stream_id: self.stream_id,
            stream_version: self.stream_version,
            event_type: self.event_type,
            schema_version: self.schema_version,
            event_id: *self.event_id.as_bytes(),
            occurred_at_micros: self.occurred_at_micros,
            principal: self.principal,
            request_id: self.request_id,
            causation: self.causation,
            correlation: self.correlation,
            payload: Bytes(self.payload),
        };
        let mut bytes =
            postcard::to_extend(&c, std::mem::take(out)).expect("postcard encodes plain data");
        if let Some(id) = self.client_request_id {
            bytes.push(CLIENT_REQUEST_ID_TAG);
            bytes = postcard::to_extend(id, bytes).expect("postcard encodes a string");
        }
        *out = bytes;
    }

    /// `SHA-256(prev_hash ‖ canonical bytes)`, the bytes written into
    /// `scratch` (cleared first), so a loop over many events allocates once.
    pub fn compute_hash(&self, prev_hash: &[u8; 32], scratch: &mut Vec<u8>) -> [u8; 32] {
        scratch.clear();
        self.canonical_into(scratch);
        let mut h = Sha256::new();
        h.update(prev_hash);
        h.update(&scratch[..]);
        h.finalize().into()
    }
}

/// Timestamps are stored as microseconds since the epoch, the precision the
/// hash chain covers.
pub fn micros_to_time(micros: i64) -> DateTime<Utc> {
    Utc.timestamp_micros(micros)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Truncates a time to the precision the log keeps, so an event decided in
/// memory equals the same event read back.
pub fn log_precision(t: DateTime<Utc>) -> DateTime<Utc> {
    micros_to_time(t.timestamp_micros())
}

/// A time a caller gives (RFC 3339), as the record will keep it: at the
/// log's precision (microseconds; finer digits are dropped), so the answer
/// to a write equals every later read of it, on any replica. A leap second
/// (`23:59:60`, which no replica could read back as itself) and a year
/// outside 0001 to 9999 (which RFC 3339 cannot write) are refused.
pub fn request_time(text: &str) -> Result<DateTime<Utc>, &'static str> {
    let t = DateTime::parse_from_rfc3339(text)
        .map_err(|_| "must be an RFC 3339 time such as 2026-11-30T12:00:00Z")?;
    if t.nanosecond() >= 1_000_000_000 {
        return Err("must not be a leap second (:60)");
    }
    let t = t.with_timezone(&Utc);
    if !(1..=9999).contains(&t.year()) {
        return Err("must be a time in the years 0001 to 9999");
    }
    Ok(log_precision(t))
}

/// The result of verifying a chain: a log's or an export's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verification {
    /// Every event verifies; the head.
    Intact { position: u64, hash: [u8; 32] },
    /// The first position that does not verify, and why.
    Broken { position: u64, reason: String },
}

impl From<ChainBreak> for Verification {
    fn from(b: ChainBreak) -> Self {
        Verification::Broken {
            position: b.position(),
            reason: b.to_string(),
        }
    }
}

/// Where a chain stops verifying.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    /// The position does not follow the previous one (a removed or reordered event).
    #[error("expected position {expected}, found {found}: an event is missing or out of order")]
    Position { expected: u64, found: u64 },
    /// The stored `prev_hash` is not the previous event's hash.
    #[error("the event at {position} does not carry the previous event's hash: an event before it was changed, removed or reordered")]
    PrevHash { position: u64 },
    /// The stored hash is not the hash of the event's bytes.
    #[error("the event at {position} does not match its stored hash: its bytes were changed")]
    Hash { position: u64 },
    /// The event at a recorded head does not have the hash recorded for it.
    #[error("the event at {position} does not have the head hash recorded for it: the log was rewritten up to there")]
    NotRecordedHead { position: u64 },
    /// The log ends before a recorded head.
    #[error("the log ends at {ends}, before the recorded head at {recorded}: its tail was cut")]
    Truncated { ends: u64, recorded: u64 },
}

impl ChainBreak {
    /// The first position that does not verify.
    pub fn position(&self) -> u64 {
        match self {
            ChainBreak::Position { expected, .. } => *expected,
            ChainBreak::PrevHash { position }
            | ChainBreak::Hash { position }
            | ChainBreak::NotRecordedHead { position } => *position,
            ChainBreak::Truncated { ends, .. } => ends + 1,
        }
    }
}

/// A head an auditor wrote down earlier (`POSITION:HASH`, the hash in hex,
/// as `stratum events verify` and `/events/verify` print it): a later
/// verification must still reach it, with the same hash, or the log was cut
/// or rewritten since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedHead {
    pub position: u64,
    pub hash: [u8; 32],
}

impl std::str::FromStr for RecordedHead {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not POSITION:HASH (a position, a colon, 64 hex digits)");
        let (p, h) = s.split_once(':').ok_or_else(bad)?;
        let position = p.parse::<u64>().ok().filter(|p| *p > 0).ok_or_else(bad)?;
        let hash = hash_from_hex(h, "hash").map_err(|_| bad())?;
        Ok(Self { position, hash })
    }
}

/// Verifies a log incrementally, event after event, in position order.
#[derive(Clone, Debug)]
pub struct ChainVerifier {
    pub position: u64,
    pub hash: [u8; 32],
    /// A head the chain must reach with this hash.
    pub recorded: Option<RecordedHead>,
}

/// A run of consecutive events checked apart ([`ChainVerifier::check_run`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Run {
    /// The first event's position and stored `prev_hash`; none when empty.
    pub first: Option<(u64, [u8; 32])>,
    /// The last event that verified: its position and hash.
    pub last: (u64, [u8; 32]),
    /// The run's first break, if any.
    pub end: Option<ChainBreak>,
}

impl Default for ChainVerifier {
    fn default() -> Self {
        Self {
            position: 0,
            hash: GENESIS_HASH,
            recorded: None,
        }
    }
}

impl ChainVerifier {
    /// A verifier that also holds the chain to a head recorded earlier.
    pub fn expecting(recorded: Option<RecordedHead>) -> Self {
        Self {
            recorded,
            ..Self::default()
        }
    }

    /// After the last event: the chain reached the recorded head, if any.
    pub fn finish(&self) -> Result<(), ChainBreak> {
        match self.recorded {
            Some(r) if self.position < r.position => Err(ChainBreak::Truncated {
                ends: self.position,
                recorded: r.position,
            }),
            _ => Ok(()),
        }
    }

    /// The verdict after the last event: intact up to here, or short of
    /// the recorded head.
    pub fn verdict(&self) -> Verification {
        match self.finish() {
            Ok(()) => Verification::Intact {
                position: self.position,
                hash: self.hash,
            },
            Err(b) => b.into(),
        }
    }

    pub fn check(&mut self, e: &Recorded) -> Result<(), ChainBreak> {
        self.check_ref(&e.as_ref(), &mut Vec::new())
    }

    /// [`check`](Self::check) of a borrowed event; `scratch` holds its
    /// canonical bytes while they are hashed.
    pub fn check_ref(
        &mut self,
        e: &RecordedRef<'_>,
        scratch: &mut Vec<u8>,
    ) -> Result<(), ChainBreak> {
        let expected = self.position + 1;
        if e.position != expected {
            return Err(ChainBreak::Position {
                expected,
                found: e.position,
            });
        }
        if e.prev_hash != self.hash {
            return Err(ChainBreak::PrevHash {
                position: e.position,
            });
        }
        if e.compute_hash(&self.hash, scratch) != e.hash {
            return Err(ChainBreak::Hash {
                position: e.position,
            });
        }
        if let Some(r) = self.recorded {
            if r.position == e.position && r.hash != e.hash {
                return Err(ChainBreak::NotRecordedHead {
                    position: e.position,
                });
            }
        }
        self.position = e.position;
        self.hash = e.hash;
        Ok(())
    }

    /// Checks a run of consecutive events on its own, from the first
    /// one's stored `prev_hash`: each event's hash depends only on its own
    /// bytes and the hash stored before it, so runs can be checked apart
    /// (on several cores) and then [joined](Self::join) in order.
    pub fn check_run<'a>(
        events: impl IntoIterator<Item = RecordedRef<'a>>,
        recorded: Option<RecordedHead>,
    ) -> Run {
        let mut events = events.into_iter().peekable();
        let Some(first) = events.peek().copied() else {
            return Run::default();
        };
        let mut v = ChainVerifier {
            position: first.position.saturating_sub(1),
            hash: first.prev_hash,
            recorded,
        };
        let mut scratch = Vec::with_capacity(512);
        let end = events.try_for_each(|e| v.check_ref(&e, &mut scratch)).err();
        Run {
            first: Some((first.position, first.prev_hash)),
            last: (v.position, v.hash),
            end,
        }
    }

    /// Continues the chain with a run checked apart: it must start at the
    /// next position with this chain's hash; then its own first break, if
    /// any, is the chain's.
    pub fn join(&mut self, run: Run) -> Result<(), ChainBreak> {
        let Some((position, prev_hash)) = run.first else {
            return Ok(());
        };
        let expected = self.position + 1;
        if position != expected {
            return Err(ChainBreak::Position {
                expected,
                found: position,
            });
        }
        if prev_hash != self.hash {
            return Err(ChainBreak::PrevHash { position });
        }
        if let Some(b) = run.end {
            return Err(b);
        }
        (self.position, self.hash) = run.last;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
