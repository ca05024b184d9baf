//! The answer is the record (issue 39): for every write route, what the
//! write answers is what the same read answers after a restart, when the
//! read models come from the stored events alone. The writes carry the edge
//! values the edge normalises (IPv4-mapped addresses, times finer than the
//! log keeps, integers past 2^53, text beyond ASCII), on both backends.

use std::collections::BTreeSet;
use std::path::Path;

use reqwest::Method;
use serde_json::{json, Value};

use crate::binary::*;
use crate::support::{document_path, template_of};

/// Where a write's effect is read back.
enum Read {
    /// `GET path`, where `{id}` is the `id` the write answered.
    Get(String),
    /// The item with the `id` the write answered in the list `GET path`
    /// answers.
    Item(&'static str),
    /// The member `field` of what `GET path` answers.
    Member(&'static str, &'static str),
}

impl Read {
    async fn of(&self, server: &Server, answer: &Value) -> Value {
        let id = answer["id"].as_str().unwrap_or_default();
        match self {
            Read::Get(path) => {
                let path = path.replace("{id}", id);
                let (status, body) = server.get(&path).await;
                assert_eq!(status, 200, "GET {path}: {body}");
                body
            }
            Read::Item(list) => {
                let (status, body) = server.get(&format!("{list}?limit=500")).await;
                assert_eq!(status, 200, "GET {list}: {body}");
                body["items"]
                    .as_array()
                    .and_then(|items| items.iter().find(|i| i["id"] == id))
                    .unwrap_or_else(|| panic!("{id} in GET {list}: {body}"))
                    .clone()
            }
            Read::Member(path, field) => {
                let (status, body) = server.get(path).await;
                assert_eq!(status, 200, "GET {path}: {body}");
                body[*field].clone()
            }
        }
    }
}

/// A server whose every write route, the first time it is written, is
/// restarted and read back.
struct Answers<'a> {
    dir: &'a Path,
    env: Vec<(&'static str, String)>,
    server: Server,
    checked: BTreeSet<String>,
}

impl Answers<'_> {
    async fn restart(&mut self) {
        self.server.terminate();
        let _ = self.server.child.wait().await;
        self.server = start(self.dir, &self.env).await;
    }

    /// Sends a write and asserts its status. The first write of each route
    /// is followed by a restart, and each field the answer shares with
    /// `read` must read as answered, except the `moving` ones: those the
    /// service itself moves on after the write (an upgrade's driver, the
    /// raft cleanup), which the restart may find moved.
    async fn write(
        &mut self,
        method: Method,
        path: &str,
        body: Value,
        status: u16,
        read: Read,
        moving: &[&str],
    ) -> Value {
        let (got, answer) = self
            .server
            .call(
                self.server
                    .http
                    .request(method.clone(), self.server.url(path))
                    .json(&body),
            )
            .await;
        assert_eq!(got, status, "{method} {path}: {answer}");
        let template = template_of(&method, path).unwrap_or_else(|| panic!("no route {path}"));
        let route = format!("{method} {template}");
        if self.checked.insert(route.clone()) {
            self.restart().await;
            let read = read.of(&self.server, &answer).await;
            same_where_shared(&route, &answer, &read, moving);
        }
        answer
    }

    async fn upgrade(&self, id: &str) -> Value {
        let (status, u) = self.server.get(&format!("{UPGRADES}/{id}")).await;
        assert_eq!(status, 200, "{u}");
        u
    }

    async fn until(&self, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        self.server
            .eventually(&format!("upgrade {id}: {what}"), || async {
                let u = self.upgrade(id).await;
                done(&u).then_some(u)
            })
            .await
    }

    async fn until_state(&self, id: &str, state: &str) -> Value {
        self.until(id, state, |u| u["state"] == state).await
    }

    async fn report(&mut self, id: &str, node: &str, phase: &str, message: &str) {
        self.write(
            Method::POST,
            &format!("{UPGRADES}/{id}/nodes/{node}/report"),
            json!({"phase": phase, "state": "done", "message": message}),
            200,
            Read::Get(format!("{UPGRADES}/{id}")),
            UPGRADE_DRIVEN,
        )
        .await;
    }
}

const UPGRADES: &str = "/v1/admin/upgrades";
const NODES: [&str; 3] = ["n-1", "n-2", "n-3"];

/// What the upgrade driver moves on by itself after a write: the state,
/// the prechecks, whose turn it is and what the upgrade waits for.
const UPGRADE_DRIVEN: &[&str] = &[
    "state",
    "kind",
    "plan",
    "nodes",
    "waitingFor",
    "writeFreeze",
    "updatedAt",
    "version",
];

/// What the raft cleanup moves on by itself after a member leaves.
const CLEANUP_DRIVEN: &[&str] = &[
    "raftCleanupPending",
    "raftCleanupAt",
    "raftsRemoved",
    "updatedAt",
    "version",
];

/// Each field the answer shares with the read, but the `moving` ones, is
/// the same; they share at least one.
fn same_where_shared(route: &str, answer: &Value, read: &Value, moving: &[&str]) {
    let (Some(a), Some(r)) = (answer.as_object(), read.as_object()) else {
        panic!("{route}: answered {answer}, read {read}");
    };
    let shared: Vec<&String> = a
        .keys()
        .filter(|k| r.contains_key(*k) && !moving.contains(&k.as_str()))
        .collect();
    assert!(
        !shared.is_empty(),
        "{route}: the answer {answer} shares nothing with the read {read}"
    );
    let differ: Vec<String> = shared
        .into_iter()
        .filter(|k| a[*k] != r[*k])
        .map(|k| format!("`{k}` answered {} reads {}", a[k], r[k]))
        .collect();
    assert!(
        differ.is_empty(),
        "{route}, after a restart: {}",
        differ.join("; ")
    );
}

fn signed_manifest(version: &str, required_stops: &[&str]) -> Value {
    let mut m = stratum_domain::testing::manifest(version, "13.1", None);
    if !required_stops.is_empty() {
        m["requiredStops"] = json!(required_stops);
        stratum_domain::testing::resign(&mut m);
    }
    m
}

#[tokio::test]
async fn every_write_answers_what_a_restart_reads() {
    let dir = tempfile::tempdir().unwrap();
    for (mut env, _db) in backends(dir.path()).await {
        env.push((
            "STRATUM_RELEASE_KEYS",
            stratum_domain::testing::release_keys_spec(),
        ));
        env.push(("STRATUM_UPGRADE_SETTLE", "1s".to_owned()));
        let server = start(dir.path(), &env).await;
        let mut a = Answers {
            dir: dir.path(),
            env,
            server,
            checked: BTreeSet::new(),
        };
        life(&mut a).await;

        // Every write route of the service was written and read back, but
        // the fork's acknowledgement, which needs a restored backup and is
        // read back after a restart in `transparency` (a log restored to
        // before a signed checkpoint).
        let elsewhere = "POST /v1/admin/log/fork/acknowledge".to_owned();
        let mut written = a.checked.clone();
        written.insert(elsewhere);
        let routes: BTreeSet<String> = stratum_api::http::routes()
            .into_iter()
            .filter(|r| r.method != axum::http::Method::GET)
            .map(|r| format!("{} {}", r.method, document_path(r.path)))
            .collect();
        assert_eq!(written, routes, "every write route, read back");
    }
}

/// A cluster's life that writes through every write route.
async fn life(a: &mut Answers<'_>) {
    // Releases, and the one the cluster runs.
    for (i, version) in ["1.0.0", "1.1.0"].into_iter().enumerate() {
        let answer = a
            .write(
                Method::POST,
                "/v1/admin/releases",
                signed_manifest(version, &[]),
                201,
                Read::Get(format!("/v1/admin/releases/{version}")),
                &[],
            )
            .await;
        assert_eq!(answer["version"], version, "{i}: {answer}");
    }
    a.write(
        Method::PUT,
        "/v1/admin/cluster/release",
        json!({"version": "1.0.0"}),
        200,
        Read::Get("/v1/admin/cluster/release".into()),
        &[],
    )
    .await;

    // Three control members, the first at an IPv4-mapped address: the
    // answer already names the plain address the record keeps.
    for (i, node) in NODES.into_iter().enumerate() {
        let member = a
            .write(
                Method::POST,
                MEMBERS,
                json!({"nodeId": node, "role": "control", "mgmtIp": format!("::ffff:192.0.2.{}", 21 + i),
                       "labels": {"topology.rack": "r1", "owner": "team-net_7.a"}}),
                201,
                Read::Get(format!("{MEMBERS}/{node}")),
                &[],
            )
            .await;
        assert_eq!(member["mgmtIp"], format!("192.0.2.{}", 21 + i), "{member}");
        a.write(
            Method::POST,
            &format!("{MEMBERS}/{node}/join-progress"),
            json!({"step": "join/raft-openbao"}),
            200,
            Read::Get(format!("{MEMBERS}/{node}")),
            &[],
        )
        .await;
        a.write(
            Method::POST,
            &format!("{MEMBERS}/{node}/join-complete"),
            json!({}),
            200,
            Read::Get(format!("{MEMBERS}/{node}")),
            &[],
        )
        .await;
    }
    let member = a
        .write(
            Method::PATCH,
            &format!("{MEMBERS}/n-1"),
            json!({"mgmtIp": "::FFFF:C000:021F", "labels": {"topology.rack": "r2"}}),
            200,
            Read::Get(format!("{MEMBERS}/n-1")),
            &[],
        )
        .await;
    assert_eq!(member["mgmtIp"], "192.0.2.31", "{member}");
    let (_, membership) = a.server.get("/v1/admin/cluster/membership").await;
    for node in NODES {
        a.write(
            Method::POST,
            &format!("{MEMBERS}/{node}/applied-generation"),
            json!({"generation": membership["generation"]}),
            200,
            Read::Get(format!("{MEMBERS}/{node}")),
            &[],
        )
        .await;
    }

    // An upgrade staged, applied, rolled and verified; its rollback
    // canceled; an upgrade that fails its prechecks, acknowledged.
    let upgrade = a
        .write(
            Method::POST,
            UPGRADES,
            json!({"targetRelease": "1.1.0", "mode": "stage-only", "backup": {"location": "node"}}),
            201,
            Read::Get(format!("{UPGRADES}/{{id}}")),
            UPGRADE_DRIVEN,
        )
        .await;
    let id = upgrade["id"].as_str().unwrap().to_owned();
    a.write(
        Method::PUT,
        &format!("{UPGRADES}/{id}/policy"),
        json!({"document": {"statements": [{"effect": "Allow", "actions": ["upgrade:GetUpgrade"], "principals": ["user/ann"], "resources": ["*"]}]}}),
        200,
        Read::Get(format!("{UPGRADES}/{id}/policy")),
        &[],
    )
    .await;
    a.until_state(&id, "fetching").await;
    for node in NODES {
        a.report(&id, node, "fetch", "fetched ✓ 1.1.0 — 3 images")
            .await;
    }
    a.until_state(&id, "staged").await;
    a.write(
        Method::POST,
        &format!("{UPGRADES}/{id}/apply"),
        json!({}),
        200,
        Read::Get(format!("{UPGRADES}/{id}")),
        UPGRADE_DRIVEN,
    )
    .await;
    a.until_state(&id, "backing_up").await;
    a.write(
        Method::POST,
        &format!("{UPGRADES}/{id}/backup"),
        json!({"location": "node", "bundle": "/var/lib/stratum/backup.tar", "encrypted": true}),
        200,
        Read::Get(format!("{UPGRADES}/{id}")),
        UPGRADE_DRIVEN,
    )
    .await;
    for node in NODES {
        a.until(&id, &format!("{node}'s turn"), |u| {
            u["waitingFor"]
                .as_str()
                .is_some_and(|w| w.starts_with(&format!("Waiting for {node} ")))
        })
        .await;
        a.report(&id, node, "roll", "rolled").await;
    }
    a.until_state(&id, "verifying").await;
    for node in NODES {
        a.report(&id, node, "verify", "verified").await;
    }
    a.until_state(&id, "done").await;
    let rollback = a
        .write(
            Method::POST,
            &format!("{UPGRADES}/{id}/rollback"),
            json!({"restoreBackup": false}),
            201,
            Read::Get(format!("{UPGRADES}/{{id}}")),
            UPGRADE_DRIVEN,
        )
        .await;
    let back = rollback["id"].as_str().unwrap().to_owned();
    let canceled = a
        .write(
            Method::POST,
            &format!("{UPGRADES}/{back}/cancel"),
            json!({}),
            200,
            Read::Get(format!("{UPGRADES}/{back}")),
            &[],
        )
        .await;
    assert_eq!(canceled["state"], "canceled", "{canceled}");
    a.write(
        Method::POST,
        "/v1/admin/releases",
        signed_manifest("3.0.0", &["2.0.0"]),
        201,
        Read::Get("/v1/admin/releases/3.0.0".into()),
        &[],
    )
    .await;
    let (status, skipping) = a
        .server
        .post(UPGRADES, json!({"targetRelease": "3.0.0"}))
        .await;
    assert_eq!(status, 201, "{skipping}");
    let failed = skipping["id"].as_str().unwrap().to_owned();
    a.until_state(&failed, "failed").await;
    a.write(
        Method::POST,
        &format!("{UPGRADES}/{failed}/acknowledge"),
        json!({}),
        200,
        Read::Get(format!("{UPGRADES}/{failed}")),
        &[],
    )
    .await;

    // IAM: a policy, a principal's policies, a member's resource policy,
    // a token that expires at a time finer than the log keeps, revoked.
    a.write(
        Method::POST,
        "/v1/admin/iam/policies",
        json!({"name": "MemberReaders", "document": {"statements": [{"effect": "Allow", "actions": ["cluster:GetMember", "cluster:ListMembers"], "resources": ["*"]}]}}),
        201,
        Read::Get("/v1/admin/iam/policies/MemberReaders".into()),
        &[],
    )
    .await;
    a.write(
        Method::PUT,
        "/v1/admin/iam/principals/user%2Fann/policies",
        json!({"policies": ["MemberReaders", "ReadOnly"]}),
        200,
        Read::Get("/v1/admin/iam/principals/user%2Fann/policies".into()),
        &[],
    )
    .await;
    a.write(
        Method::PUT,
        &format!("{MEMBERS}/n-1/policy"),
        json!({"document": {"statements": [{"effect": "Deny", "actions": ["cluster:DecommissionMember"], "principals": ["user/ann"], "resources": ["*"]}]}}),
        200,
        Read::Get(format!("{MEMBERS}/n-1/policy")),
        &[],
    )
    .await;
    let token = a
        .write(
            Method::POST,
            "/v1/admin/iam/tokens",
            json!({"principal": "user/ann", "policies": ["ReadOnly"], "expiresAt": "2031-01-01T16:40:00.000000001Z"}),
            201,
            Read::Item("/v1/admin/iam/tokens"),
            &[],
        )
        .await;
    assert_eq!(token["expiresAt"], "2031-01-01T16:40:00Z", "{token}");
    let token_id = token["id"].as_str().unwrap().to_owned();
    a.write(
        Method::POST,
        &format!("/v1/admin/iam/tokens/{token_id}/revoke"),
        json!({}),
        200,
        Read::Item("/v1/admin/iam/tokens"),
        &[],
    )
    .await;

    // Join requests: one approved (from an IPv4-mapped address), one
    // rejected.
    let request = a
        .write(
            Method::POST,
            "/v1/admin/cluster/join-requests",
            json!({"nodeId": "n-5", "mgmtIp": "::ffff:192.0.2.50", "labels": {"topology.rack": "r3"},
                   "facts": {"cpus": 64, "memoryBytes": 9007199254740993u64, "model": "Gerät 7"}}),
            201,
            Read::Item("/v1/admin/cluster/join-requests"),
            &[],
        )
        .await;
    assert_eq!(request["mgmtIp"], "192.0.2.50", "{request}");
    let request_id = request["id"].as_str().unwrap().to_owned();
    a.write(
        Method::POST,
        &format!("/v1/admin/cluster/join-requests/{request_id}/approve"),
        json!({"role": "compute"}),
        200,
        Read::Item("/v1/admin/cluster/join-requests"),
        &[],
    )
    .await;
    let (status, other) = a
        .server
        .post(
            "/v1/admin/cluster/join-requests",
            json!({"nodeId": "n-6", "mgmtIp": "192.0.2.60"}),
        )
        .await;
    assert_eq!(status, 201, "{other}");
    a.write(
        Method::POST,
        &format!(
            "/v1/admin/cluster/join-requests/{}/reject",
            other["id"].as_str().unwrap()
        ),
        json!({"reason": "not one of ours — asset tag unknown"}),
        200,
        Read::Item("/v1/admin/cluster/join-requests"),
        &[],
    )
    .await;

    // A join that fails, cleaned up, retried, and the member decommissioned.
    let (status, body) = a
        .server
        .post(
            MEMBERS,
            json!({"nodeId": "n-7", "role": "compute", "mgmtIp": "192.0.2.70"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    a.write(
        Method::POST,
        &format!("{MEMBERS}/n-7/join-failed"),
        json!({"step": "join/raft-openbao", "error": "raft join timed out after 30s"}),
        200,
        Read::Get(format!("{MEMBERS}/n-7")),
        CLEANUP_DRIVEN,
    )
    .await;
    a.server.cleaned("n-7").await;
    a.write(
        Method::POST,
        &format!("{MEMBERS}/n-7/retry-join"),
        json!({}),
        200,
        Read::Get(format!("{MEMBERS}/n-7")),
        CLEANUP_DRIVEN,
    )
    .await;
    a.write(
        Method::POST,
        &format!("{MEMBERS}/n-7/decommission"),
        json!({"reason": "retired: chassis fault", "force": true}),
        200,
        Read::Get(format!("{MEMBERS}/n-7")),
        CLEANUP_DRIVEN,
    )
    .await;

    // A node's facts, with a count past 2^53.
    a.write(
        Method::POST,
        &format!("{MEMBERS}/n-1/facts"),
        json!({"images": [], "packages": [], "bundleFreeBytes": 18446744073709551615u64,
               "backupFreeBytes": 9007199254740993u64, "ready": true}),
        200,
        Read::Get(format!("{MEMBERS}/n-1/facts")),
        &[],
    )
    .await;

    // An upgrade of stratum itself finalized: the log's storage version.
    let finalized = a
        .write(
            Method::POST,
            "/v1/admin/replicas/finalize",
            json!({}),
            200,
            Read::Member("/v1/admin/replicas", "storage"),
            &[],
        )
        .await;
    assert_eq!(finalized["level"], 2, "{finalized}");
}
