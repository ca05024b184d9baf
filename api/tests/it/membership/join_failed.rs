//! The seed endpoint, join-failed: a joining member moved to failed and out
//! of every peer list, one failure recorded for concurrent calls, every bad
//! field named.

use super::*;

#[tokio::test]
async fn join_failed_moves_a_joining_member_to_failed_and_out_of_every_peer_list() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        app.admit("n-1", "hybrid", "192.0.2.11").await;
        app.post(&format!("{MEMBERS}/n-1/join-complete"), json!({}))
            .await;
        app.admit("n-msst0002", "hybrid", "192.0.2.12").await;
        app.post(
            &format!("{MEMBERS}/n-msst0002/join-progress"),
            json!({"step": "join/raft-patroni"}),
        )
        .await;
        let peers = app.get("/v1/admin/cluster/peers").await.body;
        assert!(listed(&peers, "n-msst0002"), "a joining member is listed");
        let before = generation(&app).await;

        let r = app
            .post(
                &format!("{MEMBERS}/n-msst0002/join-failed"),
                json!({"step": "join/raft-openbao", "error": "connection refused"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["state"], "failed");
        assert_eq!(r.body["failedStep"], "join/raft-openbao");
        assert_eq!(r.body["failedError"], "connection refused");
        assert!(r.headers.get("etag").is_some());
        let after = generation(&app).await;
        assert!(after > before, "the generation rises: {before} -> {after}");

        let peers = app.get("/v1/admin/cluster/peers").await.body;
        assert!(!listed(&peers, "n-msst0002"), "{peers}");
        assert!(listed(&peers, "n-1"));
        let adm = app
            .get("/v1/admin/cluster/transport-admission/n-msst0002")
            .await
            .body;
        assert_eq!(adm["admitted"], false, "{adm}");
        assert_eq!(adm["state"], "failed");

        let m = cleaned(&app, "n-msst0002").await;
        assert_eq!(m["raftCleanupPending"], json!([]));
        let removed: Vec<String> = app
            .svc
            .state
            .store
            .read_stream("member/n-msst0002")
            .await
            .unwrap()
            .iter()
            .filter(|e| e.event_type == "RaftPeerRemoved")
            .map(|e| e.meta.principal.clone())
            .collect();
        assert_eq!(
            removed.len(),
            2,
            "patroni (reached) and openbao (the failed step)"
        );
        assert!(removed.iter().all(|p| p == "stratum"));

        // Repeating the call changes nothing and appends nothing.
        let head = app.head().await;
        let again = app
            .post(
                &format!("{MEMBERS}/n-msst0002/join-failed"),
                json!({"step": "join/raft-ovn", "error": "other"}),
            )
            .await;
        assert_eq!(again.status, 200);
        assert_eq!(again.body["failedStep"], "join/raft-openbao");
        assert_eq!(app.head().await, head, "{}", db.backend);
        // Also for an active member.
        let active = app
            .post(
                &format!("{MEMBERS}/n-1/join-failed"),
                json!({"step": "join/x", "error": "y"}),
            )
            .await;
        assert_eq!(active.body["state"], "active");
        assert_eq!(app.head().await, head);
    }
}

#[tokio::test]
async fn sixteen_concurrent_join_failed_calls_record_one_failure() {
    for db in each_backend().await {
        let app = Arc::new(spawn_app(&db).await);
        app.admit("n-1", "hybrid", "192.0.2.11").await;
        let calls: Vec<_> = (0..16)
            .map(|i| {
                let app = app.clone();
                tokio::spawn(async move {
                    app.post(
                        &format!("{MEMBERS}/n-1/join-failed"),
                        json!({"step": "join/raft-openbao", "error": format!("attempt {i}")}),
                    )
                    .await
                })
            })
            .collect();
        for c in calls {
            let r = c.await.unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
            assert_eq!(r.body["state"], "failed");
        }
        assert_eq!(
            count_events(&app, "member/n-1", "MemberJoinFailed").await,
            1,
            "{}",
            db.backend
        );
    }
}

#[tokio::test]
async fn join_failed_names_every_bad_field_and_404s_an_unknown_node() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    app.admit("n-1", "hybrid", "192.0.2.11").await;
    let r = app
        .post(&format!("{MEMBERS}/n-1/join-failed"), json!({}))
        .await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    let fields: Vec<&str> = r.body["fieldErrors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["step", "error"]);
    let r = app
        .post(
            &format!("{MEMBERS}/n-1/join-failed"),
            json!({"step": "raft-openbao", "error": "two\nlines", "extra": 1}),
        )
        .await;
    let fields: Vec<&str> = r.body["fieldErrors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["extra", "step", "error"], "{}", r.body);
    let long = "x".repeat(2049);
    let r = app
        .post(
            &format!("{MEMBERS}/n-1/join-failed"),
            json!({"step": "join/a", "error": long}),
        )
        .await;
    assert_eq!(r.body["fieldErrors"][0]["field"], "error");
    let r = app
        .post(
            &format!("{MEMBERS}/n-nope/join-failed"),
            json!({"step": "join/a", "error": "b"}),
        )
        .await;
    assert_error_shape(&r, StatusCode::NOT_FOUND, "NOT_FOUND");
    assert_eq!(
        app.get(&format!("{MEMBERS}/n-1")).await.body["state"],
        "joining"
    );
}
