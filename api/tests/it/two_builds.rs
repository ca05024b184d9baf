//! Replicas of two builds on one database (issue 32), with the real
//! binaries of earlier revisions, built by `.ci/previous-build`:
//!
//! - [`PREVIOUS`], the commit the storage version started from: it knows
//!   no registry and no storage level;
//! - [`REGISTERED`], the first build that registers itself (its stored
//!   formats and settings) but knows no storage level.
//!
//! Until `stratum replicas finalize`, the previous build runs again on a
//! database this build wrote, with nothing lost; after it, it refuses the
//! database, naming the finalization. Finalizing is refused while a live
//! replica cannot read the new formats. Only a replica with the agreed
//! process-manager settings runs the raft cleanup; the other raises the
//! `replica-settings-differ` alarm.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::binary::*;

/// The commit the storage version started from (before issue 32).
const PREVIOUS: &str = "b5a94171cebe5ad09a193df42088875e345f1d73";
/// The first build that registers itself in the replica registry.
const REGISTERED: &str = "59539ab566aaa8c6975b3643e34652c86fb51032";

/// The `stratum` binary of `rev`, built once per target directory by
/// `.ci/previous-build` (which CI runs before the tests).
fn previous(rev: &str) -> PathBuf {
    let target = Path::new(THIS_BUILD)
        .parent()
        .and_then(Path::parent)
        .expect("the binary is in TARGET/debug");
    let kept = target.join("previous").join(rev).join("stratum");
    if kept.exists() {
        return kept;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/previous-build");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(rev)
        .env("CARGO_TARGET_DIR", target)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "building stratum at {rev} failed");
    assert!(kept.exists(), "{} was not built", kept.display());
    kept
}

use crate::binary::on_host_with as on_host;

/// `base` with Patroni's raft removed through the `syncobj_admin` at
/// `program`, whose raft's leader answers at 10.0.0.1:2222.
fn with_syncobj(base: &[(&'static str, String)], program: &Path) -> Vec<(&'static str, String)> {
    let mut env = base.to_vec();
    env.extend([
        ("STRATUM_RAFT_PATRONI", "syncobj".to_owned()),
        (
            "STRATUM_PATRONI_SYNCOBJ_ADMIN",
            program.display().to_string(),
        ),
        ("STRATUM_PATRONI_RAFT_CONN", "10.0.0.1:2222".to_owned()),
        ("STRATUM_PATRONI_RAFT_PORT", "2222".to_owned()),
    ]);
    env
}

/// `stratum <args>` of this build against a served API, as the admin.
fn remote(server: &Server, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(THIS_BUILD);
    for key in stratum_vars() {
        cmd.env_remove(key);
    }
    cmd.args(["--server", &server.base])
        .args(args)
        .env("STRATUM_TOKEN", ADMIN)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// `stratum replicas finalize` against `server` with `token`, again while
/// (and only while) it is refused for sessions of a stopped build from
/// before the registry that PostgreSQL has not yet ended.
async fn finalize_once_stopped_sessions_end(server: &Server, token: &str) -> std::process::Output {
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let mut cmd = std::process::Command::new(THIS_BUILD);
        for key in stratum_vars() {
            cmd.env_remove(key);
        }
        let out = cmd
            .args(["--server", &server.base, "replicas", "finalize"])
            .env("STRATUM_TOKEN", token)
            .output()
            .unwrap();
        let lingering =
            String::from_utf8_lossy(&out.stderr).contains("from before the replica registry");
        if !lingering || std::time::Instant::now() > deadline {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The log verifies and replays to the rows the database holds, by `bin`.
fn clean(bin: &Path, url: &str) {
    let out = on_host(bin, url, &["events", "verify"]);
    assert_eq!(out.status.code(), Some(0), "events verify: {}", text(&out));
    let out = on_host(bin, url, &["replay", "--check"]);
    assert_eq!(out.status.code(), Some(0), "replay --check: {}", text(&out));
}

/// Stops a server as its service manager would, and waits for it: it must
/// still be running (no crash went unnoticed) and stop cleanly.
async fn stop(mut server: Server) {
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "{} exited before it was stopped:\n{}",
        server.base,
        server.log()
    );
    server.terminate();
    let status = tokio::time::timeout(DEADLINE, server.child.wait())
        .await
        .expect("stopped in time")
        .unwrap();
    assert!(
        status.success(),
        "{} stopped with {status}:\n{}",
        server.base,
        server.log()
    );
}

/// A fresh directory for one server's files under `dir`.
fn place(dir: &Path, name: &str) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A member that reached Patroni's raft and failed at OpenBao's: the raft
/// cleanup owes both rafts a removal.
async fn failed_join(server: &Server, node_id: &str, ip: &str) {
    server.admit(node_id, ip).await;
    server.progress(node_id, "join/raft-patroni").await;
    let m = server
        .member_post(
            node_id,
            "join-failed",
            json!({"step": "join/raft-openbao", "error": "bao: connection refused"}),
        )
        .await;
    assert_eq!(m["state"], "failed", "{m}");
}

#[tokio::test]
async fn until_finalized_the_previous_build_runs_again_and_after_it_refuses_naming_it() {
    for rev in [PREVIOUS, REGISTERED] {
        way_back(rev).await;
    }
}

/// [`until_finalized_the_previous_build_runs_again_and_after_it_refuses_naming_it`]
/// from the build of `rev`, on both backends.
async fn way_back(rev: &str) {
    let old = previous(rev);
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let url = env[0].1.clone();
        let backend = backend_of(&url);

        // The previous build makes the database and writes.
        let a = start_program(
            &old,
            &place(dir.path(), &format!("{backend}-a1")),
            None,
            &[],
            &env,
        )
        .await;
        a.admit("n-1", "192.0.2.11").await;
        a.member_post("n-1", "join-complete", json!({})).await;
        stop(a).await;

        // This build on it: a failed join whose removals no raft was
        // called for (no adapter is set), written as the previous build
        // reads them.
        let b = start(&place(dir.path(), &format!("{backend}-b1")), &env).await;
        failed_join(&b, "n-2", "192.0.2.12").await;
        let m = b.cleaned("n-2").await;
        assert_eq!(m["raftsRecordedOnly"], json!(["patroni", "openbao"]), "{m}");
        let (_, replicas) = b.get("/v1/admin/replicas").await;
        assert_eq!(replicas["storage"]["level"], 1, "{replicas}");
        assert!(replicas["storage"]["finalized"].is_null(), "{replicas}");
        assert_eq!(replicas["storage"]["pending"][0]["level"], 2, "{replicas}");
        let (_, events) = b.get("/v1/admin/events?type=RaftPeerRemoved").await;
        for e in events["events"].as_array().unwrap() {
            assert_eq!(
                e["schemaVersion"], 3,
                "the version the previous build reads: {e}"
            );
        }
        let before = b.history("n-2").await.len();
        stop(b).await;
        clean(THIS_BUILD.as_ref(), &url);

        // The way back: the previous build serves, verifies and replays
        // what this one wrote, with nothing lost, and writes on.
        clean(&old, &url);
        let a = start_program(
            &old,
            &place(dir.path(), &format!("{backend}-a2")),
            None,
            &[],
            &env,
        )
        .await;
        let m = a.member("n-2").await;
        assert_eq!(m["state"], "failed", "{m}");
        assert_eq!(m["raftCleanupPending"], json!([]), "{m}");
        assert!(!m["raftCleanupAt"].is_null(), "{m}");
        assert_eq!(a.history("n-2").await.len(), before);
        a.admit("n-3", "192.0.2.13").await;
        stop(a).await;
        clean(&old, &url);

        // This build again, and the upgrade finalized.
        let b = start(&place(dir.path(), &format!("{backend}-b2")), &env).await;
        assert_eq!(b.member("n-3").await["state"], "joining");
        let out = finalize_once_stopped_sessions_end(&b, ADMIN).await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("storage level 2"), "{said}");
        assert!(said.contains("finalized at position"), "{said}");
        let (_, replicas) = b.get("/v1/admin/replicas").await;
        assert_eq!(replicas["storage"]["level"], 2, "{replicas}");
        assert_eq!(
            replicas["storage"]["finalized"]["settings"], replicas["agreed"]["digest"],
            "{replicas}"
        );
        // Finalizing again changes nothing.
        let out = remote(&b, &["replicas", "finalize", "-o", "json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let again: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(again["finalized"], replicas["storage"]["finalized"]);
        stop(b).await;
        clean(THIS_BUILD.as_ref(), &url);

        // After it, the previous build refuses the database, naming the
        // finalization, and changes nothing.
        let head = on_host(THIS_BUILD.as_ref(), &url, &["events", "verify"]);
        let ran = serve_program(
            &old,
            &place(dir.path(), &format!("{backend}-a3")),
            free_port(),
            None,
            &[],
            &env,
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
        let ran = tokio::time::timeout(DEADLINE, ran)
            .await
            .expect("it stops")
            .unwrap();
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert!(!ran.status.success(), "{stderr}");
        assert!(stderr.contains("StorageVersionFinalized"), "{stderr}");
        assert_eq!(
            on_host(THIS_BUILD.as_ref(), &url, &["events", "verify"]).stdout,
            head.stdout,
            "nothing written"
        );
    }
}

/// The live replicas of the database as `server` lists them, by id.
async fn listed(server: &Server) -> Value {
    let (status, body) = server.get("/v1/admin/replicas").await;
    assert_eq!(status, 200, "{body}");
    body
}

fn this_one(list: &Value) -> Value {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["this"] == true)
        .unwrap()
        .clone()
}

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
    let (_, listed_by_old) = old.get("/v1/admin/replicas").await;
    let old_id = listed_by_old["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["this"] == true)
        .unwrap()["id"]
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
    assert_eq!(listed(&new).await["storage"]["level"], 1);

    // Once it stops, nothing holds the finalization back.
    stop(old).await;
    let out = finalize_once_stopped_sessions_end(&new, ADMIN).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let list = listed(&new).await;
    assert_eq!(list["storage"]["level"], 2, "{list}");
    assert_eq!(
        list["storage"]["finalized"]["replicas"],
        json!([this_one(&list)["id"]]),
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
            this_one(&list)["settingsDigest"],
            "{e}"
        );
    }
    stop(new).await;

    // The registered previous build refuses the finalized database too.
    let ran = serve_program(
        &registered,
        &place(dir.path(), "old2"),
        free_port(),
        None,
        &[],
        &env,
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .output();
    let ran = tokio::time::timeout(DEADLINE, ran)
        .await
        .expect("it stops")
        .unwrap();
    assert!(!ran.status.success());
    assert!(
        String::from_utf8_lossy(&ran.stderr).contains("StorageVersionFinalized"),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
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
    let list = listed(&new).await;
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
    assert_eq!(listed(&new).await["storage"]["level"], 1);
    stop(old).await;
    let out = finalize_once_stopped_sessions_end(&new, ADMIN).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    stop(new).await;
}

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
            let list = listed(&new).await;
            (list["alarms"].as_array().unwrap().len() == 1).then_some(list)
        })
        .await;
    let me = this_one(&list);
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
        let list = listed(&new).await;
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

/// The settings of a replica of the rolling upgrade: the database, the
/// load's admin token, and the shared signing key, with a state file of
/// its own.
fn rolling_env(url: &str, key: &Path, state: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("STRATUM_DATABASE_URL", url.to_owned()),
        (
            "STRATUM_BOOTSTRAP_TOKEN",
            crate::support::ADMIN_TOKEN.to_owned(),
        ),
        ("STRATUM_LOG_SIGNING_KEY_FILE", key.display().to_string()),
        ("STRATUM_LOG_STATE_FILE", state.display().to_string()),
    ]
}

/// Waits until `n` more writes were acknowledged.
async fn writes_go_on(load: &crate::load::Load, n: usize, what: &str) {
    let since = load.t0.elapsed();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while load.acknowledged_after(since) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "writes stopped {what}: {} acknowledged",
            load.acknowledged_after(since)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_of_the_previous_build_are_replaced_under_load_then_the_upgrade_is_finalized()
{
    for rev in [PREVIOUS, REGISTERED] {
        rolling_upgrade(rev).await;
    }
}

/// The rolling upgrade from the build of `rev`, on PostgreSQL.
async fn rolling_upgrade(rev: &str) {
    use crate::load::{count, get, Load};
    use stratum_history::member::MemberModel;
    use stratum_history::{check, Options};

    let Some(db) = stratum_store::testing::postgres().await else {
        return; // no PostgreSQL here, and none required
    };
    let old = previous(rev);
    let dir = tempfile::tempdir().unwrap();
    let url = db.url.clone();
    let (key, public) = crate::transparency::keygen(dir.path(), "stratum.rolling-upgrade");
    let env = |name: &str| rolling_env(&url, &key, &dir.path().join(format!("{name}.checkpoint")));
    let a1 = start_program(&old, &place(dir.path(), "a1"), None, &[], &env("a1")).await;
    let a2 = start_program(&old, &place(dir.path(), "a2"), None, &[], &env("a2")).await;
    // 16 writers and 4 readers, through the replicas in turn.
    let load = Load::start(vec![a1.base.clone(), a2.base.clone()], 16, 4);
    writes_go_on(&load, 200, "on the previous build").await;
    clean(THIS_BUILD.as_ref(), &url);

    // One at a time: a replica of this build joins the load balancer, then
    // one of the previous build leaves it and stops.
    let b1 = start(&place(dir.path(), "b1"), &env("b1")).await;
    *load.bases.lock().unwrap() = vec![a2.base.clone(), b1.base.clone()];
    stop(a1).await;
    writes_go_on(&load, 200, "with one replica of each build").await;
    clean(THIS_BUILD.as_ref(), &url);

    let b2 = start(&place(dir.path(), "b2"), &env("b2")).await;
    *load.bases.lock().unwrap() = vec![b1.base.clone(), b2.base.clone()];
    stop(a2).await;
    writes_go_on(&load, 200, "on this build").await;
    clean(THIS_BUILD.as_ref(), &url);

    // Every replica is of this build: the upgrade is finalized, under load.
    let out = finalize_once_stopped_sessions_end(&b1, crate::support::ADMIN_TOKEN).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    writes_go_on(&load, 200, "after the finalization").await;
    clean(THIS_BUILD.as_ref(), &url);
    let seen = load.finish().await;
    eprintln!(
        "rolling upgrade from {rev}: {} writes acknowledged, {} operations; 5xx answers {:?}",
        seen.acknowledged.len(),
        seen.history.len(),
        count(&seen.errors)
    );

    // No answer was a 500: only 503s, while a replica caught up or stopped.
    seen.assert_only_unavailable();
    // Nothing acknowledged is lost, on either replica.
    let http = reqwest::Client::new();
    for replica in [&b1, &b2] {
        for node in &seen.admitted {
            let (status, body) = get(&http, &replica.base, &format!("{MEMBERS}/{node}")).await;
            assert_eq!(
                status, 200,
                "{}: acknowledged {node} is lost: {body}",
                replica.base
            );
        }
    }
    let (_, listed) = get(&http, &b2.base, "/v1/admin/replicas").await;
    assert_eq!(listed["storage"]["level"], 2, "{listed}");
    // The history the clients saw is linearizable.
    let report = check(&MemberModel::new(), &seen.history, &Options::default());
    eprintln!("history: {:?}", report.stats);
    assert!(report.is_linearizable(), "{report}");
    // The independent verifier accepts the checkpoint, its tiles and
    // proofs, once one covers the head.
    if let Some(go) = crate::transparency::go_verifier() {
        let (_, ready) = get(&http, &b1.base, "/readyz").await;
        let head = ready["position"].as_u64().unwrap();
        let deadline = std::time::Instant::now() + DEADLINE;
        let summary = loop {
            let o = std::process::Command::new(&go)
                .args([
                    "-server",
                    &b1.base,
                    "-token",
                    crate::support::ADMIN_TOKEN,
                    "-vkey",
                ])
                .arg(&public)
                .args(["-samples", "12"])
                .output()
                .unwrap();
            assert!(o.status.success(), "the Go verifier: {}", text(&o));
            let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
            if summary["size"].as_u64() >= Some(head) || std::time::Instant::now() > deadline {
                break summary;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(summary["size"].as_u64() >= Some(head), "{summary}");
    }
    stop(b1).await;
    stop(b2).await;
}

/// The build the upgrade of issue 32 was first tried from: it keeps no
/// Merkle tree and runs on schema 5.
const BEFORE_THE_TREE: &str = "70370d0dae22a4f3696fff990a6ba562c919aa2c";

#[tokio::test]
async fn a_build_that_keeps_no_tree_writes_600_events_beside_this_one_and_no_proof_is_a_500() {
    let Some(db) = stratum_store::testing::postgres().await else {
        return; // no PostgreSQL here, and none required
    };
    let old = previous(BEFORE_THE_TREE);
    let dir = tempfile::tempdir().unwrap();
    let url = db.url.clone();
    let env = [("STRATUM_DATABASE_URL", url.clone())];
    let a = start_program(&old, &place(dir.path(), "old"), None, &[], &env).await;
    for i in 0..10 {
        a.admit(&format!("n-{i}"), &format!("10.1.0.{}", i + 1))
            .await;
    }
    // This build starts beside it (and migrates the schema).
    let b = start(&place(dir.path(), "new"), &env).await;
    let proof = |to: u64| format!("/v1/log/consistency?from=10&to={to}");
    let mut head = b.get("/readyz").await.1["position"].as_u64().unwrap();
    let mut answered = std::collections::BTreeMap::new();
    // The old build writes 600 events; this one is asked for proofs
    // meanwhile, and the log verified.
    for i in 0..600u32 {
        a.admit(
            &format!("m-{i}"),
            &format!("10.2.{}.{}", i / 200, i % 200 + 1),
        )
        .await;
        head += 1;
        if i % 50 == 49 {
            // A consistency proof, an inclusion proof and the first tile
            // of leaves, up to the head this replica has folded: served,
            // or 503 while the tree catches up.
            let seen = b.get("/readyz").await.1["position"].as_u64().unwrap();
            for path in [
                proof(seen),
                format!("/v1/admin/events/5/proof?size={seen}"),
                "/v1/log/tile/0/000.p/5".to_owned(),
            ] {
                let (status, body) = b.get(&path).await;
                assert!(status == 200 || status == 503, "{path}: {status}: {body}");
                *answered.entry(status).or_insert(0) += 1;
            }
            let out = on_host(THIS_BUILD.as_ref(), &url, &["events", "verify"]);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out));
            assert!(
                String::from_utf8_lossy(&out.stdout).starts_with("verified:"),
                "{}",
                text(&out)
            );
            assert!(!text(&out).contains("missing"), "{}", text(&out));
        }
    }
    eprintln!("proofs while the old build wrote: {answered:?}");
    assert!(
        answered.get(&200).is_some_and(|n| *n > 0),
        "never served: {answered:?}"
    );
    // Once it stops, the tree is whole without a restart.
    stop(a).await;
    let (status, body) = b
        .eventually("a proof over everything", || async {
            let (status, body) = b.get(&proof(head)).await;
            assert_ne!(status, 500, "{body}");
            (status == 200).then_some((status, body))
        })
        .await;
    assert_eq!(status, 200, "{body}");
    let out = on_host(THIS_BUILD.as_ref(), &url, &["events", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("covers the events before"),
        "the tree is whole: {}",
        text(&out)
    );
    clean(THIS_BUILD.as_ref(), &url);
    stop(b).await;
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
    let (_, own) = old.get("/v1/admin/replicas").await;
    let old_id = this_one(&own)["id"].clone();
    let list = listed(&new).await;
    assert_eq!(list["alarms"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["alarms"][0]["replica"], old_id, "{list}");
    assert_eq!(
        list["agreed"]["digest"],
        this_one(&list)["settingsDigest"],
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
    assert_eq!(listed(&server).await["storage"]["level"], 1);
    let (status, body) = server.post("/v1/admin/replicas/finalize", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["level"], 2, "{body}");
}
