//! The shapes of the OpenAPI document that no handler's type gives: the
//! error body, pages, documents rendered as JSON. They describe; nothing
//! builds them.

use utoipa::ToSchema;

/// The error body of every 4xx and 5xx answer.
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(as = Error)]
pub struct ErrorBody {
    /// e.g. INVALID_INPUT, NOT_FOUND, QUORUM_AT_RISK.
    code: String,
    /// One sentence for a person.
    message: String,
    /// The request id, to quote when reporting a problem.
    #[schema(rename = "requestId")]
    request_id: String,
    /// Each problem at its field, for codes that carry them.
    #[schema(rename = "fieldErrors")]
    field_errors: Option<Vec<FieldErrorDoc>>,
    /// The findings of a rejected policy document.
    issues: Option<Vec<serde_json::Value>>,
    /// Structured facts about the refusal, for codes that carry them.
    details: Option<serde_json::Value>,
}

/// `GET /healthz`: the process is up.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Health {
    /// ok.
    status: String,
}

/// `GET /readyz`: the database answers and the read models are caught up.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Ready {
    /// ready.
    status: String,
    /// The log's head position.
    position: u64,
}

/// One event of the log, its payload decoded (auditors read JSON, never
/// postcard).
#[derive(ToSchema)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
pub struct EventDoc {
    /// The global position: 1, 2, 3, … with no gaps, in commit order.
    position: u64,
    stream_id: String,
    /// The version within its stream.
    stream_version: u64,
    /// The event type, e.g. MemberJoinFailed.
    #[schema(rename = "type")]
    event_type: String,
    schema_version: u16,
    event_id: String,
    occurred_at: String,
    /// The acting principal.
    principal: String,
    /// Who asked for it: the principal, or, for an event the service
    /// appended (`stratum`), whoever asked for the event of the same stream
    /// that caused it, followed through `causation`; `stratum` where the
    /// service acted on its own (a retry, a timed step or alarm).
    initiator: String,
    /// The server's own id of the request that caused it.
    request_id: Option<String>,
    /// The position of the event that caused it (process managers).
    causation: Option<u64>,
    /// What one operation's events share (the upgrade driver's steps: the
    /// upgrade's id).
    correlation: Option<String>,
    /// The caller's own `X-Request-Id`, when it sent one.
    client_request_id: Option<String>,
    /// The payload, decoded.
    #[schema(value_type = Object)]
    payload: serde_json::Value,
    /// SHA-256 of the event before, hex.
    prev_hash: String,
    /// SHA-256(prevHash ‖ canonical bytes of the event), hex.
    hash: String,
}

/// One Server-Sent Event of the event stream.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct SseEvent {
    /// The event's position (a reconnect sends it as Last-Event-ID).
    id: String,
    /// The event type.
    event: String,
    /// The event as JSON (see EventDoc).
    data: String,
}

/// A page of the log.
#[derive(ToSchema)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
pub struct EventPage {
    events: Vec<EventDoc>,
    /// Where to continue: the `after` of the next page.
    next_after: u64,
}

/// A stream's events, oldest first.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct History {
    events: Vec<EventDoc>,
    /// The `cursor` of the next page; none on the last.
    next_cursor: Option<String>,
}

/// The chain verified up to the head, or the first position that does not
/// verify.
#[derive(ToSchema)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
pub struct Verified {
    verified: bool,
    position: u64,
    /// The head's hash, when verified.
    hash: Option<String>,
    /// What does not verify, when not.
    reason: Option<String>,
    /// When verified: the first position whose rows of the log's tree are
    /// not kept yet (events another build of stratum appended without
    /// them, which a replica of this build fills); null when the tree
    /// covers the log. Derived data, not a break of the log.
    tree_behind_from: Option<u64>,
}

/// Grants on record that give more than their granter holds now (see
/// the grant rule in `docs/architecture.md`).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct GrantFindings {
    findings: Vec<GrantFindingDoc>,
}

/// One grant that breaks the rule.
#[derive(ToSchema)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
pub struct GrantFindingDoc {
    /// `token`, `attachment` or `resourcePolicy`.
    kind: String,
    /// The token's id, the principal, or the resource policy's key
    /// (`member/<nodeId>`, `upgrade/<id>`).
    id: String,
    granted_by: String,
    /// Policy names, or `action on resource`, the granter does not hold.
    not_held: Vec<String>,
}

/// An RFC 6962 consistency proof between two sizes of the log's tree.
#[derive(ToSchema)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
pub struct ConsistencyProof {
    from: u64,
    to: u64,
    /// The root at `from`, hex.
    from_root: String,
    /// The root at `to`, hex.
    to_root: String,
    /// The proof's hashes, hex, in the order Go's `tlog.TreeProof` takes.
    proof: Vec<String>,
}

/// An RFC 6962 inclusion proof of one event's entry in the log's tree.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct InclusionProof {
    position: u64,
    /// The tree's size.
    size: u64,
    /// The tree's root at that size, hex.
    root: String,
    /// The entry: the event's chain hash, hex (its leaf is
    /// SHA-256(0x00 ‖ entry)).
    hash: String,
    /// The proof's hashes, hex, in the order Go's `tlog.RecordProof` takes.
    proof: Vec<String>,
    /// The signed checkpoint of that size, when it is the newest.
    checkpoint: Option<String>,
}

/// A created token, with its secret in `token` (this once).
#[derive(ToSchema)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
pub struct CreatedToken {
    id: String,
    /// The secret: shown this once, stored only as a hash.
    token: Option<String>,
    principal: String,
    policies: Vec<String>,
    expires_at: Option<String>,
    created_at: String,
    created_by: String,
    revoked_at: Option<String>,
    revoked_by: Option<String>,
}

/// A registered release: its manifest exactly as signed, and who
/// registered it when, from where.
#[derive(ToSchema)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseDoc {
    version: String,
    #[schema(value_type = Vec<Object>)]
    components: Option<Vec<serde_json::Value>>,
    #[schema(value_type = Object)]
    os: serde_json::Value,
    #[schema(value_type = Object)]
    signature: serde_json::Value,
    registered_by: String,
    registered_at: String,
    /// manifest (registered over the API) or media (install media, on the host).
    source_kind: String,
}

/// A page of a list: its items, and the cursor of the next page (null on
/// the last).
#[derive(ToSchema)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
pub struct Page<T: ToSchema> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(as = FieldError)]
pub struct FieldErrorDoc {
    /// The field's path, e.g. `links[0].interface` or `mgmtIp`; empty for the whole request.
    field: String,
    message: String,
}
