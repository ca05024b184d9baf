//! Membership over HTTP, centred on the seed endpoint (join-failed): the
//! helpers and the scenario other tests share; the tests by subject.

mod decommission;
mod history;
mod join_failed;
mod peers;

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
