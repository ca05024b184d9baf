//! A rolling upgrade: two replicas of the previous build replaced under
//! load, then the upgrade finalized.

use super::*;

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
