//! An event as a line of an export, and the postcard form of a recorded
//! log.

use super::*;

/// One event as a line of an export (JSON lines): every envelope field, the
/// payload decoded for people, and the stored payload bytes so that the
/// chain can be checked and the event imported without the database.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogLine {
    pub position: u64,
    pub stream_id: String,
    pub stream_version: u64,
    #[serde(rename = "type")]
    pub event_type: String,
    pub schema_version: u16,
    pub event_id: Uuid,
    /// RFC 3339, microseconds, UTC.
    pub occurred_at: String,
    pub principal: String,
    pub request_id: Option<String>,
    pub causation: Option<u64>,
    pub correlation: Option<String>,
    /// Only in lines of events that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_request_id: Option<String>,
    /// The payload decoded, for reading; not what the chain covers.
    pub payload: serde_json::Value,
    /// The stored payload (postcard), standard base64.
    pub payload_postcard: String,
    /// Hex.
    pub prev_hash: String,
    /// Hex.
    pub hash: String,
}

impl LogLine {
    pub fn new(e: &Recorded, payload: serde_json::Value) -> Self {
        use base64::Engine;
        Self {
            position: e.position,
            stream_id: e.stream_id.clone(),
            stream_version: e.stream_version,
            event_type: e.event_type.clone(),
            schema_version: e.schema_version,
            event_id: e.event_id,
            occurred_at: e
                .occurred_at
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            principal: e.meta.principal.clone(),
            request_id: e.meta.request_id.clone(),
            causation: e.meta.causation,
            correlation: e.meta.correlation.clone(),
            client_request_id: e.meta.client_request_id.clone(),
            payload,
            payload_postcard: base64::engine::general_purpose::STANDARD.encode(&e.payload),
            prev_hash: hex::encode(e.prev_hash),
            hash: hex::encode(e.hash),
        }
    }

    pub fn to_recorded(&self) -> Result<Recorded, LogFormatError> {
        use base64::Engine;
        let occurred_at = DateTime::parse_from_rfc3339(&self.occurred_at)
            .map_err(|e| LogFormatError(format!("occurredAt: {e}")))?
            .with_timezone(&Utc);
        Ok(Recorded {
            position: self.position,
            stream_id: self.stream_id.clone(),
            stream_version: self.stream_version,
            event_type: self.event_type.clone(),
            schema_version: self.schema_version,
            event_id: self.event_id,
            occurred_at,
            meta: EventMeta {
                principal: self.principal.clone(),
                request_id: self.request_id.clone(),
                causation: self.causation,
                correlation: self.correlation.clone(),
                client_request_id: self.client_request_id.clone(),
            },
            payload: base64::engine::general_purpose::STANDARD
                .decode(&self.payload_postcard)
                .map_err(|e| LogFormatError(format!("payloadPostcard: {e}")))?,
            prev_hash: hash_from_hex(&self.prev_hash, "prevHash")?,
            hash: hash_from_hex(&self.hash, "hash")?,
        })
    }
}

/// The postcard form of a recorded log: every envelope field in a fixed
/// order, like a stored type never to be changed.
#[derive(Serialize, Deserialize)]
struct RecordedV1 {
    position: u64,
    stream_id: String,
    stream_version: u64,
    event_type: String,
    schema_version: u16,
    event_id: [u8; 16],
    occurred_at_micros: i64,
    principal: String,
    request_id: Option<String>,
    causation: Option<u64>,
    correlation: Option<String>,
    payload: Vec<u8>,
    prev_hash: [u8; 32],
    hash: [u8; 32],
}

/// Version 2 of the recorded-log form: version 1 and the caller's request
/// id. Written behind [`RECORDED_V2_MAGIC`], only for a log where an event
/// has one; a log without keeps the version 1 bytes it always had.
#[derive(Serialize, Deserialize)]
struct RecordedV2 {
    v1: RecordedV1,
    client_request_id: Option<String>,
}

/// What a version 2 recorded log starts with (a version 1 log starts with
/// its length, a varint, never these bytes).
pub(super) const RECORDED_V2_MAGIC: &[u8; 8] = b"\xffSTRLOG2";

fn recorded_v1(e: &Recorded) -> RecordedV1 {
    RecordedV1 {
        position: e.position,
        stream_id: e.stream_id.clone(),
        stream_version: e.stream_version,
        event_type: e.event_type.clone(),
        schema_version: e.schema_version,
        event_id: *e.event_id.as_bytes(),
        occurred_at_micros: e.occurred_at.timestamp_micros(),
        principal: e.meta.principal.clone(),
        request_id: e.meta.request_id.clone(),
        causation: e.meta.causation,
        correlation: e.meta.correlation.clone(),
        payload: e.payload.clone(),
        prev_hash: e.prev_hash,
        hash: e.hash,
    }
}

fn from_recorded_v1(e: RecordedV1, client_request_id: Option<String>) -> Recorded {
    Recorded {
        position: e.position,
        stream_id: e.stream_id,
        stream_version: e.stream_version,
        event_type: e.event_type,
        schema_version: e.schema_version,
        event_id: Uuid::from_bytes(e.event_id),
        occurred_at: micros_to_time(e.occurred_at_micros),
        meta: EventMeta {
            principal: e.principal,
            request_id: e.request_id,
            causation: e.causation,
            correlation: e.correlation,
            client_request_id,
        },
        payload: e.payload,
        prev_hash: e.prev_hash,
        hash: e.hash,
    }
}

/// Encodes a log in its postcard form.
pub fn encode_log(events: &[Recorded]) -> Vec<u8> {
    if events.iter().any(|e| e.meta.client_request_id.is_some()) {
        let v: Vec<RecordedV2> = events
            .iter()
            .map(|e| RecordedV2 {
                v1: recorded_v1(e),
                client_request_id: e.meta.client_request_id.clone(),
            })
            .collect();
        let mut out = RECORDED_V2_MAGIC.to_vec();
        out.extend(postcard::to_allocvec(&v).expect("postcard encodes plain data"));
        return out;
    }
    let v: Vec<RecordedV1> = events.iter().map(recorded_v1).collect();
    postcard::to_allocvec(&v).expect("postcard encodes plain data")
}

/// Decodes a log in its postcard form (either version).
pub fn decode_log(bytes: &[u8]) -> Result<Vec<Recorded>, LogFormatError> {
    let bad = |e: postcard::Error| LogFormatError(format!("postcard log: {e}"));
    if let Some(rest) = bytes.strip_prefix(RECORDED_V2_MAGIC.as_slice()) {
        let v: Vec<RecordedV2> = postcard::from_bytes(rest).map_err(bad)?;
        return Ok(v
            .into_iter()
            .map(|e| from_recorded_v1(e.v1, e.client_request_id))
            .collect());
    }
    let v: Vec<RecordedV1> = postcard::from_bytes(bytes).map_err(bad)?;
    Ok(v.into_iter().map(|e| from_recorded_v1(e, None)).collect())
}
