//! Peer lists and their long-poll: applied generations, an answer within 100
//! ms of a change, what sleeps through a replica's reports, roles and
//! ordinals.

use super::*;

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

/// An app with two members admitted, and its generation then.
async fn two_members(db: &stratum_api::testing::TestDb) -> (Arc<TestApp>, u64) {
    let app = Arc::new(spawn_app(db).await);
    app.admit("n-1", "hybrid", "192.0.2.11").await;
    app.admit("n-2", "hybrid", "192.0.2.12").await;
    let g = generation(&app).await;
    (app, g)
}

/// A waiting peer long-poll holds no read models: it sleeps through the
/// commits that move neither the generation nor the tokens, and the read
/// models it arrived at are freed as soon as a newer version is published,
/// not when it is answered. (5,000 agents waiting between two changes kept
/// a version per commit of their reports, and freed them all on the way of
/// the next change's answers.)
#[tokio::test]
async fn a_waiting_peer_long_poll_holds_no_read_models() {
    for db in each_backend().await {
        let (app, g) = two_members(&db).await;
        let bus = &app.svc.state.bus;
        let watchers = app.svc.state.watchers.clone();
        let free = watchers.available_permits();
        let poll = {
            let app = app.clone();
            tokio::spawn(async move {
                app.get(&format!("/v1/admin/cluster/peers?after={g}&waitSeconds=30"))
                    .await
            })
        };
        // Waiting once it holds a watcher's place (its gate is behind it).
        let started = std::time::Instant::now();
        while watchers.available_permits() == free {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{}: the long-poll never waited",
                db.backend
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!poll.is_finished(), "{}: it waits", db.backend);
        for node in ["n-1", "n-2"] {
            let arrived_at = Arc::downgrade(&bus.published());
            let r = report_applied(&app, node, g).await;
            assert_eq!(r.status, 200, "{}: {}", db.backend, r.body);
            assert!(
                arrived_at.upgrade().is_none(),
                "{}: the read models before {node}'s report outlived it, held by the long-poll",
                db.backend
            );
        }
        assert!(
            !poll.is_finished(),
            "{}: it sleeps through reports",
            db.backend
        );
        let r = app
            .post(&format!("{MEMBERS}/n-1/join-complete"), json!({}))
            .await;
        assert_eq!(r.status, 200, "{}: {}", db.backend, r.body);
        let r = tokio::time::timeout(Duration::from_secs(2), poll)
            .await
            .expect("the change answers the long-poll")
            .unwrap();
        assert_eq!(r.status, 200, "{}: {}", db.backend, r.body);
        assert!(r.body["generation"].as_u64().unwrap() > g, "{}", db.backend);
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
        let (app, g) = two_members(&db).await;
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
