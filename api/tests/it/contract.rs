//! The OpenAPI document is the contract: every route, asked the ways that
//! make the shared layers answer (no token, no permission, an unknown
//! parameter, a body of the wrong type, size or shape, a stale If-Match, a
//! reused Idempotency-Key), answers only statuses its operation documents.
//! `TestApp::send` checks each answer against the document.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::json;

use crate::support::{sample_path, spawn_app, sqlite, ADMIN_TOKEN};

/// The event stream answers a stream that does not end; it is asked only
/// for what ends at once.
const STREAM: &str = "/v1/admin/events/stream";

fn request(
    method: &Method,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<(&str, Vec<u8>)>,
) -> Request<Body> {
    let mut b = Request::builder().method(method.clone()).uri(path);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    match body {
        Some((content_type, bytes)) => b
            .header("content-type", content_type)
            .body(Body::from(bytes))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    }
}

#[tokio::test]
async fn every_route_answers_only_documented_statuses() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    app.admit("n-1", "hybrid", "192.0.2.11").await;
    let nothing = app.token("user/nobody", &[]).await;
    let mut seen = std::collections::BTreeSet::new();
    for r in stratum_api::http::routes() {
        let path = sample_path(r.path);
        let m = &r.method;
        let write = *m != Method::GET;
        let mut asks = vec![
            request(m, &path, None, &[], None),
            request(m, &path, Some(&nothing), &[], None),
        ];
        if r.path != STREAM {
            asks.push(request(
                m,
                &format!("{path}?bogus=1"),
                Some(ADMIN_TOKEN),
                &[],
                None,
            ));
        }
        if write {
            let json_body =
                |v: serde_json::Value| Some(("application/json", v.to_string().into_bytes()));
            asks.extend([
                request(
                    m,
                    &path,
                    Some(ADMIN_TOKEN),
                    &[],
                    Some(("text/plain", b"hello".to_vec())),
                ),
                request(
                    m,
                    &path,
                    Some(ADMIN_TOKEN),
                    &[],
                    Some(("application/json", vec![b' '; 2 * 1024 * 1024])),
                ),
                request(
                    m,
                    &path,
                    Some(ADMIN_TOKEN),
                    &[],
                    json_body(json!({"unknownField": 1})),
                ),
                request(m, &path, Some(ADMIN_TOKEN), &[], json_body(json!([1, 2]))),
                request(
                    m,
                    &path,
                    Some(ADMIN_TOKEN),
                    &[("if-match", "\"999\"")],
                    json_body(json!({})),
                ),
                request(
                    m,
                    &path,
                    Some(ADMIN_TOKEN),
                    &[("if-match", "soon")],
                    json_body(json!({})),
                ),
                request(
                    m,
                    &path,
                    Some(ADMIN_TOKEN),
                    &[("idempotency-key", "contract-key")],
                    json_body(json!({})),
                ),
                request(
                    m,
                    &path,
                    Some(ADMIN_TOKEN),
                    &[("idempotency-key", "contract-key")],
                    json_body(json!({"other": true})),
                ),
            ]);
        }
        for req in asks {
            let res = app.send(req).await;
            seen.insert(res.status);
        }
    }
    // The walk reached the shared layers' answers.
    for s in [
        StatusCode::BAD_REQUEST,
        StatusCode::UNAUTHORIZED,
        StatusCode::FORBIDDEN,
        StatusCode::NOT_FOUND,
        StatusCode::PAYLOAD_TOO_LARGE,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
    ] {
        assert!(seen.contains(&s), "no route answered {s}: {seen:?}");
    }
}
