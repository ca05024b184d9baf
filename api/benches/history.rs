//! Long histories: what a log of millions of events over the same 1,000
//! members costs the service that holds it (issue 26: cost should grow with
//! members, not with history).
//!
//! ```sh
//! cargo bench -p stratum-api --bench history                        # SQLite, 1,000,000 events
//! cargo bench -p stratum-api --bench history -- --events 1M,10M --keep /var/tmp/history
//! cargo bench -p stratum-api --bench history -- --pg postgres://postgres@127.0.0.1:5432/test
//! ```
//!
//! For each `--events N` (repeatable, or a comma list; `k` and `M` suffixes;
//! default 1M) it builds a log straight through the store: 1,000 members
//! admitted, then progress reports round-robin, with the read-model rows and
//! the snapshots the writer would have kept (one every 10,000 events, pruned
//! by the store as the writer's are). Then, through the built `stratum`
//! binary with its durable defaults (SQLite WAL `synchronous=FULL`,
//! PostgreSQL `synchronous_commit` on), one line per measurement:
//!
//! - `stratum serve`: start-up until `/readyz` answers 200, the server's
//!   resident memory then (`VmRSS`), `asOf` reads near the head and far from
//!   it (`GET /v1/admin/cluster/membership?asOf=P`, twice each), the HTTP
//!   export (`GET /v1/admin/events/export`), and the server's peak memory;
//! - the server stopped, on the host: `stratum events verify`, `stratum
//!   replay --check` and `stratum events export`, each timed as a whole
//!   process run, as events per second.
//!
//! `STRATUM_BIN` names another `stratum` binary than cargo's build.
//! `--keep DIR` keeps the SQLite files (`DIR/history-N.db`) or the
//! PostgreSQL databases (`stratum_bench_history_N`) and reuses a log that
//! already reaches N events, so a second run skips building.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::Connection;
use stratum_domain::event::MemberAdmitted;
use stratum_domain::log::{EventMeta, Recorded};
use stratum_domain::membership::Role;
use stratum_domain::state::stream_of;
use stratum_domain::stored::encode;
use stratum_domain::DomainEvent;
use stratum_projections::{Changes, ReadModels};
use stratum_store::{self as store, EventStore};

const MEMBERS: u64 = 1000;
/// Events per commit while building.
const COMMIT: u64 = 50_000;
/// The writer's distance between snapshots.
const SNAPSHOT_EVERY: u64 = stratum_api::command::SNAPSHOT_DISTANCE;

struct Args {
    events: Vec<u64>,
    pg: Option<String>,
    keep: Option<std::path::PathBuf>,
}

fn count(s: &str) -> u64 {
    let s = s.trim().replace('_', "");
    let (num, mul) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1_000),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1_000_000),
        _ => (&s[..], 1),
    };
    num.parse::<u64>()
        .unwrap_or_else(|_| panic!("--events {s}: a number, e.g. 1000000 or 1M"))
        * mul
}

fn args() -> Args {
    let mut a = Args {
        events: Vec::new(),
        pg: None,
        keep: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| panic!("{k} wants a value"));
        match k.as_str() {
            "--events" => a.events.extend(v().split(',').map(count)),
            "--pg" => a.pg = Some(v()),
            "--keep" => a.keep = Some(v().into()),
            // cargo bench passes --bench; anything else is a filter.
            _ => {}
        }
    }
    if a.events.is_empty() {
        a.events.push(1_000_000);
    }
    a
}

/// The `stratum` binary: cargo's build of it, or `STRATUM_BIN` (a copy
/// kept apart from a target directory others build into).
fn stratum_bin() -> String {
    std::env::var("STRATUM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_stratum").to_owned())
}

fn step(k: u64) -> String {
    // As the store bench: the stored event is about 200 bytes.
    format!("join/{:0>110}", k)
}

fn admitted(m: u64) -> DomainEvent {
    DomainEvent::MemberAdmitted(MemberAdmitted {
        node_id: format!("n-{m}"),
        role: Role::Compute,
        mgmt_ip: format!("10.0.{}.{}", m / 250, m % 250 + 1),
        bindings: Default::default(),
        labels: [("topology.rack".to_owned(), format!("r{}", m % 20))].into(),
        ordinal: m as u32 + 1,
        join_request: None,
    })
}

/// One commit's worth of the log: its events, the read-model rows they
/// changed, and the snapshots the writer would have kept inside it.
struct Batch {
    events: Vec<Recorded>,
    changes: Changes,
    snapshots: Vec<(u64, Vec<u8>)>,
}

/// Makes the log after `from` (0) up to `n` on a thread of its own, sealed
/// and folded, one [`Batch`] at a time.
fn produce(n: u64, tx: tokio::sync::mpsc::Sender<Batch>) {
    let mut rm = ReadModels::default();
    rm.set_tracking(true);
    let mut versions = vec![0u64; MEMBERS as usize];
    let mut prev = [0u8; 32];
    let mut position = 0u64;
    let occurred_at = stratum_domain::log::log_precision(chrono::Utc::now());
    while position < n {
        let size = COMMIT.min(n - position) as usize;
        let mut events = Vec::with_capacity(size);
        let mut snapshots = Vec::new();
        for _ in 0..size {
            let k = position;
            let m = k % MEMBERS;
            let event = if k < MEMBERS {
                admitted(m)
            } else {
                DomainEvent::JoinProgressReported {
                    node_id: format!("n-{m}"),
                    step: step(k),
                }
            };
            let enc = encode(&event);
            versions[m as usize] += 1;
            position += 1;
            let mut r = Recorded {
                position,
                stream_id: stream_of(&event),
                stream_version: versions[m as usize],
                event_type: enc.event_type.into(),
                schema_version: enc.schema_version,
                event_id: uuid::Uuid::now_v7(),
                occurred_at,
                meta: EventMeta {
                    principal: "user/bench".into(),
                    request_id: Some(format!("req-{k}")),
                    ..Default::default()
                },
                payload: enc.payload,
                prev_hash: [0; 32],
                hash: [0; 32],
            };
            r.seal(prev);
            prev = r.hash;
            rm.apply(&r, &event);
            if position.is_multiple_of(SNAPSHOT_EVERY) {
                snapshots.push((position, rm.snapshot()));
            }
            events.push(r);
        }
        let changes = rm.take_changes();
        if tx
            .blocking_send(Batch {
                events,
                changes,
                snapshots,
            })
            .is_err()
        {
            return;
        }
    }
}

/// Builds the log of `n` events: commits of [`COMMIT`] events through
/// `WriteTx::append`, the read-model rows with them, and after each commit
/// the snapshots inside it through `put_snapshot` (which prunes).
async fn build(s: &Arc<dyn EventStore>, n: u64) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(2);
    let producer = std::thread::spawn(move || produce(n, tx));
    while let Some(b) = rx.recv().await {
        let last = b.events.last().unwrap().position;
        let mut w = s.begin_write().await.unwrap();
        w.append(&b.events).await.unwrap();
        w.write_changes(&b.changes, last).await.unwrap();
        w.commit().await.unwrap();
        for (at, bytes) in &b.snapshots {
            s.put_snapshot(*at, bytes).await.unwrap();
        }
    }
    producer.join().unwrap();
}

/// The positions of the snapshots kept, newest first.
async fn snapshots(s: &dyn EventStore) -> Vec<u64> {
    let mut kept = Vec::new();
    let mut p = i64::MAX as u64;
    while let Some((at, _)) = s.snapshot_at_or_before(p).await.unwrap() {
        kept.push(at);
        if at == 0 {
            break;
        }
        p = at - 1;
    }
    kept
}

/// Where a log of `n` events lives, and whether to drop it at the end.
struct Db {
    url: String,
    pg_drop: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl Db {
    async fn open(a: &Args, n: u64) -> Self {
        match (&a.pg, &a.keep) {
            (None, keep) => {
                let (dir, path) = match keep {
                    Some(d) => {
                        std::fs::create_dir_all(d).unwrap();
                        (None, d.join(format!("history-{n}.db")))
                    }
                    None => {
                        let t = tempfile::tempdir().unwrap();
                        let p = t.path().join("history.db");
                        (Some(t), p)
                    }
                };
                Db {
                    url: format!("sqlite://{}", path.display()),
                    pg_drop: None,
                    _dir: dir,
                }
            }
            (Some(admin), keep) => {
                let name = match keep {
                    Some(_) => format!("stratum_bench_history_{n}"),
                    None => format!("stratum_bench_history_{}", uuid::Uuid::new_v4().simple()),
                };
                let mut c = sqlx::PgConnection::connect(admin).await.unwrap();
                let exists: Option<i32> =
                    sqlx::query_scalar("SELECT 1 FROM pg_database WHERE datname = $1")
                        .bind(&name)
                        .fetch_optional(&mut c)
                        .await
                        .unwrap();
                if exists.is_none() {
                    sqlx::query(&format!("CREATE DATABASE {name}"))
                        .execute(&mut c)
                        .await
                        .unwrap();
                }
                let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
                Db {
                    url: format!("{base}/{name}"),
                    pg_drop: keep.is_none().then(|| (admin.clone(), name)),
                    _dir: None,
                }
            }
        }
    }

    async fn drop_db(self) {
        if let Some((admin, name)) = &self.pg_drop {
            if let Ok(mut c) = sqlx::PgConnection::connect(admin).await {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut c)
                    .await;
            }
        }
    }
}

/// A `stratum serve` this run started, stopped on drop.
struct Server {
    child: std::process::Child,
    base: String,
}

impl Server {
    fn start(url: &str) -> Self {
        let port = stratum_api::testing::free_port();
        let child = Command::new(stratum_bin())
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .env("STRATUM_DATABASE_URL", url)
            .env("STRATUM_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// `VmRSS` or `VmHWM` of the server, in MiB.
    fn memory_mib(&self, field: &str) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kib: f64 = status
            .lines()
            .find(|l| l.starts_with(field))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kib / 1024.0)
    }

    /// Stops it as a service manager would (SIGTERM), and waits.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `stratum ARGS --database-url URL`; its time and the lines of its
/// standard output.
fn cli(url: &str, args: &[&str]) -> (f64, u64) {
    let (secs, out) = cli_output(url, args, false);
    (secs, out.iter().filter(|&&b| b == b'\n').count() as u64)
}

/// Runs `stratum ARGS --database-url URL`; its time and its standard output
/// (kept only when `keep`).
fn cli_output(url: &str, args: &[&str], keep: bool) -> (f64, Vec<u8>) {
    use std::io::Read;
    let t = Instant::now();
    let mut child = Command::new(stratum_bin())
        .args(args)
        .args(["--database-url", url])
        .env("STRATUM_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = out.read(&mut buf).unwrap();
        if k == 0 {
            break;
        }
        if keep {
            kept.extend_from_slice(&buf[..k]);
        } else {
            kept.extend(buf[..k].iter().filter(|&&b| b == b'\n'));
        }
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert!(status.success(), "stratum {args:?}: {status}\n{err}");
    (secs, kept)
}

async fn get(client: &reqwest::Client, token: &str, url: &str) -> reqwest::Response {
    let res = client.get(url).bearer_auth(token).send().await.unwrap();
    assert!(res.status().is_success(), "GET {url}: {}", res.status());
    res
}

async fn run(a: &Args, n: u64) {
    let backend = if a.pg.is_some() { "postgres" } else { "sqlite" };
    let say = |what: &str| println!("history {backend} {n} events: {what}");
    let db = Db::open(a, n).await;
    let s = store::connect(&db.url).await.unwrap();
    let have = s.head().await.unwrap().position;
    if have == 0 {
        let t = Instant::now();
        build(&s, n).await;
        let secs = t.elapsed().as_secs_f64();
        say(&format!(
            "built in {secs:.1}s ({:.0} events/s, commits of {COMMIT})",
            n as f64 / secs
        ));
    } else {
        assert!(
            have >= n,
            "{}: a log of {have} events, short of {n} (an interrupted build?): remove it",
            db.url
        );
        say(&format!("reusing the kept log of {have} events"));
    }
    let kept = snapshots(&*s).await;
    say(&format!(
        "{} snapshots kept (newest {:?}), one every {SNAPSHOT_EVERY} events written",
        kept.len(),
        kept.first()
    ));
    drop(s);

    // The service. The log was not empty at its first start, so it was not
    // bootstrapped: an administrator's token is made on the host.
    let (_, out) = cli_output(
        &db.url,
        &[
            "token",
            "create",
            "--principal",
            "user/bench",
            "--policy",
            "AdministratorAccess",
            "-o",
            "json",
        ],
        true,
    );
    let made: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let token = made["token"].as_str().unwrap().to_owned();
    let client = reqwest::Client::new();
    let t = Instant::now();
    let server = Server::start(&db.url);
    loop {
        let up = client
            .get(format!("{}/readyz", server.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if up {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "not ready in 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    say(&format!(
        "start-up to /readyz ready: {:.0} ms",
        t.elapsed().as_secs_f64() * 1000.0
    ));
    say(&format!(
        "server RSS after start-up: {:.1} MiB",
        server.memory_mib("VmRSS:").unwrap_or(f64::NAN)
    ));
    let head = stratum_store::connect(&db.url)
        .await
        .unwrap()
        .head()
        .await
        .unwrap()
        .position;
    // Near the head: the newest snapshot is at most 10,000 behind. Far: just
    // before a multiple of the spacing, the farthest from a kept snapshot.
    let spacing = stratum_store::SNAPSHOT_SPACING;
    let far = ((n / 2) / spacing).max(1) * spacing - 1;
    for (what, p) in [("near the head", head - 100), ("far from it", far)] {
        for attempt in ["first", "again"] {
            let t = Instant::now();
            let v: serde_json::Value = get(
                &client,
                &token,
                &format!("{}/v1/admin/cluster/membership?asOf={p}", server.base),
            )
            .await
            .json()
            .await
            .unwrap();
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            assert!(v["digest"].is_string(), "asOf={p}: {v}");
            let from = stratum_store::connect(&db.url)
                .await
                .unwrap()
                .snapshot_at_or_before(p)
                .await
                .unwrap()
                .map_or(0, |(at, _)| at);
            say(&format!(
                "asOf={p} ({what}, {attempt}): {ms:.0} ms (the newest snapshot at or before it now: {from})"
            ));
        }
    }
    let t = Instant::now();
    let mut res = get(
        &client,
        &token,
        &format!("{}/v1/admin/events/export", server.base),
    )
    .await;
    let mut lines = 0u64;
    let mut bytes = 0u64;
    while let Some(chunk) = res.chunk().await.unwrap() {
        bytes += chunk.len() as u64;
        lines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    assert!(lines >= head, "the HTTP export had {lines} lines");
    say(&format!(
        "HTTP export: {:.0} events/s ({head} events, {:.0} MB, in {secs:.1}s)",
        head as f64 / secs,
        bytes as f64 / 1e6
    ));
    say(&format!(
        "server peak RSS: {:.1} MiB",
        server.memory_mib("VmHWM:").unwrap_or(f64::NAN)
    ));
    server.stop();

    // On the host, the service stopped.
    let (secs, _) = cli(&db.url, &["events", "verify"]);
    say(&format!(
        "stratum events verify: {:.0} events/s ({secs:.1}s)",
        head as f64 / secs
    ));
    let (secs, _) = cli(&db.url, &["replay", "--check"]);
    say(&format!(
        "stratum replay --check: {:.0} events/s ({secs:.1}s)",
        head as f64 / secs
    ));
    let (secs, lines) = cli(&db.url, &["events", "export"]);
    assert!(lines >= head, "the export had {lines} lines");
    say(&format!(
        "stratum events export: {:.0} events/s ({secs:.1}s)",
        head as f64 / secs
    ));
    db.drop_db().await;
}

#[tokio::main]
async fn main() {
    let a = args();
    println!(
        "machine: {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for &n in &a.events {
        run(&a, n).await;
    }
}
