//! Commands/s of stratum's write path next to Rust event-sourcing peers, in
//! one run, on the same machine and database server.
//!
//! `cargo run --release --manifest-path bench/peers/Cargo.toml -- \
//!     [--pg postgres://postgres@127.0.0.1:5432/test] [--seconds 10] \
//!     [--writers 64] [--pg-pool N] [--sqlite-pool N]`
//!
//! Every measurement: `--writers` closed-loop writers (each waits for its
//! answer before sending the next command), each on its own aggregate, for
//! `--seconds`, on a fresh database (a throwaway PostgreSQL database or a
//! new SQLite file). A writer's aggregate is admitted first (not timed),
//! then it reports join progress: one command, one event of a 115-character
//! step, decided against the aggregate's state.
//!
//! - stratum: `CommandBus::execute`, as `api/benches/store.rs` does, on
//!   SQLite (WAL, synchronous=FULL) and PostgreSQL.
//! - cqrs-es 0.5.0 + postgres-es 0.5.0: `postgres_cqrs` (event-sourced: every
//!   command loads the aggregate's events), and `postgres_snapshot_cqrs`
//!   with a snapshot every 100 events (the library's answer to that load).
//! - cqrs-es 0.5.0 + sqlite-es 0.5.0: `sqlite_cqrs`, WAL, synchronous=FULL.
//! - esrs 0.18.0: `AggregateManager` over `PgStore`; each command loads the
//!   aggregate (`AggregateManager::load`) and `handle_command` persists.
//!
//! No peer is left out: all four are released against sqlx 0.8, the sqlx
//! stratum uses, so the build has one sqlx-sqlite and one libsqlite3-sys.
//!
//! On an equal footing: the peers share one domain (`member`), with
//! stratum's own step validation; the PostgreSQL peers get a pool of one
//! connection per writer (`--pg-pool`; `default_postgress_pool` would give
//! 10) and, like stratum's pool, no ping on checkout; sqlite-es keeps its
//! `default_sqlite_pool` size of 10 (`--sqlite-pool`) with synchronous=FULL
//! instead of its NORMAL. PostgreSQL runs with the server's own settings
//! (synchronous_commit is on by default). Connections to the benchmark databases do not
//! use TLS unless the URL sets `sslmode`: the peers compile TLS into sqlx,
//! which stratum's own build (and `api/benches/store.rs`) does not. The
//! whole process runs on mimalloc, the allocator the `stratum` binary ships
//! with: stratum is measured as shipped, and the peers on the same one.

mod cqrs_peer;
mod esrs_peer;
mod member;
mod stratum;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::FutureExt;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::SqlitePool;
use sqlx::Connection;
use tokio::task::JoinSet;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: cargo run --release --manifest-path bench/peers/Cargo.toml -- \
[--pg URL] [--seconds N] [--writers N] [--pg-pool N] [--sqlite-pool N]";

/// The step names of `api/benches/store.rs`: 115 characters, matching
/// `^join/[a-z0-9][a-z0-9-]*$`, so stratum's stored event is about 200 bytes.
fn step(k: u64) -> String {
    format!("join/{:0>110}", k)
}

fn node_id(w: usize) -> String {
    format!("n-{w}")
}

fn mgmt_ip(w: usize) -> String {
    format!("10.0.{}.{}", w / 250, w % 250 + 1)
}

/// Commands answered in a measurement, and how long it took.
#[derive(Clone, Copy, Debug)]
struct Rate {
    commands: u64,
    secs: f64,
}

impl Rate {
    fn per_sec(&self) -> f64 {
        self.commands as f64 / self.secs
    }
}

/// `writers` tasks, each sending `op(writer, k)` for k = 0, 1, ... and
/// awaiting it before the next, until `run` has passed. A writer that
/// fails fails the measurement, and the others are stopped with it.
async fn closed_loop<F, Fut>(writers: usize, run: Duration, op: F) -> Rate
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for w in 0..writers {
        let op = op.clone();
        tasks.spawn(async move {
            let mut n = 0u64;
            while started.elapsed() < run {
                op(w, n).await;
                n += 1;
            }
            n
        });
    }
    let mut commands = 0;
    // Dropping the set (on a failed writer) aborts the rest.
    while let Some(done) = tasks.join_next().await {
        commands += done.expect("a writer failed");
    }
    Rate {
        commands,
        secs: started.elapsed().as_secs_f64(),
    }
}

/// Admits every writer's aggregate through `exec` (not timed), then runs
/// the closed loop of progress reports through it.
async fn drive<F, Fut>(writers: usize, run: Duration, exec: F) -> Rate
where
    F: Fn(usize, member::Command) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    for w in 0..writers {
        exec(w, member::Command::admit(w)).await;
    }
    closed_loop(writers, run, move |w, k| {
        exec(w, member::Command::ReportJoinProgress { step: step(k) })
    })
    .await
}

/// The peers' PostgreSQL pool: what `postgres_es::default_postgress_pool`
/// builds (`PgPoolOptions::new().max_connections(10).connect(url)`), sized
/// `size` and without the ping on checkout that stratum's pool skips too.
async fn pg_pool(url: &str, size: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .test_before_acquire(false)
        .connect(url)
        .await
        .expect("connect to PostgreSQL")
}

async fn pg_count(pool: &PgPool, table: &str) -> u64 {
    sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(pool)
        .await
        .expect("count the events") as u64
}

async fn sqlite_count(pool: &SqlitePool, table: &str) -> u64 {
    sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(pool)
        .await
        .expect("count the events") as u64
}

struct Config {
    pg: String,
    run: Duration,
    writers: usize,
    pg_pool: Option<u32>,
    sqlite_pool: u32,
}

impl Config {
    fn from_args() -> Self {
        let mut cfg = Config {
            pg: std::env::var("STRATUM_TEST_PG_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into()),
            run: Duration::from_secs(10),
            writers: 64,
            pg_pool: None,
            sqlite_pool: 10,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--pg" => cfg.pg = value(&mut args, &arg),
                "--seconds" => cfg.run = Duration::from_secs_f64(number(&mut args, &arg)),
                "--writers" => cfg.writers = number(&mut args, &arg),
                "--pg-pool" => cfg.pg_pool = Some(number(&mut args, &arg)),
                "--sqlite-pool" => cfg.sqlite_pool = number(&mut args, &arg),
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                other => fail(&format!("unknown argument {other}")),
            }
        }
        if cfg.writers == 0 {
            fail("--writers must be at least 1");
        }
        cfg
    }

    /// One connection per writer unless told otherwise.
    fn pg_pool(&self) -> u32 {
        self.pg_pool.unwrap_or(self.writers as u32)
    }
}

fn value(args: &mut impl Iterator<Item = String>, name: &str) -> String {
    args.next()
        .unwrap_or_else(|| fail(&format!("{name} needs a value")))
}

fn number<T: std::str::FromStr>(args: &mut impl Iterator<Item = String>, name: &str) -> T {
    let v = value(args, name);
    v.parse()
        .unwrap_or_else(|_| fail(&format!("{name}: not a number: {v}")))
}

fn fail(msg: &str) -> ! {
    eprintln!("{msg}\n{USAGE}");
    std::process::exit(2)
}

/// A throwaway PostgreSQL database, as in `api/benches/store.rs`.
struct Pg {
    admin: String,
    name: String,
}

impl Pg {
    async fn new(admin: &str) -> Result<Self, sqlx::Error> {
        let mut c = sqlx::PgConnection::connect(admin).await?;
        let name = format!("stratum_bench_{}", uuid::Uuid::new_v4().simple());
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut c)
            .await?;
        c.close().await.ok();
        Ok(Self {
            admin: admin.to_owned(),
            name,
        })
    }

    /// The admin URL naming this database, with `sslmode=disable` added
    /// unless it has an `sslmode` (see the top of this file).
    fn url(&self) -> String {
        let (base, query) = match self.admin.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (self.admin.as_str(), None),
        };
        let host_at = base.find("://").map_or(0, |i| i + 3);
        let base = match base[host_at..].find('/') {
            Some(i) => &base[..host_at + i],
            None => base,
        };
        let query = match query {
            Some(q) if q.split('&').any(|kv| kv.starts_with("sslmode=")) => q.to_owned(),
            Some(q) if !q.is_empty() => format!("{q}&sslmode=disable"),
            _ => "sslmode=disable".to_owned(),
        };
        format!("{base}/{}?{query}", self.name)
    }

    async fn drop_db(self) {
        if let Ok(mut c) = sqlx::PgConnection::connect(&self.admin).await {
            let _ = sqlx::query(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .execute(&mut c)
            .await;
            c.close().await.ok();
        }
    }
}

/// Runs one measurement; a panic in it (already printed by the panic hook)
/// loses that measurement only.
async fn guarded(measurement: impl Future<Output = Rate>) -> Option<Rate> {
    AssertUnwindSafe(measurement).catch_unwind().await.ok()
}

/// A measurement on a new SQLite file in a temporary directory.
async fn on_sqlite<F, Fut>(f: F) -> Option<Rate>
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: Future<Output = Rate>,
{
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rate = guarded(f(dir.path().join("bench.db"))).await;
    drop(dir);
    rate
}

/// A measurement on a throwaway PostgreSQL database, dropped after it.
async fn on_pg<F, Fut>(admin: &str, f: F) -> Option<Rate>
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Rate>,
{
    let pg = match Pg::new(admin).await {
        Ok(pg) => pg,
        Err(e) => {
            eprintln!("  cannot create a PostgreSQL database: {e}");
            return None;
        }
    };
    let rate = guarded(f(pg.url())).await;
    pg.drop_db().await;
    rate
}

const SQLITE: &str = "sqlite";
const POSTGRES: &str = "postgres";
const STRATUM: &str = "stratum";

/// The measurements made, printed as they come in.
struct Results {
    writers: usize,
    rows: Vec<(String, &'static str, Rate)>,
}

impl Results {
    fn add(&mut self, system: &str, backend: &'static str, rate: Option<Rate>, note: &str) {
        let w = self.writers;
        match rate {
            Some(r) => {
                println!(
                    "{system} {backend} {w} writers: {:.0} commands/s ({} in {:.1}s{note})",
                    r.per_sec(),
                    r.commands,
                    r.secs
                );
                self.rows.push((system.to_owned(), backend, r));
            }
            None => println!("{system} {backend} {w} writers: failed"),
        }
    }

    fn rate(&self, system: &str, backend: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|(s, b, _)| s == system && *b == backend)
            .map(|(_, _, r)| r.per_sec())
    }

    /// stratum's rate over each peer's on the same backend, PostgreSQL first.
    fn print_ratios(&self) {
        println!();
        println!(
            "stratum / peer, commands/s, {} writers (above 1: stratum answers more)",
            self.writers
        );
        println!(
            "  {:<9} {:<36} {:>12} {:>12} {:>8}",
            "backend", "peer", "peer", "stratum", "ratio"
        );
        for backend in [POSTGRES, SQLITE] {
            for (system, b, r) in &self.rows {
                if *b != backend || system == STRATUM {
                    continue;
                }
                let peer = r.per_sec();
                match self.rate(STRATUM, backend) {
                    Some(ours) => println!(
                        "  {backend:<9} {system:<36} {peer:>12.0} {ours:>12.0} {:>7.2}x",
                        ours / peer
                    ),
                    None => println!(
                        "  {backend:<9} {system:<36} {peer:>12.0} {:>12} {:>8}",
                        "-", "-"
                    ),
                }
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let cfg = Config::from_args();
    let (w, run) = (cfg.writers, cfg.run);
    let (pg_conns, sqlite_conns) = (cfg.pg_pool(), cfg.sqlite_pool);
    println!(
        "machine: {} cores; {w} closed-loop writers, one aggregate each, {:.0}s per measurement",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        run.as_secs_f64()
    );
    let mut results = Results {
        writers: w,
        rows: Vec::new(),
    };

    let rate = on_sqlite(|p| stratum::commands(format!("sqlite://{}", p.display()), w, run)).await;
    results.add(STRATUM, SQLITE, rate, "");
    let rate = on_sqlite(|p| cqrs_peer::sqlite(p, w, run, sqlite_conns)).await;
    results.add(
        "cqrs-es/sqlite-es",
        SQLITE,
        rate,
        &format!(", pool {sqlite_conns}"),
    );

    match sqlx::PgConnection::connect(&cfg.pg).await {
        Err(e) => println!("PostgreSQL does not answer ({e}): its measurements are skipped"),
        Ok(c) => {
            c.close().await.ok();
            let pool_note = format!(", pool {pg_conns}");
            let rate = on_pg(&cfg.pg, |url| stratum::commands(url, w, run)).await;
            results.add(STRATUM, POSTGRES, rate, "");
            let rate = on_pg(&cfg.pg, |url| {
                cqrs_peer::postgres(url, w, run, pg_conns, None)
            })
            .await;
            results.add("cqrs-es/postgres-es", POSTGRES, rate, &pool_note);
            let rate = on_pg(&cfg.pg, |url| {
                cqrs_peer::postgres(url, w, run, pg_conns, Some(100))
            })
            .await;
            results.add(
                "cqrs-es/postgres-es snapshot/100",
                POSTGRES,
                rate,
                &pool_note,
            );
            let rate = on_pg(&cfg.pg, |url| esrs_peer::postgres(url, w, run, pg_conns)).await;
            results.add("esrs", POSTGRES, rate, &pool_note);
        }
    }

    results.print_ratios();
}
