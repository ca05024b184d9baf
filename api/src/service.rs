//! Starting the service: the store, the command bus, the bootstrap token,
//! and the background tasks (head watcher, raft cleanup, upgrade driver).

use std::sync::Arc;
use std::time::Duration;

use stratum_domain::iam::{IamCommand, SecretVerifier, SERVICE_PRINCIPAL};
use stratum_domain::Command;
use tokio::task::JoinHandle;

use crate::auth::{new_id, new_secret, secret_hash};
use crate::backoff::Backoff;
use crate::command::{Clock, CommandBus, CommandRequest};
use crate::listener::RequestLimits;
use crate::raft::{RaftAdapters, RaftCleanup};
use crate::upgrade_driver::UpgradeDriver;
use stratum_domain::release::TrustedKeys;
use stratum_domain::upgrade::UpgradeConfig;
use stratum_store::{EventStore, StoreError};

/// What the parts of a running service share: the store, the one write
/// path, and the configuration requests need. The HTTP layer reaches it as
/// its router state (cloned for every handler and layer of every request:
/// so it is one `Arc`, one reference count to move); the process managers
/// take only the parts they use.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct Shared {
    pub store: Arc<dyn EventStore>,
    pub bus: CommandBus,
    /// The keys release manifests must be signed by.
    pub release_keys: Arc<TrustedKeys>,
    /// What upgrades are planned with: the backup target, the settling.
    pub upgrade_config: Arc<UpgradeConfig>,
    /// Cancelled when the process is asked to stop: event streams and
    /// long-polls end, so a graceful shutdown does not wait on watchers.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// The request timeout and the watcher bound.
    pub limits: Arc<RequestLimits>,
    /// One permit per open event stream or waiting long-poll.
    pub watchers: Arc<tokio::sync::Semaphore>,
    /// The chosen token secrets this process verified, in memory only.
    pub chosen_secrets: Arc<crate::auth::ChosenSecrets>,
    /// Node agents' reports, limited per node.
    pub reports: Arc<crate::auth::NodeReports>,
    /// The shared head check every read waits on (see [`crate::reads`]).
    pub reads: Arc<crate::reads::Freshness>,
    /// What the read endpoints render once and serve many times.
    pub rendered: Arc<crate::reads::Rendered>,
    /// This replica as it registered itself (`crate::replicas`).
    pub replica: Arc<stratum_store::ReplicaRow>,
    /// Whether its settings are the agreed ones, which the raft cleanup
    /// acts with.
    pub acting: crate::replicas::Acting,
    /// The log's signed checkpoints.
    pub checkpoints: Arc<crate::checkpoint::Checkpoints>,
}

impl Shared {
    /// A place for one more watcher, or 503 when every one is taken.
    pub fn watcher(&self) -> Result<tokio::sync::OwnedSemaphorePermit, crate::error::ApiError> {
        self.watchers.clone().try_acquire_owned().map_err(|_| {
            crate::error::ApiError::new(
                stratum_domain::ErrorCode::Unavailable,
                format!(
                    "This server follows {} event streams and long-polls already, its most; retry later or ask another replica.",
                    self.limits.max_watchers
                ),
            )
        })
    }
}

#[derive(Clone, Default)]
pub struct ServiceConfig {
    /// `STRATUM_BOOTSTRAP_TOKEN`: the first token on an empty log.
    pub bootstrap_token: Option<String>,
    pub adapters: RaftAdapters,
    pub backoff: Backoff,
    /// The keys release manifests must be signed by.
    pub release_keys: TrustedKeys,
    /// Where the write path reads the time (tests move it).
    pub clock: Clock,
    pub upgrade: UpgradeConfig,
    /// How often, at most, the upgrade driver asks whether a time-driven
    /// step is due (settling, alarms); `None`: once a minute.
    pub driver_tick: Option<Duration>,
    /// The request timeout and the watcher bound.
    pub limits: RequestLimits,
    /// The key checkpoints are signed with (none: unsigned).
    pub log_key: Option<crate::checkpoint::LogKey>,
    /// `STRATUM_LOG_PUBLIC`: `GET /v1/log/...` without a token.
    pub log_public: bool,
    /// The address the API is served on, as the replica registry shows it.
    pub listen: String,
    /// `--rebuild-rows-per-second`: how fast read-model rows of other
    /// projection versions are written again (`None`: the default).
    pub rebuild_rows_per_second: Option<std::num::NonZeroU32>,
}

/// A started service and its background tasks (aborted on drop).
pub struct Service {
    pub state: AppState,
    /// A bootstrap token this start generated, to be shown once.
    pub generated_token: Option<String>,
    tasks: Vec<JoinHandle<()>>,
}

impl Service {
    /// Says in the registry that this replica stopped (as it stops).
    pub async fn deregister(&self) {
        if let Err(e) = self
            .state
            .store
            .replica_stopped(&self.state.replica.id)
            .await
        {
            tracing::warn!(error = %e, "could not record this replica's stop");
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// How often the head is polled where the backend announces nothing, and
/// as the fallback where it does.
const POLL: Duration = Duration::from_millis(1000);

pub async fn start(store: Arc<dyn EventStore>, cfg: ServiceConfig) -> Result<Service, StoreError> {
    // The tree kept beside the log: built for a database from before it
    // was kept, its newest rows checked otherwise.
    if let Some(rows) = stratum_store::tree::ensure(&*store).await? {
        tracing::warn!(rows, "the log's Merkle tree was built from the log");
    }
    let bus = CommandBus::start_with(store.clone(), cfg.clock.clone()).await?;
    let checkpoints = crate::checkpoint::Checkpoints::new(
        store.clone(),
        bus.clone(),
        cfg.log_key.clone(),
        cfg.log_public,
    )
    .map_err(|e| StoreError::Schema(e.to_string()))?;
    let checkpoints = Arc::new(checkpoints);
    let managers = crate::replicas::Managers {
        adapters: &cfg.adapters,
        upgrade: &cfg.upgrade,
        log_key: cfg.log_key.as_ref(),
    };
    let replica = crate::replicas::describe(&managers, &cfg.listen, stratum_store::schema_range());
    crate::replicas::register(&*store, &replica).await?;
    let replica_row = Arc::new(replica.clone());
    let acting = crate::replicas::Acting::new(store.clone(), bus.clone(), replica_row.clone());
    let state = AppState(Arc::new(Shared {
        store: store.clone(),
        bus: bus.clone(),
        release_keys: Arc::new(cfg.release_keys.clone()),
        upgrade_config: Arc::new(cfg.upgrade.clone()),
        shutdown: Default::default(),
        watchers: Arc::new(tokio::sync::Semaphore::new(cfg.limits.max_watchers)),
        limits: Arc::new(cfg.limits.clone()),
        chosen_secrets: Default::default(),
        reports: Default::default(),
        reads: Arc::new(crate::reads::Freshness::new(store.clone())),
        rendered: Default::default(),
        checkpoints: checkpoints.clone(),
        replica: replica_row,
        acting: acting.clone(),
    }));
    let generated_token = bootstrap(&state, cfg.bootstrap_token.clone()).await?;
    let mut tasks = vec![tokio::spawn(watch_head(store.clone(), bus.clone()))];
    tasks.push(tokio::spawn(keep_tree(store.clone(), bus.clone())));
    tasks.push(tokio::spawn(crate::replicas::heartbeat(
        store.clone(),
        replica,
        state.shutdown.clone(),
    )));
    tasks.push(tokio::spawn(crate::replicas::keep_settings_alarm(
        acting.clone(),
        state.shutdown.clone(),
    )));
    tasks.extend(
        checkpoints.spawn_witnessing(format!("{}/{}", state.replica.host, state.replica.listen)),
    );
    tasks.push(tokio::spawn(checkpoints.run()));
    tasks.push(tokio::spawn(
        crate::rebuild::Rebuild {
            store: store.clone(),
            bus: bus.clone(),
            me: state.replica.id.clone(),
            rows_per_second: cfg.rebuild_rows_per_second.unwrap_or(
                std::num::NonZeroU32::new(crate::rebuild::DEFAULT_RATE).expect("not zero"),
            ),
        }
        .run(state.shutdown.clone()),
    ));
    tasks.push(tokio::spawn(
        RaftCleanup::new(
            store.clone(),
            bus.clone(),
            cfg.adapters.clone(),
            cfg.backoff,
            Arc::new(acting),
        )
        .run(),
    ));
    tasks.push(tokio::spawn(
        UpgradeDriver::new(bus.clone(), cfg.backoff)
            .with_tick(cfg.driver_tick.unwrap_or(crate::upgrade_driver::TICK))
            .run(),
    ));
    Ok(Service {
        state,
        generated_token,
        tasks,
    })
}

/// Issues the bootstrap token when the log is empty. Answers the secret
/// when it was generated here (and so must be shown once).
async fn bootstrap(state: &AppState, given: Option<String>) -> Result<Option<String>, StoreError> {
    const IGNORED: &str =
        "STRATUM_BOOTSTRAP_TOKEN is ignored: this database was bootstrapped already; \
                           make tokens with `stratum token create` on the host";
    if state.store.head().await?.position > 0 {
        if given.is_some() {
            tracing::warn!("{IGNORED}");
        }
        return Ok(None);
    }
    let generated = given.is_none();
    // A generated secret has 256 random bits: its SHA-256 finds it. One an
    // operator chose may be guessable: only a salted Argon2id hash of it is
    // kept, in the log and everywhere else.
    let (secret, verifier) = match given {
        None => {
            let s = new_secret();
            let v = SecretVerifier::Sha256(secret_hash(&s));
            (s, v)
        }
        Some(s) => {
            let v = SecretVerifier::Argon2id(crate::auth::slow_hash(&s));
            (s, v)
        }
    };
    let req = CommandRequest::new(
        Command::Iam(IamCommand::Bootstrap {
            token_id: new_id("tok"),
            verifier,
        }),
        SERVICE_PRINCIPAL,
    );
    let issued = match state
        .bus
        .execute(req)
        .await
        .map_err(|e| StoreError::Unavailable(e.to_string()))?
    {
        crate::command::Outcome::Committed(c) => c.position.is_some(),
        crate::command::Outcome::Refused(r) => {
            return Err(StoreError::Unavailable(format!(
                "the bootstrap token was refused: {}",
                r.message
            )))
        }
    };
    // Another replica may have bootstrapped first: then nothing was issued.
    if !generated && !issued {
        tracing::warn!("{IGNORED}");
    }
    Ok((generated && issued).then_some(secret))
}

/// Keeps the log's tree caught up with events another build of stratum
/// appended without keeping it (a replica of an earlier build beside this
/// one during an upgrade), so the tree is whole soon after the other build
/// stops, without a write or a restart of this one: checked at start, and
/// each time the writer folds in what other processes committed. This
/// process's own commits write their rows, and any missing before them,
/// in their transaction, so they ask for no check (at a thousand commits a
/// second that check was up to four reads of the database each). A failed
/// catch-up is tried again with a backoff.
async fn keep_tree(store: Arc<dyn EventStore>, bus: CommandBus) {
    let mut others = bus.others_folded();
    let backoff = Backoff::default();
    let mut retry = None;
    loop {
        others.borrow_and_update();
        retry = match stratum_store::tree::catch_up(&*store).await {
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "the log's tree did not catch up; trying again");
                Some(retry.map_or(backoff.first, |d| backoff.after(d)))
            }
        };
        tokio::select! {
            changed = others.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(retry.unwrap_or_default()), if retry.is_some() => {}
        }
    }
}

/// Raises the bus's head when other processes commit: from the backend's
/// announcements where it has them, and by polling.
async fn watch_head(store: Arc<dyn EventStore>, bus: CommandBus) {
    let mut announced = match store.subscribe().await {
        Ok(rx) => rx,
        Err(e) => {
            tracing::warn!(error = %e, "no commit announcements; polling only");
            None
        }
    };
    let mut tick = tokio::time::interval(POLL);
    loop {
        tokio::select! {
            Some(p) = async { match announced.as_mut() { Some(rx) => rx.recv().await, None => None } } => {
                bus.observe_head(p);
            }
            _ = tick.tick() => {
                // What this process serves, taken before the head is read:
                // a head behind it is a log the database no longer has.
                let held = bus.published();
                if let Ok(h) = store.head().await {
                    bus.observe_database_head(&held, h);
                }
            }
        }
    }
}
