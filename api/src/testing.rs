//! Test support shared by the service's tests and the replay tests: a
//! fresh database per test on each backend.
//!
//! PostgreSQL comes from `STRATUM_TEST_PG_URL` (default the local server on
//! 127.0.0.1:5432), or else from a throwaway cluster this process starts
//! when the machine has PostgreSQL's binaries. With
//! `STRATUM_REQUIRE_POSTGRES=1` no server is a failure, never a skip.

use std::sync::OnceLock;

use sqlx::Connection;

use crate::store;

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
                    store::redact_url(&url)
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
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
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
                store::redact_url(admin)
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

/// Holds Prometheus text to the exposition format with `promtool check
/// metrics`. Where `STRATUM_REQUIRE_PROMTOOL=1` (CI sets it), a missing
/// promtool is a failure; elsewhere the check says loudly it did not run.
pub fn promtool_check(text: &str) {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var("STRATUM_REQUIRE_PROMTOOL").as_deref() != Ok("1"),
                "promtool is required here (STRATUM_REQUIRE_PROMTOOL=1): {e}"
            );
            eprintln!("\n!!! promtool is not installed: the exposition format was NOT checked\n");
            return;
        }
    };
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(text.as_bytes())
        .expect("promtool reads its input");
    let out = child.wait_with_output().expect("promtool ran");
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A store that counts the calls made of it, by method, and passes each
/// on: how a test sees which reads reach the database.
pub struct CountingStore {
    inner: std::sync::Arc<dyn store::EventStore>,
    calls: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl CountingStore {
    pub fn new(inner: std::sync::Arc<dyn store::EventStore>) -> Self {
        Self {
            inner,
            calls: Default::default(),
        }
    }

    fn count(&self, method: &'static str) {
        *self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(method)
            .or_default() += 1;
    }

    /// The calls so far, by method, and forgets them.
    pub fn take(&self) -> std::collections::BTreeMap<&'static str, u64> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[async_trait::async_trait]
impl store::EventStore for CountingStore {
    async fn begin_write(&self) -> store::StoreResult<Box<dyn store::WriteTx>> {
        self.count("begin_write");
        self.inner.begin_write().await
    }
    async fn head(&self) -> store::StoreResult<store::Head> {
        self.count("head");
        self.inner.head().await
    }
    async fn read_after(
        &self,
        after: u64,
        limit: u32,
    ) -> store::StoreResult<Vec<stratum_domain::log::Recorded>> {
        self.count("read_after");
        self.inner.read_after(after, limit).await
    }
    async fn read_for_replay(
        &self,
        after: u64,
        limit: u32,
    ) -> store::StoreResult<Vec<store::ReplayEvent>> {
        self.count("read_for_replay");
        self.inner.read_for_replay(after, limit).await
    }
    async fn read_stream(
        &self,
        stream_id: &str,
    ) -> store::StoreResult<Vec<stratum_domain::log::Recorded>> {
        self.count("read_stream");
        self.inner.read_stream(stream_id).await
    }
    async fn read_stream_page(
        &self,
        stream_id: &str,
        after: u64,
        limit: u32,
    ) -> store::StoreResult<Vec<stratum_domain::log::Recorded>> {
        self.count("read_stream_page");
        self.inner.read_stream_page(stream_id, after, limit).await
    }
    async fn token_docs(&self) -> store::StoreResult<Vec<(String, String)>> {
        self.count("token_docs");
        self.inner.token_docs().await
    }
    async fn cluster_row(&self) -> store::StoreResult<(u64, u64)> {
        self.count("cluster_row");
        self.inner.cluster_row().await
    }
    async fn idempotency(
        &self,
        principal: &str,
        key: &str,
    ) -> store::StoreResult<Option<store::IdempotencyRecord>> {
        self.count("idempotency");
        self.inner.idempotency(principal, key).await
    }
    async fn read_models(&self) -> store::StoreResult<store::StoredReadModels> {
        self.count("read_models");
        self.inner.read_models().await
    }
    async fn ping(&self) -> store::StoreResult<()> {
        self.count("ping");
        self.inner.ping().await
    }
    fn pool_stats(&self) -> Option<(u32, u32)> {
        self.inner.pool_stats()
    }
    async fn put_snapshot(&self, position: u64, state: &[u8]) -> store::StoreResult<()> {
        self.count("put_snapshot");
        self.inner.put_snapshot(position, state).await
    }
    async fn snapshot_at_or_before(
        &self,
        position: u64,
    ) -> store::StoreResult<Option<(u64, Vec<u8>)>> {
        self.count("snapshot_at_or_before");
        self.inner.snapshot_at_or_before(position).await
    }
    async fn try_lead(&self, key: i64) -> store::StoreResult<Option<store::Leadership>> {
        self.count("try_lead");
        self.inner.try_lead(key).await
    }
    async fn subscribe(
        &self,
    ) -> store::StoreResult<Option<tokio::sync::mpsc::UnboundedReceiver<u64>>> {
        self.count("subscribe");
        self.inner.subscribe().await
    }
}
