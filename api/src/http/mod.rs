//! The HTTP API (axum): the router, the middleware every request passes
//! (request id, tracing, body limit, panic catcher), and the answers of the
//! write path.

pub mod console;
pub mod events;
pub mod extract;
pub mod facts;
pub mod gate;
pub mod iam;
pub mod join_requests;
pub mod log;
pub mod members;
pub mod metrics;
pub mod openapi;
pub mod releases;
pub mod replicas;
pub mod schema;
pub mod system;
pub mod upgrades;

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::Router;
use stratum_domain::iam::Action;
use stratum_domain::{ErrorCode, FieldError};
use tower_http::catch_panic::CatchPanicLayer;
use tracing::Instrument;

use crate::auth::Caller;
use crate::command::{CommandRequest, Committed, Outcome};
use crate::error::{ApiError, CLIENT_REQUEST_ID, REQUEST_ID};
use gate::gate;

/// The most bytes a request body may have.
pub const MAX_BODY: usize = 1024 * 1024;
pub const REQUEST_ID_HEADER: &str = "x-request-id";

pub use crate::service::AppState;

/// One route: its method and path, the action it is gated on, and its handler.
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    pub action: Option<Action>,
    pub handler: MethodRouter<AppState>,
    /// Whether the route holds its request open to wait for news.
    pub watch: Watch,
    /// Whether its handler answers only through the write path (see
    /// [`Route::by_command`]).
    pub by_command: bool,
}

impl Route {
    /// A route behind the gate: the caller must be allowed `action` on the
    /// resource the path names, and it answers within the request timeout.
    pub fn gated(
        method: Method,
        path: &'static str,
        action: Action,
        handler: MethodRouter<AppState>,
    ) -> Self {
        Route {
            method,
            path,
            action: Some(action),
            handler,
            watch: Watch::No,
            by_command: false,
        }
    }

    /// A route whose handler answers only by running a command
    /// ([`run_command`]): it reads no read model of its own and acts on
    /// nothing but the log (a member command also remembers its trace as
    /// the cause of the raft cleanup it may start). Its gate may admit a
    /// caller against the read models in memory, the writer authorizing
    /// the command again as it decides it (see [`gate::gate`] and
    /// `auth::Admission`): a write waits for no head check.
    pub fn by_command(mut self) -> Self {
        self.by_command = true;
        self
    }
}

/// A route's path as the OpenAPI document names it: a wildcard segment
/// (`{*path}`, the router's) is a parameter there (`{path}`).
pub fn document_path(route: &str) -> String {
    route.replace("{*", "{")
}

/// How long a route may hold a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watch {
    /// Answers within the request timeout.
    No,
    /// May wait up to `MAX_WAIT` before it answers, on top of the timeout.
    LongPoll,
    /// Streams until the client or the process stops; bounded by the
    /// watcher limit instead.
    Stream,
}

impl Route {
    pub fn watching(mut self, watch: Watch) -> Self {
        self.watch = watch;
        self
    }
}

/// Every route of the API. Each gated route declares its action here, in
/// one table, which tests walk.
pub fn routes() -> Vec<Route> {
    let mut all = Vec::new();
    all.extend(system::routes());
    all.extend(openapi::routes());
    all.extend(members::routes());
    all.extend(join_requests::routes());
    all.extend(events::routes());
    all.extend(log::routes());
    all.extend(upgrades::routes());
    all.extend(releases::routes());
    all.extend(facts::routes());
    all.extend(iam::routes());
    all.extend(replicas::routes());
    all
}

/// The whole application, without a socket (tests call it with `oneshot`).
pub fn app(state: AppState) -> Router {
    let mut router = Router::new();
    for r in routes() {
        // STRATUM_LOG_PUBLIC opens the transparency log's reads to outside
        // witnesses and monitors, without a token.
        let public = state.checkpoints.public
            && r.method == Method::GET
            && r.path.starts_with(log::PUBLIC_PREFIX);
        let handler = match r.action.filter(|_| !public) {
            Some(action) => r.handler.route_layer(middleware::from_fn_with_state(
                (state.clone(), action, r.by_command),
                gate,
            )),
            None => r.handler,
        };
        let handler = match r.watch {
            Watch::No => handler.route_layer(middleware::from_fn_with_state(
                state.limits.request_timeout,
                within,
            )),
            Watch::LongPoll => handler.route_layer(middleware::from_fn_with_state(
                state.limits.request_timeout + MAX_WAIT,
                within,
            )),
            Watch::Stream => handler,
        };
        router = router.route(r.path, handler);
    }
    // A reference for people, rendered from the same document, its assets
    // embedded in the binary (it works air-gapped).
    // Its own origin only, never in a frame, never sniffed.
    let docs: Router<AppState> = Router::new()
        .merge(
            utoipa_swagger_ui::SwaggerUi::new("/v1/docs")
                .config(utoipa_swagger_ui::Config::from("/v1/openapi.json")),
        )
        .layer(middleware::map_response(|mut res: Response| async move {
            let h = res.headers_mut();
            h.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(DOCS_POLICY),
            );
            h.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
            h.insert(
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            );
            res
        }));
    let router = router.merge(docs);
    let router = router.merge(console::router());
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::internal("a handler panicked").into_response()
        }))
        .layer(middleware::from_fn(request_context))
}

/// The API reference's policy: its own scripts and the document, the
/// inline styles and `data:` images Swagger UI draws with, no frames.
const DOCS_POLICY: &str = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// Answers 503 when a request takes longer than `limit`, its body
/// included. A write the command path took keeps going and is recorded; a
/// retry with the same `Idempotency-Key` gets its answer.
async fn within(
    axum::extract::State(limit): axum::extract::State<Duration>,
    req: Request,
    next: Next,
) -> Response {
    // A write cut off by the limit may still be committed: its outcome is
    // unknown, not "nothing was stored".
    let code = if req.method() == axum::http::Method::GET {
        ErrorCode::Unavailable
    } else {
        ErrorCode::OutcomeUnknown
    };
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(res) => res,
        Err(_) => ApiError::new(
            code,
            format!(
                "The request did not finish within {}; a write it carried may still be recorded, so retry it with the same Idempotency-Key.",
                humantime::format_duration(limit)
            ),
        )
        .into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "No such route.")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "This route does not answer that method.",
    )
}

/// Gives every request the server's own id (unique, so no two requests'
/// events share one), a span carrying it, and echoes it on the response. A
/// caller's `X-Request-Id` must be 1 to 64 letters, digits, `-`, `_` or
/// `.`; it is kept apart, as the `clientRequestId` of the events the
/// request causes.
async fn request_context(req: Request, next: Next) -> Response {
    let id = uuid::Uuid::now_v7().to_string();
    let client = match req.headers().get(REQUEST_ID_HEADER) {
        None => None,
        Some(v) => match v.to_str().ok().filter(|v| valid_client_request_id(v)) {
            Some(v) => Some(v.to_owned()),
            None => {
                let body = ApiError::invalid(vec![FieldError::new(
                    "X-Request-Id",
                    "must be 1 to 64 letters, digits, '-', '_' or '.'",
                )])
                .body(&id);
                let mut res = crate::error::json_response(StatusCode::BAD_REQUEST, &body);
                if let Ok(v) = HeaderValue::from_str(&id) {
                    res.headers_mut()
                        .insert(HeaderName::from_static(REQUEST_ID_HEADER), v);
                }
                return res;
            }
        },
    };
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        client_request_id = client.as_deref().unwrap_or(""),
        method = %req.method(),
        path = %req.uri().path(),
        principal = tracing::field::Empty,
        // For the trace: set only when spans are exported.
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let method = req.method().clone();
    // The template the router matched (an `Arc` inside: a clone, no copy).
    let matched = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .cloned();
    if crate::telemetry::enabled() {
        let route = matched.as_ref().map_or("-", |m| m.as_str());
        span.record("otel.name", format!("{method} {route}"));
        span.record("otel.kind", "server");
        crate::telemetry::adopt(&span, req.headers());
    }
    let started = std::time::Instant::now();
    let mut res = REQUEST_ID
        .scope(id.clone(), CLIENT_REQUEST_ID.scope(client, next.run(req)))
        .instrument(span.clone())
        .await;
    let status = res.status();
    let seconds = started.elapsed().as_secs_f64();
    let route = matched.as_ref().map_or("-", |m| m.as_str());
    crate::metrics::global().observe_request(route, &method, status, seconds);
    // One line per request: at info, warn for a server error, and debug
    // for the probes (health checks), which would drown the rest. Who asked
    // comes from the gate, as a shared `Arc`, taken out of the response.
    let principal = res.extensions_mut().remove::<gate::Principal>();
    let principal = principal.as_ref().map_or("-", |p| &p.0);
    if crate::telemetry::enabled() {
        span.record("http.response.status_code", status.as_u16());
        if status.is_server_error() {
            span.record("otel.status_code", "error");
        }
    }
    span.in_scope(|| {
        let duration_ms = seconds * 1000.0;
        let status = status.as_u16();
        let method = method.as_str();
        if status >= 500 {
            tracing::warn!(method, route, status, duration_ms, principal, "request");
        } else if matches!(route, "/healthz" | "/readyz") {
            tracing::debug!(method, route, status, duration_ms, principal, "request");
        } else {
            tracing::info!(method, route, status, duration_ms, principal, "request");
        }
    });
    if (status.is_client_error() || status.is_server_error()) && !is_json(&res) {
        res = into_error_shape(res, &id).await;
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut()
            .insert(HeaderName::from_static(REQUEST_ID_HEADER), v);
    }
    res
}

/// The caller's request ids this server records: short, and safe in a log
/// line and a header.
pub fn valid_client_request_id(v: &str) -> bool {
    (1..=64).contains(&v.len())
        && v.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_json(res: &Response) -> bool {
    res.headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}

/// Rewrites an error that did not come from us (an extractor's rejection of
/// a path parameter, say) into the one error shape, keeping its status.
async fn into_error_shape(res: Response, request_id: &str) -> Response {
    let status = res.status();
    let code = match status.as_u16() {
        401 => ErrorCode::Unauthenticated,
        403 => ErrorCode::AccessDenied,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        412 => ErrorCode::PreconditionFailed,
        413 => ErrorCode::PayloadTooLarge,
        414 => ErrorCode::UriTooLong,
        431 => ErrorCode::HeadersTooLarge,
        415 => ErrorCode::UnsupportedMediaType,
        429 => ErrorCode::RateLimited,
        503 => ErrorCode::Unavailable,
        500..=599 => ErrorCode::Internal,
        _ => ErrorCode::InvalidInput,
    };
    let text = axum::body::to_bytes(res.into_body(), 16 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() || status.is_server_error() {
        status
            .canonical_reason()
            .unwrap_or("The request failed.")
            .to_owned()
    } else {
        text
    };
    crate::error::json_response(status, &ApiError::new(code, message).body(request_id))
}

/// Runs a command and answers with its reply: the status, the record, its
/// `ETag`, and `Idempotent-Replayed` for a kept answer.
///
/// A command of a caller the gate admitted ahead (`auth::Admission`) was
/// authorized again by the writer: an answer it decided against the log
/// as it stood after the request arrived, and allowed there, is sent as
/// it is. Any other (a request only validated, a batch decided ahead of a
/// commit with nothing to write, the writer's own refusal) waits for the
/// checked read models to settle the caller, and the command is then
/// decided again after them (an error of the write path is answered as
/// it was, once they allow the caller).
pub async fn execute(state: &AppState, caller: &Caller, mut req: CommandRequest) -> Response {
    let Some(admission) = &caller.unconfirmed else {
        return answer(state.bus.execute(req).await);
    };
    // The writer authorizes the command again through it.
    req.unconfirmed = Some(admission.clone() as std::sync::Arc<dyn crate::command::Unconfirmed>);
    let mut again = req.clone();
    let first = state.bus.execute(req).await;
    if admission.backed_by_writer() {
        return answer(first);
    }
    let held = match gate::confirm(state, caller).await {
        Ok((_, held)) => held,
        Err(e) => return e.into_response(),
    };
    if first.is_err() {
        return answer(first);
    }
    again.unconfirmed = None;
    again.held_policies = Some(held);
    answer(state.bus.execute(again).await)
}

fn answer(outcome: Result<Outcome, crate::command::CommandError>) -> Response {
    match outcome {
        Ok(outcome) => outcome_response(outcome),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The one place a write's outcome becomes a status: 201 for a creation,
/// 200 for any other change, and a refusal's status by its code.
pub fn outcome_response(outcome: Outcome) -> Response {
    let reply: Committed = match outcome.committed() {
        Ok(c) => c,
        Err(refusal) => return ApiError::from(refusal).into_response(),
    };
    let status = if reply.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut res = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        reply.body,
    )
        .into_response();
    if let Some(v) = reply.etag {
        set_etag(&mut res, v);
    }
    if reply.replayed {
        res.headers_mut().insert(
            HeaderName::from_static("idempotent-replayed"),
            HeaderValue::from_static("true"),
        );
    }
    res
}

pub fn set_etag(res: &mut Response, version: u64) {
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        res.headers_mut().insert(header::ETAG, v);
    }
}

/// Runs a caller's command with the write headers of its request and the
/// raw body the idempotency hash covers.
pub async fn run_command(
    state: &AppState,
    caller: &Caller,
    headers: &extract::WriteHeaders,
    (raw, input_errors): (&[u8], Vec<FieldError>),
    command: stratum_domain::Command,
    success_status: u16,
) -> Response {
    let mut req = command_request(caller, command, input_errors);
    req.if_match = headers.if_match;
    req.idempotency = headers.idempotency(raw);
    req.creates = success_status == 201;
    execute(state, caller, req).await
}

/// The metadata of events a caller's request causes.
pub fn command_request(
    caller: &Caller,
    command: stratum_domain::Command,
    input_errors: Vec<FieldError>,
) -> CommandRequest {
    let mut req = CommandRequest::new(command, caller.principal.to_string());
    req.meta.request_id = Some(crate::error::current_request_id());
    req.meta.client_request_id = CLIENT_REQUEST_ID.try_with(Clone::clone).ok().flatten();
    req.input_errors = input_errors;
    req.held_policies = Some(caller.policies.clone());
    req
}

/// Reads `bytes` as every JSON request body the API takes, the way its
/// handlers read them; answers how many read without a finding. The
/// request-body fuzzer (`fuzz/fuzz_targets/request_bodies.rs`) drives it:
/// whatever arrives, reading it never panics.
#[doc(hidden)]
pub fn read_as_every_body(bytes: &[u8]) -> usize {
    fn read<T: extract::BodyFields>(bytes: &[u8]) -> usize {
        let raw = bytes::Bytes::copy_from_slice(bytes);
        match extract::parse::<T>(bytes, raw) {
            Ok(b) => usize::from(b.errors.is_empty()),
            Err(e) => {
                // A refusal is a sentence, in the one error shape.
                assert!(!e.message.is_empty());
                0
            }
        }
    }
    read::<iam::CreateTokenBody>(bytes)
        + read::<iam::CreatePolicyBody>(bytes)
        + read::<iam::PrincipalPoliciesBody>(bytes)
        + read::<iam::ResourcePolicyBody>(bytes)
        + read::<members::AdmitBody>(bytes)
        + read::<members::UpdateMemberBody>(bytes)
        + read::<members::JoinProgressBody>(bytes)
        + read::<members::JoinFailedBody>(bytes)
        + read::<members::DecommissionBody>(bytes)
        + read::<members::AppliedGenerationBody>(bytes)
        + read::<join_requests::JoinRequestBody>(bytes)
        + read::<join_requests::ApproveBody>(bytes)
        + read::<join_requests::RejectBody>(bytes)
        + read::<releases::RunningReleaseBody>(bytes)
        + read::<upgrades::CreateUpgradeBody>(bytes)
        + read::<upgrades::RollbackBody>(bytes)
        + read::<upgrades::BackupReportBody>(bytes)
        + read::<upgrades::NodeReportBody>(bytes)
        + read::<facts::FactsBody>(bytes)
        + read::<log::AcknowledgeForkBody>(bytes)
        + read::<replicas::FinalizeBody>(bytes)
}

/// How long a long-poll may hold a request at most.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

#[cfg(test)]
mod scope_tests {
    use stratum_domain::iam::{Action, ResourceType};

    /// Routes whose path names a resource the action's scope does not:
    /// each decided on purpose.
    const INSTALL_WIDE_ON_A_RESOURCE: [(Action, &str); 3] = [
        // A member's or an upgrade's history is a view of the log, which
        // audit:ReadEvents reads whole.
        (Action::ReadEvents, "a history is the log's"),
        // Letting a failed member join again admits it anew, like its
        // first admission.
        (Action::AdmitMember, "retry-join is an admission"),
        // The seed: canceling an upgrade is an install-wide decision.
        (Action::CancelUpgrade, "the seed makes cancel install-scope"),
    ];

    /// Every action is some route's, and each route's path names the
    /// resource its action's scope says: a member's actions `{nodeId}`,
    /// an upgrade's `{id}`, a release's `{version}`, install-wide ones none
    /// of them (but the exceptions above). A new action whose scope was
    /// decided wrong fails here.
    #[test]
    fn every_action_is_routed_and_scoped_by_the_resource_it_names() {
        let routes = super::routes();
        for action in Action::ALL {
            let on: Vec<&str> = routes
                .iter()
                .filter(|r| r.action == Some(action))
                .map(|r| r.path)
                .collect();
            assert!(!on.is_empty(), "{action:?} is no route's action");
            for path in on {
                let member = path.contains("/{nodeId}") && !path.starts_with("/v1/admin/upgrades/");
                let upgrade = path.starts_with("/v1/admin/upgrades/{id}");
                let release = path.contains("/releases/{version}");
                let ok = match action.resource_type() {
                    ResourceType::Member => member && !upgrade,
                    ResourceType::Upgrade => upgrade,
                    ResourceType::Release => release,
                    ResourceType::Install => {
                        INSTALL_WIDE_ON_A_RESOURCE.iter().any(|(a, _)| *a == action)
                            || !(member || upgrade || release)
                    }
                };
                assert!(
                    ok,
                    "{action:?} is {:?}-scoped but routed at {path}",
                    action.resource_type()
                );
            }
        }
    }
}
