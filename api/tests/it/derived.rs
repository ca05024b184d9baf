//! Derived data is derived (issue 32): events another build of stratum
//! appended without keeping the log's tree (as builds before the tree did,
//! beside a new one during an upgrade) are not tampering. While the other
//! build writes, `events verify` says the chain is whole and names where
//! the tree stops; a proof is served or answered 503, never 500; once the
//! running replica of this build sees the new head it builds the missing
//! rows, and the tree is whole without a restart.

use serde_json::{json, Value};

use crate::binary::*;

/// Makes every tree row a write inserts vanish: a build that does not
/// keep the tree.
async fn without_tree(url: &str, on: bool) {
    use sqlx::{Connection, Executor};
    if url.starts_with("sqlite:") {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        c.execute(if on {
            "CREATE TRIGGER other_build AFTER INSERT ON log_tree BEGIN \
             DELETE FROM log_tree WHERE level = NEW.level AND idx = NEW.idx; END"
        } else {
            "DROP TRIGGER other_build"
        })
        .await
        .unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        c.execute(if on {
            "CREATE FUNCTION other_build() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN DELETE FROM log_tree WHERE level = NEW.level AND idx = NEW.idx; RETURN NULL; END $$; \
             CREATE TRIGGER other_build AFTER INSERT ON log_tree FOR EACH ROW EXECUTE FUNCTION other_build()"
        } else {
            "DROP TRIGGER other_build ON log_tree; DROP FUNCTION other_build()"
        })
        .await
        .unwrap();
    }
}

fn on_host(url: &str, args: &[&str]) -> std::process::Output {
    on_host_with(THIS_BUILD.as_ref(), url, args)
}

fn signal(server: &Server, sig: &str) {
    let pid = server.child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .unwrap()
        .success());
}

#[tokio::test]
async fn events_another_build_appended_without_the_tree_are_caught_up_not_called_tampering() {
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let url = env[0].1.clone();
        let mut server = start(dir.path(), &env).await;
        // Up to just before the first full tile of 256 leaves.
        let (_, verify) = server.get("/v1/admin/events/verify").await;
        let mut head = verify["position"].as_u64().unwrap();
        let mut i = 0;
        while head < 250 {
            let (status, body) = server
                .post(
                    MEMBERS,
                    json!({"nodeId": format!("n-{i}"), "role": "compute", "mgmtIp": format!("10.0.{}.{}", i / 200, i % 200 + 1)}),
                )
                .await;
            assert_eq!(status, 201, "{body}");
            head += 1;
            i += 1;
        }

        // The replica of this build is paused; another build appends 10
        // events past the tile's end, keeping no tree.
        signal(&server, "-STOP");
        without_tree(&url, true).await;
        for i in 0..10 {
            let out = on_host(
                &url,
                &[
                    "token",
                    "create",
                    "--principal",
                    &format!("user/other-{i}"),
                    "--policy",
                    "ReadOnly",
                ],
            );
            assert!(out.status.success(), "{out:?}");
        }
        without_tree(&url, false).await;
        let out = on_host(&url, &["events", "verify"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("verified:"),
            "{out:?}"
        );
        assert!(
            stderr.contains("covers the events before position 1"),
            "the tree stops at the first tile: {stderr}"
        );

        // The replica goes on: a proof over the new events is served or
        // answered 503 while it catches up, never 500.
        signal(&server, "-CONT");
        let size = head + 10;
        let (status, body) = server
            .get(&format!("/v1/log/consistency?from=10&to={size}"))
            .await;
        assert!(status == 200 || status == 503, "{status} {body}");
        let proof: Value = server
            .eventually("the tree caught up", || async {
                let (_, v) = server.get("/v1/admin/events/verify").await;
                if !v["treeBehindFrom"].is_null() {
                    return None;
                }
                let (status, body) = server
                    .get(&format!("/v1/log/consistency?from=10&to={size}"))
                    .await;
                (status == 200).then_some(body)
            })
            .await;
        assert!(proof.is_object(), "{proof}");
        assert!(!server.log().contains("internal error"), "{}", server.log());

        // Stopped: the tree is whole and is the log's.
        server.terminate();
        let _ = server.child.wait().await;
        let out = on_host(&url, &["replay", "--check"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(out.stderr.is_empty(), "no note: {out:?}");
        let out = on_host(&url, &["events", "verify"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(out.stderr.is_empty(), "no note: {out:?}");
    }
}
