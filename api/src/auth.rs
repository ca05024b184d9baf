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
use stratum_domain::iam::{allows, Action};

use crate::error::ApiError;
use crate::http::AppState;
use crate::store::EventStore;

/// The authenticated principal of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub principal: String,
    pub token_id: String,
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
    let token = store
        .token_by_secret(&secret_hash(secret))
        .await?
        .ok_or_else(ApiError::unauthenticated)?;
    let now = Utc::now().timestamp_micros();
    if token.revoked_at.is_some() || token.expires_at.is_some_and(|e| e <= now) {
        return Err(ApiError::unauthenticated());
    }
    Ok(Caller {
        principal: token.principal,
        token_id: token.token_id,
        policies: token.policies,
    })
}

impl Caller {
    /// Whether the caller's policies allow `action` on `resource`.
    pub fn authorize(&self, action: Action, resource: &str) -> Result<(), ApiError> {
        if allows(&self.policies, action, resource) {
            Ok(())
        } else {
            Err(ApiError::access_denied(action.name(), resource))
        }
    }
}

/// The gate of one route: authenticates the caller and authorizes the
/// route's action on the resource its first path parameter names.
pub async fn gate(
    State((app, action)): State<(AppState, Action)>,
    params: RawPathParams,
    mut req: Request,
    next: Next,
) -> Response {
    let caller = match authenticate(&*app.store, req.headers()).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let id = params.iter().next().map(|(_, v)| v.to_owned());
    let resource = action.resource(id.as_deref());
    if let Err(e) = caller.authorize(action, &resource) {
        return e.into_response();
    }
    tracing::Span::current().record("principal", caller.principal.as_str());
    req.extensions_mut().insert(caller);
    next.run(req).await
}
