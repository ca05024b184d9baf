//! `stratum serve` under systemd's notify protocol, through the binary: a
//! test listens on a `NOTIFY_SOCKET` of its own, as systemd does for a
//! `Type=notify` unit.

use std::time::Duration;

use serde_json::json;
use std::os::unix::net::UnixDatagram;
use tokio::time::{timeout, Instant};

use crate::binary::{free_port, serve_command_under, start, DEADLINE};

/// The next datagram, as text.
async fn next(sock: &UnixDatagram, within: Duration) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    sock.set_read_timeout(Some(within)).unwrap();
    let n = tokio::task::block_in_place(|| sock.recv(&mut buf)).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// READY=1 comes once `/readyz` answers 200 (asked at once, it does, and
/// the status line names its position), with a status line a person
/// reads; the watchdog is pinged while WATCHDOG_USEC is set; SIGTERM
/// brings STOPPING=1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_hears_ready_once_ready_then_the_status_the_watchdog_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    // A log with something in it, written by a first start.
    {
        let mut server = start(dir.path(), &[]).await;
        server.admit("n-1", "10.0.0.1").await;
        server.admit("n-2", "10.0.0.2").await;
        server.terminate();
        server.child.wait().await.unwrap();
    }
    let socket = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&socket).unwrap();
    let port = free_port();
    // As systemd sets them: WATCHDOG_PID is the service's own pid (the
    // shell's, which `exec` hands to stratum).
    let mut child = serve_command_under(
        dir.path(),
        port,
        Some("export WATCHDOG_PID=$$"),
        &[],
        &[
            ("NOTIFY_SOCKET", socket.display().to_string()),
            // 400 ms: a ping every 200 ms.
            ("WATCHDOG_USEC", "400000".to_owned()),
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::fs::File::create(dir.path().join("serve.log")).unwrap())
    .spawn()
    .unwrap();
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");

    let first = next(&sock, DEADLINE)
        .await
        .expect("a first message from stratum serve");
    // By then the log is loaded and the service started: it said so
    // (`serving` is logged after both, before the accept loop runs).
    let logged = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(
        logged.contains("serving listen="),
        "READY=1 before the service started:\n{logged}"
    );
    // Asked the moment READY=1 arrives, the service is ready, at once.
    let ready = http
        .get(format!("{base}/readyz"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200, "READY=1 came before /readyz was 200");
    let ready: serde_json::Value = ready.json().await.unwrap();
    let lines: Vec<&str> = first.lines().collect();
    assert!(lines.contains(&"READY=1"), "the first message: {first:?}");
    let status = lines
        .iter()
        .find_map(|l| l.strip_prefix("STATUS="))
        .unwrap_or_else(|| panic!("a status line with READY=1: {first:?}"));
    let position = ready["position"].as_u64().unwrap();
    assert!(position >= 2, "{ready}");
    assert!(
        status.contains(&format!("log at position {position}")),
        "{status}"
    );
    assert!(status.contains("1 replica(s) live"), "{status}");
    assert!(status.contains("no alarms"), "{status}");

    // The watchdog: several pings, and nothing else while the log is still.
    let started = Instant::now();
    let mut pings = 0;
    while pings < 3 {
        let m = next(&sock, Duration::from_secs(5))
            .await
            .expect("watchdog pings every 200 ms");
        if m.trim_end() == "WATCHDOG=1" {
            pings += 1;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "3 pings: {pings} within 3 s"
        );
    }

    // The status line follows the log.
    let admin = crate::binary::ADMIN;
    let res = http
        .post(format!("{base}/v1/admin/cluster/members"))
        .bearer_auth(admin)
        .json(&json!({"nodeId": "n-3", "role": "hybrid", "mgmtIp": "10.0.0.3"}))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.text().await.unwrap());
    let want = format!("log at position {}", position + 1);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let m = next(&sock, Duration::from_secs(15))
            .await
            .expect("messages");
        if m.starts_with("STATUS=") && m.contains(&want) {
            break;
        }
        assert!(Instant::now() < deadline, "no status line with {want:?}");
    }

    let pid = child.id().unwrap();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = next(&sock, Duration::from_secs(10))
            .await
            .expect("STOPPING=1 before the exit");
        if m.lines().any(|l| l == "STOPPING=1") {
            break;
        }
        assert!(Instant::now() < deadline, "no STOPPING=1");
    }
    let status = timeout(Duration::from_secs(15), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
}

/// Without NOTIFY_SOCKET nothing is sent and nothing fails: the service
/// started by hand or under `Type=exec` serves as before (every other test
/// starts it so). With a NOTIFY_SOCKET nobody listens on, it serves too.
#[tokio::test]
async fn a_notify_socket_nobody_reads_stops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[(
            "NOTIFY_SOCKET",
            dir.path().join("nobody.sock").display().to_string(),
        )],
    )
    .await;
    let (status, _) = server.get("/readyz").await;
    assert_eq!(status, 200);
    // A warning that systemd could not be told.
    server.logs("cannot tell systemd (NOTIFY_SOCKET)").await;
}
