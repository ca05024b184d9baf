//! IAM over HTTP (SPEC §6): every route gated on its action, node agents
//! scoped to their own member, policy validation, Deny over Allow,
//! wildcards, expiry and revocation, and secrets that never show again.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{json, Value};
use stratum_api::http::routes;
use stratum_domain::iam::Action;
use tower::ServiceExt;

use crate::support::{
    assert_error_shape, each_backend, sample_path, spawn_app, sqlite, TestApp, ADMIN_TOKEN,
};
use crate::upgrades::{cluster, create, until_state};

/// Routes that answer without a token.
const OPEN_ROUTES: [&str; 3] = ["/healthz", "/readyz", "/v1/openapi.json"];

/// The status of a request and, for an error, its body (a stream such as
/// the SSE route is not read).
async fn status_of(
    app: &TestApp,
    token: Option<&str>,
    method: Method,
    path: &str,
) -> (StatusCode, Value) {
    let mut b = Request::builder().method(method.clone()).uri(path);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    let req = if method == Method::GET {
        b.body(Body::empty())
    } else {
        b.header("content-type", "application/json")
            .body(Body::from("{}"))
    };
    let res = app.router.clone().oneshot(req.unwrap()).await.unwrap();
    let status = res.status();
    if status.is_success() {
        return (status, Value::Null);
    }
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn every_route_is_gated_on_its_action() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    // A valid token whose policies allow nothing.
    let nothing = app.token("user/nobody", &[]).await;
    let doc = stratum_api::http::openapi::document();
    let mut gated = 0;
    for r in routes() {
        let Some(action) = r.action else {
            assert!(
                OPEN_ROUTES.contains(&r.path),
                "{} {} has no action: every route but {OPEN_ROUTES:?} is gated",
                r.method,
                r.path
            );
            continue;
        };
        let path = sample_path(r.path);
        let (status, body) = status_of(&app, None, r.method.clone(), &path).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{} {path}: {body}",
            r.method
        );
        assert_eq!(body["code"], "UNAUTHENTICATED");

        let (status, body) = status_of(&app, Some(&nothing), r.method.clone(), &path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{} {path}: {body}", r.method);
        assert_eq!(body["code"], "ACCESS_DENIED");
        assert_eq!(
            body["details"]["action"],
            action.name(),
            "{} {path}",
            r.method
        );
        let param = |k: &str| match k {
            "nodeId" => Some("n-1"),
            "id" => Some("upg-0000000000"),
            "version" => Some("1.0.0"),
            _ => None,
        };
        let expected = action.resource(|k| {
            if r.path.contains(&format!("{{{k}}}")) {
                param(k)
            } else {
                None
            }
        });
        assert_eq!(body["details"]["resource"], expected, "{} {path}", r.method);

        let (status, body) = status_of(&app, Some(ADMIN_TOKEN), r.method.clone(), &path).await;
        assert!(
            status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
            "{} {path} as admin: {status} {body}",
            r.method
        );
        // The OpenAPI document names the same action, from the same table.
        let op = &serde_json::to_value(&doc).unwrap()["paths"]
            [crate::support::document_path(r.path).as_str()][r.method.as_str().to_lowercase()];
        assert_eq!(
            op["x-stratum-action"],
            action.name(),
            "{} {}",
            r.method,
            r.path
        );
        gated += 1;
    }
    assert!(gated >= Action::ALL.len() - 2, "{gated} gated routes");
}

#[tokio::test]
async fn a_node_agent_reports_only_for_its_own_member() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    app.admit("n-a", "hybrid", "192.0.2.31").await;
    app.admit("n-b", "hybrid", "192.0.2.32").await;
    let agent = app.token("node/n-a", &["NodeAgent"]).await;
    let m = "/v1/admin/cluster/members";
    let as_agent = |method: Method, path: String, body: Option<Value>| {
        let app = &app;
        let agent = agent.clone();
        async move { app.call_as(Some(&agent), method, &path, body).await }
    };
    for n in ["n-a", "n-b"] {
        let r = as_agent(
            Method::POST,
            format!("{m}/{n}/join-progress"),
            Some(json!({"step": "join/raft-patroni"})),
        )
        .await;
        if n == "n-a" {
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            assert_eq!(r.body["joinStep"], "join/raft-patroni");
        } else {
            assert_error_shape(&r, StatusCode::FORBIDDEN, "ACCESS_DENIED");
            assert_eq!(r.body["details"]["resource"], "stratum:member/n-b");
            assert_eq!(r.body["details"]["action"], "cluster:ReportJoinProgress");
        }
        let r = as_agent(
            Method::POST,
            format!("{m}/{n}/applied-generation"),
            Some(json!({"generation": 1})),
        )
        .await;
        assert_eq!(r.status == StatusCode::OK, n == "n-a", "{n}: {}", r.body);
        let r = as_agent(
            Method::POST,
            format!("{m}/{n}/join-failed"),
            Some(json!({"step": "join/raft-openbao", "error": "permission denied"})),
        )
        .await;
        if n == "n-a" {
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            assert_eq!(r.body["state"], "failed");
        } else {
            assert_error_shape(&r, StatusCode::FORBIDDEN, "ACCESS_DENIED");
        }
    }
    // No operator action.
    for (method, path, body) in [
        (
            Method::POST,
            m.to_owned(),
            json!({"nodeId": "n-c", "role": "compute", "mgmtIp": "192.0.2.33"}),
        ),
        (
            Method::POST,
            format!("{m}/n-a/decommission"),
            json!({"reason": "x"}),
        ),
        (
            Method::POST,
            "/v1/admin/upgrades".to_owned(),
            json!({"targetRelease": "1.1.0"}),
        ),
        (
            Method::POST,
            "/v1/admin/upgrades/upg-0000000000/cancel".to_owned(),
            json!({}),
        ),
        (
            Method::POST,
            "/v1/admin/iam/tokens".to_owned(),
            json!({"principal": "node/n-a", "policies": ["AdministratorAccess"]}),
        ),
    ] {
        let r = as_agent(method, path.clone(), Some(body)).await;
        assert_error_shape(&r, StatusCode::FORBIDDEN, "ACCESS_DENIED");
    }
}

#[tokio::test]
async fn a_node_agent_reports_only_its_own_part_of_an_upgrade() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    cluster(&app).await;
    let id = create(&app, json!({"targetRelease": "1.1.0"})).await;
    until_state(&app, &id, "fetching").await;
    let agent = app.token("node/n-a", &["NodeAgent"]).await;
    let report = |node: &str| {
        let (app, agent, path) = (
            &app,
            agent.clone(),
            format!("/v1/admin/upgrades/{id}/nodes/{node}/report"),
        );
        async move {
            app.call_as(
                Some(&agent),
                Method::POST,
                &path,
                Some(json!({"phase": "fetch", "state": "done"})),
            )
            .await
        }
    };
    let r = report("n-a").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = report("n-b").await;
    assert_error_shape(&r, StatusCode::FORBIDDEN, "ACCESS_DENIED");
    assert_eq!(
        r.body["details"]["resource"],
        format!("stratum:upgrade/{id}/node/n-b")
    );
    // It reads the upgrade it takes part in, but cannot cancel it.
    let r = app
        .call_as(
            Some(&agent),
            Method::GET,
            &format!("/v1/admin/upgrades/{id}"),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = app
        .call_as(
            Some(&agent),
            Method::POST,
            &format!("/v1/admin/upgrades/{id}/cancel"),
            Some(json!({})),
        )
        .await;
    assert_error_shape(&r, StatusCode::FORBIDDEN, "ACCESS_DENIED");
    assert_eq!(
        r.body["details"]["resource"], "stratum:install",
        "cancel is install-scope"
    );
}

#[tokio::test]
async fn a_policy_document_is_rejected_with_every_finding_at_once() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        app.admit("n-a", "hybrid", "192.0.2.31").await;
        let head = app.head().await;
        let doc = json!({"statements": [
            {"effect": "Allow", "actions": ["cluster:DoesNotExist"], "principals": ["user/bob"], "resources": ["*"]},
            {"effect": "Perhaps", "actions": ["cluster:GetMember"], "principals": ["user/bob"], "resources": ["*"]},
            {"effect": "Allow", "actions": ["compute:CreateVpc"], "principals": ["user/bob"], "resources": ["*"]},
        ]});
        let r = app
            .call(
                Method::PUT,
                "/v1/admin/cluster/members/n-a/policy",
                Some(json!({"document": doc})),
            )
            .await;
        assert_error_shape(&r, StatusCode::BAD_REQUEST, "POLICY_REJECTED");
        let issues = r.body["issues"].as_array().unwrap();
        let found: Vec<(&str, i64, Option<&str>)> = issues
            .iter()
            .map(|i| {
                (
                    i["code"].as_str().unwrap(),
                    i["statement"].as_i64().unwrap(),
                    i["action"].as_str(),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                ("UNKNOWN_ACTION", 0, Some("cluster:DoesNotExist")),
                ("INVALID_DOCUMENT", 1, None),
                ("ACTION_NOT_APPLICABLE", 2, Some("compute:CreateVpc")),
            ],
            "{}",
            r.body
        );
        // A document that is not one at all: a finding for the whole document.
        let r = app
            .post(
                "/v1/admin/iam/policies",
                json!({"name": "Broken", "document": {"statement": []}}),
            )
            .await;
        assert_error_shape(&r, StatusCode::BAD_REQUEST, "POLICY_REJECTED");
        assert!(
            r.body["issues"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i["statement"] == -1),
            "{}",
            r.body
        );
        assert_eq!(app.head().await, head, "nothing was appended");
    }
}

#[tokio::test]
async fn deny_beats_allow_wildcards_match_and_expiry_and_revocation_take_effect_at_once() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    let m = "/v1/admin/cluster/members";
    for (name, statements) in [
        (
            "Operators",
            json!([{"effect": "Allow", "actions": ["cluster:*"], "resources": ["*"]}]),
        ),
        (
            "NoDecommission",
            json!([{"effect": "Deny", "actions": ["cluster:Decommission*"], "resources": ["*"]}]),
        ),
    ] {
        let r = app
            .post(
                "/v1/admin/iam/policies",
                json!({"name": name, "document": {"statements": statements}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    }
    let bob = app
        .token("user/bob", &["Operators", "NoDecommission"])
        .await;
    let r = app
        .call_as(Some(&bob), Method::POST, m, Some(json!({"nodeId": "n-a", "role": "hybrid", "mgmtIp": "192.0.2.41", "labels": {"topology.rack": "r1"}})))
        .await;
    assert_eq!(
        r.status,
        StatusCode::CREATED,
        "cluster:* allows AdmitMember: {}",
        r.body
    );
    app.admit("n-b", "hybrid", "192.0.2.42").await;
    let r = app
        .call_as(
            Some(&bob),
            Method::POST,
            &format!("{m}/n-a/decommission"),
            Some(json!({"reason": "x"})),
        )
        .await;
    assert_error_shape(&r, StatusCode::FORBIDDEN, "ACCESS_DENIED");
    let r = app
        .call_as(
            Some(&bob),
            Method::POST,
            "/v1/admin/upgrades",
            Some(json!({"targetRelease": "1.1.0"})),
        )
        .await;
    assert_error_shape(&r, StatusCode::FORBIDDEN, "ACCESS_DENIED");
    assert_eq!(
        r.body["details"]["action"], "upgrade:CreateUpgrade",
        "cluster:* is not upgrade:*"
    );

    // A resource policy on one member denies bob reading it, and only it.
    let r = app
        .call(
            Method::PUT,
            &format!("{m}/n-b/policy"),
            Some(json!({"document": {"statements": [{"effect": "Deny", "actions": ["cluster:Get*"], "principals": ["user/bob"], "resources": ["*"]}]}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let get = |who: String, node: &str| {
        let (app, path) = (&app, format!("{m}/{node}"));
        async move {
            app.call_as(Some(&who), Method::GET, &path, None)
                .await
                .status
        }
    };
    assert_eq!(get(bob.clone(), "n-b").await, StatusCode::FORBIDDEN);
    assert_eq!(get(bob.clone(), "n-a").await, StatusCode::OK);
    assert_eq!(
        get(ADMIN_TOKEN.to_owned(), "n-b").await,
        StatusCode::OK,
        "the statement is bob's only"
    );

    // Policies attached to a principal apply to its tokens.
    let carol = app.token("user/carol", &[]).await;
    assert_eq!(get(carol.clone(), "n-a").await, StatusCode::FORBIDDEN);
    let r = app
        .call(
            Method::PUT,
            "/v1/admin/iam/principals/user%2Fcarol/policies",
            Some(json!({"policies": ["ReadOnly"]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(get(carol.clone(), "n-a").await, StatusCode::OK);
    let r = app
        .call_as(
            Some(&carol),
            Method::POST,
            &format!("{m}/n-a/decommission"),
            Some(json!({"reason": "x"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "ReadOnly writes nothing");

    // Revocation: the next request is refused.
    let tokens = app.get("/v1/admin/iam/tokens").await.body;
    let carol_id = tokens["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["principal"] == "user/carol")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = app
        .post(
            &format!("/v1/admin/iam/tokens/{carol_id}/revoke"),
            json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body["revokedAt"].is_string());
    assert_eq!(get(carol, "n-a").await, StatusCode::UNAUTHORIZED);

    // Expiry: a token stops working when it expires.
    let expires = chrono::Utc::now() + chrono::Duration::milliseconds(800);
    let r = app
        .post("/v1/admin/iam/tokens", json!({"principal": "user/dave", "policies": ["ReadOnly"], "expiresAt": expires.to_rfc3339()}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let dave = r.body["token"].as_str().unwrap().to_owned();
    assert_eq!(get(dave.clone(), "n-a").await, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(get(dave, "n-a").await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_host_operator_manages_tokens_from_the_command_line() {
    use stratum_api::cli::{output::Format, token, Db, TokenCmd};
    let db = sqlite();
    drop(spawn_app(&db).await);
    let at = || Db {
        database_url: db.url.clone(),
    };
    let (code, out) = token(
        TokenCmd::Create {
            principal: "user/frank".into(),
            policies: vec!["Auditor".into()],
            expires_at: None,
            db: at(),
        },
        Format::Json,
    )
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}");
    let created: Value = serde_json::from_str(&out).unwrap();
    let secret = created["token"].as_str().unwrap().to_owned();
    let id = created["id"].as_str().unwrap().to_owned();
    let (_, listed) = token(TokenCmd::List { db: at() }, Format::Json)
        .await
        .unwrap();
    assert!(
        listed.contains(&id) && !listed.contains(&secret),
        "{listed}"
    );
    let app = spawn_app(&db).await;
    assert_eq!(
        app.call_as(Some(&secret), Method::GET, "/v1/admin/events", None)
            .await
            .status,
        StatusCode::OK
    );
    let (code, _) = token(
        TokenCmd::Revoke {
            id: id.clone(),
            db: at(),
        },
        Format::Json,
    )
    .await
    .unwrap();
    assert_eq!(code, 0);
    assert_eq!(
        app.call_as(Some(&secret), Method::GET, "/v1/admin/events", None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    let (code, out) = token(
        TokenCmd::Create {
            principal: "alice".into(),
            policies: vec![],
            expires_at: None,
            db: at(),
        },
        Format::Json,
    )
    .await
    .unwrap();
    assert_eq!(code, 1, "a bad principal is refused: {out}");
}

#[tokio::test]
async fn nobody_grants_more_than_they_hold() {
    let db = sqlite();
    let app = spawn_app(&db).await;
    let r = app
        .post(
            "/v1/admin/iam/policies",
            json!({"name": "TokenMinter", "document": {"statements": [
                {"effect": "Allow", "actions": ["iam:CreateToken", "iam:SetPrincipalPolicies"], "resources": ["*"]}]}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let minter = app
        .token("user/mallory", &["TokenMinter", "ReadOnly"])
        .await;
    let head = app.head().await;
    let r = app
        .call_as(
            Some(&minter),
            Method::POST,
            "/v1/admin/iam/tokens",
            Some(json!({"principal": "user/mallory", "policies": ["AdministratorAccess"]})),
        )
        .await;
    assert_error_shape(&r, StatusCode::FORBIDDEN, "ACCESS_DENIED");
    assert_eq!(r.body["details"]["notHeld"], json!(["AdministratorAccess"]));
    assert!(r.body.get("token").is_none(), "no secret in a refusal");
    let r = app
        .call_as(
            Some(&minter),
            Method::PUT,
            "/v1/admin/iam/principals/user%2Fmallory/policies",
            Some(json!({"policies": ["AdministratorAccess"]})),
        )
        .await;
    assert_error_shape(&r, StatusCode::FORBIDDEN, "ACCESS_DENIED");
    assert_eq!(app.head().await, head, "nothing was granted");
    // What it holds, it may hand on.
    let r = app
        .call_as(
            Some(&minter),
            Method::POST,
            "/v1/admin/iam/tokens",
            Some(json!({"principal": "user/trent", "policies": ["ReadOnly"]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
}
