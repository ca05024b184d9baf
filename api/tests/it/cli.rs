//! The `stratum` binary: verify, export and replay.

use std::process::Command;

use crate::membership::scenario;
use crate::support::{each_backend, spawn_app};

fn stratum(args: &[&str], db_url: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(args)
        .env("STRATUM_DATABASE_URL", db_url)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

pub(crate) async fn exec(db_url: &str, sql: &str) {
    use sqlx::Connection;
    if db_url.starts_with("sqlite") {
        let mut c = sqlx::SqliteConnection::connect(db_url).await.unwrap();
        sqlx::query(sql).execute(&mut c).await.unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(db_url).await.unwrap();
        sqlx::query(sql).execute(&mut c).await.unwrap();
    }
}

/// The one number `sql` answers.
pub(crate) async fn scalar(db_url: &str, sql: &str) -> i64 {
    use sqlx::Connection;
    if db_url.starts_with("sqlite") {
        let mut c = sqlx::SqliteConnection::connect(db_url).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
    } else {
        let mut c = sqlx::PgConnection::connect(db_url).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
    }
}

/// Flips the lowest bit of the first payload byte of one event.
async fn flip_payload_byte(db_url: &str, position: u64) {
    use sqlx::Connection;
    let sel = format!("SELECT payload FROM events WHERE position = {position}");
    let upd = "UPDATE events SET payload = $1 WHERE position = $2";
    if db_url.starts_with("sqlite") {
        let mut c = sqlx::SqliteConnection::connect(db_url).await.unwrap();
        let mut b: Vec<u8> = sqlx::query_scalar(&sel).fetch_one(&mut c).await.unwrap();
        b[0] ^= 1;
        sqlx::query(upd)
            .bind(b)
            .bind(position as i64)
            .execute(&mut c)
            .await
            .unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(db_url).await.unwrap();
        let mut b: Vec<u8> = sqlx::query_scalar(&sel).fetch_one(&mut c).await.unwrap();
        b[0] ^= 1;
        sqlx::query(upd)
            .bind(b)
            .bind(position as i64)
            .execute(&mut c)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn changing_one_byte_of_any_stored_event_is_named_by_verify() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        scenario(&app).await;
        let head = app.head().await;
        let store = app.svc.state.store.clone();
        drop(app);

        let (code, out) = stratum(&["events", "verify"], &db.url);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(&format!("verified: {head} events")), "{out}");

        // Each column of each event is covered; flip one at a time.
        let flips = [
            "payload",
            "principal = principal || 'x'",
            "stream_version = stream_version + 100",
            "occurred_at = occurred_at + 1",
            "event_type = event_type || 'x'",
        ];
        for p in 1..=head {
            let flip = flips[p as usize % flips.len()];
            if flip == "payload" {
                flip_payload_byte(&db.url, p).await;
            } else {
                exec(
                    &db.url,
                    &format!("UPDATE events SET {flip} WHERE position = {p}"),
                )
                .await;
            }
            let got = stratum_store::verify_chain(&*store, None).await.unwrap();
            assert_eq!(
                got,
                stratum_store::Verification::Broken {
                    position: p,
                    reason: format!(
                        "the event at {p} does not match its stored hash: its bytes were changed"
                    )
                },
                "{}: {flip} at {p}",
                db.backend
            );
            if p == 3 {
                let (code, out) = stratum(&["events", "verify"], &db.url);
                assert_eq!(code, 1, "{out}");
                assert!(out.contains("broken at position 3"), "{out}");
                assert!(out.contains("does not match its stored hash"), "{out}");
                assert!(!out.contains('{'), "a reason for people, not Debug: {out}");
            }
            let undo = match flip.split(" = ").next().unwrap() {
                "payload" => {
                    flip_payload_byte(&db.url, p).await;
                    continue;
                }
                "principal" => "principal = substr(principal, 1, length(principal) - 1)".to_owned(),
                "stream_version" => "stream_version = stream_version - 100".to_owned(),
                "occurred_at" => "occurred_at = occurred_at - 1".to_owned(),
                _ => "event_type = substr(event_type, 1, length(event_type) - 1)".to_owned(),
            };
            exec(
                &db.url,
                &format!("UPDATE events SET {undo} WHERE position = {p}"),
            )
            .await;
        }
        let (code, out) = stratum(&["events", "verify"], &db.url);
        assert_eq!(code, 0, "{}: {out}", db.backend);
    }
}

#[tokio::test]
async fn export_writes_every_event_as_a_json_line_and_replay_checks_the_read_models() {
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        scenario(&app).await;
        let head = app.head().await;
        drop(app);
        let (code, out) = stratum(&["events", "export"], &db.url);
        assert_eq!(code, 0);
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len() as u64, head);
        assert_eq!(lines[1]["type"], "MemberAdmitted");
        assert_eq!(lines[1]["payload"]["nodeId"], "n-1");
        assert_eq!(lines[1]["principal"], "user/admin");

        let (code, out) = stratum(&["replay", "--check"], &db.url);
        assert_eq!(code, 0, "{out}");
        exec(
            &db.url,
            "UPDATE rm_members SET doc = '{}' WHERE node_id = 'n-2'",
        )
        .await;
        let (code, out) = stratum(&["replay", "--check"], &db.url);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("member n-2 differs"), "{out}");
        let (code, _) = stratum(&["replay", "--rebuild"], &db.url);
        assert_eq!(code, 0);
        let (code, out) = stratum(&["replay", "--check"], &db.url);
        assert_eq!(code, 0, "{}: {out}", db.backend);
    }
}

#[tokio::test]
async fn an_export_verifies_offline_and_names_a_changed_removed_or_reordered_line() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    scenario(&app).await;
    drop(app);
    let (_, export) = stratum(&["events", "export"], &db.url);
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, lines: &[&str]| {
        let p = dir.path().join(name);
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        p.display().to_string()
    };
    let lines: Vec<&str> = export.lines().collect();
    let ok = write("ok.jsonl", &lines);
    let (code, out) = stratum(&["events", "verify", "--file", &ok], "sqlite://unused.db");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("verified: {} events", lines.len())),
        "{out}"
    );

    // `stratum events verify --file` on a tampered copy exits 1 naming `position`.
    let broken_at = |name: &str, tampered: &[String], position: u64| {
        let lines: Vec<&str> = tampered.iter().map(String::as_str).collect();
        let (code, out) = stratum(
            &["events", "verify", "--file", &write(name, &lines)],
            "sqlite://unused.db",
        );
        assert_eq!(code, 1, "{name}: {out}");
        assert!(
            out.contains(&format!("broken at position {position}")),
            "{name}: {out}"
        );
    };
    let owned: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let edit = |i: usize, from: &str, to: &str| {
        let mut copy = owned.clone();
        let edited = copy[i].replace(from, to);
        assert_ne!(edited, copy[i]);
        copy[i] = edited;
        copy
    };
    // A changed line: the principal of event 4.
    let changed = edit(
        3,
        "\"principal\":\"user/admin\"",
        "\"principal\":\"user/mallory\"",
    );
    broken_at("c.jsonl", &changed, 4);
    // A changed decoded payload, the bytes untouched.
    broken_at(
        "p.jsonl",
        &edit(2, "\"nodeId\":\"n-1\"", "\"nodeId\":\"n-9\""),
        3,
    );
    // A removed line.
    let mut removed = owned.clone();
    removed.remove(5);
    broken_at("r.jsonl", &removed, 6);
    // Two lines swapped.
    let mut swapped = owned.clone();
    swapped.swap(6, 7);
    broken_at("s.jsonl", &swapped, 7);
}

#[tokio::test]
async fn an_export_imports_into_an_empty_database_on_the_other_backend() {
    let source = crate::support::sqlite();
    let app = spawn_app(&source).await;
    scenario(&app).await;
    let expected = app.svc.state.store.read_models().await.unwrap();
    let head = app.svc.state.store.head().await.unwrap();
    drop(app);
    let (_, export) = stratum(&["events", "export"], &source.url);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("log.jsonl");
    std::fs::write(&file, &export).unwrap();
    for target in crate::support::each_backend().await {
        let (code, out) = stratum(
            &["events", "import", "--file", file.to_str().unwrap()],
            &target.url,
        );
        assert_eq!(code, 0, "{}: {out}", target.backend);
        let s = stratum_store::connect(&target.url).await.unwrap();
        assert_eq!(
            s.head().await.unwrap(),
            head,
            "{}: same positions and hashes",
            target.backend
        );
        assert_eq!(
            s.read_models().await.unwrap(),
            expected,
            "{}",
            target.backend
        );
        let (code, _) = stratum(&["events", "verify"], &target.url);
        assert_eq!(code, 0);
        // Importing again is refused: the database is no longer empty.
        let (code, _) = stratum(
            &["events", "import", "--file", file.to_str().unwrap()],
            &target.url,
        );
        assert_ne!(code, 0);
        // And back: export the imported log and import it into a fresh SQLite.
        let (_, again) = stratum(&["events", "export"], &target.url);
        assert_eq!(
            again, export,
            "{}: the export round-trips byte for byte",
            target.backend
        );
        let back = crate::support::sqlite();
        let round = dir.path().join(format!("from-{}.jsonl", target.backend));
        std::fs::write(&round, &again).unwrap();
        let (code, out) = stratum(
            &["events", "import", "--file", round.to_str().unwrap()],
            &back.url,
        );
        assert_eq!(code, 0, "{out}");
        let s = stratum_store::connect(&back.url).await.unwrap();
        assert_eq!(s.head().await.unwrap(), head);
        assert_eq!(s.read_models().await.unwrap(), expected);
    }
}

#[tokio::test]
async fn replaying_an_export_to_p_reproduces_the_digest_the_api_answers_as_of_p() {
    let db = crate::support::sqlite();
    let app = spawn_app(&db).await;
    scenario(&app).await;
    let head = app.head().await;
    let live = app.get("/v1/admin/cluster/membership").await.body;
    let at_head = app
        .get(&format!("/v1/admin/cluster/membership?asOf={head}"))
        .await
        .body;
    assert_eq!(
        live["digest"], at_head["digest"],
        "the stored rows are the replayed rows"
    );
    // A report of the generation n-1 applied is no new generation, yet it
    // changes n-1's document: the summary polled after it (the digest is
    // rendered once per position) has the new digest.
    let g = live["generation"].as_u64().unwrap();
    let r = crate::membership::report_applied(&app, "n-1", g).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let reported = app.get("/v1/admin/cluster/membership").await.body;
    assert_eq!(reported["generation"], live["generation"]);
    assert_ne!(reported["digest"], live["digest"]);
    let head = app.head().await;
    let mut answers = Vec::new();
    for p in [1, 3, head / 2, head - 1, head] {
        let d = app
            .get(&format!("/v1/admin/cluster/membership?asOf={p}"))
            .await
            .body["digest"]
            .as_str()
            .unwrap()
            .to_owned();
        answers.push((p, d));
    }
    drop(app);
    let (_, export) = stratum(&["events", "export"], &db.url);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("log.jsonl");
    std::fs::write(&file, export).unwrap();
    for (p, api) in &answers {
        let (code, out) = stratum(
            &[
                "replay",
                "--digest",
                "--until",
                &p.to_string(),
                "--file",
                file.to_str().unwrap(),
            ],
            "sqlite://unused.db",
        );
        assert_eq!(code, 0, "{out}");
        assert_eq!(out.trim(), api, "asOf={p}");
        let (_, from_db) = stratum(&["replay", "--digest", "--until", &p.to_string()], &db.url);
        assert_eq!(from_db.trim(), api, "asOf={p}, from the database");
    }
    let distinct: std::collections::BTreeSet<_> = answers.iter().map(|(_, d)| d).collect();
    assert!(distinct.len() > 2, "the digest follows the state");
}

/// A mistyped SQLite path is an error naming the path, for every command
/// that reads or adds to an existing record, and no file is created; `serve`
/// and `events import` are the commands that may start a new database.
#[test]
fn commands_on_a_missing_sqlite_database_fail_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.db");
    let url = format!("sqlite://{}", path.display());
    for args in [
        &["events", "verify"][..],
        &["events", "export"],
        &["replay", "--check"],
        &["replay", "--digest"],
        &["replay", "--dump", "-"],
        &["replay", "--diff"],
        &["token", "list"],
        &[
            "token",
            "create",
            "--principal",
            "user/ann",
            "--policy",
            "ClusterOperator",
        ],
        &["token", "revoke", "tok-1"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_stratum"))
            .args(args)
            .env("STRATUM_DATABASE_URL", &url)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("no database at {}", path.display())),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?} printed an answer");
        assert!(!path.exists(), "{args:?} created {}", path.display());
    }
}

/// An auditor writes down the head a verify printed; a later verify given
/// it (`--expect-head`) catches a cut tail or another log, in the database
/// and in an export. An empty export proves nothing and fails.
#[tokio::test]
async fn a_recorded_head_catches_a_cut_tail_and_an_empty_export_fails() {
    let dir = tempfile::tempdir().unwrap();
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        scenario(&app).await;
        drop(app);
        let (code, out) = stratum(&["events", "verify"], &db.url);
        assert_eq!(code, 0, "{out}");
        let head = out.trim().rsplit(' ').next().unwrap().to_owned();
        let n: u64 = head.split_once(':').unwrap().0.parse().unwrap();
        let (code, out) = stratum(&["events", "verify", "--expect-head", &head], &db.url);
        assert_eq!(code, 0, "{}: {out}", db.backend);
        let other = format!("{n}:{}", "00".repeat(32));
        let (code, out) = stratum(&["events", "verify", "--expect-head", &other], &db.url);
        assert_eq!(code, 1, "{}: {out}", db.backend);
        assert!(
            out.contains(&format!("broken at position {n}"))
                && out.contains("does not have the head hash recorded for it"),
            "{}: {out}",
            db.backend
        );

        // The database's own tail cut, consistently (the head row moved
        // back with it): the chain holds, the recorded head catches it.
        let (_, export_before) = stratum(&["events", "export"], &db.url);
        exec(&db.url, &format!("DELETE FROM events WHERE position = {n}")).await;
        exec(
            &db.url,
            &format!(
                "UPDATE log_head SET position = {}, hash = (SELECT hash FROM events WHERE position = {})",
                n - 1,
                n - 1
            ),
        )
        .await;
        let (code, out) = stratum(&["events", "verify"], &db.url);
        assert_eq!(
            code, 0,
            "{}: a cut log chains on its own: {out}",
            db.backend
        );
        let (code, out) = stratum(&["events", "verify", "--expect-head", &head], &db.url);
        assert_eq!(code, 1, "{}: {out}", db.backend);
        assert!(
            out.contains(&format!("broken at position {n}")) && out.contains("its tail was cut"),
            "{}: {out}",
            db.backend
        );

        // The export without its last event still chains on its own, but
        // not against the head written down before.
        let lines: Vec<&str> = export_before.lines().collect();
        let cut = dir.path().join(format!("cut-{}.jsonl", db.backend));
        std::fs::write(&cut, lines[..lines.len() - 1].join("\n") + "\n").unwrap();
        let cut = cut.display().to_string();
        let (code, out) = stratum(&["events", "verify", "--file", &cut], "sqlite://unused.db");
        assert_eq!(code, 0, "{out}");
        let (code, out) = stratum(
            &["events", "verify", "--file", &cut, "--expect-head", &head],
            "sqlite://unused.db",
        );
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains(&format!("broken at position {n}")) && out.contains("its tail was cut"),
            "{out}"
        );
    }

    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let (code, out) = stratum(
        &["events", "verify", "--file", &empty.display().to_string()],
        "sqlite://unused.db",
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the export holds no events"), "{out}");

    let bad = Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["events", "verify", "--expect-head", "12"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("is not POSITION:HASH"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// `stratum` run as a user who may only read (as `nobody` when the tests
/// run as root, whom file modes do not stop).
fn stratum_as_reader(args: &[&str], db_url: &str) -> (i32, String, String) {
    let root = euid_is_root();
    let cmd = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_stratum"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_stratum"))
    };
    run(cmd, args, db_url)
}

/// Runs `cmd` with `args` on the database: exit code, stdout, stderr.
pub(crate) fn run(mut cmd: Command, args: &[&str], db_url: &str) -> (i32, String, String) {
    let out = cmd
        .args(args)
        .env("STRATUM_DATABASE_URL", db_url)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn euid_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The read-only commands work on a copy nobody may write, change nothing
/// in it, and refuse a schema newer than theirs with a sentence naming both
/// versions; an empty log verifies only with `--allow-empty`.
#[tokio::test]
async fn auditor_tools_read_a_read_only_copy_and_name_a_newer_schema() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    for db in each_backend().await {
        let app = spawn_app(&db).await;
        scenario(&app).await;
        drop(app);
        let (code, verified) = stratum(&["events", "verify"], &db.url);
        assert_eq!(code, 0, "{verified}");
        let (_, tokens) = stratum(&["token", "list"], &db.url);
        assert!(tokens.contains("tok-"), "{tokens}");

        if db.backend == "postgres" {
            // An auditor's role that may only read: the tools neither
            // migrate nor write, so they work under it.
            let role = format!("auditor_{}", std::process::id());
            exec(&db.url, &format!("CREATE ROLE {role} LOGIN")).await;
            exec(
                &db.url,
                &format!("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"),
            )
            .await;
            let url = db
                .url
                .replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
            assert_ne!(url, db.url, "the test URL names its user");
            for args in [
                &["events", "verify"][..],
                &["events", "export"],
                &["replay", "--check"],
                &["replay", "--digest"],
                &["replay", "--dump", "-"],
                &["replay", "--diff"],
                &["token", "list"],
            ] {
                let (code, out) = stratum(args, &url);
                assert_eq!(code, 0, "{args:?} as a reading role: {out}");
                if args == ["events", "verify"] {
                    assert_eq!(out, verified);
                }
            }
            // A write is the server's refusal.
            let (code, _) = stratum(&["token", "revoke", "tok-none"], &url);
            assert_eq!(code, 2);
            exec(
                &db.url,
                &format!("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}"),
            )
            .await;
            exec(&db.url, &format!("DROP ROLE {role}")).await;
        }

        if db.backend == "sqlite" {
            // A copy, as an auditor is handed one: a file and a directory
            // nobody may write.
            let source = db.url.trim_start_matches("sqlite://");
            let copy_dir = dir.path().join("copy");
            std::fs::create_dir(&copy_dir).unwrap();
            let copy = copy_dir.join("stratum.db");
            let _ = source;
            exec(&db.url, &format!("VACUUM INTO '{}'", copy.display())).await;
            {
                use sqlx::Connection;
                let url = format!("sqlite://{}", copy.display());
                let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
                sqlx::query("PRAGMA journal_mode=WAL")
                    .execute(&mut c)
                    .await
                    .unwrap();
                c.close().await.unwrap();
            }
            let beside = |d: &std::path::Path| -> Vec<std::ffi::OsString> {
                std::fs::read_dir(d)
                    .unwrap()
                    .map(|e| e.unwrap().file_name())
                    .collect()
            };
            assert_eq!(beside(&copy_dir).len(), 1, "{:?}", beside(&copy_dir));
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o444)).unwrap();
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::set_permissions(&copy_dir, std::fs::Permissions::from_mode(0o555)).unwrap();
            let before = std::fs::read(&copy).unwrap();
            let url = format!("sqlite://{}", copy.display());
            for args in [
                &["events", "verify"][..],
                &["events", "export"],
                &["replay", "--check"],
                &["replay", "--digest"],
                &["replay", "--dump", "-"],
                &["replay", "--diff"],
                &["token", "list"],
            ] {
                let (code, out, err) = stratum_as_reader(args, &url);
                assert_eq!(code, 0, "{args:?} on a read-only copy: {out}{err}");
                match args {
                    ["events", "verify"] => assert_eq!(out, verified, "the copy's head"),
                    ["token", "list"] => assert_eq!(out, tokens),
                    // The copy's rows are what this build folds.
                    ["replay", "--diff"] => assert_eq!(out, ""),
                    _ => assert!(!out.trim().is_empty(), "{args:?} answered nothing"),
                }
            }
            // A write on it fails as the database's own refusal, not by
            // half-creating anything.
            let (code, _, err) = stratum_as_reader(&["token", "revoke", "tok-none"], &url);
            assert_eq!(code, 2, "{err}");
            assert_eq!(
                std::fs::read(&copy).unwrap(),
                before,
                "the copy is unchanged"
            );
            let left = beside(&copy_dir);
            assert_eq!(left.len(), 1, "nothing was created beside it: {left:?}");
            std::fs::set_permissions(&copy_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }

        // A database a newer stratum migrated.
        exec(
            &db.url,
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (9999, 'from the future', TRUE, X'00', 0)"
                .replace("X'00'", if db.backend == "sqlite" { "X'00'" } else { "'\\x00'::bytea" })
                .as_str(),
        )
        .await;
        for args in [
            &["events", "verify"][..],
            &["events", "export"],
            &["replay", "--check"],
            &["replay", "--digest"],
            &["replay", "--dump", "-"],
            &["replay", "--diff"],
            &["token", "list"],
        ] {
            let out = Command::new(env!("CARGO_BIN_EXE_stratum"))
                .args(args)
                .env("STRATUM_DATABASE_URL", &db.url)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains("schema is version 9999, newer than this stratum's (6)"),
                "{}: {args:?} names both versions: {err}",
                db.backend
            );
        }
        exec(&db.url, "DELETE FROM _sqlx_migrations WHERE version = 9999").await;
        // One an older stratum left: read-only tools do not migrate it.
        exec(&db.url, "DELETE FROM _sqlx_migrations WHERE version = 6").await;
        let out = Command::new(env!("CARGO_BIN_EXE_stratum"))
            .args(["events", "verify"])
            .env("STRATUM_DATABASE_URL", &db.url)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("schema is version 5, older than this stratum's (6)"),
            "{}: {err}",
            db.backend
        );
    }

    // An empty log proves nothing unless it is said to be fine.
    let empty = crate::support::sqlite();
    drop(stratum_store::connect(&empty.url).await.unwrap());
    let (code, out) = stratum(&["events", "verify"], &empty.url);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("broken at position 1: the log holds no events"),
        "{out}"
    );
    let (code, out) = stratum(&["events", "verify", "--allow-empty"], &empty.url);
    assert_eq!(code, 0, "{out}");
}
