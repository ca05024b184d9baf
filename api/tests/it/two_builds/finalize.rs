//! Finalizing: refused while a replica that cannot read the new formats is
//! live or a build from before the registry has sessions open, and only an
//! administrator's.

use super::*;

#[tokio::test]
async fn finalizing_is_refused_while_a_replica_that_cannot_read_the_new_formats_is_live() {
    let Some(db) = stratum_store::testing::postgres().await else {
        return; // no PostgreSQL here, and none required
    };
    let registered = previous(REGISTERED);
    let dir = tempfile::tempdir().unwrap();
    let env = [("STRATUM_DATABASE_URL", db.url.clone())];
    let old = start_program(&registered, &place(dir.path(), "old"), None, &[], &env).await;
    let new = start(&place(dir.path(), "new"), &env).await;
    let old_id = this_replica(&old.replicas().await)["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let out = remote(&new, &["replicas", "finalize"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("409 VERSION_CONFLICT"), "{err}");
    assert!(
        err.contains(&old_id),
        "the refusal names the replica: {err}"
    );
    assert!(err.contains("StorageVersionFinalized/1"), "{err}");
    // And the API says the same, naming what it cannot read.
    let (status, body) = new.post("/v1/admin/replicas/finalize", json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["details"]["replicas"][0]["id"], old_id, "{body}");
    let cannot: Vec<String> =
        serde_json::from_value(body["details"]["replicas"][0]["cannotRead"].clone()).unwrap();
    assert_eq!(cannot, ["RaftPeerRemoved/4", "StorageVersionFinalized/1"]);
    assert_eq!(new.replicas().await["storage"]["level"], 1);

    // Once it stops, nothing holds the finalization back.
    stop(old).await;
    let out = finalize_once_stopped_sessions_end(&new, ADMIN).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let list = new.replicas().await;
    assert_eq!(list["storage"]["level"], 2, "{list}");
    assert_eq!(
        list["storage"]["finalized"]["replicas"],
        json!([this_replica(&list)["id"]]),
        "{list}"
    );
    // From here, removals name the settings they were made with.
    failed_join(&new, "n-2", "192.0.2.12").await;
    new.cleaned("n-2").await;
    let (_, events) = new.get("/v1/admin/events?type=RaftPeerRemoved").await;
    for e in events["events"].as_array().unwrap() {
        assert_eq!(e["schemaVersion"], 4, "{e}");
        assert_eq!(
            e["payload"]["settings"],
            this_replica(&list)["settingsDigest"],
            "{e}"
        );
    }
    stop(new).await;

    // The registered previous build refuses the finalized database too.
    refuses_finalized(&registered, &place(dir.path(), "old2"), &env).await;
}

#[tokio::test]
async fn finalizing_is_refused_while_a_build_from_before_the_registry_has_sessions_open() {
    let Some(db) = stratum_store::testing::postgres().await else {
        return; // no PostgreSQL here, and none required
    };
    let unregistering = previous(PREVIOUS);
    let dir = tempfile::tempdir().unwrap();
    let env = [("STRATUM_DATABASE_URL", db.url.clone())];
    let old = start_program(&unregistering, &place(dir.path(), "old"), None, &[], &env).await;
    let new = start(&place(dir.path(), "new"), &env).await;
    // It registers nothing: only its sessions show it.
    let list = new.replicas().await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    let (status, body) = new.post("/v1/admin/replicas/finalize", json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("from before the replica registry"),
        "{body}"
    );
    let sessions = body["details"]["unregistered"].as_array().unwrap();
    assert!(!sessions.is_empty(), "{body}");
    assert!(sessions[0].as_str().unwrap().starts_with("pid "), "{body}");
    assert_eq!(new.replicas().await["storage"]["level"], 1);
    stop(old).await;
    let out = finalize_once_stopped_sessions_end(&new, ADMIN).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    stop(new).await;
}

#[tokio::test]
async fn only_an_administrator_finalizes() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    for policy in ["ClusterOperator", "ReadOnly", "Auditor"] {
        let token = server
            .token_for(&format!("user/{}", policy.to_lowercase()), policy)
            .await;
        let res = server
            .http
            .post(server.url("/v1/admin/replicas/finalize"))
            .bearer_auth(&token)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 403, "{policy}: {body}");
        assert_eq!(body["code"], "ACCESS_DENIED", "{policy}: {body}");
    }
    assert_eq!(server.replicas().await["storage"]["level"], 1);
    let (status, body) = server.post("/v1/admin/replicas/finalize", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["level"], 2, "{body}");
}
