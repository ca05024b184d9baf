//! Simulated node agents, in the spirit of Kubernetes' kubemark hollow
//! nodes: N agents against a running `stratum serve`, over HTTP, each with
//! its own `NodeAgent` token, each doing what a per-node reconciler does:
//! long-poll `GET /cluster/peers?after=G&waitSeconds=30`, and when a new
//! generation arrives, report `applied-generation`. Meanwhile the generator
//! makes topology changes (an admission, a join-failed, a decommission, in
//! turn) and measures, for each, how long until every agent has received
//! the new generation and how long until `lagging` is empty.
//!
//! ```sh
//! cargo bench -p stratum-api --bench agents                      # SQLite, 1,000 agents
//! cargo bench -p stratum-api --bench agents -- --pg postgres://postgres@127.0.0.1:5432/test
//! cargo bench -p stratum-api --bench agents -- --agents 200 --changes 30
//! cargo bench -p stratum-api --bench agents -- --agents 5000 --changes 10 [--pg URL]
//! cargo bench -p stratum-api --bench agents -- --server http://host:8080 --token $ADMIN
//! cargo bench -p stratum-api --bench agents -- --agents 5000 --changes 10 --floor
//! ```
//!
//! `--floor` runs the same agents against the floor (`floor.rs`): a server
//! in a process of its own that does only what any server of this API
//! must, in memory. Its figures are what HTTP and the agents cost on this
//! machine, under stratum's.
//!
//! Without `--server` it starts the `stratum` binary cargo built for the
//! bench (`CARGO_BIN_EXE_stratum`) on a fresh database (durable settings),
//! sized as a deployment of that many nodes would be (`server_env`), and
//! reports the server's peak memory. A server given with `--server` must
//! allow as many watchers as there are agents (`STRATUM_MAX_WATCHERS`).
//!
//! Each agent holds one keep-alive connection, a socket here and one in the
//! server: at 5,000 agents, 5,000 open files in each process. The bench
//! raises its open-file limit to the hard limit first (the server inherits
//! it, and raises its own as well); set-up runs 64 requests at a time.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{self, HeaderValue};
use hyper::Method;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::sync::mpsc;

mod floor;

use stratum_api::testing::free_port;

/// The allocator the server uses, for the simulated agents too.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BOOTSTRAP: &str = "agents-bench-bootstrap-token-0123456789abcdef";

struct Args {
    agents: usize,
    changes: usize,
    pg: Option<String>,
    server: Option<String>,
    token: Option<String>,
    /// Against the floor (`floor.rs`) instead of stratum.
    floor: bool,
    /// Serve the floor on this port (the child process `--floor` starts).
    floor_serve: Option<u16>,
}

fn args() -> Args {
    let mut a = Args {
        agents: 1000,
        changes: 30,
        pg: None,
        server: None,
        token: None,
        floor: false,
        floor_serve: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| panic!("{k} wants a value"));
        match k.as_str() {
            "--agents" => a.agents = v().parse().expect("--agents N"),
            "--changes" => a.changes = v().parse().expect("--changes N"),
            "--pg" => a.pg = Some(v()),
            "--server" => a.server = Some(v()),
            "--token" => a.token = Some(v()),
            "--floor" => a.floor = true,
            "--floor-serve" => a.floor_serve = Some(v().parse().expect("--floor-serve PORT")),
            // cargo bench passes --bench; anything else is a filter.
            _ => {}
        }
    }
    a
}

/// Raises the open-file limit to the hard limit; warns when that is still
/// too few for one connection per agent.
fn raise_open_files(agents: usize) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current != lim.maximum {
        lim.current = lim.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, lim) {
            eprintln!("could not raise the open-file limit: {e}");
        }
    }
    let files = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    if files < agents as u64 + 256 {
        eprintln!("{files} open files allowed: too few for {agents} agents' connections");
    }
}

/// What a deployment of `agents` nodes sets. Every agent holds a long-poll
/// open, and the defaults are sized for fewer nodes: 4,096 watchers, and
/// 10,000 connections, of which the server lets at most half be watchers;
/// past them a long-poll is answered 503 and its agent polls instead. An
/// operator of 5,000 nodes raises both, with room for nodes joining (6,000
/// and 12,000); at 1,000 agents these are the defaults. Nothing else
/// limits the agents: reports are limited per node (5/s), not in total,
/// and a long-poll's timeout is its wait plus `STRATUM_REQUEST_TIMEOUT`.
fn server_env(agents: usize) -> [(&'static str, String); 2] {
    let watchers = (agents + agents / 5).max(4096);
    [
        ("STRATUM_MAX_WATCHERS", watchers.to_string()),
        (
            "STRATUM_MAX_CONNECTIONS",
            (2 * watchers).max(10_000).to_string(),
        ),
    ]
}

/// The server this run started, stopped on drop.
struct Started {
    child: std::process::Child,
    pg: Option<(String, String)>,
    /// The directory of the server's SQLite database (none for the
    /// floor).
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some((admin, db)) = self.pg.take() {
            let _ = std::process::Command::new("psql")
                .args([
                    &admin,
                    "-qc",
                    &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
                ])
                .status();
        }
    }
}

impl Started {
    /// The peak resident memory of the server, in MiB.
    fn peak_rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kib: f64 = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kib / 1024.0)
    }
}

fn start(pg: Option<&str>, agents: usize) -> (Started, String) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (url, pg) = match pg {
        None => (
            format!("sqlite://{}", dir.path().join("stratum.db").display()),
            None,
        ),
        Some(admin) => {
            let db = format!("stratum_bench_agents_{}", std::process::id());
            let ok = std::process::Command::new("psql")
                .args([admin, "-qc", &format!("CREATE DATABASE {db}")])
                .status()
                .unwrap()
                .success();
            assert!(ok, "could not create the bench database");
            let base = admin.rsplit_once('/').map_or(admin, |(b, _)| b);
            (format!("{base}/{db}"), Some((admin.to_owned(), db)))
        }
    };
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("STRATUM_DATABASE_URL", &url)
        .env("STRATUM_BOOTSTRAP_TOKEN", BOOTSTRAP)
        .env("STRATUM_LOG", "warn")
        .envs(server_env(agents))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (
        Started {
            child,
            pg,
            _dir: Some(dir),
        },
        format!("http://127.0.0.1:{port}"),
    )
}

/// Starts the floor (`floor.rs`): this executable again, `--floor-serve`.
fn start_floor() -> (Started, String) {
    let port = free_port();
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--floor-serve", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Started {
        child,
        pg: None,
        _dir: None,
    };
    (started, format!("http://127.0.0.1:{port}"))
}

#[derive(Clone)]
struct Api {
    client: reqwest::Client,
    /// The server's host and port (plain HTTP).
    addr: String,
    admin: String,
    /// Long-polls that failed, were refused (a 503 past the watcher limit,
    /// a 401) or found no connection: the agent asks again on a new
    /// connection 100 ms later instead of waiting.
    failed_polls: Arc<AtomicUsize>,
}

impl Api {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let res = self
            .client
            .request(method, self.url(path))
            .bearer_auth(&self.admin)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let (status, v) = self.send(reqwest::Method::POST, path, body).await;
        assert!(status < 300, "POST {path}: {status} {v}");
        v
    }

    async fn get(&self, path: &str) -> Value {
        let res = self
            .client
            .get(self.url(path))
            .bearer_auth(&self.admin)
            .send()
            .await
            .unwrap();
        res.json().await.unwrap()
    }

    async fn node_token(&self, node: &str) -> String {
        let v = self
            .post(
                "/v1/admin/iam/tokens",
                json!({"principal": format!("node/{node}"), "policies": ["NodeAgent"]}),
            )
            .await;
        v["token"].as_str().unwrap().to_owned()
    }

    async fn admit(&self, node: &str, i: usize) {
        self.post(
            "/v1/admin/cluster/members",
            json!({"nodeId": node, "role": "compute",
                   "mgmtIp": format!("10.{}.{}.{}", 100 + i / 62500, (i / 250) % 250, i % 250 + 1)}),
        )
        .await;
    }
}

/// One agent: what a per-node reconciler does, until `stop`. Each holds
/// one keep-alive connection of its own, through hyper's HTTP/1.1 client,
/// and reads of each answer only the generation: a real agent runs on its
/// own node, and here it shares the server's cores, so the simulated one
/// takes as little of them as it can while doing what a real one does.
/// (With `reqwest`'s pool and each answer parsed whole, the agents took
/// more of the cores than an in-memory server did: `docs/benchmarks.md`,
/// "the agents bench measured its own agents".)
async fn agent(
    api: Api,
    idx: usize,
    node: String,
    token: String,
    seen: mpsc::UnboundedSender<(usize, u64, Instant)>,
    stop: Arc<AtomicBool>,
) {
    let auth = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
    let host = HeaderValue::from_str(&api.addr).unwrap();
    let report = format!("/v1/admin/cluster/members/{node}/applied-generation");
    let mut generation = 0u64;
    while !stop.load(Ordering::Relaxed) {
        // The connection is driven in this task, beside the exchanges.
        let Some((mut send, conn)) = connect(&api.addr).await else {
            api.failed_polls.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let exchanges = async {
            while !stop.load(Ordering::Relaxed) {
                let poll = request(
                    Method::GET,
                    &format!("/v1/admin/cluster/peers?after={generation}&waitSeconds=30"),
                    &host,
                    &auth,
                    Bytes::new(),
                );
                let got = match exchange(&mut send, poll).await {
                    Some((200, body)) => serde_json::from_slice::<Generation>(&body).ok(),
                    _ => None,
                };
                let Some(Generation { generation: g }) = got else {
                    return;
                };
                if g > generation {
                    generation = g;
                    let _ = seen.send((idx, g, Instant::now()));
                    // A member not admitted yet (or gone) is refused: no
                    // matter.
                    let body = Bytes::from(format!(r#"{{"generation":{g}}}"#));
                    let post = request(Method::POST, &report, &host, &auth, body);
                    exchange(&mut send, post).await;
                }
            }
        };
        tokio::select! {
            _ = conn => {}
            _ = exchanges => {}
        }
        if !stop.load(Ordering::Relaxed) {
            // Refused, or the connection failed: ask again on a new one.
            api.failed_polls.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// What an agent reads of the peer lists.
#[derive(serde::Deserialize)]
struct Generation {
    generation: u64,
}

/// A new connection to `addr` (`host:port`): its sender, and the
/// connection to drive.
async fn connect(
    addr: &str,
) -> Option<(
    SendRequest<Full<Bytes>>,
    hyper::client::conn::http1::Connection<TokioIo<tokio::net::TcpStream>, Full<Bytes>>,
)> {
    let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    tcp.set_nodelay(true).ok()?;
    hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .ok()
}

fn request(
    method: Method,
    path: &str,
    host: &HeaderValue,
    auth: &HeaderValue,
    body: Bytes,
) -> hyper::Request<Full<Bytes>> {
    let mut req = hyper::Request::builder().method(method).uri(path);
    let headers = req.headers_mut().unwrap();
    headers.insert(header::HOST, host.clone());
    headers.insert(header::AUTHORIZATION, auth.clone());
    if !body.is_empty() {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    req.body(Full::new(body)).unwrap()
}

/// Sends `req` and reads its whole answer: the status and body, or `None`
/// when the connection failed or the answer took over 60 s (a long-poll
/// waits 30).
async fn exchange(
    send: &mut SendRequest<Full<Bytes>>,
    req: hyper::Request<Full<Bytes>>,
) -> Option<(u16, Bytes)> {
    let answer = async {
        send.ready().await.ok()?;
        let res = send.send_request(req).await.ok()?;
        let status = res.status().as_u16();
        let body = res.into_body().collect().await.ok()?.to_bytes();
        Some((status, body))
    };
    tokio::time::timeout(Duration::from_secs(60), answer)
        .await
        .ok()
        .flatten()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i]
}

fn summary(name: &str, mut ms: Vec<f64>) {
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name:<48} n={:<6} p50={:>8.1} ms  p99={:>8.1} ms  max={:>8.1} ms",
        ms.len(),
        percentile(&ms, 50.0),
        percentile(&ms, 99.0),
        ms.last().copied().unwrap_or(f64::NAN)
    );
}

#[tokio::main]
async fn main() {
    let a = args();
    if let Some(port) = a.floor_serve {
        return floor::serve(port, BOOTSTRAP).await;
    }
    raise_open_files(a.agents);
    let (started, base, admin) = match (&a.server, &a.token) {
        (Some(_), _) if a.floor => panic!("--floor starts its own server: no --server with it"),
        (Some(s), Some(t)) => (None, s.clone(), t.clone()),
        (Some(_), None) => panic!("--server wants --token (an admin token)"),
        _ if a.floor => {
            let (s, base) = start_floor();
            (Some(s), base, BOOTSTRAP.to_owned())
        }
        _ => {
            let (s, base) = start(a.pg.as_deref(), a.agents);
            (Some(s), base, BOOTSTRAP.to_owned())
        }
    };
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(usize::MAX)
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    // The agents speak plain HTTP/1.1 to the server's host and port.
    let uri: hyper::Uri = base.parse().expect("--server: a URL");
    let addr = match (uri.scheme_str(), uri.authority()) {
        (Some("http"), Some(a)) => a.to_string(),
        _ => panic!("--server: the agents speak plain HTTP (http://host:port), not {base}"),
    };
    let api = Api {
        client,
        addr,
        admin,
        failed_polls: Arc::default(),
    };
    for _ in 0..200 {
        if api
            .client
            .get(api.url("/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let backend = match (a.floor, &a.pg) {
        (true, _) => "the floor",
        (false, Some(_)) => "postgres",
        (false, None) => "sqlite",
    };
    println!(
        "{} simulated agents, {} topology changes ({backend})",
        a.agents, a.changes
    );

    // The cluster: N members, each with its agent's token, 64 in flight.
    let t = Instant::now();
    let nodes: Vec<String> = (0..a.agents).map(|i| format!("a-{i:05}")).collect();
    let tokens: Vec<String> = futures::stream::iter(nodes.iter().enumerate())
        .map(|(i, n)| {
            let api = api.clone();
            async move {
                api.admit(n, i).await;
                api.node_token(n).await
            }
        })
        .buffered(64)
        .collect()
        .await;
    println!(
        "set-up: {} members and tokens in {:.1} s",
        a.agents,
        t.elapsed().as_secs_f64()
    );

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut agents: Vec<(Arc<AtomicBool>, u64)> = Vec::new();
    let spawn_agent =
        |idx: usize, node: String, token: String, agents: &mut Vec<(Arc<AtomicBool>, u64)>| {
            let own = Arc::new(AtomicBool::new(false));
            tokio::spawn(agent(
                api.clone(),
                idx,
                node,
                token,
                tx.clone(),
                own.clone(),
            ));
            agents.push((own, 0));
        };
    for (i, (n, tok)) in nodes.iter().zip(tokens).enumerate() {
        spawn_agent(i, n.clone(), tok, &mut agents);
    }

    // Folds what the agents saw into `agents` until every running agent has
    // generation `g`; answers when each first had it.
    async fn until_all(
        rx: &mut mpsc::UnboundedReceiver<(usize, u64, Instant)>,
        agents: &mut [(Arc<AtomicBool>, u64)],
        g: u64,
    ) -> Vec<Instant> {
        let mut at = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while agents
            .iter()
            .any(|(stopped, seen)| !stopped.load(Ordering::Relaxed) && *seen < g)
        {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((idx, seen, when))) => {
                    if seen >= g && agents[idx].1 < g {
                        at.push(when);
                    }
                    agents[idx].1 = agents[idx].1.max(seen);
                }
                _ => panic!("not every agent reached generation {g} within 60 s"),
            }
        }
        at
    }

    /// Polls the summary, as an operator's dashboard would, until nothing
    /// lags; `polls` gets how long each poll took (while the agents report,
    /// each is at a new position: its digest is not the one kept).
    async fn until_no_lagging(api: &Api, polls: &mut Vec<f64>) -> Instant {
        loop {
            let asked = Instant::now();
            let m = api.get("/v1/admin/cluster/membership").await;
            polls.push(asked.elapsed().as_secs_f64() * 1000.0);
            if m["lagging"].as_array().is_some_and(Vec::is_empty) {
                return Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    let g0 = api.get("/v1/admin/cluster/membership").await["generation"]
        .as_u64()
        .unwrap();
    until_all(&mut rx, &mut agents, g0).await;
    until_no_lagging(&api, &mut Vec::new()).await;
    println!("every agent at generation {g0}; nothing lagging");

    let mut each = Vec::new(); // per agent and change
    let mut all = Vec::new(); // per change: the last agent
    let mut lag = Vec::new(); // per change: lagging empty
    let mut polls = Vec::new(); // per summary polled until then
    let mut extra: Option<(String, usize)> = None;
    for k in 0..a.changes {
        // Admit a new node (its agent starts first, as on a real node),
        // then report its join failed, then decommission it.
        let (kind, path, body) = match (k % 3, &extra) {
            (0, _) => {
                let node = format!("c-{k:05}");
                let token = api.node_token(&node).await;
                let idx = agents.len();
                spawn_agent(idx, node.clone(), token, &mut agents);
                extra = Some((node.clone(), idx));
                tokio::time::sleep(Duration::from_millis(50)).await;
                (
                    "admission",
                    "/v1/admin/cluster/members".to_owned(),
                    json!({"nodeId": node, "role": "compute",
                           "mgmtIp": format!("10.200.{}.{}", k / 250, k % 250 + 1)}),
                )
            }
            (1, Some((node, _))) => (
                "join-failed",
                format!("/v1/admin/cluster/members/{node}/join-failed"),
                json!({"step": "join/raft-openbao", "error": "simulated failure"}),
            ),
            (_, Some((node, _))) => (
                "decommission",
                format!("/v1/admin/cluster/members/{node}/decommission"),
                json!({"reason": "simulated decommission", "force": true}),
            ),
            _ => unreachable!(),
        };
        api.post(&path, body).await;
        let acked = Instant::now();
        if kind == "decommission" {
            // A decommissioned node's token is refused from now on (its
            // agent stops there): the others must receive the change.
            if let Some((_, idx)) = extra.take() {
                agents[idx].0.store(true, Ordering::Relaxed);
            }
        }
        let g = api.get("/v1/admin/cluster/membership").await["generation"]
            .as_u64()
            .unwrap();
        let reached = until_all(&mut rx, &mut agents, g).await;
        let ms = |t: Instant| t.saturating_duration_since(acked).as_secs_f64() * 1000.0;
        each.extend(reached.iter().map(|t| ms(*t)));
        all.push(reached.iter().map(|t| ms(*t)).fold(0.0, f64::max));
        lag.push(ms(until_no_lagging(&api, &mut polls).await));
        println!(
            "change {:>3} {kind:<12} generation {g}: every agent has it at {:>7.1} ms, \
             lagging is empty at {:>7.1} ms",
            k + 1,
            all[k],
            lag[k]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("latencies from each change's acknowledgement:");
    summary("an agent receives the new generation", each);
    summary("every agent has received it", all);
    summary("lagging is empty", lag);
    summary("GET /membership until nothing lags", polls);
    println!(
        "long-polls failed or refused: {}",
        api.failed_polls.load(Ordering::Relaxed)
    );
    if let Some(s) = &started {
        if let Some(mib) = s.peak_rss_mib() {
            println!("server peak RSS: {mib:.0} MiB");
        }
    }
    for (s, _) in &agents {
        s.store(true, Ordering::Relaxed);
    }
    drop(started);
}
