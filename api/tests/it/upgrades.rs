//! Upgrades over HTTP (SPEC §5): a three-node upgrade driven by node
//! reports only, the write freeze, cancel (seed 004), a restart in the
//! middle of rolling, and signed releases.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use stratum_api::command::{CommandBus, CommandRequest};
use stratum_domain::upgrade::UpgradeCommand;
use stratum_domain::Command;

use crate::support::{assert_error_shape, config, each_backend, spawn_app, spawn_with, TestApp};

const UPGRADES: &str = "/v1/admin/upgrades";
const NODES: [&str; 3] = ["n-a", "n-b", "n-c"];

fn manifest(version: &str) -> Value {
    stratum_domain::testing::manifest(version, "13.1", None)
}

/// Three active, current control members; releases 1.0.0 (running) and
/// 1.1.0 registered.
pub async fn cluster(app: &TestApp) {
    for (i, n) in NODES.iter().enumerate() {
        app.admit(n, "control", &format!("192.0.2.{}", 21 + i))
            .await;
        let r = app
            .post(
                &format!("/v1/admin/cluster/members/{n}/join-complete"),
                json!({}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    }
    let generation = app.get("/v1/admin/cluster/membership").await.body["generation"]
        .as_u64()
        .unwrap();
    for n in NODES {
        let r = app
            .post(
                &format!("/v1/admin/cluster/members/{n}/applied-generation"),
                json!({ "generation": generation }),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    }
    for v in ["1.0.0", "1.1.0"] {
        let r = app.post("/v1/admin/releases", manifest(v)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    }
    let r = app
        .call(
            Method::PUT,
            "/v1/admin/cluster/release",
            Some(json!({"version": "1.0.0"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
}

/// Polls the upgrade until `done(record)` holds.
async fn until(app: &TestApp, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..400 {
        let u = app.get(&format!("{UPGRADES}/{id}")).await.body;
        if done(&u) {
            return u;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let u = app.get(&format!("{UPGRADES}/{id}")).await.body;
    panic!("upgrade {id} never reached {what}: {u:#}");
}

pub async fn until_state(app: &TestApp, id: &str, state: &str) -> Value {
    until(app, id, state, |u| u["state"] == state).await
}

async fn report(
    app: &TestApp,
    id: &str,
    node: &str,
    phase: &str,
    state: &str,
) -> crate::support::Res {
    app.post(
        &format!("{UPGRADES}/{id}/nodes/{node}/report"),
        json!({"phase": phase, "state": state, "message": format!("{phase} {state} on {node}")}),
    )
    .await
}

pub async fn create(app: &TestApp, body: Value) -> String {
    let r = app.post(UPGRADES, body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_owned();
    assert!(
        stratum_domain::upgrade::valid_upgrade_id(&id),
        "upg- and 10 of [0-9a-z]: {id}"
    );
    assert_eq!(r.body["fromRelease"], "1.0.0");
    assert_eq!(r.body["kind"], "", "no kind before the prechecks");
    id
}

/// Drives an upgrade from creation to `rolling`, checking the way there.
async fn to_rolling(app: &TestApp) -> String {
    let id = create(
        app,
        json!({"targetRelease": "1.1.0", "backup": {"location": "node"}}),
    )
    .await;
    let u = until_state(app, &id, "fetching").await;
    assert_eq!(u["writeFreeze"], false);
    assert_eq!(u["kind"], "containers");
    assert!(u["plan"]["prechecks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["status"] == "pass"));
    assert_eq!(
        u["waitingFor"], "Waiting for n-a, n-b, n-c to report fetch done.",
        "{u:#}"
    );
    for n in NODES {
        let r = report(app, &id, n, "fetch", "done").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    }
    let u = until_state(app, &id, "backing_up").await;
    assert_eq!(u["writeFreeze"], true);
    assert!(
        u["waitingFor"].as_str().unwrap().contains("backup"),
        "{u:#}"
    );
    id
}

#[tokio::test]
async fn a_three_node_upgrade_runs_from_planned_to_done_on_node_reports_alone() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        cluster(&app).await;
        let id = to_rolling(&app).await;

        // The write freeze: changes wait, with who and why; reads work.
        let r = app
            .post(
                "/v1/admin/cluster/members",
                json!({"nodeId": "n-d", "role": "compute", "mgmtIp": "192.0.2.40"}),
            )
            .await;
        assert_error_shape(&r, StatusCode::SERVICE_UNAVAILABLE, "UPGRADE_IN_PROGRESS");
        assert_eq!(r.body["details"]["upgradeId"], id.as_str());
        assert_eq!(r.body["details"]["state"], "backing_up");
        assert_eq!(
            r.headers["retry-after"], "60",
            "waiting for the backup report"
        );
        assert_eq!(
            app.get("/v1/admin/cluster/members").await.status,
            StatusCode::OK
        );

        // Cancel is refused from the backup on (seed 004).
        let r = app
            .post(&format!("{UPGRADES}/{id}/cancel"), json!({}))
            .await;
        assert_error_shape(&r, StatusCode::CONFLICT, "UPGRADE_NOT_CANCELABLE");
        assert_eq!(r.body["details"]["state"], "backing_up");

        let r = app
            .post(
                &format!("{UPGRADES}/{id}/backup"),
                json!({"location": "node", "bundle": "/var/lib/stratum/backup.tar", "encrypted": false}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        for (i, n) in NODES.iter().enumerate() {
            let u = until(&app, &id, "the next roll turn", |u| {
                u["state"] == "rolling"
                    && u["waitingFor"]
                        .as_str()
                        .is_some_and(|w| w.starts_with(&format!("Waiting for {n} ")))
            })
            .await;
            assert_eq!(u["writeFreeze"], true);
            assert!(
                u["waitingFor"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("node {} of 3", i + 1)),
                "{u:#}"
            );
            if let Some(later) = NODES.get(i + 1) {
                let r = report(&app, &id, later, "roll", "done").await;
                assert_error_shape(&r, StatusCode::CONFLICT, "NOT_NODE_TURN");
                assert_eq!(r.body["details"]["turn"], *n);
            }
            let r = report(&app, &id, n, "roll", "done").await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        }
        let u = until_state(&app, &id, "verifying").await;
        assert_eq!(u["writeFreeze"], true);
        for n in NODES {
            assert_eq!(
                report(&app, &id, n, "verify", "done").await.status,
                StatusCode::OK
            );
        }
        let u = until_state(&app, &id, "done").await;
        assert_eq!(u["writeFreeze"], false);
        assert!(u["waitingFor"].as_str().unwrap().contains("1.1.0"));
        let running = app.get("/v1/admin/cluster/release").await;
        assert_eq!(running.body["version"], "1.1.0", "{}", running.body);
        assert_eq!(running.body["setBy"], id.as_str());
        // The freeze is over: changes work again.
        app.admit("n-d", "compute", "192.0.2.40").await;

        // The audit trail: every step is an event of the upgrade's stream.
        let history = app.get(&format!("{UPGRADES}/{id}/history")).await.body;
        let types: Vec<&str> = history["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(types.first(), Some(&"UpgradePlanned"), "{types:?}");
        assert_eq!(types.last(), Some(&"UpgradeCompleted"), "{types:?}");
        assert_eq!(
            types
                .iter()
                .filter(|t| **t == "UpgradeNodeTurnStarted")
                .count(),
            3
        );
        assert_eq!(
            types
                .iter()
                .filter(|t| **t == "UpgradeNodeReported")
                .count(),
            9
        );
    }
}

#[tokio::test]
async fn cancel_until_the_backup_ends_the_upgrade_and_keeps_the_record() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        cluster(&app).await;
        let id = create(
            &app,
            json!({"targetRelease": "1.1.0", "mode": "stage-only"}),
        )
        .await;
        until_state(&app, &id, "fetching").await;
        for n in NODES {
            report(&app, &id, n, "fetch", "done").await;
        }
        let u = until_state(&app, &id, "staged").await;
        assert_eq!(u["writeFreeze"], false);
        assert!(u["waitingFor"].as_str().unwrap().contains("apply"), "{u:#}");

        let r = app
            .post(&format!("{UPGRADES}/{id}/cancel"), json!({}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["state"], "canceled");
        assert_eq!(r.body["canceledBy"], "user/admin");
        // What the nodes fetched stays: their fetch reports are on record.
        assert!(r.body["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["phase"] == "fetch" && n["state"] == "done"));
        let version = r.body["version"].clone();
        // Canceling again answers the record unchanged.
        let again = app
            .post(&format!("{UPGRADES}/{id}/cancel"), json!({}))
            .await;
        assert_eq!(again.status, StatusCode::OK);
        assert_eq!(again.body["version"], version);
        let missing = app
            .post(&format!("{UPGRADES}/upg-0000000000/cancel"), json!({}))
            .await;
        assert_error_shape(&missing, StatusCode::NOT_FOUND, "NOT_FOUND");
        // One at a time: a new upgrade may start once this one ended. What
        // the nodes fetched for the canceled one stays: its fetch starts
        // done (stage-only, so it stops in staged, before the freeze).
        let again = create(
            &app,
            json!({"targetRelease": "1.1.0", "mode": "stage-only"}),
        )
        .await;
        let u = app.get(&format!("{UPGRADES}/{again}")).await.body;
        assert!(
            u["plan"]["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n["fetched"] == true),
            "{u:#}"
        );
        let second = app.post(UPGRADES, json!({"targetRelease": "1.1.0"})).await;
        assert_error_shape(&second, StatusCode::CONFLICT, "UPGRADE_ALREADY_ACTIVE");
    }
}

#[tokio::test]
async fn a_restart_in_the_middle_of_rolling_finishes_the_upgrade_from_the_log() {
    for db in each_backend().await {
        let id = {
            let app = spawn_app(&db).await;
            cluster(&app).await;
            let id = to_rolling(&app).await;
            app.post(
                &format!("{UPGRADES}/{id}/backup"),
                json!({"location": "node", "bundle": "/backup.tar", "encrypted": true}),
            )
            .await;
            until(&app, &id, "n-a's turn", |u| u["state"] == "rolling").await;
            assert_eq!(
                report(&app, &id, "n-a", "roll", "done").await.status,
                StatusCode::OK
            );
            until(&app, &id, "n-b's turn", |u| {
                u["waitingFor"]
                    .as_str()
                    .unwrap()
                    .starts_with("Waiting for n-b ")
            })
            .await;
            id
        };
        // The service is down. n-b's report lands through a bare write path
        // with no driver running, so when the service starts again a driver
        // step (n-c's turn) is due and only the log says so.
        roll_done_elsewhere(&db, &id, "n-b").await;
        let app = spawn_with(&db, config()).await;
        until(&app, &id, "n-c's turn after the restart", |u| {
            u["waitingFor"]
                .as_str()
                .unwrap()
                .starts_with("Waiting for n-c ")
        })
        .await;
        // Another process (a replica) records n-c's roll while this service
        // runs: its driver notices the log moved and takes the step.
        roll_done_elsewhere(&db, &id, "n-c").await;
        until_state(&app, &id, "verifying").await;
        for n in NODES {
            report(&app, &id, n, "verify", "done").await;
        }
        until_state(&app, &id, "done").await;
        assert_eq!(
            app.get("/v1/admin/cluster/release").await.body["version"],
            "1.1.0"
        );
    }
}

/// Records a node's roll done through a write path of its own, as another
/// process (with no upgrade driver) would.
async fn roll_done_elsewhere(db: &crate::support::TestDb, id: &str, node: &str) {
    let store = stratum_store::connect(&db.url).await.unwrap();
    let bus = CommandBus::start(store).await.unwrap();
    let reply = bus
        .execute(CommandRequest::new(
            Command::Upgrade(UpgradeCommand::ReportNode {
                upgrade_id: id.to_owned(),
                node_id: node.into(),
                phase: Some("roll".into()),
                state: Some("done".into()),
                message: None,
                host_steps: None,
                rebooted_at: None,
                instances: None,
                host_state: None,
                running_instances: None,
            }),
            format!("node/{node}"),
        ))
        .await
        .unwrap();
    assert!(
        matches!(reply, stratum_api::command::Outcome::Committed(_)),
        "{reply:?}"
    );
}

#[tokio::test]
async fn a_release_needs_a_matching_signature_by_a_trusted_key() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    // The signature does not match the manifest.
    let mut tampered = manifest("2.0.0");
    tampered["os"]["version"] = json!("14.0");
    let r = app.post("/v1/admin/releases", tampered).await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(r.body["fieldErrors"][0]["field"], "signature", "{}", r.body);
    // Signed by a key nobody trusts.
    let mut m = manifest("2.0.0");
    let stranger = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    stratum_domain::release::sign(&mut m, "stranger", &stranger);
    let r = app.post("/v1/admin/releases", m).await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(
        r.body["fieldErrors"][0]["field"], "signature.keyId",
        "{}",
        r.body
    );
    // Signed by a trusted key's id but another key.
    let mut forged = manifest("2.0.0");
    stratum_domain::release::sign(
        &mut forged,
        stratum_domain::testing::RELEASE_KEY_ID,
        &stranger,
    );
    let r = app.post("/v1/admin/releases", forged).await;
    assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    assert_eq!(r.body["fieldErrors"][0]["field"], "signature", "{}", r.body);
    // Nothing was registered.
    assert_error_shape(
        &app.get("/v1/admin/releases/2.0.0").await,
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
    );
    assert_eq!(
        app.head().await,
        1,
        "only the bootstrap token is on the log"
    );
    // The genuine one is registered, shown as signed, and registering it
    // again changes nothing.
    let r = app.post("/v1/admin/releases", manifest("2.0.0")).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(
        r.body["signature"]["keyId"],
        stratum_domain::testing::RELEASE_KEY_ID
    );
    let head = app.head().await;
    assert_eq!(
        app.post("/v1/admin/releases", manifest("2.0.0"))
            .await
            .status,
        StatusCode::CREATED
    );
    assert_eq!(app.head().await, head);
    let list = app.get("/v1/admin/releases").await.body;
    assert_eq!(list["items"][0]["version"], "2.0.0");
}

#[tokio::test]
async fn an_upgrade_that_skips_a_required_stop_fails_its_upgrade_path_precheck() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    cluster(&app).await;
    let mut m = manifest("1.2.0");
    m["requiredStops"] = json!(["1.1.0"]);
    stratum_domain::testing::resign(&mut m);
    assert_eq!(
        app.post("/v1/admin/releases", m).await.status,
        StatusCode::CREATED
    );
    let id = create(&app, json!({"targetRelease": "1.2.0"})).await;
    let u = until_state(&app, &id, "failed").await;
    let path = u["plan"]["prechecks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "upgrade-path")
        .unwrap()
        .clone();
    assert_eq!(path["status"], "fail", "{u:#}");
    let msg = path["message"].as_str().unwrap();
    assert!(msg.contains("upgrade from 1.0.0 to 1.1.0 first"), "{msg}");
    assert!(
        u["failureReason"]
            .as_str()
            .unwrap()
            .contains("upgrade-path"),
        "{u:#}"
    );
    // Its findings are acknowledged once read; the cluster runs what it ran.
    let r = app
        .post(&format!("{UPGRADES}/{id}/acknowledge"), json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body["acknowledgedAt"].is_string());
    assert_eq!(
        app.get("/v1/admin/cluster/release").await.body["version"],
        "1.0.0"
    );
}

#[tokio::test]
async fn the_running_release_is_set_once_and_upgrades_list_as_of_a_position() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    cluster(&app).await;
    let r = app
        .call(
            Method::PUT,
            "/v1/admin/cluster/release",
            Some(json!({"version": "1.1.0"})),
        )
        .await;
    assert_error_shape(&r, StatusCode::CONFLICT, "RUNNING_RELEASE_ALREADY_SET");
    let before = app.head().await;
    let id = create(&app, json!({"targetRelease": "1.1.0"})).await;
    let list = app.get(UPGRADES).await.body;
    assert_eq!(list["items"][0]["id"], id.as_str());
    let then = app.get(&format!("{UPGRADES}?asOf={before}")).await.body;
    assert_eq!(then["items"], json!([]), "no upgrade existed then");
    let r = app
        .get(&format!("{UPGRADES}/{id}?asOf={}", before + 1))
        .await;
    assert_eq!(r.body["state"], "planned", "{}", r.body);
}

/// Runs an upgrade in `backing_up` through to `done` on node reports.
async fn backing_up_to_done(app: &TestApp, id: &str) {
    let r = app
        .post(
            &format!("{UPGRADES}/{id}/backup"),
            json!({"location": "node", "bundle": "/var/lib/stratum/backup.tar", "encrypted": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    for n in NODES {
        until(app, id, &format!("{n}'s turn"), |u| {
            u["waitingFor"]
                .as_str()
                .is_some_and(|w| w.starts_with(&format!("Waiting for {n} ")))
        })
        .await;
        assert_eq!(
            report(app, id, n, "roll", "done").await.status,
            StatusCode::OK
        );
    }
    until_state(app, id, "verifying").await;
    for n in NODES {
        assert_eq!(
            report(app, id, n, "verify", "done").await.status,
            StatusCode::OK
        );
    }
    until_state(app, id, "done").await;
}

#[tokio::test]
async fn a_done_upgrade_is_rolled_back_with_its_backup_restored() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    cluster(&app).await;
    let id = to_rolling(&app).await;
    backing_up_to_done(&app, &id).await;
    assert_eq!(
        app.get("/v1/admin/cluster/release").await.body["version"],
        "1.1.0"
    );

    let r = app
        .post(
            &format!("{UPGRADES}/{id}/rollback"),
            json!({"restoreBackup": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let back = r.body["id"].as_str().unwrap().to_owned();
    assert_eq!(r.body["rollbackOf"], id.as_str());
    assert_eq!(r.body["targetRelease"], "1.0.0");
    assert_eq!(r.body["fromRelease"], "1.1.0");
    assert_eq!(r.body["restoreBackup"], true);
    for n in r.body["nodes"].as_array().unwrap() {
        assert_eq!(n["hostSteps"][0]["name"], "restore", "{n}");
    }
    assert_eq!(
        app.get(&format!("{UPGRADES}/{id}")).await.body["rolledBackBy"],
        back.as_str()
    );
    // Twice is refused while the first rollback stands.
    let r = app
        .post(
            &format!("{UPGRADES}/{id}/rollback"),
            json!({"restoreBackup": false}),
        )
        .await;
    assert_error_shape(&r, StatusCode::CONFLICT, "UPGRADE_STATE_CONFLICT");
    assert!(r.body["message"].as_str().unwrap().contains(&back));

    // The rollback runs like any upgrade; its version precheck passes
    // although it goes back.
    let u = until_state(&app, &back, "fetching").await;
    assert!(
        u["plan"]["prechecks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["status"] == "pass"),
        "{u:#}"
    );
    for n in NODES {
        report(&app, &back, n, "fetch", "done").await;
    }
    until_state(&app, &back, "backing_up").await;
    backing_up_to_done(&app, &back).await;
    assert_eq!(
        app.get("/v1/admin/cluster/release").await.body["version"],
        "1.0.0"
    );
}
