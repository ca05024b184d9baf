//! The log as a transparency log: the signed checkpoint and the tiles
//! (C2SP tlog-checkpoint, signed-note, tlog-tiles) under `/v1/log/`, the
//! proofs as JSON for clients that do not read tiles, one event by its
//! position, and the acknowledgement of a checkpoint fork.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json};
use serde_json::{json, Value};
use stratum_domain::iam::Action;
use stratum_domain::tree::TilePath;
use stratum_domain::upgrade::UpgradeCommand;
use stratum_domain::{ErrorCode, FieldError};
use stratum_store::tree;

use super::extract::{finish, number, query, JsonBody, WriteHeaders};
use super::{AppState, Route};
use crate::auth::Caller;
use crate::checkpoint::Withheld;
use crate::error::{ApiError, ApiResult};

/// The prefix `STRATUM_LOG_PUBLIC` opens to callers without a token.
pub const PUBLIC_PREFIX: &str = "/v1/log/";

pub fn routes() -> Vec<Route> {
    vec![
        Route::gated(
            Method::GET,
            "/v1/log/checkpoint",
            Action::ReadEvents,
            get(checkpoint),
        ),
        Route::gated(
            Method::GET,
            "/v1/log/tile/{*path}",
            Action::ReadEvents,
            get(tile),
        ),
        Route::gated(
            Method::GET,
            "/v1/log/consistency",
            Action::ReadEvents,
            get(consistency),
        ),
        Route::gated(
            Method::GET,
            "/v1/admin/events/{position}",
            Action::ReadEvents,
            get(event),
        ),
        Route::gated(
            Method::GET,
            "/v1/admin/events/{position}/proof",
            Action::ReadEvents,
            get(inclusion),
        ),
        Route::gated(
            Method::POST,
            "/v1/admin/log/fork/acknowledge",
            Action::AcknowledgeFork,
            post(acknowledge_fork),
        ),
    ]
}

/// Immutable: a tile's bytes at a path never change (C2SP tlog-tiles),
/// once a signed checkpoint covers them.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

fn withheld(w: Withheld) -> ApiError {
    match w {
        Withheld::Unsigned => ApiError::new(ErrorCode::NotFound, w.to_string()),
        Withheld::Forked(_) => ApiError::new(ErrorCode::Unavailable, w.to_string()),
        Withheld::Store(e) => e.into(),
        Withheld::Remember(_) => ApiError::internal(w),
    }
}

fn hexes(hashes: &[[u8; 32]]) -> Vec<String> {
    hashes.iter().map(hex::encode).collect()
}

/// The newest signed checkpoint.
#[utoipa::path(get, path = "/v1/log/checkpoint", tag = "audit",
    responses((status = 200, description = "The newest signed checkpoint: a C2SP tlog-checkpoint (origin, size, base64 RFC 6962 root) in a C2SP signed note (Ed25519). Served within a second of each commit; the same signed text from every replica for the same size. With witnesses (STRATUM_LOG_WITNESS_POLICY), the newest checkpoint a quorum of them cosigned (while none is, the newest signed; never smaller than what this replica served before), followed by every witness's cosignature/v1 line this replica holds for it: replicas gather their own, so the cosignature lines may differ between them.", content_type = "text/plain; charset=utf-8", body = String),
              (status = 404, description = "NOT_FOUND: the service signs no checkpoints (no STRATUM_LOG_SIGNING_KEY_FILE).", body = super::schema::ErrorBody),
              (status = 503, description = "UNAVAILABLE: the log no longer extends the newest signed checkpoint (the log-checkpoint-fork alarm); nothing is signed until an administrator acknowledges the fork.", body = super::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn checkpoint(State(state): State<AppState>) -> ApiResult<Response> {
    let note = state.checkpoints.served().map_err(withheld)?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        note,
    )
        .into_response())
}

/// A tile of the log's tree, or a bundle of its entries.
#[utoipa::path(get, path = "/v1/log/tile/{path}", tag = "audit",
    params(("path" = String, Path, description = "C2SP tlog-tiles: `<L>/<N>[.p/<W>]`, a tile of the hashes at tree level 8L, or `entries/<N>[.p/<W>]`, an entry bundle (each entry a big-endian uint16 length, 32, and an event's chain hash). N in groups of three digits, all but the last prefixed with x.")),
    responses((status = 200, description = "The tile's bytes; cached as immutable once the newest signed checkpoint covers them, `no-cache` before.", content_type = "application/octet-stream", body = Vec<u8>),
              (status = 404, description = "NOT_FOUND: no such tile, or not as wide yet.", body = super::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn tile(State(state): State<AppState>, Path(path): Path<String>) -> ApiResult<Response> {
    let not_found = || ApiError::not_found(format!("The tile tile/{path}"));
    let t = TilePath::parse(&path).ok_or_else(not_found)?;
    let size = state.store.head().await?.position;
    let range = t.range();
    let level = t.level.unwrap_or(0);
    if range.end > stratum_domain::tree::level_len(size, level) {
        return Err(not_found());
    }
    let body: Vec<u8> = match t.level {
        None => state
            .store
            .entries(range.start, range.end)
            .await?
            .iter()
            .flat_map(|e| [&[0u8, 32][..], &e[..]].concat())
            .collect(),
        Some(l) => tree::level_hashes(&*state.store, l, range.start, range.end)
            .await?
            .concat(),
    };
    if body.len() as u64 != (range.end - range.start) * if t.level.is_none() { 34 } else { 32 } {
        return Err(ApiError::internal(format!("tile/{path} is short")));
    }
    // Immutable once a signed checkpoint covers it: a tile beyond the
    // newest one could still change if a failover lost the tail it holds.
    let leaves = range.end << (8 * u32::from(level));
    let signed = state.checkpoints.latest().ok().map_or(0, |c| c.size);
    let cache = if leaves <= signed {
        IMMUTABLE
    } else {
        "no-cache"
    };
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (header::CACHE_CONTROL, cache),
        ],
        body,
    )
        .into_response())
}

/// The log's size now, and the default size a proof is made for: the
/// newest signed checkpoint's, else the head.
async fn sizes(state: &AppState) -> ApiResult<(u64, u64)> {
    let head = state.store.head().await?.position;
    let signed = state
        .checkpoints
        .latest()
        .ok()
        .map_or(head, |c| c.size.min(head));
    Ok((head, signed))
}

/// A consistency proof between two sizes of the log.
#[utoipa::path(get, path = "/v1/log/consistency", tag = "audit",
    params(("from" = u64, Query, description = "The older size, at least 1."),
           ("to" = Option<u64>, Query, description = "The newer size (default: the newest signed checkpoint's, else the head).")),
    responses((status = 200, description = "`{from, to, fromRoot, toRoot, proof}`, hashes in hex: an RFC 6962 consistency proof, in the order Go's tlog.TreeProof takes.", body = super::schema::ConsistencyProof),
              (status = 404, description = "NOT_FOUND: not from ≤ to ≤ the log's size.", body = super::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn consistency(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let mut errors = Vec::new();
    let get = query(&q, &["from", "to"], &mut errors);
    let from = number("from", get("from"), &mut errors);
    let to = number("to", get("to"), &mut errors);
    if get("from").is_none() {
        errors.push(FieldError::new("from", "is required"));
    }
    finish(errors)?;
    let (head, default) = sizes(&state).await?;
    let (from, to) = (from.unwrap_or(0), to.unwrap_or(default));
    if from == 0 {
        return Err(ApiError::invalid(vec![FieldError::new(
            "from",
            "must be at least 1",
        )]));
    }
    if from > to || to > head {
        return Err(ApiError::not_found(format!(
            "A consistency proof from size {from} to size {to} of a log of {head} events"
        )));
    }
    let proof = tree::consistency(&*state.store, from, to).await?;
    Ok(Json(json!({
        "from": from,
        "to": to,
        "fromRoot": hex::encode(tree::root(&*state.store, from).await?),
        "toRoot": hex::encode(tree::root(&*state.store, to).await?),
        "proof": hexes(&proof),
    })))
}

fn position(p: &str) -> ApiResult<u64> {
    p.parse::<u64>()
        .ok()
        .filter(|p| *p >= 1 && i64::try_from(*p).is_ok())
        .ok_or_else(|| {
            ApiError::invalid(vec![FieldError::new(
                "position",
                "must be a log position, a whole number from 1",
            )])
        })
}

/// One event of the log, by its position.
#[utoipa::path(get, path = "/v1/admin/events/{position}", tag = "audit",
    params(("position" = u64, Path, minimum = 1)),
    responses((status = 200, description = "The event as `GET /v1/admin/events` lists it; its `hash` is the tree's entry at leaf position-1.", body = super::schema::EventDoc),
              (status = 400, description = "INVALID_INPUT: not a position.", body = super::schema::ErrorBody),
              (status = 404, description = "NOT_FOUND: the log has no such position.", body = super::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn event(State(state): State<AppState>, Path(p): Path<String>) -> ApiResult<Json<Value>> {
    let p = position(&p)?;
    let found = state.store.read_after(p - 1, 1).await?;
    let e = found
        .into_iter()
        .find(|e| e.position == p)
        .ok_or_else(|| ApiError::not_found(format!("The event at position {p}")))?;
    let mut out = super::events::events_json(&state.store, std::slice::from_ref(&e)).await?;
    Ok(Json(out.pop().unwrap_or(Value::Null)))
}

/// The inclusion proof of one event in the log's tree.
#[utoipa::path(get, path = "/v1/admin/events/{position}/proof", tag = "audit",
    params(("position" = u64, Path, minimum = 1),
           ("size" = Option<u64>, Query, description = "The tree's size (default: the newest signed checkpoint's, else the head); at least the position.")),
    responses((status = 200, description = "`{position, size, root, hash, proof, checkpoint}`: an RFC 6962 inclusion proof of the event's entry (`hash`, its chain hash) at leaf position-1, hashes in hex, in the order Go's tlog.RecordProof takes; `checkpoint` is the signed checkpoint of that size when it is the newest.", body = super::schema::InclusionProof),
              (status = 404, description = "NOT_FOUND: no such position, or a size below it or beyond the log.", body = super::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn inclusion(
    State(state): State<AppState>,
    Path(p): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let p = position(&p)?;
    let mut errors = Vec::new();
    let get = query(&q, &["size"], &mut errors);
    let size = number("size", get("size"), &mut errors);
    finish(errors)?;
    let (head, default) = sizes(&state).await?;
    let size = size.unwrap_or(default);
    if size < p || size > head {
        return Err(ApiError::not_found(format!(
            "An inclusion proof of position {p} in a tree of size {size} of a log of {head} events"
        )));
    }
    let entry = state.store.entries(p - 1, p).await?;
    let entry = entry
        .first()
        .ok_or_else(|| ApiError::not_found(format!("The event at position {p}")))?;
    let proof = tree::inclusion(&*state.store, size, p - 1).await?;
    let checkpoint = state
        .checkpoints
        .latest()
        .ok()
        .filter(|c| c.size == size)
        .map(|c| c.note.clone());
    Ok(Json(json!({
        "position": p,
        "size": size,
        "root": hex::encode(tree::root(&*state.store, size).await?),
        "hash": hex::encode(entry),
        "proof": hexes(&proof),
        "checkpoint": checkpoint,
    })))
}

crate::request_body! {
    /// Accept a fork of the signed checkpoints: the log as it now is
    /// continues the record.
    pub struct AcknowledgeForkBody {
        /// The size of the newest signed checkpoint the log forks from (the
        /// log-checkpoint-fork alarm names it).
        signed_size: u64 = "signedSize" @required,
        /// Its root, 64 hex digits.
        signed_root: String = "signedRoot" @required ~ super::extract::shape::hash_hex,
        /// Why the fork is accepted (e.g. the restore of a backup); one line.
        reason: String = "reason" @required ~ super::extract::shape::line,
    }
}

/// Acknowledge a fork of the signed checkpoints; signing resumes.
#[utoipa::path(post, path = "/v1/admin/log/fork/acknowledge", tag = "audit",
    request_body = AcknowledgeForkBody,
    responses((status = 200, description = "The log-checkpoint-fork alarm, cleared.", body = stratum_projections::upgrades::AlarmRecord),
              (status = 404, description = "NOT_FOUND: the log recorded no fork from that checkpoint.", body = super::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn acknowledge_fork(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: WriteHeaders,
    body: JsonBody<AcknowledgeForkBody>,
) -> Response {
    let b = body.value;
    let cmd = UpgradeCommand::AcknowledgeCheckpointFork {
        signed_size: b.signed_size.into_option().unwrap_or(0),
        signed_root: b.signed_root.into_option().unwrap_or_default(),
        reason: b.reason.into_option(),
    };
    super::upgrades::upgrade_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        cmd,
        StatusCode::OK.as_u16(),
    )
    .await
}
