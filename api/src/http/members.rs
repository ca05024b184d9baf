//! Membership endpoints (SPEC §4): members, join requests, the membership
//! generation, peer lists and transport admission.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Extension, Json};
use serde_json::Value;
use stratum_domain::event::StringMap;
use stratum_domain::iam::Action;
use stratum_domain::membership::{member_stream, MemberCommand, MemberState, Role};
use stratum_domain::{Command, FieldError};
use stratum_projections::members::{MembershipSummary, Peers};
use stratum_projections::{member_record, membership_summary, transport_admission, MemberRecord};

use super::extract::{as_of, finish, id_page, number, page, parsed, query, JsonBody, WriteHeaders};
use super::{run_command, set_etag, AppState, Route, MAX_WAIT};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::http::events::history_page;
use crate::reads::View;
use crate::request_body;

/// The roles a member may have.
pub(super) const ROLES: &[&str] = &stratum_domain::membership::Role::NAMES;

pub fn routes() -> Vec<Route> {
    let r = Route::gated;
    vec![
        r(
            Method::POST,
            "/v1/admin/cluster/members",
            Action::AdmitMember,
            post(admit),
        )
        .by_command(),
        r(
            Method::GET,
            "/v1/admin/cluster/members",
            Action::ListMembers,
            get(list_members),
        ),
        r(
            Method::GET,
            "/v1/admin/cluster/members/{nodeId}",
            Action::GetMember,
            get(get_member),
        ),
        r(
            Method::PATCH,
            "/v1/admin/cluster/members/{nodeId}",
            Action::UpdateMember,
            patch(update_member),
        )
        .by_command(),
        r(
            Method::GET,
            "/v1/admin/cluster/members/{nodeId}/history",
            Action::ReadEvents,
            get(member_history),
        ),
        r(
            Method::POST,
            "/v1/admin/cluster/members/{nodeId}/join-progress",
            Action::ReportJoinProgress,
            post(join_progress),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/cluster/members/{nodeId}/join-complete",
            Action::CompleteJoin,
            post(join_complete),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/cluster/members/{nodeId}/join-failed",
            Action::ReportJoinFailure,
            post(join_failed),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/cluster/members/{nodeId}/retry-join",
            Action::AdmitMember,
            post(retry_join),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/cluster/members/{nodeId}/decommission",
            Action::DecommissionMember,
            post(decommission),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/cluster/members/{nodeId}/applied-generation",
            Action::ReportAppliedGeneration,
            post(applied_generation),
        )
        .by_command(),
        r(
            Method::GET,
            "/v1/admin/cluster/membership",
            Action::GetMembership,
            get(membership),
        ),
        r(
            Method::GET,
            "/v1/admin/cluster/peers",
            Action::GetPeers,
            get(get_peers),
        )
        .watching(super::Watch::LongPoll),
        r(
            Method::GET,
            "/v1/admin/cluster/transport-admission/{nodeId}",
            Action::GetTransportAdmission,
            get(admission),
        ),
    ]
}

/// Runs a member command (see [`run_command`]). The raft removals a
/// decommission or a join failure causes continue its request's trace:
/// the cause is remembered before the command is submitted (the cleanup
/// may start before the answer is back) and forgotten when it was not
/// carried out.
pub(super) async fn member_command(
    state: &AppState,
    caller: &Caller,
    headers: &WriteHeaders,
    body: (&[u8], Vec<FieldError>),
    command: MemberCommand,
    success_status: u16,
) -> Response {
    let cause = match &command {
        MemberCommand::Decommission { node_id, .. }
        | MemberCommand::ReportJoinFailure { node_id, .. } => Some(node_id.clone()),
        _ => None,
    };
    if let Some(node_id) = &cause {
        crate::telemetry::remember_cause(node_id);
    }
    let res = run_command(
        state,
        caller,
        headers,
        body,
        Command::Member(command),
        success_status,
    )
    .await;
    if let Some(node_id) = cause.filter(|_| !res.status().is_success()) {
        crate::telemetry::forget_cause(&node_id);
    }
    res
}

request_body! {
    /// Admit a member.
    pub struct AdmitBody {
        node_id: String = "nodeId" @required ~ super::extract::shape::node_id,
        role: String = "role" @required ~ super::extract::shape::one_of(ROLES),
        mgmt_ip: String = "mgmtIp" @required ~ super::extract::shape::ip,
        bindings: StringMap = "bindings" ~ super::extract::shape::bindings,
        labels: StringMap = "labels" ~ super::extract::shape::labels,
    }
}

#[utoipa::path(post, path = "/v1/admin/cluster/members", tag = "membership",
    request_body = AdmitBody,
    responses((status = 201, description = "The admitted member.", body = MemberRecord),
              (status = 400, description = "Bad request.", body = crate::http::schema::ErrorBody),
              (status = 409, description = "The cluster refuses the admission.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn admit(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: WriteHeaders,
    body: JsonBody<AdmitBody>,
) -> Response {
    let b = body.value;
    let cmd = MemberCommand::Admit {
        node_id: b.node_id.into_option(),
        role: b.role.into_option(),
        mgmt_ip: b.mgmt_ip.into_option(),
        bindings: b.bindings.into_option().unwrap_or_default(),
        labels: b.labels.into_option().unwrap_or_default(),
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

request_body! {
    /// Change a member: a field left out stays as it is; `bindings` and
    /// `labels` replace the whole map.
    pub struct UpdateMemberBody {
        /// The node role: control, compute, storage or hybrid.
        role: String = "role" ~ super::extract::shape::one_of(ROLES),
        /// The management address every peer list names (IPv4 or IPv6;
        /// unique among members not decommissioned).
        mgmt_ip: String = "mgmtIp" ~ super::extract::shape::ip,
        /// Storage/overlay bindings, keyed by traffic class (replaces them all).
        bindings: StringMap = "bindings" ~ super::extract::shape::bindings,
        /// Declared labels; topology.rack is the rack (replaces them all).
        labels: StringMap = "labels" ~ super::extract::shape::labels,
        /// Demote an active voter even when fewer than two would remain.
        force: bool = "force",
    }
}

/// Change a member's role, address, bindings or labels.
///
/// A topology change: the membership generation is bumped, so every peer
/// list and keepalived priority shows it. Validated like an admission,
/// with every bad field listed. Demoting a voter follows the same
/// QUORUM_AT_RISK rule as a decommission, and takes it out of its rafts.
/// A change that changes nothing appends nothing.
#[utoipa::path(patch, path = "/v1/admin/cluster/members/{nodeId}", tag = "membership",
    params(("nodeId" = String, Path),
           ("If-Match" = Option<String>, Header, description = "The member's ETag; 412 when it moved on."),
           ("Idempotency-Key" = Option<String>, Header)),
    request_body = UpdateMemberBody,
    responses((status = 200, description = "The member record after the change.", body = MemberRecord),
              (status = 400, description = "INVALID_INPUT with every bad field.", body = crate::http::schema::ErrorBody),
              (status = 404, description = "Resource not found.", body = crate::http::schema::ErrorBody),
              (status = 409, description = "MEMBER_DECOMMISSIONED, QUORUM_AT_RISK or RAFT_CLEANUP_PENDING.", body = crate::http::schema::ErrorBody),
              (status = 412, description = "PRECONDITION_FAILED: If-Match does not match.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn update_member(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(node_id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<UpdateMemberBody>,
) -> Response {
    let b = body.value;
    let cmd = MemberCommand::Update {
        node_id,
        role: b.role.into_option(),
        mgmt_ip: b.mgmt_ip.into_option(),
        bindings: b.bindings.into_option(),
        labels: b.labels.into_option(),
        force: b.force.into_option().unwrap_or(false),
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
    /// Report a join step reached.
    pub struct JoinProgressBody {
        step: String = "step" @required ~ super::extract::shape::join_step,
    }
}

#[utoipa::path(post, path = "/v1/admin/cluster/members/{nodeId}/join-progress", tag = "membership",
    params(("nodeId" = String, Path)), request_body = JoinProgressBody,
    responses((status = 200, description = "The member record after the change.", body = MemberRecord)),
    security(("bearer" = [])))]
pub async fn join_progress(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(node_id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<JoinProgressBody>,
) -> Response {
    let cmd = MemberCommand::ReportJoinProgress {
        node_id,
        step: body.value.step.into_option(),
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

#[utoipa::path(post, path = "/v1/admin/cluster/members/{nodeId}/join-complete", tag = "membership",
    params(("nodeId" = String, Path)),
    responses((status = 200, description = "The member record after the change.", body = MemberRecord)),
    security(("bearer" = [])))]
pub async fn join_complete(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(node_id): Path<String>,
    headers: WriteHeaders,
) -> Response {
    let cmd = MemberCommand::CompleteJoin { node_id };
    member_command(&state, &caller, &headers, (b"", Vec::new()), cmd, 200).await
}

request_body! {
    /// Record that a node's join did not finish.
    pub struct JoinFailedBody {
        /// The join step that failed (a progress phase name), e.g. `join/raft-openbao`.
        step: String = "step" @required ~ super::extract::shape::join_step,
        /// The last error line.
        error: String = "error" @required ~ super::extract::shape::line,
    }
}

/// Record that a node's join did not finish.
///
/// Moves a joining member to failed, with the step it stopped in and the
/// last error line. The membership generation is bumped, so every member
/// drops it from its peer lists, and the founder side takes it back out of
/// every raft it reached. Only a joining member moves; for any other state
/// this returns the record unchanged.
#[utoipa::path(post, path = "/v1/admin/cluster/members/{nodeId}/join-failed", tag = "membership",
    params(("nodeId" = String, Path)), request_body = JoinFailedBody,
    responses((status = 200, description = "The member record after the change.", body = MemberRecord),
              (status = 400, description = "Bad request.", body = crate::http::schema::ErrorBody),
              (status = 401, description = "Not authenticated.", body = crate::http::schema::ErrorBody),
              (status = 403, description = "Authenticated but not authorized.", body = crate::http::schema::ErrorBody),
              (status = 404, description = "Resource not found.", body = crate::http::schema::ErrorBody),
              (status = 503, description = "Upstream temporarily unavailable.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn join_failed(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(node_id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<JoinFailedBody>,
) -> Response {
    let cmd = MemberCommand::ReportJoinFailure {
        node_id,
        step: body.value.step.into_option(),
        error: body.value.error.into_option(),
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

#[utoipa::path(post, path = "/v1/admin/cluster/members/{nodeId}/retry-join", tag = "membership",
    params(("nodeId" = String, Path)),
    responses((status = 200, description = "The member record after the change.", body = MemberRecord)),
    security(("bearer" = [])))]
pub async fn retry_join(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(node_id): Path<String>,
    headers: WriteHeaders,
) -> Response {
    let cmd = MemberCommand::RetryJoin { node_id };
    member_command(&state, &caller, &headers, (b"", Vec::new()), cmd, 200).await
}

request_body! {
    /// Decommission a member.
    pub struct DecommissionBody {
        reason: String = "reason" @required ~ super::extract::shape::line,
        force: bool = "force",
    }
}

#[utoipa::path(post, path = "/v1/admin/cluster/members/{nodeId}/decommission", tag = "membership",
    params(("nodeId" = String, Path)), request_body = DecommissionBody,
    responses((status = 200, description = "The member record after the change.", body = MemberRecord),
              (status = 409, description = "QUORUM_AT_RISK.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn decommission(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(node_id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<DecommissionBody>,
) -> Response {
    let cmd = MemberCommand::Decommission {
        node_id,
        reason: body.value.reason.into_option(),
        force: body.value.force.into_option().unwrap_or(false),
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
    /// Report the membership generation a node has rendered and applied.
    pub struct AppliedGenerationBody {
        generation: u64 = "generation" @required,
    }
}

#[utoipa::path(post, path = "/v1/admin/cluster/members/{nodeId}/applied-generation", tag = "membership",
    params(("nodeId" = String, Path)), request_body = AppliedGenerationBody,
    responses((status = 200, description = "The member record after the change.", body = MemberRecord)),
    security(("bearer" = [])))]
pub async fn applied_generation(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(node_id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<AppliedGenerationBody>,
) -> Response {
    let cmd = MemberCommand::ReportAppliedGeneration {
        node_id,
        generation: body.value.generation.into_option(),
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

#[utoipa::path(get, path = "/v1/admin/cluster/members", tag = "membership",
    params(("state" = Option<String>, Query), ("role" = Option<String>, Query), ("rack" = Option<String>, Query),
           ("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query), ("asOf" = Option<u64>, Query)),
    responses((status = 200, description = "A page of members ordered by node id.", body = super::schema::Page<MemberRecord>)),
    security(("bearer" = [])))]
pub async fn list_members(
    State(state): State<AppState>,
    view: View,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let mut errors = Vec::new();
    let get = query(
        &q,
        &["state", "role", "rack", "limit", "cursor", "asOf"],
        &mut errors,
    );
    let wanted_state = parsed(
        "state",
        get("state"),
        MemberState::parse,
        "must be joining, active, failed, removing or decommissioned",
        &mut errors,
    );
    let wanted_role = parsed(
        "role",
        get("role"),
        Role::parse,
        "must be control, compute, storage or hybrid",
        &mut errors,
    );
    let rack = get("rack");
    let pg = page(get("limit"), get("cursor"), &mut errors);
    let at = as_of(&view, get("asOf"), &mut errors)?;
    finish(errors)?;
    let rm = view.at(&state.store, at).await?;
    let m = &rm.state.membership;
    // From the cursor on: the members before it are not rendered.
    let from = match pg.cursor.as_deref() {
        Some(after) => std::ops::Bound::Excluded(after),
        None => std::ops::Bound::Unbounded,
    };
    let listed = m
        .members
        .range::<_, str>((from, std::ops::Bound::Unbounded))
        .map(|(_, member)| member)
        .filter(|member| {
            wanted_state.is_none_or(|s| member.state == s)
                && wanted_role.is_none_or(|r| member.role == r)
                && rack.is_none_or(|r| member.rack() == Some(r))
        })
        .map(|member| {
            (
                member.node_id.as_str(),
                member_record(member, Some(m.generation)),
            )
        });
    Ok(Json(id_page(&pg, listed)))
}

#[utoipa::path(get, path = "/v1/admin/cluster/members/{nodeId}", tag = "membership",
    params(("nodeId" = String, Path), ("asOf" = Option<u64>, Query)),
    responses((status = 200, description = "The member.", body = MemberRecord),
              (status = 404, description = "Resource not found.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_member(
    State(state): State<AppState>,
    view: View,
    Path(node_id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let mut errors = Vec::new();
    let get = query(&q, &["asOf"], &mut errors);
    let at = as_of(&view, get("asOf"), &mut errors)?;
    finish(errors)?;
    let rm = view.at(&state.store, at).await?;
    let m = &rm.state.membership;
    let member = m
        .members
        .get(&node_id)
        .ok_or_else(|| ApiError::not_found(format!("Member {node_id}")))?;
    let mut res = Json(member_record(member, Some(m.generation))).into_response();
    set_etag(&mut res, member.version);
    Ok(res)
}

#[utoipa::path(get, path = "/v1/admin/cluster/members/{nodeId}/history", tag = "membership",
    params(("nodeId" = String, Path),
           ("limit" = Option<u32>, Query, description = "Events per page: 1 to 1000, default 100."),
           ("cursor" = Option<String>, Query, description = "The `nextCursor` of the page before.")),
    responses((status = 200, description = "The member's events, oldest first, a page at a time.", body = super::schema::History)),
    security(("bearer" = [])))]
pub async fn member_history(
    State(state): State<AppState>,
    Path(node_id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    history_page(
        &state,
        &member_stream(&node_id),
        format!("Member {node_id}"),
        &q,
    )
    .await
}

#[utoipa::path(get, path = "/v1/admin/cluster/membership", tag = "membership",
    params(("asOf" = Option<u64>, Query)),
    responses((status = 200, description = "The membership generation, counts by state, lagging members, and the digest of the membership read model (`stratum replay --until P --digest` reproduces it from an export).", body = MembershipSummary)),
    security(("bearer" = [])))]
pub async fn membership(
    State(state): State<AppState>,
    view: View,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<MembershipSummary>> {
    let mut errors = Vec::new();
    let get = query(&q, &["asOf"], &mut errors);
    let at = as_of(&view, get("asOf"), &mut errors)?;
    finish(errors)?;
    let rm = view.at(&state.store, at).await?;
    let m = &rm.state.membership;
    Ok(Json(MembershipSummary {
        digest: Some(state.rendered.membership_digest(&rm)),
        ..membership_summary(m)
    }))
}

#[utoipa::path(get, path = "/v1/admin/cluster/peers", tag = "membership",
    params(("after" = Option<u64>, Query, description = "Answer once the generation is above this."),
           ("waitSeconds" = Option<u64>, Query, description = "How long to wait for that, at most 60."),
           ("asOf" = Option<u64>, Query)),
    responses((status = 200, description = "The peer lists every node renders.", body = Peers)),
    security(("bearer" = [])))]
pub async fn get_peers(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::auth::Caller>,
    view: View,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let mut errors = Vec::new();
    let get = query(&q, &["after", "waitSeconds", "asOf"], &mut errors);
    let after = number("after", get("after"), &mut errors);
    let wait = number("waitSeconds", get("waitSeconds"), &mut errors);
    if wait.is_some_and(|w| w > MAX_WAIT.as_secs()) {
        errors.push(FieldError::new("waitSeconds", "must be at most 60"));
    }
    let at = as_of(&view, get("asOf"), &mut errors)?;
    finish(errors)?;
    let rm = match (at, after, wait) {
        (None, Some(after), Some(wait)) if view.state.membership.generation <= after => {
            // A long-poll holds no read models while it waits (see
            // `wait_for_generation`): the ones it arrived at go now.
            drop(view);
            wait_for_generation(&state, &caller, after, std::time::Duration::from_secs(wait))
                .await?
        }
        _ => view.at(&state.store, at).await?,
    };
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        state.rendered.peers(&rm),
    )
        .into_response())
}

/// Waits until the generation is above `after`, or `wait` passes, and
/// answers the read models then. Holds no database connection while it
/// waits: it sleeps on the writer's publications that move the generation
/// or change the tokens (a commit of this process or a fold of another's),
/// and reads the newest published read models when woken.
///
/// Nor does it hold read models while it sleeps: it sleeps through the
/// commits that change neither (agents' reports of their applied
/// generations), and read models it held would stay alive through them
/// all. 5,000 agents waiting between two changes so kept a version of the
/// read models per commit of their reports, and freed them at the next
/// change, as they answered (3.8 % of the server's samples in a whole run
/// of the agents bench; `docs/benchmarks.md`).
async fn wait_for_generation(
    state: &AppState,
    caller: &crate::auth::Caller,
    after: u64,
    wait: std::time::Duration,
) -> ApiResult<std::sync::Arc<stratum_projections::ReadModels>> {
    let deadline = tokio::time::Instant::now() + wait;
    let _watcher = state.watcher()?;
    let mut wakes = state.bus.wakes();
    // Set when the wait is over: the newest read models are answered as
    // they are, once the caller's credential is judged on them.
    let mut over = false;
    loop {
        // Seen before reading, so a publication in between wakes it again.
        wakes.borrow_and_update();
        let expires = {
            let rm = state.bus.published();
            // A credential that ends while it waits ends the wait: 401.
            if let Some(why) = crate::auth::credential_ended(&rm, caller, chrono::Utc::now()) {
                tracing::info!(reason = why, "a long-poll's credential ended");
                return Err(ApiError::unauthenticated());
            }
            if over || rm.state.membership.generation > after {
                return Ok(rm);
            }
            // An expiry is no commit: wake for it too.
            crate::auth::credential_expires(&rm, caller)
                .and_then(|t| (t - chrono::Utc::now()).to_std().ok())
                .map_or(deadline, |d| deadline.min(tokio::time::Instant::now() + d))
        };
        // The wake first, and alone when it is ready: polling the stop
        // token takes its lock, one that every long-poll shares.
        tokio::select! {
            biased;
            changed = tokio::time::timeout_at(expires, wakes.changed()) => match changed {
                Err(_) if expires < deadline => {}
                Ok(Ok(())) => {}
                _ => over = true,
            },
            // Stopping: answer the generation as it stands.
            _ = state.shutdown.cancelled() => over = true,
        }
    }
}

#[utoipa::path(get, path = "/v1/admin/cluster/transport-admission/{nodeId}", tag = "membership",
    params(("nodeId" = String, Path)),
    responses((status = 200, description = "Whether the node transport may accept this peer.", body = stratum_projections::members::Admission)),
    security(("bearer" = [])))]
pub async fn admission(view: View, Path(node_id): Path<String>) -> ApiResult<Json<Value>> {
    let m = &view.state.membership;
    let record = m
        .members
        .get(&node_id)
        .map(|member| member_record(member, Some(m.generation)));
    Ok(Json(
        serde_json::to_value(transport_admission(&node_id, record.as_ref(), m.generation))
            .expect("admissions serialize"),
    ))
}
