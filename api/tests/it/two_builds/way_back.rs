//! The way back: until finalized, the previous build runs again on a
//! database this build wrote; after it, it refuses, naming the finalization.

use super::*;

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
        refuses_finalized(&old, &place(dir.path(), &format!("{backend}-a3")), &env).await;
        assert_eq!(
            on_host(THIS_BUILD.as_ref(), &url, &["events", "verify"]).stdout,
            head.stdout,
            "nothing written"
        );
    }
}
