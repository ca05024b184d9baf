//! Test support of the service's tests and the replay tests (the `testing`
//! feature; the release binary never turns it on): the store's fresh
//! databases, a free port, promtool, and a store that counts what reaches
//! it and lets a test hold or fail its commits and hold its head and
//! replay reads.

use stratum_store as store;
pub use stratum_store::testing::{each_backend, free_port, postgres, sqlite, TestDb};

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
    observer: Option<Observer>,
    commits: Option<std::sync::Arc<dyn CommitHook>>,
    replay_reads: Option<ReplayReads>,
    heads: Option<Heads>,
}

/// Awaited before each `head`: a test holds the head checks there so
/// that requests pile up behind the one in flight.
type Heads = Box<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// Told the name of each method called of a [`CountingStore`].
type Observer = Box<dyn Fn(&'static str) + Send + Sync>;

/// Awaited before each `read_for_replay` (with its `after` and `false`)
/// and after it (`true`): a test holds a read there to order it against
/// others, or against what it writes meanwhile.
type ReplayReads = Box<dyn Fn(u64, bool) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// What a test does with each commit that reaches a [`CountingStore`]:
/// pass it on (`tx.commit()`), or hold it, roll it back, or report it
/// failed.
#[async_trait::async_trait]
pub trait CommitHook: Send + Sync {
    async fn commit(&self, tx: Box<dyn store::WriteTx>) -> store::StoreResult<()>;
}

/// A write transaction whose commit goes through a [`CommitHook`].
struct HookedTx {
    inner: Box<dyn store::WriteTx>,
    hook: std::sync::Arc<dyn CommitHook>,
}

#[async_trait::async_trait]
impl store::WriteTx for HookedTx {
    fn head(&self) -> store::Head {
        self.inner.head()
    }
    async fn clear_read_models(&mut self) -> store::StoreResult<()> {
        self.inner.clear_read_models().await
    }
    async fn events_after(
        &mut self,
        after: u64,
    ) -> store::StoreResult<Vec<stratum_domain::log::Recorded>> {
        self.inner.events_after(after).await
    }
    async fn stream_version(&mut self, stream_id: &str) -> store::StoreResult<u64> {
        self.inner.stream_version(stream_id).await
    }
    async fn idempotency(
        &mut self,
        principal: &str,
        key: &str,
    ) -> store::StoreResult<Option<store::IdempotencyRecord>> {
        self.inner.idempotency(principal, key).await
    }
    async fn append(&mut self, events: &[stratum_domain::log::Recorded]) -> store::StoreResult<()> {
        self.inner.append(events).await
    }
    async fn write_changes(
        &mut self,
        changes: &stratum_projections::Changes,
        checkpoint: u64,
    ) -> store::StoreResult<()> {
        self.inner.write_changes(changes, checkpoint).await
    }
    async fn put_idempotency(
        &mut self,
        records: &[store::IdempotencyRecord],
    ) -> store::StoreResult<()> {
        self.inner.put_idempotency(records).await
    }
    async fn replace_tree(
        &mut self,
        rows: &[stratum_domain::tree::TreeRow],
    ) -> store::StoreResult<()> {
        self.inner.replace_tree(rows).await
    }
    async fn commit(self: Box<Self>) -> store::StoreResult<()> {
        self.hook.commit(self.inner).await
    }
    async fn rollback(self: Box<Self>) -> store::StoreResult<()> {
        self.inner.rollback().await
    }
}

impl CountingStore {
    pub fn new(inner: std::sync::Arc<dyn store::EventStore>) -> Self {
        Self {
            inner,
            calls: Default::default(),
            observer: None,
            commits: None,
            replay_reads: None,
            heads: None,
        }
    }

    /// Has each `head` await `hook()` before it reads the head.
    pub fn heading_through(
        mut self,
        hook: impl Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> Self {
        self.heads = Some(Box::new(hook));
        self
    }

    /// Has each `read_for_replay` await `hook(after, false)` before it
    /// reads and `hook(after, true)` after.
    pub fn reading_for_replay_through(
        mut self,
        hook: impl Fn(u64, bool) -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> Self {
        self.replay_reads = Some(Box::new(hook));
        self
    }

    /// Tells `observer` of each call as it is made.
    pub fn observed(mut self, observer: impl Fn(&'static str) + Send + Sync + 'static) -> Self {
        self.observer = Some(Box::new(observer));
        self
    }

    /// Has every commit go through `hook`.
    pub fn committing_through(mut self, hook: std::sync::Arc<dyn CommitHook>) -> Self {
        self.commits = Some(hook);
        self
    }

    /// `tx`, its commit through the hook if there is one.
    fn hooked(&self, tx: Box<dyn store::WriteTx>) -> Box<dyn store::WriteTx> {
        match &self.commits {
            Some(hook) => Box::new(HookedTx {
                inner: tx,
                hook: hook.clone(),
            }),
            None => tx,
        }
    }

    fn count(&self, method: &'static str) {
        if let Some(observer) = &self.observer {
            observer(method);
        }
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
        let tx = self.inner.begin_write().await?;
        Ok(self.hooked(tx))
    }
    async fn begin_write_at(
        &self,
        expected: store::Head,
    ) -> store::StoreResult<Box<dyn store::WriteTx>> {
        self.count("begin_write_at");
        let tx = self.inner.begin_write_at(expected).await?;
        Ok(self.hooked(tx))
    }
    fn defers_writes(&self) -> bool {
        self.inner.defers_writes()
    }
    async fn head(&self) -> store::StoreResult<store::Head> {
        self.count("head");
        if let Some(hook) = &self.heads {
            hook().await;
        }
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
    ) -> store::StoreResult<store::ReplayChunk> {
        self.count("read_for_replay");
        if let Some(hook) = &self.replay_reads {
            hook(after, false).await;
        }
        let chunk = self.inner.read_for_replay(after, limit).await;
        if let Some(hook) = &self.replay_reads {
            hook(after, true).await;
        }
        chunk
    }
    async fn read_for_verify(
        &self,
        after: u64,
        until: u64,
    ) -> store::StoreResult<store::VerifyChunk> {
        self.count("read_for_verify");
        self.inner.read_for_verify(after, until).await
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
    async fn other_version_rows(&self, limit: u32) -> store::StoreResult<Vec<(String, String)>> {
        self.count("other_version_rows");
        self.inner.other_version_rows(limit).await
    }
    async fn other_version_kinds(&self) -> store::StoreResult<Vec<String>> {
        self.count("other_version_kinds");
        self.inner.other_version_kinds().await
    }
    async fn ping(&self) -> store::StoreResult<()> {
        self.count("ping");
        self.inner.ping().await
    }
    async fn entries(&self, start: u64, end: u64) -> store::StoreResult<Vec<[u8; 32]>> {
        self.count("entries");
        self.inner.entries(start, end).await
    }
    async fn tree_rows(
        &self,
        level: u8,
        start: u64,
        end: u64,
    ) -> store::StoreResult<Vec<[u8; 32]>> {
        self.count("tree_rows");
        self.inner.tree_rows(level, start, end).await
    }
    async fn signed_checkpoint(&self) -> store::StoreResult<Option<store::SignedCheckpoint>> {
        self.count("signed_checkpoint");
        self.inner.signed_checkpoint().await
    }
    async fn put_signed_checkpoint(
        &self,
        c: &store::SignedCheckpoint,
        replaces: Option<[u8; 32]>,
    ) -> store::StoreResult<()> {
        self.count("put_signed_checkpoint");
        self.inner.put_signed_checkpoint(c, replaces).await
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

    async fn register_replica(&self, row: &store::ReplicaRow) -> store::StoreResult<()> {
        self.count("register_replica");
        self.inner.register_replica(row).await
    }

    async fn replica_heartbeat(&self, id: &str) -> store::StoreResult<bool> {
        self.count("replica_heartbeat");
        self.inner.replica_heartbeat(id).await
    }

    async fn replica_stopped(&self, id: &str) -> store::StoreResult<()> {
        self.count("replica_stopped");
        self.inner.replica_stopped(id).await
    }

    async fn replicas(&self) -> store::StoreResult<store::Replicas> {
        self.count("replicas");
        self.inner.replicas().await
    }

    async fn unregistered_clients(&self) -> store::StoreResult<Vec<String>> {
        self.inner.unregistered_clients().await
    }
}
