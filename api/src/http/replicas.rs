//! The replica registry: every `stratum serve` on this database, what it
//! is (build, stored formats, schema, process-manager settings) and
//! whether it is live, silent or stopped.

use axum::extract::State;
use axum::http::Method;
use axum::routing::get;
use axum::Json;
use serde_json::{json, Value};
use stratum_domain::iam::Action;

use super::{AppState, Route};
use crate::error::ApiResult;

pub fn routes() -> Vec<Route> {
    vec![Route::gated(
        Method::GET,
        "/v1/admin/replicas",
        Action::ListReplicas,
        get(list_replicas),
    )]
}

/// One `stratum serve` on this database, as it registered itself.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = Replica)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaDoc {
    /// Random, new at every start.
    id: String,
    /// The host's name.
    host: String,
    /// The address it serves the API on.
    listen: String,
    /// Its build's version.
    version: String,
    /// The commit it was built from (`-dirty` with changes; `unknown`
    /// outside a git checkout).
    commit: String,
    /// Each stored event type and the newest version it reads.
    #[schema(value_type = Object)]
    reads: Value,
    /// Each stored event type and the version it writes.
    #[schema(value_type = Object)]
    writes: Value,
    /// The schema versions it runs on, `{min, max}`.
    #[schema(value_type = Object)]
    schema: Value,
    /// Its process managers' settings, without secrets: each raft's
    /// adapter and what it calls, the upgrade driver's, the signer's key.
    #[schema(value_type = Object)]
    settings: Value,
    /// SHA-256 of `settings` (RFC 8785 canonical JSON), hex: replicas that
    /// act alike have the same.
    settings_digest: String,
    started_at: String,
    /// Its last heartbeat, in the database's time (every 5 s).
    heartbeat_at: String,
    stopped_at: Option<String>,
    /// `live`, `silent` (no heartbeat for 15 s) or `stopped`.
    #[schema(pattern = "^(live|silent|stopped)$")]
    state: String,
    /// Whether it is the replica answering.
    this: bool,
}

/// The replicas of this database.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = ReplicaList)]
pub struct ReplicaListDoc {
    items: Vec<ReplicaDoc>,
}

/// Every replica registered on this database, by start: live, silent or
/// stopped (a stopped or silent one is kept for a week).
#[utoipa::path(get, path = "/v1/admin/replicas", tag = "system",
    responses((status = 200, description = "The replicas, by start.", body = ReplicaListDoc)),
    security(("bearer" = [])))]
pub async fn list_replicas(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let all = state.store.replicas().await?;
    Ok(Json(
        json!({ "items": crate::replicas::records(&all, &state.replica.id) }),
    ))
}
