//! Test support: a fresh database per test on each backend, an in-process
//! app, and requests without a socket.

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use stratum_api::service::{self, Service, ServiceConfig};
pub use stratum_api::testing::{each_backend, postgres, sqlite, TestDb};
use stratum_store as store;
use tower::ServiceExt;

pub const ADMIN_TOKEN: &str = "test-admin-token-for-integration-tests";

pub struct TestApp {
    pub svc: Service,
    pub router: Router,
}

pub fn config() -> ServiceConfig {
    ServiceConfig {
        bootstrap_token: Some(ADMIN_TOKEN.to_owned()),
        release_keys: stratum_domain::release::TrustedKeys::parse(
            &stratum_domain::testing::release_keys_spec(),
        )
        .unwrap(),
        ..Default::default()
    }
}

pub async fn spawn_app(db: &TestDb) -> TestApp {
    spawn_with(db, config()).await
}

pub async fn spawn_with(db: &TestDb, cfg: ServiceConfig) -> TestApp {
    let store = store::connect(&db.url).await.unwrap();
    let svc = service::start(store, cfg).await.unwrap();
    let router = stratum_api::http::app(svc.state.clone());
    TestApp { svc, router }
}

/// A response, with its body parsed as JSON (or `Null` when it is not).
#[derive(Debug)]
pub struct Res {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

/// A concrete path of a route template, naming sample resources.
pub fn sample_path(template: &str) -> String {
    template
        .replace("{nodeId}", "n-1")
        .replace("{id}", "upg-0000000000")
        .replace("{version}", "1.0.0")
        .replace("{name}", "ReadOnly")
        .replace("{principal}", "user%2Falice")
        .replace("{position}", "1")
        .replace("{*path}", "entries/000.p/1")
}

pub use stratum_api::http::document_path;

/// The OpenAPI document as JSON, read once.
fn document() -> &'static Value {
    static DOC: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    DOC.get_or_init(|| serde_json::to_value(stratum_api::http::openapi::document()).unwrap())
}

/// The route template a concrete path is served by: the one whose literal
/// segments match most.
pub fn template_of(method: &Method, path: &str) -> Option<String> {
    let path = path.split('?').next().unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    stratum_api::http::routes()
        .into_iter()
        .filter(|r| r.method == *method)
        .filter_map(|r| {
            let t: Vec<&str> = r.path.split('/').collect();
            // A wildcard's last segment takes the rest of the path.
            let wildcard = t.last().is_some_and(|s| s.starts_with("{*"));
            if t.len() != segments.len() && !(wildcard && segments.len() > t.len()) {
                return None;
            }
            let mut literal = 0;
            for (a, b) in t.iter().zip(&segments) {
                if a.starts_with('{') {
                    if b.is_empty() {
                        return None;
                    }
                } else if a == b {
                    literal += 1;
                } else {
                    return None;
                }
            }
            Some((literal, r.path))
        })
        .max_by_key(|(literal, _)| *literal)
        .map(|(_, p)| document_path(p))
}

/// Fails when a route answers a status its operation does not document
/// (SPEC §2: the OpenAPI document is the contract). Every request of the
/// integration tests passes here.
pub fn assert_documented(method: &Method, path: &str, status: StatusCode) {
    let Some(template) = template_of(method, path) else {
        return; // not a route: the fallback's 404 or 405
    };
    let op = &document()["paths"][template.as_str()][method.as_str().to_lowercase()];
    assert!(
        op["responses"][status.as_str()].is_object(),
        "{method} {template} answered {status}, which its operation does not document"
    );
}

impl TestApp {
    pub async fn send(&self, req: Request<Body>) -> Res {
        let (method, path) = (req.method().clone(), req.uri().path().to_owned());
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        assert_documented(&method, &path, status);
        let headers = res.headers().clone();
        let raw = res.into_body().collect().await.unwrap().to_bytes().to_vec();
        let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
        Res {
            status,
            headers,
            body,
        }
    }

    /// A request as the admin, with a JSON body when given.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Res {
        self.call_with(method, path, body, &[]).await
    }

    pub async fn call_with(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Res {
        let mut b = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {ADMIN_TOKEN}"));
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let req = match body {
            Some(v) => b
                .header("content-type", "application/json")
                .body(Body::from(v.to_string())),
            None => b.body(Body::empty()),
        };
        self.send(req.unwrap()).await
    }

    /// A request with another bearer token (or none), a JSON body when given.
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Res {
        let mut b = Request::builder().method(method).uri(path);
        if let Some(t) = token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let req = match body {
            Some(v) => b
                .header("content-type", "application/json")
                .body(Body::from(v.to_string())),
            None => b.body(Body::empty()),
        };
        self.send(req.unwrap()).await
    }

    /// Creates a token as the admin; answers its secret.
    pub async fn token(&self, principal: &str, policies: &[&str]) -> String {
        let r = self
            .post(
                "/v1/admin/iam/tokens",
                serde_json::json!({"principal": principal, "policies": policies}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body["token"].as_str().unwrap().to_owned()
    }

    pub async fn get(&self, path: &str) -> Res {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Res {
        self.call(Method::POST, path, Some(body)).await
    }

    /// Admits a member with a rack label; panics unless it is admitted.
    pub async fn admit(&self, node_id: &str, role: &str, ip: &str) -> Value {
        let r = self
            .post(
                "/v1/admin/cluster/members",
                serde_json::json!({"nodeId": node_id, "role": role, "mgmtIp": ip,
                                   "labels": {"topology.rack": "r1"}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body
    }

    pub async fn head(&self) -> u64 {
        self.svc.state.store.head().await.unwrap().position
    }
}

/// The SPEC §2 error shape: a code, a sentence and the request id.
pub fn assert_error_shape(res: &Res, status: StatusCode, code: &str) {
    assert_eq!(res.status, status, "{}", res.body);
    assert_eq!(res.body["code"], code, "{}", res.body);
    assert!(
        res.body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{}",
        res.body
    );
    assert!(
        res.body["requestId"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{}",
        res.body
    );
    assert_eq!(
        res.headers.get("content-type").unwrap(),
        "application/json",
        "error bodies are JSON"
    );
}

/// Whether every tool is on `PATH` (or, for a path, exists). When one is
/// missing: a failure where `require` (a `STRATUM_REQUIRE_*` switch) is set
/// to 1, else a loud skip naming what did not run.
pub fn tools_available(tools: &[&str], require: &str, what: &str) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|tool| {
            if tool.contains('/') {
                return !std::path::Path::new(tool).exists();
            }
            !std::process::Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var(require).as_deref() != Ok("1"),
        "{what} are required here ({require}=1), but {missing:?} are missing"
    );
    eprintln!("\n!!! {missing:?} not installed: {what} did NOT run\n");
    false
}

/// The command that admits `node` (a compute member at `ip`), as an
/// operator sends it, for tests that drive the write path directly.
pub fn admit_request(node: &str, ip: &str) -> stratum_api::command::CommandRequest {
    stratum_api::command::CommandRequest::new(
        stratum_domain::Command::Member(stratum_domain::membership::MemberCommand::Admit {
            node_id: Some(node.into()),
            role: Some("compute".into()),
            mgmt_ip: Some(ip.into()),
            bindings: Default::default(),
            labels: Default::default(),
        }),
        "user/admin",
    )
}
