//! Chunks of the log as the bulk readers take them: many events in a few
//! buffers, each event handed out borrowed. [`ReplayChunk`] holds what a
//! fold reads; [`VerifyChunk`] every field the hash chain covers.

use std::ops::Range;

use stratum_domain::log::RecordedRef;

use super::{StoreError, StoreResult};

/// What folding an event into the read models reads of it, borrowed from
/// its [`ReplayChunk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayEvent<'a> {
    pub position: u64,
    pub stream_id: &'a str,
    pub stream_version: u64,
    pub event_type: &'a str,
    pub schema_version: u16,
    pub occurred_at: chrono::DateTime<chrono::Utc>,
    pub principal: &'a str,
    pub payload: &'a [u8],
}

/// A chunk of events as a fold reads them, in position order. Their texts
/// share one string and their payloads one buffer (the bytes as the
/// backend returned them, where it can): a chunk of any size is a few
/// allocations, not four per event.
#[derive(Clone, Debug, Default)]
pub struct ReplayChunk {
    texts: String,
    payloads: bytes::Bytes,
    events: Vec<Entry>,
}

/// One event of a chunk: its numbers, and where its texts and payload are.
#[derive(Clone, Debug)]
struct Entry {
    position: u64,
    stream_version: u64,
    schema_version: u16,
    occurred_at: chrono::DateTime<chrono::Utc>,
    /// The ends of its stream id, event type and principal in `texts` (each
    /// starts where the one before ends).
    texts: [u32; 4],
    payload: std::ops::Range<usize>,
}

impl ReplayChunk {
    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<ReplayEvent<'_>> {
        let e = self.events.get(i)?;
        let [a, b, c, d] = e.texts.map(|n| n as usize);
        Some(ReplayEvent {
            position: e.position,
            stream_id: &self.texts[a..b],
            stream_version: e.stream_version,
            event_type: &self.texts[b..c],
            schema_version: e.schema_version,
            occurred_at: e.occurred_at,
            principal: &self.texts[c..d],
            payload: &self.payloads[e.payload.clone()],
        })
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = ReplayEvent<'_>> {
        (0..self.events.len()).map(|i| self.get(i).expect("in range"))
    }

    /// The position of its last event.
    pub fn last_position(&self) -> Option<u64> {
        self.events.last().map(|e| e.position)
    }
}

/// Builds a [`ReplayChunk`] event by event, in position order.
#[derive(Debug, Default)]
pub(crate) struct ChunkBuilder {
    texts: String,
    events: Vec<Entry>,
    /// Where each event's payload is in the payload buffer, which is either
    /// the backend's own (`finish_with`) or built here.
    payloads: Vec<u8>,
}

/// The numbers of an event, for [`ChunkBuilder::push`].
pub(crate) struct Numbers {
    pub position: u64,
    pub stream_version: u64,
    pub schema_version: u16,
    pub occurred_at: chrono::DateTime<chrono::Utc>,
}

/// The payload bytes a chunk that copies its payloads reserves per event
/// it expects: a stored event's payload is about 120 bytes (122 on the
/// history bench's log). Reserved up front, the buffer of a chunk of
/// 4,096 events is not grown and copied about a dozen times, each time
/// into pages the kernel must zero first; a reserve left untouched costs
/// no page.
pub(crate) const PAYLOAD_BYTES: usize = 160;

impl ChunkBuilder {
    /// A chunk of about `events` events, whose payloads stay where they
    /// were read ([`push_at`](Self::push_at)).
    pub(crate) fn with_capacity(events: usize) -> Self {
        ChunkBuilder {
            texts: String::with_capacity(events * 48),
            events: Vec::with_capacity(events),
            payloads: Vec::new(),
        }
    }

    /// A chunk of about `events` events, whose payloads are copied into
    /// its own buffer ([`push`](Self::push)).
    pub(crate) fn with_payloads(events: usize) -> Self {
        ChunkBuilder {
            payloads: Vec::with_capacity(events * PAYLOAD_BYTES),
            ..Self::with_capacity(events)
        }
    }

    /// An event whose payload is at `payload` in the buffer
    /// [`finish_with`](Self::finish_with) is given.
    pub(crate) fn push_at(
        &mut self,
        n: Numbers,
        [stream_id, event_type, principal]: [&str; 3],
        payload: std::ops::Range<usize>,
    ) -> StoreResult<()> {
        let start = self.texts.len();
        self.texts.push_str(stream_id);
        let a = self.texts.len();
        self.texts.push_str(event_type);
        let b = self.texts.len();
        self.texts.push_str(principal);
        let c = self.texts.len();
        let end = |n: usize| {
            u32::try_from(n).map_err(|_| StoreError::Corrupt("a chunk's texts over 4 GiB".into()))
        };
        self.events.push(Entry {
            position: n.position,
            stream_version: n.stream_version,
            schema_version: n.schema_version,
            occurred_at: n.occurred_at,
            texts: [end(start)?, end(a)?, end(b)?, end(c)?],
            payload,
        });
        Ok(())
    }

    /// An event with its payload copied into the chunk's own buffer.
    pub(crate) fn push(&mut self, n: Numbers, texts: [&str; 3], payload: &[u8]) -> StoreResult<()> {
        let start = self.payloads.len();
        self.payloads.extend_from_slice(payload);
        self.push_at(n, texts, start..self.payloads.len())
    }

    /// The chunk, its payloads in the buffer built by [`push`](Self::push).
    pub(crate) fn finish(mut self) -> ReplayChunk {
        let payloads = bytes::Bytes::from(std::mem::take(&mut self.payloads));
        self.finish_with(payloads)
    }

    /// The chunk, its payloads at the ranges given to
    /// [`push_at`](Self::push_at) in `payloads`.
    pub(crate) fn finish_with(self, payloads: bytes::Bytes) -> ReplayChunk {
        let mut chunk = ReplayChunk {
            texts: self.texts,
            payloads,
            events: self.events,
        };
        // Backends return position order; sorting again costs a pass over
        // sorted data and makes it a guarantee.
        if !chunk.events.is_sorted_by_key(|e| e.position) {
            chunk.events.sort_by_key(|e| e.position);
        }
        chunk
    }
}

/// A chunk of the log with every field the hash chain covers, in position
/// order, for verifying it: the payloads stay in the buffer the backend
/// returned, the texts share one string, and each event is handed out as
/// a borrowed [`RecordedRef`].
#[derive(Clone, Debug, Default)]
pub struct VerifyChunk {
    texts: String,
    data: bytes::Bytes,
    events: Vec<VerifyEntry>,
}

#[derive(Clone, Debug)]
struct VerifyEntry {
    position: u64,
    stream_version: u64,
    schema_version: u16,
    occurred_at_micros: i64,
    causation: Option<u64>,
    event_id: uuid::Uuid,
    prev_hash: [u8; 32],
    hash: [u8; 32],
    /// Where the stream id, event type and principal are in `texts`.
    texts: [Range<u32>; 3],
    /// Where the request id, correlation and caller's request id are.
    optional: [Option<Range<u32>>; 3],
    payload: Range<usize>,
}

impl VerifyChunk {
    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = RecordedRef<'_>> {
        self.events.iter().map(|e| {
            let text = |r: &Range<u32>| &self.texts[r.start as usize..r.end as usize];
            let [stream_id, event_type, principal] = &e.texts;
            let [request_id, correlation, client_request_id] = &e.optional;
            RecordedRef {
                position: e.position,
                stream_id: text(stream_id),
                stream_version: e.stream_version,
                event_type: text(event_type),
                schema_version: e.schema_version,
                event_id: e.event_id,
                occurred_at_micros: e.occurred_at_micros,
                principal: text(principal),
                request_id: request_id.as_ref().map(text),
                causation: e.causation,
                correlation: correlation.as_ref().map(text),
                client_request_id: client_request_id.as_ref().map(text),
                payload: &self.data[e.payload.clone()],
                prev_hash: e.prev_hash,
                hash: e.hash,
            }
        })
    }

    /// The chunk of events read as rows (a backend, or a database, without
    /// a bulk read).
    pub fn of(events: &[stratum_domain::log::Recorded]) -> StoreResult<Self> {
        let mut b = VerifyBuilder::with_capacity(events.len());
        let mut payloads = Vec::new();
        for e in events {
            let r = e.as_ref();
            let start = payloads.len();
            payloads.extend_from_slice(r.payload);
            b.push_with_id(
                VerifyNumbers {
                    position: r.position,
                    stream_version: r.stream_version,
                    schema_version: r.schema_version,
                    occurred_at_micros: r.occurred_at_micros,
                    causation: r.causation,
                },
                [r.stream_id, r.event_type, r.principal],
                [r.request_id, r.correlation, r.client_request_id],
                r.event_id,
                start..payloads.len(),
                [&r.prev_hash, &r.hash],
            )?;
        }
        Ok(b.finish_with(bytes::Bytes::from(payloads)))
    }
}

/// The numbers of an event, for [`VerifyBuilder::push`].
pub(crate) struct VerifyNumbers {
    pub position: u64,
    pub stream_version: u64,
    pub schema_version: u16,
    pub occurred_at_micros: i64,
    pub causation: Option<u64>,
}

/// Builds a [`VerifyChunk`] event by event, in position order.
#[derive(Debug, Default)]
pub(crate) struct VerifyBuilder {
    texts: String,
    events: Vec<VerifyEntry>,
}

impl VerifyBuilder {
    pub(crate) fn with_capacity(events: usize) -> Self {
        VerifyBuilder {
            texts: String::with_capacity(events * 96),
            events: Vec::with_capacity(events),
        }
    }

    /// An event: its stream id, event type and principal; its request id,
    /// correlation and caller's request id; its event id as stored (a
    /// UUID's text); where its payload is in the buffer given to
    /// [`finish_with`](Self::finish_with); its stored `prev_hash` and
    /// `hash`. A value that is not what stratum writes is `Corrupt`.
    pub(crate) fn push(
        &mut self,
        n: VerifyNumbers,
        texts: [&str; 3],
        optional: [Option<&str>; 3],
        event_id: &[u8],
        payload: Range<usize>,
        hashes: [&[u8]; 2],
    ) -> StoreResult<()> {
        let id =
            uuid::Uuid::try_parse_ascii(event_id).map_err(|_| corrupt(n.position, "event id"))?;
        self.push_with_id(n, texts, optional, id, payload, hashes)
    }

    fn push_with_id(
        &mut self,
        n: VerifyNumbers,
        texts: [&str; 3],
        optional: [Option<&str>; 3],
        event_id: uuid::Uuid,
        payload: Range<usize>,
        [prev_hash, hash]: [&[u8]; 2],
    ) -> StoreResult<()> {
        let position = n.position;
        let mut text = |t: &str| -> StoreResult<Range<u32>> {
            let at =
                |n: usize| u32::try_from(n).map_err(|_| corrupt(position, "chunk (over 4 GiB)"));
            let start = at(self.texts.len())?;
            self.texts.push_str(t);
            Ok(start..at(self.texts.len())?)
        };
        let [a, b, c] = texts;
        let texts = [text(a)?, text(b)?, text(c)?];
        let [d, e, f] = optional;
        let optional = [
            d.map(&mut text).transpose()?,
            e.map(&mut text).transpose()?,
            f.map(&mut text).transpose()?,
        ];
        self.events.push(VerifyEntry {
            position,
            stream_version: n.stream_version,
            schema_version: n.schema_version,
            occurred_at_micros: n.occurred_at_micros,
            causation: n.causation,
            event_id,
            prev_hash: prev_hash
                .try_into()
                .map_err(|_| corrupt(position, "prev_hash"))?,
            hash: hash.try_into().map_err(|_| corrupt(position, "hash"))?,
            texts,
            optional,
            payload,
        });
        Ok(())
    }

    /// The chunk, its payloads at the ranges given to [`push`](Self::push)
    /// in `data`.
    pub(crate) fn finish_with(self, data: bytes::Bytes) -> VerifyChunk {
        let mut chunk = VerifyChunk {
            texts: self.texts,
            data,
            events: self.events,
        };
        if !chunk.events.is_sorted_by_key(|e| e.position) {
            chunk.events.sort_by_key(|e| e.position);
        }
        chunk
    }
}

fn corrupt(position: u64, what: &str) -> StoreError {
    StoreError::Corrupt(format!("event {position} has a bad {what}"))
}
