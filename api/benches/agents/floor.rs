//! The floor under the agents' figures: a server that does, of each
//! exchange the agents make, only what any server of this API must do,
//! with the bench's own client, on the same machine. It keeps the
//! membership in memory and writes nothing (no log, no disk, no `fsync`),
//! looks tokens up in a map, answers a long-poll from one body encoded
//! once per generation, and records a report in a map. What the bench
//! measures against it is what HTTP/1.1 and the simulated agents cost on
//! these cores; what stratum measures above it is stratum's own cost.
//!
//! ```sh
//! cargo bench -p stratum-api --bench agents -- --agents 5000 --changes 10 --floor
//! ```
//!
//! It runs in a process of its own (the bench's executable, started with
//! `--floor-serve PORT`), on a runtime of as many workers as stratum's
//! (one per core), so that it shares the cores with the agents as stratum
//! does. Not a product: nothing here is durable, checked or audited.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::watch;

/// The membership, in memory.
struct Floor {
    admin: String,
    /// Token to node id.
    tokens: RwLock<HashMap<String, String>>,
    /// Node id to the generation it applied; a member decommissioned is
    /// removed.
    members: Mutex<HashMap<String, u64>>,
    /// The generation and the peer lists' body at it, encoded once.
    published: watch::Sender<(u64, Bytes)>,
}

fn peers_body(generation: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"generation":{generation},"patroni":[],"openbao":[],"ovn":[],"keepalived":[],"vmstorage":[],"alertmanager":[]}}"#
    ))
}

impl Floor {
    /// The caller's node id (the admin's is empty), or 401.
    fn caller(&self, headers: &HeaderMap) -> Result<String, StatusCode> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or(StatusCode::UNAUTHORIZED)?;
        if token == self.admin {
            return Ok(String::new());
        }
        let tokens = self.tokens.read().unwrap();
        tokens.get(token).cloned().ok_or(StatusCode::UNAUTHORIZED)
    }

    fn admin(&self, headers: &HeaderMap) -> Result<(), StatusCode> {
        if self.caller(headers)?.is_empty() {
            Ok(())
        } else {
            Err(StatusCode::FORBIDDEN)
        }
    }

    /// A topology change: the next generation, published.
    fn change(&self) -> u64 {
        let mut generation = 0;
        self.published.send_modify(|(g, body)| {
            *g += 1;
            *body = peers_body(*g);
            generation = *g;
        });
        generation
    }
}

type Shared = State<Arc<Floor>>;

/// Serves the floor on `port` until killed.
pub async fn serve(port: u16, admin: &str) {
    let floor = Arc::new(Floor {
        admin: admin.to_owned(),
        tokens: RwLock::default(),
        members: Mutex::default(),
        published: watch::Sender::new((1, peers_body(1))),
    });
    let app = Router::new()
        .route("/readyz", get(|| async { "ready" }))
        .route("/v1/admin/iam/tokens", post(token))
        .route("/v1/admin/cluster/members", post(admit))
        .route("/v1/admin/cluster/members/{node}/join-failed", post(failed))
        .route(
            "/v1/admin/cluster/members/{node}/decommission",
            post(decommission),
        )
        .route(
            "/v1/admin/cluster/members/{node}/applied-generation",
            post(applied),
        )
        .route("/v1/admin/cluster/membership", get(membership))
        .route("/v1/admin/cluster/peers", get(peers))
        .with_state(floor);
    // As stratum's listener does: no Nagle delay on a short answer.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("the floor's port")
        .tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
    axum::serve(listener, app).await.expect("the floor serves");
}

async fn token(State(f): Shared, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    if let Err(s) = f.admin(&headers) {
        return s.into_response();
    }
    let node = body["principal"].as_str().unwrap_or("");
    let node = node.strip_prefix("node/").unwrap_or(node).to_owned();
    let token = format!("floor-{node}-{}", uuid::Uuid::new_v4().simple());
    f.tokens.write().unwrap().insert(token.clone(), node);
    (StatusCode::CREATED, Json(json!({ "token": token }))).into_response()
}

async fn admit(State(f): Shared, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    if let Err(s) = f.admin(&headers) {
        return s.into_response();
    }
    let node = body["nodeId"].as_str().unwrap_or("").to_owned();
    f.members.lock().unwrap().insert(node.clone(), 0);
    let generation = f.change();
    let doc = json!({"nodeId": node, "state": "joining", "version": generation});
    (StatusCode::CREATED, Json(doc)).into_response()
}

async fn failed(State(f): Shared, headers: HeaderMap, Path(node): Path<String>) -> Response {
    if let Err(s) = f.admin(&headers) {
        return s.into_response();
    }
    let generation = f.change();
    Json(json!({"nodeId": node, "state": "failed", "version": generation})).into_response()
}

async fn decommission(State(f): Shared, headers: HeaderMap, Path(node): Path<String>) -> Response {
    if let Err(s) = f.admin(&headers) {
        return s.into_response();
    }
    f.members.lock().unwrap().remove(&node);
    f.tokens.write().unwrap().retain(|_, n| *n != node);
    let generation = f.change();
    Json(json!({"nodeId": node, "state": "decommissioned", "version": generation})).into_response()
}

/// A report: the member's applied generation, answered with a document of
/// the size stratum's is (about 500 bytes).
async fn applied(
    State(f): Shared,
    headers: HeaderMap,
    Path(node): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    match f.caller(&headers) {
        Ok(caller) if caller == node => {}
        Ok(_) => return StatusCode::FORBIDDEN.into_response(),
        Err(s) => return s.into_response(),
    }
    let Some(generation) = body["generation"].as_u64() else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let current = f.published.borrow().0;
    let mut members = f.members.lock().unwrap();
    let Some(applied) = members.get_mut(&node) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    *applied = (*applied).max(generation.min(current));
    let applied = *applied;
    drop(members);
    Json(json!({
        "nodeId": node, "state": "active", "role": "compute", "mgmtIp": "10.0.0.1",
        "bindings": {}, "labels": {}, "rack": null, "ordinal": 1,
        "appliedGeneration": applied, "lagging": applied < current,
        "joinStep": null, "raftsReached": [], "failedStep": null, "failedError": null,
        "raftCleanupPending": [], "raftCleanupAt": null, "decommissionReason": null,
        "decommissionedBy": null, "removalStartedAt": null, "decommissionedAt": null,
        "joinRequest": null, "admittedBy": "user/admin",
        "admittedAt": "2026-12-06T11:31:19.519444Z", "updatedAt": "2026-12-06T11:31:19.536178Z",
        "version": current,
    }))
    .into_response()
}

async fn membership(State(f): Shared, headers: HeaderMap) -> Response {
    if let Err(s) = f.admin(&headers) {
        return s.into_response();
    }
    let generation = f.published.borrow().0;
    let members = f.members.lock().unwrap();
    let lagging: HashSet<&String> = members
        .iter()
        .filter(|(_, applied)| **applied < generation)
        .map(|(n, _)| n)
        .collect();
    Json(json!({"generation": generation, "members": members.len(), "lagging": lagging}))
        .into_response()
}

/// The long-poll: the peer lists once the generation is above `after`, or
/// when `waitSeconds` pass.
async fn peers(
    State(f): Shared,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let number = |k: &str| q.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let (after, wait) = (number("after"), number("waitSeconds").min(60));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait);
    let mut published = f.published.subscribe();
    loop {
        // As stratum's does, a wait ends with 401 once its token is gone.
        if let Err(s) = f.caller(&headers) {
            return s.into_response();
        }
        let (generation, body) = published.borrow_and_update().clone();
        if generation > after {
            return ([(header::CONTENT_TYPE, "application/json")], body).into_response();
        }
        match tokio::time::timeout_at(deadline, published.changed()).await {
            Ok(Ok(())) => continue,
            _ => return ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        }
    }
}
