//! The privilege-escalation suite through the built binary, on both
//! backends (issue 39; the domain's own is `domain/src/tests/
//! iam_escalation.rs`). As the IAM escalation catalogues try it: a
//! principal that holds one action that creates, attaches or grants tries,
//! for three rounds, every move of the catalogue with every token it holds
//! (each token it makes is one more identity). Afterwards no identity can
//! do anything on any route that the first token could not; what an
//! identity can do is probed on every gated route with a body the route
//! refuses, so the gate's answer (401, 403, or past it) is what counts.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::binary::*;
use crate::support::sample_path;

const EVE: &str = "user/eve";
const OPS_LEAD: &str = "user/ops-lead";
const OTHER: &str = "user/eve2";
const NODE: &str = "node/n-1";
const PRINCIPALS: [&str; 4] = [EVE, OPS_LEAD, OTHER, NODE];
/// The id the sample paths give an upgrade, replaced by the world's.
const SAMPLE_UPGRADE: &str = "upg-0000000000";

/// The actions that create or set something but give no one power (a
/// release, an upgrade): every `Create*`/`Set*` action is one of these or
/// of [`GRANTS`], so a new one must be placed.
const NOT_GRANTS: [&str; 2] = ["cluster:SetRunningRelease", "upgrade:CreateUpgrade"];

/// The actions that change who holds what.
const GRANTS: [&str; 5] = [
    "iam:CreateToken",
    "iam:SetPrincipalPolicies",
    "cluster:SetMemberPolicy",
    "upgrade:SetUpgradePolicy",
    "iam:CreatePolicy",
];

async fn send(server: &Server, token: &str, method: &str, path: &str, body: Value) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = server
        .http
        .request(method.clone(), server.url(path))
        .bearer_auth(token);
    if method != reqwest::Method::GET {
        req = req.json(&body);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The gated routes `token` gets past the gate of (`upgrade`: the world's
/// upgrade, which the upgrade routes name).
async fn power(server: &Server, token: &str, upgrade: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in stratum_api::http::routes() {
        if r.action.is_none() || r.watch == stratum_api::http::Watch::Stream {
            continue;
        }
        let path = sample_path(r.path).replace(SAMPLE_UPGRADE, upgrade);
        // A body no route takes: past the gate, it is refused (400), or,
        // on a route that reads no body, done (which only an identity
        // that gained the power can do, and that fails below).
        let (status, _) = send(
            server,
            token,
            r.method.as_str(),
            &path,
            json!({"probe": [[]]}),
        )
        .await;
        if ![401, 403].contains(&status) {
            out.insert(format!("{} {}", r.method, r.path));
        }
    }
    out
}

/// Every move of the catalogue: (method, path, body).
fn moves(upgrade: &str) -> Vec<(&'static str, String, Value)> {
    let lists: [&[&str]; 6] = [
        &[],
        &["AdministratorAccess"],
        &["ClusterOperator"],
        &["NodeAgent"],
        &["Everything"],
        &["AdministratorAccess", "ReadOnly"],
    ];
    let mut out = vec![(
        "POST",
        "/v1/admin/iam/policies".to_owned(),
        json!({"name": "Everything", "document": {"statements": [{"effect": "Allow", "actions": ["*"], "resources": ["*"]}]}}),
    )];
    for principal in PRINCIPALS {
        for list in lists {
            out.push((
                "POST",
                "/v1/admin/iam/tokens".to_owned(),
                json!({"principal": principal, "policies": list}),
            ));
            out.push((
                "PUT",
                format!(
                    "/v1/admin/iam/principals/{}/policies",
                    principal.replace('/', "%2F")
                ),
                json!({"policies": list}),
            ));
        }
    }
    for principals in [
        json!(["*"]),
        json!([EVE]),
        json!([OTHER]),
        json!(["user/*"]),
    ] {
        let document = json!({"statements": [{"effect": "Allow", "actions": ["*"], "resources": ["*"], "principals": principals}]});
        out.push((
            "PUT",
            format!("{MEMBERS}/n-1/policy"),
            json!({ "document": document }),
        ));
        out.push((
            "PUT",
            format!("/v1/admin/upgrades/{upgrade}/policy"),
            json!({ "document": document }),
        ));
    }
    out
}

#[tokio::test]
async fn no_single_grant_action_reaches_more_than_it_starts_with() {
    for a in stratum_domain::iam::Action::ALL {
        let name = a.name();
        let verb = name.split(':').nth(1).unwrap_or_default();
        if verb.starts_with("Create") || verb.starts_with("Set") {
            assert!(
                GRANTS.contains(&name) || NOT_GRANTS.contains(&name),
                "{name}: does it change who holds what? place it in GRANTS or NOT_GRANTS"
            );
        }
    }
    for action in GRANTS {
        // A fresh world for each action, on each backend.
        let dir = tempfile::tempdir().unwrap();
        for (mut env, _db) in backends(dir.path()).await {
            env.push((
                "STRATUM_RELEASE_KEYS",
                stratum_domain::testing::release_keys_spec(),
            ));
            let server = start(dir.path(), &env).await;
            // The world: ops-lead administers, n-1 is a member, eve holds
            // one grant action.
            server.admit("n-1", "192.0.2.11").await;
            // An upgrade, so that its resource policy is a move that lands.
            server.register_releases(&["1.0.0", "1.1.0"]).await;
            server.set_running_release("1.0.0").await;
            let upgrade = server.plan_upgrade("1.1.0").await;
            let (status, body) = server
                .call(
                    server
                        .http
                        .put(server.url("/v1/admin/iam/principals/user%2Fops-lead/policies"))
                        .json(&json!({"policies": ["AdministratorAccess"]})),
                )
                .await;
            assert_eq!(status, 200, "{body}");
            let only = format!("Only-{}", action.replace(':', "-"));
            let (status, body) = server
                .post(
                    "/v1/admin/iam/policies",
                    json!({"name": only, "document": {"statements": [{"effect": "Allow", "actions": [action], "resources": ["*"]}]}}),
                )
                .await;
            assert_eq!(status, 201, "{body}");
            let eve = server.token_for(EVE, &only).await;
            let before = power(&server, &eve, &upgrade).await;
            assert!(!before.is_empty(), "{action}: eve can do what she holds");

            let mut held = vec![eve];
            let mut tried = 0;
            for _round in 0..3 {
                for token in held.clone() {
                    for (method, path, body) in moves(&upgrade) {
                        tried += 1;
                        let (status, answer) = send(&server, &token, method, &path, body).await;
                        // Every move reaches its grant check: the objects exist.
                        assert_ne!(status, 404, "{method} {path}: {answer}");
                        if status == 201 && path == "/v1/admin/iam/tokens" {
                            held.push(answer["token"].as_str().unwrap().to_owned());
                        }
                    }
                }
            }
            for (i, token) in held.iter().enumerate() {
                let after = power(&server, token, &upgrade).await;
                let gained: Vec<&String> = after.difference(&before).collect();
                assert!(
                    gained.is_empty(),
                    "starting with {action} alone, identity {i} of {} ({tried} moves tried) reached {gained:?}",
                    held.len()
                );
            }
        }
    }
}
