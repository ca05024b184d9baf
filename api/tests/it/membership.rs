//! Membership over HTTP, centred on the seed endpoint (join-failed).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use stratum_api::backoff::Backoff;
use stratum_api::raft::{AdapterError, Failure, RaftAdapter, RaftAdapters, RaftPeer, Removal};

use crate::support::{
    assert_error_shape, config, each_backend, spawn_app, spawn_with, Res, TestApp,
};

const MEMBERS: &str = "/v1/admin/cluster/members";

async fn generation(app: &TestApp) -> u64 {
    app.get("/v1/admin/cluster/membership").await.body["generation"]
        .as_u64()
        .unwrap()
}

/// `node` reports the generation it applied, as its agent does.
pub async fn report_applied(app: &TestApp, node: &str, generation: u64) -> Res {
    app.post(
        &format!("{MEMBERS}/{node}/applied-generation"),
        json!({ "generation": generation }),
    )
    .await
}

fn listed(peers: &Value, node_id: &str) -> bool {
    [
        "patroni",
        "openbao",
        "ovn",
        "keepalived",
        "vmstorage",
        "alertmanager",
    ]
    .iter()
    .any(|list| {
        peers[list]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["nodeId"] == node_id)
    })
}

/// Waits until a member's raft cleanup is recorded (within 30 s, as the
/// binary's tests wait: after a restart, the cleanup's lead may be taken
/// only at its next try, 5 s on).
pub async fn cleaned(app: &TestApp, node_id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        let m = app.get(&format!("{MEMBERS}/{node_id}")).await.body;
        if !m["raftCleanupAt"].is_null() {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the raft cleanup of {node_id} did not finish");
}

async fn count_events(app: &TestApp, stream: &str, event_type: &str) -> usize {
    app.svc
        .state
        .store
        .read_stream(stream)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.event_type == event_type)
        .count()
}

/// A founder and two joiners, one failing at join/raft-openbao, and one
/// member decommissioned.
pub async fn scenario(app: &TestApp) {
    app.admit("n-1", "hybrid", "192.0.2.11").await;
    assert_eq!(
        app.post(&format!("{MEMBERS}/n-1/join-complete"), json!({}))
            .await
            .status,
        200
    );
    app.admit("n-2", "hybrid", "192.0.2.12").await;
    let r = app
        .post(
            &format!("{MEMBERS}/n-2/join-progress"),
            json!({"step": "join/raft-patroni"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = app
        .post(
            &format!("{MEMBERS}/n-2/join-failed"),
            json!({"step": "join/raft-openbao", "error": "permission denied"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    app.admit("n-3", "hybrid", "192.0.2.13").await;
    assert_eq!(
        app.post(&format!("{MEMBERS}/n-3/join-complete"), json!({}))
            .await
            .status,
        200
    );
    app.admit("n-4", "storage", "192.0.2.14").await;
    assert_eq!(
        app.post(&format!("{MEMBERS}/n-4/join-complete"), json!({}))
            .await
            .status,
        200
    );
    let r = app
        .post(
            &format!("{MEMBERS}/n-4/decommission"),
            json!({"reason": "disk failed"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    cleaned(app, "n-2").await;
}

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

#[tokio::test]
async fn reporting_the_current_generation_clears_lagging_without_bumping_it() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    app.admit("n-1", "hybrid", "192.0.2.11").await;
    let g = generation(&app).await;
    assert_eq!(
        app.get(&format!("{MEMBERS}/n-1")).await.body["lagging"],
        true
    );
    let r = report_applied(&app, "n-1", g).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["lagging"], false);
    assert_eq!(generation(&app).await, g);
    let m = app.get("/v1/admin/cluster/membership").await.body;
    assert_eq!(m["lagging"], json!([]));
    let r = report_applied(&app, "n-1", g + 1).await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
}

#[tokio::test]
async fn a_decommissioned_member_stays_on_record_with_who_when_and_why() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        scenario(&app).await;
        let m = app.get(&format!("{MEMBERS}/n-4")).await.body;
        assert_eq!(
            m["state"], "decommissioned",
            "a storage member has no raft to leave"
        );
        assert_eq!(m["decommissionedBy"], "user/admin");
        assert_eq!(m["decommissionReason"], "disk failed");
        assert!(m["decommissionedAt"].is_string());
        let adm = app
            .get("/v1/admin/cluster/transport-admission/n-4")
            .await
            .body;
        assert_eq!(adm["admitted"], false);
        assert_eq!(adm["refusal"]["revokedBy"], "user/admin");
        assert_eq!(adm["refusal"]["revokedAt"], m["removalStartedAt"]);
        assert_eq!(
            m["removalStartedAt"], m["decommissionedAt"],
            "no raft to leave: one commit"
        );
        assert!(adm["refusal"]["reason"]
            .as_str()
            .unwrap()
            .contains("disk failed"));
        // After a restart too.
        drop(app);
        let app = spawn_app(&db).await;
        assert_eq!(
            app.get(&format!("{MEMBERS}/n-4")).await.body["state"],
            "decommissioned"
        );
        let unknown = app
            .get("/v1/admin/cluster/transport-admission/n-zz")
            .await
            .body;
        assert_eq!(unknown["admitted"], false);
    }
}

#[tokio::test]
async fn decommissioning_the_last_voters_is_refused_unless_forced() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    app.admit("n-1", "control", "192.0.2.11").await;
    app.post(&format!("{MEMBERS}/n-1/join-complete"), json!({}))
        .await;
    let r = app
        .post(
            &format!("{MEMBERS}/n-1/decommission"),
            json!({"reason": "x"}),
        )
        .await;
    assert_error_shape(&r, StatusCode::CONFLICT, "QUORUM_AT_RISK");
    assert_eq!(
        r.body["details"],
        json!({"votersBefore": 1, "votersAfter": 0})
    );
    let r = app
        .post(&format!("{MEMBERS}/n-1/decommission"), json!({}))
        .await;
    assert_eq!(r.body["fieldErrors"][0]["field"], "reason");
    let r = app
        .post(
            &format!("{MEMBERS}/n-1/decommission"),
            json!({"reason": "x", "force": true}),
        )
        .await;
    assert_eq!(r.body["state"], "removing", "{}", r.body);
}

#[tokio::test]
async fn as_of_answers_the_members_as_they_stood_after_each_position() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        scenario(&app).await;
        let head = app.head().await;
        for p in 1..=head {
            let rm = stratum_api::command::load(app.svc.state.store.clone(), Some(p))
                .await
                .unwrap();
            let expected: Vec<Value> = stratum_projections::member_records(&rm.state.membership)
                .into_iter()
                .map(|r| serde_json::to_value(r).unwrap())
                .collect();
            let got = app.get(&format!("{MEMBERS}?asOf={p}")).await;
            assert_eq!(got.status, 200, "{}", got.body);
            assert_eq!(got.body["items"], Value::Array(expected), "asOf={p}");
        }
        // Right after the last position, asOf equals the live read model.
        let live = app.get(MEMBERS).await.body;
        let at_head = app.get(&format!("{MEMBERS}?asOf={head}")).await.body;
        assert_eq!(live, at_head);
        // A position the log has not reached: no state stood there yet.
        let r = app.get(&format!("{MEMBERS}?asOf={}", head + 1)).await;
        assert_error_shape(&r, StatusCode::NOT_FOUND, "NOT_FOUND");
        let r = app.get(&format!("{MEMBERS}?asOf=twelve")).await;
        assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    }
}

/// A raft adapter that fails while told to, counting its calls.
#[derive(Default)]
struct Flaky {
    failing: AtomicBool,
    calls: AtomicUsize,
}

#[async_trait]
impl RaftAdapter for Flaky {
    fn name(&self) -> &str {
        "flaky-test-adapter"
    }

    async fn remove_peer(&self, _peer: &RaftPeer) -> Result<Removal, AdapterError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            Err(AdapterError::new(
                Failure::Refused,
                "openbao: 503 Service Unavailable",
            ))
        } else {
            Ok(Removal::AlreadyGone)
        }
    }
}

#[tokio::test]
async fn a_cleanup_interrupted_by_a_restart_finishes_after_it_and_removes_nothing_twice() {
    for db in each_backend().await {
        let flaky = Arc::new(Flaky::default());
        flaky.failing.store(true, Ordering::SeqCst);
        let cfg = stratum_api::service::ServiceConfig {
            adapters: RaftAdapters {
                openbao: flaky.clone(),
                ..Default::default()
            },
            backoff: Backoff {
                first: Duration::from_millis(20),
                max: Duration::from_millis(100),
            },
            ..config()
        };
        let app = spawn_with(&db, cfg.clone()).await;
        app.admit("n-1", "hybrid", "192.0.2.11").await;
        app.post(
            &format!("{MEMBERS}/n-1/join-progress"),
            json!({"step": "join/raft-patroni"}),
        )
        .await;
        app.post(
            &format!("{MEMBERS}/n-1/join-failed"),
            json!({"step": "join/raft-openbao", "error": "sealed"}),
        )
        .await;
        // Patroni's removal succeeds; OpenBao's keeps failing and is retried.
        for _ in 0..100 {
            if flaky.calls.load(Ordering::SeqCst) >= 3
                && count_events(&app, "member/n-1", "RaftPeerRemoved").await == 1
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            flaky.calls.load(Ordering::SeqCst) >= 3,
            "retried with backoff"
        );
        let m = app.get(&format!("{MEMBERS}/n-1")).await.body;
        assert_eq!(m["raftCleanupPending"], json!(["openbao"]), "{m}");
        assert!(m["raftCleanupAt"].is_null());
        drop(app);

        flaky.failing.store(false, Ordering::SeqCst);
        let app = spawn_with(&db, cfg).await;
        let m = cleaned(&app, "n-1").await;
        assert_eq!(m["raftCleanupPending"], json!([]));
        let events = app.svc.state.store.read_stream("member/n-1").await.unwrap();
        let removed: Vec<_> = events
            .iter()
            .filter(|e| e.event_type == "RaftPeerRemoved")
            .collect();
        assert_eq!(
            removed.len(),
            2,
            "{}: patroni and openbao, once each",
            db.backend
        );
        let failed_at = events
            .iter()
            .find(|e| e.event_type == "MemberJoinFailed")
            .unwrap()
            .position;
        assert!(removed.iter().all(|e| e.meta.causation == Some(failed_at)));
        assert_eq!(
            count_events(&app, "member/n-1", "RaftCleanupCompleted").await,
            1
        );
    }
}

#[tokio::test]
async fn the_peer_long_poll_answers_within_100ms_of_a_generation_change() {
    for db in each_backend().await {
        let app = Arc::new(spawn_app(&db).await);
        app.admit("n-1", "hybrid", "192.0.2.11").await;
        let g = generation(&app).await;
        let poll = {
            let app = app.clone();
            tokio::spawn(async move {
                let r = app
                    .get(&format!("/v1/admin/cluster/peers?after={g}&waitSeconds=30"))
                    .await;
                (r, std::time::Instant::now())
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!poll.is_finished(), "it waits while the generation is {g}");
        let changed = app
            .post(&format!("{MEMBERS}/n-1/join-complete"), json!({}))
            .await;
        let committed = std::time::Instant::now();
        assert_eq!(changed.status, 200);
        let (r, answered) = poll.await.unwrap();
        assert!(r.body["generation"].as_u64().unwrap() > g);
        let lag = answered.saturating_duration_since(committed);
        assert!(
            lag < Duration::from_millis(100),
            "{}: answered {lag:?} after the change",
            db.backend
        );
        // With nothing changing it answers after waitSeconds with the same generation.
        let started = std::time::Instant::now();
        let g2 = generation(&app).await;
        let r = app
            .get(&format!("/v1/admin/cluster/peers?after={g2}&waitSeconds=1"))
            .await;
        assert_eq!(r.body["generation"].as_u64().unwrap(), g2);
        assert!(started.elapsed() >= Duration::from_millis(900));
    }
}

/// A peer long-poll wakes only for what can change its answer or end its
/// caller's credential: commits that leave the generation and the tokens
/// alone (5,000 agents' applied generations, say) let every waiting agent
/// sleep; a token's issue wakes them, and revoking the caller's token ends
/// its wait at once with 401.
#[tokio::test]
async fn a_peer_long_poll_sleeps_through_applied_generations_and_ends_when_its_token_is_revoked() {
    for db in each_backend().await {
        let app = Arc::new(spawn_app(&db).await);
        app.admit("n-1", "hybrid", "192.0.2.11").await;
        app.admit("n-2", "hybrid", "192.0.2.12").await;
        let g = generation(&app).await;
        let bus = &app.svc.state.bus;
        let mut wakes = bus.wakes();
        wakes.borrow_and_update();
        let before = bus.published().state.position;
        for node in ["n-1", "n-2"] {
            let r = report_applied(&app, node, g).await;
            assert_eq!(r.status, 200, "{}: {}", db.backend, r.body);
        }
        assert!(
            bus.published().state.position > before,
            "{}: the reports were committed and published",
            db.backend
        );
        assert!(
            !wakes.has_changed().unwrap(),
            "{}: applied generations woke the long-polls",
            db.backend
        );
        let t = app
            .post(
                "/v1/admin/iam/tokens",
                json!({"principal": "node/n-1", "policies": ["NodeAgent"]}),
            )
            .await;
        assert_eq!(t.status, StatusCode::CREATED, "{}", t.body);
        assert!(
            wakes.has_changed().unwrap(),
            "{}: a token's issue wakes the long-polls",
            db.backend
        );
        let secret = t.body["token"].as_str().unwrap().to_owned();
        let id = t.body["id"].as_str().unwrap().to_owned();
        let poll = {
            let app = app.clone();
            tokio::spawn(async move {
                app.call_as(
                    Some(&secret),
                    Method::GET,
                    &format!("/v1/admin/cluster/peers?after={g}&waitSeconds=30"),
                    None,
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!poll.is_finished(), "{}: it waits", db.backend);
        let r = app
            .post(&format!("/v1/admin/iam/tokens/{id}/revoke"), json!({}))
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let r = tokio::time::timeout(Duration::from_secs(2), poll)
            .await
            .expect("revoking the token ended the wait")
            .unwrap();
        assert_error_shape(&r, StatusCode::UNAUTHORIZED, "UNAUTHENTICATED");
    }
}

/// What the raft cleanup and the tree's keeper wait on: the cleanup, for
/// publications that move the generation (a report of an applied
/// generation does not); the keeper, for events the writer folds in from
/// another process (this replica's own commits keep the tree). Each
/// commit woke both before: at 5,000 nodes, three looks through every
/// member and up to four reads of the database per commit.
#[tokio::test]
async fn the_raft_cleanup_and_the_trees_keeper_sleep_through_this_replicas_reports() {
    for db in each_backend().await {
        let a = spawn_app(&db).await;
        let b = spawn_app(&db).await;
        a.admit("n-1", "hybrid", "192.0.2.11").await;
        let bus = &a.svc.state.bus;
        // What B committed at start (its tokens, say) is folded in first.
        bus.reached(b.svc.state.bus.published().state.position)
            .await
            .unwrap();
        let mut generations = bus.generations();
        let mut others = bus.others_folded();
        generations.borrow_and_update();
        others.borrow_and_update();
        let r = report_applied(&a, "n-1", generation(&a).await).await;
        assert_eq!(r.status, 200, "{}: {}", db.backend, r.body);
        assert!(
            !generations.has_changed().unwrap(),
            "{}: a report woke the raft cleanup",
            db.backend
        );
        a.admit("n-2", "compute", "192.0.2.12").await;
        assert!(
            generations.has_changed().unwrap(),
            "{}: an admission moves the generation",
            db.backend
        );
        assert_eq!(
            generations.borrow_and_update().number,
            generation(&a).await,
            "{}",
            db.backend
        );
        assert!(
            !others.has_changed().unwrap(),
            "{}: this replica's own commits woke the tree's keeper",
            db.backend
        );
        // Another replica's commit, folded in here: both wake.
        b.admit("n-3", "compute", "192.0.2.13").await;
        bus.reached(b.svc.state.bus.published().state.position)
            .await
            .unwrap();
        assert!(
            others.has_changed().unwrap(),
            "{}: events another replica committed may lack their tree rows",
            db.backend
        );
        assert!(
            generations.has_changed().unwrap(),
            "{}: the other replica's admission moved the generation",
            db.backend
        );
    }
}

#[tokio::test]
async fn peer_lists_follow_roles_and_ordinals() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    app.admit("n-a", "hybrid", "192.0.2.11").await;
    app.admit("n-b", "compute", "192.0.2.12").await;
    app.admit("n-c", "control", "192.0.2.13").await;
    app.admit("n-d", "storage", "192.0.2.14").await;
    let p = app.get("/v1/admin/cluster/peers").await.body;
    let ids = |list: &str| -> Vec<String> {
        p[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["nodeId"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids("patroni"), ["n-a", "n-c"]);
    assert_eq!(ids("vmstorage"), ["n-a", "n-d"]);
    assert_eq!(ids("alertmanager"), ["n-a", "n-c"]);
    assert_eq!(p["keepalived"][0]["priority"], 254);
    assert_eq!(p["keepalived"][1]["priority"], 253);
    let r = app
        .call(
            Method::GET,
            "/v1/admin/cluster/peers?waitSeconds=61&after=0",
            None,
        )
        .await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
}

#[tokio::test]
async fn time_travel_through_snapshots_equals_a_replay_and_survives_a_bad_one() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        scenario(&app).await;
        let store = app.svc.state.store.clone();
        let head = app.head().await;
        assert!(store.snapshot_at_or_before(head).await.unwrap().is_none());
        for p in 1..=head {
            // A snapshot is kept whenever a read replayed 4 events or more.
            let via = stratum_api::command::state_at_with(store.clone(), p, 4)
                .await
                .unwrap();
            let truth = stratum_api::command::load(store.clone(), Some(p))
                .await
                .unwrap();
            assert_eq!(via.state, truth.state, "{} asOf={p}", db.backend);
            assert_eq!(via.all_rows(), truth.all_rows());
        }
        let (at, _) = store
            .snapshot_at_or_before(head)
            .await
            .unwrap()
            .expect("snapshots were kept");
        assert!(at > 4);
        // A snapshot that is not one (another format, damage) is ignored.
        store.put_snapshot(head, b"not a snapshot").await.unwrap();
        let via = stratum_api::command::state_at_with(store.clone(), head, 1_000)
            .await
            .unwrap();
        let truth = stratum_api::command::load(store.clone(), None)
            .await
            .unwrap();
        assert_eq!(via.state, truth.state, "{}", db.backend);
        // ...and replaced by a good one of its position, so pruning, which
        // keeps snapshots by position, never keeps a bad one in a good one's place.
        let (at, bytes) = store.snapshot_at_or_before(head).await.unwrap().unwrap();
        assert_eq!(at, head, "{}", db.backend);
        let replaced = stratum_projections::ReadModels::from_snapshot(&bytes)
            .expect("the bad snapshot was replaced");
        assert_eq!(replaced.state, truth.state, "{}", db.backend);
    }
}

/// The peer lists are rendered once per generation, and named by it and
/// the hash of its event (`reads::Rendered`): the read models every
/// long-poll is answered from know that hash from the start, after each
/// commit, through commits that leave the generation alone, and after a
/// restart.
#[tokio::test]
async fn the_published_read_models_know_the_hash_of_their_generations_event() {
    for db in each_backend().await {
        let hash_at = |app: &TestApp, p: u64| {
            let store = app.svc.state.store.clone();
            async move { store.read_after(p - 1, 1).await.unwrap()[0].hash }
        };
        let app = spawn_app(&db).await;
        app.admit("n-1", "hybrid", "192.0.2.11").await;
        app.admit("n-2", "hybrid", "192.0.2.12").await;
        let bus = &app.svc.state.bus;
        let g = generation(&app).await;
        let published = bus.published();
        assert_eq!(published.state.membership.generation, g);
        assert_eq!(
            published.generation_hash,
            Some(hash_at(&app, g).await),
            "{}: after a commit",
            db.backend
        );
        let r = report_applied(&app, "n-1", g).await;
        assert_eq!(r.status, 200, "{}: {}", db.backend, r.body);
        let published = bus.published();
        assert!(published.state.position > g);
        assert_eq!(
            published.generation_hash,
            Some(hash_at(&app, g).await),
            "{}: through a commit that leaves the generation alone",
            db.backend
        );
        drop(app);
        let app = spawn_app(&db).await;
        let published = app.svc.state.bus.published();
        assert_eq!(published.state.membership.generation, g);
        assert_eq!(
            published.generation_hash,
            Some(hash_at(&app, g).await),
            "{}: after a restart",
            db.backend
        );
    }
}
