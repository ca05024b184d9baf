//! The writer task: the one owner of the decision state. It takes the
//! queued commands in batches, decides each against the state the ones
//! before it left, and commits the batch with its read model changes and
//! kept answers in one transaction.
//!
//! Commits are pipelined. While one batch's commit (its fsync) is in
//! flight, the next batch is decided and rendered against the state the
//! first leaves; its write begins once the first has committed and must
//! find the log's head where the first left it (checked as it begins, or
//! by its commit's one statement on PostgreSQL), and its answers are sent
//! only after its own commit. On PostgreSQL, where that statement is the
//! whole write, it goes out before a landed commit's many answers do
//! ([`ANSWERS_AFTER_NEXT`]). When the commit in flight fails, or another
//! process wrote in between, what was decided after it is thrown away and
//! decided again from the log as the database holds it: no answer comes
//! from a state that was not stored. A commit that lost that race stored
//! nothing, and its commands are decided again too, under the lock.
//!
//! Where the decision state stands against the log is one
//! [`pipeline::State`](super::pipeline::State), moved only by its pure
//! transitions: `InStep` (the log as stored, nothing in flight),
//! `Committing` (a commit in flight; the state is what it leaves), `Ahead`
//! (a batch decided ahead of the commit in flight, with the state that
//! commit leaves to fall back to), `AheadOfStored` (that commit was stored;
//! the batch begins its own write, and falls back if the log's head
//! moved) and `MustReload` (the state may be ahead of the log: a commit
//! failed, or a decision under the lock has not ended). This task carries
//! out the actions the transitions answer, and reports what came of them.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use stratum_domain::upgrade::EventsLost;
use stratum_projections::ReadModels;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;

use stratum_store::{EventStore, Head, StoreError, StoreResult, WriteTx};

use super::pipeline;
use super::replay::SNAPSHOT_DISTANCE;
use super::{
    raise, Clock, CommandError, CommandRequest, Generation, Job, Outcome, UpgradeDue, Watched,
    MAX_ATTEMPTS, MAX_BATCH,
};

mod batch;

use batch::{Batch, KeptIn};

pub(super) struct Writer {
    pub(super) store: Arc<dyn EventStore>,
    pub(super) clock: Clock,
    pub(super) rm: ReadModels,
    pub(super) head: watch::Sender<u64>,
    pub(super) upgrade_due: watch::Sender<UpgradeDue>,
    pub(super) publish: watch::Sender<Arc<ReadModels>>,
    /// Raised only by a publication that can change what a long-poll
    /// answers or whether its caller may still wait.
    pub(super) wakes: watch::Sender<Watched>,
    /// Raised by a publication that moves the generation or puts another
    /// event at it.
    pub(super) generations: watch::Sender<Generation>,
    /// Counts the folds of events other processes committed.
    pub(super) others: watch::Sender<u64>,
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
    /// Jobs whose commit lost a race on the log (another process wrote
    /// first, nothing was stored): decided again before what is queued.
    pub(super) again: Vec<Job>,
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

pub(in crate::command) type Replies = Vec<Result<Outcome, CommandError>>;

/// A commit's task: whether it was stored, and when it ended.
type Commit = JoinHandle<(StoreResult<()>, Instant)>;

/// Where the writer's decision state stands against the log: its commits
/// in flight, the read models they leave, and the batch decided ahead.
pub(super) type State = pipeline::State<InFlight, Arc<ReadModels>, (Batch, Replies)>;
pub(super) type Event = pipeline::Event<InFlight, Arc<ReadModels>, (Batch, Replies), StoreError>;
pub(super) type Action = pipeline::Action<InFlight, Arc<ReadModels>, (Batch, Replies), StoreError>;
type Then = pipeline::Then<Arc<ReadModels>, (Batch, Replies)>;

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
    began: Instant,
}

/// How many answers a stored commit must have for the next commit to be
/// sent before them (where the store writes a commit in one round trip):
/// answering that many keeps the database idle long enough to matter.
/// With every commit sent first, `commands` on PostgreSQL ran 16-27 %
/// slower at 8 writers and 4-12 % slower at 16, and 8-51 % faster at 32
/// and 64 (`docs/benchmarks.md`, issue 33, thirteenth session).
const ANSWERS_AFTER_NEXT: usize = 16;

/// A stored commit's read models and answers, not yet sent.
struct Stored {
    after: Arc<ReadModels>,
    jobs: Vec<Job>,
    replies: Replies,
}

/// What a batch came to before its commit.
enum Decided {
    /// Nothing to commit (refusals, kept answers given again).
    Answered(Replies),
    /// Its commit began. The read models as the batch leaves them are
    /// published once it has committed, and what a batch decided after it
    /// falls back to.
    Committing(Commit, Box<Started>, Arc<ReadModels>),
}

impl Writer {
    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<Job>) {
        let mut state = State::InStep;
        loop {
            tokio::select! {
                biased;
                landed = async {
                    (&mut state.in_flight_mut().expect("only when a commit is in flight").commit).await
                }, if state.in_flight().is_some() => {
                    // Nothing was decided after it.
                    match self.landed(&mut state, landed) {
                        Then::Nothing => {}
                        Then::FallBack(base) | Then::DecideAgain(base) => {
                            self.rm = ReadModels::clone(&base);
                        }
                        Then::CommitAhead(_) => unreachable!("nothing was decided ahead"),
                    }
                }
                first = rx.recv(), if self.again.is_empty() => {
                    let Some(first) = first else { break };
                    let mut jobs = vec![first];
                    while jobs.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok(j) => jobs.push(j),
                            Err(_) => break,
                        }
                    }
                    self.process(jobs, &mut state).await;
                }
                () = self.follow.notified(), if state.in_flight().is_none() => {
                    self.follow_log(&mut state).await;
                }
                // Under the lock: with no commit in flight, they are not
                // decided ahead, and cannot lose a race again.
                () = std::future::ready(()), if !self.again.is_empty() && state.in_flight().is_none() => {
                    let jobs = std::mem::take(&mut self.again);
                    self.process(jobs, &mut state).await;
                }
            }
        }
        if let Some(f) = state.in_flight_mut() {
            let landed = (&mut f.commit).await;
            self.landed(&mut state, landed);
        }
        for job in std::mem::take(&mut self.again) {
            let _ = job.reply.send(Err(CommandError::Stopped));
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
        self.wakes.send_if_modified(|w| {
            let wake = w.woken_by(rm);
            if wake {
                *w = Watched::of(rm);
            }
            wake
        });
        let generation = Generation::of(rm);
        self.generations.send_if_modified(|g| {
            let moved = *g != generation;
            *g = generation;
            moved
        });
        let due = UpgradeDue::of(rm, self.clock.now());
        self.upgrade_due.send_if_modified(|d| {
            let changed = *d != due;
            *d = due;
            changed
        });
    }

    /// Decides `jobs` and begins their commit. With a commit in flight,
    /// they are decided against the state it leaves while it runs; then it
    /// lands, and only if it was stored does theirs begin: after its
    /// answers go out, or, with [`ANSWERS_AFTER_NEXT`] of them on a store
    /// that defers writes, just before. Answers the commit now in flight,
    /// if any.
    async fn process(&mut self, jobs: Vec<Job>, state: &mut State) {
        let reqs: Vec<&CommandRequest> = jobs.iter().map(|j| &j.req).collect();
        // A batch decided ahead that must be decided again (another
        // process wrote in between) does not use up one of the attempts.
        let mut attempt = 0;
        let mut action = state.step(Event::Decide);
        // Whether the result was decided under the log's lock.
        let mut locked;
        let result = loop {
            locked = matches!(action, Action::Decide { .. });
            let r = match action {
                Action::DecideAhead => {
                    let before = &state
                        .in_flight()
                        .expect("deciding ahead of a commit in flight")
                        .started
                        .batch;
                    let decided = match self.decide_ahead(&reqs, before).await {
                        Ok(d) => Some(d),
                        Err(e) => {
                            tracing::info!(error = %e, "could not decide a batch ahead; deciding it under the lock");
                            None
                        }
                    };
                    state.note(Event::DecidedAhead(decided));
                    let f = state
                        .in_flight_mut()
                        .expect("a commit in flight, decided ahead of");
                    let landed = (&mut f.commit).await;
                    let (then, mut stored) = self.land(state, landed);
                    // Where the store defers a write to its commit's one
                    // round trip, and the stored commit has many answers,
                    // the next commit goes out before them: the database
                    // writes while they go out. Else the answers go first
                    // (see [`ANSWERS_AFTER_NEXT`]).
                    let send_first = matches!(then, Then::CommitAhead(_))
                        && self.store.defers_writes()
                        && stored
                            .as_ref()
                            .is_some_and(|s| s.replies.len() >= ANSWERS_AFTER_NEXT);
                    if !send_first {
                        self.answer(stored.take());
                    }
                    match then {
                        Then::CommitAhead((batch, replies)) => {
                            let r = self.commit_ahead(batch, replies, send_first).await;
                            self.answer(stored);
                            r
                        }
                        // What was decided ahead could not be decided whole:
                        // it is decided again on what the commit stored. Or
                        // the commit lost a race: this batch and its commands
                        // are decided again from what the log held before it.
                        Then::FallBack(base) | Then::DecideAgain(base) => {
                            self.rm = ReadModels::clone(&base);
                            action = state.step(Event::Decide);
                            continue;
                        }
                        // The state it was decided on was not stored: it is
                        // decided again from the log.
                        Then::Nothing => {
                            action = state.step(Event::Decide);
                            continue;
                        }
                    }
                }
                Action::Decide { reload } => {
                    attempt += 1;
                    self.try_batch(state, reload, &reqs).await
                }
                Action::None
                | Action::Follow { .. }
                | Action::Land { .. }
                | Action::FallBack(_) => {
                    unreachable!("a batch to decide is decided")
                }
            };
            match &r {
                Ok(Decided::Answered(_)) => state.note(Event::Answered),
                // Its commit is in flight once it is handed its jobs.
                Ok(Decided::Committing(..)) => {}
                Err(_) => match state.step(Event::Failed) {
                    Action::FallBack(base) => self.rm = ReadModels::clone(&base),
                    Action::None => {}
                    Action::DecideAhead
                    | Action::Decide { .. }
                    | Action::Follow { .. }
                    | Action::Land { .. } => unreachable!("a failed batch asks for no more"),
                },
            }
            match r {
                Err(StoreError::Conflict(why)) if attempt < MAX_ATTEMPTS => {
                    tracing::info!(%why, attempt, "lost a race on the log; deciding again");
                    action = state.step(Event::Decide);
                }
                other => break other,
            }
        };
        drop(reqs);
        match result {
            Ok(Decided::Committing(commit, started, after)) => {
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
                state.note(Event::Began {
                    in_flight: InFlight {
                        commit,
                        jobs,
                        started,
                        traced,
                    },
                    leaves: after,
                });
            }
            Ok(Decided::Answered(replies)) => {
                for (job, reply) in jobs.into_iter().zip(replies) {
                    // Decided under the log's lock, after folding in what
                    // others wrote: against the log as it then stood. A
                    // batch decided ahead with nothing to write checked
                    // nothing against the log.
                    if let (true, Some(a)) = (locked, &job.req.unconfirmed) {
                        a.backed();
                    }
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

    /// The commit in flight has ended: when it was stored, its read models
    /// are published and then its answers sent (whoever saw an answer reads
    /// what it committed); when not, every command of it is answered the
    /// error and the state is reloaded before the next decision, except
    /// after a lost race (nothing stored, another process wrote first):
    /// then its commands wait in `again` to be decided once more. Answers
    /// what follows.
    fn landed(
        &mut self,
        state: &mut State,
        landed: Result<(StoreResult<()>, Instant), tokio::task::JoinError>,
    ) -> Then {
        let (then, stored) = self.land(state, landed);
        self.answer(stored);
        then
    }

    /// [`Self::landed`], but a stored commit's publication and answers are
    /// handed back, for [`Self::answer`] to send (where the next commit
    /// goes out first, after it has).
    fn land(
        &mut self,
        state: &mut State,
        landed: Result<(StoreResult<()>, Instant), tokio::task::JoinError>,
    ) -> (Then, Option<Stored>) {
        let (landed, ended) = landed.unwrap_or_else(|e| {
            let unknown = StoreError::OutcomeUnknown(format!(
                "the commit's task ended without an answer: {e}"
            ));
            (Err(unknown), Instant::now())
        });
        let stored = landed.is_ok();
        // A write begun at the head reports a head another process moved
        // as a conflict; the state says whether the commit was one.
        let event = match landed {
            Err(e @ StoreError::Conflict(_)) => Event::LostRace(e),
            landed => Event::Landed(landed),
        };
        let Action::Land {
            in_flight: f,
            landed,
            then,
        } = state.step(event)
        else {
            unreachable!("a commit that ended is answered")
        };
        let Started {
            replies,
            batch,
            began,
        } = *f.started;
        for span in &f.traced {
            span.record("stored", stored);
            span.record("position", batch.position);
        }
        match landed {
            Ok(after) => {
                for e in &batch.events {
                    self.recent.remember(e.position, e.hash);
                }
                let m = crate::metrics::global();
                m.batch_commands.observe(replies.len() as f64);
                m.commit_duration
                    .observe(ended.duration_since(began).as_secs_f64());
                return (
                    then,
                    Some(Stored {
                        after,
                        jobs: f.jobs,
                        replies,
                    }),
                );
            }
            // Nothing was stored: another process wrote first. The jobs are
            // decided again, under the lock, on the log as it then stands
            // (bounded, should a store keep saying so).
            Err(why)
                if matches!(then, Then::DecideAgain(_))
                    && f.jobs.iter().all(|j| j.lost_races + 1 < MAX_ATTEMPTS) =>
            {
                tracing::info!(%why, "a commit lost a race on the log; deciding its batch again");
                for mut job in f.jobs {
                    job.lost_races += 1;
                    self.again.push(job);
                }
            }
            Err(e) => {
                let err = CommandError::from(e);
                for job in f.jobs {
                    let _ = job.reply.send(Err(err.clone()));
                }
            }
        }
        (then, None)
    }

    /// Publishes what a stored commit leaves, then sends its answers.
    fn answer(&mut self, stored: Option<Stored>) {
        if let Some(Stored {
            after,
            jobs,
            replies,
        }) = stored
        {
            self.publish(after);
            for (job, reply) in jobs.into_iter().zip(replies) {
                // Its commit was conditional on the log's head.
                if let Some(a) = &job.req.unconfirmed {
                    a.backed();
                }
                let _ = job.reply.send(reply);
            }
        }
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
    /// write must find the head that one left, or else another process
    /// wrote in between and the batch is decided again (the writer falls
    /// back to the state the stored one left), whether the store finds out
    /// as the write begins or in its commit.
    async fn commit_ahead(
        &mut self,
        batch: Batch,
        replies: Replies,
        send_now: bool,
    ) -> StoreResult<Decided> {
        let began = Instant::now();
        // The store may defer the head check to the commit's one statement.
        let tx = self.store.begin_write_at(batch.follows).await?;
        self.start_commit(tx, batch, replies, began, send_now).await
    }

    /// Decides a batch under the log's lock, after folding in what other
    /// processes wrote (loading the log first when `reload`).
    async fn try_batch(
        &mut self,
        state: &mut State,
        reload: bool,
        reqs: &[&CommandRequest],
    ) -> StoreResult<Decided> {
        if reload {
            self.reload_from_the_log(state).await?;
        }
        let began = Instant::now();
        let mut tx = self.store.begin_write().await?;
        let head = tx.head();
        // From here until the commit the state may run ahead of the log.
        state.note(Event::Locked);
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
        self.start_commit(tx, batch, replies, began, false).await
    }

    /// Writes a decided batch into its transaction and begins the commit,
    /// or, with nothing to write, ends the transaction and answers. With
    /// `send_now`, the commit's first step is taken before this returns.
    async fn start_commit(
        &mut self,
        mut tx: Box<dyn WriteTx>,
        batch: Batch,
        replies: Replies,
        began: Instant,
        send_now: bool,
    ) -> StoreResult<Decided> {
        if batch.events.is_empty() && batch.kept.is_empty() {
            tx.rollback().await?;
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
        let mut commit = Box::pin(async move {
            let stored = tx.commit().await;
            (stored, Instant::now())
        });
        // With `send_now`, its first step is taken here, before anything
        // else the writer does (the answers of the commit before it), so
        // the database starts on it now: on PostgreSQL that step sends the
        // commit's one statement. Else, and then, a task drives it.
        let commit = if !send_now {
            tokio::spawn(commit)
        } else {
            // A panic in that step ends the commit's task, as it would
            // have in the task (an outcome not known), not the writer.
            let first = std::future::poll_fn(|cx| {
                Poll::Ready(std::panic::catch_unwind(AssertUnwindSafe(|| {
                    commit.as_mut().poll(cx)
                })))
            })
            .await;
            match first {
                Ok(Poll::Ready(done)) => tokio::spawn(async move { done }),
                Ok(Poll::Pending) => tokio::spawn(commit),
                Err(panic) => tokio::spawn(async move { std::panic::resume_unwind(panic) }),
            }
        };
        let after = Arc::new(self.rm.clone());
        Ok(Decided::Committing(
            commit,
            Box::new(Started {
                replies,
                batch,
                began,
            }),
            after,
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
            self.folded_others();
        }
        Ok(())
    }

    /// Says the writer folded in events another process committed.
    pub(super) fn folded_others(&self) {
        self.others.send_modify(|n| *n = n.wrapping_add(1));
    }
}
