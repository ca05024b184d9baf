//! Signed checkpoints: the log's Merkle tree head as a C2SP tlog-checkpoint
//! in a C2SP signed note (Ed25519, Go's note key format), served at
//! `/v1/log/checkpoint` and carried by exports.
//!
//! The text is deterministic (origin, size, root; no timestamp) and
//! Ed25519 signatures are too, so every replica on one database serves the
//! same bytes for the same size. A checkpoint is signed only if the log
//! still extends the newest one signed before: that one is remembered
//! outside the data it signs (a state file beside the key) and in the
//! database (`log_signed`), and a log that forks from either (a restored
//! backup, a failover that lost a tail) raises the `log-checkpoint-fork`
//! alarm and stops signing until an administrator acknowledges the fork.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use signed_note::{Note, Signer as _, StandardSigner, StandardVerifier, VerifierList};
use stratum_domain::tree::{checkpoint_text, parse_checkpoint};
use stratum_domain::upgrade::{CheckpointForkFound, UpgradeCommand};
use stratum_domain::Command;
use stratum_store::{tree, EventStore, SignedCheckpoint, StoreError};
use tokio::sync::watch;

use crate::command::{CommandBus, CommandRequest, Outcome};
use crate::note::valid_name;

/// The checkpoint settings of `serve`.
#[derive(Args, Debug, Clone, Default)]
pub struct CheckpointArgs {
    /// A Go note private key file (`PRIVATE+KEY+<name>+<hash>+<base64>`,
    /// as `stratum log keygen` writes it): checkpoints are signed with it.
    /// Without it tiles and proofs are served and checkpoints are not.
    #[arg(long, env = "STRATUM_LOG_SIGNING_KEY_FILE")]
    pub log_signing_key_file: Option<PathBuf>,
    /// The checkpoints' origin line (no spaces, no `+`); by default the
    /// key's name.
    #[arg(long, env = "STRATUM_LOG_ORIGIN")]
    pub log_origin: Option<String>,
    /// Where the newest signed checkpoint is remembered outside the
    /// database; by default beside the key, `<key file>.checkpoint`.
    #[arg(long, env = "STRATUM_LOG_STATE_FILE")]
    pub log_state_file: Option<PathBuf>,
    /// Serves `GET /v1/log/...` (checkpoint, tiles, consistency proofs)
    /// without a token, for outside witnesses and monitors. The leaves are
    /// hashes: this shows how many events there are and when they came.
    #[arg(long, env = "STRATUM_LOG_PUBLIC", default_value = "false",
          value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::Set)]
    pub log_public: bool,
    /// A witness policy (`witness NAME VKEY URL` lines and `quorum K`):
    /// each checkpoint signed is submitted to these witnesses (C2SP
    /// tlog-witness), and `/v1/log/checkpoint` serves their cosignatures.
    #[arg(long, env = "STRATUM_LOG_WITNESS_POLICY", value_name = "FILE")]
    pub log_witness_policy: Option<PathBuf>,
}

/// A loaded signing key and what it signs as.
#[derive(Clone)]
pub struct LogKey {
    signer: StandardSigner,
    /// The key's name (in each signature line).
    pub name: String,
    /// The checkpoints' first line.
    pub origin: String,
    /// The newest checkpoint signed, kept outside the database.
    pub state_file: PathBuf,
    /// The witnesses asked to cosign, if any.
    pub witnesses: Option<crate::witness::Policy>,
}

impl std::fmt::Debug for LogKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogKey")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl CheckpointArgs {
    /// The key the settings name, checked as a start checks it.
    pub fn key(&self) -> anyhow::Result<Option<LogKey>> {
        let Some(path) = &self.log_signing_key_file else {
            if self.log_origin.is_some() {
                anyhow::bail!("STRATUM_LOG_ORIGIN is set without STRATUM_LOG_SIGNING_KEY_FILE");
            }
            if self.log_witness_policy.is_some() {
                anyhow::bail!(
                    "STRATUM_LOG_WITNESS_POLICY is set without STRATUM_LOG_SIGNING_KEY_FILE: \
                     witnesses cosign signed checkpoints"
                );
            }
            return Ok(None);
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("STRATUM_LOG_SIGNING_KEY_FILE {}: {e}", path.display()))?;
        let signer = StandardSigner::new(text.trim_end()).map_err(|e| {
            anyhow::anyhow!(
                "STRATUM_LOG_SIGNING_KEY_FILE {}: not a note private key \
                 (PRIVATE+KEY+<name>+<hash>+<base64>, as `stratum log keygen` writes): {e}",
                path.display()
            )
        })?;
        let name = signer.name().to_owned();
        let origin = self.log_origin.clone().unwrap_or_else(|| name.clone());
        if !valid_name(&origin) {
            anyhow::bail!(
                "STRATUM_LOG_ORIGIN {origin:?} cannot be a checkpoint origin: it must be \
                 non-empty, with no space, no `+` and no control character"
            );
        }
        let state_file = self.log_state_file.clone().unwrap_or_else(|| {
            let mut p = path.clone().into_os_string();
            p.push(".checkpoint");
            PathBuf::from(p)
        });
        let witnesses = match &self.log_witness_policy {
            None => None,
            Some(p) => {
                let policy = crate::witness::Policy::load(p)
                    .map_err(|e| anyhow::anyhow!("STRATUM_LOG_WITNESS_POLICY: {e}"))?;
                if let Some(w) = policy.witnesses.iter().find(|w| w.url.is_none()) {
                    anyhow::bail!(
                        "STRATUM_LOG_WITNESS_POLICY {}: the witness {} has no URL \
                         (`witness NAME VKEY URL`, URL its submission prefix)",
                        p.display(),
                        w.name
                    );
                }
                Some(policy)
            }
        };
        Ok(Some(LogKey {
            signer,
            name,
            origin,
            state_file,
            witnesses,
        }))
    }
}

/// `stratum log keygen NAME`: a key pair in Go's note format.
pub fn generate_key(name: &str) -> anyhow::Result<(String, String)> {
    if !valid_name(name) {
        anyhow::bail!("{name:?} cannot be a key name: no space, no `+`, not empty");
    }
    Ok(signed_note::generate_key(&mut rand::rngs::OsRng, name))
}

/// A signed checkpoint read and checked: origin, size, root, and the note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    pub origin: String,
    pub size: u64,
    pub root: [u8; 32],
    pub note: String,
}

/// Opens a signed checkpoint with a verifier key: the signature must be
/// the key's and valid, the text a checkpoint.
pub fn open(note: &str, key: &StandardVerifier) -> Result<Opened, String> {
    let n = Note::from_bytes(note.as_bytes()).map_err(|e| format!("not a signed note: {e}"))?;
    let known = VerifierList::new(vec![Box::new(key.clone())]);
    n.verify(&known).map_err(|e| match e {
        signed_note::NoteError::UnverifiedNote => {
            "no signature by the verifier key: it was signed by another key".to_owned()
        }
        e => format!("the signature does not verify: {e}"),
    })?;
    let (origin, size, root) = parse_checkpoint(n.text())?;
    Ok(Opened {
        origin,
        size,
        root,
        note: note.to_owned(),
    })
}

/// The size and root of a checkpoint note, unchecked (a remembered one).
fn parse_note(note: &str) -> Option<(u64, [u8; 32])> {
    let n = Note::from_bytes(note.as_bytes()).ok()?;
    parse_checkpoint(n.text()).ok().map(|(_, s, r)| (s, r))
}

/// Why no checkpoint is signed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Withheld {
    #[error("checkpoints are not signed: the service has no STRATUM_LOG_SIGNING_KEY_FILE")]
    Unsigned,
    #[error(
        "checkpoints are withheld: the log no longer extends the newest signed checkpoint \
         (size {}, root {}); it has {} events with root {}. An administrator acknowledges \
         the fork with POST /v1/admin/log/fork/acknowledge",
        .0.signed_size, .0.signed_root, .0.log_size, .0.log_root
    )]
    Forked(CheckpointForkFound),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("the newest signed checkpoint could not be remembered: {0}")]
    Remember(String),
}

/// The service's checkpoints: the newest one signed, and the signer.
pub struct Checkpoints {
    store: Arc<dyn EventStore>,
    bus: CommandBus,
    key: Option<LogKey>,
    /// Serve `GET /v1/log/...` without a token.
    pub public: bool,
    /// One signing at a time, and the checkpoint this process remembers
    /// (its state file's).
    signing: tokio::sync::Mutex<Option<SignedCheckpoint>>,
    latest: watch::Sender<Option<Arc<SignedCheckpoint>>>,
    /// The fork this process found, until it is acknowledged.
    forked: std::sync::Mutex<Option<CheckpointForkFound>>,
    /// The witnesses asked to cosign each checkpoint, if any.
    witnessing: Option<Arc<crate::witness::submit::Witnessing>>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// How long signing waits after a commit for more to come, so a burst is
/// one signature (the checkpoint is served within a second of a commit).
const COALESCE: Duration = Duration::from_millis(100);

fn root_of(hex_root: &str) -> Option<[u8; 32]> {
    hex::decode(hex_root).ok()?.try_into().ok()
}

impl Checkpoints {
    /// The checkpoints of `store`; the remembered checkpoint is read from
    /// the state file, which must be readable if it exists and writable.
    pub fn new(
        store: Arc<dyn EventStore>,
        bus: CommandBus,
        key: Option<LogKey>,
        public: bool,
    ) -> anyhow::Result<Self> {
        let remembered = match &key {
            Some(k) => {
                let r = read_state(&k.state_file)?;
                probe_writable(&k.state_file)?;
                r
            }
            None => None,
        };
        match &key {
            Some(k) => tracing::info!(
                key = %k.name, origin = %k.origin, state = %k.state_file.display(),
                remembered = remembered.as_ref().map_or(0, |r| r.size),
                "checkpoints are signed"
            ),
            None => tracing::warn!(
                "checkpoints are unsigned: no STRATUM_LOG_SIGNING_KEY_FILE; the log's tiles and \
                 proofs are served, and no auditor can hold the service to a checkpoint"
            ),
        }
        let witnessing = key
            .as_ref()
            .and_then(|k| k.witnesses.clone())
            .map(|p| Arc::new(crate::witness::submit::Witnessing::new(p)));
        Ok(Self {
            store,
            bus,
            key,
            public,
            signing: tokio::sync::Mutex::new(remembered),
            latest: watch::channel(None).0,
            forked: std::sync::Mutex::new(None),
            witnessing,
        })
    }

    /// The note `GET /v1/log/checkpoint` serves: the newest checkpoint,
    /// with the witnesses' cosignatures when there are witnesses (then the
    /// newest that a quorum cosigned, while one is).
    pub fn served(&self) -> Result<String, Withheld> {
        let latest = self.latest()?;
        Ok(match &self.witnessing {
            Some(w) => w.served(&latest),
            None => latest.note.clone(),
        })
    }

    /// The witnesses' tasks, if there are witnesses: each submits the
    /// checkpoints this process signs; `replica` (its host and address)
    /// names its alarm.
    pub fn spawn_witnessing(&self, replica: String) -> Vec<tokio::task::JoinHandle<()>> {
        match &self.witnessing {
            Some(w) => w.spawn(
                self.store.clone(),
                self.bus.clone(),
                self.latest.subscribe(),
                replica,
            ),
            None => Vec::new(),
        }
    }

    /// The newest checkpoint signed, if any yet.
    pub fn latest(&self) -> Result<Arc<SignedCheckpoint>, Withheld> {
        if self.key.is_none() {
            return Err(Withheld::Unsigned);
        }
        if let Some(f) = self.open_fork(None) {
            return Err(Withheld::Forked(f));
        }
        self.latest.borrow().clone().ok_or_else(|| {
            Withheld::Store(StoreError::Unavailable(
                "no checkpoint is signed yet".into(),
            ))
        })
    }

    /// The fork this process found, if one stops it signing.
    fn own_fork(&self) -> Option<CheckpointForkFound> {
        self.forked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A fork that stops signing: this process's, or one any replica
    /// recorded in the log and no one acknowledged (but `except`).
    fn open_fork(&self, except: Option<&CheckpointForkFound>) -> Option<CheckpointForkFound> {
        if let Some(f) = self.own_fork().filter(|f| Some(f) != except) {
            return Some(f);
        }
        self.bus
            .published()
            .state
            .upgrades
            .checkpoint_forks
            .values()
            .find(|k| k.acknowledged.is_none() && Some(&k.found) != except)
            .map(|k| k.found.clone())
    }

    /// Signs the checkpoint of the tree of `size` leaves (at most the
    /// head), if the log still extends every checkpoint remembered; an
    /// export's own, not published.
    pub async fn sign(&self, size: u64) -> Result<Arc<SignedCheckpoint>, Withheld> {
        self.sign_as(size, None, false).await
    }

    /// Signs `size`: checked against the remembered checkpoints, or, for
    /// the new base after an acknowledged `rebase`, against the log the
    /// fork was found on. `publish`: the newest, served.
    async fn sign_as(
        &self,
        size: u64,
        rebase: Option<&CheckpointForkFound>,
        publish: bool,
    ) -> Result<Arc<SignedCheckpoint>, Withheld> {
        let key = self.key.as_ref().ok_or(Withheld::Unsigned)?;
        let mut remembered = self.signing.lock().await;
        if let Some(f) = self.open_fork(rebase) {
            return Err(Withheld::Forked(f));
        }
        let head = self.store.head().await?.position;
        if size > head {
            return Err(Withheld::Store(StoreError::Unavailable(format!(
                "the log has {head} events, fewer than {size}"
            ))));
        }
        let in_db = self.store.signed_checkpoint().await?;
        let held: Vec<(u64, [u8; 32])> = match rebase {
            None => remembered
                .iter()
                .chain(in_db.iter())
                .map(|r| (r.size, r.root))
                .collect(),
            Some(f) => vec![(
                f.log_size,
                root_of(&f.log_root).ok_or_else(|| Withheld::Remember("a bad log root".into()))?,
            )],
        };
        // The root signed is proven consistent with each held checkpoint,
        // from the tiles it is computed from.
        let mut root = None;
        for h in &held {
            // A checkpoint of more events than the log has: it shrank.
            let consistent = if h.0 > head {
                None
            } else {
                tree::root_consistent_with(&*self.store, size, *h).await?
            };
            match consistent {
                Some(r) if root.is_none_or(|x| x == r) => root = Some(r),
                Some(_) => {
                    return Err(Withheld::Store(StoreError::Unavailable(
                        "the log moved while it was signed".into(),
                    )))
                }
                None if rebase.is_some() => {
                    return Err(Withheld::Remember(format!(
                        "the log no longer extends the one whose fork was acknowledged \
                         (size {}, root {})",
                        h.0,
                        hex::encode(h.1)
                    )))
                }
                None => {
                    let fork = CheckpointForkFound {
                        signed_size: h.0,
                        signed_root: hex::encode(h.1),
                        log_size: head,
                        log_root: hex::encode(tree::root(&*self.store, head).await?),
                    };
                    *self.forked.lock().unwrap_or_else(|e| e.into_inner()) = Some(fork.clone());
                    return Err(Withheld::Forked(fork));
                }
            }
        }
        let root = match root {
            Some(r) => r,
            None => tree::root(&*self.store, size).await?,
        };
        let text = checkpoint_text(&key.origin, size, &root).map_err(Withheld::Remember)?;
        let mut note =
            Note::new(text.as_bytes(), &[]).map_err(|e| Withheld::Remember(e.to_string()))?;
        note.add_sigs(&[&key.signer])
            .map_err(|e| Withheld::Remember(e.to_string()))?;
        let signed = SignedCheckpoint {
            size,
            root,
            note: String::from_utf8(note.to_bytes())
                .map_err(|e| Withheld::Remember(e.to_string()))?,
        };
        // Remembered before it is shown: outside the database first.
        if rebase.is_some() || remembered.as_ref().is_none_or(|r| size > r.size) {
            write_state(&key.state_file, &signed.note).map_err(Withheld::Remember)?;
            let replaces = rebase.and_then(|f| root_of(&f.signed_root));
            self.store.put_signed_checkpoint(&signed, replaces).await?;
            *remembered = Some(signed.clone());
        }
        let signed = Arc::new(signed);
        if publish && rebase.is_some() {
            if let Some(w) = &self.witnessing {
                w.rebased();
            }
            self.latest.send_replace(Some(signed.clone()));
        } else if publish {
            self.latest.send_if_modified(|l| {
                let newer = l.as_ref().is_none_or(|l| l.size < size);
                if newer {
                    *l = Some(signed.clone());
                }
                newer
            });
        }
        Ok(signed)
    }

    /// Signs the head each time it moves (at most every [`COALESCE`]); on a
    /// fork, records it once and waits for its acknowledgement, then signs
    /// again from the log as it is.
    pub async fn run(self: Arc<Self>) {
        if self.key.is_none() {
            return;
        }
        let mut head = self.bus.head();
        let mut recorded: Option<CheckpointForkFound> = None;
        let mut said: Option<CheckpointForkFound> = None;
        loop {
            let at = *head.borrow_and_update();
            match self.own_fork() {
                None => match self.sign_as(at, None, true).await {
                    Ok(_) => said = None,
                    Err(Withheld::Forked(f)) => {
                        if said.as_ref() != Some(&f) {
                            tracing::error!(
                                signed_size = f.signed_size, signed_root = %f.signed_root,
                                log_size = f.log_size, log_root = %f.log_root,
                                "the log forks from a signed checkpoint: no checkpoint is signed \
                                 until an administrator acknowledges the fork"
                            );
                            said = Some(f);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "signing a checkpoint; retrying"),
                },
                Some(f) => {
                    if recorded.as_ref() != Some(&f) && self.record(&f).await {
                        recorded = Some(f.clone());
                    }
                    let acknowledged = self
                        .bus
                        .published()
                        .state
                        .upgrades
                        .checkpoint_fork(f.signed_size, &f.signed_root)
                        .is_some_and(|k| k.acknowledged.is_some());
                    if acknowledged {
                        match self.sign_as(at, Some(&f), true).await {
                            Ok(s) => {
                                *self.forked.lock().unwrap_or_else(|e| e.into_inner()) = None;
                                tracing::warn!(
                                    size = s.size,
                                    "the checkpoint fork was acknowledged: signing again from the log as it is"
                                );
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "signing after an acknowledged fork; retrying")
                            }
                        }
                    }
                }
            }
            tokio::select! {
                r = head.changed() => {
                    if r.is_err() {
                        return;
                    }
                    tokio::time::sleep(COALESCE).await;
                }
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// Records the fork in the log, as the service; whether it is.
    async fn record(&self, f: &CheckpointForkFound) -> bool {
        let req = CommandRequest::new(
            Command::Upgrade(UpgradeCommand::RecordCheckpointFork(f.clone())),
            stratum_domain::iam::SERVICE_PRINCIPAL,
        );
        match self.bus.execute(req).await {
            Ok(Outcome::Committed(_)) => true,
            Ok(Outcome::Refused(r)) => {
                tracing::error!(refusal = %r, "the checkpoint fork could not be recorded");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "recording the checkpoint fork; retrying");
                false
            }
        }
    }
}

/// Whether the state file can be written where it is: a key on a read-only
/// mount with the state beside it would never sign.
fn probe_writable(path: &Path) -> anyhow::Result<()> {
    let mut probe = path.as_os_str().to_owned();
    probe.push(".new");
    std::fs::File::create(&probe)
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| {
            anyhow::anyhow!(
                "STRATUM_LOG_STATE_FILE {}: cannot be written ({e}); it is where the newest signed \
                 checkpoint is remembered: name a durable, writable place",
                path.display()
            )
        })
}

/// The remembered checkpoint in the state file, if there is one.
fn read_state(path: &Path) -> anyhow::Result<Option<SignedCheckpoint>> {
    match std::fs::read_to_string(path) {
        Ok(note) => {
            let (size, root) = parse_note(&note).ok_or_else(|| {
                anyhow::anyhow!(
                    "STRATUM_LOG_STATE_FILE {}: not a signed checkpoint; it is where the newest \
                     signed checkpoint is remembered, and only stratum writes it",
                    path.display()
                )
            })?;
            Ok(Some(SignedCheckpoint { size, root, note }))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!(
            "STRATUM_LOG_STATE_FILE {}: {e}",
            path.display()
        )),
    }
}

/// Replaces the state file atomically and durably: a new file beside it,
/// synced, renamed over it, and the directory synced.
fn write_state(path: &Path, note: &str) -> Result<(), String> {
    crate::note::keep(path, note).map_err(|e| format!("{}: {e}", path.display()))
}
