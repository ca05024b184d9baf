//! The service's logs, as an operator reads them: `--log-format json` (env
//! `STRATUM_LOG_FORMAT`) gives one JSON object per line, one line per
//! request at `info` with its method, route, status, duration, principal
//! and request id; refused authentication is logged with its reason; no
//! secret appears at any level.

use serde_json::{json, Value};

use crate::binary::{host_json, start, start_with, ADMIN, MEMBERS, OPERATOR_TOKEN};

fn lines(log: &str) -> Vec<Value> {
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The one line of request `id` (the server's `x-request-id`) in `all`.
fn request_line<'a>(all: &'a [Value], id: &str) -> &'a Value {
    let of: Vec<&Value> = all
        .iter()
        .filter(|l| l["message"] == "request" && l["span"]["request_id"] == id)
        .collect();
    assert_eq!(of.len(), 1, "one line for request {id}");
    of[0]
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
        let l = request_line(&all, id);
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
/// which may be behind the log (`auth::Admission`). Its request's log
/// line names the caller unless the checked read models then find it
/// unauthenticated, as the checked gate's own 401 names none. A write
/// with a token made on the host (201) names its principal and brings the
/// token into the server's read models in memory; the token is revoked
/// on the host, and a write sent at once is admitted ahead, refused 401
/// by the checked read models, and its line names no principal. On
/// SQLite the server learns of another process's commit by a head check
/// (none is made here) or by its one-second poll: a poll that folds the
/// revocation in first has the checked gate refuse the write, also with
/// no principal named. Three rounds, so that all three would have to
/// lose that race for the test to pass without the admitted path. Seen
/// to fail, four runs of four, against a build that names every admitted
/// caller.
#[tokio::test]
async fn a_write_refused_after_its_gate_admitted_it_names_no_principal() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[("STRATUM_LOG_FORMAT", "json".to_owned())]).await;
    // The request id the server gave an answer (its log line's).
    let request_id =
        |res: &reqwest::Response| res.headers()["x-request-id"].to_str().unwrap().to_owned();
    let mut ids = Vec::new();
    for round in 0..3 {
        let made = host_json(dir.path(), OPERATOR_TOKEN);
        let secret = made["token"].as_str().unwrap().to_owned();
        let id = made["id"].as_str().unwrap();
        let admit = |node: String, ip: String| {
            server
                .http
                .post(server.url("/v1/admin/cluster/members"))
                .bearer_auth(&secret)
                .json(&json!({"nodeId": node, "role": "compute", "mgmtIp": ip}))
                .send()
        };
        let res = admit(format!("n-{round}"), format!("10.3.{round}.1"))
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 201, "round {round}");
        ids.push((request_id(&res), 201));
        host_json(dir.path(), &["token", "revoke", id]);
        let res = admit(format!("m-{round}"), format!("10.3.{round}.2"))
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 401, "round {round}");
        ids.push((request_id(&res), 401));
        assert!(!server.log().contains(&secret), "a secret reached the log");
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let all = lines(&server.log());
    for (id, status) in ids {
        let l = request_line(&all, &id);
        assert_eq!(l["status"], status, "{l}");
        // Named on the line and in its span, or in neither.
        if status == 201 {
            assert_eq!(l["principal"], "user/operator", "{l}");
            assert_eq!(l["span"]["principal"], "user/operator", "{l}");
        } else {
            assert_eq!(l["principal"], "-", "{l}");
            assert!(l["span"].get("principal").is_none(), "{l}");
        }
    }
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
