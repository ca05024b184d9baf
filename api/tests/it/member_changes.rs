//! Member changes (`PATCH /cluster/members/{nodeId}`) and what a node
//! agent's token may do, over HTTP on both backends.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::membership::cleaned;
use crate::support::{assert_error_shape, each_backend, spawn_app, TestApp};

const MEMBERS: &str = "/v1/admin/cluster/members";

async fn generation(app: &TestApp) -> u64 {
    app.get("/v1/admin/cluster/membership").await.body["generation"]
        .as_u64()
        .unwrap()
}

async fn active(app: &TestApp, node_id: &str, role: &str, ip: &str) {
    app.admit(node_id, role, ip).await;
    let r = app
        .post(&format!("{MEMBERS}/{node_id}/join-complete"), json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

fn address_in(peers: &Value, list: &str, node_id: &str) -> Option<String> {
    peers[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["nodeId"] == node_id)
        .map(|p| p["address"].as_str().unwrap().to_owned())
}

async fn patch(
    app: &TestApp,
    node_id: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> crate::support::Res {
    app.call_with(
        Method::PATCH,
        &format!("{MEMBERS}/{node_id}"),
        Some(body),
        headers,
    )
    .await
}

#[tokio::test]
async fn a_patch_changes_address_and_labels_bumps_the_generation_and_shows_in_the_peer_lists() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        active(&app, "n-1", "hybrid", "192.0.2.11").await;
        active(&app, "n-2", "hybrid", "192.0.2.12").await;
        let before = generation(&app).await;
        let etag = app.get(&format!("{MEMBERS}/n-2")).await.headers["etag"]
            .to_str()
            .unwrap()
            .to_owned();

        let r = patch(
            &app,
            "n-2",
            json!({"mgmtIp": "192.0.2.22", "labels": {"topology.rack": "r7", "zone": "b"}}),
            &[("if-match", &etag)],
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["mgmtIp"], "192.0.2.22");
        assert_eq!(r.body["rack"], "r7");
        assert_eq!(
            r.body["labels"],
            json!({"topology.rack": "r7", "zone": "b"})
        );
        assert_eq!(r.body["role"], "hybrid", "a field left out stays");
        assert_ne!(r.headers["etag"].to_str().unwrap(), etag);
        let after = generation(&app).await;
        assert!(after > before, "a change bumps the generation");
        assert_eq!(
            r.body["lagging"], true,
            "no node applied the new generation yet"
        );

        let peers = app.get("/v1/admin/cluster/peers").await.body;
        assert_eq!(peers["generation"], after);
        for list in [
            "patroni",
            "openbao",
            "ovn",
            "keepalived",
            "vmstorage",
            "alertmanager",
        ] {
            assert_eq!(
                address_in(&peers, list, "n-2").as_deref(),
                Some("192.0.2.22"),
                "{list}"
            );
        }
        let history = app.get(&format!("{MEMBERS}/n-2/history")).await.body;
        let last = history["events"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["type"], "MemberUpdated", "{last}");
        assert_eq!(last["payload"]["mgmtIp"], "192.0.2.22");

        // The same If-Match again is stale now.
        let stale = patch(
            &app,
            "n-2",
            json!({"labels": {"topology.rack": "r8"}}),
            &[("if-match", &etag)],
        )
        .await;
        assert_error_shape(
            &stale,
            StatusCode::PRECONDITION_FAILED,
            "PRECONDITION_FAILED",
        );

        // A retried PATCH with its Idempotency-Key answers the first answer
        // again; the key with another body is refused.
        let key = [("idempotency-key", "patch-n-2-rack")];
        let first = patch(
            &app,
            "n-2",
            json!({"labels": {"topology.rack": "r5"}}),
            &key,
        )
        .await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.body);
        let head = app.head().await;
        let again = patch(
            &app,
            "n-2",
            json!({"labels": {"topology.rack": "r5"}}),
            &key,
        )
        .await;
        assert_eq!(again.status, StatusCode::OK);
        assert_eq!(again.body, first.body);
        assert_eq!(again.headers["idempotent-replayed"], "true");
        assert_eq!(app.head().await, head, "a retry appends nothing");
        let other = patch(
            &app,
            "n-2",
            json!({"labels": {"topology.rack": "r6"}}),
            &key,
        )
        .await;
        assert_error_shape(
            &other,
            StatusCode::UNPROCESSABLE_ENTITY,
            "IDEMPOTENCY_KEY_REUSED",
        );

        // A change that changes nothing appends nothing.
        let head = app.head().await;
        let same = patch(&app, "n-2", json!({"mgmtIp": "192.0.2.22"}), &[]).await;
        assert_eq!(same.status, StatusCode::OK, "{}", same.body);
        assert_eq!(app.head().await, head);
    }
}

#[tokio::test]
async fn a_patch_with_two_bad_fields_names_both_and_appends_nothing() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        active(&app, "n-1", "hybrid", "192.0.2.11").await;
        active(&app, "n-2", "compute", "192.0.2.12").await;
        let head = app.head().await;
        let r = patch(
            &app,
            "n-2",
            json!({"role": "boss", "mgmtIp": "192.0.2.11"}),
            &[],
        )
        .await;
        assert_error_shape(&r, StatusCode::BAD_REQUEST, "INVALID_INPUT");
        let mut fields: Vec<&str> = r.body["fieldErrors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["field"].as_str().unwrap())
            .collect();
        fields.sort();
        assert_eq!(fields, ["mgmtIp", "role"], "{}", r.body);
        assert!(
            r.body.to_string().contains("is taken by member n-1"),
            "{}",
            r.body
        );

        let storage = patch(&app, "n-2", json!({"role": "storage", "labels": {}}), &[]).await;
        assert_error_shape(&storage, StatusCode::BAD_REQUEST, "INVALID_INPUT");
        assert_eq!(
            storage.body["fieldErrors"][0]["field"],
            "labels.topology.rack"
        );

        let unknown = patch(&app, "n-2", json!({"rack": "r1"}), &[]).await;
        assert_error_shape(&unknown, StatusCode::BAD_REQUEST, "INVALID_INPUT");
        let missing = patch(&app, "n-9", json!({"labels": {}}), &[]).await;
        assert_error_shape(&missing, StatusCode::NOT_FOUND, "NOT_FOUND");
        assert_eq!(app.head().await, head, "nothing was appended");
    }
}

#[tokio::test]
async fn demoting_the_last_voters_is_refused_unless_forced_and_takes_it_out_of_its_rafts() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        active(&app, "n-1", "hybrid", "192.0.2.11").await;
        active(&app, "n-2", "control", "192.0.2.12").await;
        let r = patch(&app, "n-2", json!({"role": "compute"}), &[]).await;
        assert_error_shape(&r, StatusCode::CONFLICT, "QUORUM_AT_RISK");
        assert_eq!(
            r.body["details"],
            json!({"votersBefore": 2, "votersAfter": 1})
        );

        let forced = patch(&app, "n-2", json!({"role": "compute", "force": true}), &[]).await;
        assert_eq!(forced.status, StatusCode::OK, "{}", forced.body);
        assert_eq!(forced.body["role"], "compute");
        let peers = app.get("/v1/admin/cluster/peers").await.body;
        assert_eq!(
            address_in(&peers, "patroni", "n-2"),
            None,
            "no longer a voter"
        );
        assert_eq!(
            peers["keepalived"].as_array().unwrap().len(),
            1,
            "keepalived priorities follow the roles"
        );
        // The demoted voter is taken out of every raft, and stays active.
        let m = cleaned(&app, "n-2").await;
        assert_eq!(m["state"], "active");
        let history = app.get(&format!("{MEMBERS}/n-2/history")).await.body;
        let removed: Vec<&Value> = history["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "RaftPeerRemoved")
            .collect();
        assert_eq!(removed.len(), 3);
        assert!(removed
            .iter()
            .all(|e| e["payload"]["adapter"] == "record-only"));
    }
}

#[tokio::test]
async fn a_decommissioned_member_cannot_be_changed() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        active(&app, "n-1", "hybrid", "192.0.2.11").await;
        active(&app, "n-2", "hybrid", "192.0.2.12").await;
        active(&app, "n-3", "compute", "192.0.2.13").await;
        let r = app
            .post(
                &format!("{MEMBERS}/n-3/decommission"),
                json!({"reason": "chassis replaced"}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        for _ in 0..200 {
            if app.get(&format!("{MEMBERS}/n-3")).await.body["state"] == "decommissioned" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        let r = patch(&app, "n-3", json!({"labels": {"topology.rack": "r2"}}), &[]).await;
        assert_error_shape(&r, StatusCode::CONFLICT, "MEMBER_DECOMMISSIONED");
        // Its refusal is the reason as recorded.
        let a = app
            .get("/v1/admin/cluster/transport-admission/n-3")
            .await
            .body;
        assert_eq!(a["refusal"]["reason"], "chassis replaced", "{a}");
    }
}

#[tokio::test]
async fn a_node_agent_reads_any_nodes_admission_and_changes_only_its_own_member() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        active(&app, "n-1", "hybrid", "192.0.2.11").await;
        active(&app, "n-2", "hybrid", "192.0.2.12").await;
        let agent = app.token("node/n-1", &["NodeAgent"]).await;
        let ask = |node: &'static str| {
            let agent = agent.clone();
            let app = &app;
            async move {
                app.call_as(
                    Some(&agent),
                    Method::GET,
                    &format!("/v1/admin/cluster/transport-admission/{node}"),
                    None,
                )
                .await
            }
        };
        let peer = ask("n-2").await;
        assert_eq!(peer.status, StatusCode::OK, "{}", peer.body);
        assert_eq!(peer.body["admitted"], true);
        let unknown = ask("n-404").await;
        assert_eq!(unknown.status, StatusCode::OK, "{}", unknown.body);
        assert_eq!(unknown.body["admitted"], false);
        assert_eq!(
            unknown.body["refusal"]["reason"],
            "not a member of this cluster"
        );

        for node in ["n-1", "n-2"] {
            let r = app
                .call_as(
                    Some(&agent),
                    Method::PATCH,
                    &format!("{MEMBERS}/{node}"),
                    Some(json!({"labels": {"topology.rack": "r9"}})),
                )
                .await;
            assert_error_shape(&r, StatusCode::FORBIDDEN, "ACCESS_DENIED");
            assert_eq!(r.body["details"]["action"], "cluster:UpdateMember");
        }
        let other = app
            .call_as(
                Some(&agent),
                Method::POST,
                &format!("{MEMBERS}/n-2/applied-generation"),
                Some(json!({"generation": 1})),
            )
            .await;
        assert_error_shape(&other, StatusCode::FORBIDDEN, "ACCESS_DENIED");
        let own = app
            .call_as(
                Some(&agent),
                Method::POST,
                &format!("{MEMBERS}/n-1/applied-generation"),
                Some(json!({"generation": generation(&app).await})),
            )
            .await;
        assert_eq!(own.status, StatusCode::OK, "{}", own.body);
        // Its own facts, and no other node's.
        let facts = |node: &'static str| {
            let agent = agent.clone();
            let app = &app;
            async move {
                app.call_as(
                    Some(&agent),
                    Method::POST,
                    &format!("{MEMBERS}/{node}/facts"),
                    Some(json!({"ready": true, "bundleFreeBytes": 1_000_000})),
                )
                .await
            }
        };
        let mine = facts("n-1").await;
        assert_eq!(mine.status, StatusCode::OK, "{}", mine.body);
        let theirs = facts("n-2").await;
        assert_error_shape(&theirs, StatusCode::FORBIDDEN, "ACCESS_DENIED");
        assert_eq!(theirs.body["details"]["action"], "cluster:ReportNodeFacts");
    }
}
