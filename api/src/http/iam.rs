//! IAM endpoints (SPEC §6): tokens, custom policies, principals' policies
//! and resource policies on one member or upgrade.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json};
use serde_json::Value;
use stratum_domain::iam::{resource_key, Action, IamCommand, ResourceType};
use stratum_domain::policy::MANAGED_POLICIES;
use stratum_domain::Command;
use stratum_projections::doc_kind;
use stratum_projections::iam::{
    managed_policy_record, policy_record, PolicyRecord, PrincipalRecord,
};
use stratum_projections::{token_record, TokenRecord};

use super::extract::{finish, id_page, page, parse_doc, query, JsonBody, WriteHeaders};
use super::{command_request, outcome_response, run_command, AppState, Route};
use crate::auth::{new_id, new_secret, secret_hash, Caller};
use crate::command::Outcome;
use crate::error::{ApiError, ApiResult};
use crate::reads::View;
use crate::request_body;

pub fn routes() -> Vec<Route> {
    let r = Route::gated;
    vec![
        r(
            Method::POST,
            "/v1/admin/iam/tokens",
            Action::CreateToken,
            post(create_token),
        ),
        r(
            Method::GET,
            "/v1/admin/iam/tokens",
            Action::ListTokens,
            get(list_tokens),
        ),
        r(
            Method::POST,
            "/v1/admin/iam/tokens/{id}/revoke",
            Action::RevokeToken,
            post(revoke_token),
        ),
        r(
            Method::POST,
            "/v1/admin/iam/policies",
            Action::CreatePolicy,
            post(create_policy),
        ),
        r(
            Method::GET,
            "/v1/admin/iam/policies",
            Action::ListPolicies,
            get(list_policies),
        ),
        r(
            Method::GET,
            "/v1/admin/iam/policies/{name}",
            Action::GetPolicy,
            get(get_policy),
        ),
        r(
            Method::GET,
            "/v1/admin/iam/findings",
            Action::ListPolicies,
            get(grant_findings),
        ),
        r(
            Method::PUT,
            "/v1/admin/iam/principals/{principal}/policies",
            Action::SetPrincipalPolicies,
            axum::routing::put(set_principal_policies),
        ),
        r(
            Method::GET,
            "/v1/admin/iam/principals/{principal}/policies",
            Action::GetPrincipalPolicies,
            get(get_principal_policies),
        ),
        r(
            Method::PUT,
            "/v1/admin/cluster/members/{nodeId}/policy",
            Action::SetMemberPolicy,
            axum::routing::put(set_member_policy),
        ),
        r(
            Method::GET,
            "/v1/admin/cluster/members/{nodeId}/policy",
            Action::GetMemberPolicy,
            get(get_member_policy),
        ),
        r(
            Method::PUT,
            "/v1/admin/upgrades/{id}/policy",
            Action::SetUpgradePolicy,
            axum::routing::put(set_upgrade_policy),
        ),
        r(
            Method::GET,
            "/v1/admin/upgrades/{id}/policy",
            Action::GetUpgradePolicy,
            get(get_upgrade_policy),
        ),
    ]
}

request_body! {
    /// Create a token.
    pub struct CreateTokenBody {
        /// `user/<name>`, `node/<nodeId>` or `stratum-installer`.
        principal: String = "principal" @required ~ super::extract::shape::principal,
        /// Managed or custom policy names.
        policies: Vec<String> = "policies",
        expires_at: super::extract::Timestamp = "expiresAt",
    }
}

/// Create a token: a random 256-bit secret, shown once in `token`.
///
/// The service keeps only its SHA-256; no later answer, log line or event
/// shows the secret. A retry with the same `Idempotency-Key` answers the
/// token without its secret.
#[utoipa::path(post, path = "/v1/admin/iam/tokens", tag = "iam", request_body = CreateTokenBody,
    responses((status = 201, description = "The token, with its secret in `token` (this once).", body = super::schema::CreatedToken),
              (status = 400, description = "Bad request.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create_token(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: WriteHeaders,
    body: JsonBody<CreateTokenBody>,
) -> Response {
    let secret = new_secret();
    let b = body.value;
    let cmd = IamCommand::IssueToken {
        token_id: new_id("tok"),
        principal: b.principal.into_option(),
        verifier: stratum_domain::iam::SecretVerifier::Sha256(secret_hash(&secret)),
        policies: b.policies.into_option().unwrap_or_default(),
        expires_at: b.expires_at.into_option().map(|t| t.0),
    };
    let mut req = command_request(&caller, Command::Iam(cmd), body.errors);
    req.idempotency = headers.idempotency(&body.raw);
    req.creates = true;
    match state.bus.execute(req).await {
        Ok(mut outcome) => {
            if let Outcome::Committed(c) = &mut outcome {
                if !c.replayed {
                    c.body = with_secret(&c.body, &secret);
                }
            }
            // The answer holds the secret: no cache keeps it.
            let mut res = outcome_response(outcome);
            res.headers_mut().insert(
                axum::http::header::CACHE_CONTROL,
                axum::http::HeaderValue::from_static("no-store"),
            );
            res
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The created token's record with its secret, the one time it is shown.
fn with_secret(body: &str, secret: &str) -> String {
    let mut v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("token".into(), secret.into());
    }
    v.to_string()
}

#[utoipa::path(get, path = "/v1/admin/iam/tokens", tag = "iam",
    params(("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, description = "A page of tokens by id, without secrets.", body = super::schema::Page<TokenRecord>)),
    security(("bearer" = [])))]
pub async fn list_tokens(
    view: View,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let tokens = view
        .state
        .iam
        .tokens
        .values()
        .map(|t| (t.token_id.clone(), token_record(t)));
    paged(&q, tokens)
}

/// A page of `(id, item)` in id order, by `limit` and the opaque `cursor`.
fn paged<T: serde::Serialize>(
    q: &HashMap<String, String>,
    items: impl Iterator<Item = (String, T)>,
) -> ApiResult<Json<Value>> {
    let mut errors = Vec::new();
    let get = query(q, &["limit", "cursor"], &mut errors);
    let pg = page(get("limit"), get("cursor"), &mut errors);
    finish(errors)?;
    let mut items: Vec<(String, T)> = items.collect();
    items.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Json(id_page(
        &pg,
        items.iter().map(|(id, item)| (id.as_str(), item)),
    )))
}

/// Revoke a token: it stops working on the next request.
#[utoipa::path(post, path = "/v1/admin/iam/tokens/{id}/revoke", tag = "iam",
    params(("id" = String, Path)),
    responses((status = 200, description = "The revoked token.", body = TokenRecord),
              (status = 404, description = "Resource not found.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn revoke_token(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(token_id): Path<String>,
    headers: WriteHeaders,
) -> Response {
    let cmd = IamCommand::RevokeToken { token_id };
    run_command(
        &state,
        &caller,
        &headers,
        (b"", Vec::new()),
        Command::Iam(cmd),
        200,
    )
    .await
}

request_body! {
    /// Create a custom policy.
    pub struct CreatePolicyBody {
        name: String = "name" @required ~ super::extract::shape::policy_name,
        /// `{"statements": [{"effect": "Allow"|"Deny", "actions": [...], "resources": [...]}]}`.
        document: Value = "document" @required ~ super::extract::shape::policy_document,
    }
}

/// Create a custom policy. The document is validated in full: every
/// finding comes back at once in `issues` (400 `POLICY_REJECTED`).
#[utoipa::path(post, path = "/v1/admin/iam/policies", tag = "iam", request_body = CreatePolicyBody,
    responses((status = 201, description = "The policy.", body = PolicyRecord),
              (status = 400, description = "POLICY_REJECTED with issues, or INVALID_INPUT.", body = crate::http::schema::ErrorBody),
              (status = 409, description = "POLICY_EXISTS.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create_policy(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: WriteHeaders,
    body: JsonBody<CreatePolicyBody>,
) -> Response {
    let cmd = IamCommand::CreatePolicy {
        name: body.value.name.into_option(),
        document: body.value.document.into_option(),
    };
    run_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        Command::Iam(cmd),
        201,
    )
    .await
}

#[utoipa::path(get, path = "/v1/admin/iam/policies", tag = "iam",
    params(("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, description = "A page of policies by name, managed and custom.", body = super::schema::Page<PolicyRecord>)),
    security(("bearer" = [])))]
pub async fn list_policies(
    view: View,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let managed = MANAGED_POLICIES
        .iter()
        .filter_map(|n| managed_policy_record(n));
    let custom = view.state.iam.policies.values().map(policy_record);
    paged(&q, managed.chain(custom).map(|r| (r.name.clone(), r)))
}

/// Grants on record that give more than their granter holds now: tokens,
/// attachments and resource policies made before the grant rule held them,
/// or by a granter who has since lost what it gave. Each names what the
/// granter does not hold; revoke or re-grant them.
#[utoipa::path(get, path = "/v1/admin/iam/findings", tag = "iam",
    responses((status = 200, description = "Every grant that breaks the rule, tokens first.", body = super::schema::GrantFindings)),
    security(("bearer" = [])))]
pub async fn grant_findings(view: View) -> ApiResult<Json<Value>> {
    let findings = view
        .state
        .iam
        .grant_findings(&view.state, chrono::Utc::now());
    Ok(Json(serde_json::json!({ "findings": findings })))
}

#[utoipa::path(get, path = "/v1/admin/iam/policies/{name}", tag = "iam",
    params(("name" = String, Path)),
    responses((status = 200, description = "The policy.", body = PolicyRecord),
              (status = 404, description = "Resource not found.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_policy(view: View, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    if let Some(r) = managed_policy_record(&name) {
        return Ok(Json(serde_json::to_value(r).expect("records serialize")));
    }
    doc(&view, doc_kind::POLICY, &name, || format!("Policy {name}"))
}

request_body! {
    /// The policies attached to a principal.
    pub struct PrincipalPoliciesBody {
        policies: Vec<String> = "policies" @required,
    }
}

/// Attach policies to a principal (replacing what was attached); they
/// apply to every token of the principal. The principal is URL-encoded
/// (`user%2Falice`).
#[utoipa::path(put, path = "/v1/admin/iam/principals/{principal}/policies", tag = "iam",
    params(("principal" = String, Path)), request_body = PrincipalPoliciesBody,
    responses((status = 200, description = "The principal's policies.", body = PrincipalRecord)),
    security(("bearer" = [])))]
pub async fn set_principal_policies(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(principal): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<PrincipalPoliciesBody>,
) -> Response {
    let cmd = IamCommand::SetPrincipalPolicies {
        principal,
        policies: body.value.policies.into_option(),
    };
    run_command(
        &state,
        &caller,
        &headers,
        (&body.raw, body.errors),
        Command::Iam(cmd),
        200,
    )
    .await
}

#[utoipa::path(get, path = "/v1/admin/iam/principals/{principal}/policies", tag = "iam",
    params(("principal" = String, Path)),
    responses((status = 200, description = "The principal's policies.", body = PrincipalRecord),
              (status = 404, description = "None attached.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_principal_policies(
    view: View,
    Path(principal): Path<String>,
) -> ApiResult<Json<Value>> {
    doc(&view, doc_kind::PRINCIPAL, &principal, || {
        format!("Attached policies of {principal}")
    })
}

request_body! {
    /// A resource policy.
    pub struct ResourcePolicyBody {
        /// Statements may name `principals` they apply to.
        document: Value = "document" @required ~ super::extract::shape::policy_document,
    }
}

async fn set_resource_policy(
    state: &AppState,
    caller: &Caller,
    headers: &WriteHeaders,
    body: JsonBody<ResourcePolicyBody>,
    resource_type: ResourceType,
    id: String,
) -> Response {
    let cmd = IamCommand::SetResourcePolicy {
        resource_type,
        id,
        document: body.value.document.into_option(),
    };
    run_command(
        state,
        caller,
        headers,
        (&body.raw, body.errors),
        Command::Iam(cmd),
        200,
    )
    .await
}

/// Attach a resource policy to one member (replacing any). Its actions
/// must apply to a member (`ACTION_NOT_APPLICABLE` otherwise).
#[utoipa::path(put, path = "/v1/admin/cluster/members/{nodeId}/policy", tag = "iam",
    params(("nodeId" = String, Path)), request_body = ResourcePolicyBody,
    responses((status = 200, description = "The resource policy.", body = PolicyRecord),
              (status = 400, description = "POLICY_REJECTED with issues.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn set_member_policy(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(node_id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<ResourcePolicyBody>,
) -> Response {
    set_resource_policy(
        &state,
        &caller,
        &headers,
        body,
        ResourceType::Member,
        node_id,
    )
    .await
}

#[utoipa::path(get, path = "/v1/admin/cluster/members/{nodeId}/policy", tag = "iam",
    params(("nodeId" = String, Path)),
    responses((status = 200, description = "The resource policy.", body = PolicyRecord),
              (status = 404, description = "None attached.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_member_policy(view: View, Path(node_id): Path<String>) -> ApiResult<Json<Value>> {
    let key = resource_key(ResourceType::Member, &node_id);
    doc(&view, doc_kind::RESOURCE_POLICY, &key, || {
        format!("A policy of member {node_id}")
    })
}

/// Attach a resource policy to one upgrade (replacing any).
#[utoipa::path(put, path = "/v1/admin/upgrades/{id}/policy", tag = "iam",
    params(("id" = String, Path)), request_body = ResourcePolicyBody,
    responses((status = 200, description = "The resource policy.", body = PolicyRecord),
              (status = 400, description = "POLICY_REJECTED with issues.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn set_upgrade_policy(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    headers: WriteHeaders,
    body: JsonBody<ResourcePolicyBody>,
) -> Response {
    set_resource_policy(&state, &caller, &headers, body, ResourceType::Upgrade, id).await
}

#[utoipa::path(get, path = "/v1/admin/upgrades/{id}/policy", tag = "iam",
    params(("id" = String, Path)),
    responses((status = 200, description = "The resource policy.", body = PolicyRecord),
              (status = 404, description = "None attached.", body = crate::http::schema::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_upgrade_policy(view: View, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let key = resource_key(ResourceType::Upgrade, &id);
    doc(&view, doc_kind::RESOURCE_POLICY, &key, || {
        format!("A policy of upgrade {id}")
    })
}

fn doc(
    view: &View,
    kind: &'static str,
    id: &str,
    what: impl FnOnce() -> String,
) -> ApiResult<Json<Value>> {
    let d = view
        .doc(kind, id)
        .ok_or_else(|| ApiError::not_found(what()))?;
    Ok(Json(parse_doc(&d.doc)))
}
