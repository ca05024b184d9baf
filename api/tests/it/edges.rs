//! Request edges, through the built binary: request ids, numbers out of
//! range, repeated JSON keys, a node agent filing a join request for
//! another node, and how a chosen token secret is kept.

use serde_json::{json, Value};

use crate::binary::{of_type, start, Server, ADMIN, MEMBERS};

async fn events(server: &Server) -> Vec<Value> {
    let (status, page) = server.get("/v1/admin/events?limit=1000").await;
    assert_eq!(status, 200, "{page}");
    page["events"].as_array().unwrap().clone()
}

#[tokio::test]
async fn events_carry_the_servers_request_id_and_the_callers_in_a_field_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    let mut answered = Vec::new();
    for (node, ip) in [("n-1", "192.0.2.11"), ("n-2", "192.0.2.12")] {
        let res = server
            .http
            .post(server.url(MEMBERS))
            .bearer_auth(ADMIN)
            .header("X-Request-Id", "deploy-42")
            .json(&json!({"nodeId": node, "role": "hybrid", "mgmtIp": ip}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        answered.push(res.headers()["x-request-id"].to_str().unwrap().to_owned());
    }
    assert_ne!(answered[0], answered[1], "each request has its own id");
    let all = events(&server).await;
    let admitted = of_type(&all, "MemberAdmitted");
    assert_eq!(admitted.len(), 2);
    for (e, id) in admitted.iter().zip(&answered) {
        assert_eq!(e["requestId"], id.as_str(), "{e}");
        assert_eq!(e["clientRequestId"], "deploy-42", "{e}");
        assert_eq!(e["correlation"], Value::Null, "{e}");
    }
    // An id the server would not record is refused before anything runs.
    let res = server
        .http
        .post(server.url(MEMBERS))
        .bearer_auth(ADMIN)
        .header("X-Request-Id", "two words")
        .json(&json!({"nodeId": "n-3", "role": "hybrid", "mgmtIp": "192.0.2.13"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["fieldErrors"][0]["field"], "X-Request-Id", "{body}");
    assert_eq!(
        events(&server).await.len(),
        all.len(),
        "nothing was written"
    );
}

#[tokio::test]
async fn numbers_out_of_range_and_repeated_keys_are_refused_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    for path in [
        "/v1/admin/events?after=9223372036854775808",
        "/v1/admin/events?after=18446744073709551615",
        "/v1/admin/events/stream?after=18446744073709551616",
        "/v1/admin/cluster/peers?after=-1",
    ] {
        let (status, body) = server.get(path).await;
        assert_eq!(status, 400, "{path}: {body}");
        let message = body["fieldErrors"][0]["message"].as_str().unwrap();
        assert!(
            message.contains("from 0 to 2^63-1"),
            "{path}: a person reads it: {message}"
        );
    }

    let before = events(&server).await.len();
    let res = server
        .http
        .post(server.url(MEMBERS))
        .bearer_auth(ADMIN)
        .header("Content-Type", "application/json")
        .body(r#"{"nodeId": "n-1", "role": "hybrid", "mgmtIp": "192.0.2.11", "nodeId": "n-2"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "INVALID_INPUT");
    assert_eq!(body["fieldErrors"][0]["field"], "nodeId", "{body}");
    assert!(
        body["fieldErrors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("more than once"),
        "{body}"
    );
    let res = server
        .http
        .post(server.url(MEMBERS))
        .bearer_auth(ADMIN)
        .header("Content-Type", "application/json")
        .body(r#"{"nodeId": "n-1", "role": "hybrid", "mgmtIp": "192.0.2.11", "labels": {"r": "1", "r": "2"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["fieldErrors"][0]["field"], "labels.r", "{body}");
    assert_eq!(events(&server).await.len(), before, "nothing was written");
}

#[tokio::test]
async fn a_node_agent_files_a_join_request_only_for_its_own_node() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    let (status, token) = server
        .post(
            "/v1/admin/iam/tokens",
            json!({"principal": "node/n-x", "policies": ["NodeAgent"]}),
        )
        .await;
    assert_eq!(status, 201, "{token}");
    let secret = token["token"].as_str().unwrap().to_owned();
    let file = |node: &'static str| {
        server
            .http
            .post(server.url("/v1/admin/cluster/join-requests"))
            .bearer_auth(&secret)
            .json(&json!({"nodeId": node, "mgmtIp": "192.0.2.50"}))
            .send()
    };
    let other = file("n-y").await.unwrap();
    assert_eq!(other.status(), 403);
    let body: Value = other.json().await.unwrap();
    assert_eq!(body["code"], "ACCESS_DENIED", "{body}");
    let own = file("n-x").await.unwrap();
    assert_eq!(own.status(), 201, "{}", own.text().await.unwrap());
}

/// An operator-chosen bootstrap token is kept as a salted Argon2id hash
/// only: neither the log, nor its export, nor the database file holds its
/// SHA-256, and it authenticates (again and again) all the same.
#[tokio::test]
async fn a_chosen_bootstrap_token_is_kept_only_as_a_salted_slow_hash() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    let fast = hex::encode(sha2::Sha256::digest(ADMIN.as_bytes()));
    let all = events(&server).await;
    let issued = of_type(&all, "TokenIssued");
    assert_eq!(issued.len(), 1);
    let payload = &issued[0]["payload"];
    let phc = payload["secretArgon2id"].as_str().unwrap();
    assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
    assert!(payload.get("secretSha256").is_none(), "{payload}");
    for _ in 0..3 {
        let (status, _) = server.get("/v1/admin/cluster/members").await;
        assert_eq!(status, 200);
    }
    // A wrong guess is refused.
    let wrong = server
        .http
        .get(server.url("/v1/admin/cluster/members"))
        .bearer_auth(format!("{ADMIN}x"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    // A generated token is still found by its hash and works.
    let (status, token) = server
        .post(
            "/v1/admin/iam/tokens",
            json!({"principal": "user/ro", "policies": ["ReadOnly"]}),
        )
        .await;
    assert_eq!(status, 201, "{token}");
    let ok = server
        .http
        .get(server.url("/v1/admin/cluster/members"))
        .bearer_auth(token["token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);

    let export = crate::binary::host(dir.path(), &["events", "export"]);
    assert!(export.status.success());
    let text = String::from_utf8_lossy(&export.stdout);
    assert!(text.contains("secretArgon2id"), "{text}");
    assert!(
        !text.contains(&fast),
        "the export holds the token's SHA-256"
    );
    let raw_fast = sha2::Sha256::digest(ADMIN.as_bytes());
    for file in std::fs::read_dir(dir.path()).unwrap() {
        let path = file.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !bytes.windows(32).any(|w| w == raw_fast.as_slice()),
            "{} holds the token's SHA-256",
            path.display()
        );
        assert!(
            !bytes.windows(ADMIN.len()).any(|w| w == ADMIN.as_bytes()),
            "{} holds the token itself",
            path.display()
        );
    }
}

/// Wrong guesses at a chosen secret take one lane with a short queue: a
/// flood of them is answered 401 or 503 at once, a generated token is not
/// slowed, and a bootstrap token that looks generated is refused at start.
#[tokio::test]
async fn guesses_at_a_chosen_secret_are_bounded_and_a_generated_token_is_not_slowed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    let (_, token) = server
        .post(
            "/v1/admin/iam/tokens",
            json!({"principal": "user/ro", "policies": ["ReadOnly"]}),
        )
        .await;
    let generated = token["token"].as_str().unwrap().to_owned();
    let flood: Vec<_> = (0..48)
        .map(|i| {
            server
                .http
                .get(server.url("/v1/admin/cluster/members"))
                .bearer_auth(format!("a-guess-at-the-bootstrap-token-{i:04}"))
                .send()
        })
        .collect();
    let started = std::time::Instant::now();
    let during = server
        .http
        .get(server.url("/v1/admin/cluster/members"))
        .bearer_auth(&generated)
        .send();
    let (answers, during) = tokio::join!(futures::future::join_all(flood), during);
    assert_eq!(during.unwrap().status(), 200);
    let statuses: Vec<u16> = answers
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect();
    assert!(
        statuses.iter().all(|s| [401, 429, 503].contains(s)),
        "{statuses:?}"
    );
    // One address gets at most two slow checks at once, and is throttled
    // past its budget of refused secrets.
    assert!(
        statuses.contains(&429),
        "the queue is bounded per address: {statuses:?}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // A guess is refused again, promptly (from memory when seen lately).
    let again = std::time::Instant::now();
    let res = server
        .http
        .get(server.url("/v1/admin/cluster/members"))
        .bearer_auth("a-guess-at-the-bootstrap-token-0000")
        .send()
        .await
        .unwrap();
    assert!(
        [401, 429].contains(&res.status().as_u16()),
        "{}",
        res.status()
    );
    assert!(again.elapsed() < std::time::Duration::from_millis(500));

    let dir = tempfile::tempdir().unwrap();
    let looks_generated = format!("stt_{}", "A".repeat(43));
    let out = crate::binary::serve_command(
        dir.path(),
        crate::binary::free_port(),
        &[("STRATUM_BOOTSTRAP_TOKEN", looks_generated)],
    )
    .output()
    .await
    .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("must not look like a token stratum generates"));
}
