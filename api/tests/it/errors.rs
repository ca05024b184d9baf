//! Every error the server answers has the SPEC §2 JSON body.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::json;

use crate::support::{assert_error_shape, spawn_app, sqlite, ADMIN_TOKEN};

fn req(method: Method, path: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
}

#[tokio::test]
async fn every_error_answers_in_the_one_json_shape() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    app.admit("n-1", "hybrid", "192.0.2.11").await;
    let path = "/v1/admin/cluster/members/n-1/join-failed";

    // Malformed JSON.
    let r = app
        .send(
            req(Method::POST, path)
                .header("content-type", "application/json")
                .body(Body::from("{\"step\": "))
                .unwrap(),
        )
        .await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(r.body["fieldErrors"][0]["field"], "");
    // JSON that is not an object.
    let r = app.call(Method::POST, path, Some(json!([1, 2]))).await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    // No token, an unknown token, a malformed header.
    let r = app
        .send(
            Request::get("/v1/admin/cluster/members")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_error_shape(&r, StatusCode::UNAUTHORIZED, "UNAUTHENTICATED");
    let r = app
        .send(
            Request::get("/v1/admin/cluster/members")
                .header("authorization", "Bearer nope")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_error_shape(&r, StatusCode::UNAUTHORIZED, "UNAUTHENTICATED");
    let r = app
        .send(
            Request::get("/v1/admin/cluster/members")
                .header("authorization", ADMIN_TOKEN)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_error_shape(&r, StatusCode::UNAUTHORIZED, "UNAUTHENTICATED");
    // Unknown route, with and without a token.
    let r = app.get("/v1/admin/nothing-here").await;
    assert_error_shape(&r, StatusCode::NOT_FOUND, "NOT_FOUND");
    let r = app
        .send(Request::get("/nope").body(Body::empty()).unwrap())
        .await;
    assert_error_shape(&r, StatusCode::NOT_FOUND, "NOT_FOUND");
    // Wrong method.
    let r = app.call(Method::DELETE, path, None).await;
    assert_error_shape(&r, StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED");
    // A body over 1 MiB.
    let big = json!({"step": "join/a", "error": "x".repeat(1024 * 1024)}).to_string();
    let r = app
        .send(
            req(Method::POST, path)
                .header("content-type", "application/json")
                .body(Body::from(big))
                .unwrap(),
        )
        .await;
    assert_error_shape(&r, StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE");
    // Not JSON at all.
    let r = app
        .send(
            req(Method::POST, path)
                .header("content-type", "text/plain")
                .body(Body::from("step=join/a"))
                .unwrap(),
        )
        .await;
    assert_error_shape(
        &r,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UNSUPPORTED_MEDIA_TYPE",
    );
    // Unknown query parameters and bad paging.
    let r = app
        .get("/v1/admin/cluster/members?limit=0&stat=failed")
        .await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(
        r.body["fieldErrors"].as_array().unwrap().len(),
        2,
        "{}",
        r.body
    );
    // A path parameter that is not UTF-8 (rejected by the router's extractor).
    let r = app.get("/v1/admin/cluster/members/%FF").await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    // The request id is the server's own, in the body and the header,
    // whatever the caller sent; a caller's id out of bounds is refused.
    let r = app
        .send(
            Request::get("/v1/admin/nope")
                .header("x-request-id", "req-123")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_ne!(r.body["requestId"], "req-123");
    assert_eq!(
        r.headers["x-request-id"],
        r.body["requestId"].as_str().unwrap()
    );
    for bad in ["a b", "x".repeat(65).as_str(), "<script>"] {
        let r = app
            .send(
                Request::get("/v1/admin/cluster/members")
                    .header("x-request-id", bad)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
        assert_eq!(
            r.body["fieldErrors"][0]["field"], "X-Request-Id",
            "{}",
            r.body
        );
    }
}

#[tokio::test]
async fn if_match_guards_writes_with_the_stream_version() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    app.admit("n-1", "hybrid", "192.0.2.11").await;
    let m = app.get("/v1/admin/cluster/members/n-1").await;
    assert_eq!(m.headers["etag"], "\"1\"");
    let path = "/v1/admin/cluster/members/n-1/join-progress";
    let r = app
        .call_with(
            Method::POST,
            path,
            Some(json!({"step": "join/a"})),
            &[("if-match", "\"7\"")],
        )
        .await;
    assert_error_shape(&r, StatusCode::PRECONDITION_FAILED, "PRECONDITION_FAILED");
    let r = app
        .call_with(
            Method::POST,
            path,
            Some(json!({"step": "join/a"})),
            &[("if-match", "\"1\"")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.headers["etag"], "\"2\"");
}

#[tokio::test]
async fn lists_page_with_limit_and_cursor() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    for i in 0..5 {
        app.admit(&format!("n-{i}"), "compute", &format!("192.0.2.{}", 10 + i))
            .await;
    }
    let mut seen = Vec::new();
    let mut url = "/v1/admin/cluster/members?limit=2".to_owned();
    loop {
        let r = app.get(&url).await.body;
        for m in r["items"].as_array().unwrap() {
            seen.push(m["nodeId"].as_str().unwrap().to_owned());
        }
        match r["nextCursor"].as_str() {
            Some(c) => url = format!("/v1/admin/cluster/members?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ["n-0", "n-1", "n-2", "n-3", "n-4"]);
    let r = app.get("/v1/admin/cluster/members?cursor=!!!").await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
}

#[tokio::test]
async fn health_readiness_and_the_openapi_document_need_no_token() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    for path in ["/healthz", "/readyz", "/v1/openapi.json"] {
        let r = app
            .send(Request::get(path).body(Body::empty()).unwrap())
            .await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
    let doc = app
        .send(
            Request::get("/v1/openapi.json")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .body;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    // Every gated route of the router is in the document.
    for r in stratum_api::http::routes() {
        let method = r.method.as_str().to_lowercase();
        assert!(
            doc["paths"][crate::support::document_path(r.path).as_str()][&method].is_object(),
            "{} {} is missing from the OpenAPI document",
            r.method,
            r.path
        );
    }
}

#[tokio::test]
async fn the_event_history_filters_by_stream_type_actor_and_time() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    app.admit("n-1", "hybrid", "192.0.2.11").await;
    app.admit("n-2", "compute", "192.0.2.12").await;
    let all = app.get("/v1/admin/events?limit=1000").await.body;
    let events = all["events"].as_array().unwrap();
    assert_eq!(events.len(), 3, "bootstrap token and two admissions");
    assert_eq!(all["nextAfter"], 3);
    assert_eq!(events[1]["payload"]["nodeId"], "n-1");
    assert_eq!(events[1]["prevHash"], events[0]["hash"]);
    let by_stream = app.get("/v1/admin/events?stream=member/n-2").await.body;
    assert_eq!(by_stream["events"].as_array().unwrap().len(), 1);
    let by_type = app
        .get("/v1/admin/events?type=MemberAdmitted&actor=user/admin")
        .await
        .body;
    assert_eq!(by_type["events"].as_array().unwrap().len(), 2);
    let second = events[2]["occurredAt"].as_str().unwrap();
    let from = app
        .get(&format!("/v1/admin/events?from={second}"))
        .await
        .body;
    assert_eq!(from["events"].as_array().unwrap().len(), 1);
    let to = app.get(&format!("/v1/admin/events?to={second}")).await.body;
    assert_eq!(to["events"].as_array().unwrap().len(), 2);
    let page = app.get("/v1/admin/events?after=1&limit=1").await.body;
    assert_eq!(page["events"][0]["position"], 2);
    assert_eq!(page["nextAfter"], 2);
    // A member's history: its stream's events, oldest first.
    app.post(
        "/v1/admin/cluster/members/n-1/join-complete",
        serde_json::json!({}),
    )
    .await;
    let h = app.get("/v1/admin/cluster/members/n-1/history").await.body;
    let types: Vec<&str> = h["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["MemberAdmitted", "MemberJoinCompleted"]);
    assert_eq!(h["events"][1]["streamVersion"], 2);
    let r = app.get("/v1/admin/cluster/members/n-9/history").await;
    assert_error_shape(&r, StatusCode::NOT_FOUND, "NOT_FOUND");
    let bad = app.get("/v1/admin/events?from=yesterday&limit=0").await;
    assert_error_shape(&bad, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(
        bad.body["fieldErrors"].as_array().unwrap().len(),
        2,
        "{}",
        bad.body
    );
}
