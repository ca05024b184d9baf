//! Load generator for the write path and for replay.
//!
//! `cargo bench -p stratum-api --bench store -- [commands|replay|tree|all] [--pg URL]
//! [--writers N[,N...]] [--backend sqlite|postgres]`
//!
//! commands: for SQLite (WAL, synchronous=FULL) and PostgreSQL
//! (synchronous_commit on), with 1, 8 and 64 concurrent writers (or only
//! the counts `--writers` gives, on only the backend `--backend` gives;
//! `replay` and `tree` run on both), each
//! command loads its stream's state, is decided, appends one event of about
//! 200 bytes with its expected version and updates the inline read model,
//! through the one write path (`CommandBus`).
//!
//! replay: builds a log of 1,000,000 events and folds it from position 0
//! into every read model, as `stratum replay` does.
//!
//! tree: what keeping the log's Merkle tree costs on the write path (per
//! event: the leaf hash and the subtrees it completes, and the rows kept),
//! and what serving it costs: a tile, an entry bundle, an inclusion and a
//! consistency proof, read from the store of a log of
//! `STRATUM_BENCH_EVENTS` (default 1,000,000) events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::Connection;
use stratum_api::command::{CommandBus, CommandRequest};
use stratum_domain::log::{EventMeta, Recorded};
use stratum_domain::membership::{MemberCommand, Role};
use stratum_domain::state::stream_of;
use stratum_domain::stored::encode;
use stratum_domain::Command;
use stratum_store::{self as store, EventStore, Head};

/// The allocator the `stratum` binary runs with (`api/src/main.rs`), so
/// the write path is measured as it is shipped.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RUN: Duration = Duration::from_secs(10);

fn step(k: u64) -> String {
    // A long step name makes the stored event about 200 bytes.
    format!("join/{:0>110}", k)
}

async fn commands(url: &str, writers: usize) -> (u64, f64) {
    let s = store::connect(url).await.unwrap();
    let bus = CommandBus::start(s.clone()).await.unwrap();
    for w in 0..writers {
        let admit = Command::Member(MemberCommand::Admit {
            node_id: Some(format!("n-{w}")),
            role: Some("compute".into()),
            mgmt_ip: Some(format!("10.0.{}.{}", w / 250, w % 250 + 1)),
            bindings: Default::default(),
            labels: Default::default(),
        });
        bus.execute(CommandRequest::new(admit, "user/bench"))
            .await
            .unwrap();
    }
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let bus = bus.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                while started.elapsed() < RUN {
                    let mut req = CommandRequest::new(
                        Command::Member(MemberCommand::ReportJoinProgress {
                            node_id: format!("n-{w}"),
                            step: Some(step(n)),
                        }),
                        "user/bench",
                    );
                    req.meta.request_id = Some(uuid::Uuid::new_v4().to_string());
                    let r = bus.execute(req).await.unwrap().committed().unwrap();
                    assert!(r.position.is_some(), "{}", r.body);
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let head = s.head().await.unwrap().position;
    assert_eq!(
        head,
        writers as u64 + total,
        "every command appended one event"
    );
    (total, total as f64 / secs)
}

/// Writes a log of `n` events straight through the store: 1,000 members
/// admitted, then progress reports round-robin.
async fn build_log(s: &Arc<dyn EventStore>, n: u64) {
    let members = 1000u64;
    let mut head = Head {
        position: 0,
        hash: [0; 32],
    };
    let mut versions = vec![0u64; members as usize];
    let mut k = 0u64;
    while head.position < n {
        let mut batch = Vec::with_capacity(10_000);
        while batch.len() < 10_000 && head.position + (batch.len() as u64) < n {
            let m = k % members;
            let event = if k < members {
                stratum_domain::testing::admitted(&format!("n-{m}"), Role::Compute, m as u32 + 1)
            } else {
                stratum_domain::DomainEvent::JoinProgressReported {
                    node_id: format!("n-{m}"),
                    step: step(k),
                }
            };
            let enc = encode(&event);
            versions[m as usize] += 1;
            let prev = batch.last().map_or(head.hash, |e: &Recorded| e.hash);
            let mut r = Recorded {
                position: head.position + batch.len() as u64 + 1,
                stream_id: stream_of(&event),
                stream_version: versions[m as usize],
                event_type: enc.event_type.into(),
                schema_version: enc.schema_version,
                event_id: uuid::Uuid::new_v4(),
                occurred_at: stratum_domain::log::log_precision(chrono::Utc::now()),
                meta: EventMeta {
                    principal: "user/bench".into(),
                    request_id: Some(uuid::Uuid::new_v4().to_string()),
                    ..Default::default()
                },
                payload: enc.payload,
                prev_hash: [0; 32],
                hash: [0; 32],
            };
            r.seal(prev);
            batch.push(r);
            k += 1;
        }
        let mut tx = s.begin_write().await.unwrap();
        tx.append(&batch).await.unwrap();
        tx.commit().await.unwrap();
        let last = batch.last().unwrap();
        head = Head {
            position: last.position,
            hash: last.hash,
        };
    }
}

async fn replay(url: &str, n: u64) -> f64 {
    let s = store::connect(url).await.unwrap();
    if s.head().await.unwrap().position < n {
        let t = Instant::now();
        build_log(&s, n).await;
        eprintln!(
            "  built a log of {n} events in {:.1}s",
            t.elapsed().as_secs_f64()
        );
    }
    let t = Instant::now();
    let rm = stratum_api::command::load(s.clone(), None).await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(rm.state.position, n);
    // Time travel near the head: the first read replays from zero and keeps
    // a snapshot, the next starts from it.
    let p = n - 100;
    let t = Instant::now();
    stratum_api::command::state_at(s.clone(), p - 1000)
        .await
        .unwrap();
    let cold = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let at = stratum_api::command::state_at(s.clone(), p).await.unwrap();
    let warm = t.elapsed().as_secs_f64();
    assert_eq!(at.state.position, p);
    println!(
        "  asOf={p}: {cold:.2}s without a snapshot, {:.1}ms from the snapshot 1,000 events before",
        warm * 1000.0
    );
    // A service starting on this log: from the newest snapshot (the one
    // just kept, 1,100 events before the head), then the rest.
    let t = Instant::now();
    let bus = stratum_api::command::CommandBus::start(s.clone())
        .await
        .unwrap();
    let startup = t.elapsed().as_secs_f64();
    assert_eq!(bus.published().state.position, n);
    println!(
        "  start-up on {n} events from the newest snapshot: {:.0}ms",
        startup * 1000.0
    );
    n as f64 / secs
}

struct Pg {
    admin: String,
    name: String,
}

impl Pg {
    async fn new(admin: &str) -> Option<Self> {
        let mut c = sqlx::PgConnection::connect(admin).await.ok()?;
        let name = format!("stratum_bench_{}", uuid::Uuid::new_v4().simple());
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut c)
            .await
            .ok()?;
        Some(Self {
            admin: admin.to_owned(),
            name,
        })
    }

    fn url(&self) -> String {
        let base = self
            .admin
            .rsplit_once('/')
            .map_or(self.admin.as_str(), |(b, _)| b);
        format!("{base}/{}", self.name)
    }

    async fn drop_db(self) {
        if let Ok(mut c) = sqlx::PgConnection::connect(&self.admin).await {
            let _ = sqlx::query(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .execute(&mut c)
            .await;
        }
    }
}

/// Times `n` runs of `f`; the mean in microseconds.
async fn mean_us<F, Fut>(n: u32, mut f: F) -> f64
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let t = Instant::now();
    for i in 0..n {
        f(i).await;
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
}

async fn tree_costs(backend: &str, url: &str, n: u64) {
    use stratum_domain::tree::{Frontier, TILE_WIDTH};
    use stratum_store::tree;
    let s = store::connect(url).await.unwrap();
    let t = Instant::now();
    build_log(&s, n).await;
    let built = t.elapsed().as_secs_f64();
    println!(
        "tree {backend:<8} appended {n} events in commits of 10,000, tree rows included: {:>9.0} events/s",
        n as f64 / built
    );
    // The tree's share of an append: each leaf hashed, each completed
    // subtree hashed (what `Frontier::push` does per event)...
    let entries = s.entries(0, n).await.unwrap();
    let t = Instant::now();
    let mut f = Frontier::default();
    let mut rows = Vec::new();
    for e in &entries {
        f.push(e, &mut rows);
    }
    let push_ns = t.elapsed().as_secs_f64() * 1e9 / n as f64;
    // ...and each kept row written (one per 256 events, and fewer above).
    let mut tx = s.begin_write().await.unwrap();
    let t = Instant::now();
    tx.replace_tree(&rows).await.unwrap();
    tx.commit().await.unwrap();
    let row_us = t.elapsed().as_secs_f64() * 1e6 / rows.len() as f64;
    println!(
        "tree {backend:<8} per event: {push_ns:.0} ns hashing, {:.2} µs of row writes ({} rows of {row_us:.1} µs, one per {:.0} events)",
        row_us * rows.len() as f64 / n as f64,
        rows.len(),
        n as f64 / rows.len() as f64
    );
    assert_eq!(tree::root(&*s, n).await.unwrap(), f.root());
    let tiles = n / TILE_WIDTH;
    let pick = |i: u32, m: u64| (u64::from(i) * 2_654_435_761) % m.max(1);
    let level0 = mean_us(1000, |i| {
        let s = s.clone();
        async move {
            let at = pick(i, tiles) * TILE_WIDTH;
            tree::level_hashes(&*s, 0, at, at + TILE_WIDTH)
                .await
                .unwrap();
        }
    })
    .await;
    let bundle = mean_us(1000, |i| {
        let s = s.clone();
        async move {
            let at = pick(i, tiles) * TILE_WIDTH;
            s.entries(at, at + TILE_WIDTH).await.unwrap();
        }
    })
    .await;
    let level1 = mean_us(1000, |i| {
        let s = s.clone();
        async move {
            let have = (n / TILE_WIDTH).min(TILE_WIDTH);
            let _ = i;
            tree::level_hashes(&*s, 1, 0, have).await.unwrap();
        }
    })
    .await;
    let inclusion = mean_us(1000, |i| {
        let s = s.clone();
        async move {
            tree::inclusion(&*s, n, pick(i, n)).await.unwrap();
        }
    })
    .await;
    let consistency = mean_us(1000, |i| {
        let s = s.clone();
        async move {
            tree::consistency(&*s, pick(i, n - 1) + 1, n).await.unwrap();
        }
    })
    .await;
    let root = mean_us(1000, |_| {
        let s = s.clone();
        async move {
            tree::root(&*s, n).await.unwrap();
        }
    })
    .await;
    println!(
        "tree {backend:<8} served from the store (mean of 1,000): level-0 tile {level0:.0} µs, entry bundle {bundle:.0} µs, level-1 tile {level1:.0} µs, inclusion proof {inclusion:.0} µs, consistency proof {consistency:.0} µs, root {root:.0} µs"
    );
}

const USAGE: &str = "usage: store [commands|replay|tree|all] [--pg URL] \
                     [--writers N[,N...]] [--backend sqlite|postgres]";

#[tokio::main]
async fn main() {
    // One pass over the arguments: the one measurement named, and each
    // flag's value.
    let (mut what, mut pg, mut writers, mut backend) = (None, None, None, None);
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| panic!("{a} wants a value\n{USAGE}"))
        };
        match a.as_str() {
            "--pg" => pg = Some(value()),
            // `--writers 64` or `--writers 8,64`: only those runs of `commands`.
            "--writers" => {
                let v = value();
                let counts = v.split(',').map(|n| n.parse().expect("--writers N[,N...]"));
                writers = Some(counts.collect::<Vec<usize>>());
            }
            "--backend" => match value().as_str() {
                b @ ("sqlite" | "postgres") => backend = Some(b.to_owned()),
                _ => panic!("--backend sqlite|postgres"),
            },
            "commands" | "replay" | "tree" | "all" if what.is_none() => what = Some(a),
            _ => panic!("{USAGE}"),
        }
    }
    let what = what.unwrap_or_else(|| "all".to_owned());
    let pg_admin = pg
        .or_else(|| std::env::var("STRATUM_TEST_PG_URL").ok())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".into());
    let writers = writers.unwrap_or_else(|| vec![1, 8, 64]);
    let on = |b: &str| backend.as_deref().is_none_or(|only| only == b);
    let events: u64 = std::env::var("STRATUM_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    println!(
        "machine: {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if what == "commands" || what == "all" {
        for &writers in &writers {
            if on("sqlite") {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("bench.db").display());
                let (n, rate) = commands(&url, writers).await;
                println!(
                    "commands sqlite   writers={writers:>2}: {rate:>9.0} commands/s ({n} in {}s)",
                    RUN.as_secs()
                );
            }
            if !on("postgres") {
                continue;
            }
            let Some(pg) = Pg::new(&pg_admin).await else {
                eprintln!(
                    "commands postgres: cannot create a database (--pg, STRATUM_TEST_PG_URL)"
                );
                continue;
            };
            let (n, rate) = commands(&pg.url(), writers).await;
            println!(
                "commands postgres writers={writers:>2}: {rate:>9.0} commands/s ({n} in {}s)",
                RUN.as_secs()
            );
            pg.drop_db().await;
        }
    }
    if what == "tree" || what == "all" {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("tree.db").display());
        tree_costs("sqlite", &url, events).await;
        if let Some(pg) = Pg::new(&pg_admin).await {
            tree_costs("postgres", &pg.url(), events).await;
            pg.drop_db().await;
        }
    }
    if what == "replay" || what == "all" {
        // STRATUM_BENCH_REPLAY_DB keeps the SQLite log between runs.
        let dir = tempfile::tempdir().unwrap();
        let url = match std::env::var("STRATUM_BENCH_REPLAY_DB") {
            Ok(path) => format!("sqlite://{path}"),
            Err(_) => format!("sqlite://{}", dir.path().join("replay.db").display()),
        };
        let rate = replay(&url, events).await;
        println!("replay sqlite   {events} events: {rate:>10.0} events/s");
        if let Some(pg) = Pg::new(&pg_admin).await {
            let rate = replay(&pg.url(), events).await;
            println!("replay postgres {events} events: {rate:>10.0} events/s");
            pg.drop_db().await;
        }
    }
}
