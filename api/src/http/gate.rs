//! The gate before every route, and how a handler gets the read models the
//! gate checked its caller against. They join authentication and
//! authorization (`auth`) and the read path (`reads`) to the service's
//! state, so they live with HTTP, above all three.

use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams, Request, State};
use axum::http::request::Parts;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use stratum_domain::iam::Action;
use tracing::Instrument;

use crate::auth::{authenticate, authorize, recognize, Admission, Caller, Peer};
use crate::error::{ApiError, ApiResult};
use crate::reads::View;
use crate::service::AppState;
use crate::tls::ClientCertificate;
use stratum_projections::ReadModels;

/// The gate of one route: authenticates the caller and authorizes the
/// route's action on the resource its path parameters name, against read
/// models that include the log as it stood when the request arrived. The
/// gate of a command route ([`super::Route::by_command`]) first tries the
/// read models in memory, without learning the log's head (see
/// [`ahead`]).
pub async fn gate(
    State((app, action, by_command)): State<(AppState, Action, bool)>,
    params: RawPathParams,
    mut req: Request,
    next: Next,
) -> Response {
    let param = |k: &str| params.iter().find(|(n, _)| *n == k).map(|(_, v)| v);
    let resource = action.resource(param);
    let key = action.resource_policy_key(param);
    if by_command && req.method() != Method::GET && req.method() != Method::HEAD {
        if let Some(caller) = ahead(&app, action, resource.clone(), key.clone(), &mut req) {
            return run_admitted(&app, caller, req, next).await;
        }
    }
    checked(&app, action, &resource, key.as_deref(), req, next).await
}

/// The gate of a command route, against the read models the writer last
/// published, which may be behind the log (a token made or revoked by
/// another process a moment ago). A caller recognized and allowed there is
/// admitted unconfirmed ([`crate::auth::Admission`]): the writer
/// authorizes the command again against its state before deciding it, an
/// answer it allowed at a decision the log backs is sent as it is, and
/// any other waits for [`confirm`]. Anything else is left to the checked gate, so
/// a refusal here costs nothing and is neither logged, counted nor
/// throttled.
fn ahead(
    app: &AppState,
    action: Action,
    resource: String,
    key: Option<String>,
    req: &mut Request,
) -> Option<Caller> {
    // Traced as the checked gate is: its read of the read models (here,
    // the ones in memory), then the caller's authentication and
    // authorization.
    let gate = tracing::debug_span!("gate", action = action.name());
    let view = tracing::debug_span!(parent: &gate, "read").in_scope(|| app.bus.published());
    let client = req.extensions().get::<ClientCertificate>();
    let admitted = gate.in_scope(|| {
        let caller = recognize(&view, &app.chosen_secrets, req.headers(), client)?;
        let held = authorize(&view, &caller, action, &resource, key.as_deref()).ok()?;
        Some((caller, held))
    });
    let (mut caller, held) = admitted?;
    let peer = req.extensions().get::<Peer>().copied();
    caller.policies = held;
    caller.unconfirmed = Some(Arc::new(Admission::new(
        &caller, action, resource, key, peer,
    )));
    req.extensions_mut().insert(caller.clone());
    Some(caller)
}

/// Runs a request [`ahead`] admitted, past the node reports' limit (which
/// a node's credential revoked a moment ago elsewhere may so still spend,
/// until this process learns of it). An answer whose caller nothing
/// settled (a body refused before any command ran, a report over the
/// limit) is sent only once the checked read models authorize the
/// caller. The request's log line names the principal as the checked
/// gate does: not when it was found unauthenticated.
async fn run_admitted(app: &AppState, caller: Caller, req: Request, next: Next) -> Response {
    let Some(admission) = caller.unconfirmed.clone() else {
        return next.run(req).await;
    };
    let res = match app.reports.admit(&caller, admission.action) {
        Ok(()) => next.run(req).await,
        Err(limited) => limited.into_response(),
    };
    let mut res = match admission.settled() {
        true => res,
        false => match confirm(app, &caller).await {
            Ok(_) => res,
            Err(refused) => refused.into_response(),
        },
    };
    if admission.named() {
        tracing::Span::current().record("principal", &*caller.principal);
        res.extensions_mut().insert(Principal(caller.principal));
    }
    res
}

/// Authorizes a caller [`ahead`] admitted again, against the read models
/// that include the log as it stood when this call began, refusing as the
/// checked gate would (logged, counted, throttled); answers them and every
/// policy the caller holds there. Either way its authorization is settled
/// (`Admission::checked`): the gate does not ask again. A caller not
/// admitted ahead is answered as it is.
pub async fn confirm(app: &AppState, caller: &Caller) -> ApiResult<(Arc<ReadModels>, Vec<String>)> {
    let Some(admission) = &caller.unconfirmed else {
        return Ok((app.reads.fresh(&app.bus).await?, caller.policies.clone()));
    };
    // Settled whatever it finds: a refusal is counted once, and a check
    // that could not be made (503) is not made again for this request.
    admission.checked();
    let found: ApiResult<_> = async {
        let view = app.reads.fresh(&app.bus).await?;
        let held = crate::auth::confirm(&view, &app.chosen_secrets, admission)?;
        Ok((view, held))
    }
    .await;
    if matches!(&found, Err(e) if e.code != stratum_domain::ErrorCode::AccessDenied) {
        admission.unnamed();
    }
    found
}

/// The gate against read models that include the log as it stood when
/// the request arrived.
async fn checked(
    app: &AppState,
    action: Action,
    resource: &str,
    key: Option<&str>,
    mut req: Request,
    next: Next,
) -> Response {
    let gate = tracing::debug_span!("gate", action = action.name());
    let view = match app
        .reads
        .fresh(&app.bus)
        .instrument(tracing::debug_span!(parent: &gate, "read"))
        .await
    {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let client = req.extensions().get::<ClientCertificate>();
    let peer = req.extensions().get::<Peer>().copied();
    let mut caller = match authenticate(&view, &app.chosen_secrets, req.headers(), client, peer)
        .instrument(gate.clone())
        .await
    {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    tracing::Span::current().record("principal", &*caller.principal);
    let decided = gate.in_scope(|| {
        authorize(&view, &caller, action, resource, key)
            .and_then(|held| app.reports.admit(&caller, action).map(|()| held))
    });
    drop(gate);
    match decided {
        Ok(held) => caller.policies = held,
        Err(e) => {
            // Who was refused, for the request's log line.
            let mut res = e.into_response();
            res.extensions_mut().insert(Principal(caller.principal));
            return res;
        }
    }
    // For the request's log line: the principal only, shared, not a copy
    // of the caller.
    let principal = Principal(caller.principal.clone());
    req.extensions_mut().insert(caller);
    req.extensions_mut().insert(View(view));
    let mut res = next.run(req).await;
    res.extensions_mut().insert(principal);
    res
}

/// Who a request was from, handed by the gate to the request's log line in
/// the response's extensions.
#[derive(Clone)]
pub struct Principal(pub Arc<str>);

impl FromRequestParts<AppState> for View {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(v) = parts.extensions.get::<View>() {
            return Ok(v.clone());
        }
        // A caller admitted ahead reads only once it is confirmed.
        match parts.extensions.get::<Caller>() {
            Some(caller) if caller.unconfirmed.as_ref().is_some_and(|a| !a.settled()) => {
                Ok(View(confirm(state, caller).await?.0))
            }
            _ => Ok(View(state.reads.fresh(&state.bus).await?)),
        }
    }
}
