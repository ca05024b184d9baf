//! The raft adapters: one per raft behind [`RaftAdapter`], each able to
//! take a peer out of its raft and to say which adapter it is, so the
//! recorded removal names it (SPEC §4, "Raft adapters").
//!
//! A removal is reported only once the raft's own membership listing no
//! longer names the peer: OpenBao's raft configuration, OVN's
//! `cluster/status` of both databases, pysyncobj's status. Whether the
//! peer was already gone is what that listing said before anything was
//! asked of the raft. Every call to a raft is bounded by one timeout, and
//! a child process still running at it is killed.

mod command;
mod openbao;
mod ovn;
mod patroni;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use stratum_domain::membership::Raft;
use tokio::time::Instant;

pub use command::CommandAdapter;
pub use openbao::OpenBaoAdapter;
pub use ovn::{OvnKick, OvnKickAdapter};
pub use patroni::{PatroniSyncobj, PatroniSyncobjAdapter};

/// How long one call to a raft may take, and how long a removal waits for
/// the raft's listing to stop naming the peer, unless configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a listing is read again while waiting for a change.
const POLL: Duration = Duration::from_millis(100);

/// The peer to take out of a raft.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftPeer {
    pub node_id: String,
    pub address: String,
}

impl RaftPeer {
    /// The address as a host in `host:port`: IPv6 in brackets.
    pub fn host(&self) -> String {
        if self.address.contains(':') {
            format!("[{}]", self.address)
        } else {
            self.address.clone()
        }
    }

    /// Fills the placeholders `{nodeId}`, `{address}` and `{host}`.
    pub fn fill(&self, template: &str) -> String {
        template
            .replace("{nodeId}", &self.node_id)
            .replace("{address}", &self.address)
            .replace("{host}", &self.host())
    }
}

/// What a removal found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The raft named the peer, was asked to remove it, and no longer
    /// names it.
    Removed,
    /// The peer was the raft's leader: leadership was moved to another
    /// voter first, then the peer was removed as above.
    RemovedAfterMovingLeader,
    /// The raft's listing did not name the peer before anything was
    /// asked: counts as done.
    AlreadyGone,
}

impl Removal {
    pub fn already_gone(self) -> bool {
        self == Removal::AlreadyGone
    }

    /// The outcome of a removal's last try, with what its earlier tries
    /// did: a peer that led when a try moved leadership off it, or that a
    /// try asked the raft to remove before failing (a timeout, a listing
    /// not yet changed), is recorded as such, not as found gone or found
    /// following.
    pub fn after(self, earlier: Progress) -> Removal {
        match self {
            Removal::AlreadyGone if !earlier.removal_asked => self,
            _ if earlier.leader_moved => Removal::RemovedAfterMovingLeader,
            Removal::AlreadyGone => Removal::Removed,
            Removal::Removed | Removal::RemovedAfterMovingLeader => self,
        }
    }

    pub fn leader_moved(self) -> bool {
        self == Removal::RemovedAfterMovingLeader
    }
}

/// A raft's own membership listing as read at one moment: every name it
/// gives its peers (in the forms [`RaftAdapter::names_of`] gives a peer),
/// and who leads it, so a change of leader (an election) can be seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub names: BTreeSet<String>,
    pub leader: Option<String>,
}

impl Listing {
    /// Whether the listing names a peer that goes by any of `forms`.
    pub fn names_any(&self, forms: &[String]) -> bool {
        forms.iter().any(|f| self.names.contains(f))
    }
}

/// Why a removal failed, as `/metrics` counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// A call did not answer within the timeout (a child was killed).
    Timeout,
    /// The raft could not be reached: connection refused, no control
    /// socket, a tool that could not run.
    Unreachable,
    /// The raft answered and said no (an HTTP error, `FAIL REMOVE`, a
    /// tool's non-zero exit).
    Refused,
    /// The raft accepted the request but its listing still named the peer
    /// when the timeout ran out (OVN's kick only starts a change).
    NotConfirmed,
    /// The raft's listing could not be read as one.
    Unreadable,
}

impl Failure {
    pub const ALL: [Failure; 5] = [
        Failure::Timeout,
        Failure::Unreachable,
        Failure::Refused,
        Failure::NotConfirmed,
        Failure::Unreadable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Timeout => "timeout",
            Failure::Unreachable => "unreachable",
            Failure::Refused => "refused",
            Failure::NotConfirmed => "not_confirmed",
            Failure::Unreadable => "unreadable",
        }
    }
}

/// What a try of a removal did before it ended, carried into the next try
/// (see [`Removal::after`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The peer led the raft, and leadership was asked to move off it.
    pub leader_moved: bool,
    /// The raft was asked to remove the peer.
    pub removal_asked: bool,
}

impl Progress {
    pub fn and(self, later: Progress) -> Progress {
        Progress {
            leader_moved: self.leader_moved || later.leader_moved,
            removal_asked: self.removal_asked || later.removal_asked,
        }
    }
}

/// A failed removal: why, the raft's or tool's whole message, and what the
/// try had done before it failed.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("{message}")]
pub struct AdapterError {
    pub failure: Failure,
    pub message: String,
    pub progress: Progress,
}

impl AdapterError {
    pub fn new(failure: Failure, message: impl Into<String>) -> Self {
        Self {
            failure,
            message: message.into(),
            progress: Progress::default(),
        }
    }

    /// The error, with what its try had done.
    pub fn after(mut self, done: Progress) -> Self {
        self.progress = self.progress.and(done);
        self
    }
}

/// Takes a peer out of one raft.
#[async_trait]
pub trait RaftAdapter: Send + Sync {
    /// Which adapter this is, as the recorded removal names it:
    /// `record-only`, `openbao-http`, `ovn-kick`, `patroni-syncobj` or
    /// `command`.
    fn name(&self) -> &str;

    /// What it calls, for the start-up log line; never a secret.
    fn target(&self) -> String {
        String::new()
    }

    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError>;

    /// The raft's own listing now, read as a removal reads it (bounded by
    /// the same timeout); `None` for an adapter that reads no listing
    /// (record-only, configured commands), whose raft is not watched for
    /// returned peers.
    async fn listing(&self) -> Option<Result<Listing, AdapterError>> {
        None
    }

    /// The names a [`Listing`] of this raft gives the peer.
    fn names_of(&self, _peer: &RaftPeer) -> Vec<String> {
        Vec::new()
    }
}

/// The name a record-only removal is recorded with.
pub const RECORD_ONLY: &str = stratum_domain::membership::RECORD_ONLY_ADAPTER;

/// The default on a single machine with none of the rafts: the removal is
/// recorded, as `record-only`, and succeeds, so the embedded default works
/// end to end and an auditor can tell it from a real removal.
#[derive(Debug, Default)]
pub struct RecordOnly;

#[async_trait]
impl RaftAdapter for RecordOnly {
    fn name(&self) -> &str {
        RECORD_ONLY
    }

    fn target(&self) -> String {
        "nothing is called; removals are recorded as record-only".to_owned()
    }

    async fn remove_peer(&self, _peer: &RaftPeer) -> Result<Removal, AdapterError> {
        Ok(Removal::Removed)
    }
}

/// How often each raft's listing is read for returned peers, unless
/// configured.
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(10);

/// One adapter per raft, and how often the rafts that can be listed are
/// read for members whose removal is recorded.
#[derive(Clone)]
pub struct RaftAdapters {
    pub patroni: Arc<dyn RaftAdapter>,
    pub openbao: Arc<dyn RaftAdapter>,
    pub ovn: Arc<dyn RaftAdapter>,
    pub recheck: Duration,
}

impl Default for RaftAdapters {
    fn default() -> Self {
        Self {
            patroni: Arc::new(RecordOnly),
            openbao: Arc::new(RecordOnly),
            ovn: Arc::new(RecordOnly),
            recheck: DEFAULT_RECHECK,
        }
    }
}

impl RaftAdapters {
    pub fn get(&self, raft: Raft) -> &Arc<dyn RaftAdapter> {
        match raft {
            Raft::Patroni => &self.patroni,
            Raft::Openbao => &self.openbao,
            Raft::Ovn => &self.ovn,
        }
    }

    /// Logs, one line per raft, which adapter it uses (never a secret).
    pub fn log(&self) {
        for raft in Raft::ALL {
            let a = self.get(raft);
            tracing::info!(
                raft = raft.as_str(),
                adapter = a.name(),
                calls = %a.target(),
                "raft adapter"
            );
        }
    }
}

/// Reads a listing until `names_peer` says it no longer names the peer,
/// or the deadline passes: then the raft has not (yet) made the change.
async fn until_gone<F, Fut>(
    deadline: Instant,
    what: &str,
    mut names_peer: F,
) -> Result<(), AdapterError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, AdapterError>>,
{
    loop {
        let last = match names_peer().await {
            Ok(false) => return Ok(()),
            Ok(true) => None,
            Err(e) => Some(e),
        };
        if Instant::now() + POLL > deadline {
            return Err(last.unwrap_or_else(|| {
                AdapterError::new(
                    Failure::NotConfirmed,
                    format!("{what} still names the peer; the removal is not confirmed"),
                )
            }));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A tool's whole message on one line: every line of standard error, or
/// of standard output when standard error is empty, joined by ` | `, at
/// most 16,000 characters.
fn whole_message(stdout: &str, stderr: &str) -> String {
    let lines = |t: &str| {
        t.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let text = match lines(stderr) {
        l if l.is_empty() => lines(stdout),
        l => l,
    };
    text.chars().take(16_000).collect()
}
