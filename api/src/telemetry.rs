//! Traces over OTLP, as the OpenTelemetry specification configures them:
//! off unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set; `http/protobuf` unless
//! `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` says `grpc`; the SDK reads the
//! rest (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_*`).
//!
//! A request's trace goes on from the client's W3C `traceparent`, through
//! the gate, the read, the decision and the commit, to the raft adapter
//! calls the command causes, and on to OpenBao in `traceparent`. The spans
//! below the request are at `debug`: with no exporter they are never built,
//! whatever `STRATUM_LOG` says (unless it asks for `debug` logs).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether spans are exported (an endpoint was set and the exporter built).
static ON: AtomicBool = AtomicBool::new(false);

pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The exporter, as the environment sets it up.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Traces")
    }
}

/// A per-signal variable, or the general one: its value and its name.
fn var(traces: &'static str, all: &'static str) -> Option<(String, &'static str)> {
    [traces, all].into_iter().find_map(|k| {
        std::env::var(k)
            .ok()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .map(|v| (v, k))
    })
}

impl Traces {
    /// Builds the exporter the environment asks for, or none. `runtime` is
    /// the runtime gRPC's client runs on. A setting it cannot honour stops
    /// the start, naming the variable.
    pub fn from_env(runtime: &tokio::runtime::Handle) -> Result<Option<Self>, String> {
        let Some((endpoint, endpoint_var)) = var(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ) else {
            return Ok(None);
        };
        let url = url::Url::parse(&endpoint).map_err(|e| {
            format!("{endpoint_var} must be a URL such as http://collector:4318: {e}")
        })?;
        let protocol = var(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        );
        let exporter = match protocol.as_ref().map(|(p, k)| (p.as_str(), *k)) {
            None | Some(("http/protobuf", _)) => {
                let mut client = reqwest::blocking::Client::builder().timeout(export_timeout());
                if let Some((path, k)) = var(
                    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                    "OTEL_EXPORTER_OTLP_CERTIFICATE",
                ) {
                    let pem = std::fs::read(&path).map_err(|e| format!("{k} ({path}): {e}"))?;
                    let ca = reqwest::Certificate::from_pem(&pem)
                        .map_err(|e| format!("{k} ({path}): {e}"))?;
                    client = client.add_root_certificate(ca);
                } else if url.scheme() == "https" {
                    return Err(format!(
                        "{endpoint_var} is https: set OTEL_EXPORTER_OTLP_CERTIFICATE to the \
                         PEM file of the CA that signs the collector's certificate"
                    ));
                }
                let client = client
                    .build()
                    .map_err(|e| format!("the OTLP client: {e}"))?;
                opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_http_client(client)
                    .build()
                    .map_err(|e| format!("the OTLP exporter ({endpoint_var}): {e}"))?
            }
            Some(("grpc", _)) => {
                if url.scheme() != "http" {
                    return Err(format!(
                        "{endpoint_var}: OTLP over gRPC is built without TLS here; use \
                         http:// (a collector on loopback), or http/protobuf over https"
                    ));
                }
                let _entered = runtime.enter();
                opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .build()
                    .map_err(|e| format!("the OTLP exporter ({endpoint_var}): {e}"))?
            }
            Some((other, k)) => {
                return Err(format!(
                    "{k} is `{other}`: stratum exports `http/protobuf` (the default) or `grpc`"
                ))
            }
        };
        let mut resource = Resource::builder().with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            crate::build::VERSION,
        ));
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("stratum");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        ON.store(true, Ordering::Relaxed);
        Ok(Some(Self { provider }))
    }

    /// Where the spans go: the `tracing` layer the log installs, with its
    /// own filter (stratum's spans from `debug`, the rest from `info`).
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        use tracing_subscriber::Layer as _;
        let filter = tracing_subscriber::filter::Targets::new()
            .with_default(tracing::Level::INFO)
            .with_target("stratum_api", tracing::Level::DEBUG)
            .with_target("stratum_store", tracing::Level::DEBUG)
            // As in the log: sqlx names an unknown connection setting with
            // its value.
            .with_target("sqlx_postgres::options", tracing::Level::ERROR);
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("stratum"))
            .with_tracked_inactivity(false)
            .with_threads(false)
            .with_filter(filter)
    }

    /// Sends what is still queued, within the export timeout.
    pub fn shutdown(self) {
        ON.store(false, Ordering::Relaxed);
        if let Err(e) = self.provider.shutdown_with_timeout(export_timeout()) {
            eprintln!("stratum: the last spans were not all exported: {e}");
        }
    }
}

/// `OTEL_EXPORTER_OTLP_TIMEOUT` in milliseconds, 10 s by default.
fn export_timeout() -> Duration {
    var(
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    )
    .and_then(|(v, _)| v.parse().ok())
    .map_or(Duration::from_secs(10), Duration::from_millis)
}

/// Continues the client's trace (`traceparent`, `tracestate`) in `span`.
pub fn adopt(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    if !enabled() || !headers.contains_key("traceparent") {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    let _ = span.set_parent(cx);
}

/// Adds the current span's `traceparent` to an outgoing request.
pub fn inject(headers: &mut axum::http::HeaderMap) {
    if !enabled() {
        return;
    }
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new()
        .inject_context(&cx, &mut opentelemetry_http::HeaderInjector(headers));
}

/// The traces of commands whose effects run later, elsewhere in the
/// process (a decommission's raft removals), by what they act on: the
/// later work continues the command's trace. Kept in memory, for an hour
/// at most and 4,096 at once; a replica that did not take the command
/// starts a trace of its own.
struct Causes(Mutex<HashMap<String, (opentelemetry::Context, Instant)>>);

static CAUSES: std::sync::LazyLock<Causes> =
    std::sync::LazyLock::new(|| Causes(Mutex::new(HashMap::new())));

const CAUSE_KEPT: Duration = Duration::from_secs(3600);
const MAX_CAUSES: usize = 4096;

/// Remembers the current span as the cause of later work on `key`.
pub fn remember_cause(key: &str) {
    if !enabled() {
        return;
    }
    let cx = tracing::Span::current().context();
    let mut all = CAUSES.0.lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    if all.len() >= MAX_CAUSES {
        all.retain(|_, (_, at)| now.duration_since(*at) < CAUSE_KEPT);
        if all.len() >= MAX_CAUSES {
            if let Some(oldest) = all
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone())
            {
                all.remove(&oldest);
            }
        }
    }
    all.insert(key.to_owned(), (cx, now));
}

/// Forgets the cause remembered for `key` (its command was refused).
pub fn forget_cause(key: &str) {
    if !enabled() {
        return;
    }
    CAUSES
        .0
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(key);
}

/// Makes `span` a child of the command that caused work on `key`, if this
/// process remembers one.
pub fn continue_cause(span: &tracing::Span, key: &str) {
    if !enabled() {
        return;
    }
    let all = CAUSES.0.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((cx, at)) = all.get(key) {
        if at.elapsed() < CAUSE_KEPT {
            let _ = span.set_parent(cx.clone());
        }
    }
}
