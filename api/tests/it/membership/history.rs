//! The members as they stood: `asOf`, time travel through snapshots, and the
//! hash of each generation's event.

use super::*;

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
