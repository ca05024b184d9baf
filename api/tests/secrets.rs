//! Token secrets never show again (SPEC §6): not in the event log, not in
//! any answer after the one that created the token, and not in the logs.
//! Its own test binary, so that it can capture every log line of the
//! process with a global subscriber.

#[path = "it/support.rs"]
#[allow(dead_code, unused_imports)]
mod support;

use std::sync::{Arc, Mutex};

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use support::{spawn_app, sqlite, ADMIN_TOKEN};

/// A `tracing` writer that keeps every line, to grep the logs.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_token_secret_is_shown_once_and_never_again() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("this binary's only subscriber");

    let db = sqlite();
    let app = spawn_app(&db).await;
    let r = app
        .post(
            "/v1/admin/iam/tokens",
            json!({"principal": "user/erin", "policies": ["ReadOnly"]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let secret = r.body["token"].as_str().unwrap().to_owned();
    let id = r.body["id"].as_str().unwrap().to_owned();
    assert!(secret.len() >= 43, "at least 256 bits of secret");
    for k in ["id", "principal", "policies", "expiresAt", "createdAt"] {
        assert!(r.body.get(k).is_some(), "{k} in {}", r.body);
    }
    // Use it, list it, revoke it, read the log.
    assert_eq!(
        app.call_as(
            Some(&secret),
            Method::GET,
            "/v1/admin/cluster/members",
            None
        )
        .await
        .status,
        StatusCode::OK
    );
    let mut answers = vec![
        app.get("/v1/admin/iam/tokens").await.body,
        app.post(&format!("/v1/admin/iam/tokens/{id}/revoke"), json!({}))
            .await
            .body,
        app.get("/v1/admin/events?limit=1000").await.body,
        app.get(&format!("/v1/admin/events?stream=iam/token/{id}"))
            .await
            .body,
    ];
    let mut export = Vec::new();
    stratum_api::cli::export(&*app.svc.state.store, 0, None, &mut export)
        .await
        .unwrap();
    answers.push(Value::String(String::from_utf8(export).unwrap()));
    for a in &answers {
        assert!(!a.to_string().contains(&secret), "the secret is in {a}");
    }
    let stored = app.svc.state.store.read_after(0, 1000).await.unwrap();
    for e in &stored {
        assert!(!e
            .payload
            .windows(secret.len())
            .any(|w| w == secret.as_bytes()));
    }
    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(!logged.is_empty(), "the logs were captured");
    assert!(!logged.contains(&secret), "the secret is in the logs");
    assert!(
        !logged.contains(ADMIN_TOKEN),
        "the admin token is in the logs"
    );
}
