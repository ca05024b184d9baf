//! The replica registry (issue 32): each `stratum serve` says what it is
//! and that it is alive, and the API, the CLI and the metrics show every
//! replica on the database, with the ones gone silent or stopped.

use serde_json::Value;

use crate::binary::*;
use crate::remote_cli::stratum;

async fn replicas(server: &Server) -> Vec<Value> {
    server.replicas().await["items"].as_array().unwrap().clone()
}

fn by_id<'a>(all: &'a [Value], id: &str) -> &'a Value {
    all.iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {all:?}"))
}

#[tokio::test]
async fn each_replica_says_what_it_is_and_the_registry_shows_live_silent_and_stopped() {
    let dir = tempfile::tempdir().unwrap();
    for (mut env, db) in backends(dir.path()).await {
        let metrics = format!("127.0.0.1:{}", free_port());
        env.push(("STRATUM_METRICS_LISTEN", metrics.clone()));
        let a = start(dir.path(), &env).await;
        let all = replicas(&a).await;
        let me = all.iter().find(|r| r["this"] == true).expect("itself");
        let first = me["id"].as_str().unwrap().to_owned();
        assert_eq!(me["state"], "live", "{me}");
        assert_eq!(me["version"], env!("CARGO_PKG_VERSION"));
        let commit = me["commit"].as_str().unwrap();
        assert!(
            commit == "unknown"
                || commit
                    .trim_end_matches("-dirty")
                    .chars()
                    .all(|c| c.is_ascii_hexdigit())
                    && commit.len() >= 40,
            "{me}"
        );
        assert_eq!(me["listen"], a.addr(), "{me}");
        // What it reads and writes: every stored event type.
        for (t, v) in stratum_domain::stored::newest_versions() {
            assert_eq!(me["reads"][t], v, "{t}: {me}");
            assert_eq!(me["writes"][t], v, "{t}: {me}");
        }
        assert_eq!(me["schema"]["max"], stratum_store::schema_range().1);
        // Its process managers' settings, and no secret among them.
        assert_eq!(me["settings"]["raft"]["openbao"]["adapter"], "record-only");
        assert_eq!(me["settings"]["raft"]["recheck"], "10s", "{me}");
        assert_eq!(me["settingsDigest"].as_str().unwrap().len(), 64);

        // Stopped, it says so; the next start is another replica.
        a.terminate();
        let mut a = a;
        let _ = a.child.wait().await;
        let b = start(dir.path(), &env).await;
        let all = replicas(&b).await;
        assert_eq!(by_id(&all, &first)["state"], "stopped", "{all:?}");
        assert!(by_id(&all, &first)["stoppedAt"].is_string());
        let second = all.iter().find(|r| r["this"] == true).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_ne!(second, first);

        // The CLI lists them.
        let out = stratum(&b, dir.path(), &["replicas", "list"]);
        let table = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert!(
            table.contains("ID") && table.contains("SETTINGS"),
            "{table}"
        );
        assert!(table.contains(&first) && table.contains(&second), "{table}");
        assert!(
            table.contains("stopped") && table.contains("live"),
            "{table}"
        );

        if db.is_none() {
            continue;
        }
        // On PostgreSQL, a second replica with other settings: both live,
        // each with its own digest; killed, it goes silent.
        let other_dir = tempfile::tempdir().unwrap();
        let mut other_env: Vec<_> = env
            .iter()
            .filter(|(k, _)| *k != "STRATUM_METRICS_LISTEN")
            .cloned()
            .collect();
        other_env.push(("STRATUM_RAFT_RECHECK", "20s".to_owned()));
        let mut c = start(other_dir.path(), &other_env).await;
        let all = replicas(&b).await;
        let theirs = all
            .iter()
            .find(|r| r["listen"] == c.addr())
            .unwrap()
            .clone();
        let mine = by_id(&all, &second).clone();
        assert_eq!(theirs["state"], "live", "{theirs}");
        assert_eq!(theirs["this"], false);
        assert_eq!(theirs["settings"]["raft"]["recheck"], "20s");
        assert_ne!(theirs["settingsDigest"], mine["settingsDigest"]);
        assert!(
            c.log().contains("settings differ from this one's") && c.log().contains(&second),
            "the second names the first at its start: {}",
            c.log()
        );
        assert_eq!(
            metric(&metrics, "stratum_replicas{state=\"live\"}").await,
            2
        );
        c.child.start_kill().unwrap();
        let _ = c.child.wait().await;
        let id = theirs["id"].as_str().unwrap().to_owned();
        b.eventually("the killed replica silent", || async {
            let all = replicas(&b).await;
            (by_id(&all, &id)["state"] == "silent").then_some(())
        })
        .await;
        assert_eq!(
            metric(&metrics, "stratum_replicas{state=\"silent\"}").await,
            1
        );
    }
}
