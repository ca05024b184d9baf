//! Decommissions: who, when and why stay on record, the last voters are kept
//! unless forced, and a raft cleanup a restart interrupted finishes after
//! it.

use super::*;

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
