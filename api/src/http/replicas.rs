//! The replica registry: every `stratum serve` on this database, what it
//! is (build, stored formats, schema, process-manager settings) and
//! whether it is live, silent or stopped.

use axum::extract::State;
use axum::http::Method;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Json};
use serde_json::{json, Value};
use stratum_domain::iam::Action;
use stratum_domain::storage::{Finalize, ReplicaView};

use super::extract::{JsonBody, WriteHeaders};
use super::{AppState, Route};
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::replicas::ReplicaState;

pub fn routes() -> Vec<Route> {
    vec![
        Route::gated(
            Method::GET,
            "/v1/admin/replicas",
            Action::ListReplicas,
            get(list_replicas),
        ),
        Route::gated(
            Method::POST,
            "/v1/admin/replicas/finalize",
            Action::FinalizeStorageVersion,
            post(finalize),
        ),
    ]
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
    /// Each stored event type and the newest version it writes once the
    /// log's storage level allows it (`storage.writes` is what every
    /// replica writes now).
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

/// The replicas of this database, the log's storage version, and the
/// process-manager settings they act with.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(as = ReplicaList)]
pub struct ReplicaListDoc {
    items: Vec<ReplicaDoc>,
    /// The log's storage version: `level`, `newestLevel` (this build's),
    /// `writes` (`Type/version` written now), `finalized` (position, at,
    /// by, settings, replicas; null while the log records none), and
    /// `pending` (the levels a finalization would move it to).
    #[schema(value_type = Object)]
    storage: Value,
    /// The agreed process-manager settings: `digest`, and `by`, what made
    /// them agreed (the last finalization, or the live replica running
    /// longest while the log records none). Only replicas with these
    /// settings run the raft cleanup.
    #[schema(value_type = Object)]
    agreed: Value,
    /// The `replica-settings-differ` alarms: each live replica whose
    /// settings are not the agreed ones (it never acts on them).
    #[schema(value_type = Vec<Object>)]
    alarms: Value,
}

/// Every replica registered on this database, by start: live, silent or
/// stopped (a stopped or silent one is kept for a week).
#[utoipa::path(get, path = "/v1/admin/replicas", tag = "system",
    responses((status = 200, description = "The replicas, by start.", body = ReplicaListDoc)),
    security(("bearer" = [])))]
pub async fn list_replicas(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let all = state.store.replicas().await?;
    let rm = state.bus.published();
    let agreed = crate::replicas::Agreement::of(&all, &rm.state.storage, &state.replica);
    let alarms: Vec<Value> = crate::replicas::differing(&all, &agreed)
        .into_iter()
        .map(|(r, said)| {
            json!({
                "name": crate::replicas::SETTINGS_DIFFER_ALARM,
                "replica": r.id,
                "host": r.host,
                "settingsDigest": r.settings_digest,
                "message": format!("{said}: it never runs the raft cleanup with them."),
            })
        })
        .collect();
    Ok(Json(json!({
        "items": crate::replicas::records(&all, &state.replica.id),
        "storage": stratum_projections::storage::storage_version_record(&rm.state.storage),
        "agreed": {"digest": agreed.digest, "by": agreed.by},
        "alarms": alarms,
    })))
}

crate::request_body! {
    /// Finalize the log's storage version: from here on, this build's
    /// formats are written, and the settings of the replica answering are
    /// the agreed ones. Refused while a live replica cannot read the
    /// formats or has other settings.
    pub struct FinalizeBody {
        /// The level to finalize; this build's newest when left out.
        level: u16 = "level" ~ super::extract::shape::storage_level,
    }
}

/// Finalize the upgrade of stratum itself: the log moves to a storage level
/// every live replica reads, and records the agreed process-manager
/// settings. After it, a build that cannot read the level refuses the
/// database, naming the finalization.
#[utoipa::path(post, path = "/v1/admin/replicas/finalize", tag = "system",
    request_body = FinalizeBody,
    responses((status = 200, description = "The log's storage version after the finalization (unchanged when it was finalized so already).", body = Object),
              (status = 409, description = "VERSION_CONFLICT: a live replica cannot read the level's formats, a build from before the replica registry has sessions open on the database, or a live replica's settings differ; the refusal names each one.", body = super::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn finalize(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: WriteHeaders,
    body: JsonBody<FinalizeBody>,
) -> ApiResult<Response> {
    let all = state.store.replicas().await?;
    let replicas = all
        .rows
        .iter()
        .filter(|r| ReplicaState::of(r, all.now) == ReplicaState::Live)
        .map(|r| ReplicaView {
            id: r.id.clone(),
            host: r.host.clone(),
            version: r.version.clone(),
            commit: r.commit.clone(),
            // A registry row whose formats do not parse reads nothing: it
            // holds the finalization back rather than being passed over.
            reads: serde_json::from_str(&r.reads).unwrap_or_default(),
            settings: r.settings_digest.clone(),
        })
        .collect();
    let unregistered = state.store.unregistered_clients().await?;
    let cmd = stratum_domain::Command::Finalize(Finalize {
        level: body.value.level.into_option(),
        settings: state.replica.settings_digest.clone(),
        replicas,
        unregistered,
    });
    Ok(super::run_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        cmd,
        200,
    )
    .await)
}
