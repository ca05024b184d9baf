//! The one write path. A command is decided against the state of the whole
//! log, its events are appended with their expected stream versions, and the
//! read models they change are written in the same transaction.
//!
//! One writer task per process owns the decision state ([`ReadModels`]).
//! Commands queue to it and it takes them in batches: every command of a
//! batch is decided in turn (each seeing the events of the ones before),
//! and the whole batch is committed at once, so concurrent commands share
//! one commit (group commit) instead of each paying for an fsync. Under the
//! log's write lock the writer first folds in whatever other processes
//! appended since it last wrote, so its state is the log's state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use chrono::Utc;
use serde_json::Value;
use sha2::{Digest, Sha256};
use stratum_domain::iam::principal_stream;
use stratum_domain::log::{log_precision, EventMeta, Recorded};
use stratum_domain::state::EventCtx;
use stratum_domain::state::{stream_of, Subject};
use stratum_domain::stored::{decode, encode};
use stratum_domain::{Command, CommandContext, ErrorCode, FieldError, Refusal};
use stratum_projections::iam::{policy_record, principal_record};
use stratum_projections::upgrades::{release_record, running_release_record, upgrade_record};
use stratum_projections::{member_record, token_record, JoinRequestRecord, ReadModels};
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tracing::Instrument;
use uuid::Uuid;

use stratum_store::{EventStore, IdempotencyRecord, StoreError, StoreResult, WriteTx, READ_CHUNK};

/// Why the write path could not answer a command: never a business
/// refusal (that is [`Outcome::Refused`]), always something around it.
/// Transport-neutral: `http` maps it to a status and a body.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CommandError {
    /// The store did not take the write; nothing of it was stored.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The writer task is gone (the service is stopping).
    #[error("the writer has stopped")]
    Stopped,
    /// The read models could not reach a position of the log in time.
    #[error("This server's read models are at position {at} and could not reach the log's {wanted} within {}s; retry, or ask another replica.", waited.as_secs())]
    Behind {
        at: u64,
        wanted: u64,
        waited: std::time::Duration,
    },
}

/// The most commands one commit carries.
const MAX_BATCH: usize = 512;
/// How often a batch is decided again after losing a race on the log.
const MAX_ATTEMPTS: usize = 3;

/// How long a read waits for the read models to reach the log's head
/// before it is answered 503 (the writer retries the fold meanwhile).
const FOLLOW_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// An `Idempotency-Key`, scoped to the route it came with, and the hash
/// of the request's body. Keys are the caller's: the store keeps them per
/// principal (as Stripe and the IETF Idempotency-Key draft do), and here
/// per method and path too, so one key on two routes is two keys.
#[derive(Clone, Debug)]
pub struct IdempotencyKey {
    /// `<METHOD> <path> <key>`.
    pub key: String,
    pub request_hash: Vec<u8>,
}

impl IdempotencyKey {
    /// The body is compared as parsed JSON: another key order or spacing
    /// is the same request. A body that is not JSON is compared as bytes.
    pub fn new(key: String, method: &str, path: &str, body: &[u8]) -> Self {
        let canonical = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| serde_json_canonicalizer::to_vec(&v).ok());
        let mut h = Sha256::new();
        h.update(canonical.as_deref().unwrap_or(body));
        Self {
            key: format!("{method} {path} {key}"),
            request_hash: h.finalize().to_vec(),
        }
    }
}

/// A command with everything the write path needs besides the state.
#[derive(Clone, Debug)]
pub struct CommandRequest {
    pub command: Command,
    pub meta: EventMeta,
    /// `If-Match`: the version the addressed stream must be at.
    pub if_match: Option<u64>,
    pub idempotency: Option<IdempotencyKey>,
    /// Whether carrying it out creates what it names (HTTP answers 201).
    pub creates: bool,
    /// Problems found while reading the request (unknown fields, wrong
    /// types): the command is only validated, never committed, and the
    /// answer lists these with the domain's own findings.
    pub input_errors: Vec<FieldError>,
    /// The policies the caller holds; `None` for the service itself and the
    /// host's operator.
    pub held_policies: Option<Vec<String>>,
}

impl CommandRequest {
    pub fn new(command: Command, principal: impl Into<String>) -> Self {
        Self {
            command,
            meta: EventMeta {
                principal: principal.into(),
                ..Default::default()
            },
            if_match: None,
            idempotency: None,
            creates: false,
            input_errors: Vec::new(),
            held_policies: None,
        }
    }
}

/// What the write path answers a command: carried out (or found carried
/// out before, for a retried `Idempotency-Key`), or refused by the domain.
/// Only `http` turns it into a status.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Committed(Committed),
    Refused(Refusal),
}

/// A command carried out, and the record its answer shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Committed {
    /// What the answer shows; `None` for a kept answer given again.
    pub subject: Option<Subject>,
    /// The record as JSON, rendered once, in the writer.
    pub body: String,
    /// The version of the record shown, for `ETag`.
    pub etag: Option<u64>,
    /// The position of the last event this command appended, if any.
    pub position: Option<u64>,
    /// Whether it created what it names.
    pub created: bool,
    /// Whether this is a kept answer to a retried `Idempotency-Key`.
    pub replayed: bool,
}

impl Committed {
    /// The body parsed, for callers that inspect it.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

impl Outcome {
    /// The committed answer, or the refusal.
    pub fn committed(self) -> Result<Committed, Refusal> {
        match self {
            Outcome::Committed(c) => Ok(c),
            Outcome::Refused(r) => Err(r),
        }
    }
}

/// Whether an upgrade driver step is due, as this process's writer last saw
/// the log: the upgrade, and the position it was judged at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpgradeDue {
    pub upgrade: Option<String>,
    pub at: u64,
    /// Whether an upgrade is active (its time-driven steps are asked for).
    pub active: bool,
    /// When a time-driven step of the active upgrade falls due next.
    pub wake_at: Option<chrono::DateTime<Utc>>,
}

impl UpgradeDue {
    fn of(rm: &ReadModels, now: chrono::DateTime<Utc>) -> Self {
        Self {
            upgrade: rm.state.upgrade_step_due(now).map(str::to_owned),
            at: rm.state.position,
            active: rm.state.upgrades.active.is_some(),
            wake_at: rm.state.upgrade_wake_at(now),
        }
    }
}

struct Job {
    req: CommandRequest,
    reply: oneshot::Sender<Result<Outcome, CommandError>>,
}

/// Where the write path reads the time from: the wall clock, or a clock a
/// test moves. Time enters the domain only with a command.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> chrono::DateTime<Utc> + Send + Sync>);

impl Clock {
    pub fn system() -> Self {
        Self(Arc::new(Utc::now))
    }

    /// A clock that answers whatever `now` answers (tests move it).
    pub fn from_fn(now: impl Fn() -> chrono::DateTime<Utc> + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    pub fn now(&self) -> chrono::DateTime<Utc> {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

/// The handle every part of the service submits commands through, and
/// where it reads the read models the writer published.
#[derive(Clone)]
pub struct CommandBus {
    jobs: mpsc::Sender<Job>,
    head: watch::Sender<u64>,
    upgrade_due: watch::Sender<UpgradeDue>,
    published: watch::Receiver<Arc<ReadModels>>,
    /// Asks the writer to fold in what other processes committed.
    follow: Arc<Notify>,
    /// The newest position a reader waits for or another process
    /// announced: the writer folds only when it is behind this.
    wanted: Arc<AtomicU64>,
    clock: Clock,
}

impl CommandBus {
    /// Loads the log and starts the writer task, on the wall clock.
    pub async fn start(store: Arc<dyn EventStore>) -> StoreResult<Self> {
        Self::start_with(store, Clock::system()).await
    }

    /// Loads the log and starts the writer task, reading time from `clock`.
    pub async fn start_with(store: Arc<dyn EventStore>, clock: Clock) -> StoreResult<Self> {
        let rm = reload(&store).await?;
        let writer_clock = clock.clone();
        let (head, _) = watch::channel(rm.state.position);
        let (upgrade_due, _) = watch::channel(UpgradeDue::of(&rm, clock.now()));
        let (jobs, rx) = mpsc::channel(4096);
        let rm_position = rm.state.position;
        let (publish, published) = watch::channel(Arc::new(rm.clone()));
        let follow = Arc::new(Notify::new());
        let wanted = Arc::new(AtomicU64::new(rm_position));
        let writer = Writer {
            store,
            clock,
            rm,
            reload: false,
            head: head.clone(),
            upgrade_due: upgrade_due.clone(),
            publish,
            follow: follow.clone(),
            wanted: wanted.clone(),
            snapshot_at: rm_position,
            snapshotting: Default::default(),
        };
        tokio::spawn(writer.run(rx).instrument(tracing::info_span!("writer")));
        Ok(Self {
            jobs,
            head,
            upgrade_due,
            published,
            follow,
            wanted,
            clock: writer_clock,
        })
    }

    /// The read models as the writer last published them: immutable, and
    /// never ahead of the log (published after each commit, and after
    /// folding in what other processes committed).
    pub fn published(&self) -> Arc<ReadModels> {
        self.published.borrow().clone()
    }

    /// The published read models once they include position `p`: the
    /// writer is asked to fold in what other processes committed, and
    /// this waits until it has.
    pub async fn reached(&self, p: u64) -> Result<Arc<ReadModels>, CommandError> {
        let mut rx = self.published.clone();
        let deadline = tokio::time::Instant::now() + FOLLOW_WAIT;
        loop {
            let at = {
                let rm = rx.borrow_and_update();
                if rm.state.position >= p {
                    return Ok(rm.clone());
                }
                rm.state.position
            };
            self.wanted.fetch_max(p, Ordering::AcqRel);
            self.follow.notify_one();
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(CommandError::Stopped),
                Err(_) => {
                    return Err(CommandError::Behind {
                        at,
                        wanted: p,
                        waited: FOLLOW_WAIT,
                    })
                }
            }
        }
    }

    /// Every publication of the read models, for watchers.
    pub fn publications(&self) -> watch::Receiver<Arc<ReadModels>> {
        self.published.clone()
    }

    /// Decides and commits one command. A command whose request had
    /// input errors is only validated, against the published read models,
    /// without the writer or the log's lock: it is never committed.
    pub async fn execute(&self, req: CommandRequest) -> Result<Outcome, CommandError> {
        if !req.input_errors.is_empty() {
            let rm = self.published();
            if let Some(refusal) = if_match_refusal(&rm, &req) {
                return Ok(Outcome::Refused(refusal));
            }
            let decided = rm.state.decide(&req.command, &context(&self.clock, &req));
            return Ok(Outcome::Refused(merge_input_errors(
                &req.input_errors,
                decided,
            )));
        }
        let (reply, rx) = oneshot::channel();
        self.jobs
            .send(Job { req, reply })
            .await
            .map_err(|_| CommandError::Stopped)?;
        rx.await.map_err(|_| CommandError::Stopped)?
    }

    /// The last committed position this process knows of.
    pub fn head(&self) -> watch::Receiver<u64> {
        self.head.subscribe()
    }

    /// The upgrade whose driver step is due, as of this process's last
    /// write: what the upgrade driver watches.
    pub fn upgrade_due(&self) -> watch::Receiver<UpgradeDue> {
        self.upgrade_due.subscribe()
    }

    /// The time as the write path reads it.
    pub fn now(&self) -> chrono::DateTime<Utc> {
        self.clock.now()
    }

    /// Tells watchers the log reached `position` (another replica wrote),
    /// and has the writer fold in what it has not seen.
    pub fn observe_head(&self, position: u64) {
        raise(&self.head, position);
        if self.published.borrow().state.position < position {
            self.wanted.fetch_max(position, Ordering::AcqRel);
            self.follow.notify_one();
        }
    }
}

fn raise(head: &watch::Sender<u64>, position: u64) {
    head.send_if_modified(|h| {
        let newer = position > *h;
        if newer {
            *h = position;
        }
        newer
    });
}

/// The read models as the log stands: from the newest snapshot, then the
/// events after it.
async fn reload(store: &Arc<dyn EventStore>) -> StoreResult<ReadModels> {
    let head = store.head().await?.position;
    state_at(store.clone(), head).await
}

/// Folds the log (up to `until`, or all of it) into fresh read models. One
/// task reads the next chunk while this one folds the last.
pub async fn load(store: Arc<dyn EventStore>, until: Option<u64>) -> StoreResult<ReadModels> {
    replay(store, until, |_| {}).await
}

/// [`load`], telling `progress` the position reached after each chunk.
pub async fn replay(
    store: Arc<dyn EventStore>,
    until: Option<u64>,
    progress: impl FnMut(u64) + Send + 'static,
) -> StoreResult<ReadModels> {
    replay_onto(store, ReadModels::default(), until, progress).await
}

/// How far a time-travel read may replay before it keeps a snapshot of
/// where it arrived.
pub const SNAPSHOT_DISTANCE: u64 = 10_000;

/// The read models as they stood right after position `p`: from the newest
/// snapshot at or before `p` (a cache; one of another format is ignored),
/// then replaying the rest. When that replay was long, the result is kept
/// as a snapshot for the next reader.
pub async fn state_at(store: Arc<dyn EventStore>, p: u64) -> StoreResult<ReadModels> {
    state_at_with(store, p, SNAPSHOT_DISTANCE).await
}

pub async fn state_at_with(
    store: Arc<dyn EventStore>,
    p: u64,
    snapshot_distance: u64,
) -> StoreResult<ReadModels> {
    // Decoding and encoding a snapshot is CPU work: off the async workers.
    let start = match store.snapshot_at_or_before(p).await? {
        Some((at, bytes)) => {
            let decoded = tokio::task::spawn_blocking(move || ReadModels::from_snapshot(&bytes))
                .await
                .ok()
                .flatten();
            decoded
                .filter(|rm| rm.state.position == at)
                .unwrap_or_else(|| {
                    tracing::info!(position = at, "ignoring a snapshot of another format");
                    ReadModels::default()
                })
        }
        None => ReadModels::default(),
    };
    let from = start.state.position;
    let rm = replay_onto(store.clone(), start, Some(p), |_| {}).await?;
    if rm.state.position - from < snapshot_distance {
        return Ok(rm);
    }
    let rm = Arc::new(rm);
    let kept = rm.clone();
    if let Ok(bytes) = tokio::task::spawn_blocking(move || kept.snapshot()).await {
        if let Err(e) = store.put_snapshot(rm.state.position, &bytes).await {
            tracing::warn!(error = %e, "could not keep a snapshot; time travel stays correct, only slower");
        }
    }
    Ok(Arc::try_unwrap(rm).unwrap_or_else(|rm| (*rm).clone()))
}

/// Folds the log after `rm`'s position (up to `until`) into `rm`.
async fn replay_onto(
    store: Arc<dyn EventStore>,
    mut rm: ReadModels,
    until: Option<u64>,
    mut progress: impl FnMut(u64) + Send + 'static,
) -> StoreResult<ReadModels> {
    let start = rm.state.position;
    let (tx, mut rx) = mpsc::channel(2);
    let reader = tokio::spawn(async move {
        let mut after = start;
        if until.is_some_and(|u| u <= after) {
            return;
        }
        loop {
            let chunk = store.read_for_replay(after, READ_CHUNK).await;
            let next = match &chunk {
                Ok(c) => c.last().map(|e| e.position),
                Err(_) => None,
            };
            let done = next.is_none() || until.is_some_and(|u| next >= Some(u));
            if tx.send(chunk).await.is_err() || done {
                return;
            }
            after = next.unwrap_or(after);
        }
    });
    // The fold is CPU work: it runs on a blocking thread, never on the
    // async workers that answer requests, while the reader fetches ahead.
    let folded = tokio::task::spawn_blocking(move || -> StoreResult<ReadModels> {
        rm.set_tracking(false);
        'chunks: while let Some(chunk) = rx.blocking_recv() {
            let chunk = chunk?;
            for e in &chunk {
                if until.is_some_and(|u| e.position > u) {
                    break 'chunks;
                }
                let event = decode(&e.event_type, e.schema_version, &e.payload).map_err(|err| {
                    StoreError::Corrupt(format!("position {}: {err}", e.position))
                })?;
                let ctx = EventCtx {
                    position: e.position,
                    stream_version: e.stream_version,
                    occurred_at: e.occurred_at,
                    principal: &e.principal,
                };
                rm.apply_at(&ctx, &e.stream_id, &event);
            }
            if let Some(last) = chunk.last() {
                progress(last.position);
            }
        }
        rm.set_tracking(true);
        Ok(rm)
    })
    .await
    .map_err(|e| StoreError::Unavailable(format!("the fold stopped: {e}")));
    reader.abort();
    folded?
}

struct Writer {
    store: Arc<dyn EventStore>,
    clock: Clock,
    rm: ReadModels,
    /// The in-memory state may be ahead of the log (a failed commit).
    reload: bool,
    head: watch::Sender<u64>,
    upgrade_due: watch::Sender<UpgradeDue>,
    publish: watch::Sender<Arc<ReadModels>>,
    follow: Arc<Notify>,
    wanted: Arc<AtomicU64>,
    /// The position of the newest snapshot this writer kept (or started
    /// from).
    snapshot_at: u64,
    /// Whether a snapshot is being written: one at a time.
    snapshotting: Arc<AtomicBool>,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Job>) {
        loop {
            tokio::select! {
                biased;
                first = rx.recv() => {
                    let Some(first) = first else { return };
                    let mut jobs = vec![first];
                    while jobs.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok(j) => jobs.push(j),
                            Err(_) => break,
                        }
                    }
                    self.process(jobs).await;
                }
                () = self.follow.notified() => self.follow_log().await,
            }
        }
    }

    /// Folds in, without the write lock, what other processes committed
    /// since this writer last saw the log, and publishes the result. Commit
    /// order is position order, so what it reads has no gaps.
    async fn follow_log(&mut self) {
        // A reader that saw this writer's own commit before it was
        // published asked for nothing the writer does not have now.
        if !self.reload && self.rm.state.position >= self.wanted.load(Ordering::Acquire) {
            return;
        }
        let followed = async {
            if self.reload {
                self.rm = reload(&self.store).await?;
                self.reload = false;
            }
            loop {
                let events = self
                    .store
                    .read_after(self.rm.state.position, READ_CHUNK)
                    .await?;
                for e in &events {
                    if let Err(err) = self.rm.apply_recorded(e) {
                        self.reload = true;
                        return Err(StoreError::Corrupt(format!(
                            "position {}: {err}",
                            e.position
                        )));
                    }
                }
                self.rm.discard_changes();
                if events.is_empty() {
                    return Ok(());
                }
            }
        }
        .await;
        match followed {
            Ok(()) => self.published_now(),
            Err(e) => {
                tracing::warn!(error = %e, "could not follow the log; trying again in a second");
                // Readers waiting for the fold ask again; so does this.
                let follow = self.follow.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    follow.notify_one();
                });
            }
        }
    }

    /// Publishes the read models as they stand (committed: never called
    /// while the state may run ahead of the log), and tells watchers. Every
    /// [`SNAPSHOT_DISTANCE`] events it keeps a snapshot of what it
    /// published, serialized off the async workers and without a copy, so a
    /// restart folds only the events after it.
    fn published_now(&mut self) {
        let at = self.rm.state.position;
        self.publish.send_if_modified(|p| {
            let newer = p.state.position < at;
            if newer {
                *p = Arc::new(self.rm.clone());
            }
            newer
        });
        let idle = !self.snapshotting.load(Ordering::Acquire);
        if at >= self.snapshot_at + SNAPSHOT_DISTANCE && idle {
            self.snapshot_at = at;
            self.snapshotting.store(true, Ordering::Release);
            let rm = self.publish.borrow().clone();
            let store = self.store.clone();
            let busy = self.snapshotting.clone();
            tokio::spawn(async move {
                let position = rm.state.position;
                if let Ok(bytes) = tokio::task::spawn_blocking(move || rm.snapshot()).await {
                    if let Err(e) = store.put_snapshot(position, &bytes).await {
                        tracing::warn!(error = %e, "could not keep a snapshot; a restart replays more");
                    }
                }
                busy.store(false, Ordering::Release);
            });
        }
        raise(&self.head, at);
        let due = UpgradeDue::of(&self.rm, self.clock.now());
        self.upgrade_due.send_if_modified(|d| {
            let changed = *d != due;
            *d = due;
            changed
        });
    }

    async fn process(&mut self, jobs: Vec<Job>) {
        let reqs: Vec<&CommandRequest> = jobs.iter().map(|j| &j.req).collect();
        let mut attempt = 1;
        let result = loop {
            match self.try_batch(&reqs).await {
                Err(StoreError::Conflict(why)) if attempt < MAX_ATTEMPTS => {
                    tracing::info!(%why, attempt, "lost a race on the log; deciding again");
                    attempt += 1;
                }
                other => break other,
            }
        };
        match result {
            Ok(replies) => {
                for (job, reply) in jobs.into_iter().zip(replies) {
                    let _ = job.reply.send(reply);
                }
            }
            Err(e) => {
                let err = CommandError::from(e);
                for job in jobs {
                    let _ = job.reply.send(Err(err.clone()));
                }
            }
        }
    }

    async fn try_batch(
        &mut self,
        reqs: &[&CommandRequest],
    ) -> StoreResult<Vec<Result<Outcome, CommandError>>> {
        if self.reload {
            self.rm = reload(&self.store).await?;
            self.reload = false;
        }
        let began = std::time::Instant::now();
        let mut tx = self.store.begin_write().await?;
        let head = tx.head();
        // From here until the commit the state may run ahead of the log.
        self.reload = true;
        if let Err(e) = self.catch_up(&mut *tx, head.position).await {
            let _ = tx.rollback().await;
            return Err(e);
        }
        let mut batch = Batch {
            prev_hash: head.hash,
            position: head.position,
            ..Default::default()
        };
        let mut replies = Vec::with_capacity(reqs.len());
        for req in reqs {
            let reply = match self.one(&mut *tx, &mut batch, req).await {
                Ok(r) => Ok(r),
                Err(e) => {
                    let _ = tx.rollback().await;
                    return Err(e);
                }
            };
            replies.push(reply);
        }
        if batch.events.is_empty() && batch.kept.is_empty() {
            tx.rollback().await?;
        } else {
            let changes = self.rm.take_changes();
            let written = async {
                tx.append(&batch.events).await?;
                tx.write_changes(&changes, batch.position).await?;
                tx.put_idempotency(&batch.kept).await
            }
            .await;
            if let Err(e) = written {
                let _ = tx.rollback().await;
                return Err(e);
            }
            tx.commit().await?;
            let m = crate::metrics::global();
            m.batch_commands.observe(reqs.len() as f64);
            m.commit_duration.observe(began.elapsed().as_secs_f64());
        }
        self.reload = false;
        // Published before any answer is sent: whoever saw the answer
        // reads what it committed.
        self.published_now();
        Ok(replies)
    }

    /// Folds in what other writers appended since this one last wrote.
    async fn catch_up(&mut self, tx: &mut dyn WriteTx, head: u64) -> StoreResult<()> {
        let at = self.rm.state.position;
        if head < at {
            return Err(StoreError::Corrupt(format!(
                "the log's head {head} is behind this writer's position {at}"
            )));
        }
        if head > at {
            for e in tx.events_after(at).await? {
                self.rm.apply_recorded(&e).map_err(|err| {
                    StoreError::Corrupt(format!("position {}: {err}", e.position))
                })?;
            }
            self.rm.discard_changes();
        }
        Ok(())
    }

    /// Decides one command into the batch; its answer is known before commit.
    async fn one(
        &mut self,
        tx: &mut dyn WriteTx,
        batch: &mut Batch,
        req: &CommandRequest,
    ) -> StoreResult<Outcome> {
        if let Some(idem) = &req.idempotency {
            let principal = &req.meta.principal;
            let kept = match batch.keys.get(&(principal.clone(), idem.key.clone())) {
                Some(i) => Some(batch.kept[*i].clone()),
                None => tx.idempotency(principal, &idem.key).await?,
            };
            if let Some(kept) = kept {
                return Ok(replay_kept(&kept, idem));
            }
        }
        let outcome = self.decide(batch, req);
        // Only answers of commands that were carried out are kept: a refusal
        // appended nothing, so a retry with the same key is decided again
        // (a 503 during an upgrade's write freeze must not stick to the key).
        if let (Some(idem), Outcome::Committed(reply)) = (&req.idempotency, &outcome) {
            // Answers the state decided are kept; a retry gets them again.
            batch.keys.insert(
                (req.meta.principal.clone(), idem.key.clone()),
                batch.kept.len(),
            );
            batch.kept.push(IdempotencyRecord {
                principal: req.meta.principal.clone(),
                key: idem.key.clone(),
                request_hash: idem.request_hash.clone(),
                status: if reply.created { 201 } else { 200 },
                body: reply.body.clone(),
                etag: reply.etag,
                position: reply.position.unwrap_or(batch.position),
            });
        }
        Ok(outcome)
    }

    fn decide(&mut self, batch: &mut Batch, req: &CommandRequest) -> Outcome {
        if let Some(refusal) = if_match_refusal(&self.rm, req) {
            return Outcome::Refused(refusal);
        }
        let ctx = context(&self.clock, req);
        let decision = match self.rm.state.decide(&req.command, &ctx) {
            Ok(d) => d,
            Err(refusal) => return Outcome::Refused(refusal),
        };
        let mut last = None;
        for event in &decision.events {
            let stream_id = stream_of(event);
            let enc = encode(event);
            let mut rec = Recorded {
                position: batch.position + 1,
                stream_version: self.rm.state.stream_version(&stream_id) + 1,
                stream_id,
                event_type: enc.event_type.to_owned(),
                schema_version: enc.schema_version,
                event_id: Uuid::now_v7(),
                occurred_at: ctx.now,
                meta: req.meta.clone(),
                payload: enc.payload,
                prev_hash: [0; 32],
                hash: [0; 32],
            };
            rec.seal(batch.prev_hash);
            self.rm.apply(&rec, event);
            batch.position = rec.position;
            batch.prev_hash = rec.hash;
            last = Some(rec.position);
            batch.events.push(rec);
        }
        let (body, etag) = render(&self.rm, &decision.subject);
        Outcome::Committed(Committed {
            subject: Some(decision.subject),
            body,
            etag,
            position: last,
            created: req.creates,
            replayed: false,
        })
    }
}

/// What the domain decides a request with: the time, who asks, what they hold.
fn context(clock: &Clock, req: &CommandRequest) -> CommandContext {
    CommandContext {
        now: log_precision(clock.now()),
        principal: req.meta.principal.clone(),
        held_policies: req.held_policies.clone(),
    }
}

/// `If-Match`, as the domain holds it (412 when the stream moved on).
fn if_match_refusal(rm: &ReadModels, req: &CommandRequest) -> Option<Refusal> {
    let expected = req.if_match?;
    rm.state
        .expect_version(&req.command.stream_id(), expected)
        .err()
}

#[derive(Default)]
struct Batch {
    events: Vec<Recorded>,
    kept: Vec<IdempotencyRecord>,
    keys: HashMap<(String, String), usize>,
    position: u64,
    prev_hash: [u8; 32],
}

/// The reading errors of a request with the domain's findings on the other
/// fields, so one answer names every bad field.
fn merge_input_errors(
    input: &[FieldError],
    decided: Result<stratum_domain::Decision, Refusal>,
) -> Refusal {
    let mut all = input.to_vec();
    if let Err(r) = decided {
        if r.code == ErrorCode::InvalidInput {
            all.extend(
                r.field_errors
                    .into_iter()
                    .filter(|f| !input.iter().any(|i| i.field == f.field)),
            );
        }
    }
    Refusal::invalid(all)
}

fn replay_kept(kept: &IdempotencyRecord, idem: &IdempotencyKey) -> Outcome {
    if kept.request_hash != idem.request_hash {
        return Outcome::Refused(Refusal::new(
            ErrorCode::IdempotencyKeyReused,
            "This Idempotency-Key was used with a different request.",
        ));
    }
    Outcome::Committed(Committed {
        subject: None,
        body: kept.body.clone(),
        etag: kept.etag,
        position: None,
        created: kept.status == 201,
        replayed: true,
    })
}

/// The record a command's answer shows, as JSON text, and its version.
fn render(rm: &ReadModels, subject: &Subject) -> (String, Option<u64>) {
    fn json<T: serde::Serialize>(v: &T) -> String {
        serde_json::to_string(v).expect("records serialize")
    }
    let m = &rm.state.membership;
    let found = match subject {
        Subject::Member(id) => m.members.get(id).map(|member| {
            (
                json(&member_record(member, Some(m.generation))),
                member.version,
            )
        }),
        Subject::JoinRequest(id) => m
            .join_requests
            .get(id)
            .map(|r| (json(&JoinRequestRecord::from(r)), r.version)),
        Subject::Token(id) => rm
            .state
            .iam
            .tokens
            .get(id)
            .map(|t| (json(&token_record(t)), 1)),
        Subject::Upgrade(id) => rm
            .state
            .upgrades
            .upgrades
            .get(id)
            .map(|u| (json(&upgrade_record(u)), u.version)),
        Subject::Release(v) => rm
            .state
            .upgrades
            .releases
            .get(v)
            .map(|r| (json(&release_record(r)), 1)),
        Subject::RunningRelease => rm
            .state
            .upgrades
            .running
            .as_ref()
            .map(|r| (json(&running_release_record(r)), r.changes)),
        Subject::Policy(name) => rm
            .state
            .iam
            .policies
            .get(name)
            .map(|p| (json(&policy_record(p)), p.version)),
        Subject::ResourcePolicy(key) => rm
            .state
            .iam
            .resource_policies
            .get(key)
            .map(|p| (json(&policy_record(p)), p.version)),
        Subject::Facts(node) => rm.state.upgrades.facts.get(node).map(|f| {
            (
                json(&stratum_projections::upgrades::facts_record(node, f)),
                f.version,
            )
        }),
        Subject::Principal(p) => rm.state.iam.principal_policies.get(p).map(|a| {
            (
                json(&principal_record(p, a)),
                rm.state.stream_version(&principal_stream(p)),
            )
        }),
    };
    match found {
        Some((body, version)) => (body, Some(version)),
        None => ("null".to_owned(), None),
    }
}
