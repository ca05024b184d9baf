//! The record tells the truth against the people around it, through the
//! built binary: hostile text is refused and, where an old record holds
//! it, shown escaped or isolated; the person who asked is named when the
//! service acted for them; an idempotency key is its caller's; answers are
//! paged; guessing is throttled per address and a node agent's reports per
//! node.

use reqwest::StatusCode;
use serde_json::{json, Value};

use super::binary::*;
use super::remote_cli::stratum;

/// An admin request with a raw JSON body: the status and the body.
async fn send(server: &Server, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
    server
        .call(server.http.request(method, server.url(path)).json(&body))
        .await
}

fn field_of(body: &Value) -> Vec<String> {
    body["fieldErrors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| f["field"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn hostile_text_is_refused_naming_its_field_and_ordinary_text_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    server.admit_three().await;
    // The node's own token, as a compromised node agent would hold it.
    let node = server.token_for("node/n-3", "NodeAgent").await;
    let res = server
        .http
        .post(server.url(&format!("{MEMBERS}/n-3/join-failed")))
        .bearer_auth(&node)
        .json(&json!({"step": "join/raft-ovn", "error": "ok\u{1b}]0;PWNED\u{7}"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "INVALID_INPUT", "{body}");
    assert_eq!(field_of(&body), ["error"], "{body}");

    for reason in [
        "\u{1b}[1A\u{1b}[2Kplanned",
        "planned maintenance \u{202e}gnp.exe",
    ] {
        let (status, body) = server
            .post(
                &format!("{MEMBERS}/n-1/decommission"),
                json!({ "reason": reason }),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(field_of(&body), ["reason"], "{body}");
    }
    let patch = |labels: Value| {
        send(
            &server,
            reqwest::Method::PATCH,
            "/v1/admin/cluster/members/n-1",
            json!({ "labels": labels }),
        )
    };
    let (status, body) = patch(json!({"x\"><script>alert(1)</script>": "v"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(field_of(&body), ["labels"], "{body}");
    let (status, body) = patch(json!({"topology.rack": "\u{1b}[31mr1"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(field_of(&body), ["labels.topology.rack"], "{body}");
    let many: serde_json::Map<String, Value> = (0..10_000)
        .map(|i| (format!("k{i}"), Value::from("v")))
        .collect();
    let (status, body) = patch(Value::Object(many)).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["fieldErrors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("at most 64"),
        "{body}"
    );

    // Ordinary UTF-8 is text like any other.
    let error = "ovsdb-server: connexion refusée – nœud 节点 ✓ 🔥";
    let m = server
        .member_post(
            "n-3",
            "join-failed",
            json!({"step": "join/raft-ovn", "error": error}),
        )
        .await;
    assert_eq!(m["failedError"], error, "{m}");
    let (status, body) = patch(json!({"topology.rack": "r1", "example.com/zone": "eu-1a"})).await;
    assert_eq!(status, 200, "{body}");
}

/// Writes events the service would refuse today into the log, as an old
/// version may have recorded them, and rebuilds the read models with the
/// host CLI: the record holds them from then on.
async fn record_old_hostile_text(dir: &std::path::Path) {
    use stratum_domain::event::{DomainEvent, MemberJoinFailed};
    use stratum_domain::log::EventMeta;
    use stratum_store as store;
    use stratum_store::testing::{append_to_stream, NewEvent};
    let url = format!("sqlite://{}", dir.join("stratum.db").display());
    let s = store::connect(&url).await.unwrap();
    let version = s.read_stream("member/n-3").await.unwrap().len() as u64;
    let events = [
        DomainEvent::MemberJoinFailed(MemberJoinFailed {
            node_id: "n-3".into(),
            step: "join/raft-ovn".into(),
            error: "ok\u{1b}]0;PWNED\u{7}".into(),
            rafts: Vec::new(),
        }),
        DomainEvent::MemberDecommissioned {
            node_id: "n-3".into(),
            reason: "planned maintenance \u{202e}gnp.exe".into(),
            by: "user/admin".into(),
        },
    ]
    .into_iter()
    .map(|e| {
        let enc = stratum_domain::stored::encode(&e);
        NewEvent {
            event_type: enc.event_type.into(),
            schema_version: enc.schema_version,
            event_id: uuid::Uuid::new_v4(),
            occurred_at: chrono::Utc::now(),
            meta: EventMeta {
                principal: "user/admin".into(),
                ..Default::default()
            },
            payload: enc.payload,
        }
    })
    .collect();
    append_to_stream(&*s, "member/n-3", version, events)
        .await
        .unwrap();
    let out = host(dir, &["replay", "--rebuild"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn an_old_record_of_hostile_text_replays_and_is_shown_escaped_or_isolated() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut server = start(d, &[]).await;
    server.admit_three().await;
    server.child.kill().await.unwrap();
    record_old_hostile_text(d).await;
    // The old log still replays to its read models.
    let out = host(d, &["replay", "--check"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = start(d, &[]).await;
    let laptop = tempfile::tempdir().unwrap();
    for args in [
        &["members", "get", "n-3"][..],
        &["members", "get", "n-3", "-o", "json"],
        &["members", "get", "n-3", "-o", "yaml"],
        &["members", "history", "n-3"],
    ] {
        let out = stratum(&server, laptop.path(), args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(
            !shown.contains(['\u{1b}', '\u{7}', '\u{202e}']),
            "{args:?} printed raw control characters: {shown:?}"
        );
        assert!(
            shown.contains("u001B") || shown.contains("u202E"),
            "{args:?} shows them escaped: {shown}"
        );
    }
    // JSON output still reads back as what the record holds.
    let out = stratum(
        &server,
        laptop.path(),
        &["members", "get", "n-3", "-o", "json"],
    );
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        m["decommissionReason"],
        "planned maintenance \u{202e}gnp.exe"
    );

    // The console isolates the record's text from its own words.
    let Some(browser) = super::console::chromium() else {
        assert!(
            std::env::var("STRATUM_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "Chromium is required here (STRATUM_REQUIRE_CHROMIUM=1)"
        );
        eprintln!("\n!!! chromium is not installed: bidi isolation was NOT checked in a browser\n");
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let url = server.url(&format!("/console/#token={ADMIN}"));
    let dom = super::console::headless(&browser, profile.path(), &["--dump-dom"], &url);
    let row = dom
        .split("<tr")
        .find(|r| r.contains("data-node-id=\"n-3\""))
        .unwrap_or_else(|| panic!("no row of n-3:\n{dom}"));
    // The override is shown as an escape, inside an isolate; the
    // console's own attribution stands outside it.
    assert!(
        row.contains("<bdi>planned maintenance \\u202Egnp.exe</bdi> (by <bdi>user/admin</bdi>)"),
        "the reason is isolated and the attribution stands outside it: {row}"
    );
    assert!(
        !dom.contains('\u{202e}'),
        "no override reaches the page raw"
    );
    assert!(!dom.contains('\u{1b}'), "no escape reaches the page raw");
}

#[tokio::test]
async fn decommissioning_an_active_member_names_the_person_not_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    server.admit_three().await;
    server.progress("n-3", "join/raft-patroni").await;
    server.member_post("n-3", "join-complete", json!({})).await;
    // Someone other than whoever admitted it decommissions it.
    let alice = server.token_for("user/alice", "ClusterOperator").await;
    let res = server
        .http
        .post(server.url(&format!("{MEMBERS}/n-3/decommission")))
        .bearer_auth(&alice)
        .json(&json!({"reason": "rack moved"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let m = server.cleaned("n-3").await;
    assert_eq!(m["state"], "decommissioned", "{m}");
    assert_eq!(m["decommissionedBy"], "user/alice", "{m}");
    // The service appended the decommission; it did so for user/alice.
    let history = server.history("n-3").await;
    let d = of_type(&history, "MemberDecommissioned")[0];
    assert_eq!(d["principal"], "stratum", "{d}");
    assert_eq!(d["initiator"], "user/alice", "{d}");
    for e in of_type(&history, "RaftPeerRemoved") {
        assert_eq!(e["initiator"], "user/alice", "{e}");
    }
    let (_, page) = server
        .get("/v1/admin/events?type=MemberDecommissioned&limit=1000")
        .await;
    assert_eq!(page["events"][0]["initiator"], "user/alice", "{page}");
    // Filtering by actor finds what the person asked for, too.
    let (_, page) = server
        .get("/v1/admin/events?actor=user/alice&limit=1000")
        .await;
    assert!(
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "MemberDecommissioned"),
        "{page}"
    );
    // The CLI says who, and that the service acted for them.
    let laptop = tempfile::tempdir().unwrap();
    let out = stratum(&server, laptop.path(), &["members", "history", "n-3"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    let line = shown
        .lines()
        .find(|l| l.contains("MemberDecommissioned"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(line.contains("user/alice (via stratum)"), "{line}");

    let Some(browser) = super::console::chromium() else {
        assert!(std::env::var("STRATUM_REQUIRE_CHROMIUM").as_deref() != Ok("1"));
        eprintln!("\n!!! chromium is not installed: the Decommissions panel was NOT checked\n");
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let url = server.url(&format!("/console/#token={ADMIN}&view=audit"));
    let dom = super::console::headless(&browser, profile.path(), &["--dump-dom"], &url);
    let panel = dom
        .split("id=\"audit-decommissions\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no Decommissions panel:\n{dom}"));
    let row = panel
        .split("<tr")
        .find(|r| r.contains("MemberDecommissioned"))
        .unwrap_or_else(|| panic!("no decommission in the panel:\n{panel}"));
    assert!(row.contains("data-by=\"user/alice\""), "{row}");
    assert!(
        row.contains("<bdi>user/alice</bdi> (via <bdi>stratum</bdi>)"),
        "{row}"
    );
}

#[tokio::test]
async fn an_idempotency_key_is_its_callers_and_the_same_json_is_the_same_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    let ops = server.token_for("user/ops", "AdministratorAccess").await;
    let admit = |token: &str, body: &'static str| {
        server
            .http
            .post(server.url(MEMBERS))
            .bearer_auth(token.to_owned())
            .header("content-type", "application/json")
            .header("idempotency-key", "admit-once")
            .body(body)
            .send()
    };
    let first = admit(
        ADMIN,
        r#"{"nodeId": "n-1", "role": "hybrid", "mgmtIp": "192.0.2.11"}"#,
    )
    .await
    .unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    // Another principal with the same key gets its own result.
    let theirs = admit(
        &ops,
        r#"{"nodeId": "n-2", "role": "hybrid", "mgmtIp": "192.0.2.12"}"#,
    )
    .await
    .unwrap();
    assert_eq!(theirs.status(), StatusCode::CREATED);
    assert!(theirs.headers().get("idempotent-replayed").is_none());
    let theirs: Value = theirs.json().await.unwrap();
    assert_eq!(theirs["nodeId"], "n-2", "{theirs}");
    // The same JSON in another order and spacing is a replay.
    let again = admit(
        ADMIN,
        r#"{ "mgmtIp":"192.0.2.11","nodeId":"n-1",  "role":"hybrid" }"#,
    )
    .await
    .unwrap();
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    // Each principal's event is its own.
    let (_, page) = server.get("/v1/admin/events?type=MemberAdmitted").await;
    let by: Vec<(&str, &str)> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["payload"]["nodeId"].as_str().unwrap(),
                e["principal"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(by, [("n-1", "user/admin"), ("n-2", "user/ops")]);
}

#[tokio::test]
async fn a_long_history_is_answered_a_page_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    server.admit("n-1", "192.0.2.11").await;
    // 2,600 events in one member's stream: each step is new.
    let progress = format!("{MEMBERS}/n-1/join-progress");
    let mut sent = Vec::new();
    for i in 0..2_599 {
        sent.push(server.post(&progress, json!({"step": format!("join/s{i}")})));
        if sent.len() == 64 {
            for (status, body) in futures::future::join_all(sent.drain(..)).await {
                assert_eq!(status, 200, "{body}");
            }
        }
    }
    for (status, body) in futures::future::join_all(sent).await {
        assert_eq!(status, 200, "{body}");
    }
    let path = format!("{MEMBERS}/n-1/history");
    let (_, first) = server.get(&path).await;
    assert_eq!(
        first["events"].as_array().unwrap().len(),
        100,
        "the default page"
    );
    let (status, body) = server.get(&format!("{path}?limit=1001")).await;
    assert_eq!(status, 400, "{body}");
    let mut total = 0;
    let mut cursor: Option<String> = None;
    loop {
        let q = cursor
            .as_ref()
            .map_or(String::new(), |c| format!("&cursor={c}"));
        let (status, page) = server.get(&format!("{path}?limit=1000{q}")).await;
        assert_eq!(status, 200, "{page}");
        let n = page["events"].as_array().unwrap().len();
        assert!(n <= 1000);
        total += n;
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert!(total >= 2_600, "{total}");
    // The CLI follows the pages.
    let laptop = tempfile::tempdir().unwrap();
    let out = stratum(
        &server,
        laptop.path(),
        &["members", "history", "n-1", "-o", "json"],
    );
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all.as_array().unwrap().len(), total);
}

#[tokio::test]
async fn guessing_is_throttled_per_address_and_a_valid_token_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = start(dir.path(), &[("STRATUM_METRICS_LISTEN", metrics.clone())]).await;
    let generated = server.token_for("user/ro", "ReadOnly").await;
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for i in 0..300 {
        let res = server
            .http
            .get(server.url(MEMBERS))
            .bearer_auth(format!("wrong-secret-{i:04}-of-a-guessing-client"))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        if status == 429 {
            assert!(res.headers().contains_key("retry-after"));
        }
        *statuses.entry(status).or_default() += 1;
        if i % 25 == 0 {
            // From the same address, the valid tokens keep working.
            for token in [generated.as_str(), ADMIN] {
                let ok = server
                    .http
                    .get(server.url(MEMBERS))
                    .bearer_auth(token)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(ok.status(), 200, "after {i} guesses");
            }
        }
    }
    assert!(
        statuses.keys().all(|s| [401, 429].contains(s)),
        "{statuses:?}"
    );
    assert!(
        statuses.get(&429).copied().unwrap_or(0) >= 200,
        "{statuses:?}"
    );
    for reason in ["unknown_token", "throttled"] {
        let series = format!("stratum_auth_refused_total{{reason=\"{reason}\"}}");
        assert!(metric(&metrics, &series).await > 0, "{series}");
    }
}

#[tokio::test]
async fn a_node_agent_reporting_in_a_loop_is_answered_429() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    server.admit("n-1", "192.0.2.11").await;
    let node = server.token_for("node/n-1", "NodeAgent").await;
    let mut limited = None;
    for i in 0..200 {
        let res = server
            .http
            .post(server.url(&format!("{MEMBERS}/n-1/join-progress")))
            .bearer_auth(&node)
            .json(&json!({"step": format!("join/step-{}", i % 2)}))
            .send()
            .await
            .unwrap();
        if res.status() == 429 {
            limited = Some((i, res.headers()["retry-after"].to_str().unwrap().to_owned()));
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["code"], "RATE_LIMITED", "{body}");
            break;
        }
        assert_eq!(res.status(), 200);
    }
    let (at, retry) = limited.expect("a loop is limited");
    assert!(
        at >= 20,
        "an agent's own pace is never limited: limited at {at}"
    );
    assert!(retry.parse::<u64>().unwrap() >= 1);
    // An operator is not limited.
    for i in 0..50 {
        let (status, _) = server
            .post(
                &format!("{MEMBERS}/n-1/join-progress"),
                json!({"step": format!("join/step-{}", i % 2)}),
            )
            .await;
        assert_eq!(status, 200);
    }
}

/// Every kind of report a node sends is limited per node and kind (issue
/// 39: one node cannot fill the log or the disk by any of them), whatever
/// each report is answered; an operator sending the same is not.
#[tokio::test]
async fn every_kind_of_node_report_is_limited_per_node_and_kind() {
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let server = start(dir.path(), &env).await;
        server.admit("n-1", "192.0.2.11").await;
        let (status, body) = server
            .post(
                "/v1/admin/iam/policies",
                json!({"name": "BackupReporter", "document": {"statements": [{"effect": "Allow", "actions": ["upgrade:ReportBackup"], "resources": ["*"]}]}}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        let (status, t) = server
            .post(
                "/v1/admin/iam/tokens",
                json!({"principal": "node/n-1", "policies": ["NodeAgent", "BackupReporter"]}),
            )
            .await;
        assert_eq!(status, 201, "{t}");
        let node = t["token"].as_str().unwrap().to_owned();
        let upgrade = "/v1/admin/upgrades/upg-0000000000";
        let kinds = [
            (
                format!("{MEMBERS}/n-1/join-failed"),
                json!({"step": "join/raft-openbao", "error": "timed out"}),
            ),
            (format!("{MEMBERS}/n-1/join-complete"), json!({})),
            (
                "/v1/admin/cluster/join-requests".to_owned(),
                json!({"nodeId": "n-1", "mgmtIp": "192.0.2.11"}),
            ),
            (
                format!("{MEMBERS}/n-1/facts"),
                json!({"images": [], "packages": [], "ready": true}),
            ),
            (
                format!("{MEMBERS}/n-1/applied-generation"),
                json!({"generation": 1}),
            ),
            (
                format!("{upgrade}/nodes/n-1/report"),
                json!({"phase": "fetch", "state": "done"}),
            ),
            (
                format!("{upgrade}/backup"),
                json!({"location": "node", "bundle": "/b.tar", "encrypted": true}),
            ),
        ];
        for (path, body) in &kinds {
            let mut answered = std::collections::BTreeSet::new();
            let mut limited = None;
            for i in 0..60 {
                let res = server
                    .http
                    .post(server.url(path))
                    .bearer_auth(&node)
                    .json(body)
                    .send()
                    .await
                    .unwrap();
                let status = res.status().as_u16();
                if status == 429 {
                    let retry = res.headers()["retry-after"].to_str().unwrap().to_owned();
                    let body: Value = res.json().await.unwrap();
                    assert_eq!(body["code"], "RATE_LIMITED", "{path}: {body}");
                    limited = Some((i, retry));
                    break;
                }
                assert!(
                    ![401, 403].contains(&status),
                    "{path}: the node may send it ({status})"
                );
                answered.insert(status);
            }
            let (at, retry) = limited.unwrap_or_else(|| panic!("{path}: a loop is limited"));
            assert!(
                at >= 20,
                "{path}: an agent's own pace is never limited: limited at {at} ({answered:?})"
            );
            assert!(retry.parse::<u64>().unwrap() >= 1, "{path}");
            // Another kind, or an operator, is not limited by it.
            let (status, _) = server.post(path, body.clone()).await;
            assert_ne!(status, 429, "{path}: an operator");
        }
        let res = server
            .http
            .post(server.url(&format!("{MEMBERS}/n-1/join-progress")))
            .bearer_auth(&node)
            .json(&json!({"step": "join/raft-ovn"}))
            .send()
            .await
            .unwrap();
        assert_ne!(res.status(), 429, "another kind");
    }
}

#[tokio::test]
async fn secrets_are_not_cached_the_docs_are_fenced_and_the_cli_says_what_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let server = start(d, &[]).await;
    server.admit_three().await;
    // The answer that holds a new token's secret is never cached.
    let res = server
        .http
        .post(server.url("/v1/admin/iam/tokens"))
        .bearer_auth(ADMIN)
        .json(&json!({"principal": "user/ro", "policies": ["ReadOnly"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(res.headers()["cache-control"], "no-store");
    // The API reference: its own origin only, never framed or sniffed.
    for path in ["/v1/docs/", "/v1/docs/index.html"] {
        let res = server.http.get(server.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let h = res.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{csp}"
        );
        assert_eq!(h["x-content-type-options"], "nosniff");
    }

    let laptop = tempfile::tempdir().unwrap();
    let l = laptop.path();
    // verify with --server asks the server, from any directory.
    let out = stratum(&server, l, &["events", "verify"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.starts_with("verified: "), "{said}");
    let head = said.trim().rsplit(' ').next().unwrap().to_owned();
    let out = stratum(&server, l, &["events", "verify", "--expect-head", &head]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let wrong = format!("1:{}", "00".repeat(32));
    let out = stratum(&server, l, &["events", "verify", "--expect-head", &wrong]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // replay reads a database or an export, never silently the wrong one.
    let out = stratum(&server, l, &["replay", "--check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("events export --server"));
    let out = stratum(&server, l, &["events", "import", "--file", "log.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--database-url"));
    // --as-of takes a time too.
    let later = (chrono::Utc::now() + chrono::Duration::seconds(1)).to_rfc3339();
    let (_, members) = server.get("/v1/admin/cluster/membership").await;
    let out = stratum(&server, l, &["membership", "--as-of", &later, "-o", "json"]);
    let at: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(at["digest"], members["digest"], "{at}");
    let out = stratum(
        &server,
        l,
        &["membership", "--as-of", "2001-01-01T00:00:00Z"],
    );
    assert_eq!(out.status.code(), Some(2));
    let out = stratum(&server, l, &["membership", "--as-of", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    drop(server);
    // The host's token list prints as -o says.
    let table = host(d, &["token", "list"]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("PRINCIPAL") && table.contains("user/ro"),
        "{table}"
    );
    let yaml = host(d, &["token", "list", "-o", "yaml"]);
    let yaml = String::from_utf8_lossy(&yaml.stdout);
    assert!(yaml.contains("principal: user/ro"), "{yaml}");
    let json = host(d, &["token", "list", "-o", "json"]);
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);
}
