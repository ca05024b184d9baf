//! Test support for every crate that tests against a store (turned on by
//! the `testing` feature, never in the release binary): a fresh database
//! per test on each backend, and the low-level append below the write path.
//!
//! PostgreSQL comes from `STRATUM_TEST_PG_URL` (default the local server on
//! 127.0.0.1:5432), or else from a throwaway cluster this process starts
//! when the machine has PostgreSQL's binaries. With
//! `STRATUM_REQUIRE_POSTGRES=1` no server is a failure, never a skip.

use std::sync::OnceLock;

use sqlx::Connection;

use stratum_domain::log::{EventMeta, Recorded};

use crate::{redact_url, EventStore, Head, StoreError, StoreResult};

/// A database that exists for one test and is dropped after it.
pub struct TestDb {
    pub url: String,
    pub backend: &'static str,
    _dir: Option<tempfile::TempDir>,
    pg_name: Option<String>,
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(name) = self.pg_name.take() {
            let admin = pg_admin_url().to_owned();
            // Drop runs outside any runtime we may block: use a thread.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    if let Ok(mut c) = sqlx::PgConnection::connect(&admin).await {
                        let _ =
                            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                                .execute(&mut c)
                                .await;
                    }
                });
            })
            .join();
        }
    }
}

/// A port nothing listens on now, on loopback: for a server a test or a
/// bench starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("stratum.db").display());
    TestDb {
        url,
        backend: "sqlite",
        _dir: Some(dir),
        pg_name: None,
    }
}

/// The PostgreSQL server tests use: `STRATUM_TEST_PG_URL` (default the
/// local one on 127.0.0.1:5432), or else a throwaway cluster this process
/// starts when the machine has PostgreSQL's binaries.
fn pg_admin_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        let url = std::env::var("STRATUM_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let answers = std::thread::spawn({
            let url = url.clone();
            move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(sqlx::PgConnection::connect(&url))
                    .is_ok()
            }
        })
        .join()
        .unwrap();
        if answers {
            return url;
        }
        match throwaway::start() {
            Ok(u) => {
                eprintln!(
                    "PostgreSQL at {} does not answer; using a throwaway cluster at {u}",
                    redact_url(&url)
                );
                u
            }
            Err(e) => {
                eprintln!("no throwaway PostgreSQL cluster either: {e}");
                url
            }
        }
    })
}

/// A PostgreSQL cluster in a temporary directory, stopped and removed when
/// the test process ends (a watchdog shell waits for this process).
mod throwaway {
    use std::path::PathBuf;
    use std::process::Command;

    fn bin(name: &str) -> Option<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .map(|d| d.path().join("bin"))
            .collect();
        dirs.sort();
        dirs.into_iter()
            .rev()
            .map(|d| d.join(name))
            .find(|p| p.exists())
    }

    /// Runs as `postgres` when this process is root (PostgreSQL refuses root).
    fn as_pg(root: bool, argv: &[String]) -> Command {
        if root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).args(argv);
            c
        } else {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
    }

    pub fn start() -> Result<String, String> {
        let initdb = bin("initdb").ok_or("no initdb on this machine")?;
        let postgres = bin("postgres").ok_or("no postgres binary on this machine")?;
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout == b"0\n")
            .unwrap_or(false);
        let dir = std::env::temp_dir().join(format!("stratum-pg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        if root {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir)
                .status();
            if !ok.is_ok_and(|s| s.success()) {
                return Err("cannot hand the cluster directory to postgres".into());
            }
        }
        let d = dir.display().to_string();
        let out = as_pg(
            root,
            &[
                initdb.display().to_string(),
                "-D".into(),
                format!("{d}/data"),
                "-U".into(),
                "postgres".into(),
                "--auth=trust".into(),
            ],
        )
        .output()
        .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let port = super::free_port();
        let script = format!(
            "{pg} -D {d}/data -p {port} -k {d} -c listen_addresses=127.0.0.1 -c fsync=on >{d}/log 2>&1 & pg=$!; \
             while [ -d /proc/{parent} ]; do sleep 1; done; kill $pg; wait $pg; rm -rf {d}",
            pg = postgres.display(),
            parent = std::process::id(),
        );
        as_pg(root, &["sh".into(), "-c".into(), script])
            .spawn()
            .map_err(|e| e.to_string())?;
        let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                std::thread::sleep(std::time::Duration::from_millis(300));
                return Ok(url);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Err(format!("the throwaway cluster did not start; see {d}/log"))
    }
}

/// A fresh PostgreSQL database, or `None` when no server answers. Where
/// `STRATUM_REQUIRE_POSTGRES=1` (CI sets it), no server is a failure.
pub async fn postgres() -> Option<TestDb> {
    let admin = pg_admin_url();
    let mut conn = match sqlx::PgConnection::connect(admin).await {
        Ok(c) => c,
        Err(e) => {
            let msg = format!(
                "\n!!! PostgreSQL at {} does not answer ({e}): the PostgreSQL half of this test DID NOT RUN.\n!!! Start it (see .ci/run) or set STRATUM_TEST_PG_URL.\n",
                redact_url(admin)
            );
            if std::env::var("STRATUM_REQUIRE_POSTGRES").as_deref() == Ok("1") {
                panic!("{msg}");
            }
            eprintln!("{msg}");
            return None;
        }
    };
    let name = format!("stratum_t_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    let base = admin.rsplit_once('/').map_or(admin, |(b, _)| b);
    Some(TestDb {
        url: format!("{base}/{name}"),
        backend: "postgres",
        _dir: None,
        pg_name: Some(name),
    })
}

/// A fresh database on every backend that answers.
pub async fn each_backend() -> Vec<TestDb> {
    let mut all = vec![sqlite()];
    all.extend(postgres().await);
    all
}

/// An event not yet positioned, for [`append_to_stream`].
#[derive(Clone, Debug)]
pub struct NewEvent {
    pub event_type: String,
    pub schema_version: u16,
    pub event_id: uuid::Uuid,
    pub occurred_at: chrono::DateTime<chrono::Utc>,
    pub meta: EventMeta,
    pub payload: Vec<u8>,
}

/// Positions, versions and hashes a run of new events after `head`.
pub fn seal(head: Head, stream_id: &str, version: u64, events: Vec<NewEvent>) -> Vec<Recorded> {
    let mut prev = head.hash;
    events
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let mut r = Recorded {
                position: head.position + 1 + i as u64,
                stream_id: stream_id.to_owned(),
                stream_version: version + 1 + i as u64,
                event_type: e.event_type,
                schema_version: e.schema_version,
                event_id: e.event_id,
                occurred_at: stratum_domain::log::log_precision(e.occurred_at),
                meta: e.meta,
                payload: e.payload,
                prev_hash: [0; 32],
                hash: [0; 32],
            };
            r.seal(prev);
            prev = r.hash;
            r
        })
        .collect()
}

/// Appends events to one stream if its version is `expected`, with no
/// decision and no read model change: how a test puts into a log what the
/// write path would refuse today (old or hostile bytes), and how the
/// store's own conformance is tried below the write path. The service has
/// one append path, the command bus; this is not it.
pub async fn append_to_stream(
    store: &dyn EventStore,
    stream_id: &str,
    expected: u64,
    events: Vec<NewEvent>,
) -> StoreResult<Vec<Recorded>> {
    let mut tx = store.begin_write().await?;
    let current = tx.stream_version(stream_id).await?;
    if current != expected {
        tx.rollback().await?;
        return Err(StoreError::Conflict(format!(
            "{stream_id} is at version {current}, not {expected}"
        )));
    }
    let records = seal(tx.head(), stream_id, expected, events);
    tx.append(&records).await?;
    tx.commit().await?;
    Ok(records)
}

/// Runs statements on a test database behind the store's back: how a test
/// changes what the store keeps, as an attacker or a broken disk would.
pub async fn tamper(db: &TestDb, sql: &str) {
    use sqlx::{Connection, Executor};
    if db.backend == "sqlite" {
        let mut c = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
        c.execute(sql).await.unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
        c.execute(sql).await.unwrap();
    }
}
