//! Join requests (SPEC §4): a node asks to join, an operator approves or
//! rejects, and an approval admits the member.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Json};
use serde_json::Value;
use stratum_domain::event::StringMap;
use stratum_domain::iam::Action;
use stratum_domain::membership::MemberCommand;
use stratum_domain::FieldError;
use stratum_projections::JoinRequestRecord;

use super::extract::{finish, id_page, page, query, JsonBody, WriteHeaders};
use super::{AppState, Route};
use crate::auth::{new_id, Caller};
use crate::error::ApiResult;
use crate::reads::View;
use crate::request_body;

/// The roles a member may have.
use super::members::{member_command, ROLES};

pub fn routes() -> Vec<Route> {
    let r = Route::gated;
    vec![
        r(
            Method::POST,
            "/v1/admin/cluster/join-requests",
            Action::RequestJoin,
            post(request_join),
        )
        .by_command(),
        r(
            Method::GET,
            "/v1/admin/cluster/join-requests",
            Action::ListJoinRequests,
            get(list_join_requests),
        ),
        r(
            Method::POST,
            "/v1/admin/cluster/join-requests/{id}/approve",
            Action::ApproveNodeJoin,
            post(approve_join),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/cluster/join-requests/{id}/reject",
            Action::RejectNodeJoin,
            post(reject_join),
        )
        .by_command(),
    ]
}

request_body! {
    /// A node that is not yet a member asks to join.
    pub struct JoinRequestBody {
        node_id: String = "nodeId" @required ~ super::extract::shape::node_id,
        mgmt_ip: String = "mgmtIp" @required ~ super::extract::shape::ip,
        labels: StringMap = "labels" ~ super::extract::shape::labels,
        facts: Value = "facts" ~ super::extract::shape::object,
    }
}

#[utoipa::path(post, path = "/v1/admin/cluster/join-requests", tag = "membership",
    request_body = JoinRequestBody,
    responses((status = 201, description = "The join request.", body = stratum_projections::JoinRequestRecord)),
    security(("bearer" = [])))]
pub async fn request_join(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: WriteHeaders,
    body: JsonBody<JoinRequestBody>,
) -> Response {
    let b = body.value;
    let facts = b
        .facts
        .into_option()
        .unwrap_or(Value::Object(Default::default()));
    let cmd = MemberCommand::RequestJoin {
        request_id: new_id("jr"),
        node_id: b.node_id.into_option(),
        mgmt_ip: b.mgmt_ip.into_option(),
        labels: b.labels.into_option().unwrap_or_default(),
        facts: facts.to_string(),
    };
    member_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        cmd,
        201,
    )
    .await
}

#[utoipa::path(get, path = "/v1/admin/cluster/join-requests", tag = "membership",
    params(("status" = Option<String>, Query), ("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, description = "A page of join requests.", body = super::schema::Page<stratum_projections::JoinRequestRecord>)),
    security(("bearer" = [])))]
pub async fn list_join_requests(
    view: View,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let mut errors = Vec::new();
    let get = query(&q, &["status", "limit", "cursor"], &mut errors);
    if get("status").is_some_and(|s| !["pending", "approved", "rejected"].contains(&s)) {
        errors.push(FieldError::new(
            "status",
            "must be pending, approved or rejected",
        ));
    }
    let pg = page(get("limit"), get("cursor"), &mut errors);
    finish(errors)?;
    let status = get("status");
    let listed = view
        .state
        .membership
        .join_requests
        .values()
        .filter(|r| status.is_none_or(|s| r.status.as_str() == s))
        .map(|r| (r.request_id.as_str(), JoinRequestRecord::from(r)));
    Ok(Json(id_page(&pg, listed)))
}

request_body! {
    /// Approve a join request.
    pub struct ApproveBody {
        role: String = "role" @required ~ super::extract::shape::one_of(ROLES),
        mgmt_ip: String = "mgmtIp" ~ super::extract::shape::ip,
        bindings: StringMap = "bindings" ~ super::extract::shape::bindings,
        labels: StringMap = "labels" ~ super::extract::shape::labels,
    }
}

#[utoipa::path(post, path = "/v1/admin/cluster/join-requests/{id}/approve", tag = "membership",
    params(("id" = String, Path)), request_body = ApproveBody,
    responses((status = 200, description = "The join request, approved.", body = stratum_projections::JoinRequestRecord),
              (status = 409, description = "JOIN_APPROVAL_REFUSED with fieldErrors.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn approve_join(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<ApproveBody>,
) -> Response {
    let b = body.value;
    let cmd = MemberCommand::ApproveJoin {
        request_id: id,
        role: b.role.into_option(),
        mgmt_ip: b.mgmt_ip.into_option(),
        bindings: b.bindings.into_option(),
        labels: b.labels.into_option(),
    };
    member_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        cmd,
        200,
    )
    .await
}

request_body! {
    /// Reject a join request.
    pub struct RejectBody {
        reason: String = "reason" @required ~ super::extract::shape::line,
    }
}

#[utoipa::path(post, path = "/v1/admin/cluster/join-requests/{id}/reject", tag = "membership",
    params(("id" = String, Path)), request_body = RejectBody,
    responses((status = 200, description = "The join request, rejected.", body = stratum_projections::JoinRequestRecord)),
    security(("bearer" = [])))]
pub async fn reject_join(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<RejectBody>,
) -> Response {
    let cmd = MemberCommand::RejectJoin {
        request_id: id,
        reason: body.value.reason.into_option(),
    };
    member_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        cmd,
        200,
    )
    .await
}
