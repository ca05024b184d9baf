//! `--config stratum.toml`: every flag is a key; a flag wins over its
//! variable, which wins over the file, which wins over the default; and
//! `serve --print-config` shows what is in effect, secrets redacted.

use std::process::{Command, Stdio};

use super::binary::{free_port, Server, ADMIN};

/// `stratum <args>` with none of the test's own `STRATUM_*` variables.
fn stratum(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stratum"));
    for key in super::binary::stratum_vars() {
        cmd.env_remove(key);
    }
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

#[tokio::test]
async fn serve_takes_its_settings_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let port = free_port();
    let file = d.join("stratum.toml");
    std::fs::write(
        &file,
        format!(
            "# stratum's settings\nlisten = \"127.0.0.1:{port}\"\ndatabase-url = \"sqlite://{dir}/from-file.db\"\nlog_format = \"json\"\nmax-connections = 77\nbootstrap-token = \"{ADMIN}\"\nraft-patroni-commands = '[[\"sh\", \"-c\", \"env > {dir}/{{nodeId}}.env\"]]'\n",
            dir = d.display()
        ),
    )
    .unwrap();
    let stderr = d.join("stderr.log");
    let child =
        tokio::process::Command::from(stratum(&["serve", "--config", file.to_str().unwrap()], &[]))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
    let mut server = Server {
        child,
        base: format!("http://127.0.0.1:{port}"),
        stderr,
        http: reqwest::Client::new(),
    };
    server.wait_healthy().await;
    assert!(
        d.join("from-file.db").exists(),
        "the file's database is used"
    );
    let (status, _) = server.get("/v1/admin/cluster/members").await;
    assert_eq!(status, 200);
    let log = server.log();
    let serving = log
        .lines()
        .find(|l| l.contains("\"serving\""))
        .unwrap_or_else(|| panic!("JSON logs, as the file says:\n{log}"));
    let serving: serde_json::Value = serde_json::from_str(serving).unwrap();
    assert_eq!(serving["max_connections"], 77, "{serving}");

    // The file's settings stay in the service: a raft command it runs
    // sees none of them (the bootstrap token least of all).
    server.admit("n-1", "192.0.2.11").await;
    server
        .member_post(
            "n-1",
            "join-failed",
            serde_json::json!({"step": "join/raft-patroni", "error": "timed out"}),
        )
        .await;
    server.cleaned("n-1").await;
    let env = std::fs::read_to_string(d.join("n-1.env")).unwrap();
    assert!(!env.contains("STRATUM_"), "{env}");
    assert!(!env.contains(ADMIN), "{env}");
}

#[test]
fn flags_win_over_variables_which_win_over_the_file_and_secrets_are_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("stratum.toml");
    let key = stratum_domain::testing::release_keys_spec();
    std::fs::write(
        &file,
        format!(
            "listen = \"127.0.0.1:7001\"\nidle-timeout = \"5s\"\nmax-connections = 100\n\
             request-timeout = \"20s\"\n\
             database-url = \"postgres://stratum:hunter2-db-password@db.example/stratum\"\n\
             backup-target = \"s3://key:backup-target-secret@backups.example/stratum\"\n\
             bootstrap-token = \"a-bootstrap-secret-that-is-long-enough-0123\"\n\
             openbao-addr = \"http://127.0.0.1:8200\"\n\
             openbao-token = \"s.openbao-secret-token\"\n\
             release-keys = [\"{key}\"]\n"
        ),
    )
    .unwrap();
    let out = stratum(
        &[
            "serve",
            "--config",
            file.to_str().unwrap(),
            "--print-config",
            "--idle-timeout",
            "9s",
        ],
        &[
            ("STRATUM_MAX_CONNECTIONS", "88"),
            ("STRATUM_IDLE_TIMEOUT", "7s"),
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key}:\n{text}"))
            .to_owned()
    };
    assert_eq!(line("listen"), "listen = \"127.0.0.1:7001\"  # config file");
    assert_eq!(line("idle-timeout"), "idle-timeout = \"9s\"  # flag");
    assert_eq!(
        line("max-connections"),
        "max-connections = \"88\"  # env STRATUM_MAX_CONNECTIONS"
    );
    assert_eq!(
        line("request-timeout"),
        "request-timeout = \"20s\"  # config file"
    );
    assert_eq!(
        line("shutdown-grace"),
        "shutdown-grace = \"10s\"  # default"
    );
    assert_eq!(
        line("release-keys"),
        format!("release-keys = \"{key}\"  # config file")
    );
    assert!(line("database-url").contains("postgres://stratum:***@db.example/stratum"));
    assert!(line("bootstrap-token").contains("<redacted>"));
    assert!(line("openbao-token").contains("<redacted>"));
    for secret in [
        "hunter2-db-password",
        "a-bootstrap-secret",
        "openbao-secret-token",
        "backup-target-secret",
    ] {
        assert!(!text.contains(secret), "{secret} shown:\n{text}");
    }
    // What it prints is itself a config file.
    let printed = d.join("printed.toml");
    std::fs::write(
        &printed,
        text.replace("<redacted>", "x".repeat(40).as_str()),
    )
    .unwrap();
    let again = stratum(
        &[
            "serve",
            "--config",
            printed.to_str().unwrap(),
            "--print-config",
        ],
        &[],
    )
    .output()
    .unwrap();
    assert!(again.status.success(), "{again:?}");

    // A setting a start would refuse is refused here too.
    let out = stratum(&["serve", "--print-config", "--idle-timeout", "soon"], &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("STRATUM_IDLE_TIMEOUT"));

    // STRATUM_CONFIG names the file too.
    let out = stratum(
        &["serve", "--print-config"],
        &[("STRATUM_CONFIG", file.to_str().unwrap())],
    )
    .output()
    .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("listen = \"127.0.0.1:7001\"  # config file")
    );
}

#[test]
fn a_libpq_connection_string_is_printed_without_its_password() {
    let url = "host=db1,db2,db3 port=5432 dbname=stratum user=stratum password='s3cret pass' target_session_attrs=read-write";
    let out = stratum(
        &["serve", "--print-config"],
        &[("STRATUM_DATABASE_URL", url)],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("s3cret"), "{text}");
    assert!(
        text.contains("host=db1,db2,db3 port=5432 dbname=stratum user=stratum password=*** target_session_attrs=read-write"),
        "{text}"
    );
}

#[test]
fn a_key_that_is_no_setting_or_a_broken_file_stops_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stratum.toml");
    std::fs::write(&file, "listen = \"127.0.0.1:7001\"\nlisten-port = 7002\n").unwrap();
    let out = stratum(&["serve", "--config", file.to_str().unwrap()], &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`listen-port` is not a setting"), "{err}");
    std::fs::write(&file, "listen = \n").unwrap();
    let out = stratum(&["serve", "--config", file.to_str().unwrap()], &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("config file"));
    let out = stratum(&["serve", "--config", "/nonexistent/stratum.toml"], &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/stratum.toml"));
}
