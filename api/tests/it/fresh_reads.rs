//! Reads are never stale (docs/architecture.md, "The read path"): every
//! `GET` and the gate answer from the read models in memory, yet a read
//! answers at least the log as it stood when it arrived, whoever wrote:
//! another replica, or a host command on the same database. Each test
//! starts the built binary, on both backends.

use std::process::Command;

use serde_json::{json, Value};

use crate::binary::metric;
use crate::replicas::serve;
use crate::support::{each_backend, ADMIN_TOKEN};

/// A host command on the database (`stratum token ...`), as JSON.
fn host(db_url: &str, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(args)
        .env("STRATUM_DATABASE_URL", db_url)
        .env("STRATUM_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = client.request(method, url).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// `GET /v1/admin/cluster/membership` on `base` with `token`.
async fn membership_as(client: &reqwest::Client, base: &str, token: &str) -> (u16, Value) {
    let url = format!("{base}/v1/admin/cluster/membership");
    call(client, reqwest::Method::GET, url, token, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_server_is_read_through_another_at_once() {
    for db in each_backend().await {
        let a = serve(&db.url).await;
        let b = serve(&db.url).await;
        let client = reqwest::Client::new();
        let members = |base: &str| format!("{base}/v1/admin/cluster/members");
        let mut seen = 0;
        for i in 0..100 {
            let node = format!("n-{i}");
            let (status, admitted) = call(
                &client,
                reqwest::Method::POST,
                members(&a.base),
                ADMIN_TOKEN,
                Some(json!({"nodeId": node, "role": "compute", "mgmtIp": format!("10.1.{}.{}", i / 200, i % 200 + 1)})),
            )
            .await;
            assert_eq!(status, 201, "{}: {admitted}", db.backend);
            // At once, with no sleep: the other server's read includes it.
            let (status, read) = call(
                &client,
                reqwest::Method::GET,
                format!("{}/{node}", members(&b.base)),
                ADMIN_TOKEN,
                None,
            )
            .await;
            assert_eq!(
                status, 200,
                "{}: write {i} not read through B: {read}",
                db.backend
            );
            assert_eq!(read, admitted, "{}", db.backend);
            let (_, peers) = call(
                &client,
                reqwest::Method::GET,
                format!("{}/v1/admin/cluster/peers", b.base),
                ADMIN_TOKEN,
                None,
            )
            .await;
            let generation = peers["generation"].as_u64().unwrap();
            assert!(
                generation > seen,
                "{}: the admission moved the generation past {seen}: {peers}",
                db.backend
            );
            seen = generation;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_on_the_host_is_refused_on_the_next_request() {
    for db in each_backend().await {
        let a = serve(&db.url).await;
        let b = serve(&db.url).await;
        let client = reqwest::Client::new();
        for round in 0..3 {
            let made = host(
                &db.url,
                &[
                    "token",
                    "create",
                    "--principal",
                    "user/reader",
                    "--policy",
                    "ReadOnly",
                ],
            );
            let secret = made["token"].as_str().unwrap().to_owned();
            let id = made["id"].as_str().unwrap().to_owned();
            // Made on the host while both servers run: good at once.
            for base in [&a.base, &b.base] {
                let (status, body) = membership_as(&client, base, &secret).await;
                assert_eq!(status, 200, "{} round {round}: {body}", db.backend);
            }
            host(&db.url, &["token", "revoke", &id]);
            for base in [&a.base, &b.base] {
                let (status, body) = membership_as(&client, base, &secret).await;
                assert_eq!(status, 401, "{} round {round}: {body}", db.backend);
                assert_eq!(body["code"], "UNAUTHENTICATED", "{body}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_policy_is_refused_by_every_server_on_the_next_request() {
    for db in each_backend().await {
        let a = serve(&db.url).await;
        let b = serve(&db.url).await;
        let client = reqwest::Client::new();
        let made = host(&db.url, &["token", "create", "--principal", "user/ann"]);
        let secret = made["token"].as_str().unwrap().to_owned();
        let attach = |policies: Value| {
            let client = client.clone();
            let url = format!("{}/v1/admin/iam/principals/user%2Fann/policies", a.base);
            async move {
                let (status, body) = call(
                    &client,
                    reqwest::Method::PUT,
                    url,
                    ADMIN_TOKEN,
                    Some(json!({ "policies": policies })),
                )
                .await;
                assert_eq!(status, 200, "{body}");
            }
        };
        let read = |base: String| {
            let client = client.clone();
            let secret = secret.clone();
            async move { membership_as(&client, &base, &secret).await.0 }
        };
        for _ in 0..3 {
            attach(json!(["ReadOnly"])).await;
            assert_eq!(read(b.base.clone()).await, 200, "{}", db.backend);
            attach(json!([])).await;
            assert_eq!(read(b.base.clone()).await, 403, "{}", db.backend);
            assert_eq!(read(a.base.clone()).await, 403, "{}", db.backend);
        }
    }
}

/// A token of `user/operator` with `ClusterOperator`, made on the host:
/// its secret and its id.
fn operator_token(db_url: &str) -> (String, String) {
    let made = host(db_url, crate::binary::OPERATOR_TOKEN);
    let field = |k: &str| made[k].as_str().unwrap().to_owned();
    (field("token"), field("id"))
}

/// `POST /v1/admin/cluster/members` on `base` with `token`: admits `node`.
async fn admit_as(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    node: &str,
    ip: &str,
) -> (u16, Value) {
    let url = format!("{base}/v1/admin/cluster/members");
    let body = json!({"nodeId": node, "role": "compute", "mgmtIp": ip});
    call(client, reqwest::Method::POST, url, token, Some(body)).await
}

/// Whether `node` is a member, read through `base` as the administrator.
async fn is_member(client: &reqwest::Client, base: &str, node: &str) -> bool {
    let url = format!("{base}/v1/admin/cluster/members/{node}");
    let (status, body) = call(client, reqwest::Method::GET, url, ADMIN_TOKEN, None).await;
    assert!(matches!(status, 200 | 404), "{status}: {body}");
    status == 200
}

/// Admits `{prefix}-{round}-{i}` through each of `bases` in turn with
/// `token`, at `10.{subnet}.{round}.{i + 1}`: each is refused with
/// `status` and `code`. Both are sent before anything is read back, so
/// each server is asked while its read models may be behind.
async fn refused_through(
    client: &reqwest::Client,
    bases: [&str; 2],
    token: &str,
    (prefix, subnet, round): (&str, u8, usize),
    (status, code): (u16, &str),
    backend: impl std::fmt::Display,
) {
    for (i, base) in bases.into_iter().enumerate() {
        let node = format!("{prefix}-{round}-{i}");
        let ip = format!("10.{subnet}.{round}.{}", i + 1);
        let (got, body) = admit_as(client, base, token, &node, &ip).await;
        assert_eq!(got, status, "{backend} round {round}: {body}");
        assert_eq!(body["code"], code, "{body}");
    }
}

/// None of the members [`refused_through`] asked for in `rounds` rounds
/// through `bases` (`{prefix}-{round}-{i}`) was stored, read through each
/// of them.
async fn none_stored(
    client: &reqwest::Client,
    bases: [&str; 2],
    (prefix, rounds): (&str, usize),
    backend: impl std::fmt::Display,
) {
    let nodes =
        (0..rounds).flat_map(|r| (0..bases.len()).map(move |i| format!("{prefix}-{r}-{i}")));
    for node in nodes {
        for base in bases {
            assert!(
                !is_member(client, base, &node).await,
                "{backend}: a refused write was stored ({node})"
            );
        }
    }
}

/// Writes are held to the reads' rule: a token made on the host writes at
/// once through either server, and once it is revoked on the host, its
/// next write is refused by both, and nothing of it is written. Two gates
/// that skip the head check for writes fail it on SQLite: one that
/// authenticates them against the read models in memory refuses the
/// token just made, and one that falls back to the checked read models
/// only when those refuse stores the revoked token's write
/// (`docs/benchmarks.md`, fifteenth session). On PostgreSQL a server
/// hears of the host's commit within milliseconds, so there they would
/// fail it only when the write wins that race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_on_the_host_writes_nothing_on_the_next_request() {
    for db in each_backend().await {
        let a = serve(&db.url).await;
        let b = serve(&db.url).await;
        let client = reqwest::Client::new();
        for round in 0..3 {
            let (secret, id) = operator_token(&db.url);
            for (i, base) in [&a.base, &b.base].into_iter().enumerate() {
                let node = format!("made-{round}-{i}");
                let ip = format!("10.2.{round}.{}", i + 1);
                let (status, body) = admit_as(&client, base, &secret, &node, &ip).await;
                assert_eq!(status, 201, "{} round {round}: {body}", db.backend);
            }
            host(&db.url, &["token", "revoke", &id]);
            let bases = [a.base.as_str(), b.base.as_str()];
            let refused = (401, "UNAUTHENTICATED");
            refused_through(
                &client,
                bases,
                &secret,
                ("revoked", 3, round),
                refused,
                &db.backend,
            )
            .await;
        }
        // Nothing of the refused writes was stored, then or since.
        let bases = [a.base.as_str(), b.base.as_str()];
        none_stored(&client, bases, ("revoked", 3), &db.backend).await;
    }
}

/// A policy detached through one server refuses the next write through
/// the other (403), and nothing of it is written. The token's own
/// policies are none: what it may do is only what its principal has
/// attached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_policy_refuses_the_next_write_through_every_server() {
    for db in each_backend().await {
        let a = serve(&db.url).await;
        let b = serve(&db.url).await;
        let client = reqwest::Client::new();
        let made = host(&db.url, &["token", "create", "--principal", "user/ann"]);
        let secret = made["token"].as_str().unwrap().to_owned();
        let attach = |policies: Value| {
            let client = client.clone();
            let url = format!("{}/v1/admin/iam/principals/user%2Fann/policies", a.base);
            async move {
                let (status, body) = call(
                    &client,
                    reqwest::Method::PUT,
                    url,
                    ADMIN_TOKEN,
                    Some(json!({ "policies": policies })),
                )
                .await;
                assert_eq!(status, 200, "{body}");
            }
        };
        for round in 0..3 {
            attach(json!(["ClusterOperator"])).await;
            let (status, body) = admit_as(
                &client,
                &b.base,
                &secret,
                &format!("held-{round}"),
                &format!("10.4.{round}.1"),
            )
            .await;
            assert_eq!(status, 201, "{} round {round}: {body}", db.backend);
            attach(json!([])).await;
            // Through B first, whose read models were not the ones
            // changed; then through A, which detached it.
            let bases = [b.base.as_str(), a.base.as_str()];
            let refused = (403, "ACCESS_DENIED");
            refused_through(
                &client,
                bases,
                &secret,
                ("detached", 5, round),
                refused,
                &db.backend,
            )
            .await;
        }
        // Nothing of the refused writes was stored, then or since.
        let bases = [a.base.as_str(), b.base.as_str()];
        none_stored(&client, bases, ("detached", 3), &db.backend).await;
    }
}

/// An answer that stores nothing of its own is held to the same rule:
/// once a token is revoked through one server, its retry of a write it
/// made (the kept answer of its `Idempotency-Key`), a write the domain
/// refuses (its node is a member already), a request only validated (a
/// field is wrong) and a body that is not JSON are each refused (401)
/// through the other server, not answered with what that server found,
/// and each refusal is counted once, as the gate counts its own. The gate
/// of a command route admits a caller against the read models in memory;
/// the writer authorizes the command again, and any answer it did not
/// allow at a decision the log backs waits for the checked read models.
/// Without that wait, these are answered 400 or with the writer's own
/// refusal, uncounted, on SQLite, where the other server learns of the
/// revocation by polling the head each second; on PostgreSQL it hears of
/// it within milliseconds, so there only when the request wins that race.
/// One kind of answer per round: a server that refused once has caught
/// up with the revocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_learns_nothing_from_an_answer_no_commit_backs() {
    const REVOKED: &str = "stratum_auth_refused_total{reason=\"revoked\"}";
    for db in each_backend().await {
        let a = serve(&db.url).await;
        let b = serve(&db.url).await;
        let client = reqwest::Client::new();
        let kinds = [
            "a kept answer",
            "a refusal",
            "a request only validated",
            "a body that is not JSON",
        ];
        for (round, kind) in kinds.into_iter().enumerate() {
            let (secret, id) = operator_token(&db.url);
            let body = json!({"nodeId": format!("kept-{round}"), "role": "compute", "mgmtIp": format!("10.6.{round}.1")})
                .to_string();
            let key = format!("admit-{round}");
            let admit = |base: &str, key: Option<&str>, body: &str| {
                let mut req = client
                    .post(format!("{base}/v1/admin/cluster/members"))
                    .bearer_auth(&secret)
                    .header("Content-Type", "application/json")
                    .body(body.to_owned());
                if let Some(key) = key {
                    req = req.header("Idempotency-Key", key);
                }
                async move {
                    let res = req.send().await.unwrap();
                    let status = res.status().as_u16();
                    (status, res.json::<Value>().await.unwrap_or(Value::Null))
                }
            };
            let (status, got) = admit(&b.base, Some(&key), &body).await;
            assert_eq!(status, 201, "{} round {round}: {got}", db.backend);
            let url = format!("{}/v1/admin/iam/tokens/{id}/revoke", a.base);
            let (status, got) = call(&client, reqwest::Method::POST, url, ADMIN_TOKEN, None).await;
            assert_eq!(status, 200, "{got}");
            let (key, body) = match kind {
                "a kept answer" => (Some(key.as_str()), body),
                "a refusal" => (None, body),
                "a request only validated" => (
                    None,
                    json!({"nodeId": "n-x", "role": "bogus", "mgmtIp": "10.6.9.1"}).to_string(),
                ),
                _ => (None, "{not JSON".to_owned()),
            };
            for server in [&b, &a] {
                let metrics = server.metrics.trim_start_matches("http://");
                let counted = || metric(metrics, REVOKED);
                let before = counted().await;
                let (status, got) = admit(&server.base, key, &body).await;
                assert_eq!(
                    (status, got["code"].as_str()),
                    (401, Some("UNAUTHENTICATED")),
                    "{} round {round}, {kind} through {}: {got}",
                    db.backend,
                    server.base
                );
                // Refused as the gate refuses: logged and counted once.
                assert_eq!(
                    counted().await,
                    before + 1,
                    "{} round {round}, {kind}",
                    db.backend
                );
            }
        }
    }
}

/// The common read path and the gate read nothing of the database but the
/// shared head check: 1,000 concurrent `GET`s of a member and of the peers
/// make no token, policy or read-model query, and far fewer head queries
/// than requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_gets_share_a_few_head_checks() {
    use axum::http::Method;
    for db in each_backend().await {
        // While `held` is true, every head check waits: the reads pile up
        // behind the one in flight, however slowly a loaded machine
        // starts their tasks.
        let (held, released) = tokio::sync::watch::channel(false);
        let counting = std::sync::Arc::new(
            stratum_api::testing::CountingStore::new(
                stratum_store::connect(&db.url).await.unwrap(),
            )
            .heading_through(move || {
                let mut released = released.clone();
                Box::pin(async move {
                    let _ = released.wait_for(|held| !held).await;
                })
            }),
        );
        let svc = stratum_api::service::start(counting.clone(), crate::support::config())
            .await
            .unwrap();
        let app = crate::support::TestApp {
            router: stratum_api::http::app(svc.state.clone()),
            svc,
        };
        let res = app
            .call(
                Method::POST,
                "/v1/admin/cluster/members",
                Some(json!({"nodeId": "n-1", "role": "control", "mgmtIp": "10.0.0.1"})),
            )
            .await;
        assert_eq!(res.status, 201, "{}", res.body);
        // Half the reads with a generated token (found by its SHA-256),
        // half with the bootstrap token (a chosen secret, checked once).
        let made = app
            .call(
                Method::POST,
                "/v1/admin/iam/tokens",
                Some(json!({"principal": "user/reader", "policies": ["ReadOnly"]})),
            )
            .await;
        assert_eq!(made.status, 201, "{}", made.body);
        let generated = made.body["token"].as_str().unwrap().to_owned();
        counting.take();
        held.send_replace(true);
        let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let gets: Vec<_> = (0..1000)
            .map(|i| {
                let router = app.router.clone();
                let started = started.clone();
                let token = if i % 4 < 2 {
                    generated.clone()
                } else {
                    ADMIN_TOKEN.to_owned()
                };
                tokio::spawn(async move {
                    use tower::ServiceExt;
                    started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let path = if i % 2 == 0 {
                        "/v1/admin/cluster/members/n-1"
                    } else {
                        "/v1/admin/cluster/peers"
                    };
                    let req = axum::http::Request::get(path)
                        .header("authorization", format!("Bearer {token}"))
                        .body(axum::body::Body::empty())
                        .unwrap();
                    router.oneshot(req).await.unwrap().status().as_u16()
                })
            })
            .collect();
        // Every read's task running (5 s at most), then a moment for the
        // reads to reach the gate's check; a read that comes later costs
        // at most one more check, shared with any other late reads.
        let all_started = std::time::Instant::now();
        while started.load(std::sync::atomic::Ordering::Relaxed) < 1000
            && all_started.elapsed() < std::time::Duration::from_secs(5)
        {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        held.send_replace(false);
        for g in gets {
            assert_eq!(g.await.unwrap(), 200, "{}", db.backend);
        }
        let calls = counting.take();
        let heads = calls.get("head").copied().unwrap_or(0);
        let others: Vec<_> = calls.iter().filter(|(m, _)| **m != "head").collect();
        assert!(
            others.is_empty(),
            "{}: the reads made other store calls: {calls:?}",
            db.backend
        );
        assert!(heads >= 1, "{}: every read checks the head", db.backend);
        // Unshared, each read makes its own (1,000). Held, the reads that
        // arrive during the first check share the second: a few in all,
        // and some more if a loaded machine starts a read's task late.
        assert!(
            heads <= 100,
            "{}: 1,000 reads made {heads} head checks; they share them",
            db.backend
        );
        eprintln!(
            "{}: 1,000 concurrent GETs made {heads} head checks",
            db.backend
        );
    }
}

/// A node agent's reconcile loop across servers: it long-polls the peers on
/// one server with its own `NodeAgent` token, a change is made through the
/// other, the long-poll answers with the new generation (woken by
/// LISTEN/NOTIFY on PostgreSQL, by the head poll on SQLite), and the
/// agent's report leaves nothing lagging, read through the first server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_agents_long_poll_wakes_with_a_change_made_through_another_server() {
    for db in each_backend().await {
        let a = serve(&db.url).await;
        let b = serve(&db.url).await;
        let client = reqwest::Client::new();
        let admit = |node: &str, ip: &str| {
            let body = json!({"nodeId": node, "role": "compute", "mgmtIp": ip});
            call(
                &client,
                reqwest::Method::POST,
                format!("{}/v1/admin/cluster/members", a.base),
                ADMIN_TOKEN,
                Some(body),
            )
        };
        assert_eq!(admit("n-1", "10.3.0.1").await.0, 201, "{}", db.backend);
        let made = host(
            &db.url,
            &[
                "token",
                "create",
                "--principal",
                "node/n-1",
                "--policy",
                "NodeAgent",
            ],
        );
        let agent = made["token"].as_str().unwrap().to_owned();
        let (_, now) = membership_as(&client, &b.base, ADMIN_TOKEN).await;
        let g = now["generation"].as_u64().unwrap();
        let poll = {
            let (client, agent) = (client.clone(), agent.clone());
            let url = format!("{}/v1/admin/cluster/peers?after={g}&waitSeconds=30", b.base);
            tokio::spawn(
                async move { call(&client, reqwest::Method::GET, url, &agent, None).await },
            )
        };
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!poll.is_finished(), "{}: the long-poll waits", db.backend);
        assert_eq!(admit("n-2", "10.3.0.2").await.0, 201, "{}", db.backend);
        let (status, peers) = tokio::time::timeout(std::time::Duration::from_secs(10), poll)
            .await
            .expect("the long-poll answered within 10 s")
            .unwrap();
        assert_eq!(status, 200, "{}: {peers}", db.backend);
        let seen = peers["generation"].as_u64().unwrap();
        assert!(seen > g, "{}: {peers}", db.backend);
        let (status, body) = call(
            &client,
            reqwest::Method::POST,
            format!("{}/v1/admin/cluster/members/n-1/applied-generation", b.base),
            &agent,
            Some(json!({ "generation": seen })),
        )
        .await;
        assert_eq!(status, 200, "{}: {body}", db.backend);
        let (_, summary) = membership_as(&client, &a.base, ADMIN_TOKEN).await;
        let lagging: Vec<&str> = summary["lagging"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            lagging,
            ["n-2"],
            "{}: only the node with no agent lags",
            db.backend
        );
    }
}
