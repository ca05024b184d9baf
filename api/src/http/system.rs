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
    let check = async {
        state.store.ping().await?;
        let head = state.store.head().await?;
        let (_, checkpoint) = state.store.cluster_row().await?;
        Ok::<_, stratum_store::StoreError>((head.position, checkpoint))
    };
    // The read models in memory, which every read answers from, must be
    // the database's log: taken before the head is read, they cannot be
    // ahead of it, nor hold another event at its position.
    let held = state.bus.published();
    if let Ok(head) = state.store.head().await {
        let at = held.state.position;
        if head.position < at
            || (head.position == at && held.head_hash.is_some_and(|h| h != head.hash))
        {
            state.bus.observe_database_head(&held, head);
            return ApiError::new(
                stratum_domain::ErrorCode::Unavailable,
                format!(
                    "The read models in memory hold position {at}, which the database's log \
                     (at {}) no longer has: events were lost in a failover, and this server is \
                     reloading.",
                    head.position
                ),
            )
            .into_response();
        }
    }
    // They must reach the head too (within a second: a probe does not
    // wait long).
    if let Ok(head) = state.store.head().await {
        let reached = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            state.bus.reached(head.position),
        )
        .await;
        if !matches!(reached, Ok(Ok(_))) {
            let at = state.bus.published().state.position;
            return ApiError::new(
                stratum_domain::ErrorCode::Unavailable,
                format!(
                    "The read models in memory are at position {at}; the log is at {}.",
                    head.position
                ),
            )
            .into_response();
        }
    }
    match check.await {
        // The head is read first: a commit in between only moves the checkpoint on.
        Ok((head, checkpoint)) if checkpoint >= head => (
            StatusCode::OK,
            Json(json!({ "status": "ready", "position": head })),
        )
            .into_response(),
        Ok((head, checkpoint)) => ApiError::new(
            stratum_domain::ErrorCode::Unavailable,
            format!("The read models are at position {checkpoint}; the log is at {head}."),
        )
        .into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}
