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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use chrono::Utc;
use serde_json::Value;
use sha2::{Digest, Sha256};
use stratum_domain::log::EventMeta;
use stratum_domain::state::Subject;
use stratum_domain::upgrade::UpgradeCommand;
use stratum_domain::{Command, FieldError, Refusal};
use stratum_projections::ReadModels;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tracing::Instrument;

mod decide;
mod follow;
mod pipeline;
mod replay;
mod writer;

use decide::{context, if_match_refusal, merge_input_errors};
use replay::reload;
pub use replay::{load, replay, state_at, state_at_with, SNAPSHOT_DISTANCE};
use writer::Writer;

use stratum_store::{EventStore, Head, StoreError, StoreResult};

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
    /// A caller the gate admitted against the read models in memory
    /// (`auth::Admission`): the writer authorizes the command again against
    /// its own state before it decides it, and decides it with the
    /// policies it finds the caller holding there.
    pub unconfirmed: Option<Arc<dyn Unconfirmed>>,
    /// The span the command was submitted in: its decision and commit are
    /// traced under it.
    pub trace: tracing::Span,
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
            unconfirmed: None,
            trace: tracing::Span::none(),
        }
    }
}

/// A caller admitted against read models that may be behind the log, as
/// the writer sees it: `auth::Admission` is the one kind. The writer
/// authorizes the command again against the state it decides it on, on
/// every decision (a batch decided again after a conflict too), before the
/// domain decides.
pub trait Unconfirmed: Send + Sync + std::fmt::Debug {
    /// Every policy the caller holds in `rm` at `now` if it may still do
    /// what it was admitted to; else the refusal, which its request never
    /// answers as it is (it settles the caller against the checked read
    /// models first). Each decision again replaces what the last found.
    fn authorize_again(
        &self,
        rm: &ReadModels,
        now: chrono::DateTime<Utc>,
    ) -> Result<Vec<String>, Refusal>;

    /// The writer's answer is backed by the log: decided against the log's
    /// state at a moment after the request arrived (under the log's lock,
    /// or in a batch whose commit, conditional on the log's head, was
    /// stored).
    fn backed(&self);
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
    /// How many of its commits lost a race on the log (nothing stored).
    lost_races: usize,
}

impl Job {
    fn new(req: CommandRequest, reply: oneshot::Sender<Result<Outcome, CommandError>>) -> Self {
        Self {
            req,
            reply,
            lost_races: 0,
        }
    }
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

/// What a peer long-poll's answer and its caller's credential depend on:
/// the membership generation and the tokens (a persistent map, so keeping
/// it costs a reference, and comparing it is one pointer). Not the read
/// models themselves, which would keep every member map of the
/// applied-generation commits since the last change alive.
#[derive(Clone)]
pub struct Watched {
    generation: u64,
    tokens: stratum_domain::Map<String, stratum_domain::iam::Token>,
}

impl Watched {
    fn of(rm: &ReadModels) -> Self {
        Self {
            generation: rm.state.membership.generation,
            tokens: rm.state.iam.tokens.clone(),
        }
    }

    /// Whether `rm` wakes the long-polls that saw `self`: the generation
    /// moved (either way: a log reloaded after a failover may be shorter),
    /// or the tokens changed (a revoked token ends a wait; a decommission,
    /// which ends its node's, moves the generation). Not the rest: 5,000
    /// agents reporting their applied generation are 5,000 commits that
    /// must not each wake 5,000 waiting agents to find nothing new. The
    /// tokens are compared by their map's root, so a commit that leaves
    /// them alone is never a change.
    fn woken_by(&self, rm: &ReadModels) -> bool {
        self.generation != rm.state.membership.generation
            || !self.tokens.ptr_eq(&rm.state.iam.tokens)
    }
}

/// The membership generation a publication holds, and the hash of the
/// event at it: what the raft cleanup waits on. The hash tells a
/// generation from another at the same position (a failover that lost the
/// log's tail, whose positions other events filled); `None` where the
/// read models do not know it, which never equals a known one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generation {
    pub number: u64,
    pub hash: Option<[u8; 32]>,
}

impl Generation {
    fn of(rm: &ReadModels) -> Self {
        Self {
            number: rm.state.membership.generation,
            hash: rm.generation_hash,
        }
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
    /// The publications that can change a long-poll's answer.
    wakes: watch::Receiver<Watched>,
    /// The generation of each publication that moved it.
    generations: watch::Receiver<Generation>,
    /// Raised each time the writer folds in events another process
    /// committed.
    others: watch::Receiver<u64>,
    /// Asks the writer to fold in what other processes committed.
    follow: Arc<Notify>,
    /// The newest position a reader waits for or another process
    /// announced: the writer folds only when it is behind this.
    wanted: Arc<AtomicU64>,
    /// Asks the writer to check that the database still holds its log.
    recheck: Arc<AtomicBool>,
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
        let (wakes_tx, wakes) = watch::channel(Watched::of(&rm));
        let (generations_tx, generations) = watch::channel(Generation::of(&rm));
        let (others_tx, others) = watch::channel(0);
        let follow = Arc::new(Notify::new());
        let wanted = Arc::new(AtomicU64::new(rm_position));
        let recheck = Arc::new(AtomicBool::new(false));
        let (losses, found) = mpsc::unbounded_channel();
        tokio::spawn(
            record_losses(jobs.downgrade(), found).instrument(tracing::info_span!("losses")),
        );
        let writer = Writer {
            store,
            clock,
            rm,
            head: head.clone(),
            upgrade_due: upgrade_due.clone(),
            publish,
            wakes: wakes_tx,
            generations: generations_tx,
            others: others_tx,
            follow: follow.clone(),
            wanted: wanted.clone(),
            snapshot_at: rm_position,
            snapshotting: Default::default(),
            recheck: recheck.clone(),
            recent: Default::default(),
            losses,
            again: Vec::new(),
        };
        tokio::spawn(writer.run(rx).instrument(tracing::info_span!("writer")));
        Ok(Self {
            jobs,
            head,
            upgrade_due,
            published,
            wakes,
            generations,
            others,
            follow,
            wanted,
            recheck,
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

    /// Every publication of the read models.
    pub fn publications(&self) -> watch::Receiver<Arc<ReadModels>> {
        self.published.clone()
    }

    /// The publications a long-poll of the peer lists waits for: those
    /// that move the membership generation or change the tokens, not
    /// every commit. A woken watcher reads [`Self::published`].
    pub fn wakes(&self) -> watch::Receiver<Watched> {
        self.wakes.clone()
    }

    /// The publications that move the membership generation (either way:
    /// a log reloaded after a failover may be shorter) or put another
    /// event at it: with [`Self::others_folded`] (returns another replica
    /// recorded), what changes the raft cleanup owes, but for the removals
    /// and returns its own workers record. Not every commit: 5,000 agents'
    /// reports must not each have the cleanup read the head and look
    /// through every member.
    pub fn generations(&self) -> watch::Receiver<Generation> {
        self.generations.clone()
    }

    /// Changes each time the writer folds in events another process
    /// committed: the only events whose tree rows may be missing, as this
    /// process's own commits write theirs (and any missing before them)
    /// in the same transaction.
    pub fn others_folded(&self) -> watch::Receiver<u64> {
        self.others.clone()
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
        let mut req = req;
        if req.trace.is_none() && crate::telemetry::enabled() {
            req.trace = tracing::Span::current();
        }
        self.jobs
            .send(Job::new(req, reply))
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
    /// What the database's head, read after `held` was published, says of
    /// the log this process serves. A head behind `held`, or another event
    /// at its position, means the database lost events this process folded
    /// (a failover to a standby that had not received them): the writer
    /// checks, and reloads what the database holds. Answers whether it
    /// found the log gone.
    pub fn observe_database_head(&self, held: &ReadModels, head: Head) -> bool {
        self.observe_head(head.position);
        let gone = !held.held_by(head.position, head.hash);
        if gone {
            self.recheck.store(true, Ordering::Release);
            self.follow.notify_one();
        }
        gone
    }

    pub fn observe_head(&self, position: u64) {
        raise(&self.head, position);
        if self.published.borrow().state.position < position {
            self.wanted.fetch_max(position, Ordering::AcqRel);
            self.follow.notify_one();
        }
    }
}

/// Records each loss of acknowledged events the writer finds, as the
/// service, until it is recorded (the first replica's report raises the
/// alarm; the others' find it raised). Holds the writer's queue weakly, so
/// the service can stop.
async fn record_losses(
    jobs: mpsc::WeakSender<Job>,
    mut found: mpsc::UnboundedReceiver<stratum_domain::upgrade::EventsLost>,
) {
    let backoff = crate::backoff::Backoff {
        first: std::time::Duration::from_millis(200),
        max: std::time::Duration::from_secs(5),
    };
    while let Some(loss) = found.recv().await {
        let mut delay = backoff.first;
        loop {
            let Some(jobs) = jobs.upgrade() else { return };
            let req = CommandRequest::new(
                Command::Upgrade(UpgradeCommand::RecordLostEvents(loss.clone())),
                stratum_domain::iam::SERVICE_PRINCIPAL,
            );
            let (reply, rx) = oneshot::channel();
            if jobs.send(Job::new(req, reply)).await.is_err() {
                return;
            }
            drop(jobs);
            match rx.await {
                Ok(Ok(Outcome::Committed(c))) => {
                    tracing::warn!(
                        first = loss.first,
                        last = loss.last,
                        position = ?c.position,
                        "the log-events-lost alarm is raised"
                    );
                    break;
                }
                Ok(Ok(Outcome::Refused(r))) => {
                    tracing::error!(refusal = %r, "the loss of acknowledged events could not be recorded");
                    break;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "recording a loss of acknowledged events; retrying");
                    tokio::time::sleep(delay).await;
                    delay = backoff.after(delay);
                }
                Err(_) => return,
            }
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
