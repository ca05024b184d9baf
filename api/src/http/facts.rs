//! What nodes report of themselves (SPEC §5): the facts of what they run,
//! checked against the running release, and the alarms they raise.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::Value;
use stratum_domain::iam::Action;
use stratum_domain::release::{Component, ComponentKind};
use stratum_domain::upgrade::{NodeFacts, UpgradeCommand};
use stratum_domain::FieldError;
use stratum_projections::doc_kind;

use super::extract::{
    as_of, doc_cursor, doc_page, finish, page, parse_doc, query, JsonBody, WriteHeaders,
};
use super::{AppState, Route};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::reads::View;
use crate::request_body;

use super::upgrades::upgrade_command;

pub fn routes() -> Vec<Route> {
    let r = Route::gated;
    vec![
        r(
            Method::POST,
            "/v1/admin/cluster/members/{nodeId}/facts",
            Action::ReportNodeFacts,
            post(report_facts),
        )
        .by_command(),
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
    ]
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
