//! Health, readiness and the OpenAPI document.

use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;
use serde_json::json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use super::{AppState, Route};
use crate::error::ApiError;

pub fn routes() -> Vec<Route> {
    let open = |path, handler| Route {
        method: Method::GET,
        path,
        action: None,
        handler,
    };
    vec![
        open("/healthz", get(healthz)),
        open("/readyz", get(readyz)),
        open("/v1/openapi.json", get(openapi)),
    ]
}

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

#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(as = FieldError)]
pub struct FieldErrorDoc {
    /// The field's path, e.g. `links[0].interface` or `mgmtIp`; empty for the whole request.
    field: String,
    message: String,
}

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "stratum", description = "The control plane's record of cluster membership and upgrades."),
    paths(
        healthz, readyz, openapi,
        super::members::admit, super::members::list_members, super::members::get_member,
        super::members::update_member, super::members::member_history, super::members::join_progress,
        super::members::join_complete,
        super::members::join_failed, super::members::retry_join, super::members::decommission,
        super::members::applied_generation, super::members::membership, super::members::get_peers,
        super::members::admission, super::members::request_join, super::members::list_join_requests,
        super::members::approve_join, super::members::reject_join,
        super::events::list_events, super::events::verify, super::events::stream,
        super::upgrades::register_release, super::upgrades::list_releases, super::upgrades::get_release,
        super::upgrades::set_running_release, super::upgrades::get_running_release,
        super::upgrades::create_upgrade, super::upgrades::list_upgrades, super::upgrades::get_upgrade,
        super::upgrades::upgrade_history, super::upgrades::apply, super::upgrades::cancel,
        super::upgrades::rollback, super::upgrades::acknowledge, super::upgrades::report_backup,
        super::upgrades::report_node, super::upgrades::report_facts, super::upgrades::get_facts,
        super::upgrades::list_alarms,
        super::iam::create_token, super::iam::list_tokens, super::iam::revoke_token,
        super::iam::create_policy, super::iam::list_policies, super::iam::get_policy,
        super::iam::set_principal_policies, super::iam::get_principal_policies,
        super::iam::set_member_policy, super::iam::get_member_policy,
        super::iam::set_upgrade_policy, super::iam::get_upgrade_policy,
    ),
    components(schemas(ErrorBody, FieldErrorDoc)),
    modifiers(&Bearer),
)]
pub struct ApiDoc;

#[utoipa::path(get, path = "/healthz", tag = "system",
    responses((status = 200, description = "The process is up.")))]
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

#[utoipa::path(get, path = "/readyz", tag = "system",
    responses((status = 200, description = "The database answers and the read models are caught up."),
              (status = 503, description = "Not ready.", body = ErrorBody)))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    let check = async {
        state.store.ping().await?;
        let head = state.store.head().await?;
        let (_, checkpoint) = state.store.cluster_row().await?;
        Ok::<_, crate::store::StoreError>((head.position, checkpoint))
    };
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

#[utoipa::path(get, path = "/v1/openapi.json", tag = "system",
    responses((status = 200, description = "This document: the OpenAPI 3.1 description of the whole API.")))]
pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(document())
}

/// The OpenAPI document, each operation carrying the action it is gated on
/// (`x-stratum-action`) and its resource scope, read from the route table.
pub fn document() -> utoipa::openapi::OpenApi {
    use utoipa::openapi::extensions::ExtensionsBuilder;
    let mut doc = ApiDoc::openapi();
    for route in super::routes() {
        let Some(action) = route.action else { continue };
        let Some(item) = doc.paths.paths.get_mut(route.path) else {
            continue;
        };
        let op = match route.method {
            Method::GET => item.get.as_mut(),
            Method::POST => item.post.as_mut(),
            Method::PUT => item.put.as_mut(),
            Method::DELETE => item.delete.as_mut(),
            Method::PATCH => item.patch.as_mut(),
            _ => None,
        };
        if let Some(op) = op {
            let ext = ExtensionsBuilder::new()
                .add("x-stratum-action", action.name())
                .add("x-stratum-resource", action.resource_type().as_str())
                .build();
            match &mut op.extensions {
                Some(e) => e.merge(ext),
                None => op.extensions = Some(ext),
            }
        }
    }
    doc
}
