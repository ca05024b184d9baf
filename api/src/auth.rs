//! Bearer authentication and the authorization gate every route passes.
//!
//! Tokens are looked up by the SHA-256 of the presented secret; the secret
//! itself is never stored, logged or answered after its creation.

use axum::extract::{RawPathParams, Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::borrow::Cow;

use stratum_domain::iam::{token_valid_at, Action};
use stratum_domain::policy::{evaluate, managed_policy, read_recorded, PolicyDocument, Verdict};
use stratum_projections::doc_kind;
use stratum_projections::iam::{PolicyRecord, PrincipalRecord};

use crate::error::ApiError;
use crate::http::AppState;
use crate::store::EventStore;

/// The authenticated principal of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub principal: String,
    pub token_id: String,
    /// The policies it holds: its token's, and once authorized, its
    /// principal's attached ones too.
    pub policies: Vec<String>,
}

/// SHA-256 of a token secret.
pub fn secret_hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// A new random token secret: 256 bits, URL-safe base64, with a prefix that
/// secret scanners can recognize.
pub fn new_secret() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!(
        "stt_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// A new random id with a prefix: `prefix-` and 10 of `[0-9a-z]`.
pub fn new_id(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::thread_rng();
    let tail: String = (0..10)
        .map(|_| ALPHABET[(rng.next_u32() % 36) as usize] as char)
        .collect();
    format!("{prefix}-{tail}")
}

pub async fn authenticate(store: &dyn EventStore, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let secret = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(ApiError::unauthenticated)?;
    let presented = secret_hash(secret);
    let token = store
        .token_by_secret(&presented)
        .await?
        .ok_or_else(ApiError::unauthenticated)?;
    // The row was found by its hash; compare the whole hash again in
    // constant time, so no answer depends on how much of it matched.
    if !bool::from(subtle::ConstantTimeEq::ct_eq(
        token.secret_sha256.as_slice(),
        presented.as_slice(),
    )) {
        return Err(ApiError::unauthenticated());
    }
    let expires_at = token.expires_at.map(stratum_domain::log::micros_to_time);
    if !token_valid_at(token.revoked_at.is_some(), expires_at, Utc::now()) {
        return Err(ApiError::unauthenticated());
    }
    Ok(Caller {
        principal: token.principal,
        token_id: token.token_id,
        policies: token.policies,
    })
}

/// Decides whether `caller` may perform `action` on `resource`: every policy
/// of the caller's token and principal, and the resource's own policy
/// (`policy_key`), read from the read models of this request's moment, so a
/// change of policy takes effect on the next request, on every replica.
/// Answers every policy name the caller holds.
pub async fn authorize(
    store: &dyn EventStore,
    caller: &Caller,
    action: Action,
    resource: &str,
    policy_key: Option<String>,
) -> Result<Vec<String>, ApiError> {
    let corrupt = |what: &str, e: serde_json::Error| ApiError::internal(format!("{what}: {e}"));
    let mut names = caller.policies.clone();
    if let Some(doc) = store
        .read_doc(doc_kind::PRINCIPAL, &caller.principal)
        .await?
    {
        let attached: PrincipalRecord =
            serde_json::from_str(&doc).map_err(|e| corrupt("principal document", e))?;
        names.extend(attached.policies);
    }
    names.sort();
    names.dedup();
    let mut docs: Vec<Cow<'static, PolicyDocument>> = Vec::with_capacity(names.len() + 1);
    // Validated when they were set; read as recorded since.
    let parse = |doc: &str| -> Result<PolicyDocument, ApiError> {
        let record: PolicyRecord =
            serde_json::from_str(doc).map_err(|e| corrupt("policy document", e))?;
        Ok(read_recorded(&record.document))
    };
    for name in &names {
        if let Some(managed) = managed_policy(name) {
            docs.push(Cow::Borrowed(managed));
        } else if let Some(doc) = store.read_doc(doc_kind::POLICY, name).await? {
            docs.push(Cow::Owned(parse(&doc)?));
        }
    }
    if let Some(key) = policy_key {
        if let Some(doc) = store.read_doc(doc_kind::RESOURCE_POLICY, &key).await? {
            docs.push(Cow::Owned(parse(&doc)?));
        }
    }
    match evaluate(
        docs.iter().map(|d| d.as_ref()),
        &caller.principal,
        action,
        resource,
    ) {
        Verdict::Allowed => Ok(names),
        Verdict::Denied | Verdict::NotAllowed => {
            Err(ApiError::access_denied(action.name(), resource))
        }
    }
}

/// The gate of one route: authenticates the caller and authorizes the
/// route's action on the resource its path parameters name.
pub async fn gate(
    State((app, action)): State<(AppState, Action)>,
    params: RawPathParams,
    mut req: Request,
    next: Next,
) -> Response {
    let mut caller = match authenticate(&*app.store, req.headers()).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    tracing::Span::current().record("principal", caller.principal.as_str());
    let param = |k: &str| params.iter().find(|(n, _)| *n == k).map(|(_, v)| v);
    let resource = action.resource(param);
    let key = action.resource_policy_key(param);
    match authorize(&*app.store, &caller, action, &resource, key).await {
        Ok(held) => caller.policies = held,
        Err(e) => return e.into_response(),
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}
