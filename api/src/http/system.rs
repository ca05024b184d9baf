//! Health and readiness.

use super::schema::{ErrorBody, Health, Ready};
use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;
use serde_json::json;

use super::{AppState, Route};
use crate::error::ApiError;

pub fn routes() -> Vec<Route> {
    let open = |path, handler| Route {
        method: Method::GET,
        path,
        action: None,
        handler,
        watch: super::Watch::No,
        by_command: false,
    };
    vec![open("/healthz", get(healthz)), open("/readyz", get(readyz))]
}

#[utoipa::path(get, path = "/healthz", tag = "system",
    responses((status = 200, description = "The process is up.", body = Health)))]
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

#[utoipa::path(get, path = "/readyz", tag = "system",
    responses((status = 200, description = "The database answers and the read models are caught up.", body = Ready),
              (status = 503, description = "Not ready.", body = ErrorBody)))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    match readiness(&state).await {
        Ok(position) => (
            StatusCode::OK,
            Json(json!({ "status": "ready", "position": position })),
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

/// Whether this server is ready, as `/readyz` and systemd's `READY=1` tell
/// it: the database answers, it still holds what this server serves, and
/// the read models (in memory and stored) reach the log's head. Answers
/// that head.
pub async fn readiness(state: &AppState) -> Result<u64, ApiError> {
    // What this server serves, taken before the log's head is read: the
    // database must still hold it (see `observe_database_head`).
    let held = state.bus.published();
    let head = state.store.head().await?;
    if state.bus.observe_database_head(&held, head) {
        return Err(ApiError::new(
            stratum_domain::ErrorCode::Unavailable,
            format!(
                "The read models in memory hold position {}, which the database's log \
                 (at {}) no longer has: events were lost in a failover, and this server is \
                 reloading.",
                held.state.position, head.position
            ),
        ));
    }
    // The read models in memory, which every read answers from, must reach
    // the head (within a second: a probe does not wait long).
    let reached = tokio::time::timeout(
        std::time::Duration::from_secs(1),
        state.bus.reached(head.position),
    )
    .await;
    if !matches!(reached, Ok(Ok(_))) {
        let at = state.bus.published().state.position;
        return Err(ApiError::new(
            stratum_domain::ErrorCode::Unavailable,
            format!(
                "The read models in memory are at position {at}; the log is at {}.",
                head.position
            ),
        ));
    }
    // So must the stored read models. The head was read first: a commit
    // since only moves the checkpoint on.
    let (_, checkpoint) = state.store.cluster_row().await?;
    if checkpoint >= head.position {
        Ok(head.position)
    } else {
        Err(ApiError::new(
            stratum_domain::ErrorCode::Unavailable,
            format!(
                "The read models are at position {checkpoint}; the log is at {}.",
                head.position
            ),
        ))
    }
}
