//! Traces over OTLP, through the binary: `stratum serve` exports to a
//! receiver the test starts (`tests/otlp/receiver.py`, which decodes with
//! the OpenTelemetry project's own protobuf definitions), and a decommission
//! is followed from the client's `traceparent` through the request, the
//! commit and the raft adapter's call to a real OpenBao, which is handed the
//! trace in `traceparent` (seen by a recording proxy in front of it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::binary::*;

/// OTLP's `STATUS_CODE_ERROR`, as the receiver writes a span's status.
const STATUS_ERROR: i64 = 2;

/// OpenBao's removal endpoint, as the proxy sees it.
const REMOVE_PEER: &str = "/v1/sys/storage/raft/remove-peer";
/// Where OpenBao's adapter reads the raft's listing.
const CONFIGURATION: &str = "/v1/sys/storage/raft/configuration";

/// Whether the receiver's Python modules and OpenBao are here; a loud skip,
/// or a failure where traces are required (`.ci/run`).
fn available(tools: &[&str]) -> bool {
    let python = std::process::Command::new("python3")
        .args([
            "-c",
            "import grpc; from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    let mut all = tools.to_vec();
    if !python {
        all.push(
            "python3 with opentelemetry-proto and grpcio (pip install opentelemetry-proto grpcio)",
        );
    }
    crate::support::tools_available(&all, "STRATUM_REQUIRE_TRACES", "the trace tests")
}

/// The receiver, killed when dropped.
struct Receiver {
    child: tokio::process::Child,
    out: PathBuf,
    port: u16,
}

impl Receiver {
    async fn start(dir: &Path, mode: &str) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/receiver.py");
        let port_file = dir.join(format!("otlp-{mode}.port"));
        let out = dir.join(format!("otlp-{mode}.jsonl"));
        let child = tokio::process::Command::new("python3")
            .arg(script)
            .arg(mode)
            .arg(&port_file)
            .arg(&out)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p.trim().parse().unwrap();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the receiver did not start"
            );
            tokio::time::sleep(STEP).await;
        };
        Self { child, out, port }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A client's trace context, as W3C Trace Context writes it.
fn traceparent(trace: &str, parent: &str) -> String {
    format!("00-{trace}-{parent}-01")
}

/// Stops the server with SIGTERM and waits for its exit: what it still
/// held is exported on the way out.
async fn stop(mut server: Server) {
    server.terminate();
    let status = tokio::time::timeout(Duration::from_secs(30), server.child.wait())
        .await
        .expect("stratum serve stops within 30 s")
        .unwrap();
    assert!(status.success(), "{status}\n{}", server.log());
}

/// The spans of one trace, by span id.
fn trace_of(spans: &[Value], trace: &str) -> HashMap<String, Value> {
    spans
        .iter()
        .filter(|s| s["traceId"] == trace)
        .map(|s| (s["spanId"].as_str().unwrap().to_owned(), s.clone()))
        .collect()
}

/// Whether a `traceparent` sent out names `span` of `trace` as parent.
fn under(tp: &str, trace: &str, span: &Value) -> bool {
    tp == traceparent(trace, span["spanId"].as_str().unwrap())
}

/// Whether `span` descends from the span `ancestor` within `trace`.
fn descends(trace: &HashMap<String, Value>, span: &Value, ancestor: &str) -> bool {
    let mut at = span;
    for _ in 0..32 {
        let parent = at["parentSpanId"].as_str().unwrap_or("");
        if parent == ancestor {
            return true;
        }
        match trace.get(parent) {
            Some(p) => at = p,
            None => return false,
        }
    }
    false
}

fn named<'a>(trace: &'a HashMap<String, Value>, name: &str) -> Vec<&'a Value> {
    trace.values().filter(|s| s["name"] == name).collect()
}

/// One request the proxy saw: method, path, `traceparent`, and the status
/// it answered (0 until it has).
#[derive(Clone, Debug)]
struct Passed {
    method: String,
    path: String,
    traceparent: Option<String>,
    status: u16,
}

type Seen = Arc<Mutex<Vec<Passed>>>;

/// A proxy in front of OpenBao that records each request's `traceparent`
/// and answers the first `remove-peer` itself, with a 503 (as OpenBao does
/// while its raft has no leader), so the raft cleanup's failed call and its
/// retry are both in the trace. Once the switch it answers is set, it
/// answers each read of the raft's configuration (the listing) with the
/// same 503.
async fn recording_proxy(upstream: String) -> (String, Seen, Arc<AtomicBool>) {
    type Proxied = (String, Seen, Arc<AtomicBool>);
    async fn forward(
        State((upstream, seen, refuse_listing)): State<Proxied>,
        req: Request,
    ) -> Response {
        let (parts, body) = req.into_parts();
        let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        let traceparent = parts
            .headers
            .get("traceparent")
            .map(|v| v.to_str().unwrap().to_owned());
        let path = parts.uri.path().to_owned();
        let listing = path == CONFIGURATION;
        // Recorded on arrival (status 0 until answered: a client that went
        // before the answer leaves it so).
        let (at, first_removal) = {
            let mut seen = seen.lock().unwrap();
            let first = path == REMOVE_PEER && !seen.iter().any(|p| p.path == path);
            seen.push(Passed {
                method: parts.method.to_string(),
                path,
                traceparent,
                status: 0,
            });
            (seen.len() - 1, first)
        };
        let refused = first_removal || (listing && refuse_listing.load(Ordering::Relaxed));
        let out = if refused {
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                r#"{"errors":["local node not active but active cluster node not found"]}"#,
            )
                .into_response()
        } else {
            let mut headers = parts.headers.clone();
            headers.remove(axum::http::header::HOST);
            let res = reqwest::Client::new()
                .request(parts.method, format!("{upstream}{}", parts.uri))
                .headers(headers)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = res.status();
            let headers = res.headers().clone();
            let body = res.bytes().await.unwrap();
            let mut out = (status, body).into_response();
            if let Some(ct) = headers.get(axum::http::header::CONTENT_TYPE) {
                out.headers_mut()
                    .insert(axum::http::header::CONTENT_TYPE, ct.clone());
            }
            out
        };
        seen.lock().unwrap()[at].status = out.status().as_u16();
        out
    }
    let seen: Seen = Arc::default();
    let refuse_listing = Arc::new(AtomicBool::new(false));
    let app = axum::Router::new().fallback(forward).with_state((
        upstream,
        seen.clone(),
        refuse_listing.clone(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen, refuse_listing)
}

/// A decommission's trace, over http/protobuf: the request span continues
/// the client's trace; the gate, the read, the decision and the commit are
/// in it; the OpenBao adapter's removal calls are in it too, though they
/// run after the answer, in the raft cleanup: the first, refused, marked an
/// error and saying why, then its retry; and OpenBao is sent the trace in
/// `traceparent`, with the adapter call's span as parent. A later read of
/// the raft's listing that OpenBao refuses is a span of its own, marked an
/// error and saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decommission_is_one_trace_from_the_client_to_openbao() {
    if !available(&["bao"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path(), "http").await;
    let bao = tempfile::Builder::new()
        .prefix("tr")
        .tempdir_in("/tmp")
        .unwrap();
    let (f1, j1) = ("f-1=127.0.41.11", "j-1=127.0.41.21");
    let down = Down(bao.path().to_owned());
    crate::real_rafts::sh_in(bao.path(), "openbao", "up", &[f1]).await;
    let mut env: Vec<(&str, String)> = Vec::new();
    let printed = crate::real_rafts::sh_in(bao.path(), "openbao", "env", &[]).await;
    let mut upstream = String::new();
    for line in printed.lines() {
        match line.split_once('=') {
            Some(("STRATUM_OPENBAO_ADDR", v)) => upstream = v.to_owned(),
            Some(("STRATUM_OPENBAO_TOKEN", v)) => env.push(("STRATUM_OPENBAO_TOKEN", v.to_owned())),
            _ => {}
        }
    }
    let (proxy, seen, refuse_listing) = recording_proxy(upstream).await;
    env.push(("STRATUM_OPENBAO_ADDR", proxy));
    env.push(("STRATUM_RAFT_RETRY_MIN", "200ms".into()));
    env.push(("STRATUM_RAFT_RECHECK", "1s".into()));
    env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()));
    env.push(("OTEL_BSP_SCHEDULE_DELAY", "200".into()));
    let server = start(dir.path(), &env).await;
    server.announces("openbao", "openbao-http").await;
    for (id, ip) in [
        ("f-1", "127.0.41.11"),
        ("f-2", "127.0.41.12"),
        ("f-3", "127.0.41.13"),
    ] {
        server.admit(id, ip).await;
        server.member_post(id, "join-complete", json!({})).await;
    }
    crate::real_rafts::sh_in(bao.path(), "openbao", "join", &[j1]).await;
    server.admit("j-1", "127.0.41.21").await;
    server.progress("j-1", "join/raft-openbao").await;
    server.member_post("j-1", "join-complete", json!({})).await;

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let (status, body) = server
        .call(
            server
                .http
                .post(server.url("/v1/admin/cluster/members/j-1/decommission"))
                .header("traceparent", traceparent(trace, client_span))
                .json(&json!({"reason": "retired"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    server.cleaned("j-1").await;
    // Taken out of OpenBao's raft for real (a removed server that still
    // runs may be seen back later; the raft cleanup's own tests say what
    // then happens).
    let history = server.history("j-1").await;
    let removed = crate::binary::of_type(&history, "RaftPeerRemoved")
        .into_iter()
        .find(|e| e["payload"]["raft"] == "openbao")
        .cloned()
        .expect("a removal from openbao");
    assert_eq!(removed["payload"]["adapter"], "openbao-http", "{removed}");
    assert_eq!(removed["payload"]["alreadyGone"], false, "{removed}");
    // Once the removal has settled, the raft cleanup reads the listing for
    // the member's return (each second here); a read OpenBao refuses is a
    // call marked an error in a trace of its own, saying why.
    refuse_listing.store(true, Ordering::Relaxed);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let refused_listing = loop {
        let spans = receiver.spans();
        let failed = spans
            .iter()
            .find(|s| s["name"] == "raft listing" && s["status"] == STATUS_ERROR);
        if let Some(span) = failed {
            break span.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no failed listing read in the traces: {:?}",
            spans.iter().map(|s| &s["name"]).collect::<Vec<_>>()
        );
        tokio::time::sleep(STEP).await;
    };
    assert_eq!(
        refused_listing["attributes"]["raft"], "openbao",
        "{refused_listing}"
    );
    assert_eq!(
        refused_listing["attributes"]["error.type"], "refused",
        "{refused_listing}"
    );
    assert_ne!(refused_listing["traceId"], trace, "{refused_listing}");
    let log = server.log();
    stop(server).await;

    let spans = receiver.spans();
    let ours = trace_of(&spans, trace);
    let names: Vec<&str> = ours.values().map(|s| s["name"].as_str().unwrap()).collect();
    let request = named(
        &ours,
        "POST /v1/admin/cluster/members/{nodeId}/decommission",
    );
    assert_eq!(
        request.len(),
        1,
        "one request span in the client's trace: {names:?}"
    );
    let request = request[0];
    assert_eq!(request["parentSpanId"], client_span, "{request}");
    assert_eq!(request["kind"], 2, "a server span: {request}");
    assert_eq!(request["service"], "stratum", "{request}");
    assert_eq!(
        request["attributes"]["http.response.status_code"], "200",
        "{request}"
    );
    let request_id = request["spanId"].as_str().unwrap();
    for name in ["gate", "read", "decide", "commit"] {
        let found = named(&ours, name);
        assert!(
            found.iter().any(|s| descends(&ours, s, request_id)),
            "a {name} span under the request: {names:?}"
        );
    }
    // One successful call per raft the member was in: OpenBao's adapter,
    // and the record-only adapter of the two rafts this test configures
    // none for. The proxy refused the first removal, so OpenBao's adapter
    // failed at least once (a real refusal under load may add another):
    // each failure is a call of its own, marked an error in the trace and
    // saying why, and is retried.
    let calls = named(&ours, "raft remove peer");
    let (failed, done): (Vec<&Value>, Vec<&Value>) = calls
        .iter()
        .copied()
        .partition(|s| s["status"] == STATUS_ERROR);
    let failures: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("raft removal failed"))
        .collect();
    let mut rafts: Vec<&str> = done
        .iter()
        .map(|s| s["attributes"]["raft"].as_str().unwrap())
        .collect();
    rafts.sort_unstable();
    let events: Vec<&Value> = history.iter().map(|e| &e["type"]).collect();
    assert_eq!(
        rafts,
        ["openbao", "ovn", "patroni"],
        "a successful adapter call per raft: {names:?}; failed {failed:?}; \
         j-1's events {events:?}; the service logged {failures:?}"
    );
    assert!(!failed.is_empty(), "the refused call: {calls:?}");
    assert_eq!(failures.len(), failed.len(), "{failures:?}; {failed:?}");
    for call in &failed {
        assert_eq!(call["attributes"]["raft"], "openbao", "{call}");
        assert!(
            call["attributes"]["error.type"]
                .as_str()
                .is_some_and(|t| !t.is_empty()),
            "a failed call says why: {call}"
        );
        assert!(descends(&ours, call, request_id), "{call}");
    }
    let call = *done
        .iter()
        .find(|s| s["attributes"]["raft"] == "openbao")
        .unwrap();
    assert!(descends(&ours, call, request_id), "{call}");
    assert_eq!(call["attributes"]["adapter"], "openbao-http", "{call}");
    assert_eq!(call["attributes"]["node_id"], "j-1", "{call}");
    // The removal it recorded is decided and committed under the call,
    // and under no failed one.
    let call_id = call["spanId"].as_str().unwrap();
    let commits = named(&ours, "commit");
    assert!(
        commits.iter().any(|s| descends(&ours, s, call_id)),
        "the removal's commit under the adapter call: {names:?}"
    );
    for failure in &failed {
        let id = failure["spanId"].as_str().unwrap();
        assert!(
            !commits.iter().any(|s| descends(&ours, s, id)),
            "nothing committed under a failed call: {names:?}"
        );
    }

    // OpenBao was handed the trace, with the adapter call as parent: the
    // refused removal under a failed call, the one it answered under the
    // successful one (or, where a real failure came after OpenBao's answer,
    // its wait for the listing to drop the peer, under that failed call:
    // the retry then finds the peer gone and asks nothing).
    let seen = seen.lock().unwrap().clone();
    let removals: Vec<&Passed> = seen
        .iter()
        .filter(|p| p.method == "POST" && p.path == REMOVE_PEER)
        .collect();
    let answered: Vec<&&Passed> = removals
        .iter()
        .filter(|p| p.status == 200 || p.status == 204)
        .collect();
    assert_eq!(answered.len(), 1, "{seen:?}");
    let tp = answered[0]
        .traceparent
        .as_deref()
        .expect("traceparent on remove-peer");
    if failed.len() == 1 {
        assert_eq!(tp, traceparent(trace, call_id), "{seen:?}");
    } else {
        assert!(
            calls.iter().any(|s| under(tp, trace, s)),
            "the answered removal's traceparent names a call: {tp}; {calls:?}"
        );
    }
    let refused = removals[0];
    assert_eq!(refused.status, 503, "{seen:?}");
    let tp = refused
        .traceparent
        .as_deref()
        .expect("traceparent on remove-peer");
    let refused_call = failed
        .iter()
        .find(|s| under(tp, trace, s))
        .unwrap_or_else(|| {
            panic!("the refused call's traceparent names a failed call: {tp}; {failed:?}")
        });
    assert_eq!(
        refused_call["attributes"]["error.type"], "refused",
        "{refused_call}"
    );
    // Calls outside any request start traces of their own, never the
    // client's (the listing reads after the removal).
    drop(down);
}

/// Tears the OpenBao cluster down.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/rafts/openbao.sh");
        let _ = std::process::Command::new("bash")
            .arg(script)
            .arg("down")
            .arg(&self.0)
            .output();
    }
}

/// Over gRPC (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`): an admission's request
/// and commit spans reach a gRPC receiver in the client's trace, and a
/// request without `traceparent` starts a trace of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_grpc_a_request_and_its_commit_are_in_the_clients_trace() {
    if !available(&[]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path(), "grpc").await;
    let server = start(
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()),
            ("OTEL_SERVICE_NAME", "stratum-grpc-test".into()),
        ],
    )
    .await;
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let client_span = "b7ad6b7169203331";
    let (status, body) = server
        .call(
            server
                .http
                .post(server.url("/v1/admin/cluster/members"))
                .header("traceparent", traceparent(trace, client_span))
                .json(&json!({"nodeId": "n-1", "role": "hybrid", "mgmtIp": "10.0.0.1"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    server.admit("n-2", "10.0.0.2").await;
    stop(server).await;

    let spans = receiver.spans();
    let ours = trace_of(&spans, trace);
    let names: Vec<&str> = ours.values().map(|s| s["name"].as_str().unwrap()).collect();
    let request = named(&ours, "POST /v1/admin/cluster/members");
    assert_eq!(request.len(), 1, "{names:?}");
    assert_eq!(request[0]["parentSpanId"], client_span);
    assert_eq!(request[0]["service"], "stratum-grpc-test");
    let request_id = request[0]["spanId"].as_str().unwrap();
    assert!(
        named(&ours, "commit")
            .iter()
            .any(|s| descends(&ours, s, request_id)),
        "{names:?}"
    );
    // The second admission: a root span of its own trace.
    let others: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "POST /v1/admin/cluster/members" && s["traceId"] != trace)
        .collect();
    assert_eq!(others.len(), 1, "{spans:?}");
    assert_eq!(others[0]["parentSpanId"], "", "{}", others[0]);
}

/// A protocol stratum does not export, or an https collector without its
/// CA, stops the start (exit 2) naming the variable; with no endpoint the
/// OTEL_ variables are not read at all.
#[test]
fn an_otlp_setting_it_cannot_honour_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    for (env, says) in [
        (
            vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ],
            "OTEL_EXPORTER_OTLP_PROTOCOL is `http/json`",
        ),
        (
            vec![(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://collector:4318",
            )],
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is https: set OTEL_EXPORTER_OTLP_CERTIFICATE",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")],
            "OTEL_EXPORTER_OTLP_ENDPOINT must be a URL",
        ),
    ] {
        let mut cmd = std::process::Command::new(THIS_BUILD);
        for k in stratum_vars() {
            cmd.env_remove(k);
        }
        cmd.arg("serve")
            .env(
                "STRATUM_DATABASE_URL",
                format!("sqlite://{}", dir.path().join("s.db").display()),
            )
            .env("STRATUM_LISTEN", format!("127.0.0.1:{}", free_port()));
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{env:?}: {stderr}");
        assert!(stderr.contains(says), "{env:?}: {stderr}");
    }
}

/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, as the specification reads it: the
/// whole URL, used as is (no `/v1/traces` appended), over the default
/// http/protobuf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_signal_endpoint_is_used_as_is() {
    if !available(&[]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path(), "http").await;
    let server = start(
        dir.path(),
        &[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("{}/v1/traces", receiver.endpoint()),
        )],
    )
    .await;
    let trace = "5b8efff798038103d269b633813fc60c";
    let (status, body) = server
        .call(
            server
                .http
                .post(server.url("/v1/admin/cluster/members"))
                .header("traceparent", traceparent(trace, "eee19b7ec3c1b174"))
                .json(&json!({"nodeId": "n-1", "role": "hybrid", "mgmtIp": "10.0.0.1"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    stop(server).await;
    let ours = trace_of(&receiver.spans(), trace);
    assert_eq!(
        named(&ours, "POST /v1/admin/cluster/members").len(),
        1,
        "{ours:?}"
    );
}
