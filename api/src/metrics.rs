//! Prometheus metrics, in the text exposition format, on their own address
//! (`--metrics-listen`, env `STRATUM_METRICS_LISTEN`; off unless set).
//!
//! They are served apart from the API, with no token, because scrapers run
//! on the monitoring network and hold no stratum token: bind the address to
//! that network (or to 127.0.0.1 behind a local agent). The API's own port
//! never answers `/metrics`. What the process counts as it goes (requests,
//! commits, raft removals) lives in the process-wide [`global`] registry;
//! what the read models say (head, generation, members, lagging, raft
//! cleanup pending, the active upgrade, alarms) is set from the published
//! read models at each scrape (`http::metrics`), so it is never stale.

use std::collections::HashMap;
use std::sync::{LazyLock, PoisonError, RwLock};

use axum::http::{Method, StatusCode};

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// What the process counts as it goes.
pub struct Metrics {
    registry: Registry,
    pub http_requests: IntCounterVec,
    pub http_duration: HistogramVec,
    pub batch_commands: Histogram,
    pub commit_duration: Histogram,
    pub raft_removals: IntCounterVec,
    pub raft_failures: IntCounterVec,
    pub raft_returns: IntCounterVec,
    pub auth_refused: IntCounterVec,
    pub reports_limited: IntCounterVec,
    pub log_divergences: IntCounter,
    pub rows_rebuilt: IntCounter,
    pub head: IntGauge,
    pub generation: IntGauge,
    pub members: IntGaugeVec,
    pub lagging: IntGauge,
    pub raft_pending: IntGaugeVec,
    pub upgrade: IntGaugeVec,
    pub alarms: IntGauge,
    pub watchers: IntGauge,
    pub pool: IntGaugeVec,
    pub replicas: IntGaugeVec,
    pub settings_differ: IntGauge,
    pub storage_level: IntGauge,
    pub witness_duration: HistogramVec,
    pub witness_failures: IntCounterVec,
    pub witness_size: IntGaugeVec,
    /// `http_requests` and `http_duration` resolved per label set.
    requests: RequestSeries,
}

/// The handles of the request metrics, resolved once per route, method and
/// status instead of per request: `with_label_values` hashes the label
/// strings and takes each vector's lock every time. The label sets are few
/// (a route is its template), so they are kept: per route, a short list of
/// (method, status) found by comparing two small values.
#[derive(Default)]
struct RequestSeries {
    routes: RwLock<HashMap<Box<str>, Vec<Series>, foldhash::fast::RandomState>>,
}

/// One label set's handles (cheap clones of the vectors' own children).
struct Series {
    method: Method,
    status: StatusCode,
    count: IntCounter,
    duration: Histogram,
}

/// The most (method, status) pairs kept for one route; past them (methods
/// a client made up, say) a request resolves its labels as it goes.
const SERIES_PER_ROUTE: usize = 32;

fn counter(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
    r.register(Box::new(c.clone())).expect("registered once");
    c
}

fn count(r: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("a valid metric");
    r.register(Box::new(c.clone())).expect("registered once");
    c
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("a valid metric");
    r.register(Box::new(g.clone())).expect("registered once");
    g
}

fn gauges(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid metric");
    r.register(Box::new(g.clone())).expect("registered once");
    g
}

fn histogram(r: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .expect("a valid metric");
    r.register(Box::new(h.clone())).expect("registered once");
    h
}

fn histograms(r: &Registry, name: &str, help: &str, labels: &[&str]) -> HistogramVec {
    let h = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(latency_buckets()),
        labels,
    )
    .expect("a valid metric");
    r.register(Box::new(h.clone())).expect("registered once");
    h
}

/// Seconds, from 0.5 ms to 10 s.
fn latency_buckets() -> Vec<f64> {
    prometheus::exponential_buckets(0.0005, 2.0, 15).expect("valid buckets")
}

impl Metrics {
    fn new() -> Self {
        let r = Registry::new();
        let http_duration = histograms(
            &r,
            "stratum_http_request_duration_seconds",
            "How long HTTP requests took, by route template and method.",
            &["route", "method"],
        );
        let build = gauges(
            &r,
            "stratum_build_info",
            "The running build: always 1, with its version and the commit it was built from.",
            &["version", "commit"],
        );
        build
            .with_label_values(&[crate::build::VERSION, &crate::build::commit()])
            .set(1);
        Self {
            http_requests: counter(
                &r,
                "stratum_http_requests_total",
                "HTTP requests answered, by route template, method and status.",
                &["route", "method", "status"],
            ),
            http_duration,
            batch_commands: histogram(
                &r,
                "stratum_write_batch_commands",
                "Commands decided per write batch (one commit).",
                prometheus::exponential_buckets(1.0, 2.0, 10).expect("valid buckets"),
            ),
            commit_duration: histogram(
                &r,
                "stratum_write_commit_duration_seconds",
                "How long a write batch took to commit, its append and read-model rows included.",
                latency_buckets(),
            ),
            raft_removals: counter(
                &r,
                "stratum_raft_removals_total",
                "Peers taken out of a raft by the cleanup, by raft.",
                &["raft"],
            ),
            raft_failures: counter(
                &r,
                "stratum_raft_removal_failures_total",
                "Raft removals that failed and will be retried, by raft and reason (timeout, unreachable, refused, not_confirmed, unreadable).",
                &["raft", "reason"],
            ),
            raft_returns: counter(
                &r,
                "stratum_raft_peer_returns_total",
                "Members a raft's own listing named again after their removal from it was recorded (each raises raft-peer-returned and is removed again), by raft.",
                &["raft"],
            ),
            auth_refused: counter(
                &r,
                "stratum_auth_refused_total",
                "Requests refused authentication, by reason (no_token, unknown_token, revoked, expired, certificate; throttled: an address over its budget of refused secrets; busy: too many slow checks waiting).",
                &["reason"],
            ),
            reports_limited: counter(
                &r,
                "stratum_node_reports_limited_total",
                "Node agents' reports answered 429 for coming faster than an agent needs, by action.",
                &["action"],
            ),
            rows_rebuilt: count(
                &r,
                "stratum_read_model_rows_rebuilt_total",
                "Read-model rows this process wrote again, or deleted, because a fold of another projection version made them (the online rebuild).",
            ),
            log_divergences: count(
                &r,
                "stratum_log_divergences_total",
                "Times this process found the database no longer holds the log it served (acknowledged events lost in a failover) and reloaded.",
            ),
            head: gauge(
                &r,
                "stratum_log_head_position",
                "The position of the log's last event.",
            ),
            generation: gauge(
                &r,
                "stratum_membership_generation",
                "The membership generation (the position of the latest topology event).",
            ),
            members: gauges(&r, "stratum_members", "Members, by state.", &["state"]),
            lagging: gauge(
                &r,
                "stratum_members_lagging",
                "Members in the peer lists that have not applied the generation.",
            ),
            raft_pending: gauges(
                &r,
                "stratum_raft_cleanup_pending",
                "Members a raft cleanup still has to take out of each raft.",
                &["raft"],
            ),
            upgrade: gauges(
                &r,
                "stratum_upgrade_active",
                "1 for the state the active upgrade is in; no series without one.",
                &["upgrade", "state"],
            ),
            alarms: gauge(
                &r,
                "stratum_alarms_active",
                "Alarms raised and not cleared.",
            ),
            watchers: gauge(
                &r,
                "stratum_watchers",
                "Event streams and long-polls connected now.",
            ),
            pool: gauges(
                &r,
                "stratum_db_pool_connections",
                "Database pool connections, in use and idle.",
                &["state"],
            ),
            replicas: gauges(
                &r,
                "stratum_replicas",
                "Replicas registered on this database, by state (live, silent, stopped).",
                &["state"],
            ),
            settings_differ: gauge(
                &r,
                "stratum_replica_settings_differ",
                "1 while this replica's process-manager settings differ from the agreed ones \
                 (the replica-settings-differ alarm: it does not run the raft cleanup).",
            ),
            storage_level: gauge(
                &r,
                "stratum_storage_level",
                "The log's storage level: what may be written (stratum replicas finalize moves it).",
            ),
            witness_duration: histograms(
                &r,
                "stratum_witness_submit_duration_seconds",
                "How long a checkpoint's submission to a witness took (C2SP tlog-witness add-checkpoint), by witness.",
                &["witness"],
            ),
            witness_failures: counter(
                &r,
                "stratum_witness_failures_total",
                "Submissions a witness did not cosign, by witness and reason (timeout, unreachable, forbidden, unknown_log, inconsistent, conflict, ahead, refused, garbage, proof, config).",
                &["witness", "reason"],
            ),
            witness_size: gauges(
                &r,
                "stratum_witness_cosigned_size",
                "The size of the newest checkpoint a witness cosigned for this process, by witness.",
                &["witness"],
            ),
            requests: RequestSeries::default(),
            registry: r,
        }
    }

    /// Counts one answered request and its duration under its route
    /// template, method and status (`stratum_http_requests_total` and
    /// `stratum_http_request_duration_seconds`).
    pub fn observe_request(&self, route: &str, method: &Method, status: StatusCode, seconds: f64) {
        let found = |series: &[Series]| {
            series
                .iter()
                .find(|s| s.status == status && s.method == *method)
                .map(|s| {
                    s.count.inc();
                    s.duration.observe(seconds);
                })
                .is_some()
        };
        let routes = &self.requests.routes;
        if routes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(route)
            .is_some_and(|series| found(series))
        {
            return;
        }
        let count =
            self.http_requests
                .with_label_values(&[route, method.as_str(), status.as_str()]);
        let duration = self
            .http_duration
            .with_label_values(&[route, method.as_str()]);
        count.inc();
        duration.observe(seconds);
        let mut routes = routes.write().unwrap_or_else(PoisonError::into_inner);
        let series = match routes.get_mut(route) {
            Some(s) => s,
            None => routes.entry(route.into()).or_default(),
        };
        if series.len() < SERIES_PER_ROUTE
            && !series
                .iter()
                .any(|s| s.status == status && s.method == *method)
        {
            series.push(Series {
                method: method.clone(),
                status,
                count,
                duration,
            });
        }
    }

    /// Every metric in the text exposition format, as they stand.
    pub fn encode(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("metrics encode");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}
