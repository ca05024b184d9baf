//! Two `stratum serve` processes on one PostgreSQL database behave as one
//! service.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{postgres, ADMIN_TOKEN};
use stratum_api::testing::free_port;

pub(crate) struct Server {
    child: Child,
    pub(crate) base: String,
    /// Where its `/metrics` answers.
    pub(crate) metrics: String,
}

impl Server {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has not exited.
    pub(crate) fn running(&mut self) -> bool {
        self.child.try_wait().is_ok_and(|s| s.is_none())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[allow(
    clippy::zombie_processes,
    reason = "the Server guard kills and waits for it on drop"
)]
pub(crate) async fn serve(db_url: &str) -> Server {
    let port = free_port();
    let metrics_port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env(
            "STRATUM_METRICS_LISTEN",
            format!("127.0.0.1:{metrics_port}"),
        )
        .env("STRATUM_DATABASE_URL", db_url)
        .env("STRATUM_BOOTSTRAP_TOKEN", ADMIN_TOKEN)
        .env("STRATUM_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            return Server {
                child,
                base,
                metrics: format!("http://127.0.0.1:{metrics_port}"),
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("stratum serve did not become ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_on_one_database_make_one_gap_free_log() {
    let Some(db) = postgres().await else { return };
    let (a, b) = tokio::join!(serve(&db.url), serve(&db.url));
    let client = reqwest::Client::new();
    let post = |base: String, path: String, body: Value| {
        let client = client.clone();
        async move {
            client
                .post(format!("{base}{path}"))
                .bearer_auth(ADMIN_TOKEN)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    // 40 members admitted, half through each replica, all at once; then
    // each reports progress through the other replica.
    let admits: Vec<_> = (0..40)
        .map(|i| {
            let base = if i % 2 == 0 { a.base.clone() } else { b.base.clone() };
            tokio::spawn(post(
                base,
                "/v1/admin/cluster/members".into(),
                json!({"nodeId": format!("n-{i}"), "role": "compute", "mgmtIp": format!("10.0.0.{}", i + 1)}),
            ))
        })
        .collect();
    for h in admits {
        assert_eq!(h.await.unwrap().status(), 201);
    }
    let reports: Vec<_> = (0..40)
        .flat_map(|i| {
            let base = if i % 2 == 0 {
                b.base.clone()
            } else {
                a.base.clone()
            };
            (0..5).map(move |k| (base.clone(), i, k))
        })
        .map(|(base, i, k)| {
            tokio::spawn(post(
                base,
                format!("/v1/admin/cluster/members/n-{i}/join-progress"),
                json!({"step": format!("join/s{k}")}),
            ))
        })
        .collect();
    for h in reports {
        assert_eq!(h.await.unwrap().status(), 200);
    }
    let get = |url: String| {
        let client = client.clone();
        async move {
            let res = client
                .get(url)
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await
                .unwrap();
            res.json::<Value>().await.unwrap()
        }
    };
    // Each reads the other's writes, with no lost update.
    for (base, other) in [(&a.base, 1), (&b.base, 0)] {
        let m = get(format!("{base}/v1/admin/cluster/members/n-{other}")).await;
        assert!(m["joinStep"].as_str().unwrap().starts_with("join/s"), "{m}");
        assert_eq!(m["version"], 6, "admitted and five reports, none lost: {m}");
    }
    // One log: bootstrap + 40 admissions + 200 reports, gap-free, chained.
    let v = get(format!("{}/v1/admin/events/verify", a.base)).await;
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["position"], 241, "{v}");
    let tokens: i64 = {
        use sqlx::Connection;
        let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
        sqlx::query_scalar("SELECT count(*) FROM rm_tokens")
            .fetch_one(&mut c)
            .await
            .unwrap()
    };
    assert_eq!(tokens, 1, "only one replica bootstrapped");
    drop((a, b));
}
