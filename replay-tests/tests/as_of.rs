//! Time travel: for every position of a recorded log, the API's `asOf`
//! answers equal a replay of the log up to that position.

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::Value;
use stratum_api::service::{self, ServiceConfig};
use stratum_projections::{member_records, membership_summary, peers};
use stratum_replay_tests::{read_log, replay, root};
use tower::ServiceExt;

/// The recorded log was made with this bootstrap token (see the record example).
const TOKEN: &str = "recorded-log-token";

async fn get(app: &axum::Router, path: &str) -> Value {
    let req = Request::get(path)
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), 200, "{path}");
    serde_json::from_slice(&res.into_body().collect().await.unwrap().to_bytes()).unwrap()
}

/// The service on a database holding the recorded log `name`, imported as
/// `stratum events import` does.
async fn serve_log(db: &stratum_api::testing::TestDb, name: &str) -> service::Service {
    let store = stratum_store::connect(&db.url).await.unwrap();
    let path = root().join(format!("logs/{name}.jsonl"));
    stratum_api::cli::import(store.clone(), &path)
        .await
        .unwrap();
    service::start(store, ServiceConfig::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn as_of_every_position_equals_a_replay_to_it() {
    let events = read_log(&root().join("logs/membership.postcard")).unwrap();
    for db in stratum_api::testing::each_backend().await {
        let svc = serve_log(&db, "membership").await;
        assert!(
            svc.generated_token.is_none(),
            "a non-empty log is never bootstrapped"
        );
        let app = stratum_api::http::app(svc.state.clone());
        for p in 1..=events.len() {
            let at = replay(&events[..p]);
            let m = &at.state.membership;
            let records = member_records(m);
            let members = get(
                &app,
                &format!("/v1/admin/cluster/members?asOf={p}&limit=1000"),
            )
            .await;
            assert_eq!(
                members["items"],
                serde_json::to_value(&records).unwrap(),
                "{} asOf={p}",
                db.backend
            );
            let peers_at = get(&app, &format!("/v1/admin/cluster/peers?asOf={p}")).await;
            assert_eq!(
                peers_at,
                serde_json::to_value(peers(m)).unwrap(),
                "asOf={p}"
            );
            let summary = get(&app, &format!("/v1/admin/cluster/membership?asOf={p}")).await;
            let mut expected = serde_json::to_value(membership_summary(m)).unwrap();
            expected["digest"] = Value::String(at.membership_digest());
            assert_eq!(summary, expected, "asOf={p}");
        }
    }
}

#[tokio::test]
async fn upgrades_as_of_every_position_equal_a_replay_to_it() {
    let events = read_log(&root().join("logs/upgrade-rollback.postcard")).unwrap();
    for db in stratum_api::testing::each_backend().await {
        let svc = serve_log(&db, "upgrade-rollback").await;
        let app = stratum_api::http::app(svc.state.clone());
        for p in 1..=events.len() {
            let expected = stratum_replay_tests::render(&replay(&events[..p]));
            let upgrades = get(&app, &format!("/v1/admin/upgrades?asOf={p}&limit=1000")).await;
            assert_eq!(
                upgrades["items"], expected["upgrades"],
                "{} asOf={p}",
                db.backend
            );
            for u in expected["upgrades"].as_array().unwrap() {
                let id = u["id"].as_str().unwrap();
                let one = get(&app, &format!("/v1/admin/upgrades/{id}?asOf={p}")).await;
                assert_eq!(&one, u, "{} {id} asOf={p}", db.backend);
            }
        }
        // Now: the read model table answers what the full replay renders.
        let expected = stratum_replay_tests::render(&replay(&events));
        let now = get(&app, "/v1/admin/upgrades?limit=1000").await;
        assert_eq!(now["items"], expected["upgrades"], "{}", db.backend);
        assert_eq!(
            get(&app, "/v1/admin/cluster/release").await,
            expected["runningRelease"]
        );
    }
}
