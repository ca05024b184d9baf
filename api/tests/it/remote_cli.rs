//! The remote CLI against a live `stratum serve`, as an operator on a
//! laptop runs it: `--server` and a token, no database.

use std::process::Output;

use serde_json::Value;

use super::binary::{start, start_trusting_releases, Server, ADMIN};

/// `stratum <args>` against `server`, with only the remote settings (no
/// database anywhere: it runs in an empty directory).
pub(super) fn stratum(server: &Server, dir: &std::path::Path, args: &[&str]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"));
    for key in super::binary::stratum_vars() {
        cmd.env_remove(key);
    }
    cmd.args(args)
        .current_dir(dir)
        .env("STRATUM_SERVER", &server.base)
        .env("STRATUM_TOKEN", ADMIN)
        .output()
        .unwrap()
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn json(out: &Output, what: &str) -> Value {
    serde_json::from_str(&ok(out, what)).unwrap_or_else(|e| panic!("{what}: {e}"))
}

#[tokio::test]
async fn an_operator_lists_gets_fails_a_join_decommissions_and_cancels_an_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let laptop = tempfile::tempdir().unwrap();
    let l = laptop.path();
    let server = start_trusting_releases(dir.path()).await;
    server.admit_three().await;

    // list: a table by default, JSON on request.
    let table = ok(&stratum(&server, l, &["members", "list"]), "members list");
    let header = table.lines().nth(1).unwrap();
    for column in ["NODE", "STATE", "ROLE", "RACK", "APPLIED GEN", "LAGGING"] {
        assert!(header.contains(column), "{table}");
    }
    let row = |node: &str| {
        table
            .lines()
            .find(|l| l.contains(&format!(" {node} ")))
            .unwrap_or_else(|| panic!("no row for {node}:\n{table}"))
            .to_owned()
    };
    assert!(row("n-1").contains("active"), "{table}");
    assert!(row("n-3").contains("joining"), "{table}");
    let listed = json(
        &stratum(&server, l, &["members", "list", "-o", "json"]),
        "members list -o json",
    );
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["nodeId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["n-1", "n-2", "n-3"]);
    let yaml = ok(
        &stratum(&server, l, &["members", "get", "n-1", "-o", "yaml"]),
        "members get -o yaml",
    );
    assert!(yaml.lines().any(|l| l == "nodeId: n-1"), "{yaml}");

    // get
    let got = json(
        &stratum(&server, l, &["members", "get", "n-3", "-o", "json"]),
        "members get",
    );
    assert_eq!(got["state"], "joining");
    let table = ok(&stratum(&server, l, &["members", "get", "n-3"]), "get");
    assert!(
        table
            .lines()
            .any(|l| l.contains("state") && l.contains("joining")),
        "{table}"
    );

    // join-failed
    let failed = json(
        &stratum(
            &server,
            l,
            &[
                "members",
                "join-failed",
                "n-3",
                "--step",
                "join/raft-openbao",
                "--error",
                "raft join timed out",
                "-o",
                "json",
            ],
        ),
        "members join-failed",
    );
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["failedStep"], "join/raft-openbao");
    assert_eq!(
        server.member("n-3").await["failedError"],
        "raft join timed out"
    );

    // decommission with a reason, in a table
    let table = ok(
        &stratum(
            &server,
            l,
            &[
                "members",
                "decommission",
                "n-3",
                "--reason",
                "bad disk in slot 4",
            ],
        ),
        "members decommission",
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("decommissionReason") && l.contains("bad disk in slot 4")),
        "{table}"
    );
    // The member reached a raft: its removal is done by the cleanup after
    // the answer, and `MemberDecommissioned` follows it.
    let decommissioned = |history: &str| {
        history
            .lines()
            .any(|l| l.contains("MemberDecommissioned") && l.contains("bad disk in slot 4"))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let history = loop {
        let history = ok(
            &stratum(&server, l, &["members", "history", "n-3"]),
            "members history",
        );
        if decommissioned(&history) || std::time::Instant::now() > deadline {
            break history;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(decommissioned(&history), "{history}");

    // An upgrade, cancelled.
    server.register_releases(&["1.0.0", "1.1.0"]).await;
    server.set_running_release("1.0.0").await;
    server.caught_up(&["n-1", "n-2"]).await;
    let id = server.plan_upgrade("1.1.0").await;
    let listed = ok(&stratum(&server, l, &["upgrades", "list"]), "upgrades list");
    assert!(listed.contains(&id), "{listed}");
    let canceled = json(
        &stratum(&server, l, &["upgrades", "cancel", &id, "-o", "json"]),
        "upgrades cancel",
    );
    assert_eq!(canceled["state"], "canceled", "{canceled}");
    assert_eq!(canceled["canceledBy"], "user/admin");
    let table = ok(&stratum(&server, l, &["upgrades", "get", &id]), "get");
    assert!(
        table
            .lines()
            .any(|l| l.contains("state") && l.contains("canceled")),
        "{table}"
    );

    // The rest of the read commands answer.
    let membership = json(
        &stratum(&server, l, &["membership", "-o", "json"]),
        "membership",
    );
    assert_eq!(membership["counts"]["decommissioned"], 1, "{membership}");
    let peers = ok(&stratum(&server, l, &["peers"]), "peers");
    assert!(
        peers.contains("patroni") && peers.contains("n-1"),
        "{peers}"
    );
    let releases = ok(&stratum(&server, l, &["releases", "list"]), "releases");
    assert!(releases.contains("1.1.0"), "{releases}");
    ok(&stratum(&server, l, &["alarms"]), "alarms");
    let events = json(
        &stratum(
            &server,
            l,
            &[
                "events",
                "list",
                "--type",
                "MemberDecommissioned",
                "-o",
                "json",
            ],
        ),
        "events list",
    );
    assert_eq!(events.as_array().unwrap().len(), 1, "{events}");
    assert_eq!(events[0]["payload"]["reason"], "bad disk in slot 4");
}

#[tokio::test]
async fn errors_print_code_message_and_fields_and_exit_by_http_class() {
    let dir = tempfile::tempdir().unwrap();
    let laptop = tempfile::tempdir().unwrap();
    let l = laptop.path();
    let server = start(dir.path(), &[]).await;
    server.admit("n-1", "192.0.2.11").await;

    // 404: exit 4, code and message on standard error.
    let out = stratum(&server, l, &["members", "get", "n-9"]);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("404 NOT_FOUND"), "{err}");
    assert!(err.contains("request id: "), "{err}");
    assert!(out.stdout.is_empty());

    // 400 with field errors: every one printed.
    let out = stratum(
        &server,
        l,
        &[
            "members",
            "update",
            "n-1",
            "--role",
            "wizard",
            "--mgmt-ip",
            "not-an-ip",
        ],
    );
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("400 INVALID_INPUT"), "{err}");
    assert!(err.contains("  role: "), "{err}");
    assert!(err.contains("  mgmtIp: "), "{err}");

    // 401 without a token.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"));
    let out = cmd
        .args(["--server", &server.base, "members", "list"])
        .env_remove("STRATUM_TOKEN")
        .current_dir(l)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401 UNAUTHENTICATED"));

    // No server there: exit 1, saying so.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["--server", "http://127.0.0.1:9", "members", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach http://127.0.0.1:9"));

    // An empty STRATUM_SERVER is no server: a host command opens the
    // database.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["token", "list"])
        .env("STRATUM_SERVER", "")
        .env(
            "STRATUM_DATABASE_URL",
            format!("sqlite://{}", dir.path().join("stratum.db").display()),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("user/admin"));

    // A remote-only command without a server is a usage error.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["members", "list"])
        .env_remove("STRATUM_SERVER")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--server"));
}

#[tokio::test]
async fn tokens_events_and_peers_work_through_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let laptop = tempfile::tempdir().unwrap();
    let l = laptop.path();
    let server = start(d, &[]).await;
    server.admit("n-1", "192.0.2.11").await;

    // tokens create | list | revoke (the `tokens` spelling too)
    let created = json(
        &stratum(
            &server,
            l,
            &[
                "tokens",
                "create",
                "--principal",
                "user/alice",
                "--policy",
                "ReadOnly",
                "-o",
                "json",
            ],
        ),
        "tokens create",
    );
    let id = created["id"].as_str().unwrap().to_owned();
    let secret = created["token"].as_str().unwrap().to_owned();
    let listed = ok(&stratum(&server, l, &["tokens", "list"]), "tokens list");
    assert!(
        listed.contains(&id) && listed.contains("user/alice"),
        "{listed}"
    );
    assert!(!listed.contains(&secret), "a listing never shows a secret");
    let as_alice = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
            .args(args)
            .env("STRATUM_SERVER", &server.base)
            .env("STRATUM_TOKEN", &secret)
            .current_dir(l)
            .output()
            .unwrap()
    };
    ok(&as_alice(&["members", "list"]), "alice reads");
    // ReadOnly may not decommission: 403, exit 4.
    let out = as_alice(&["members", "decommission", "n-1", "--reason", "x"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("403 ACCESS_DENIED"));
    // The token read from a file works the same.
    let file = l.join("token");
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["--server", &server.base, "--token-file"])
        .arg(&file)
        .args(["membership", "-o", "json"])
        .env_remove("STRATUM_TOKEN")
        .output()
        .unwrap();
    ok(&out, "--token-file");
    // ... and the remote settings from a config file, the token file by
    // its variable.
    let cli = l.join("cli.toml");
    std::fs::write(
        &cli,
        format!("server = \"{}\"\noutput = \"json\"\n", server.base),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .arg("--config")
        .arg(&cli)
        .arg("membership")
        .env_remove("STRATUM_TOKEN")
        .env_remove("STRATUM_SERVER")
        .env("STRATUM_TOKEN_FILE", &file)
        .output()
        .unwrap();
    let summary: Value = serde_json::from_str(&ok(&out, "--config cli.toml")).unwrap();
    assert!(summary["generation"].is_u64(), "{summary}");
    ok(
        &stratum(&server, l, &["token", "revoke", &id]),
        "token revoke",
    );
    let out = as_alice(&["members", "list"]);
    assert_eq!(out.status.code(), Some(4), "a revoked token is refused");

    // events export through the server is the host's export, byte for
    // byte, and verifies offline.
    let remote = ok(&stratum(&server, l, &["events", "export"]), "events export");
    let host = super::binary::host(d, &["events", "export"]);
    assert!(host.status.success());
    assert_eq!(remote.as_bytes(), host.stdout.as_slice());
    std::fs::write(l.join("log.jsonl"), &remote).unwrap();
    let verify = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["events", "verify", "--file"])
        .arg(l.join("log.jsonl"))
        .output()
        .unwrap();
    assert!(verify.status.success(), "{verify:?}");
    let part = ok(
        &stratum(
            &server,
            l,
            &["events", "export", "--after", "1", "--until", "2"],
        ),
        "export a range",
    );
    assert_eq!(part.lines().count(), 1, "{part}");
    assert!(part.contains("\"position\":2"), "{part}");

    // events list follows the pages until it has `--limit` events: the
    // first admission is past the first position.
    let first = json(
        &stratum(
            &server,
            l,
            &[
                "events",
                "list",
                "--type",
                "MemberAdmitted",
                "--limit",
                "1",
                "-o",
                "json",
            ],
        ),
        "events list --limit 1",
    );
    assert_eq!(first.as_array().unwrap().len(), 1, "{first}");
    assert_eq!(first[0]["streamId"], "member/n-1");
    let by = json(
        &stratum(
            &server,
            l,
            &[
                "events",
                "list",
                "--after",
                "1",
                "--stream",
                "member/n-1",
                "--actor",
                "user/admin",
                "-o",
                "json",
            ],
        ),
        "events list filtered",
    );
    assert!(by
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["streamId"] == "member/n-1" && e["principal"] == "user/admin"));
    assert!(!by.as_array().unwrap().is_empty());
    // tail --after replays from there.
    let mut from_start = tokio::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["events", "tail", "--after", "0", "-o", "json"])
        .env("STRATUM_SERVER", &server.base)
        .env("STRATUM_TOKEN", ADMIN)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(from_start.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .expect("tail --after 0 printed the first event")
            .unwrap()
            .unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(event["position"], 1, "{event}");
    }

    // events tail follows the stream: an event made after it started
    // arrives.
    let mut tail = tokio::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["events", "tail", "-o", "json"])
        .env("STRATUM_SERVER", &server.base)
        .env("STRATUM_TOKEN", ADMIN)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // And peers --watch prints the lists, then again on a change.
    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["peers", "--watch", "-o", "json"])
        .env("STRATUM_SERVER", &server.base)
        .env("STRATUM_TOKEN", ADMIN)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // tail starts at the head when it has connected, which a loaded
    // machine may take a while to do: admissions go on, a second apart,
    // until it prints one.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(tail.stdout.take().unwrap()).lines();
    let mut admitted = Vec::new();
    let line = loop {
        let n = admitted.len() + 2;
        server
            .admit(&format!("n-{n}"), &format!("192.0.2.{}", 10 + n))
            .await;
        admitted.push(format!("member/n-{n}"));
        match tokio::time::timeout(std::time::Duration::from_secs(1), lines.next_line()).await {
            Ok(line) => break line.unwrap().expect("tail printed the new event"),
            Err(_) => assert!(admitted.len() < 20, "tail printed no new event"),
        }
    };
    let event: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(event["type"], "MemberAdmitted", "{event}");
    assert!(
        admitted.iter().any(|s| event["streamId"] == *s.as_str()),
        "{event}; admitted {admitted:?}"
    );
    let mut out = String::new();
    let mut reader = tokio::io::BufReader::new(watch.stdout.take().unwrap());
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while !out.contains("192.0.2.12") {
        let mut line = String::new();
        tokio::time::timeout_at(deadline, reader.read_line(&mut line))
            .await
            .expect("peers --watch printed the new generation")
            .unwrap();
        out.push_str(&line);
    }
    assert!(out.contains("192.0.2.11"), "{out}");
}

#[test]
fn completions_and_the_man_page_are_generated() {
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains("decommission"), "{shell}: {script}");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .arg("man")
        .output()
        .unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH stratum 1"), "{page}");
    assert!(page.contains("members"), "{page}");
    // A closed pipe ends the command quietly, not with a panic.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} completions bash | head -1",
            env!("CARGO_BIN_EXE_stratum")
        ))
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

#[tokio::test]
async fn releases_upgrades_member_changes_and_time_travel_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let laptop = tempfile::tempdir().unwrap();
    let l = laptop.path();
    let server = start_trusting_releases(dir.path()).await;
    server.admit("n-1", "192.0.2.11").await;

    // releases register --file, signed manifests.
    for v in ["1.0.0", "1.1.0"] {
        let file = l.join(format!("{v}.json"));
        std::fs::write(
            &file,
            stratum_domain::testing::manifest(v, "13.1", None).to_string(),
        )
        .unwrap();
        let registered = json(
            &stratum(
                &server,
                l,
                &[
                    "releases",
                    "register",
                    "--file",
                    file.to_str().unwrap(),
                    "-o",
                    "json",
                ],
            ),
            "releases register",
        );
        assert_eq!(registered["version"], v);
    }
    let releases = ok(&stratum(&server, l, &["releases", "list"]), "releases list");
    assert!(
        releases.contains("1.0.0") && releases.contains("1.1.0"),
        "{releases}"
    );
    server.set_running_release("1.0.0").await;

    // An upgrade whose prechecks fail (n-1 never applied a generation):
    // acknowledged, rolled back; apply is refused with its 409.
    let created = json(
        &stratum(
            &server,
            l,
            &[
                "upgrades",
                "create",
                "--target-release",
                "1.1.0",
                "--backup",
                "node",
                "-o",
                "json",
            ],
        ),
        "upgrades create",
    );
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["targetRelease"], "1.1.0");
    server
        .eventually("the prechecks fail", || async {
            let (_, u) = server.get(&format!("/v1/admin/upgrades/{id}")).await;
            (u["state"] == "failed").then_some(())
        })
        .await;
    let out = stratum(&server, l, &["upgrades", "apply", &id]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("409 "));
    let acked = json(
        &stratum(&server, l, &["upgrades", "acknowledge", &id, "-o", "json"]),
        "upgrades acknowledge",
    );
    assert!(acked["acknowledgedAt"].is_string(), "{acked}");
    let rollback = json(
        &stratum(&server, l, &["upgrades", "rollback", &id, "-o", "json"]),
        "upgrades rollback",
    );
    assert_eq!(rollback["rollbackOf"], id.as_str(), "{rollback}");
    assert_eq!(rollback["targetRelease"], "1.0.0");
    let table = ok(&stratum(&server, l, &["alarms", "--active"]), "alarms");
    assert!(table.contains("NAME"), "{table}");
    let then = json(
        &stratum(&server, l, &["alarms", "--as-of", "1", "-o", "json"]),
        "alarms --as-of",
    );
    assert_eq!(then, serde_json::json!([]));

    // members update, guarded by If-Match, then read as of before it.
    let before = server.member("n-1").await;
    let (_, m) = server.get("/v1/admin/cluster/membership").await;
    let at = m["generation"].as_u64().unwrap().to_string();
    let version = before["version"].to_string();
    let stale = stratum(
        &server,
        l,
        &[
            "members",
            "update",
            "n-1",
            "--label",
            "topology.rack=r9",
            "--if-match",
            "999",
        ],
    );
    assert_eq!(stale.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&stale.stderr).contains("412 "));
    let updated = json(
        &stratum(
            &server,
            l,
            &[
                "members",
                "update",
                "n-1",
                "--label",
                "topology.rack=r9",
                "--binding",
                "storage=198.51.100.11",
                "--if-match",
                &version,
                "-o",
                "json",
            ],
        ),
        "members update",
    );
    assert_eq!(updated["rack"], "r9", "{updated}");
    assert_eq!(updated["bindings"]["storage"], "198.51.100.11");
    let now = json(
        &stratum(
            &server,
            l,
            &["members", "list", "--rack", "r9", "-o", "json"],
        ),
        "list --rack",
    );
    assert_eq!(now.as_array().unwrap().len(), 1);
    let then = json(
        &stratum(
            &server,
            l,
            &["members", "list", "--as-of", &at, "-o", "json"],
        ),
        "list --as-of",
    );
    assert_ne!(then[0]["rack"], "r9", "{then}");
    let none = json(
        &stratum(
            &server,
            l,
            &["members", "list", "--state", "active", "-o", "json"],
        ),
        "list --state",
    );
    assert_eq!(none, serde_json::json!([]));
    // STRATUM_OUTPUT sets the format, like -o.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["members", "list"])
        .env("STRATUM_SERVER", &server.base)
        .env("STRATUM_TOKEN", ADMIN)
        .env("STRATUM_OUTPUT", "yaml")
        .output()
        .unwrap();
    let yaml = ok(&out, "STRATUM_OUTPUT=yaml");
    assert!(yaml.starts_with("- "), "{yaml}");
    assert!(yaml.contains("nodeId: n-1"), "{yaml}");
}
