//! The upgrade record as seed 004 describes it, over HTTP on both
//! backends: every field with its type, a host helper's full report, node
//! facts that fail a precheck, and the reboot alarm after 7 days on a
//! clock the test moves.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use stratum_api::command::Clock;
use stratum_domain::release::sign;
use stratum_domain::testing::{release_key, RELEASE_KEY_ID};

use crate::support::{config, each_backend, spawn_with, TestApp};
use crate::upgrades::{cluster, until_state};

const UPGRADES: &str = "/v1/admin/upgrades";
const NODES: [&str; 3] = ["n-a", "n-b", "n-c"];

/// A signed manifest of `version` with `extra` fields merged in.
fn manifest_with(version: &str, os: &str, extra: Value) -> Value {
    let mut m = stratum_domain::testing::manifest(version, os, None);
    for (k, v) in extra.as_object().unwrap() {
        m[k] = v.clone();
    }
    sign(&mut m, RELEASE_KEY_ID, &release_key());
    m
}

async fn register(app: &TestApp, m: Value) {
    let r = app.post("/v1/admin/releases", m).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
}

async fn report(app: &TestApp, id: &str, node: &str, body: Value) -> Value {
    let r = app
        .post(&format!("{UPGRADES}/{id}/nodes/{node}/report"), body)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body
}

async fn until(app: &TestApp, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..400 {
        let v = app.get(path).await.body;
        if done(&v) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{path} never showed {what}: {:#}", app.get(path).await.body);
}

fn is_str(v: &Value) -> bool {
    v.is_string()
}
fn is_opt_str(v: &Value) -> bool {
    v.is_string() || v.is_null()
}

/// A clock the test moves forward, shared with the service.
#[derive(Clone, Default)]
struct TestClock(Arc<AtomicI64>);

impl TestClock {
    fn clock(&self) -> Clock {
        let offset = self.0.clone();
        Clock::from_fn(move || {
            chrono::Utc::now() + chrono::Duration::seconds(offset.load(Ordering::SeqCst))
        })
    }

    fn advance(&self, by: chrono::Duration) {
        self.0.fetch_add(by.num_seconds(), Ordering::SeqCst);
    }
}

async fn app_with_clock(db: &crate::support::TestDb, clock: &TestClock) -> TestApp {
    let mut cfg = config();
    cfg.clock = clock.clock();
    cfg.driver_tick = Some(Duration::from_millis(50));
    spawn_with(db, cfg).await
}

/// A stage-only upgrade to an OS release that fixes a CVE, staged.
async fn staged_security_upgrade(app: &TestApp) -> String {
    cluster(app).await;
    register(
        app,
        manifest_with("1.2.0", "14.0", json!({"cves": ["CVE-2026-1234"], "os": {"version": "14.0", "kernel": "6.13", "kernelArgs": [], "abSlots": true}})),
    )
    .await;
    let r = app
        .post(
            UPGRADES,
            json!({"targetRelease": "1.2.0", "mode": "stage-only", "backup": {"location": "node"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_owned();
    until_state(app, &id, "fetching").await;
    for n in NODES {
        report(app, &id, n, json!({"phase": "fetch", "state": "done"})).await;
    }
    until_state(app, &id, "staged").await;
    id
}

#[tokio::test]
async fn the_record_has_every_field_of_seed_004_with_its_type() {
    for db in each_backend().await {
        let clock = TestClock::default();
        let app = app_with_clock(&db, &clock).await;
        let id = staged_security_upgrade(&app).await;
        let u = app.get(&format!("{UPGRADES}/{id}")).await.body;
        for (field, ok) in [
            ("id", is_str as fn(&Value) -> bool),
            ("mode", is_str),
            ("state", is_str),
            ("kind", is_str),
            ("targetRelease", is_str),
            ("fromRelease", is_str),
            ("waitingFor", is_str),
            ("failureReason", is_opt_str),
            ("lastRestartAt", is_opt_str),
            ("rollbackOf", is_opt_str),
            ("rolledBackBy", is_opt_str),
            ("acknowledgedAt", is_opt_str),
            ("createdBy", is_str),
            ("createdAt", is_str),
            ("canceledBy", is_opt_str),
            ("canceledAt", is_opt_str),
        ] {
            assert!(ok(&u[field]), "{field}: {}", u[field]);
        }
        assert!(u["writeFreeze"].is_boolean() && u["restoreBackup"].is_boolean());
        assert!(u["version"].is_u64());
        assert_eq!(u["backup"]["location"], "node");
        assert!(u["backup"]["encrypted"].is_boolean() && u["backup"]["bundle"].is_string());

        let p = &u["plan"];
        assert_eq!(p["sourceKind"], "manifest");
        assert_eq!(p["kind"], "os");
        assert_eq!(p["rebootReason"], "security");
        assert_eq!(p["cves"], json!(["CVE-2026-1234"]));
        assert_eq!(p["signedBy"], RELEASE_KEY_ID);
        assert!(
            p["summary"].as_str().unwrap().contains("1.0.0 to 1.2.0"),
            "{p}"
        );
        assert_eq!(p["previousOsBootable"], true, "abSlots");
        assert_eq!(p["restoreRequired"], false);
        assert_eq!(p["backup"]["location"], "node");
        assert!(p["componentChanges"].is_array());
        assert_eq!(p["componentChanges"][0]["kind"], "image");
        for k in ["name", "from", "to", "fromId", "toId"] {
            assert!(p["componentChanges"][0][k].is_string(), "{k}");
        }
        assert_eq!(p["componentsFrom"], "release");
        assert_eq!(p["prechecks"].as_array().unwrap().len(), 12);
        assert!(p["prechecks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] == "pass" && c["name"].is_string() && c["message"].is_string()));
        let steps = p["steps"].as_array().unwrap();
        assert_eq!(steps[0], json!({"name": "prechecks", "kind": "cluster"}));
        assert!(steps.contains(&json!({"name": "roll", "nodeId": "n-b", "kind": "node"})));
        for n in p["nodes"].as_array().unwrap() {
            assert_eq!(n["kind"], "os");
            assert_eq!(n["reboot"], "full");
            assert!(n["restarts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == "node (reboot)"));
            let changes = n["changes"].as_array().unwrap();
            assert!(
                changes.contains(&json!("os")) && changes.contains(&json!("kernel")),
                "{n}"
            );
            assert_eq!(n["fetched"], false);
        }

        let nodes = u["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 3);
        for n in nodes {
            assert_eq!(n["kind"], "os");
            assert_eq!(n["phase"], "fetch");
            assert_eq!(n["state"], "done");
            assert_eq!(n["rebootMode"], "full");
            assert!(n["hostState"].is_string());
            assert_eq!(n["previousRelease"], "1.0.0");
            assert!(n["instances"].is_array() && n["runningInstances"].is_array());
            let h = &n["hostSteps"][0];
            for k in ["name", "state", "rebootMode", "detail"] {
                assert!(h[k].is_string(), "{k}: {h}");
            }
            for k in [
                "pendingUnits",
                "restartedUnits",
                "stoppedUnits",
                "switchedSysexts",
            ] {
                assert!(h[k].is_array(), "{k}: {h}");
            }
        }
        // A staged security upgrade warns for every node waiting to reboot.
        let warnings = u["warnings"].as_array().unwrap();
        assert_eq!(warnings.len(), 3, "{u:#}");
        for w in warnings {
            assert_eq!(w["code"], "NodeRebootPending");
            assert!(w["nodeId"].is_string() && w["since"].is_string() && w["message"].is_string());
        }
    }
}

#[tokio::test]
async fn the_reboot_alarm_is_raised_after_7_days_and_cleared_by_the_reboot() {
    for db in each_backend().await {
        let clock = TestClock::default();
        let app = app_with_clock(&db, &clock).await;
        let id = staged_security_upgrade(&app).await;
        clock.advance(chrono::Duration::days(6));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let none = app.get("/v1/admin/alarms?active=true").await.body;
        assert_eq!(none["items"], json!([]), "not before 7 days");

        clock.advance(chrono::Duration::days(1) + chrono::Duration::seconds(1));
        let alarms = until(&app, "/v1/admin/alarms?active=true", "three alarms", |v| {
            v["items"].as_array().is_some_and(|i| i.len() == 3)
        })
        .await;
        for a in alarms["items"].as_array().unwrap() {
            assert_eq!(a["name"], "node-reboot-pending");
            assert_eq!(a["upgradeId"], id.as_str());
            assert!(a["raisedAt"].is_string() && a["clearedAt"].is_null());
            assert!(a["message"].as_str().unwrap().contains("7 days"));
        }
        assert_eq!(alarms["nextCursor"], Value::Null);

        // Applied, backed up, and n-a reboots in its turn: its alarm clears.
        let r = app.post(&format!("{UPGRADES}/{id}/apply"), json!({})).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        until_state(&app, &id, "backing_up").await;
        let r = app
            .post(
                &format!("{UPGRADES}/{id}/backup"),
                json!({"location": "node", "bundle": "/var/lib/stratum/b.tar", "encrypted": false}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        until_state(&app, &id, "rolling").await;
        report(
            &app,
            &id,
            "n-a",
            json!({"phase": "roll", "state": "done", "rebootedAt": chrono::Utc::now().to_rfc3339()}),
        )
        .await;
        let active = until(&app, "/v1/admin/alarms?active=true", "two alarms", |v| {
            v["items"].as_array().is_some_and(|i| i.len() == 2)
        })
        .await;
        assert!(active["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["nodeId"] != "n-a"));
        let all = app.get("/v1/admin/alarms").await.body;
        let cleared: Vec<&Value> = all["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| !a["clearedAt"].is_null())
            .collect();
        assert_eq!(cleared.len(), 1);
        assert_eq!(cleared[0]["nodeId"], "n-a");
    }
}

#[tokio::test]
async fn a_host_helpers_report_with_all_four_lists_is_accepted_and_shown() {
    for db in each_backend().await {
        let app = spawn_with(&db, config()).await;
        cluster(&app).await;
        let r = app.post(UPGRADES, json!({"targetRelease": "1.1.0"})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let id = r.body["id"].as_str().unwrap().to_owned();
        until_state(&app, &id, "fetching").await;
        let u = report(
            &app,
            &id,
            "n-b",
            json!({
                "phase": "fetch", "state": "running", "hostState": "pulling",
                "hostSteps": [{
                    "name": "restart", "state": "running", "rebootMode": "none",
                    "detail": "restarting onto the pins",
                    "pendingUnits": ["stratum-api.service"],
                    "restartedUnits": ["stratum-agent.service"],
                    "stoppedUnits": ["patroni.service"],
                    "switchedSysexts": ["stratum-host"]
                }]
            }),
        )
        .await;
        let n = u["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["nodeId"] == "n-b")
            .unwrap()
            .clone();
        assert_eq!(n["hostState"], "pulling");
        let h = &n["hostSteps"][0];
        assert_eq!(h["pendingUnits"], json!(["stratum-api.service"]));
        assert_eq!(h["restartedUnits"], json!(["stratum-agent.service"]));
        assert_eq!(h["stoppedUnits"], json!(["patroni.service"]));
        assert_eq!(h["switchedSysexts"], json!(["stratum-host"]));
        // An unknown field is still refused, naming it.
        let r = app
            .post(
                &format!("{UPGRADES}/{id}/nodes/n-b/report"),
                json!({"phase": "fetch", "state": "running", "hostSteps": [{"name": "pull", "state": "done", "units": []}]}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    }
}

#[tokio::test]
async fn a_node_facts_report_makes_the_space_precheck_fail() {
    for db in each_backend().await {
        let app = spawn_with(&db, config()).await;
        cluster(&app).await;
        register(
            &app,
            manifest_with("1.2.0", "13.1", json!({"bundleBytes": 2_147_483_648_u64})),
        )
        .await;
        let r = app
            .post(
                "/v1/admin/cluster/members/n-b/facts",
                json!({"bundleFreeBytes": 1_073_741_824_u64, "ready": true, "shutDown": false,
                       "images": [{"name": "api", "version": "1.0.0", "digest": "sha256:00"}]}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["facts"]["bundleFreeBytes"], 1_073_741_824_u64);
        let back = app.get("/v1/admin/cluster/members/n-b/facts").await;
        assert_eq!(back.status, StatusCode::OK);
        assert_eq!(back.body["nodeId"], "n-b");
        let r = app.post(UPGRADES, json!({"targetRelease": "1.2.0"})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let id = r.body["id"].as_str().unwrap().to_owned();
        let u = until_state(&app, &id, "failed").await;
        let space = u["plan"]["prechecks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "space")
            .unwrap()
            .clone();
        assert_eq!(space["status"], "fail", "{space}");
        let m = space["message"].as_str().unwrap();
        assert!(m.contains("n-b") && m.contains("1.0 GiB short"), "{m}");
        assert!(u["failureReason"].as_str().unwrap().contains("space"));
    }
}
