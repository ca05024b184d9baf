//! The gate before every route, and how a handler gets the read models the
//! gate checked its caller against. They join authentication and
//! authorization (`auth`) and the read path (`reads`) to the service's
//! state, so they live with HTTP, above all three.

use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use stratum_domain::iam::Action;
use tracing::Instrument;

use crate::auth::{authenticate, authorize, Peer};
use crate::error::ApiError;
use crate::reads::View;
use crate::service::AppState;
use crate::tls::ClientCertificate;

/// The gate of one route: authenticates the caller and authorizes the
/// route's action on the resource its path parameters name.
pub async fn gate(
    State((app, action)): State<(AppState, Action)>,
    params: RawPathParams,
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
    let param = |k: &str| params.iter().find(|(n, _)| *n == k).map(|(_, v)| v);
    let resource = action.resource(param);
    let key = action.resource_policy_key(param);
    let decided = gate.in_scope(|| {
        authorize(&view, &caller, action, &resource, key.as_deref())
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
        match parts.extensions.get::<View>() {
            Some(v) => Ok(v.clone()),
            None => Ok(View(state.reads.fresh(&state.bus).await?)),
        }
    }
}
