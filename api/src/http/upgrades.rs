//! Upgrade endpoints (SPEC §5): upgrades, node and backup reports, apply,
//! cancel, rollback and acknowledge. Releases and the running release are
//! in `releases`, node facts and alarms in `facts`.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::Value;
use stratum_domain::iam::Action;
use stratum_domain::upgrade::{upgrade_stream, HostStep, UpgradeCommand};
use stratum_domain::{Command, FieldError};
use stratum_projections::doc_kind;
use stratum_projections::upgrades::{upgrade_record, UpgradeRecord};

use super::extract::{as_of, doc_cursor, doc_page, finish, page, query, JsonBody, WriteHeaders};
use super::{run_command, set_etag, AppState, Route};
use crate::auth::{new_id, Caller};
use crate::error::{ApiError, ApiResult};
use crate::http::events::history_page;
use crate::reads::View;
use crate::request_body;

pub fn routes() -> Vec<Route> {
    let r = Route::gated;
    vec![
        r(
            Method::POST,
            "/v1/admin/upgrades",
            Action::CreateUpgrade,
            post(create_upgrade),
        )
        .by_command(),
        r(
            Method::GET,
            "/v1/admin/upgrades",
            Action::ListUpgrades,
            get(list_upgrades),
        ),
        r(
            Method::GET,
            "/v1/admin/upgrades/{id}",
            Action::GetUpgrade,
            get(get_upgrade),
        ),
        r(
            Method::GET,
            "/v1/admin/upgrades/{id}/history",
            Action::ReadEvents,
            get(upgrade_history),
        ),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/apply",
            Action::ApplyUpgrade,
            post(apply),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/cancel",
            Action::CancelUpgrade,
            post(cancel),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/rollback",
            Action::RollbackUpgrade,
            post(rollback),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/acknowledge",
            Action::AcknowledgeUpgrade,
            post(acknowledge),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/backup",
            Action::ReportBackup,
            post(report_backup),
        )
        .by_command(),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/nodes/{nodeId}/report",
            Action::ReportNodeProgress,
            post(report_node),
        ),
    ]
}

pub(super) async fn upgrade_command(
    state: &AppState,
    caller: &Caller,
    headers: &WriteHeaders,
    body: (&[u8], Vec<FieldError>),
    command: UpgradeCommand,
    success_status: u16,
) -> Response {
    run_command(
        state,
        caller,
        headers,
        body,
        Command::Upgrade(command),
        success_status,
    )
    .await
}
/// The backup an upgrade takes.
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackupSpec {
    /// node: on the node. target: the configured backup target (400 naming
    /// backup.location when none is configured). Default: target when one
    /// is configured, else node.
    #[schema(value_type = Option<String>, example = "node", pattern = "^(node|target)$")]
    pub location: Option<String>,
    /// Encrypt to the backup recipient; always true for a target with a
    /// configured recipient. Default false.
    pub encrypted: Option<bool>,
}

request_body! {
    /// Plan an upgrade.
    pub struct CreateUpgradeBody {
        target_release: String = "targetRelease" @required ~ super::extract::shape::non_empty,
        /// now (default) or stage-only.
        mode: String = "mode" ~ super::extract::shape::one_of(&["now", "stage-only"]),
        backup: BackupSpec = "backup",
    }
}

/// Plan an upgrade to a registered release.
///
/// The component changes are the target release's list against the
/// running release's. The upgrade driver then runs the prechecks and moves
/// it on as the nodes report. One upgrade at a time (409
/// `UPGRADE_ALREADY_ACTIVE`).
#[utoipa::path(post, path = "/v1/admin/upgrades", tag = "upgrades", request_body = CreateUpgradeBody,
    responses((status = 201, description = "The planned upgrade.", body = UpgradeRecord),
              (status = 400, description = "Bad request.", body = crate::http::schema::ErrorBody),
              (status = 409, description = "UPGRADE_ALREADY_ACTIVE or RUNNING_RELEASE_NOT_SET.", body = crate::http::schema::ErrorBody),
              (status = 503, description = "UPGRADE_IN_PROGRESS.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create_upgrade(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: WriteHeaders,
    body: JsonBody<CreateUpgradeBody>,
) -> Response {
    let b = body.value;
    let backup = b.backup.into_option().unwrap_or_default();
    let cmd = UpgradeCommand::Create {
        upgrade_id: new_id("upg"),
        target_release: b.target_release.into_option(),
        mode: b.mode.into_option(),
        backup_location: backup.location,
        backup_encrypted: backup.encrypted,
        config: (*state.upgrade_config).clone(),
    };
    upgrade_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        cmd,
        201,
    )
    .await
}

#[utoipa::path(get, path = "/v1/admin/upgrades", tag = "upgrades",
    params(("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query), ("asOf" = Option<u64>, Query)),
    responses((status = 200, description = "A page of upgrades, oldest first.", body = super::schema::Page<UpgradeRecord>)),
    security(("bearer" = [])))]
pub async fn list_upgrades(
    State(state): State<AppState>,
    view: View,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let mut errors = Vec::new();
    let get = query(&q, &["limit", "cursor", "asOf"], &mut errors);
    let pg = page(get("limit"), get("cursor"), &mut errors);
    let at = as_of(&view, get("asOf"), &mut errors)?;
    let after = doc_cursor(&pg, &mut errors);
    finish(errors)?;
    let rm = view.at(&state.store, at).await?;
    Ok(Json(doc_page(
        rm.docs(doc_kind::UPGRADE),
        &pg,
        after.as_ref(),
    )))
}

#[utoipa::path(get, path = "/v1/admin/upgrades/{id}", tag = "upgrades",
    params(("id" = String, Path), ("asOf" = Option<u64>, Query)),
    responses((status = 200, description = "The upgrade and how far it got.", body = UpgradeRecord),
              (status = 404, description = "Resource not found.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_upgrade(
    State(state): State<AppState>,
    view: View,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let mut errors = Vec::new();
    let get = query(&q, &["asOf"], &mut errors);
    let at = as_of(&view, get("asOf"), &mut errors)?;
    finish(errors)?;
    let rm = view.at(&state.store, at).await?;
    let u = rm
        .state
        .upgrades
        .upgrades
        .get(&id)
        .ok_or_else(|| ApiError::not_found(format!("Upgrade {id}")))?;
    let mut res = Json(upgrade_record(u)).into_response();
    set_etag(&mut res, u.version);
    Ok(res)
}

/// Every event of one upgrade, in order: the audit trail of who did what.
#[utoipa::path(get, path = "/v1/admin/upgrades/{id}/history", tag = "upgrades",
    params(("id" = String, Path),
           ("limit" = Option<u32>, Query, description = "Events per page: 1 to 1000, default 100."),
           ("cursor" = Option<String>, Query, description = "The `nextCursor` of the page before.")),
    responses((status = 200, description = "The upgrade's events, oldest first, a page at a time.", body = super::schema::History),
              (status = 404, description = "Resource not found.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn upgrade_history(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    history_page(&state, &upgrade_stream(&id), format!("Upgrade {id}"), &q).await
}

/// Apply a staged upgrade: it goes on to its backup.
#[utoipa::path(post, path = "/v1/admin/upgrades/{id}/apply", tag = "upgrades",
    params(("id" = String, Path)),
    responses((status = 200, description = "The upgrade.", body = UpgradeRecord),
              (status = 409, description = "UPGRADE_STATE_CONFLICT: it is not staged.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn apply(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(upgrade_id): Path<String>,
    headers: WriteHeaders,
) -> Response {
    let cmd = UpgradeCommand::Apply { upgrade_id };
    upgrade_command(&state, &caller, &headers, (b"", Vec::new()), cmd, 200).await
}

/// Cancel an upgrade that has not taken its backup.
///
/// Until `backing_up`, nothing that runs has changed: the upgrade ends as
/// `canceled`, and what the nodes fetched stays there for a later upgrade.
/// Refused (409 `UPGRADE_NOT_CANCELABLE`, `details.state`) from the backup
/// on, and for a done or failed upgrade. Canceling a canceled upgrade
/// answers the record unchanged. Install-scope; gates on
/// `upgrade:CancelUpgrade`.
#[utoipa::path(post, path = "/v1/admin/upgrades/{id}/cancel", tag = "upgrades",
    params(("id" = String, Path)),
    responses((status = 200, description = "Canceled.", body = UpgradeRecord),
              (status = 401, description = "Not authenticated.", body = crate::http::schema::ErrorBody),
              (status = 403, description = "Authenticated but not authorized.", body = crate::http::schema::ErrorBody),
              (status = 404, description = "Resource not found.", body = crate::http::schema::ErrorBody),
              (status = 409, description = "Conflicting state.", body = crate::http::schema::ErrorBody),
              (status = 503, description = "Upstream temporarily unavailable.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn cancel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(upgrade_id): Path<String>,
    headers: WriteHeaders,
) -> Response {
    let cmd = UpgradeCommand::Cancel { upgrade_id };
    upgrade_command(&state, &caller, &headers, (b"", Vec::new()), cmd, 200).await
}

request_body! {
    /// Roll an upgrade back.
    pub struct RollbackBody {
        /// Restore the undone upgrade's pre-upgrade backup first.
        restore_backup: bool = "restoreBackup",
    }
}

/// Roll a done or failed upgrade back: a new upgrade to its `fromRelease`,
/// with `rollbackOf` set; the undone upgrade gets `rolledBackBy`.
#[utoipa::path(post, path = "/v1/admin/upgrades/{id}/rollback", tag = "upgrades",
    params(("id" = String, Path)), request_body = RollbackBody,
    responses((status = 201, description = "The rollback upgrade.", body = UpgradeRecord),
              (status = 400, description = "INVALID_INPUT: restoreBackup for an upgrade that took no backup.", body = crate::http::schema::ErrorBody),
              (status = 409, description = "UPGRADE_STATE_CONFLICT, UPGRADE_ALREADY_ACTIVE, or RESTORE_REQUIRED: the old release cannot run on the schema the upgrade migrated to, so the rollback needs restoreBackup: true.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn rollback(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(upgrade_id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<RollbackBody>,
) -> Response {
    let cmd = UpgradeCommand::Rollback {
        upgrade_id,
        new_upgrade_id: new_id("upg"),
        restore_backup: body.value.restore_backup.into_option().unwrap_or(false),
        config: (*state.upgrade_config).clone(),
    };
    upgrade_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        cmd,
        201,
    )
    .await
}

/// Mark a failed upgrade's findings as read.
#[utoipa::path(post, path = "/v1/admin/upgrades/{id}/acknowledge", tag = "upgrades",
    params(("id" = String, Path)),
    responses((status = 200, description = "The upgrade.", body = UpgradeRecord),
              (status = 409, description = "UPGRADE_STATE_CONFLICT: it has not failed.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn acknowledge(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(upgrade_id): Path<String>,
    headers: WriteHeaders,
) -> Response {
    let cmd = UpgradeCommand::Acknowledge { upgrade_id };
    upgrade_command(&state, &caller, &headers, (b"", Vec::new()), cmd, 200).await
}

request_body! {
    /// Report the upgrade's backup.
    pub struct BackupReportBody {
        location: String = "location" @required ~ super::extract::shape::one_of(&["node", "target"]),
        bundle: String = "bundle" @required ~ super::extract::shape::non_empty,
        encrypted: bool = "encrypted" @required,
    }
}

/// Report the pre-upgrade backup; the driver then starts rolling.
#[utoipa::path(post, path = "/v1/admin/upgrades/{id}/backup", tag = "upgrades",
    params(("id" = String, Path)), request_body = BackupReportBody,
    responses((status = 200, description = "The upgrade.", body = UpgradeRecord),
              (status = 409, description = "UPGRADE_STATE_CONFLICT: not backing up.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn report_backup(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(upgrade_id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<BackupReportBody>,
) -> Response {
    let b = body.value;
    let cmd = UpgradeCommand::ReportBackup {
        upgrade_id,
        location: b.location.into_option(),
        bundle: b.bundle.into_option(),
        encrypted: b.encrypted.into_option(),
    };
    upgrade_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        cmd,
        200,
    )
    .await
}

/// One host step as a node reports it.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostStepBody {
    #[schema(min_length = 1, max_length = 256)]
    pub name: String,
    /// pending, running, done, failed or skipped.
    #[schema(pattern = "^(pending|running|done|failed|skipped)$")]
    pub state: String,
    #[serde(default)]
    pub reboot_mode: String,
    /// What the step found or did (at most 4,096 bytes).
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub detail: String,
    /// Units the restart step still has to restart.
    #[serde(default)]
    #[schema(max_items = 1024)]
    pub pending_units: Vec<String>,
    /// Units the restart step restarted onto their pin, or switch-sysext
    /// restarted.
    #[serde(default)]
    #[schema(max_items = 1024)]
    pub restarted_units: Vec<String>,
    /// Units the restore step stopped; the step that renders the release's
    /// pins starts them again.
    #[serde(default)]
    #[schema(max_items = 1024)]
    pub stopped_units: Vec<String>,
    /// The system extensions the switch-sysext step switched.
    #[serde(default)]
    #[schema(max_items = 1024)]
    pub switched_sysexts: Vec<String>,
}

request_body! {
    /// A node's report on its part of an upgrade.
    pub struct NodeReportBody {
        /// fetch, roll or verify.
        phase: String = "phase" @required ~ super::extract::shape::one_of(&["fetch", "roll", "verify"]),
        /// running, done, failed, or rolled_back: the node switched itself
        /// back to the release it ran before.
        state: String = "state" @required ~ super::extract::shape::one_of(&["running", "done", "failed", "rolled_back"]),
        message: String = "message" ~ super::extract::shape::safe_text,
        host_steps: Vec<HostStepBody> = "hostSteps",
        /// When it rebooted; settling starts again from it.
        rebooted_at: super::extract::Timestamp = "rebootedAt",
        /// The instances that ran on the node when it rebooted; verify
        /// waits for each to run again.
        instances: Vec<String> = "instances",
        /// The node's current host-helper intent.
        host_state: String = "hostState" ~ super::extract::shape::short_line,
        /// The instances running again since the reboot.
        running_instances: Vec<String> = "runningInstances",
    }
}

/// A node reports its part of an upgrade (a node only for itself).
///
/// `fetching` waits for every node's `fetch`; `rolling` rolls one node at a
/// time in ordinal order, and a `roll` report from a node whose turn has
/// not come is 409 `NOT_NODE_TURN`; `verifying` waits for every node's
/// `verify`. A `failed` report fails the upgrade with the node's message.
#[utoipa::path(post, path = "/v1/admin/upgrades/{id}/nodes/{nodeId}/report", tag = "upgrades",
    params(("id" = String, Path), ("nodeId" = String, Path)), request_body = NodeReportBody,
    responses((status = 200, description = "The upgrade.", body = UpgradeRecord),
              (status = 404, description = "No such upgrade, or the node is not part of it.", body = crate::http::schema::ErrorBody),
              (status = 409, description = "NOT_NODE_TURN or UPGRADE_STATE_CONFLICT.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn report_node(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((upgrade_id, node_id)): Path<(String, String)>,
    headers: WriteHeaders,
    body: JsonBody<NodeReportBody>,
) -> Response {
    let b = body.value;
    let cmd = UpgradeCommand::ReportNode {
        upgrade_id,
        node_id,
        phase: b.phase.into_option(),
        state: b.state.into_option(),
        message: b.message.into_option(),
        host_steps: b.host_steps.into_option().map(|steps| {
            steps
                .into_iter()
                .map(|h| HostStep {
                    name: h.name,
                    state: h.state,
                    reboot_mode: h.reboot_mode,
                    detail: h.detail,
                    pending_units: h.pending_units,
                    restarted_units: h.restarted_units,
                    stopped_units: h.stopped_units,
                    switched_sysexts: h.switched_sysexts,
                })
                .collect()
        }),
        rebooted_at: b.rebooted_at.into_option().map(|t| t.0),
        instances: b.instances.into_option(),
        host_state: b.host_state.into_option(),
        running_instances: b.running_instances.into_option(),
    };
    upgrade_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        cmd,
        200,
    )
    .await
}

pub(super) fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("records serialize")
}

/// A page of one kind of document of the read models.
pub(super) fn list_docs(
    view: &View,
    kind: &'static str,
    q: &HashMap<String, String>,
) -> ApiResult<Json<Value>> {
    let mut errors = Vec::new();
    let get = query(q, &["limit", "cursor"], &mut errors);
    let pg = page(get("limit"), get("cursor"), &mut errors);
    let after = doc_cursor(&pg, &mut errors);
    finish(errors)?;
    Ok(Json(doc_page(view.docs(kind), &pg, after.as_ref())))
}
