//! What `serve` makes of its settings at its start: a malformed raft
//! setting, a busy address, an unreachable PostgreSQL, the raft settings as
//! flags (with a CA file) and a node token from the host CLI, a bootstrap
//! token on a bootstrapped database.

use super::*;

#[tokio::test]
async fn serve_refuses_to_start_on_a_malformed_raft_setting() {
    // The settings, and the variable the error must name.
    let cases: [(&[(&str, &str)], &str); 8] = [
        (
            &[("STRATUM_RAFT_OVN_COMMANDS", "not json")],
            "STRATUM_RAFT_OVN_COMMANDS",
        ),
        (&[("STRATUM_RAFT_OVN", "bogus")], "STRATUM_RAFT_OVN"),
        (
            &[("STRATUM_RAFT_PATRONI_COMMANDS", "[[]]")],
            "STRATUM_RAFT_PATRONI_COMMANDS",
        ),
        (
            &[
                ("STRATUM_RAFT_PATRONI", "syncobj"),
                ("STRATUM_PATRONI_RAFT_PORT", "99999"),
            ],
            "STRATUM_PATRONI_RAFT_PORT",
        ),
        (
            &[("STRATUM_OPENBAO_ADDR", "http://127.0.0.1:1")],
            "STRATUM_OPENBAO_TOKEN",
        ),
        (
            &[
                ("STRATUM_OPENBAO_ADDR", "https://127.0.0.1:1"),
                ("STRATUM_OPENBAO_TOKEN", "s.token"),
                ("STRATUM_OPENBAO_CACERT", "/nonexistent/openbao-ca.pem"),
            ],
            "STRATUM_OPENBAO_CACERT",
        ),
        (
            &[("STRATUM_RAFT_RETRY_MIN", "soon")],
            "STRATUM_RAFT_RETRY_MIN",
        ),
        (
            &[("STRATUM_RAFT_RETRY_MAX", "0s")],
            "STRATUM_RAFT_RETRY_MAX",
        ),
    ];
    for (settings, named) in cases {
        let dir = tempfile::tempdir().unwrap();
        let env: Vec<(&str, String)> = settings
            .iter()
            .map(|(k, v)| (*k, (*v).to_owned()))
            .collect();
        let (key, value) = settings[settings.len() - 1];
        let out = tokio::time::timeout(
            Duration::from_secs(20),
            serve_command(dir.path(), free_port(), &env).output(),
        )
        .await
        .unwrap_or_else(|_| panic!("{key}={value}: stratum serve did not exit within 20 s"))
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{key}={value}: refused, not {}:\n{stderr}",
            out.status
        );
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default();
        assert!(
            last.contains(named),
            "{key}={value}: the error is one line naming {named}:\n{stderr}"
        );
    }
}

/// A busy address stops the start with an error naming it, before any
/// database is created or a bootstrap token is issued and shown.
#[tokio::test]
async fn a_busy_address_stops_the_start_before_a_token_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut cmd = serve_command(dir.path(), port, &[]);
    cmd.env_remove("STRATUM_BOOTSTRAP_TOKEN");
    let out = tokio::time::timeout(Duration::from_secs(20), cmd.output())
        .await
        .expect("stratum serve exits")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing shown: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !dir.path().join("stratum.db").exists(),
        "no database created"
    );
    drop(taken);
}

/// A PostgreSQL that is not there is named with the connection's own error
/// at once, not as a pool timeout.
#[tokio::test]
async fn an_unreachable_postgres_is_named_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // `stratum serve` on `port`: what it said, and how long it took to stop.
    let start_on = |port: u16| {
        let mut cmd = serve_command(dir.path(), free_port(), &[]);
        cmd.env(
            "STRATUM_DATABASE_URL",
            format!("postgres://postgres@127.0.0.1:{port}/test"),
        );
        async move {
            let started = std::time::Instant::now();
            let out = tokio::time::timeout(Duration::from_secs(20), cmd.output())
                .await
                .expect("stratum serve exits")
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            (stderr, started.elapsed())
        }
    };
    let closed = free_port();
    let (stderr, took) = start_on(closed).await;
    assert!(
        stderr.contains(&format!(
            "cannot connect to PostgreSQL at 127.0.0.1:{closed}"
        )) && stderr.to_lowercase().contains("refused"),
        "{stderr}"
    );
    // The pool's acquire timeout is 10 s; the first connection's answer
    // comes long before it.
    assert!(took < Duration::from_secs(4), "{took:?}");

    // A server that takes the connection and never answers (a silent
    // proxy, a hung host) is named within 2 s too.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let (stderr, took) = start_on(port).await;
    assert!(
        stderr.contains(&format!(
            "cannot connect to PostgreSQL at 127.0.0.1:{port}: no answer within 2s"
        )),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(silent);
}

/// A self-signed CA certificate, for a CA file `serve` must accept.
const TEST_CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBmjCCAUGgAwIBAgIUBDvB9G9MXfY9KHK4w0S3KdSWJkswCgYIKoZIzj0EAwIw
IjEgMB4GA1UEAwwXc3RyYXR1bSB0ZXN0IE9wZW5CYW8gQ0EwIBcNMjYxMjAxMDkw
NzQ1WhgPMjEyNjExMDcwOTA3NDVaMCIxIDAeBgNVBAMMF3N0cmF0dW0gdGVzdCBP
cGVuQmFvIENBMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEwSkzsvR7JcYlsVb9
eSfpZGmJ4zkONu00N1uriV7SjbNDsz6mlJAY4f5GTW04FYSQyofP/GfPcabZjSVw
BoxQQ6NTMFEwHQYDVR0OBBYEFH0nH+D4vaxcDPiQowDiVDpiH2QtMB8GA1UdIwQY
MBaAFH0nH+D4vaxcDPiQowDiVDpiH2QtMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZI
zj0EAwIDRwAwRAIgOxDKxsoceXl1nMHglk3eR4vKhJE8jsBPp1AT/p4tyZkCID/V
BxX5eF4QRh389MckVPkWIlO3WoMx1ix5NAruGWNU
-----END CERTIFICATE-----
";

#[tokio::test]
async fn serve_takes_the_raft_settings_as_flags_and_a_node_token_from_the_host_cli() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = d.join("openbao-ca.pem");
    std::fs::write(&ca, TEST_CA_PEM).unwrap();
    let kicks = d.join("kick.calls");
    let kick = recorder(d, "ovn-kick", &kicks);
    let commands = json!([
        [kick.display().to_string(), "nb", "{nodeId}", "{host}"],
        [kick.display().to_string(), "sb", "{nodeId}", "{address}"]
    ]);
    let flags: Vec<String> = [
        "--openbao-addr",
        "https://127.0.0.1:1",
        "--openbao-cacert",
        &ca.display().to_string(),
        "--raft-ovn",
        "commands",
        "--raft-ovn-commands",
        &commands.to_string(),
        "--raft-patroni",
        "record-only",
        "--raft-retry-min",
        "100ms",
        "--raft-retry-max",
        "1s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // The OpenBao token comes from the environment, as an operator keeps it.
    let server = start_with(
        d,
        &flags,
        &[("STRATUM_OPENBAO_TOKEN", BAO_TOKEN.to_owned())],
    )
    .await;
    server.announces("openbao", "openbao-http").await;
    server.announces("ovn", "command").await;
    server.announces("patroni", "record-only").await;
    assert!(
        !server.log().contains(BAO_TOKEN),
        "the OpenBao token never reaches the log"
    );
    assert!(
        server.log().contains("arguments not shown"),
        "configured commands may hold secrets: only their programs are logged"
    );

    server.admit_three().await;
    // Fails at OVN's raft before it reached OpenBao's: only OVN is cleaned,
    // through the configured commands.
    server
        .join_failed("n-3", "join/raft-ovn", "ovsdb-server: connection refused")
        .await;
    server.cleaned("n-3").await;
    assert_eq!(lines(&kicks), ["nb n-3 192.0.2.13", "sb n-3 192.0.2.13"]);

    // The host's operator makes a node agent token with the CLI, while the
    // server runs; the node's listener then asks about its failed peer.
    let created = host_json(
        d,
        &[
            "token",
            "create",
            "--principal",
            "node/n-1",
            "--policy",
            "NodeAgent",
        ],
    );
    let token = created["token"].as_str().unwrap();
    let res = server
        .http
        .get(server.url("/v1/admin/cluster/transport-admission/n-3"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let admission: Value = res.json().await.unwrap();
    assert_eq!(admission["admitted"], false, "{admission}");
    assert_eq!(
        admission["refusal"]["reason"],
        "join failed at join/raft-ovn: ovsdb-server: connection refused",
        "{admission}"
    );
}

/// The bootstrap token counts on the first start only; on a database that
/// has its history it is ignored, and the log says so.
#[tokio::test]
async fn a_bootstrap_token_on_a_bootstrapped_database_is_said_to_be_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = start(dir.path(), &[]).await;
    assert!(
        !first.log().contains("STRATUM_BOOTSTRAP_TOKEN is ignored"),
        "{}",
        first.log()
    );
    first.child.kill().await.unwrap();
    // The second start writes its own log over the first's.
    let again = start(dir.path(), &[]).await;
    let log = again.log();
    assert!(
        log.contains("STRATUM_BOOTSTRAP_TOKEN is ignored: this database was bootstrapped already"),
        "{log}"
    );
    assert!(
        !log.contains(ADMIN),
        "the token itself is never logged: {log}"
    );
}
