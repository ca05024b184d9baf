//! The OpenAPI document: every route's operation, the shapes of
//! `schema`, and what the route table says of each route (its action, its
//! common answers, its links), so the document cannot drift from the
//! routes it describes.

use axum::http::Method;
use axum::routing::get;
use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::schema::{ErrorBody, FieldErrorDoc};
use super::Route;

pub fn routes() -> Vec<Route> {
    vec![Route {
        method: Method::GET,
        path: "/v1/openapi.json",
        action: None,
        handler: get(openapi),
        watch: super::Watch::No,
        by_command: false,
    }]
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
        super::system::healthz, super::system::readyz, openapi,
        super::members::admit, super::members::list_members, super::members::get_member,
        super::members::update_member, super::members::member_history, super::members::join_progress,
        super::members::join_complete,
        super::members::join_failed, super::members::retry_join, super::members::decommission,
        super::members::applied_generation, super::members::membership, super::members::get_peers,
        super::members::admission, super::join_requests::request_join, super::join_requests::list_join_requests,
        super::join_requests::approve_join, super::join_requests::reject_join,
        super::events::list_events, super::events::verify, super::events::stream, super::events::export,
        super::log::checkpoint, super::log::tile, super::log::consistency, super::log::event,
        super::log::inclusion, super::log::acknowledge_fork,
        super::releases::register_release, super::releases::list_releases, super::releases::get_release,
        super::releases::set_running_release, super::releases::get_running_release,
        super::upgrades::create_upgrade, super::upgrades::list_upgrades, super::upgrades::get_upgrade,
        super::upgrades::upgrade_history, super::upgrades::apply, super::upgrades::cancel,
        super::upgrades::rollback, super::upgrades::acknowledge, super::upgrades::report_backup,
        super::upgrades::report_node, super::facts::report_facts, super::facts::get_facts,
        super::facts::list_alarms,
        super::iam::create_token, super::iam::list_tokens, super::iam::revoke_token,
        super::iam::create_policy, super::iam::list_policies, super::iam::get_policy,
        super::iam::grant_findings,
        super::iam::set_principal_policies, super::iam::get_principal_policies,
        super::iam::set_member_policy, super::iam::get_member_policy,
        super::iam::set_upgrade_policy, super::iam::get_upgrade_policy,
        super::replicas::list_replicas,
        super::replicas::finalize,
    ),
    components(schemas(ErrorBody, FieldErrorDoc)),
    modifiers(&Bearer),
)]
pub struct ApiDoc;

#[utoipa::path(get, path = "/v1/openapi.json", tag = "system",
    responses((status = 200, description = "This document: the OpenAPI 3.1 description of the whole API.", body = Object)))]
pub async fn openapi() -> Json<serde_json::Value> {
    Json(document_json())
}

/// The document as served. utoipa 5 writes a link's `operationId` and
/// `operationRef` in snake case; OpenAPI names them in camel case, so the
/// served JSON says them as the specification does.
pub fn document_json() -> serde_json::Value {
    let mut doc = serde_json::to_value(document()).expect("the document serializes");
    if let Some(paths) = doc.get_mut("paths").and_then(|p| p.as_object_mut()) {
        for op in paths
            .values_mut()
            .filter_map(|i| i.as_object_mut())
            .flat_map(|i| i.values_mut())
        {
            let Some(responses) = op.get_mut("responses").and_then(|r| r.as_object_mut()) else {
                continue;
            };
            for link in responses
                .values_mut()
                .filter_map(|r| r.get_mut("links").and_then(|l| l.as_object_mut()))
                .flat_map(|l| l.values_mut())
                .filter_map(|l| l.as_object_mut())
            {
                for (from, to) in [
                    ("operation_id", "operationId"),
                    ("operation_ref", "operationRef"),
                    ("request_body", "requestBody"),
                ] {
                    if let Some(v) = link.remove(from) {
                        link.insert(to.to_owned(), v);
                    }
                }
            }
        }
    }
    doc
}

/// The OpenAPI document, each operation carrying the action it is gated on
/// (`x-stratum-action`) and its resource scope, read from the route table,
/// and every answer the shared layers give (SPEC §2) documented on every
/// operation they apply to: the gate's 401 and 403, the extractors' 400,
/// 413 and 415, the write path's 409, 412, 422 and 503, a path's 404, and
/// the headers (`ETag`, `If-Match`, `Idempotency-Key`, `Retry-After`).
pub fn document() -> utoipa::openapi::OpenApi {
    use utoipa::openapi::extensions::ExtensionsBuilder;
    let mut doc = ApiDoc::openapi();
    for route in super::routes() {
        let Some(item) = doc.paths.paths.get_mut(&super::document_path(route.path)) else {
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
        let Some(op) = op else { continue };
        common_answers(op, &route);
        constrain_parameters(op);
        add_links(op);
        let Some(action) = route.action else { continue };
        let ext = ExtensionsBuilder::new()
            .add("x-stratum-action", action.name())
            .add("x-stratum-resource", action.resource_type().as_str())
            .build();
        match &mut op.extensions {
            Some(e) => e.merge(ext),
            None => op.extensions = Some(ext),
        }
    }
    doc
}

/// Links from what an operation creates to the operations that read or
/// act on it (OpenAPI links), so a client or a stateful test can follow
/// them: an admitted member to its record, an upgrade to its record and
/// its cancel, a token to its revoke, a policy to its document.
fn add_links(op: &mut utoipa::openapi::path::Operation) {
    use utoipa::openapi::link::LinkBuilder;
    let links: &[(&str, &str, &str, &str)] = match op.operation_id.as_deref() {
        Some("admit") => &[
            ("201", "GetMember", "get_member", "nodeId"),
            ("201", "DecommissionMember", "decommission", "nodeId"),
            ("201", "MemberHistory", "member_history", "nodeId"),
        ],
        Some("create_upgrade") => &[
            ("201", "GetUpgrade", "get_upgrade", "id"),
            ("201", "CancelUpgrade", "cancel", "id"),
            ("201", "UpgradeHistory", "upgrade_history", "id"),
        ],
        Some("create_token") => &[("201", "RevokeToken", "revoke_token", "id")],
        Some("create_policy") => &[("201", "GetPolicy", "get_policy", "name")],
        Some("request_join") => &[("201", "ApproveJoin", "approve_join", "id")],
        _ => &[],
    };
    for (status, name, target, param) in links {
        let Some(utoipa::openapi::RefOr::T(r)) = op.responses.responses.get_mut(*status) else {
            continue;
        };
        let field = match *param {
            "nodeId" => "nodeId",
            "name" => "name",
            _ => "id",
        };
        r.links.insert(
            (*name).to_owned(),
            LinkBuilder::new()
                .operation_id(*target)
                .parameter(*param, format!("$response.body#/{field}"))
                .build()
                .into(),
        );
    }
}

/// The query parameters' schemas as the extractors check them, in one
/// place: paging (`limit` 1 to 1000), positions (`after`, `asOf` 0 to
/// 2^63-1), the long-poll's `waitSeconds` (at most 60), and the closed sets
/// a filter takes.
fn constrain_parameters(op: &mut utoipa::openapi::path::Operation) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let int = |min: i64, max: i64| {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(min as f64))
            .maximum(Some(max as f64))
            .build()
    };
    let one_of = |values: &[&str]| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(values.iter().copied()))
            .build()
    };
    for p in op.parameters.iter_mut().flatten() {
        if matches!(p.parameter_in, ParameterIn::Header) && p.name == "Last-Event-ID" {
            p.schema = Some(int(0, i64::MAX).into());
            continue;
        }
        if !matches!(p.parameter_in, ParameterIn::Query) {
            continue;
        }
        let schema = match p.name.as_str() {
            "limit" => int(1, 1000),
            "after" | "asOf" => int(0, i64::MAX),
            "waitSeconds" => int(0, 60),
            "state" if op.operation_id.as_deref() == Some("list_members") => {
                one_of(&["joining", "active", "failed", "removing", "decommissioned"])
            }
            "role" => one_of(&["control", "compute", "storage", "hybrid"]),
            "status" => one_of(&["pending", "approved", "rejected"]),
            "active" => one_of(&["true", "false"]),
            // The sizes of a consistency proof, and an inclusion proof's.
            "from" | "to" if op.operation_id.as_deref() == Some("consistency") => int(1, i64::MAX),
            "size" => int(1, i64::MAX),
            "from" | "to" => ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(utoipa::openapi::schema::SchemaFormat::KnownFormat(
                    utoipa::openapi::schema::KnownFormat::DateTime,
                )))
                .build(),
            "cursor" => ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some(
                    "The nextCursor of the page before, as this service answered it.",
                ))
                .pattern(Some("^[A-Za-z0-9_-]{1,512}$"))
                .build(),
            _ => continue,
        };
        p.schema = Some(schema.into());
    }
}

/// The statuses and headers every operation of a kind can answer, added
/// where the operation's own annotation does not already say them.
fn common_answers(op: &mut utoipa::openapi::path::Operation, route: &Route) {
    use utoipa::openapi::header::HeaderBuilder;
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    use utoipa::openapi::{Content, ResponseBuilder};
    let string = || ObjectBuilder::new().schema_type(Type::String).build();
    let error = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                Content::new(Some(utoipa::openapi::Ref::from_schema_name("Error"))),
            )
            .build()
    };
    let gated = route.action.is_some();
    let write = route.method != Method::GET;
    let has_path_params = route.path.contains('{');
    let has_body = op.request_body.is_some();
    let mut answers: Vec<(&str, &str)> = Vec::new();
    if gated {
        answers.extend([
            ("400", "INVALID_INPUT: a bad parameter or body, every bad field named in fieldErrors."),
            ("401", "UNAUTHENTICATED: no valid bearer token."),
            ("403", "ACCESS_DENIED: the token's policies do not allow the action on the resource (details.action, details.resource)."),
            ("500", "INTERNAL: an unexpected failure, with the request id."),
            ("429", "RATE_LIMITED: too many refused secrets from this address, or a node agent reporting faster than it needs to; Retry-After says when to try again."),
            ("503", "UNAVAILABLE (the database is unreachable; nothing was stored), OUTCOME_UNKNOWN (a write whose commit was in flight when the database connection broke: it may have been stored, and a retry with the same Idempotency-Key answers what was) or UPGRADE_IN_PROGRESS (the write freeze, details.upgradeId and details.state); Retry-After says when to try again."),
        ]);
    }
    let has_as_of = op.parameters.iter().flatten().any(|p| p.name == "asOf");
    if gated && (has_path_params || has_as_of) {
        answers.push((
            "404",
            "NOT_FOUND: no such resource, or an asOf position the log has not reached.",
        ));
    }
    if gated && write {
        answers.extend([
            ("409", "A conflict with the recorded state; the code names it (e.g. QUORUM_AT_RISK, UPGRADE_STATE_CONFLICT)."),
            ("412", "PRECONDITION_FAILED: If-Match names another version (details.currentVersion)."),
            ("422", "IDEMPOTENCY_KEY_REUSED: this Idempotency-Key came with another request."),
        ]);
    }
    if gated && has_body {
        answers.extend([
            ("413", "PAYLOAD_TOO_LARGE: the body is larger than 1 MiB."),
            (
                "415",
                "UNSUPPORTED_MEDIA_TYPE: the body is not application/json.",
            ),
        ]);
    }
    for (status, description) in answers {
        op.responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| error(description).into());
    }
    // Retry-After on every 503; ETag on the records of members and upgrades.
    let etag = route.path.contains("/members/{nodeId}") && !route.path.ends_with("/history")
        || route.path.starts_with("/v1/admin/upgrades/{id}") && !route.path.ends_with("/history")
        || route.path == "/v1/admin/upgrades" && write
        || route.path == "/v1/admin/cluster/members" && write;
    for (status, response) in op.responses.responses.iter_mut() {
        let utoipa::openapi::RefOr::T(r) = response else {
            continue;
        };
        if status == "503" || status == "429" {
            r.headers.insert(
                "Retry-After".to_owned(),
                HeaderBuilder::new()
                    .schema(ObjectBuilder::new().schema_type(Type::Integer).build())
                    .description(Some("Seconds to wait before trying again."))
                    .build(),
            );
        }
        if etag && status.starts_with('2') {
            r.headers.insert(
                "ETag".to_owned(),
                HeaderBuilder::new()
                    .schema(string())
                    .description(Some("The record's stream version, for If-Match."))
                    .build(),
            );
        }
    }
    if gated && write {
        let params = op.parameters.get_or_insert_with(Vec::new);
        // An operation's own annotation may name these headers: its
        // parameter keeps its description and gets the same schema.
        params.retain(|p| !matches!(p.name.as_str(), "If-Match" | "Idempotency-Key"));
        for (name, description) in [
            ("If-Match", "Apply the change only if the addressed record is at this version (an ETag this service answered); 412 otherwise."),
            ("Idempotency-Key", "The same key from the same principal with the same request answers the first response again and appends nothing; with another request, 422."),
        ] {
            if !params.iter().any(|p| p.name == name) {
                params.push(
                    ParameterBuilder::new()
                        .name(name)
                        .parameter_in(ParameterIn::Header)
                        .required(utoipa::openapi::Required::False)
                        .description(Some(description))
                        .schema(Some(
                            ObjectBuilder::new()
                                .schema_type(Type::String)
                                .pattern(Some(if name == "If-Match" {
                                    "^(W/)?(\"[0-9]{1,18}\"|[0-9]{1,18})$"
                                } else {
                                    "^[\\x21-\\x7E]{1,255}$"
                                }))
                                .min_length(Some(1))
                                .max_length(Some(255)),
                        ))
                        .build(),
                );
            }
        }
    }
}
