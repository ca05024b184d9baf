//! `Idempotency-Key`: a retry answers the first response and appends
//! nothing, also after a restart; another body with the key is 422.

use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::support::{assert_error_shape, each_backend, spawn_app};

#[tokio::test]
async fn a_retried_post_answers_the_first_response_and_appends_nothing() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        let body = json!({"nodeId": "n-1", "role": "hybrid", "mgmtIp": "192.0.2.11"});
        let key = [("idempotency-key", "admit-n-1")];
        let first = app
            .call_with(
                Method::POST,
                "/v1/admin/cluster/members",
                Some(body.clone()),
                &key,
            )
            .await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
        let head = app.head().await;
        let again = app
            .call_with(
                Method::POST,
                "/v1/admin/cluster/members",
                Some(body.clone()),
                &key,
            )
            .await;
        assert_eq!(again.status, StatusCode::CREATED);
        assert_eq!(again.body, first.body);
        assert_eq!(again.headers["etag"], first.headers["etag"]);
        assert_eq!(again.headers["idempotent-replayed"], "true");
        assert_eq!(app.head().await, head, "{}", db.backend);

        // After a restart of the service.
        drop(app);
        let app = spawn_app(&db).await;
        let after = app
            .call_with(
                Method::POST,
                "/v1/admin/cluster/members",
                Some(body.clone()),
                &key,
            )
            .await;
        assert_eq!(after.status, StatusCode::CREATED);
        assert_eq!(after.body, first.body);
        assert_eq!(app.head().await, head, "{}", db.backend);

        // The same key with another body.
        let other = json!({"nodeId": "n-2", "role": "hybrid", "mgmtIp": "192.0.2.12"});
        let r = app
            .call_with(Method::POST, "/v1/admin/cluster/members", Some(other), &key)
            .await;
        assert_error_shape(
            &r,
            StatusCode::UNPROCESSABLE_ENTITY,
            "IDEMPOTENCY_KEY_REUSED",
        );
        assert_eq!(app.head().await, head);
        // Without a key, the same request is a new command (and refused).
        let r = app.post("/v1/admin/cluster/members", body).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    }
}

#[tokio::test]
async fn concurrent_requests_with_one_key_append_once() {
    for db in each_backend().await {
        let app = std::sync::Arc::new(spawn_app(&db).await);
        app.admit("n-1", "hybrid", "192.0.2.11").await;
        let head = app.head().await;
        let calls: Vec<_> = (0..8)
            .map(|_| {
                let app = app.clone();
                tokio::spawn(async move {
                    app.call_with(
                        Method::POST,
                        "/v1/admin/cluster/members/n-1/join-progress",
                        Some(json!({"step": "join/raft-patroni"})),
                        &[("idempotency-key", "k1")],
                    )
                    .await
                })
            })
            .collect();
        let mut bodies = Vec::new();
        for c in calls {
            let r = c.await.unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
            bodies.push(r.body);
        }
        assert!(bodies.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(app.head().await, head + 1, "{}", db.backend);
    }
}

#[tokio::test]
async fn a_refusal_is_not_kept_so_a_retry_with_the_key_is_decided_again() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    for (n, ip) in [("n-1", "192.0.2.11"), ("n-2", "192.0.2.12")] {
        app.admit(n, "hybrid", ip).await;
        app.post(
            &format!("/v1/admin/cluster/members/{n}/join-complete"),
            json!({}),
        )
        .await;
    }
    let key = [("idempotency-key", "decommission-n-1")];
    let body = json!({"reason": "disk failed"});
    let path = "/v1/admin/cluster/members/n-1/decommission";
    let r = app
        .call_with(Method::POST, path, Some(body.clone()), &key)
        .await;
    assert_error_shape(&r, StatusCode::CONFLICT, "QUORUM_AT_RISK");
    // The cluster grows; the same request with the same key now goes through.
    app.admit("n-3", "hybrid", "192.0.2.13").await;
    app.post("/v1/admin/cluster/members/n-3/join-complete", json!({}))
        .await;
    let r = app
        .call_with(Method::POST, path, Some(body.clone()), &key)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["state"], "removing");
    // And that answer is kept.
    let again = app.call_with(Method::POST, path, Some(body), &key).await;
    assert_eq!(again.headers["idempotent-replayed"], "true");
}

/// A change that changes nothing, sent with a new key, is answered as
/// itself, not as a replay of its own kept answer; a retry with the key
/// is the replay. (A command route's gate admits the caller against the
/// read models in memory: an answer the writer decided at a commit the
/// log backs is sent as it is, never decided a second time.)
#[tokio::test]
async fn a_change_that_changes_nothing_is_answered_as_itself_then_replayed() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        app.admit("n-1", "hybrid", "192.0.2.11").await;
        let path = "/v1/admin/cluster/members/n-1/join-progress";
        let step = json!({"step": "join/openbao"});
        let r = app.post(path, step.clone()).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let head = app.head().await;
        let key = [("idempotency-key", "progress-again")];
        let first = app
            .call_with(Method::POST, path, Some(step.clone()), &key)
            .await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.body);
        assert_eq!(first.body["joinStep"], "join/openbao");
        assert!(
            !first.headers.contains_key("idempotent-replayed"),
            "{}: {:?}",
            db.backend,
            first.headers
        );
        let again = app.call_with(Method::POST, path, Some(step), &key).await;
        assert_eq!(again.headers["idempotent-replayed"], "true");
        assert_eq!(again.body, first.body);
        assert_eq!(app.head().await, head, "{}", db.backend);
    }
}
