//! The agreed process-manager settings: only the replica that has them
//! cleans the rafts; another raises `replica-settings-differ`, and a
//! previous build beside it never cleans.

use super::*;

#[tokio::test]
async fn only_the_replica_with_the_agreed_settings_cleans_the_rafts_and_the_other_raises_an_alarm()
{
    let Some(db) = stratum_store::testing::postgres().await else {
        return; // no PostgreSQL here, and none required
    };
    let registered = previous(REGISTERED);
    let dir = tempfile::tempdir().unwrap();
    let url = db.url.clone();
    let base = [
        ("STRATUM_DATABASE_URL", url.clone()),
        ("STRATUM_RAFT_RETRY_MIN", "200ms".to_owned()),
        ("STRATUM_RAFT_RETRY_MAX", "400ms".to_owned()),
    ];
    // The previous build runs first, with no raft adapter: record-only.
    let old = start_program(&registered, &place(dir.path(), "old"), None, &[], &base).await;
    // This build beside it, with Patroni's raft through syncobj_admin.
    let d = place(dir.path(), "new");
    let calls = d.join("syncobj_admin.calls");
    let syncobj = fake_syncobj_admin(
        &d,
        &calls,
        &["10.0.0.1:2222", "192.0.2.12:2222", "192.0.2.13:2222"],
    );
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut env = with_syncobj(&base, &syncobj);
    env.push(("STRATUM_METRICS_LISTEN", metrics.clone()));
    let new = start(&d, &env).await;

    // The settings running longest are the agreed ones: this build's
    // differ, so it says so and never runs the cleanup.
    let list = new
        .eventually("the alarm", || async {
            let list = new.replicas().await;
            (list["alarms"].as_array().unwrap().len() == 1).then_some(list)
        })
        .await;
    let me = this_replica(&list);
    assert_eq!(
        list["alarms"][0]["name"], "replica-settings-differ",
        "{list}"
    );
    assert_eq!(list["alarms"][0]["replica"], me["id"], "{list}");
    assert!(
        list["agreed"]["by"]
            .as_str()
            .unwrap()
            .contains("running longest"),
        "{list}"
    );
    new.eventually("the alarm in the log and the metric", || async {
        (new.log().contains("replica-settings-differ")
            && metric(&metrics, "stratum_replica_settings_differ").await == 1)
            .then_some(())
    })
    .await;
    // And in the record, as every alarm is: `stratum alarms --active`.
    let alarmed = new
        .eventually("the recorded alarm", || async {
            let (_, alarms) = new.get("/v1/admin/alarms?active=true").await;
            alarms["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["name"] == "replica-settings-differ")
                .cloned()
        })
        .await;
    assert!(
        alarmed["message"]
            .as_str()
            .unwrap()
            .contains(me["id"].as_str().unwrap()),
        "{alarmed}"
    );

    failed_join(&new, "n-2", "192.0.2.12").await;
    let m = new.cleaned("n-2").await;
    // Exactly one removal per raft, each by the agreed (record-only)
    // settings; this build's adapter was never called.
    let removals: Vec<Value> = new
        .history("n-2")
        .await
        .into_iter()
        .filter(|e| e["type"] == "RaftPeerRemoved")
        .collect();
    assert_eq!(removals.len(), 2, "{removals:?}");
    for r in &removals {
        assert_eq!(r["payload"]["adapter"], "record-only", "{r}");
    }
    assert_eq!(m["raftsRecordedOnly"], json!(["patroni", "openbao"]), "{m}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        lines(&calls).iter().all(|c| !c.contains("-remove")),
        "{:?}",
        lines(&calls)
    );

    // The previous build stops: this build's settings are the agreed
    // ones now, the alarm clears, and it cleans with its adapter.
    stop(old).await;
    new.eventually("the alarm to clear", || async {
        let list = new.replicas().await;
        let (_, alarms) = new.get("/v1/admin/alarms?active=true").await;
        (list["alarms"].as_array().unwrap().is_empty()
            && metric(&metrics, "stratum_replica_settings_differ").await == 0
            && alarms["items"].as_array().unwrap().is_empty())
        .then_some(())
    })
    .await;
    failed_join(&new, "n-3", "192.0.2.13").await;
    new.cleaned("n-3").await;
    let removed: Vec<Value> = new
        .history("n-3")
        .await
        .into_iter()
        .filter(|e| e["type"] == "RaftPeerRemoved" && e["payload"]["raft"] == "patroni")
        .collect();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(
        removed[0]["payload"]["adapter"], "patroni-syncobj",
        "{removed:?}"
    );
    assert!(lines(&calls).iter().any(|c| c.contains("-remove")));
    stop(new).await;
    clean(THIS_BUILD.as_ref(), &url);
}

#[tokio::test]
async fn a_previous_build_started_beside_the_replica_with_the_agreed_settings_never_cleans() {
    let Some(db) = stratum_store::testing::postgres().await else {
        return; // no PostgreSQL here, and none required
    };
    let registered = previous(REGISTERED);
    let dir = tempfile::tempdir().unwrap();
    let base = [
        ("STRATUM_DATABASE_URL", db.url.clone()),
        ("STRATUM_RAFT_RETRY_MIN", "200ms".to_owned()),
        ("STRATUM_RAFT_RETRY_MAX", "400ms".to_owned()),
    ];
    // This build first, with Patroni's raft through syncobj_admin: alone,
    // its settings are the agreed ones, and it takes the cleanup.
    let d = place(dir.path(), "new");
    let calls = d.join("syncobj_admin.calls");
    let syncobj = fake_syncobj_admin(&d, &calls, &["10.0.0.1:2222", "192.0.2.12:2222"]);
    let env = with_syncobj(&base, &syncobj);
    let new = start(&d, &env).await;
    // This build runs the raft cleanup.
    new.logs("runs the raft cleanup").await;
    // The previous build beside it, with no raft adapter: its settings
    // differ, which this build's list names; it never gets the lock.
    let old = start_program(&registered, &place(dir.path(), "old"), None, &[], &base).await;
    let old_id = this_replica(&old.replicas().await)["id"].clone();
    let list = new.replicas().await;
    assert_eq!(list["alarms"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["alarms"][0]["replica"], old_id, "{list}");
    assert_eq!(
        list["agreed"]["digest"],
        this_replica(&list)["settingsDigest"],
        "{list}"
    );

    // Sent to the previous build, the failed join is cleaned by this one,
    // with its adapter.
    failed_join(&old, "n-2", "192.0.2.12").await;
    let m = new.cleaned("n-2").await;
    let removed: Vec<Value> = new
        .history("n-2")
        .await
        .into_iter()
        .filter(|e| e["type"] == "RaftPeerRemoved" && e["payload"]["raft"] == "patroni")
        .collect();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(removed[0]["payload"]["adapter"], "patroni-syncobj", "{m}");
    assert!(
        lines(&calls)
            .iter()
            .any(|c| c.contains("-remove 192.0.2.12:2222")),
        "{:?}",
        lines(&calls)
    );
    assert!(!old.log().contains("taken out of raft"), "{}", old.log());
    stop(old).await;
    stop(new).await;
}
