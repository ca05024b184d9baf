//! The event history: reading the log as JSON and verifying its chain.

use std::collections::HashMap;

use std::convert::Infallible;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::routing::get;
use axum::Json;
use serde_json::{json, Value};
use stratum_domain::iam::Action;
use stratum_domain::log::Recorded;
use stratum_domain::stored::decode;

use super::extract::{finish, number, page, query};

use super::{AppState, Route};
use crate::error::{ApiError, ApiResult};
use stratum_store::{verify_chain, Verification};

pub fn routes() -> Vec<Route> {
    vec![
        Route {
            method: Method::GET,
            path: "/v1/admin/events",
            action: Some(Action::ReadEvents),
            handler: get(list_events),
            watch: super::Watch::No,
            by_command: false,
        },
        Route {
            method: Method::GET,
            path: "/v1/admin/events/verify",
            action: Some(Action::ReadEvents),
            handler: get(verify),
            watch: super::Watch::No,
            by_command: false,
        },
        Route {
            method: Method::GET,
            path: "/v1/admin/events/export",
            action: Some(Action::ReadEvents),
            handler: get(export),
            // As long as the log is: it holds a watcher permit instead.
            watch: super::Watch::Stream,
            by_command: false,
        },
        Route {
            method: Method::GET,
            path: "/v1/admin/events/stream",
            action: Some(Action::ReadEvents),
            handler: get(stream),
            watch: super::Watch::Stream,
            by_command: false,
        },
    ]
}

/// Where a stream of events resumes: `Last-Event-ID` (a reconnecting
/// client) wins over `?after=`.
fn resume_from(
    headers: &HeaderMap,
    after: Option<u64>,
    errors: &mut Vec<stratum_domain::FieldError>,
) -> u64 {
    match headers
        .get("last-event-id")
        // An empty id is no id (a client that received no event yet).
        .filter(|v| !v.is_empty())
        .map(|v| v.to_str().map(super::extract::whole_number))
    {
        Some(Ok(Some(id))) => id,
        Some(_) => {
            errors.push(stratum_domain::FieldError::new(
                "Last-Event-ID",
                "must be a position this stream sent",
            ));
            0
        }
        None => after.unwrap_or(0),
    }
}

#[utoipa::path(get, path = "/v1/admin/events/stream", tag = "audit",
    params(("after" = Option<u64>, Query, description = "Send events after this position; a reconnect's Last-Event-ID wins."),
           ("Last-Event-ID" = Option<String>, Header, description = "The id (position) of the last event a reconnecting client received: the stream resumes after it.")),
    responses((status = 200, description = "Server-Sent Events: each event's id is its position and its data the event as JSON, in order, each once.", content_type = "text/event-stream", body = super::schema::SseEvent)),
    security(("bearer" = [])))]
pub async fn stream(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::auth::Caller>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Sse<impl futures::Stream<Item = Result<SseEvent, Infallible>>>> {
    let mut errors = Vec::new();
    let get = query(&q, &["after"], &mut errors);
    let after = number("after", get("after"), &mut errors);
    let from = resume_from(&headers, after, &mut errors);
    finish(errors)?;
    let watcher = state.watcher()?;
    struct Tail {
        state: AppState,
        caller: crate::auth::Caller,
        _watcher: tokio::sync::OwnedSemaphorePermit,
        head: tokio::sync::watch::Receiver<u64>,
        last: u64,
        pending: std::collections::VecDeque<Recorded>,
        ended: bool,
    }
    let tail = Tail {
        _watcher: watcher,
        head: state.bus.head(),
        state,
        caller,
        last: from,
        pending: Default::default(),
        ended: false,
    };
    let events = futures::stream::unfold(tail, |mut t| async move {
        loop {
            if t.state.shutdown.is_cancelled() || t.ended {
                // The process is stopping: the client reconnects elsewhere
                // with Last-Event-ID and misses nothing.
                return None;
            }
            // Nothing more once the credential is gone (revoked, expired,
            // its node decommissioned): a last event says why, without an
            // id, so a client that reconnects resumes where it was, and
            // is refused. The credential is judged on read models that
            // include the next event to send: the event that revokes it is
            // never delivered on its own stream, nor anything after it.
            let upto = t.pending.front().map_or(0, |e| e.position);
            let published = match t.state.bus.reached(upto).await {
                Ok(rm) => rm,
                Err(err) => {
                    tracing::warn!(error = %err, "event stream cannot judge its credential; ending it");
                    return None;
                }
            };
            if let Some(why) =
                crate::auth::credential_ended(&published, &t.caller, chrono::Utc::now())
            {
                t.ended = true;
                let sse = SseEvent::default().event("end").data(
                    json!({
                        "code": "UNAUTHENTICATED",
                        "message": format!("The stream ends: {why}."),
                    })
                    .to_string(),
                );
                return Some((Ok(sse), t));
            }
            if let Some(e) = t.pending.pop_front() {
                t.last = e.position;
                let data = match events_json(&t.state.store, std::slice::from_ref(&e)).await {
                    Ok(v) => v[0].to_string(),
                    Err(err) => json!({ "error": err.message }).to_string(),
                };
                let sse = SseEvent::default()
                    .id(e.position.to_string())
                    .event(e.event_type.clone())
                    .data(data);
                return Some((Ok(sse), t));
            }
            // Mark the head seen before reading, so a commit in between wakes us.
            t.head.borrow_and_update();
            match t.state.store.read_after(t.last, 1000).await {
                Ok(chunk) if !chunk.is_empty() => t.pending.extend(chunk),
                Ok(_) => {
                    // Commits of this process wake us at once; those of
                    // other replicas by notification or within a second,
                    // which bounds how long a revoked token's stream
                    // outlives it.
                    let wake = tokio::time::timeout(
                        std::time::Duration::from_millis(500),
                        t.head.changed(),
                    );
                    tokio::select! {
                        _ = wake => {}
                        _ = t.state.shutdown.cancelled() => return None,
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "event stream cannot read the log; ending it");
                    return None;
                }
            }
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// One page of a stream's history: at most `limit` (default 100, at most
/// 1,000) events after the `cursor`'s stream version, oldest first, with
/// `nextCursor` when there may be more. `what` names the resource in a 404.
pub async fn history_page(
    state: &AppState,
    stream_id: &str,
    what: String,
    q: &HashMap<String, String>,
) -> ApiResult<Json<Value>> {
    let mut errors = Vec::new();
    let get = query(q, &["limit", "cursor"], &mut errors);
    let pg = page(get("limit"), get("cursor"), &mut errors);
    // Only what the service answered: a stream version, from 1.
    let after = match pg
        .cursor
        .as_deref()
        .map(|c| super::extract::whole_number(c).filter(|v| *v >= 1))
    {
        None => 0,
        Some(Some(v)) => v,
        Some(None) => {
            errors.push(stratum_domain::FieldError::new(
                "cursor",
                "is not a cursor this service answered",
            ));
            0
        }
    };
    finish(errors)?;
    let events = state
        .store
        .read_stream_page(stream_id, after, pg.limit)
        .await?;
    if events.is_empty() && after == 0 {
        return Err(ApiError::not_found(what));
    }
    let next = (events.len() == pg.limit as usize)
        .then(|| {
            events
                .last()
                .map(|e| super::extract::encode_cursor(&e.stream_version.to_string()))
        })
        .flatten();
    let events = events_json(&state.store, &events).await?;
    Ok(Json(json!({ "events": events, "nextCursor": next })))
}

/// The most causation links followed to find who asked for an event.
const MAX_HOPS: usize = 32;

/// Who asked for each event: its principal, or, for an event the service
/// appended on its own principal (`stratum`, a process manager), the
/// initiator of the event of the same stream that caused it, followed
/// through `causation` (the raft cleanup's removals and the decommission
/// it completes are caused by the member's own `MemberRemovalStarted`). An
/// event of the service with no cause in its own stream is the service's
/// own doing (a retry, a timed step or alarm of the upgrade driver, whose
/// causation is only the position that woke it): its initiator is
/// `stratum`. Principal, causation and stream are covered by the hash
/// chain, so the initiator is as tamper-evident as they are, for old
/// events and new alike.
pub async fn initiators(
    store: &std::sync::Arc<dyn stratum_store::EventStore>,
    events: &[Recorded],
) -> Result<HashMap<u64, String>, ApiError> {
    use stratum_domain::iam::SERVICE_PRINCIPAL;
    type Link = (String, Option<u64>, String);
    let mut known: HashMap<u64, Link> = events
        .iter()
        .map(|e| {
            let link = (
                e.meta.principal.clone(),
                e.meta.causation,
                e.stream_id.clone(),
            );
            (e.position, link)
        })
        .collect();
    let mut out = HashMap::with_capacity(events.len());
    for e in events {
        let (mut principal, mut cause) = (e.meta.principal.clone(), e.meta.causation);
        for _ in 0..MAX_HOPS {
            let Some(p) = cause.filter(|_| principal == SERVICE_PRINCIPAL) else {
                break;
            };
            if !known.contains_key(&p) {
                let read = store.read_after(p.saturating_sub(1), 1).await?;
                let Some(c) = read.into_iter().next().filter(|c| c.position == p) else {
                    break;
                };
                let link = (
                    c.meta.principal.clone(),
                    c.meta.causation,
                    c.stream_id.clone(),
                );
                known.insert(c.position, link);
            }
            let Some((by, next, stream)) = known.get(&p).cloned() else {
                break;
            };
            if stream != e.stream_id {
                break;
            }
            (principal, cause) = (by, next);
        }
        out.insert(e.position, principal);
    }
    Ok(out)
}

/// Events as auditors read them, each with who asked for it.
pub async fn events_json(
    store: &std::sync::Arc<dyn stratum_store::EventStore>,
    events: &[Recorded],
) -> Result<Vec<Value>, ApiError> {
    let who = initiators(store, events).await?;
    events
        .iter()
        .map(|e| event_json(e, who.get(&e.position).map_or(&e.meta.principal, |w| w)))
        .collect()
}

/// One event as auditors read it: every envelope field, the payload
/// decoded to JSON, and `initiator`, who asked for it (see [`initiators`]).
pub fn event_json(e: &Recorded, initiator: &str) -> Result<Value, ApiError> {
    let payload = decode(&e.event_type, e.schema_version, &e.payload)
        .map_err(|err| ApiError::internal(format!("position {}: {err}", e.position)))?;
    Ok(json!({
        "position": e.position,
        "streamId": e.stream_id,
        "streamVersion": e.stream_version,
        "type": e.event_type,
        "schemaVersion": e.schema_version,
        "eventId": e.event_id,
        "occurredAt": e.occurred_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        "principal": e.meta.principal,
        "initiator": initiator,
        "requestId": e.meta.request_id,
        "causation": e.meta.causation,
        "correlation": e.meta.correlation,
        "clientRequestId": e.meta.client_request_id,
        "payload": payload,
        "prevHash": hex::encode(e.prev_hash),
        "hash": hex::encode(e.hash),
    }))
}

#[utoipa::path(get, path = "/v1/admin/events", tag = "audit",
    params(("after" = Option<u64>, Query), ("limit" = Option<u32>, Query), ("stream" = Option<String>, Query),
           ("type" = Option<String>, Query), ("actor" = Option<String>, Query),
           ("from" = Option<String>, Query, description = "RFC 3339: only events at or after this time."),
           ("to" = Option<String>, Query, description = "RFC 3339: only events before this time.")),
    responses((status = 200, description = "Up to `limit` events after a position, oldest first, filtered, and `nextAfter`, where to continue: with filters a page may hold fewer events than the positions it covered.", body = super::schema::EventPage)),
    security(("bearer" = [])))]
pub async fn list_events(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let mut errors = Vec::new();
    let get = query(
        &q,
        &["after", "limit", "stream", "type", "actor", "from", "to"],
        &mut errors,
    );
    let after = number("after", get("after"), &mut errors).unwrap_or(0);
    let mut time = |name: &str| {
        get(name).and_then(|t| match chrono::DateTime::parse_from_rfc3339(t) {
            Ok(t) => Some(t.with_timezone(&chrono::Utc)),
            Err(_) => {
                errors.push(stratum_domain::FieldError::new(
                    name,
                    "must be an RFC 3339 time such as 2026-11-30T12:00:00Z",
                ));
                None
            }
        })
    };
    let (from, to) = (time("from"), time("to"));
    // The same limit rule as every list (default 100, at most 1000).
    let limit = page(get("limit"), None, &mut errors).limit;
    finish(errors)?;
    let scanned = state.store.read_after(after, limit).await?;
    let next_after = scanned.last().map_or(after, |e| e.position);
    let kept: Vec<Recorded> = scanned
        .into_iter()
        .filter(|e| get("stream").is_none_or(|s| e.stream_id == s))
        .filter(|e| get("type").is_none_or(|t| e.event_type == t))
        .filter(|e| from.is_none_or(|f| e.occurred_at >= f))
        .filter(|e| to.is_none_or(|t| e.occurred_at < t))
        .collect();
    let mut events = events_json(&state.store, &kept).await?;
    // An actor is whoever acted or asked: the principal or the initiator.
    if let Some(a) = get("actor") {
        events.retain(|e| e["principal"] == a || e["initiator"] == a);
    }
    Ok(Json(json!({ "events": events, "nextAfter": next_after })))
}

#[utoipa::path(get, path = "/v1/admin/events/export", tag = "audit",
    params(("after" = Option<u64>, Query, description = "Only events after this position (default 0)."),
           ("until" = Option<u64>, Query, description = "Only events up to this position (default: the head when the export starts).")),
    responses((status = 200, description = "The log as `stratum events export` writes it: one JSON line per event, every envelope field, the payload decoded and its stored bytes (`payloadPostcard`), so that `stratum events verify --file` checks it offline and `stratum events import` loads it. A whole export (`after` 0) ends with `{\"checkpoint\": ...}`, the signed checkpoint of its size, when the service signs checkpoints.", content_type = "application/x-ndjson", body = String),
              (status = 400, description = "Bad request.", body = super::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn export(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::auth::Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<axum::response::Response> {
    use axum::response::IntoResponse;
    let mut errors = Vec::new();
    let get = query(&q, &["after", "until"], &mut errors);
    let after = number("after", get("after"), &mut errors).unwrap_or(0);
    let until = number("until", get("until"), &mut errors);
    finish(errors)?;
    // Held for as long as the export streams: exports count against the
    // watcher limit like event streams.
    let permit = state.watcher()?;
    // A consistent export: up to the head as the export starts.
    let until = until.unwrap_or(state.store.head().await?.position);
    let store = state.store.clone();
    // A whole export ends with the signed checkpoint of its size, when the
    // service signs (and the log has not forked from what it signed).
    let checkpoints = state.checkpoints.clone();
    let trailer = futures::stream::once(async move {
        let line = if after == 0 && until > 0 {
            match checkpoints.sign(until).await {
                Ok(c) => stratum_domain::export::checkpoint_line(&c.note),
                Err(e) => {
                    tracing::debug!(error = %e, "an export without a checkpoint");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        Ok::<_, std::io::Error>(bytes::Bytes::from(line))
    });
    let bus = state.bus.clone();
    // The state: where the export stands, and whether it was ended.
    let lines = futures::stream::try_unfold((after, false), move |(at, ended)| {
        let store = store.clone();
        let _held = &permit;
        // A long export ends once its credential is gone: with a last line
        // that says why, then broken off, so it never looks complete.
        let why = crate::auth::credential_ended(
            &bus.publications().borrow(),
            &caller,
            chrono::Utc::now(),
        );
        async move {
            if ended {
                return Err(std::io::Error::other(
                    "the export ended: its credential is gone",
                ));
            }
            if let Some(why) = why {
                let line = json!({"error": {"code": "UNAUTHENTICATED", "message": format!("The export ends: {why}.")}});
                let mut text = line.to_string();
                text.push('\n');
                return Ok(Some((bytes::Bytes::from(text), (at, true))));
            }
            Ok::<_, std::io::Error>(
                stratum_store::export_chunk(&*store, at, until)
                    .await
                    .map_err(std::io::Error::other)?
                    .map(|(lines, last)| (bytes::Bytes::from(lines), (last, false))),
            )
        }
    });
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/x-ndjson")],
        axum::body::Body::from_stream(futures::StreamExt::chain(lines, trailer)),
    )
        .into_response())
}

#[utoipa::path(get, path = "/v1/admin/events/verify", tag = "audit",
    responses((status = 200, description = "`{verified: true, position, hash}` or `{verified: false, position, reason}` naming the first position that does not verify.", body = super::schema::Verified)),
    security(("bearer" = [])))]
pub async fn verify(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(match verify_chain(&*state.store, None).await? {
        Verification::Intact { position, hash } => {
            let behind = stratum_store::tree::behind(&*state.store, position).await?;
            json!({ "verified": true, "position": position, "hash": hex::encode(hash), "treeBehindFrom": behind })
        }
        Verification::Broken { position, reason } => {
            json!({ "verified": false, "position": position, "reason": reason })
        }
    }))
}
