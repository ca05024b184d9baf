//! Upgrade endpoints (SPEC §5): releases, the running release, upgrades,
//! node and backup reports, apply, cancel, rollback and acknowledge.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::Value;
use stratum_domain::iam::Action;
use stratum_domain::release::verify_signature;
use stratum_domain::release::{Component, ComponentKind};
use stratum_domain::upgrade::{upgrade_stream, HostStep, NodeFacts, ReleaseSource, UpgradeCommand};
use stratum_domain::{Command, FieldError};
use stratum_projections::doc_kind;
use stratum_projections::upgrades::{
    running_release_record, upgrade_record, RunningReleaseRecord, UpgradeRecord,
};

use super::extract::{
    as_of, doc_cursor, doc_page, finish, page, parse_doc, query, BodyFields, JsonBody, WriteHeaders,
};
use super::{run_command, set_etag, AppState, Route};
use crate::auth::{new_id, Caller};
use crate::error::{ApiError, ApiResult};
use crate::http::events::history_page;
use crate::reads::View;
use crate::request_body;

pub fn routes() -> Vec<Route> {
    let r = |method: Method, path, action, handler| Route {
        method,
        path,
        action: Some(action),
        handler,
        watch: super::Watch::No,
    };
    vec![
        r(
            Method::POST,
            "/v1/admin/cluster/members/{nodeId}/facts",
            Action::ReportNodeFacts,
            post(report_facts),
        ),
        r(
            Method::GET,
            "/v1/admin/cluster/members/{nodeId}/facts",
            Action::GetMember,
            get(get_facts),
        ),
        r(
            Method::GET,
            "/v1/admin/alarms",
            Action::ListAlarms,
            get(list_alarms),
        ),
        r(
            Method::POST,
            "/v1/admin/releases",
            Action::RegisterRelease,
            post(register_release),
        ),
        r(
            Method::GET,
            "/v1/admin/releases",
            Action::ListReleases,
            get(list_releases),
        ),
        r(
            Method::GET,
            "/v1/admin/releases/{version}",
            Action::GetRelease,
            get(get_release),
        ),
        r(
            Method::PUT,
            "/v1/admin/cluster/release",
            Action::SetRunningRelease,
            put(set_running_release),
        ),
        r(
            Method::GET,
            "/v1/admin/cluster/release",
            Action::GetRunningRelease,
            get(get_running_release),
        ),
        r(
            Method::POST,
            "/v1/admin/upgrades",
            Action::CreateUpgrade,
            post(create_upgrade),
        ),
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
        ),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/cancel",
            Action::CancelUpgrade,
            post(cancel),
        ),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/rollback",
            Action::RollbackUpgrade,
            post(rollback),
        ),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/acknowledge",
            Action::AcknowledgeUpgrade,
            post(acknowledge),
        ),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/backup",
            Action::ReportBackup,
            post(report_backup),
        ),
        r(
            Method::POST,
            "/v1/admin/upgrades/{id}/nodes/{nodeId}/report",
            Action::ReportNodeProgress,
            post(report_node),
        ),
    ]
}

/// A release manifest, as the release tooling signed it.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(transparent)]
#[schema(value_type = ManifestDoc)]
pub struct ManifestBody(pub Value);

/// A signed release manifest (SPEC §5): what a release pins, signed with
/// Ed25519 over the RFC 8785 canonical JSON of the manifest without its
/// `signature` member.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = Manifest)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestDoc {
    /// A semantic version, e.g. 2026.11.0.
    #[schema(example = "2026.11.0")]
    version: String,
    /// Container images `{kind: image, name, version, digest}` and host
    /// packages `{kind: package, name, epoch, version, release, arch}`.
    #[schema(nullable = false)]
    components: Option<Vec<ComponentDoc>>,
    os: OsDoc,
    /// Versions an upgrade may not skip.
    #[schema(nullable = false)]
    required_stops: Option<Vec<String>>,
    /// Upgrade paths known not to work, and the way round each.
    #[schema(nullable = false)]
    known_broken: Option<Vec<KnownBrokenDoc>>,
    /// The vulnerabilities the OS change fixes.
    #[schema(nullable = false)]
    cves: Option<Vec<String>>,
    /// The bytes a node needs free to fetch the release's bundle.
    #[schema(minimum = 0)]
    #[schema(nullable = false)]
    bundle_bytes: Option<u64>,
    #[schema(nullable = false)]
    schema: Option<SchemaDoc>,
    /// The system extensions the release pins.
    #[schema(nullable = false)]
    sysext: Option<Vec<SysextDoc>>,
    signature: SignatureDoc,
}

/// One pinned component.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = Component)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ComponentDoc {
    /// image or package.
    #[schema(pattern = "^(image|package)$")]
    kind: String,
    name: String,
    version: String,
    /// An image's sha256:<64 hex digits>.
    #[schema(nullable = false)]
    digest: Option<String>,
    #[schema(nullable = false)]
    epoch: Option<u32>,
    #[schema(nullable = false)]
    release: Option<String>,
    #[schema(nullable = false)]
    arch: Option<String>,
}

/// The OS a release installs.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = Os)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OsDoc {
    version: String,
    #[schema(nullable = false)]
    kernel: Option<String>,
    #[schema(nullable = false)]
    kernel_args: Option<Vec<String>>,
    /// The OS is installed A/B: the previous OS stays bootable.
    #[schema(nullable = false)]
    ab_slots: Option<bool>,
}

#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = KnownBroken)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KnownBrokenDoc {
    from: String,
    reason: String,
    way_round: String,
}

/// The control plane's database schema a release runs.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = Schema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SchemaDoc {
    version: u32,
    /// The oldest schema this release migrates from.
    #[schema(nullable = false)]
    min_upgrade_from: Option<u32>,
    /// The oldest schema whose control plane still runs on this one.
    #[schema(nullable = false)]
    readable_by: Option<u32>,
}

#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = Sysext)]
#[serde(deny_unknown_fields)]
struct SysextDoc {
    name: String,
    version: String,
}

/// The release key's signature.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = Signature)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SignatureDoc {
    /// A trusted release key's id.
    key_id: String,
    /// The Ed25519 signature, standard base64.
    value: String,
}

impl BodyFields for ManifestBody {
    const FIELDS: &'static [&'static str] = &[
        "version",
        "components",
        "os",
        "requiredStops",
        "knownBroken",
        "cves",
        "bundleBytes",
        "schema",
        "sysext",
        "signature",
    ];

    fn type_errors(&self) -> Vec<FieldError> {
        Vec::new()
    }
}

async fn upgrade_command(
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

/// Register a signed release manifest.
///
/// The signature is an Ed25519 signature (standard base64) over the RFC 8785
/// canonical JSON of the manifest without its `signature` member, by a
/// trusted release key (`STRATUM_RELEASE_KEYS`). A bad signature or an
/// unknown key is refused 400 naming `signature`. Registering the same
/// manifest again answers the release unchanged.
#[utoipa::path(post, path = "/v1/admin/releases", tag = "upgrades", request_body = ManifestBody,
    responses((status = 201, description = "The registered release.", body = super::schema::ReleaseDoc),
              (status = 400, description = "A bad manifest or signature.", body = crate::http::schema::ErrorBody),
              (status = 409, description = "RELEASE_EXISTS: the version is registered with another manifest.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn register_release(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: WriteHeaders,
    body: JsonBody<ManifestBody>,
) -> Response {
    let mut errors = body.errors;
    if let Err(e) = verify_signature(&body.value.0, &state.release_keys) {
        errors.push(e);
    }
    let cmd = UpgradeCommand::RegisterRelease {
        manifest: body.value.0,
        source: ReleaseSource::Manifest,
    };
    upgrade_command(&state, &caller, &headers, (&body.raw, errors), cmd, 201).await
}

#[utoipa::path(get, path = "/v1/admin/releases", tag = "upgrades",
    params(("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, description = "A page of releases ordered by version text.", body = super::schema::Page<super::schema::ReleaseDoc>)),
    security(("bearer" = [])))]
pub async fn list_releases(
    view: View,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    list_docs(&view, doc_kind::RELEASE, &q)
}

#[utoipa::path(get, path = "/v1/admin/releases/{version}", tag = "upgrades",
    params(("version" = String, Path)),
    responses((status = 200, description = "The release's manifest as registered.", body = super::schema::ReleaseDoc),
              (status = 404, description = "Resource not found.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_release(view: View, Path(version): Path<String>) -> ApiResult<Json<Value>> {
    let doc = view
        .doc(doc_kind::RELEASE, &version)
        .ok_or_else(|| ApiError::not_found(format!("Release {version}")))?;
    Ok(Json(parse_doc(&doc.doc)))
}

request_body! {
    /// Set the running release, once, at install.
    pub struct RunningReleaseBody {
        version: String = "version" @required ~ super::extract::shape::non_empty,
    }
}

/// Set the release the cluster runs: once, at install; afterwards only
/// upgrades change it (409 `RUNNING_RELEASE_ALREADY_SET`).
#[utoipa::path(put, path = "/v1/admin/cluster/release", tag = "upgrades", request_body = RunningReleaseBody,
    responses((status = 200, description = "The running release.", body = RunningReleaseRecord),
              (status = 409, description = "RUNNING_RELEASE_ALREADY_SET.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn set_running_release(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: WriteHeaders,
    body: JsonBody<RunningReleaseBody>,
) -> Response {
    let cmd = UpgradeCommand::SetRunningRelease {
        version: body.value.version.into_option(),
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

#[utoipa::path(get, path = "/v1/admin/cluster/release", tag = "upgrades",
    params(("asOf" = Option<u64>, Query)),
    responses((status = 200, description = "The running release.", body = RunningReleaseRecord),
              (status = 404, description = "Not set yet.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_running_release(
    State(state): State<AppState>,
    view: View,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let mut errors = Vec::new();
    let get = query(&q, &["asOf"], &mut errors);
    let at = as_of(&view, get("asOf"), &mut errors)?;
    finish(errors)?;
    let rm = view.at(&state.store, at).await?;
    let r = rm
        .state
        .upgrades
        .running
        .as_ref()
        .ok_or_else(|| ApiError::not_found("The running release (it is set at install)"))?;
    Ok(Json(to_value(&running_release_record(r))))
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
    #[schema(min_length = 1)]
    pub name: String,
    /// pending, running, done, failed or skipped.
    #[schema(pattern = "^(pending|running|done|failed|skipped)$")]
    pub state: String,
    #[serde(default)]
    pub reboot_mode: String,
    /// What the step found or did.
    #[serde(default)]
    pub detail: String,
    /// Units the restart step still has to restart.
    #[serde(default)]
    pub pending_units: Vec<String>,
    /// Units the restart step restarted onto their pin, or switch-sysext
    /// restarted.
    #[serde(default)]
    pub restarted_units: Vec<String>,
    /// Units the restore step stopped; the step that renders the release's
    /// pins starts them again.
    #[serde(default)]
    pub stopped_units: Vec<String>,
    /// The system extensions the switch-sysext step switched.
    #[serde(default)]
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

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("records serialize")
}

/// A page of one kind of document of the read models.
fn list_docs(
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

/// An image pin a node runs.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageFact {
    /// `image`, as a manifest spells it; may be left out.
    #[serde(default)]
    #[schema(pattern = "^image$")]
    pub kind: Option<String>,
    /// The images.yaml service name.
    #[schema(min_length = 1)]
    pub name: String,
    #[schema(min_length = 1)]
    pub version: String,
    /// sha256:<64 hex digits>.
    #[serde(default)]
    pub digest: String,
}

/// A host package a node lists, by NEVRA.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackageFact {
    /// `package`, as a manifest spells it; may be left out.
    #[serde(default)]
    #[schema(pattern = "^package$")]
    pub kind: Option<String>,
    #[schema(min_length = 1)]
    pub name: String,
    #[serde(default)]
    pub epoch: u32,
    #[schema(min_length = 1)]
    pub version: String,
    #[serde(default)]
    pub release: String,
    #[serde(default)]
    pub arch: String,
}

request_body! {
    /// A node agent's report of what it runs and holds; the newest wins.
    pub struct FactsBody {
        /// The image pins it runs.
        images: Vec<ImageFact> = "images",
        /// The host packages it lists (NEVRA).
        packages: Vec<PackageFact> = "packages",
        /// Free bytes where fetched bundles go.
        bundle_free_bytes: u64 = "bundleFreeBytes",
        /// Free bytes where a backup on the node goes.
        backup_free_bytes: u64 = "backupFreeBytes",
        /// The bytes a backup of what the node holds takes.
        backup_bytes: u64 = "backupBytes",
        /// The database schema version it runs.
        schema_version: u32 = "schemaVersion",
        /// Whether its services are ready.
        ready: bool = "ready",
        /// Whether it is shut down.
        shut_down: bool = "shutDown",
    }
}

/// A node agent reports what it runs and holds (a node only for itself).
///
/// The upgrade prechecks `space`, `backup-space`, `schema`,
/// `cluster-shutdown`, `node` and `components` judge by these facts; a
/// check with no fact to judge by passes and names the missing fact.
#[utoipa::path(post, path = "/v1/admin/cluster/members/{nodeId}/facts", tag = "upgrades",
    params(("nodeId" = String, Path)), request_body = FactsBody,
    responses((status = 200, description = "The facts as recorded.", body = stratum_projections::upgrades::FactsRecord),
              (status = 400, description = "Bad request.", body = crate::http::schema::ErrorBody),
              (status = 404, description = "No such member.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn report_facts(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(node_id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<FactsBody>,
) -> Response {
    let b = body.value;
    let facts = NodeFacts {
        images: b
            .images
            .into_option()
            .unwrap_or_default()
            .into_iter()
            .map(|i| Component {
                kind: component_kind(i.kind.as_deref(), ComponentKind::Image),
                name: i.name,
                version: i.version,
                digest: i.digest,
                epoch: 0,
                release: String::new(),
                arch: String::new(),
            })
            .collect(),
        packages: b
            .packages
            .into_option()
            .unwrap_or_default()
            .into_iter()
            .map(|p| Component {
                kind: component_kind(p.kind.as_deref(), ComponentKind::Package),
                name: p.name,
                version: p.version,
                digest: String::new(),
                epoch: p.epoch,
                release: p.release,
                arch: p.arch,
            })
            .collect(),
        bundle_free_bytes: b.bundle_free_bytes.into_option(),
        backup_free_bytes: b.backup_free_bytes.into_option(),
        backup_bytes: b.backup_bytes.into_option(),
        schema_version: b.schema_version.into_option(),
        ready: b.ready.into_option(),
        shut_down: b.shut_down.into_option(),
    };
    upgrade_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        UpgradeCommand::ReportFacts { node_id, facts },
        200,
    )
    .await
}

/// The kind a fact names, or the list's own when it names none; a kind
/// of the other list is kept, for the domain to refuse at its field.
fn component_kind(named: Option<&str>, own: ComponentKind) -> ComponentKind {
    match named {
        Some("image") => ComponentKind::Image,
        Some("package") => ComponentKind::Package,
        _ => own,
    }
}

#[utoipa::path(get, path = "/v1/admin/cluster/members/{nodeId}/facts", tag = "upgrades",
    params(("nodeId" = String, Path)),
    responses((status = 200, description = "The node's newest facts report.", body = stratum_projections::upgrades::FactsRecord),
              (status = 404, description = "The node reported no facts.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_facts(view: View, Path(node_id): Path<String>) -> ApiResult<Response> {
    let doc = view
        .doc(doc_kind::FACTS, &node_id)
        .ok_or_else(|| ApiError::not_found(format!("Facts of node {node_id}")))?;
    Ok(Json(parse_doc(&doc.doc)).into_response())
}

/// The alarms, in the order raised: `node-reboot-pending` when a staged
/// security upgrade's node has waited 7 days for its reboot. `active=true`
/// lists only those not cleared.
#[utoipa::path(get, path = "/v1/admin/alarms", tag = "upgrades",
    params(("active" = Option<bool>, Query), ("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query), ("asOf" = Option<u64>, Query)),
    responses((status = 200, description = "A page of alarms, in the order raised.", body = super::schema::Page<stratum_projections::upgrades::AlarmRecord>)),
    security(("bearer" = [])))]
pub async fn list_alarms(
    State(state): State<AppState>,
    view: View,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let mut errors = Vec::new();
    let get = query(&q, &["active", "limit", "cursor", "asOf"], &mut errors);
    let at = as_of(&view, get("asOf"), &mut errors)?;
    let active = match get("active") {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            errors.push(FieldError::new("active", "must be true or false"));
            false
        }
    };
    let pg = page(get("limit"), get("cursor"), &mut errors);
    let after = doc_cursor(&pg, &mut errors);
    finish(errors)?;
    let view = view.at(&state.store, at).await?;
    let alarms = view.docs(doc_kind::ALARM).into_iter().filter(|d| {
        !active
            || view
                .state
                .upgrades
                .alarms
                .get(&d.id)
                .is_some_and(|a| a.cleared_at.is_none())
    });
    Ok(Json(doc_page(alarms.collect(), &pg, after.as_ref())))
}
