//! The writer task: the one owner of the decision state. It takes the
//! queued commands in batches, decides each against the state the ones
//! before it left, and commits the batch with its read model changes and
//! kept answers in one transaction.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use stratum_domain::iam::principal_stream;
use stratum_domain::log::{log_precision, Recorded};
use stratum_domain::state::{stream_of, Subject};
use stratum_domain::stored::encode;
use stratum_domain::upgrade::{EventsLost, LostEvent};
use stratum_domain::{CommandContext, ErrorCode, FieldError, Refusal};
use stratum_projections::iam::{policy_record, principal_record};
use stratum_projections::upgrades::{release_record, running_release_record, upgrade_record};
use stratum_projections::{member_record, token_record, JoinRequestRecord, ReadModels};
use tokio::sync::{mpsc, watch, Notify};
use uuid::Uuid;

use stratum_store::{
    EventStore, Head, IdempotencyRecord, StoreError, StoreResult, WriteTx, READ_CHUNK,
};

use super::replay::{reload, SNAPSHOT_DISTANCE};
use super::{
    raise, Clock, CommandError, CommandRequest, Committed, IdempotencyKey, Job, Outcome,
    UpgradeDue, MAX_ATTEMPTS, MAX_BATCH,
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
    /// The hashes of the newest [`RECENT`] events this writer folded or
    /// committed, by position: what it can say of a lost tail.
    pub(super) recent: BTreeMap<u64, [u8; 32]>,
    /// Where a loss of acknowledged events goes to be recorded.
    pub(super) losses: mpsc::UnboundedSender<EventsLost>,
}

/// How many of the newest events' hashes a writer keeps (40 bytes each),
/// and so the most an `EventsLost` lists (about 1 MB): a longer loss is
/// reported whole, with the hashes of its newest part.
const RECENT: usize = 10_000;

impl Writer {
    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<Job>) {
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
        let recheck = self.recheck.swap(false, Ordering::AcqRel);
        // A reader that saw this writer's own commit before it was
        // published asked for nothing the writer does not have now.
        if !self.reload && !recheck && self.rm.state.position >= self.wanted.load(Ordering::Acquire)
        {
            return;
        }
        let followed = async {
            if self.reload {
                self.reload_from_the_log().await?;
            }
            loop {
                let at = self.rm.state.position;
                let events = self.store.read_after(at, READ_CHUNK).await?;
                // The database must still hold, at this writer's position,
                // the event it folded there: the next one chains from it,
                // or else the head is it.
                let gone = match events.first() {
                    Some(next) => self.rm.head_hash.is_some_and(|h| h != next.prev_hash),
                    None => {
                        let head = self.store.head().await?;
                        !self.rm.held_by(head.position, head.hash)
                    }
                };
                if gone {
                    self.reload_from_the_log().await?;
                    continue;
                }
                for e in &events {
                    if let Err(err) = self.rm.apply_recorded(e) {
                        self.reload = true;
                        return Err(StoreError::Corrupt(format!(
                            "position {}: {err}",
                            e.position
                        )));
                    }
                    self.remember(e.position, e.hash);
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
        self.after_publishing(at);
    }

    /// Replaces the read models with the log as the database holds it.
    /// When that log no longer holds what was published (a failover lost
    /// its tail), that is said loudly, the loss is recorded, and the reload
    /// is published even though the position went back: no reader is
    /// answered from events the database no longer has. Every reload is
    /// checked, whatever asked for it: one after a failed commit may follow
    /// a failover too.
    async fn reload_from_the_log(&mut self) -> StoreResult<()> {
        // What readers were served: the in-memory state may be ahead of it
        // (a commit that failed), and it is what a loss is measured from.
        let published = self.publish.borrow().clone();
        self.rm = reload(&self.store).await?;
        self.reload = false;
        if self.holds(&published).await? {
            return Ok(());
        }
        let held = (published.state.position, published.head_hash);
        let db = Head {
            position: self.rm.state.position,
            hash: self.rm.head_hash.unwrap_or([0; 32]),
        };
        if let Some(loss) = self.lost_events(db, held.0).await? {
            // What the database holds from the fork on is not what this
            // writer folded there.
            self.recent.split_off(&loss.first);
            tracing::error!(
                first = loss.first,
                last = loss.last,
                count = loss.lost.len(),
                "acknowledged events lost; recording the log-events-lost alarm"
            );
            let _ = self.losses.send(loss);
        }
        let hex = |h: Option<[u8; 32]>| h.map_or("unknown".to_owned(), hex::encode);
        tracing::error!(
            held_position = held.0,
            held_hash = %hex(held.1),
            database_position = db.position,
            database_hash = %hex::encode(db.hash),
            "the database no longer holds the log this replica served: acknowledged events \
             were lost (a failover to a standby that had not received them?); reloaded what \
             the database holds"
        );
        crate::metrics::global().log_divergences.inc();
        let at = self.rm.state.position;
        self.publish.send_replace(Arc::new(self.rm.clone()));
        self.head.send_replace(at);
        self.wanted.store(at, Ordering::Release);
        self.snapshot_at = self.snapshot_at.min(at);
        self.after_publishing(at);
        Ok(())
    }

    /// Whether the log just reloaded still holds, at the position
    /// `published` was at, the event it was published with (one read, and
    /// only when the log has moved past it).
    async fn holds(&self, published: &ReadModels) -> StoreResult<bool> {
        let (at, Some(hash)) = (published.state.position, published.head_hash) else {
            return Ok(true);
        };
        Ok(match self.rm.state.position.cmp(&at) {
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal => self.rm.head_hash.is_none_or(|h| h == hash),
            std::cmp::Ordering::Greater => {
                super::replay::hash_at(&*self.store, at).await? == Some(hash)
            }
        })
    }

    fn remember(&mut self, position: u64, hash: [u8; 32]) {
        self.recent.insert(position, hash);
        if self.recent.len() > RECENT {
            self.recent.pop_first();
        }
    }

    /// The events this writer served that the database no longer holds:
    /// those after the newest position where the database's log and the
    /// one it remembers agree (the same hash means the same log up to
    /// there), to `held`, the position it published. When the fork is not
    /// among what it remembers, the loss is taken to begin after the
    /// database's head, or at the oldest position it remembers if that is
    /// lower; the hashes are those it remembers.
    async fn lost_events(&self, db: Head, held: u64) -> StoreResult<Option<EventsLost>> {
        let mut fork = None;
        if let (Some((&oldest, _)), Some((&newest, _))) =
            (self.recent.first_key_value(), self.recent.last_key_value())
        {
            let mut top = db.position.min(newest);
            while top >= oldest && fork.is_none() {
                let from = top.saturating_sub(u64::from(READ_CHUNK) - 1).max(oldest);
                let events = self.store.read_after(from - 1, READ_CHUNK).await?;
                fork = events
                    .iter()
                    .filter(|e| e.position <= top)
                    .rev()
                    .find(|e| self.recent.get(&e.position) == Some(&e.hash))
                    .map(|e| e.position);
                if from == oldest {
                    break;
                }
                top = from - 1;
            }
        }
        let oldest = self.recent.first_key_value().map_or(u64::MAX, |(p, _)| *p);
        let first = fork.map_or(oldest.min(db.position + 1), |f| f + 1);
        let last = self
            .recent
            .last_key_value()
            .map_or(held, |(p, _)| held.max(*p));
        if first == 0 || last < first {
            return Ok(None);
        }
        let lost: Vec<LostEvent> = self
            .recent
            .range(first..=last)
            .map(|(&position, hash)| LostEvent {
                position,
                hash: hex::encode(hash),
            })
            .collect();
        Ok(Some(EventsLost {
            first,
            last,
            database_position: db.position,
            database_hash: hex::encode(db.hash),
            lost,
        }))
    }

    /// What follows a publication: a snapshot now and then, the head, and
    /// the upgrade driver's next due step.
    fn after_publishing(&mut self, at: u64) {
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
            self.reload_from_the_log().await?;
        }
        let began = std::time::Instant::now();
        let mut tx = self.store.begin_write().await?;
        let head = tx.head();
        // From here until the commit the state may run ahead of the log.
        self.reload = true;
        if let Err(e) = self.catch_up(&mut *tx, head).await {
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
            for e in &batch.events {
                self.remember(e.position, e.hash);
            }
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
                self.remember(e.position, e.hash);
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
pub(super) fn context(clock: &Clock, req: &CommandRequest) -> CommandContext {
    CommandContext {
        now: log_precision(clock.now()),
        principal: req.meta.principal.clone(),
        held_policies: req.held_policies.clone(),
    }
}

/// `If-Match`, as the domain holds it (412 when the stream moved on).
pub(super) fn if_match_refusal(rm: &ReadModels, req: &CommandRequest) -> Option<Refusal> {
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
pub(super) fn merge_input_errors(
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
        Subject::Alarm(key) => rm
            .state
            .upgrades
            .alarms
            .get(key)
            .map(|a| (json(&stratum_projections::upgrades::alarm_record(a)), 1)),
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
