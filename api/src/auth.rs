//! Bearer authentication and the authorization gate every route passes.
//!
//! A generated token (256 random bits) is looked up by the SHA-256 of the
//! presented secret. A token whose secret an operator chose (the bootstrap
//! token) is kept only as a salted Argon2id hash, checked one by one when
//! no generated token matches; a secret verified so is remembered, in
//! memory only, so its next requests cost no Argon2id. The secret itself is
//! never stored, logged or answered after its creation. See
//! `docs/architecture.md`, "Token secrets".

use std::sync::Arc;

use axum::http::{header, HeaderMap};
use chrono::Utc;
use rand::RngCore;
use sha2::{Digest, Sha256};

use stratum_domain::iam::Action;
use stratum_projections::ReadModels;

use crate::error::ApiError;
use crate::tls::ClientCertificate;

/// The authenticated principal of a request.
#[derive(Clone, Debug)]
pub struct Caller {
    /// Shared: the request's log line keeps it too.
    pub principal: Arc<str>,
    pub token_id: String,
    /// The policies it holds: its token's, and once authorized, its
    /// principal's attached ones too.
    pub policies: Vec<String>,
    /// Set when the gate admitted the caller against the read models in
    /// memory, which may be behind the log (see [`Admission`]).
    pub unconfirmed: Option<Arc<Admission>>,
}

/// How the gate of a command route admitted a caller against the read
/// models in memory, without first learning the log's head: what the
/// caller must be authorized by again against read models that include
/// the log as it stood when the request arrived. The writer does it
/// against its own state before it decides the command; an answer it
/// allowed at a decision the log backs (under the log's lock, or in a
/// stored commit conditional on the log's head) is sent as it is, and
/// any other waits for the checked read models to settle the caller
/// (`http::gate::confirm`). A credential revoked or a policy detached by
/// another process so counts for this request as it would at the gate.
#[derive(Debug)]
pub struct Admission {
    /// Who, by which credential (`Caller::token_id`).
    pub principal: Arc<str>,
    pub token_id: String,
    pub action: Action,
    pub resource: String,
    pub policy_key: Option<String>,
    /// The address the request came from: a refusal found later counts
    /// against it as the gate's would.
    pub peer: Option<Peer>,
    /// Whether the writer's own authorization allowed the command at its
    /// last decision (`command::writer`).
    allowed_by_writer: std::sync::atomic::AtomicBool,
    /// `OPEN`, `CHECKED` or `BACKED`.
    settled: std::sync::atomic::AtomicU8,
    /// Whether the checked read models found the caller unauthenticated
    /// (or could not be read): its request's log line names no principal.
    unnamed: std::sync::atomic::AtomicBool,
}

/// Nothing has settled the caller yet.
const OPEN: u8 = 0;
/// The checked read models did (`http::gate::confirm`), whatever they found.
const CHECKED: u8 = 1;
/// The writer allowed the command at a decision the log backs.
const BACKED: u8 = 2;

impl Admission {
    /// What `caller` was admitted to.
    pub fn new(
        caller: &Caller,
        action: Action,
        resource: String,
        policy_key: Option<String>,
        peer: Option<Peer>,
    ) -> Self {
        Self {
            principal: caller.principal.clone(),
            token_id: caller.token_id.clone(),
            action,
            resource,
            policy_key,
            peer,
            allowed_by_writer: Default::default(),
            settled: std::sync::atomic::AtomicU8::new(OPEN),
            unnamed: Default::default(),
        }
    }

    fn state(&self) -> u8 {
        self.settled.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether the caller's authorization was settled against read models
    /// that include the log as it stood when the request arrived: by the
    /// writer at a decision the log backs, or by the checked read models
    /// (allowed, or refused and that refusal logged and counted, once).
    pub fn settled(&self) -> bool {
        self.state() != OPEN
    }

    /// Whether the writer allowed the command at a decision the log backs
    /// (`command::Unconfirmed::backed`): its answer needs nothing more.
    pub fn backed_by_writer(&self) -> bool {
        self.state() == BACKED
    }

    /// Whether the request's log line names the caller's principal.
    pub fn named(&self) -> bool {
        !self.unnamed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The checked read models found the caller unauthenticated, or could
    /// not be read.
    pub fn unnamed(&self) {
        self.unnamed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// The checked read models settle the caller, whatever they find.
    pub fn checked(&self) {
        self.settled
            .fetch_max(CHECKED, std::sync::atomic::Ordering::AcqRel);
    }
}

impl crate::command::Unconfirmed for Admission {
    fn authorize_again(
        &self,
        rm: &ReadModels,
        now: chrono::DateTime<Utc>,
    ) -> Result<Vec<String>, stratum_domain::Refusal> {
        use stratum_domain::{ErrorCode, Refusal};
        let found = authorize_again(rm, self, now);
        self.allowed_by_writer
            .store(found.is_ok(), std::sync::atomic::Ordering::Release);
        found.map_err(|refused| match refused {
            Refused::Ended(why) => Refusal::new(ErrorCode::Unauthenticated, why.reason()),
            Refused::Denied => Refusal::new(
                ErrorCode::AccessDenied,
                "the caller's policies do not allow this",
            ),
        })
    }

    /// If the writer's authorization allowed the command at the decision
    /// the log backs, the caller is settled.
    fn backed(&self) {
        if self
            .allowed_by_writer
            .load(std::sync::atomic::Ordering::Acquire)
        {
            self.settled
                .fetch_max(BACKED, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

/// Why a credential no longer stands: one name for each, for the gate's
/// refusal and for a stream's end, so a new reason is a compile error in
/// both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    UnknownToken,
    RevokedToken,
    ExpiredToken,
    /// A node's token, its node decommissioned.
    NodeToken,
    /// A node's certificate, its node decommissioned.
    NodeCertificate,
}

impl Ended {
    /// As the gate's refusal logs it (`reason_label` counts it).
    pub fn reason(self) -> &'static str {
        match self {
            Ended::UnknownToken => "unknown token",
            Ended::RevokedToken => "revoked token",
            Ended::ExpiredToken => "expired token",
            Ended::NodeToken => "token of a decommissioned node",
            Ended::NodeCertificate => "certificate of a decommissioned node",
        }
    }

    /// As an open stream, export or long-poll says it ends.
    fn why(self) -> &'static str {
        match self {
            Ended::UnknownToken => "its token is unknown",
            Ended::RevokedToken => "its token was revoked",
            Ended::ExpiredToken => "its token expired",
            Ended::NodeToken | Ended::NodeCertificate => "its node was decommissioned",
        }
    }
}

/// Why an admitted caller is refused on a second look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Its credential no longer stands (a 401).
    Ended(Ended),
    /// Its policies do not allow the action (a 403).
    Denied,
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
    /// Refused secrets, by the address that presented them.
    pub throttle: Throttle,
}

/// The address a request came from, as the listener accepted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Peer(pub std::net::IpAddr);

/// Refused secrets an address may present per minute before it is
/// answered 429 for a while.
pub const REFUSALS_PER_MINUTE: u32 = 60;
/// Slow checks one address may have waiting at once.
const CHECKS_PER_ADDRESS: usize = 2;

/// Authentication failures throttled per source address (a keyed token
/// bucket of [`REFUSALS_PER_MINUTE`]): an address that guesses is answered
/// 429 with `Retry-After` and never reaches the slow check, so it cannot
/// crowd out anyone else's first use of a chosen secret. A valid secret is
/// never refused for others' guesses: a generated token is found by its
/// hash alone, and a chosen one already verified is known, whatever the
/// address.
pub struct Throttle {
    refusals: governor::DefaultKeyedRateLimiter<std::net::IpAddr>,
    /// Addresses over their budget, and until when.
    blocked: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, std::time::Instant>>,
    /// Slow checks waiting, by address.
    checking: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
}

impl Default for Throttle {
    fn default() -> Self {
        let per_minute = std::num::NonZeroU32::new(REFUSALS_PER_MINUTE).expect("above zero");
        Self {
            refusals: governor::RateLimiter::keyed(governor::Quota::per_minute(per_minute)),
            blocked: Default::default(),
            checking: Default::default(),
        }
    }
}

impl Throttle {
    /// How long `ip` must still wait, if it is over its budget.
    fn blocked_for(&self, ip: std::net::IpAddr) -> Option<std::time::Duration> {
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        match blocked.get(&ip) {
            Some(until) if *until > std::time::Instant::now() => {
                Some(*until - std::time::Instant::now())
            }
            Some(_) => {
                blocked.remove(&ip);
                None
            }
            None => None,
        }
    }

    /// Counts a refused secret of `ip`; answers how long it must now wait
    /// when that was one too many.
    fn refused(&self, ip: std::net::IpAddr) -> Option<std::time::Duration> {
        use governor::clock::Clock;
        let wait = match self.refusals.check_key(&ip) {
            Ok(()) => return None,
            Err(not_until) => not_until
                .wait_time_from(governor::clock::DefaultClock::default().now())
                .max(std::time::Duration::from_secs(1)),
        };
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        if blocked.len() >= REFUSED_KEPT {
            blocked.retain(|_, until| *until > std::time::Instant::now());
            self.refusals.retain_recent();
        }
        blocked.insert(ip, std::time::Instant::now() + wait);
        Some(wait)
    }

    /// A place for one more slow check of `ip`, given back when dropped.
    fn check_slot(&self, ip: std::net::IpAddr) -> Option<CheckSlot<'_>> {
        let mut checking = self.checking.lock().unwrap_or_else(|e| e.into_inner());
        let n = checking.entry(ip).or_default();
        if *n >= CHECKS_PER_ADDRESS {
            return None;
        }
        *n += 1;
        Some(CheckSlot(self, ip))
    }
}

struct CheckSlot<'a>(&'a Throttle, std::net::IpAddr);

impl Drop for CheckSlot<'_> {
    fn drop(&mut self) {
        let mut checking = self.0.checking.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = checking.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                checking.remove(&self.1);
            }
        }
    }
}

/// Reports a node agent may send per second, each kind on its own, and
/// the burst above it: far more than an agent needs (a join reports a
/// handful of steps, facts change rarely, the applied generation once per
/// membership change), far less than a loop.
pub const REPORTS_PER_SECOND: u32 = 5;
pub const REPORT_BURST: u32 = 20;

/// The node agents' reports (join progress and failure, facts, applied
/// generation), limited per node and kind: past the limit, 429 with
/// `Retry-After`.
pub struct NodeReports {
    limiter: governor::DefaultKeyedRateLimiter<(Arc<str>, Action)>,
}

impl Default for NodeReports {
    fn default() -> Self {
        let rate = std::num::NonZeroU32::new(REPORTS_PER_SECOND).expect("above zero");
        let burst = std::num::NonZeroU32::new(REPORT_BURST).expect("above zero");
        Self {
            limiter: governor::RateLimiter::keyed(
                governor::Quota::per_second(rate).allow_burst(burst),
            ),
        }
    }
}

impl NodeReports {
    /// Whether `caller` may send one more `action` now; the wait if not.
    /// Only node agents' reports are limited.
    pub fn admit(&self, caller: &Caller, action: Action) -> Result<(), ApiError> {
        use governor::clock::Clock;
        // Every kind of report a node sends, so no node can fill the log.
        let report = matches!(
            action,
            Action::ReportJoinProgress
                | Action::ReportJoinFailure
                | Action::CompleteJoin
                | Action::RequestJoin
                | Action::ReportNodeFacts
                | Action::ReportAppliedGeneration
                | Action::ReportNodeProgress
                | Action::ReportBackup
        );
        if !report || !caller.principal.starts_with("node/") {
            return Ok(());
        }
        if self.limiter.len() > 100_000 {
            self.limiter.retain_recent();
        }
        match self.limiter.check_key(&(caller.principal.clone(), action)) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                crate::metrics::global()
                    .reports_limited
                    .with_label_values(&[action.name()])
                    .inc();
                let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
                let secs = wait.as_secs().max(1);
                let mut e = ApiError::new(
                    stratum_domain::ErrorCode::RateLimited,
                    format!(
                        "{} reports {} faster than an agent needs to; retry in {secs} s.",
                        caller.principal,
                        action.name()
                    ),
                );
                e.details = Some(serde_json::json!({ "retryAfterSeconds": secs }));
                Err(e)
            }
        }
    }
}

/// A 429 for an address that guessed too often.
fn throttled(wait: std::time::Duration) -> ApiError {
    crate::metrics::global()
        .auth_refused
        .with_label_values(&["throttled"])
        .inc();
    let secs = wait.as_secs().max(1);
    let mut e = ApiError::new(
        stratum_domain::ErrorCode::RateLimited,
        format!("Too many refused secrets from this address; retry in {secs} s."),
    );
    e.details = Some(serde_json::json!({ "retryAfterSeconds": secs }));
    e
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

/// Too many secrets are waiting for the slow check: from everyone
/// (503), or from this address (429).
#[derive(Debug)]
pub enum Busy {
    Queue,
    Address,
}

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
    /// The id of the token among `candidates` (id, Argon2id PHC) whose
    /// hash `secret` matches.
    async fn find(
        &self,
        secret: &str,
        presented: [u8; 32],
        candidates: Vec<(String, String)>,
        peer: Option<Peer>,
    ) -> Result<Option<String>, Busy> {
        let known = |id: Option<String>, candidates: &[(String, String)]| {
            id.filter(|id| candidates.iter().any(|(c, _)| c == id))
        };
        if let Some(id) = self.verified(&presented) {
            return Ok(known(Some(id), &candidates));
        }
        if self.refused_lately(&presented) {
            return Ok(None);
        }
        // Requests presenting one secret share its check; a distinct secret
        // takes one of its address's few places in the queue.
        let mut _slot = None;
        let check = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            match pending.get(&presented) {
                Some(c) => c.clone(),
                None if pending.len() >= MAX_WAITING => return Err(Busy::Queue),
                None => {
                    if let Some(Peer(ip)) = peer {
                        _slot = Some(self.throttle.check_slot(ip).ok_or(Busy::Address)?);
                    }
                    pending.entry(presented).or_default().clone()
                }
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
        let phcs = candidates.clone();
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
        Ok(known(matched, &candidates))
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

/// Finds the caller of a request in the read models: a generated token by
/// the SHA-256 of the presented secret, a chosen one by its Argon2id hash.
pub async fn authenticate(
    view: &ReadModels,
    chosen: &ChosenSecrets,
    headers: &HeaderMap,
    client: Option<&ClientCertificate>,
    peer: Option<Peer>,
) -> Result<Caller, ApiError> {
    let result = identify(view, chosen, headers, client, peer).await;
    // A refused secret counts against its address; one too many is a 429.
    // A request without any secret guesses nothing: it is always a 401.
    let presented = bearer(headers).is_some();
    if let (Err(e), Some(Peer(ip)), true) = (&result, peer, presented) {
        if e.code == stratum_domain::ErrorCode::Unauthenticated {
            if let Some(wait) = chosen.throttle.refused(ip) {
                return Err(throttled(wait));
            }
        }
    }
    result
}

/// The secret of an `Authorization: Bearer <secret>` header; the scheme's
/// name is case-insensitive (RFC 9110, 11.1).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let (scheme, secret) = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .split_once(' ')?;
    let secret = secret.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !secret.is_empty()).then_some(secret)
}

async fn identify(
    view: &ReadModels,
    chosen: &ChosenSecrets,
    headers: &HeaderMap,
    client: Option<&ClientCertificate>,
    peer: Option<Peer>,
) -> Result<Caller, ApiError> {
    let secret = bearer(headers);
    let secret = match (secret, client) {
        (Some(secret), _) => secret,
        // A node agent's client certificate, verified against the client
        // CA in the handshake, stands for its node.
        (None, Some(ClientCertificate::Node(node))) => {
            // A certificate outlives its node: once the node's
            // decommission is accepted (its removal from the rafts may
            // still be running), it authenticates nothing.
            if node_gone(view, &node.node_id) {
                return Err(refused(Ended::NodeCertificate.reason()));
            }
            tracing::debug!(node = %node.node_id, certificate = %node.fingerprint, "client certificate");
            return Ok(node_caller(node));
        }
        (None, Some(ClientCertificate::NoNode)) => {
            return Err(refused(
                "no bearer token, and the client certificate names no node",
            ))
        }
        (None, None) => return Err(refused("no bearer token")),
    };
    let presented = secret_hash(secret);
    let token = match by_digest(view, &presented) {
        Ok(Some(t)) => t,
        Err(()) => return Err(refused(Ended::UnknownToken.reason())),
        Ok(None) if is_generated(secret) => return Err(refused(Ended::UnknownToken.reason())),
        Ok(None) => {
            let candidates: Vec<(String, String)> = view
                .argon2id_tokens()
                .filter_map(|t| Some((t.token_id.clone(), t.verifier.argon2id()?.to_owned())))
                .collect();
            if candidates.is_empty() {
                return Err(refused(Ended::UnknownToken.reason()));
            }
            // A secret this process verified is known at once; any other
            // takes the slow check, which a guessing address never reaches.
            if let (Some(Peer(ip)), None) = (peer, chosen.verified(&presented)) {
                if let Some(wait) = chosen.throttle.blocked_for(ip) {
                    return Err(throttled(wait));
                }
            }
            let id = chosen
                .find(secret, presented, candidates, peer)
                .await
                .map_err(|busy| match busy {
                    Busy::Address => throttled(std::time::Duration::from_secs(1)),
                    Busy::Queue => {
                        crate::metrics::global()
                            .auth_refused
                            .with_label_values(&["busy"])
                            .inc();
                        ApiError::new(
                            stratum_domain::ErrorCode::Unavailable,
                            "Too many unrecognized secrets are being checked right now; retry shortly.",
                        )
                    }
                })?
                .ok_or_else(|| refused(Ended::UnknownToken.reason()))?;
            view.state
                .iam
                .tokens
                .get(&id)
                .ok_or_else(|| refused(Ended::UnknownToken.reason()))?
        }
    };
    standing(view, token, Utc::now()).map_err(|e| refused(e.reason()))?;
    Ok(token_caller(token))
}

/// Why `token` no longer stands in `view` at `now`, if it does not.
fn standing(
    view: &ReadModels,
    token: &stratum_domain::iam::Token,
    now: chrono::DateTime<Utc>,
) -> Result<(), Ended> {
    if token.revoked_at.is_some() {
        return Err(Ended::RevokedToken);
    }
    if !token.valid_at(now) {
        return Err(Ended::ExpiredToken);
    }
    // A node's token ends with its node, as its certificate does.
    if token
        .principal
        .strip_prefix("node/")
        .is_some_and(|n| node_gone(view, n))
    {
        return Err(Ended::NodeToken);
    }
    Ok(())
}

fn token_caller(token: &stratum_domain::iam::Token) -> Caller {
    Caller {
        principal: token.principal.as_str().into(),
        token_id: token.token_id.clone(),
        policies: token.policies.clone(),
        unconfirmed: None,
    }
}

/// The policies a node's certificate holds of its own.
fn node_policies() -> Vec<String> {
    vec![stratum_domain::policy::NODE_AGENT.to_owned()]
}

/// How a caller's credential names a node's certificate
/// (`Caller::token_id`: this, then the certificate's fingerprint).
const CERTIFICATE: &str = "x509:";

/// Whether the credential `token_id` is a node's certificate, not a token.
fn by_certificate(token_id: &str) -> bool {
    token_id.starts_with(CERTIFICATE)
}

fn node_caller(node: &crate::tls::ClientNode) -> Caller {
    Caller {
        principal: format!("node/{}", node.node_id).into(),
        token_id: format!("{CERTIFICATE}{}", node.fingerprint),
        policies: node_policies(),
        unconfirmed: None,
    }
}

/// The token whose secret hashes to `presented`, compared whole again in
/// constant time, so no answer depends on how much of the hash matched;
/// `Err` for a hash found that does not match.
fn by_digest<'a>(
    view: &'a ReadModels,
    presented: &[u8; 32],
) -> Result<Option<&'a stratum_domain::iam::Token>, ()> {
    match view.token_by_secret(presented) {
        Some(t)
            if t.verifier.sha256().is_some_and(|h| {
                bool::from(subtle::ConstantTimeEq::ct_eq(
                    h.as_slice(),
                    presented.as_slice(),
                ))
            }) =>
        {
            Ok(Some(t))
        }
        Some(_) => Err(()),
        None => Ok(None),
    }
}

/// The caller of a request as `view` knows it at once, or `None`: a
/// generated token found by its hash, a chosen secret this process has
/// verified, a node's certificate, each still standing. No side effect: a
/// request not recognized here is authenticated as [`authenticate`] does,
/// which alone logs, counts and throttles a refusal.
pub fn recognize(
    view: &ReadModels,
    chosen: &ChosenSecrets,
    headers: &HeaderMap,
    client: Option<&ClientCertificate>,
) -> Option<Caller> {
    let secret = match (bearer(headers), client) {
        (Some(secret), _) => secret,
        (None, Some(ClientCertificate::Node(node))) => {
            return (!node_gone(view, &node.node_id)).then(|| node_caller(node));
        }
        (None, _) => return None,
    };
    let presented = secret_hash(secret);
    let token = match by_digest(view, &presented).ok()? {
        Some(t) => t,
        None => view.state.iam.tokens.get(&chosen.verified(&presented)?)?,
    };
    standing(view, token, Utc::now()).ok()?;
    Some(token_caller(token))
}

/// Authorizes an admitted caller again, against `rm`, for what the gate
/// admitted it to: its credential must still stand there, and
/// its credential's own policies as `rm` holds them, with whatever `rm`
/// attaches to its principal, must allow the action. Answers every policy
/// the caller holds. No side effect: a refusal is only answered.
pub fn authorize_again(
    rm: &ReadModels,
    admission: &Admission,
    now: chrono::DateTime<Utc>,
) -> Result<Vec<String>, Refused> {
    if let Some(reason) = ended(rm, &admission.principal, &admission.token_id, now) {
        return Err(Refused::Ended(reason));
    }
    // The credential's own policies: a node certificate's are fixed, a
    // token's (which `ended` found) are as `rm` holds them.
    let own = if by_certificate(&admission.token_id) {
        node_policies()
    } else {
        rm.state
            .iam
            .tokens
            .get(&admission.token_id)
            .map(|t| t.policies.clone())
            .unwrap_or_default()
    };
    rm.state
        .iam
        .authorize(
            &admission.principal,
            &own,
            admission.action,
            &admission.resource,
            admission.policy_key.as_deref(),
        )
        .map_err(|_| Refused::Denied)
}

/// [`authorize_again`] as the gate answers a refusal: a credential that no
/// longer stands is logged, counted, and counted against its address (the
/// 429 throttle) as [`authenticate`] does.
pub fn confirm(
    rm: &ReadModels,
    chosen: &ChosenSecrets,
    admission: &Admission,
) -> Result<Vec<String>, ApiError> {
    match authorize_again(rm, admission, Utc::now()) {
        Ok(held) => Ok(held),
        Err(Refused::Denied) => Err(ApiError::access_denied(
            admission.action.name(),
            &admission.resource,
        )),
        Err(Refused::Ended(ended)) => {
            let e = refused(ended.reason());
            let bearer = !by_certificate(&admission.token_id);
            if let (Some(Peer(ip)), true) = (admission.peer, bearer) {
                if let Some(wait) = chosen.throttle.refused(ip) {
                    return Err(throttled(wait));
                }
            }
            Err(e)
        }
    }
}

/// Whether a node's credentials (its certificate, its tokens) stand for
/// nothing more: once its decommission is accepted (its removal from the
/// rafts may still be running).
fn node_gone(view: &ReadModels, node_id: &str) -> bool {
    view.state
        .membership
        .members
        .get(node_id)
        .is_some_and(|m| !m.state.node_may_authenticate())
}

/// Why the credential a caller was authenticated with no longer stands in
/// these read models at `now`, if it does not: its token revoked, expired
/// or unknown, or its node decommissioned. What an open stream, export or
/// long-poll checks as the log moves on, so that revocation reaches the
/// connections already open and not only the next request.
pub fn credential_ended(
    view: &ReadModels,
    caller: &Caller,
    now: chrono::DateTime<Utc>,
) -> Option<&'static str> {
    ended(view, &caller.principal, &caller.token_id, now).map(Ended::why)
}

/// Why the credential `token_id` of `principal` no longer stands in
/// `view` at `now`, if it does not.
fn ended(
    view: &ReadModels,
    principal: &str,
    token_id: &str,
    now: chrono::DateTime<Utc>,
) -> Option<Ended> {
    if by_certificate(token_id) {
        // A certificate ends with its node.
        return principal
            .strip_prefix("node/")
            .is_none_or(|n| node_gone(view, n))
            .then_some(Ended::NodeCertificate);
    }
    match view.state.iam.tokens.get(token_id) {
        None => Some(Ended::UnknownToken),
        Some(t) => standing(view, t, now).err(),
    }
}

/// When the caller's token expires, if it does.
pub fn credential_expires(view: &ReadModels, caller: &Caller) -> Option<chrono::DateTime<Utc>> {
    view.state
        .iam
        .tokens
        .get(&caller.token_id)
        .and_then(|t| t.expires_at)
}

/// A 401, with why (never the secret) logged and counted.
fn refused(reason: &'static str) -> ApiError {
    tracing::info!(reason, "authentication refused");
    crate::metrics::global()
        .auth_refused
        .with_label_values(&[reason_label(reason)])
        .inc();
    ApiError::unauthenticated()
}

/// The `reason` label of a refusal: a few fixed values.
fn reason_label(reason: &str) -> &'static str {
    match reason {
        "no bearer token" => "no_token",
        "unknown token" => "unknown_token",
        "revoked token" => "revoked",
        "expired token" => "expired",
        // Decommissioning a node revokes what stands for it.
        "token of a decommissioned node" => "revoked",
        _ => "certificate",
    }
}

/// Every `reason` label of `stratum_auth_refused_total`.
pub const REFUSAL_REASONS: [&str; 7] = [
    "no_token",
    "unknown_token",
    "revoked",
    "expired",
    "certificate",
    "throttled",
    "busy",
];

/// Decides whether `caller` may perform `action` on `resource`, by the
/// domain's one rule over the read models of this request's moment, so a
/// change of policy takes effect on the next request, on every replica.
/// Answers every policy name the caller holds.
pub fn authorize(
    view: &ReadModels,
    caller: &Caller,
    action: Action,
    resource: &str,
    policy_key: Option<&str>,
) -> Result<Vec<String>, ApiError> {
    view.state
        .iam
        .authorize(
            &caller.principal,
            &caller.policies,
            action,
            resource,
            policy_key,
        )
        .map_err(|_| ApiError::access_denied(action.name(), resource))
}
