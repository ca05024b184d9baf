//! The service's logs, as an operator reads them: `--log-format json` (env
//! `STRATUM_LOG_FORMAT`) gives one JSON object per line, one line per
//! request at `info` with its method, route, status, duration, principal
//! and request id; refused authentication is logged with its reason; no
//! secret appears at any level.

use serde_json::{json, Value};

use crate::binary::{on_host_with, start, start_with, ADMIN, MEMBERS, THIS_BUILD};

fn lines(log: &str) -> Vec<Value> {
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[tokio::test]
async fn json_logs_have_one_line_per_request_and_never_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    // Everything, at every level: a secret must not appear even in traces.
    let server = start(
        dir.path(),
        &[
            ("STRATUM_LOG_FORMAT", "json".to_owned()),
            ("STRATUM_LOG", "trace".to_owned()),
        ],
    )
    .await;
    let (status, token) = server
        .post(
            "/v1/admin/iam/tokens",
            json!({"principal": "user/ann", "policies": ["ReadOnly"]}),
        )
        .await;
    assert_eq!(status, 201, "{token}");
    let secret = token["token"].as_str().unwrap().to_owned();
    let mut ids = Vec::new();
    for (bearer, expected) in [
        (secret.as_str(), 200),
        ("stt_not-a-token", 401),
        (ADMIN, 200),
    ] {
        let res = server
            .http
            .get(server.url(MEMBERS))
            .header("x-request-id", format!("client-{expected}"))
            .bearer_auth(bearer)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), expected);
        ids.push((
            res.headers()["x-request-id"].to_str().unwrap().to_owned(),
            expected,
        ));
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let log = server.log();
    for s in [secret.as_str(), ADMIN] {
        assert!(!log.contains(s), "a secret reached the log");
    }
    let all = lines(&log);
    for (id, status) in &ids {
        let of_request: Vec<&Value> = all
            .iter()
            .filter(|l| l["message"] == "request" && l["span"]["request_id"] == id.as_str())
            .collect();
        assert_eq!(of_request.len(), 1, "one line for request {id}");
        let l = of_request[0];
        assert_eq!(l["level"], "INFO", "{l}");
        assert_eq!(l["method"], "GET", "{l}");
        assert_eq!(l["route"], MEMBERS, "{l}");
        assert_eq!(l["status"], *status, "{l}");
        assert!(l["duration_ms"].as_f64().is_some(), "{l}");
        let principal = if *status == 200 { Some(()) } else { None };
        match principal {
            Some(()) => assert_ne!(l["principal"], "-", "{l}"),
            None => assert_eq!(l["principal"], "-", "{l}"),
        }
    }
    let refused: Vec<&Value> = all
        .iter()
        .filter(|l| l["message"] == "authentication refused")
        .collect();
    assert!(
        refused
            .iter()
            .any(|l| l["level"] == "INFO" && l["reason"] == "unknown token"),
        "the 401 is logged with its reason"
    );
}

/// A write's gate admits its caller against the read models in memory,
/// which may be behind the log (`auth::Admission`): its request's log
/// line names the caller only once the caller is settled as
/// authenticated. A token revoked on the host and used at once is
/// admitted ahead (on SQLite a server learns of another process's commit
/// by polling the head each second), then refused 401 by the checked
/// read models: its line names no principal, as the gate's own refusal's
/// does. The write before the revocation names its principal. Seen to
/// fail, four runs of four, against a build that names every admitted
/// caller.
#[tokio::test]
async fn a_write_refused_after_its_gate_admitted_it_names_no_principal() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[
            ("STRATUM_LOG_FORMAT", "json".to_owned()),
            ("STRATUM_LOG", "info".to_owned()),
        ],
    )
    .await;
    let url = format!("sqlite://{}", dir.path().join("stratum.db").display());
    let host = |args: &[&str]| {
        let out = on_host_with(std::path::Path::new(THIS_BUILD), &url, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)
    };
    let made = host(&[
        "token",
        "create",
        "--principal",
        "user/operator",
        "--policy",
        "ClusterOperator",
    ]);
    let secret = made["token"].as_str().unwrap().to_owned();
    let id = made["id"].as_str().unwrap().to_owned();
    let admit = |node: &str, client_id: &str| {
        server
            .http
            .post(server.url("/v1/admin/cluster/members"))
            .header("x-request-id", client_id)
            .bearer_auth(&secret)
            .json(&json!({"nodeId": node, "role": "compute", "mgmtIp": format!("10.3.0.{}", node.len())}))
            .send()
    };
    // The request id the server gave each (its log line's).
    let request_id =
        |res: &reqwest::Response| res.headers()["x-request-id"].to_str().unwrap().to_owned();
    let res = admit("n-1", "before-revoke").await.unwrap();
    assert_eq!(res.status().as_u16(), 201);
    let before = request_id(&res);
    host(&["token", "revoke", &id]);
    let res = admit("n-22", "after-revoke").await.unwrap();
    assert_eq!(res.status().as_u16(), 401);
    let after = request_id(&res);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let all = lines(&server.log());
    let line = |id: &str| -> Value {
        let of: Vec<&Value> = all
            .iter()
            .filter(|l| l["message"] == "request" && l["span"]["request_id"] == id)
            .collect();
        assert_eq!(of.len(), 1, "one line for request {id}");
        of[0].clone()
    };
    let before = line(&before);
    assert_eq!(
        (&before["status"], &before["principal"]),
        (&json!(201), &json!("user/operator")),
        "{before}"
    );
    let after = line(&after);
    assert_eq!(
        (&after["status"], &after["principal"]),
        (&json!(401), &json!("-")),
        "{after}"
    );
    assert!(!server.log().contains(&secret), "a secret reached the log");
}

#[tokio::test]
async fn text_logs_written_to_a_file_have_no_colour_and_probes_are_debug() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(
        dir.path(),
        &["--log-format".to_owned(), "text".to_owned()],
        &[("STRATUM_LOG", "info".to_owned())],
    )
    .await;
    let (status, _) = server.get(MEMBERS).await;
    assert_eq!(status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let log = server.log();
    assert!(!log.contains('\u{1b}'), "no ANSI escapes in a file: {log}");
    let requests: Vec<&str> = log.lines().filter(|l| l.contains(" request ")).collect();
    assert!(
        requests
            .iter()
            .any(|l| l.contains(MEMBERS) && l.contains("status=200")),
        "{log}"
    );
    assert!(
        !requests.iter().any(|l| l.contains("/healthz")),
        "health checks are logged at debug: {log}"
    );
}

#[tokio::test]
async fn a_log_level_that_is_not_one_stops_the_start_naming_it() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["--log-level", "stratum=loud", "events", "verify"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("STRATUM_LOG (--log-level)"), "{stderr}");
}
