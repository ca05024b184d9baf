//! The security pass, through the built binary on both backends: each way
//! an attacker found around the rules is tried again as they tried it, and
//! gets the refusal or the safe behaviour.

use std::time::Duration;

use serde_json::{json, Value};

use crate::binary::*;

/// A request with `token`: the status and the body as JSON.
async fn as_token(
    server: &Server,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = server
        .http
        .request(method, server.url(path))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// A custom policy allowing `actions` on everything.
async fn policy(server: &Server, name: &str, actions: &[&str]) {
    let (status, body) = server
        .post(
            "/v1/admin/iam/policies",
            json!({"name": name, "document": {"statements": [{"effect": "Allow", "actions": actions, "resources": ["*"]}]}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn no_way_around_grant_only_what_you_hold() {
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let server = start(dir.path(), &env).await;
        // ops-lead has AdministratorAccess attached; eve may only create
        // tokens.
        let (status, body) = server
            .call(
                server
                    .http
                    .put(server.url("/v1/admin/iam/principals/user%2Fops-lead/policies"))
                    .json(&json!({"policies": ["AdministratorAccess"]})),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        policy(&server, "TokensOnly", &["iam:CreateToken"]).await;
        let eve = server.token_for("user/eve", "TokensOnly").await;

        // A token of ops-lead would carry its AdministratorAccess.
        let (status, body) = as_token(
            &server,
            &eve,
            reqwest::Method::POST,
            "/v1/admin/iam/tokens",
            Some(json!({"principal": "user/ops-lead"})),
        )
        .await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["code"], "ACCESS_DENIED", "{body}");
        assert_eq!(
            body["details"]["notHeld"],
            json!(["AdministratorAccess"]),
            "{body}"
        );
        // Its own token, with what it holds, is made.
        let (status, body) = as_token(
            &server,
            &eve,
            reqwest::Method::POST,
            "/v1/admin/iam/tokens",
            Some(json!({"principal": "user/eve", "policies": ["TokensOnly"]})),
        )
        .await;
        assert_eq!(status, 201, "{body}");

        // A resource policy that gives everyone everything on n-1.
        server.admit("n-1", "192.0.2.11").await;
        policy(&server, "MemberPolicyOnly", &["cluster:SetMemberPolicy"]).await;
        let setter = server.token_for("user/mallory", "MemberPolicyOnly").await;
        let (status, body) = as_token(
            &server,
            &setter,
            reqwest::Method::PUT,
            "/v1/admin/cluster/members/n-1/policy",
            Some(json!({"document": {"statements": [{"effect": "Allow", "principals": ["*"], "actions": ["*"], "resources": ["*"]}]}})),
        )
        .await;
        assert_eq!(status, 403, "{body}");
        let reader = server.token_for("user/rita", "ReadOnly").await;
        let (status, _) = as_token(
            &server,
            &reader,
            reqwest::Method::PATCH,
            "/v1/admin/cluster/members/n-1",
            Some(json!({"labels": {"topology.rack": "r9"}})),
        )
        .await;
        assert_eq!(status, 403, "ReadOnly still cannot change n-1");
    }
}

#[tokio::test]
async fn revocation_ends_an_open_stream_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let server = start(dir.path(), &env).await;
        let (status, t) = server
            .post(
                "/v1/admin/iam/tokens",
                json!({"principal": "user/audit", "policies": ["Auditor"]}),
            )
            .await;
        assert_eq!(status, 201, "{t}");
        let (secret, id) = (t["token"].as_str().unwrap(), t["id"].as_str().unwrap());
        let mut res = reqwest::Client::new()
            .get(server.url("/v1/admin/events/stream"))
            .bearer_auth(secret)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        // The stream delivers what is in the log; then the token is revoked.
        let first = tokio::time::timeout(Duration::from_secs(5), res.chunk())
            .await
            .unwrap()
            .unwrap();
        assert!(first.is_some());
        let (status, body) = server
            .post(&format!("/v1/admin/iam/tokens/{id}/revoke"), json!({}))
            .await;
        assert_eq!(status, 200, "{body}");
        let revoked_at = tokio::time::Instant::now();
        let mut rest = String::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(3), res.chunk()).await {
                Ok(Ok(Some(c))) => rest.push_str(&String::from_utf8_lossy(&c)),
                Ok(Ok(None)) | Ok(Err(_)) => break,
                Err(_) => panic!("the stream went on after its token was revoked: {rest}"),
            }
        }
        let took = revoked_at.elapsed();
        assert!(took < Duration::from_secs(1), "closed in {took:?}");
        assert!(rest.contains("event: end"), "{rest}");
        assert!(rest.contains("revoked"), "{rest}");
        assert!(
            !rest.contains("\"type\":\"TokenRevoked\""),
            "nothing after the revocation is delivered: {rest}"
        );
    }
}

#[tokio::test]
async fn expiry_ends_an_open_stream_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let server = start(dir.path(), &env).await;
        let expires = chrono::Utc::now() + chrono::Duration::seconds(3);
        let (status, t) = server
            .post(
                "/v1/admin/iam/tokens",
                json!({"principal": "user/audit", "policies": ["Auditor"],
                       "expiresAt": expires.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)}),
            )
            .await;
        assert_eq!(status, 201, "{t}");
        let mut res = reqwest::Client::new()
            .get(server.url("/v1/admin/events/stream"))
            .bearer_auth(t["token"].as_str().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        // Nothing is written: only the clock ends the stream.
        let mut all = String::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(6), res.chunk()).await {
                Ok(Ok(Some(c))) => all.push_str(&String::from_utf8_lossy(&c)),
                Ok(Ok(None)) | Ok(Err(_)) => break,
                Err(_) => panic!("the stream went on after its token expired: {all}"),
            }
        }
        let late = chrono::Utc::now() - expires;
        // A quiet stream looks at its credential every half second; the
        // bound leaves a loaded machine a second more than that.
        assert!(
            late >= chrono::Duration::zero() && late < chrono::Duration::seconds(2),
            "closed {late:?} after the expiry"
        );
        assert!(all.contains("event: end"), "{all}");
        assert!(all.contains("its token expired"), "{all}");
    }
}

#[tokio::test]
async fn a_decommissioned_node_s_token_and_its_input() {
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let server = start(dir.path(), &env).await;
        server.admit_three().await;
        server.member_post("n-3", "join-complete", json!({})).await;
        let node = server.token_for("node/n-3", "NodeAgent").await;
        let facts = |extra: Value| {
            let mut f = json!({"images": [], "packages": []});
            f.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            f
        };
        // A report kept to its caps; an identical repeat records nothing.
        let (status, body) = as_token(
            &server,
            &node,
            reqwest::Method::POST,
            "/v1/admin/cluster/members/n-3/facts",
            Some(facts(json!({"ready": true}))),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let (_, before) = server.get("/v1/admin/events?limit=1000").await;
        let (status, _) = as_token(
            &server,
            &node,
            reqwest::Method::POST,
            "/v1/admin/cluster/members/n-3/facts",
            Some(facts(json!({"ready": true}))),
        )
        .await;
        assert_eq!(status, 200);
        let (_, after) = server.get("/v1/admin/events?limit=1000").await;
        assert_eq!(
            before["events"].as_array().unwrap().len(),
            after["events"].as_array().unwrap().len(),
            "an identical report is no event"
        );
        let big = "x".repeat(100_000);
        let (status, body) = as_token(
            &server,
            &node,
            reqwest::Method::POST,
            "/v1/admin/cluster/members/n-3/facts",
            Some(facts(
                json!({"images": [{"kind": "image", "name": big, "version": "1"}]}),
            )),
        )
        .await;
        assert!(status == 400 || status == 413, "{status} {body}");
        // An upgrade report's message is capped before any upgrade is
        // looked up (the flood was 100 reports of 500,000 bytes each).
        let (_, before) = server.get("/v1/admin/events?limit=1000").await;
        for size in [4097, 500_000] {
            let (status, body) = as_token(
                &server,
                &node,
                reqwest::Method::POST,
                "/v1/admin/upgrades/upg-0000000000/nodes/n-3/report",
                Some(json!({"phase": "roll", "state": "running", "message": "C".repeat(size)})),
            )
            .await;
            assert!(status == 400 || status == 413, "{size}: {status} {body}");
        }
        let (_, after) = server.get("/v1/admin/events?limit=1000").await;
        assert_eq!(before["events"], after["events"], "nothing recorded");

        // Decommissioned: its token stands for nothing.
        server
            .member_post(
                "n-3",
                "decommission",
                json!({"reason": "retired", "force": true}),
            )
            .await;
        for path in [
            "/v1/admin/cluster/peers",
            "/v1/admin/cluster/transport-admission/n-1",
        ] {
            let (status, body) = as_token(&server, &node, reqwest::Method::GET, path, None).await;
            assert_eq!(status, 401, "{path}: {body}");
        }
        let (status, _) = as_token(
            &server,
            &node,
            reqwest::Method::POST,
            "/v1/admin/cluster/members/n-3/facts",
            Some(facts(json!({"ready": false}))),
        )
        .await;
        assert_eq!(status, 401);
        // An operator's write about it is a conflict.
        let (status, body) = server
            .post(
                "/v1/admin/cluster/members/n-3/facts",
                facts(json!({"ready": false})),
            )
            .await;
        assert_eq!(status, 409, "{body}");
    }
}

#[tokio::test]
async fn edges_answer_what_the_record_keeps() {
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let mut server = start(dir.path(), &env).await;
        server.admit("n-1", "192.0.2.11").await;

        // Addresses are addresses: an IPv4-mapped one is the address it maps,
        // taken as the plain one is; no peer is reached at an unspecified or
        // multicast address.
        let admit = |ip: &'static str| {
            let server = &server;
            async move {
                server
                    .post(
                        MEMBERS,
                        json!({"nodeId": "n-2", "role": "compute", "mgmtIp": ip, "labels": {"topology.rack": "r1"}}),
                    )
                    .await
            }
        };
        let (plain, _) = admit("192.0.2.11").await;
        let (mapped, body) = admit("::ffff:192.0.2.11").await;
        assert_eq!((plain, mapped), (409, 409), "{body}");
        assert_eq!(body["fieldErrors"][0]["field"], "mgmtIp", "{body}");
        for ip in ["0.0.0.0", "224.0.0.1", "::", "255.255.255.255"] {
            let (status, body) = admit(ip).await;
            assert_eq!(status, 400, "{ip}: {body}");
        }
        let (status, body) = server
            .call(
                server
                    .http
                    .patch(server.url(&format!("{MEMBERS}/n-1")))
                    .json(&json!({"mgmtIp": "0.0.0.0"})),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        // Changing another member's address to the mapped form of n-1's is
        // the duplicate it is (a PATCH's refusals are field errors, 400).
        server.admit("n-9", "192.0.2.19").await;
        let (status, body) = server
            .call(
                server
                    .http
                    .patch(server.url(&format!("{MEMBERS}/n-9")))
                    .json(&json!({"mgmtIp": "::ffff:192.0.2.11"})),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["fieldErrors"][0]["field"], "mgmtIp", "{body}");

        // Cursors: only what the service answered.
        use base64::Engine;
        for cursor in [
            "9223372036854775808",
            "18446744073709551615",
            "+5",
            "05",
            "0",
        ] {
            let c = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(cursor);
            let (status, body) = server
                .get(&format!("{MEMBERS}/n-1/history?cursor={c}"))
                .await;
            assert_eq!(status, 400, "{cursor}: {body}");
        }

        // The Bearer scheme is case-insensitive.
        for scheme in ["bearer", "BEARER", "Bearer"] {
            let res = server
                .http
                .get(server.url(MEMBERS))
                .header("Authorization", format!("{scheme} {ADMIN}"))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{scheme}");
        }

        // A write's answer is what a restart reads.
        let mut answers = Vec::new();
        for expires in [
            "2030-06-30T23:59:59.123456789Z",
            "2031-01-01T16:40:00.000000001Z",
        ] {
            let (status, t) = server
                .post(
                    "/v1/admin/iam/tokens",
                    json!({"principal": "user/ann", "policies": ["ReadOnly"], "expiresAt": expires}),
                )
                .await;
            assert_eq!(status, 201, "{t}");
            answers.push((t["id"].as_str().unwrap().to_owned(), t["expiresAt"].clone()));
        }
        for bad in ["2030-06-30T23:59:60Z", "+10000-01-01T00:00:00Z"] {
            let (status, body) = server
                .post(
                    "/v1/admin/iam/tokens",
                    json!({"principal": "user/ann", "policies": ["ReadOnly"], "expiresAt": bad}),
                )
                .await;
            assert_eq!(status, 400, "{bad}: {body}");
        }
        server.terminate();
        let _ = server.child.wait().await;
        server = start(dir.path(), &env).await;
        let (_, tokens) = server.get("/v1/admin/iam/tokens").await;
        for (id, answered) in answers {
            let read = tokens["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["id"] == id.as_str())
                .unwrap_or_else(|| panic!("{id} in {tokens}"))["expiresAt"]
                .clone();
            assert_eq!(read, answered, "{id}: the answer is the record");
        }

        // The host's user is a principal, or nothing is recorded.
        for user in ["root\nuser/admin", "", "a/b"] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
                .args([
                    "token",
                    "create",
                    "--principal",
                    "user/x",
                    "--policy",
                    "ReadOnly",
                ])
                .env("USER", user)
                .envs(env.iter().cloned())
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "USER={user:?}: {out:?}");
        }
    }
}

#[tokio::test]
async fn no_database_password_in_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let pg = std::env::var("STRATUM_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let base = pg
        .rsplit_once('/')
        .map_or(pg.as_str(), |(b, _)| b)
        .to_owned();
    for url in [
        format!("{base}/nope_db?pass%77ord=SECRETVALUE"),
        format!("{base}/nope_db?sslpassword=SECRETVALUE"),
        "postgres://app:SECRET?VALUE@127.0.0.1:1/db".to_owned(),
    ] {
        let out = serve_command(dir.path(), port, &[("STRATUM_DATABASE_URL", url.clone())])
            .arg("--print-config")
            .output()
            .await
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!all.contains("SECRET"), "--print-config of {url}: {all}");
        let mut cmd = serve_command(dir.path(), port, &[("STRATUM_DATABASE_URL", url.clone())]);
        let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
            .await
            .expect("serve gives up on a database it cannot open")
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{url}: {all}");
        assert!(!all.contains("SECRET"), "serve with {url}: {all}");
    }
}

#[tokio::test]
async fn build_metadata_makes_no_release_newer_and_digests_are_lower_case() {
    let dir = tempfile::tempdir().unwrap();
    for (mut env, _db) in backends(dir.path()).await {
        env.push((
            "STRATUM_RELEASE_KEYS",
            stratum_domain::testing::release_keys_spec(),
        ));
        let server = start(dir.path(), &env).await;
        server.admit("n-1", "192.0.2.11").await;
        server.member_post("n-1", "join-complete", json!({})).await;
        server.caught_up(&["n-1"]).await;
        server
            .register_releases(&["2026.11.1", "2026.11.1+evil"])
            .await;
        server.set_running_release("2026.11.1").await;

        // A digest is lower-case hex, as the registries print it.
        let mut m = stratum_domain::testing::manifest("2026.11.2", "13.1", None);
        let digest = m["components"][0]["digest"].as_str().unwrap().to_owned();
        m["components"][0]["digest"] = json!(format!(
            "sha256:{}",
            digest.trim_start_matches("sha256:").to_uppercase()
        ));
        stratum_domain::testing::resign(&mut m);
        let (status, body) = server.post("/v1/admin/releases", m).await;
        assert_eq!(status, 400, "{body}");

        // Build metadata has no precedence: `+evil` is the running release.
        let (status, u) = server
            .post(
                "/v1/admin/upgrades",
                json!({"targetRelease": "2026.11.1+evil"}),
            )
            .await;
        assert_eq!(status, 201, "{u}");
        let id = u["id"].as_str().unwrap().to_owned();
        let failed = server
            .eventually("the upgrade's prechecks", || async {
                let (_, u) = server.get(&format!("/v1/admin/upgrades/{id}")).await;
                (u["state"] == "failed").then_some(u)
            })
            .await;
        let version = failed["plan"]["prechecks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "version")
            .unwrap_or_else(|| panic!("a version precheck: {failed}"))
            .clone();
        assert_eq!(version["status"], "fail", "{failed}");
        assert!(
            version["message"]
                .as_str()
                .unwrap()
                .contains("is not newer than the running release 2026.11.1"),
            "{version}"
        );
    }
}

#[tokio::test]
async fn grants_that_now_give_more_than_their_granter_holds_are_findings() {
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let server = start(dir.path(), &env).await;
        // lead administers through a token, and makes x a ClusterOperator.
        let (status, t) = server
            .post(
                "/v1/admin/iam/tokens",
                json!({"principal": "user/lead", "policies": ["AdministratorAccess"]}),
            )
            .await;
        assert_eq!(status, 201, "{t}");
        let (lead, lead_id) = (
            t["token"].as_str().unwrap().to_owned(),
            t["id"].as_str().unwrap().to_owned(),
        );
        let (status, x) = as_token(
            &server,
            &lead,
            reqwest::Method::POST,
            "/v1/admin/iam/tokens",
            Some(json!({"principal": "user/x", "policies": ["ClusterOperator"]})),
        )
        .await;
        assert_eq!(status, 201, "{x}");
        let (_, findings) = server.get("/v1/admin/iam/findings").await;
        assert_eq!(
            findings["findings"],
            json!([]),
            "granted by an administrator"
        );

        // lead no longer holds it: x's token gives more than its granter.
        let (status, body) = server
            .post(&format!("/v1/admin/iam/tokens/{lead_id}/revoke"), json!({}))
            .await;
        assert_eq!(status, 200, "{body}");
        let (status, findings) = server.get("/v1/admin/iam/findings").await;
        assert_eq!(status, 200, "{findings}");
        let found = &findings["findings"];
        assert_eq!(found.as_array().map(Vec::len), Some(1), "{findings}");
        assert_eq!(found[0]["kind"], "token", "{findings}");
        assert_eq!(found[0]["id"], x["id"], "{findings}");
        assert_eq!(found[0]["grantedBy"], "user/lead", "{findings}");
        assert_eq!(
            found[0]["notHeld"],
            json!(["ClusterOperator"]),
            "{findings}"
        );
    }
}

#[tokio::test]
async fn a_statement_that_names_no_resources_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let server = start(dir.path(), &env).await;
        server.admit("n-1", "192.0.2.11").await;
        let (_, before) = server.get("/v1/admin/events?limit=1000").await;
        // A policy that leaves `resources` out, as if that meant every
        // resource (as it once did): refused at the statement that does,
        // naming the field, and nothing is recorded. An identity policy,
        // and a resource policy.
        let refused = [
            (
                server.http.post(server.url("/v1/admin/iam/policies")),
                json!({"name": "Mixed", "document": {"statements": [
                    {"effect": "Allow", "actions": ["cluster:GetMember"], "resources": ["*"]},
                    {"effect": "Allow", "actions": ["cluster:*"]}]}}),
                1,
            ),
            (
                server
                    .http
                    .put(server.url("/v1/admin/cluster/members/n-1/policy")),
                json!({"document": {"statements": [
                    {"effect": "Deny", "actions": ["cluster:GetMember"], "principals": ["user/bob"]}]}}),
                0,
            ),
        ];
        for (req, body, at) in refused {
            let (status, answer) = server.call(req.json(&body)).await;
            assert_eq!(status, 400, "{answer}");
            assert_eq!(answer["code"], "POLICY_REJECTED", "{answer}");
            let issues = answer["issues"].as_array().unwrap();
            assert_eq!(issues.len(), 1, "{answer}");
            assert_eq!(issues[0]["code"], "INVALID_DOCUMENT", "{answer}");
            assert_eq!(issues[0]["statement"], at, "{answer}");
            let message = issues[0]["message"].as_str().unwrap();
            assert!(message.contains("`resources`"), "{answer}");
        }
        let (_, after) = server.get("/v1/admin/events?limit=1000").await;
        assert_eq!(after, before, "nothing was recorded");
        // Naming them, `*` for every one, is accepted.
        let (status, answer) = server
            .post(
                "/v1/admin/iam/policies",
                json!({"name": "Mixed", "document": {"statements": [
                    {"effect": "Allow", "actions": ["cluster:*"], "resources": ["*"]}]}}),
            )
            .await;
        assert_eq!(status, 201, "{answer}");
    }
}
