//! The writer task: the one owner of the decision state. It takes the
//! queued commands in batches, decides each against the state the ones
//! before it left, and commits the batch with its read model changes and
//! kept answers in one transaction.
//!
//! Commits are pipelined. While one batch's commit (its fsync) is in
//! flight, the next batch is decided and rendered against the state the
//! first leaves; its transaction begins once the first has committed and
//! finds the log's head where the first left it, and its answers are sent
//! only after its own commit. When the commit in flight fails, or another
//! process wrote in between, what was decided after it is thrown away and
//! decided again from the log as the database holds it: no answer comes
//! from a state that was not stored.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use stratum_domain::log::Recorded;
use stratum_domain::state::stream_of;
use stratum_domain::stored::encode_at;
use stratum_domain::upgrade::EventsLost;
use stratum_projections::ReadModels;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;
use uuid::Uuid;

use stratum_store::{EventStore, Head, IdempotencyRecord, StoreError, StoreResult, WriteTx};

use super::decide::{context, if_match_refusal, render, replay_kept};
use super::replay::SNAPSHOT_DISTANCE;
use super::{
    raise, Clock, CommandError, CommandRequest, Committed, Job, Outcome, UpgradeDue, MAX_ATTEMPTS,
    MAX_BATCH,
};

pub(super) struct Writer {
    pub(super) store: Arc<dyn EventStore>,
    pub(super) clock: Clock,
    pub(super) rm: ReadModels,
    /// The in-memory state may be ahead of the log (a failed commit).
    pub(super) reload: bool,
    pub(super) head: watch::Sender<u64>,
    pub(super) upgrade_due: watch::Sender<UpgradeDue>,
    pub(super) publish: watch::Sender<Arc<ReadModels>>,
    pub(super) follow: Arc<Notify>,
    pub(super) wanted: Arc<AtomicU64>,
    /// The position of the newest snapshot this writer kept (or started
    /// from).
    pub(super) snapshot_at: u64,
    /// Whether a snapshot is being written: one at a time.
    pub(super) snapshotting: Arc<AtomicBool>,
    /// Set when the database's head suggests it no longer holds this
    /// writer's log (a failover that lost a tail): the next fold checks.
    pub(super) recheck: Arc<AtomicBool>,
    /// The hashes of the newest events this writer folded or committed.
    pub(super) recent: Recent,
    /// Where a loss of acknowledged events goes to be recorded.
    pub(super) losses: mpsc::UnboundedSender<EventsLost>,
}

/// How many of the newest events' hashes a writer keeps (40 bytes each),
/// and so the most an `EventsLost` lists (about 1 MB): a longer loss is
/// reported whole, with the hashes of its newest part.
const RECENT: usize = 10_000;

/// The hashes of the newest events a writer folded or committed, by
/// position: what it can say of a lost tail.
#[derive(Default)]
pub(super) struct Recent(pub(super) BTreeMap<u64, [u8; 32]>);

impl Recent {
    pub(super) fn remember(&mut self, position: u64, hash: [u8; 32]) {
        self.0.insert(position, hash);
        if self.0.len() > RECENT {
            self.0.pop_first();
        }
    }
}

/// A batch as it is decided: its events, the answers it keeps, and the
/// head of the log it follows.
#[derive(Default)]
struct Batch {
    events: Vec<Recorded>,
    kept: Vec<IdempotencyRecord>,
    keys: HashMap<(String, String), usize>,
    /// The head the batch's first event follows.
    follows: Head,
    /// The position and hash of its last event (the head it follows when
    /// it has none).
    position: u64,
    prev_hash: [u8; 32],
}

impl Batch {
    fn following(head: Head) -> Self {
        Self {
            follows: head,
            position: head.position,
            prev_hash: head.hash,
            ..Default::default()
        }
    }

    /// The head the log has once this batch is committed.
    fn leaves(&self) -> Head {
        Head {
            position: self.position,
            hash: self.prev_hash,
        }
    }

    fn kept(&self, principal: &str, key: &str) -> Option<&IdempotencyRecord> {
        self.keys
            .get(&(principal.to_owned(), key.to_owned()))
            .map(|i| &self.kept[*i])
    }
}

/// Where a kept answer to an `Idempotency-Key` is looked up when the batch
/// being decided has none.
enum KeptIn<'a> {
    /// The open transaction, under the log's lock.
    Tx(&'a mut dyn WriteTx),
    /// The batch whose commit is in flight, then what is committed. A key
    /// another process keeps meanwhile fails this batch's insert on the
    /// key's uniqueness, and the batch is decided again under the lock.
    Ahead {
        before: &'a Batch,
        store: &'a dyn EventStore,
    },
}

impl KeptIn<'_> {
    async fn find(&mut self, principal: &str, key: &str) -> StoreResult<Option<IdempotencyRecord>> {
        match self {
            KeptIn::Tx(tx) => tx.idempotency(principal, key).await,
            KeptIn::Ahead { before, store } => match before.kept(principal, key) {
                Some(k) => Ok(Some(k.clone())),
                None => store.idempotency(principal, key).await,
            },
        }
    }
}

type Replies = Vec<Result<Outcome, CommandError>>;

/// A commit's task: whether it was stored, and when it ended.
type Commit = JoinHandle<(StoreResult<()>, Instant)>;

/// A batch whose commit is in flight, and what to do when it lands.
pub(super) struct InFlight {
    commit: Commit,
    jobs: Vec<Job>,
    started: Box<Started>,
    /// One per command, under its own trace, closed when the commit lands.
    traced: Vec<tracing::Span>,
}

/// A batch written into its transaction, whose commit has begun.
struct Started {
    replies: Replies,
    batch: Batch,
    /// The read models as the batch leaves them: published once it has
    /// committed, and what a batch decided after it falls back to.
    after: Arc<ReadModels>,
    began: Instant,
}

/// What a batch came to before its commit.
enum Decided {
    /// Nothing to commit (refusals, kept answers given again).
    Answered(Replies),
    Committing(Commit, Box<Started>),
}

impl Writer {
    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<Job>) {
        let mut in_flight: Option<InFlight> = None;
        loop {
            tokio::select! {
                biased;
                landed = async {
                    (&mut in_flight.as_mut().expect("only when a commit is in flight").commit).await
                }, if in_flight.is_some() => {
                    let f = in_flight.take().expect("only when a commit is in flight");
                    if self.landed(f, landed) {
                        // Nothing was decided after it.
                        self.reload = false;
                    }
                }
                first = rx.recv() => {
                    let Some(first) = first else { break };
                    let mut jobs = vec![first];
                    while jobs.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok(j) => jobs.push(j),
                            Err(_) => break,
                        }
                    }
                    in_flight = self.process(jobs, in_flight.take()).await;
                }
                () = self.follow.notified(), if in_flight.is_none() => self.follow_log().await,
            }
        }
        if let Some(mut f) = in_flight {
            let landed = (&mut f.commit).await;
            self.landed(f, landed);
        }
    }

    /// Publishes the read models as the writer holds them, when they are
    /// newer than what was published (never called while the state may
    /// run ahead of the log).
    pub(super) fn publish_current(&mut self) {
        let newer = self.publish.borrow().state.position < self.rm.state.position;
        let now = if newer {
            Arc::new(self.rm.clone())
        } else {
            self.publish.borrow().clone()
        };
        self.publish(now);
    }

    /// Publishes `rm` (committed) if it is newer than what was, and tells
    /// watchers.
    fn publish(&mut self, rm: Arc<ReadModels>) {
        let at = rm.state.position;
        self.publish.send_if_modified(|p| {
            let newer = p.state.position < at;
            if newer {
                *p = rm;
            }
            newer
        });
        let now = self.publish.borrow().clone();
        self.after_publishing(&now);
    }

    /// What follows a publication: a snapshot now and then, the head, and
    /// the upgrade driver's next due step. Every [`SNAPSHOT_DISTANCE`]
    /// events it keeps a snapshot of what it published, serialized off the
    /// async workers and without a copy, so a restart folds only the
    /// events after it.
    pub(super) fn after_publishing(&mut self, rm: &Arc<ReadModels>) {
        use std::sync::atomic::Ordering;
        let at = rm.state.position;
        let idle = !self.snapshotting.load(Ordering::Acquire);
        if at >= self.snapshot_at + SNAPSHOT_DISTANCE && idle {
            self.snapshot_at = at;
            self.snapshotting.store(true, Ordering::Release);
            let rm = rm.clone();
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
        let due = UpgradeDue::of(rm, self.clock.now());
        self.upgrade_due.send_if_modified(|d| {
            let changed = *d != due;
            *d = due;
            changed
        });
    }

    /// Decides `jobs` and begins their commit. With a commit in flight,
    /// they are decided against the state it leaves while it runs; then it
    /// lands (its answers go out), and only if it was stored does theirs
    /// begin. Answers the commit now in flight, if any.
    async fn process(&mut self, jobs: Vec<Job>, in_flight: Option<InFlight>) -> Option<InFlight> {
        let reqs: Vec<&CommandRequest> = jobs.iter().map(|j| &j.req).collect();
        let mut ahead = None;
        if let Some(mut f) = in_flight {
            let base = f.started.after.clone();
            let decided = self.decide_ahead(&reqs, &f.started.batch).await;
            let landed = (&mut f.commit).await;
            let stored = self.landed(f, landed);
            match decided {
                Ok(d) if stored => ahead = Some((d, base)),
                // The state they were decided on was not stored: they are
                // decided again from the log (`landed` asked for a reload).
                Ok(_) => {}
                Err(e) => {
                    tracing::info!(error = %e, "could not decide a batch ahead; deciding it under the lock");
                    if stored {
                        self.fall_back_to(&base);
                    }
                }
            }
        }
        // A batch decided ahead that must be decided again (another
        // process wrote in between) does not use up one of the attempts.
        let mut attempt = if ahead.is_some() { 0 } else { 1 };
        let result = loop {
            let r = match ahead.take() {
                Some(((batch, replies), base)) => self.commit_ahead(batch, replies, &base).await,
                None => self.try_batch(&reqs).await,
            };
            match r {
                Err(StoreError::Conflict(why)) if attempt < MAX_ATTEMPTS => {
                    tracing::info!(%why, attempt, "lost a race on the log; deciding again");
                    attempt += 1;
                }
                other => break other,
            }
        };
        drop(reqs);
        match result {
            Ok(Decided::Committing(commit, started)) => {
                let (commands, events) = (jobs.len(), started.batch.events.len());
                let traced = if !crate::telemetry::enabled() {
                    Vec::new()
                } else {
                    jobs.iter()
                        .zip(&started.replies)
                        .map(|(j, reply)| {
                            // A refused command commits nothing of its own.
                            if !matches!(reply, Ok(Outcome::Committed(_))) {
                                return tracing::Span::none();
                            }
                            tracing::debug_span!(
                                parent: &j.req.trace,
                                "commit",
                                commands,
                                events,
                                position = tracing::field::Empty,
                                stored = tracing::field::Empty,
                            )
                        })
                        .collect()
                };
                Some(InFlight {
                    commit,
                    jobs,
                    started,
                    traced,
                })
            }
            Ok(Decided::Answered(replies)) => {
                for (job, reply) in jobs.into_iter().zip(replies) {
                    let _ = job.reply.send(reply);
                }
                None
            }
            Err(e) => {
                let err = CommandError::from(e);
                for job in jobs {
                    let _ = job.reply.send(Err(err.clone()));
                }
                None
            }
        }
    }

    /// A commit has ended: when it was stored, its read models are
    /// published and then its answers sent (whoever saw an answer reads
    /// what it committed); when not, every command of it is answered the
    /// error and the state is reloaded before the next decision. Answers
    /// whether it was stored.
    fn landed(
        &mut self,
        f: InFlight,
        landed: Result<(StoreResult<()>, Instant), tokio::task::JoinError>,
    ) -> bool {
        let (landed, ended) = landed.unwrap_or_else(|e| {
            let unknown = StoreError::OutcomeUnknown(format!(
                "the commit's task ended without an answer: {e}"
            ));
            (Err(unknown), Instant::now())
        });
        let Started {
            replies,
            batch,
            after,
            began,
        } = *f.started;
        for span in &f.traced {
            span.record("stored", landed.is_ok());
            span.record("position", batch.position);
        }
        match landed {
            Ok(()) => {
                for e in &batch.events {
                    self.recent.remember(e.position, e.hash);
                }
                let m = crate::metrics::global();
                m.batch_commands.observe(replies.len() as f64);
                m.commit_duration
                    .observe(ended.duration_since(began).as_secs_f64());
                self.publish(after);
                for (job, reply) in f.jobs.into_iter().zip(replies) {
                    let _ = job.reply.send(reply);
                }
                true
            }
            Err(e) => {
                self.reload = true;
                let err = CommandError::from(e);
                for job in f.jobs {
                    let _ = job.reply.send(Err(err.clone()));
                }
                false
            }
        }
    }

    /// Goes back to the state a stored batch left (what was decided after
    /// it is dropped).
    fn fall_back_to(&mut self, base: &Arc<ReadModels>) {
        self.rm = ReadModels::clone(base);
        self.reload = false;
    }

    /// Decides a batch against the state the batch in flight leaves.
    async fn decide_ahead(
        &mut self,
        reqs: &[&CommandRequest],
        before: &Batch,
    ) -> StoreResult<(Batch, Replies)> {
        let store = self.store.clone();
        let mut kept_in = KeptIn::Ahead {
            before,
            store: &*store,
        };
        let mut batch = Batch::following(before.leaves());
        let mut replies = Vec::with_capacity(reqs.len());
        for req in reqs {
            replies.push(Ok(self.one(&mut kept_in, &mut batch, req).await?));
        }
        Ok((batch, replies))
    }

    /// Writes a batch decided ahead, once the one before it is stored: its
    /// transaction must find the head that one left, or else another
    /// process wrote in between and the batch is decided again.
    async fn commit_ahead(
        &mut self,
        batch: Batch,
        replies: Replies,
        base: &Arc<ReadModels>,
    ) -> StoreResult<Decided> {
        let began = Instant::now();
        let r = async {
            let tx = self.store.begin_write().await?;
            let head = tx.head();
            if head != batch.follows {
                let _ = tx.rollback().await;
                return Err(StoreError::Conflict(format!(
                    "the log's head is position {}, not {} where this writer's last commit left it",
                    head.position, batch.follows.position
                )));
            }
            self.start_commit(tx, batch, replies, began).await
        }
        .await;
        if r.is_err() {
            self.fall_back_to(base);
        }
        r
    }

    /// Decides a batch under the log's lock, after folding in what other
    /// processes wrote.
    async fn try_batch(&mut self, reqs: &[&CommandRequest]) -> StoreResult<Decided> {
        if self.reload {
            self.reload_from_the_log().await?;
        }
        let began = Instant::now();
        let mut tx = self.store.begin_write().await?;
        let head = tx.head();
        // From here until the commit the state may run ahead of the log.
        self.reload = true;
        if let Err(e) = self.catch_up(&mut *tx, head).await {
            let _ = tx.rollback().await;
            return Err(e);
        }
        let mut batch = Batch::following(head);
        let mut replies = Vec::with_capacity(reqs.len());
        for req in reqs {
            match self.one(&mut KeptIn::Tx(&mut *tx), &mut batch, req).await {
                Ok(r) => replies.push(Ok(r)),
                Err(e) => {
                    let _ = tx.rollback().await;
                    return Err(e);
                }
            }
        }
        self.start_commit(tx, batch, replies, began).await
    }

    /// Writes a decided batch into its transaction and begins the commit,
    /// or, with nothing to write, ends the transaction and answers.
    async fn start_commit(
        &mut self,
        mut tx: Box<dyn WriteTx>,
        batch: Batch,
        replies: Replies,
        began: Instant,
    ) -> StoreResult<Decided> {
        if batch.events.is_empty() && batch.kept.is_empty() {
            tx.rollback().await?;
            self.reload = false;
            // What the catch-up folded in.
            self.publish_current();
            return Ok(Decided::Answered(replies));
        }
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
        // The commit starts first; the read models are cloned while it runs.
        let commit = tokio::spawn(async move {
            let stored = tx.commit().await;
            (stored, Instant::now())
        });
        let after = Arc::new(self.rm.clone());
        Ok(Decided::Committing(
            commit,
            Box::new(Started {
                replies,
                batch,
                after,
                began,
            }),
        ))
    }

    /// Folds in what other writers appended since this one last wrote.
    async fn catch_up(&mut self, tx: &mut dyn WriteTx, head: Head) -> StoreResult<()> {
        let at = self.rm.state.position;
        let lost = || {
            StoreError::Conflict(format!(
                "the log's head is position {}, and this writer's log (at {at}) is no longer the database's",
                head.position
            ))
        };
        if !self.rm.held_by(head.position, head.hash) {
            return Err(lost());
        }
        if head.position > at {
            let events = tx.events_after(at).await?;
            if let (Some(next), Some(mine)) = (events.first(), self.rm.head_hash) {
                if next.prev_hash != mine {
                    return Err(lost());
                }
            }
            for e in events {
                self.rm.apply_recorded(&e).map_err(|err| {
                    StoreError::Corrupt(format!("position {}: {err}", e.position))
                })?;
                self.recent.remember(e.position, e.hash);
            }
            self.rm.discard_changes();
        }
        Ok(())
    }

    /// Decides one command into the batch; its answer is known before commit.
    async fn one(
        &mut self,
        kept_in: &mut KeptIn<'_>,
        batch: &mut Batch,
        req: &CommandRequest,
    ) -> StoreResult<Outcome> {
        if let Some(idem) = &req.idempotency {
            let principal = &req.meta.principal;
            let kept = match batch.kept(principal, &idem.key) {
                Some(k) => Some(k.clone()),
                None => kept_in.find(principal, &idem.key).await?,
            };
            if let Some(kept) = kept {
                return Ok(replay_kept(&kept, idem));
            }
        }
        let outcome = tracing::debug_span!(
            parent: &req.trace,
            "decide",
            stream = %req.command.stream_id()
        )
        .in_scope(|| self.decide(batch, req));
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
        // Each event in the version the log's storage level allows, all
        // of them or none: a type the level does not write yet is refused.
        let level = self.rm.state.storage.level;
        let encoded: Result<Vec<_>, _> = decision
            .events
            .iter()
            .map(|e| encode_at(e, level))
            .collect();
        let encoded = match encoded {
            Ok(encoded) => encoded,
            Err(e) => {
                return Outcome::Refused(stratum_domain::Refusal::new(
                    stratum_domain::ErrorCode::VersionConflict,
                    format!("Not written: {e}."),
                ))
            }
        };
        let mut last = None;
        for (event, enc) in decision.events.iter().zip(encoded) {
            let stream_id = stream_of(event);
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
