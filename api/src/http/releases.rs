//! Release endpoints (SPEC §5): registering signed release manifests,
//! reading them, and the release the cluster runs.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::{get, post, put};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::Value;
use stratum_domain::iam::Action;
use stratum_domain::release::SignedManifest;
use stratum_domain::upgrade::{ReleaseSource, UpgradeCommand};
use stratum_domain::FieldError;
use stratum_projections::doc_kind;
use stratum_projections::upgrades::{running_release_record, RunningReleaseRecord};

use super::extract::{as_of, finish, parse_doc, query, BodyFields, JsonBody, WriteHeaders};
use super::{AppState, Route};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::reads::View;
use crate::request_body;

use super::upgrades::{list_docs, to_value, upgrade_command};

pub fn routes() -> Vec<Route> {
    let r = Route::gated;
    vec![
        r(
            Method::POST,
            "/v1/admin/releases",
            Action::RegisterRelease,
            post(register_release),
        )
        .by_command(),
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
        )
        .by_command(),
        r(
            Method::GET,
            "/v1/admin/cluster/release",
            Action::GetRunningRelease,
            get(get_running_release),
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
    let cmd = UpgradeCommand::RegisterRelease {
        manifest: SignedManifest::verify(body.value.0, &state.release_keys),
        source: ReleaseSource::Manifest,
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
