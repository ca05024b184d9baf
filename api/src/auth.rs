//! Bearer authentication and the authorization gate every route passes.
//!
//! A generated token (256 random bits) is looked up by the SHA-256 of the
//! presented secret. A token whose secret an operator chose (the bootstrap
//! token) is kept only as a salted Argon2id hash, checked one by one when
//! no generated token matches; a secret verified so is remembered, in
//! memory only, so its next requests cost no Argon2id. The secret itself is
//! never stored, logged or answered after its creation. See
//! `docs/architecture.md`, "Token secrets".

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

/// Argon2id of a secret an operator chose, as a PHC string: a fresh random
/// salt, the parameters OWASP recommends (19 MiB, 2 passes, 1 lane).
pub fn slow_hash(secret: &str) -> String {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let mut salt = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).expect("16 bytes make a salt");
    argon2::Argon2::default()
        .hash_password(secret.as_bytes(), &salt)
        .expect("Argon2id with its default parameters hashes any secret")
        .to_string()
}

/// Whether `secret` is the one `phc` (an Argon2id PHC string) was made of.
pub fn slow_verify(secret: &str, phc: &str) -> bool {
    use argon2::password_hash::{PasswordHash, PasswordVerifier};
    PasswordHash::new(phc).is_ok_and(|h| {
        argon2::Argon2::default()
            .verify_password(secret.as_bytes(), &h)
            .is_ok()
    })
}

/// Whether a secret has the shape of one [`new_secret`] makes: those are
/// found by their SHA-256 alone, never by a slow hash (so a chosen secret
/// may not have this shape).
pub fn is_generated(secret: &str) -> bool {
    secret.strip_prefix("stt_").is_some_and(|b| {
        b.len() == 43
            && b.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    })
}

/// The chosen secrets this process verified, by the SHA-256 of the
/// presented secret (in memory only, never stored); the wrong ones it saw
/// lately, refused at once; and the one lane the slow checks take. The
/// requests that present one secret at once share one check, and at most
/// a few distinct secrets wait for the lane: one more is answered 503 at
/// once. So unauthenticated guesses cost this process one core at most,
/// hold no connection for long, and never touch a generated token's path,
/// while a burst of requests with the bootstrap token costs one check.
#[derive(Default)]
pub struct ChosenSecrets {
    verified: std::sync::Mutex<std::collections::HashMap<[u8; 32], String>>,
    refused: std::sync::Mutex<std::collections::HashMap<[u8; 32], std::time::Instant>>,
    pending: std::sync::Mutex<std::collections::HashMap<[u8; 32], Check>>,
    lane: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// One slow check, shared by the requests presenting the same secret: the
/// id of the token it matched, if any.
type Check = std::sync::Arc<tokio::sync::OnceCell<Option<String>>>;

/// Distinct secrets that may wait for the lane; one more is answered 503.
const MAX_WAITING: usize = 8;
/// How long a wrong secret is refused without a slow check.
const REFUSED_FOR: std::time::Duration = std::time::Duration::from_secs(60);
/// The most wrong secrets remembered; the memory is cleared when full.
const REFUSED_KEPT: usize = 10_000;

/// Too many secrets are waiting for the slow check.
#[derive(Debug)]
pub struct Busy;

impl ChosenSecrets {
    fn verified(&self, presented: &[u8; 32]) -> Option<String> {
        self.verified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(presented)
            .cloned()
    }

    fn refused_lately(&self, presented: &[u8; 32]) -> bool {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(presented)
            .is_some_and(|at| at.elapsed() < REFUSED_FOR)
    }

    fn refuse(&self, presented: [u8; 32]) {
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        if refused.len() >= REFUSED_KEPT {
            refused.clear();
        }
        refused.insert(presented, std::time::Instant::now());
    }

    /// The token among `candidates` whose Argon2id hash `secret` matches.
    async fn find(
        &self,
        secret: &str,
        presented: [u8; 32],
        candidates: Vec<crate::store::TokenAuth>,
    ) -> Result<Option<crate::store::TokenAuth>, Busy> {
        let known = |id: Option<String>, candidates: Vec<crate::store::TokenAuth>| {
            id.and_then(|id| candidates.into_iter().find(|t| t.token_id == id))
        };
        if let Some(id) = self.verified(&presented) {
            return Ok(known(Some(id), candidates));
        }
        if self.refused_lately(&presented) {
            return Ok(None);
        }
        let check = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            match pending.get(&presented) {
                Some(c) => c.clone(),
                None if pending.len() >= MAX_WAITING => return Err(Busy),
                None => pending.entry(presented).or_default().clone(),
            }
        };
        // Whether the check ends or its request is gone, its place in the
        // queue is given back.
        struct Leave<'a>(&'a ChosenSecrets, [u8; 32]);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&self.1);
            }
        }
        let _leave = Leave(self, presented);
        let phcs: Vec<(String, String)> = candidates
            .iter()
            .filter_map(|t| Some((t.token_id.clone(), t.secret_argon2id.clone()?)))
            .collect();
        let matched = check
            .get_or_init(|| async {
                let lane = self.lane.clone().lock_owned().await;
                let secret = secret.to_owned();
                // The lane is held until the hash is done, even when the
                // request that asked for it is gone.
                let matched = tokio::task::spawn_blocking(move || {
                    let _lane = lane;
                    phcs.into_iter()
                        .find(|(_, phc)| slow_verify(&secret, phc))
                        .map(|(id, _)| id)
                })
                .await
                .ok()
                .flatten();
                match &matched {
                    Some(id) => {
                        self.verified
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(presented, id.clone());
                    }
                    None => self.refuse(presented),
                }
                matched
            })
            .await
            .clone();
        Ok(known(matched, candidates))
    }
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

pub async fn authenticate(
    store: &dyn EventStore,
    chosen: &ChosenSecrets,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    let secret = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(ApiError::unauthenticated)?;
    let presented = secret_hash(secret);
    let token = match store.token_by_secret(&presented).await? {
        // The row was found by its hash; compare the whole hash again in
        // constant time, so no answer depends on how much of it matched.
        Some(t)
            if t.secret_sha256.as_deref().is_some_and(|h| {
                bool::from(subtle::ConstantTimeEq::ct_eq(h, presented.as_slice()))
            }) =>
        {
            t
        }
        Some(_) => return Err(ApiError::unauthenticated()),
        None if is_generated(secret) => return Err(ApiError::unauthenticated()),
        None => {
            let candidates = store.argon2id_tokens().await?;
            if candidates.is_empty() {
                return Err(ApiError::unauthenticated());
            }
            chosen
                .find(secret, presented, candidates)
                .await
                .map_err(|Busy| {
                    ApiError::new(
                        stratum_domain::ErrorCode::Unavailable,
                        "Too many unrecognized secrets are being checked right now; retry shortly.",
                    )
                })?
                .ok_or_else(ApiError::unauthenticated)?
        }
    };
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
    let mut caller = match authenticate(&*app.store, &app.chosen_secrets, req.headers()).await {
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
