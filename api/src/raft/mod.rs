//! Raft cleanup: a process manager that takes failed and decommissioned
//! members back out of every raft they reached (SPEC §4).
//!
//! It reacts to the recorded facts, not to requests: whatever member the
//! read models show as failed or removing with rafts still to clean is
//! worked on, so pending cleanups resume after a restart from the log alone.
//! Each removal is recorded as an event through the ordinary command path;
//! the domain refuses to record one raft twice. Failures are retried with
//! exponential backoff. On PostgreSQL it runs on one replica at a time.
//!
//! A removal is recorded only after the raft's adapter said the peer is
//! gone (or was already gone), and the event names the adapter. It depends
//! on the write path and the store, never on HTTP.
//!
//! A removal recorded is kept true: each raft whose adapter reads a listing
//! is read again on an interval (sooner after an election it sees), and a
//! member whose removal is recorded but whom the listing names again (a
//! node that went on running its raft member) is recorded as returned
//! (`RaftPeerReturned`, the `raft-peer-returned` alarm), which owes that
//! raft its removal again: the same worker removes it, through the same
//! adapter, with the same confirmation.

pub mod adapters;
pub mod config;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use stratum_domain::event::DomainEvent;
use stratum_domain::iam::SERVICE_PRINCIPAL;
use stratum_domain::membership::{member_stream, MemberCommand, Raft};
use stratum_domain::stored::decode;
use stratum_domain::Command;
use stratum_projections::MemberRecord;
use tokio::time::Instant;
use tracing::Instrument;

pub use adapters::{
    AdapterError, CommandAdapter, Failure, Listing, OpenBaoAdapter, OvnKick, OvnKickAdapter,
    PatroniSyncobj, PatroniSyncobjAdapter, Progress, RaftAdapter, RaftAdapters, RaftPeer,
    RecordOnly, Removal, DEFAULT_RECHECK, DEFAULT_TIMEOUT, RECORD_ONLY,
};
pub use config::{ConfigError, RaftArgs};

use crate::backoff::Backoff;
use crate::command::{CommandBus, CommandRequest, Outcome};
use stratum_store::{EventStore, StoreError};

/// Whether this replica may run the raft cleanup now: only while its
/// process-manager settings are the agreed ones (the replica registry's
/// `Acting` answers it from the registry and the log).
#[async_trait::async_trait]
pub trait Agreed: Send + Sync {
    /// Whether this replica may act now; a no fails closed.
    async fn may_act(&self) -> bool;
    /// The digest of the settings it acts with, which each removal records.
    fn settings_digest(&self) -> &str;
}

/// How often the agreement is asked again: as often as replicas beat.
const AGREEMENT_CHECK: Duration = Duration::from_secs(5);

/// The advisory lock key of the raft cleanup role.
pub const RAFT_CLEANUP_LOCK: i64 = 0x5354_5241_0001;

/// The raft cleanup process manager: one worker per raft, so a raft that
/// hangs or fails delays only its own removals.
pub struct RaftCleanup {
    store: Arc<dyn EventStore>,
    bus: CommandBus,
    adapters: RaftAdapters,
    backoff: Backoff,
    acting: Arc<dyn Agreed>,
}

/// The removals of one raft.
struct Worker {
    store: Arc<dyn EventStore>,
    bus: CommandBus,
    raft: Raft,
    adapter: Arc<dyn RaftAdapter>,
    /// The digest of the settings it acts with (the agreed ones), which
    /// each removal records.
    settings: String,
    backoff: Backoff,
    /// When each failing removal may be tried again, its next delay, and
    /// what its tries so far did.
    retry: HashMap<String, (Instant, Duration, Progress)>,
    /// How often the raft's listing is read for returned peers.
    recheck: Duration,
    /// When it is read next; `None` once the adapter said it reads none.
    recheck_due: Option<Instant>,
    /// Who the last listing said leads: another leader is an election.
    leader_seen: Option<Option<String>>,
    /// Members recorded as returned, and until when (and for how long
    /// next) another return of theirs is not recorded: a node that keeps
    /// rejoining does not fill the log.
    hold_down: HashMap<String, (Instant, Duration)>,
    /// When this worker removed each member: a listing read within
    /// [`REMOVAL_SETTLES`] of it is not taken as the member's return.
    removed_at: HashMap<String, Instant>,
}

/// How long a raft's listing may go on naming a peer this worker just
/// removed: a follower that has not applied the configuration change yet
/// answers the old one for a moment (seen on a loaded machine in CI, over
/// the second the return's confirmation waits). A return after that is
/// one.
const REMOVAL_SETTLES: Duration = Duration::from_secs(5);

/// The longest a returned member waits before another return of it is
/// recorded.
const MAX_HOLD_DOWN: Duration = Duration::from_secs(3600);

/// How soon the listing is read again after an election was seen: a peer
/// that returns does so around one.
const AFTER_ELECTION: Duration = Duration::from_secs(1);

impl RaftCleanup {
    pub fn new(
        store: Arc<dyn EventStore>,
        bus: CommandBus,
        adapters: RaftAdapters,
        backoff: Backoff,
        acting: Arc<dyn Agreed>,
    ) -> Self {
        Self {
            store,
            bus,
            adapters,
            backoff,
            acting,
        }
    }

    /// Runs until the task is aborted: leads when its settings are the
    /// agreed ones and the lock is free; while it leads, each raft's worker
    /// works when the generation moves, when this replica folds in what
    /// another process committed (a replica that led before may record a
    /// return after this one took over), after recording a return, or when
    /// a retry or a listing check falls due.
    pub async fn run(self) {
        loop {
            if !self.acting.may_act().await {
                tokio::time::sleep(AGREEMENT_CHECK).await;
                continue;
            }
            let lead = match self.store.try_lead(RAFT_CLEANUP_LOCK).await {
                Ok(Some(l)) => l,
                Ok(None) => {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "raft cleanup cannot reach the store");
                    tokio::time::sleep(self.backoff.first).await;
                    continue;
                }
            };
            tracing::info!(
                settings = %self.acting.settings_digest(),
                "this replica runs the raft cleanup, with the agreed settings"
            );
            // The set aborts the workers when it is dropped, however this
            // loop ends.
            let mut workers = tokio::task::JoinSet::new();
            for raft in Raft::ALL {
                workers.spawn(
                    Worker {
                        store: self.store.clone(),
                        bus: self.bus.clone(),
                        raft,
                        adapter: self.adapters.get(raft).clone(),
                        settings: self.acting.settings_digest().to_owned(),
                        backoff: self.backoff,
                        retry: HashMap::new(),
                        recheck: self.adapters.recheck,
                        recheck_due: Some(Instant::now()),
                        leader_seen: None,
                        hold_down: HashMap::new(),
                        removed_at: HashMap::new(),
                    }
                    .run(),
                );
            }
            let mut agreement = tokio::time::interval(AGREEMENT_CHECK);
            agreement.tick().await;
            loop {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {
                        if !lead.still_held().await {
                            tracing::warn!("lost the raft cleanup lock; trying to take it again");
                            break;
                        }
                    }
                    _ = agreement.tick() => {
                        if !self.acting.may_act().await {
                            // The alarm says why; another replica takes over.
                            break;
                        }
                    }
                }
            }
            drop(workers);
            drop(lead);
        }
    }
}

impl Worker {
    async fn run(mut self) {
        let mut generations = self.bus.generations();
        let mut others = self.bus.others_folded();
        loop {
            generations.borrow_and_update();
            others.borrow_and_update();
            let next = match self.pass().await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(raft = self.raft.as_str(), error = %e, "raft cleanup pass failed");
                    Some(Instant::now() + self.backoff.first)
                }
            };
            if self.recheck_due.is_some_and(|due| due <= Instant::now()) {
                match self.recheck().await {
                    Ok(false) => {}
                    // A return owes the cleanup again: at once, not at
                    // the next generation.
                    Ok(true) => continue,
                    // It may have recorded a return before it failed.
                    Err(e) => {
                        tracing::warn!(raft = self.raft.as_str(), error = %e, "raft listing check failed");
                        continue;
                    }
                }
            }
            let wake = [next, self.recheck_due]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(30));
            // Closed only when the writer stopped: nothing moves again.
            tokio::select! {
                changed = generations.changed() => if changed.is_err() { return },
                changed = others.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// One pass over this raft's pending removals; answers when a retry
    /// falls due.
    async fn pass(&mut self) -> Result<Option<Instant>, StoreError> {
        let raft = self.raft;
        let mut next: Option<Instant> = None;
        for record in pending(&self.store, &self.bus).await? {
            if !record.raft_cleanup_pending.contains(&raft) {
                continue;
            }
            let key = record.node_id.clone();
            if let Some((due, _, _)) = self.retry.get(&key) {
                if *due > Instant::now() {
                    next = Some(next.map_or(*due, |n| n.min(*due)));
                    continue;
                }
            }
            let peer = RaftPeer {
                node_id: record.node_id.clone(),
                address: record.mgmt_ip.clone(),
            };
            // The call continues the trace of the decommission that asked
            // for it, when this replica took that command.
            // A failed call is marked so in the trace (and says why), as a
            // request that failed is: the retry is another call.
            let call = tracing::debug_span!(
                "raft remove peer",
                raft = raft.as_str(),
                adapter = self.adapter.name(),
                node_id = %record.node_id,
                otel.status_code = tracing::field::Empty,
                error.type = tracing::field::Empty,
            );
            crate::telemetry::continue_cause(&call, &record.node_id);
            match self
                .adapter
                .remove_peer(&peer)
                .instrument(call.clone())
                .await
            {
                Ok(outcome) => {
                    crate::metrics::global()
                        .raft_removals
                        .with_label_values(&[raft.as_str()])
                        .inc();
                    let earlier = self.retry.remove(&key).map(|(_, _, done)| done);
                    let outcome = outcome.after(earlier.unwrap_or_default());
                    self.record_removal(&record, outcome)
                        .instrument(call)
                        .await?;
                    self.removed_at.insert(key.clone(), Instant::now());
                }
                Err(e) => {
                    call.record("otel.status_code", "error");
                    call.record("error.type", e.failure.as_str());
                    crate::metrics::global()
                        .raft_failures
                        .with_label_values(&[raft.as_str(), e.failure.as_str()])
                        .inc();
                    let (delay, done) = match self.retry.get(&key) {
                        Some((_, d, done)) => (self.backoff.after(*d), done.and(e.progress)),
                        None => (self.backoff.first, e.progress),
                    };
                    let due = Instant::now() + delay;
                    tracing::warn!(
                        node_id = %record.node_id,
                        raft = raft.as_str(),
                        adapter = self.adapter.name(),
                        reason = e.failure.as_str(),
                        error = %e.message,
                        retry_in_ms = delay.as_millis() as u64,
                        "raft removal failed"
                    );
                    self.retry.insert(key, (due, delay, done));
                    next = Some(next.map_or(due, |n| n.min(due)));
                }
            }
        }
        Ok(next)
    }
}

impl Worker {
    /// The raft's listing, in a span of its own, marked as an error (with
    /// its kind) when the listing could not be read, as a removal's is.
    async fn listing(&self) -> Option<Result<Listing, AdapterError>> {
        let call = tracing::debug_span!(
            "raft listing",
            raft = self.raft.as_str(),
            adapter = self.adapter.name(),
            otel.status_code = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let listing = self.adapter.listing().instrument(call.clone()).await;
        if let Some(Err(e)) = &listing {
            call.record("otel.status_code", "error");
            call.record("error.type", e.failure.as_str());
        }
        listing
    }

    /// Reads the raft's listing, if any member's removal from it is recorded,
    /// and records each such member it names again (twice, a second apart:
    /// a listing read in the middle of a change does not raise an alarm).
    /// The members are taken from the read models before the listing is
    /// read, and a return is recorded only against a removal they held
    /// then, so a removal recorded meanwhile (by another replica that took
    /// the cleanup over) is never taken for a return. Whether it recorded
    /// one.
    async fn recheck(&mut self) -> Result<bool, StoreError> {
        let raft = self.raft;
        self.recheck_due = Some(Instant::now() + self.recheck);
        let now = Instant::now();
        self.hold_down.retain(|_, (until, d)| *until + *d > now);
        self.removed_at
            .retain(|_, at| now.duration_since(*at) < REMOVAL_SETTLES);
        let (seen_at, mut removed) = removed_from(&self.store, &self.bus, raft).await?;
        removed.retain(|p| {
            self.hold_down
                .get(&p.node_id)
                .is_none_or(|(until, _)| *until <= now)
                && !self.removed_at.contains_key(&p.node_id)
        });
        if removed.is_empty() {
            // Nothing to look for: the raft is not called.
            return Ok(false);
        }
        let listing = match self.listing().await {
            None => {
                tracing::info!(
                    raft = raft.as_str(),
                    adapter = self.adapter.name(),
                    "this adapter reads no listing: returned peers are not watched for"
                );
                self.recheck_due = None;
                return Ok(false);
            }
            Some(Err(e)) => {
                tracing::warn!(raft = raft.as_str(), reason = e.failure.as_str(), error = %e.message, "cannot read the raft's listing for returned peers");
                return Ok(false);
            }
            Some(Ok(listing)) => listing,
        };
        let elected = self
            .leader_seen
            .as_ref()
            .is_some_and(|seen| *seen != listing.leader);
        if elected {
            tracing::info!(raft = raft.as_str(), leader = ?listing.leader, "the raft has another leader; its listing is read again soon");
            self.recheck_due = Some(Instant::now() + AFTER_ELECTION);
        }
        self.leader_seen = Some(listing.leader.clone());
        let mut named: Vec<RaftPeer> = removed
            .into_iter()
            .filter(|p| listing.names_any(&self.adapter.names_of(p)))
            .collect();
        if named.is_empty() {
            return Ok(false);
        }
        tokio::time::sleep(AFTER_ELECTION).await;
        match self.listing().await {
            Some(Ok(again)) => named.retain(|p| again.names_any(&self.adapter.names_of(p))),
            Some(Err(e)) => {
                tracing::warn!(raft = raft.as_str(), reason = e.failure.as_str(), error = %e.message, "cannot read the raft's listing again to confirm a returned peer");
                return Ok(false);
            }
            None => return Ok(false),
        }
        let mut recorded = false;
        for peer in named {
            if record_return(&self.store, &self.bus, &peer, raft, seen_at).await? {
                recorded = true;
                let d = self
                    .hold_down
                    .get(&peer.node_id)
                    .map_or(self.recheck, |(_, d)| (*d * 2).min(MAX_HOLD_DOWN));
                self.hold_down
                    .insert(peer.node_id.clone(), (Instant::now() + d, d));
            }
        }
        Ok(recorded)
    }
}

/// The position of the read models, and the members whose removal from
/// `raft` is recorded there and stands, as the raft names them; those
/// the domain would not record a return of (another live member holds
/// the address) are left out, so they cost no listing.
async fn removed_from(
    store: &Arc<dyn EventStore>,
    bus: &CommandBus,
    raft: Raft,
) -> Result<(u64, Vec<RaftPeer>), StoreError> {
    let rm = as_it_stands(store, bus).await?;
    let m = &rm.state.membership;
    let removed = m
        .members
        .values()
        .filter(|x| x.rafts_removed.contains(&raft) && m.address_holder(x).is_none())
        .map(|x| RaftPeer {
            node_id: x.node_id.clone(),
            address: x.mgmt_ip.clone(),
        })
        .collect();
    Ok((rm.state.position, removed))
}

/// Records that `raft` names `peer` again, naming the removal it undoes
/// (the newest of that raft in the member's stream, which must be at or
/// before `seen_at`, the position the listing was compared against) as
/// its cause. Answers whether a return was recorded.
async fn record_return(
    store: &Arc<dyn EventStore>,
    bus: &CommandBus,
    peer: &RaftPeer,
    raft: Raft,
    seen_at: u64,
) -> Result<bool, StoreError> {
    let stream = store.read_stream(&member_stream(&peer.node_id)).await?;
    let Some(removal) = stream.iter().rev().find(|e| {
        matches!(
            decode(&e.event_type, e.schema_version, &e.payload),
            Ok(DomainEvent::RaftPeerRemoved { raft: r, .. }) if r == raft
        )
    }) else {
        return Ok(false);
    };
    if removal.position > seen_at {
        // Removed again since the listing was compared: not this return.
        return Ok(false);
    }
    let mut req = CommandRequest::new(
        Command::Member(MemberCommand::RecordRaftPeerReturn {
            node_id: peer.node_id.clone(),
            raft,
            removed_position: removal.position,
            removed_at: removal.occurred_at,
        }),
        SERVICE_PRINCIPAL,
    );
    req.meta.causation = Some(removal.position);
    match bus.execute(req).await {
        // Nothing appended: the return was recorded already.
        Ok(Outcome::Committed(c)) if c.position.is_none() => Ok(false),
        Ok(Outcome::Committed(_)) => {
            crate::metrics::global()
                .raft_returns
                .with_label_values(&[raft.as_str()])
                .inc();
            tracing::warn!(
                node_id = %peer.node_id,
                raft = raft.as_str(),
                removed_position = removal.position,
                "a removed peer is back in the raft; it is removed again"
            );
            Ok(true)
        }
        Ok(Outcome::Refused(r)) => {
            tracing::warn!(node_id = %peer.node_id, raft = raft.as_str(), code = r.code.as_str(), message = %r.message, "return not recorded");
            Ok(false)
        }
        Err(e) => Err(StoreError::Unavailable(e.to_string())),
    }
}

/// The read models once they include the log as it stands in the store
/// (whoever appended to it).
async fn as_it_stands(
    store: &Arc<dyn EventStore>,
    bus: &CommandBus,
) -> Result<Arc<stratum_projections::ReadModels>, StoreError> {
    let head = store.head().await?.position;
    bus.reached(head)
        .await
        .map_err(|e| StoreError::Unavailable(e.to_string()))
}

/// Every member with rafts still to clean: failed and removing members,
/// and demoted voters; from the read models once they include the log as
/// it stands.
async fn pending(
    store: &Arc<dyn EventStore>,
    bus: &CommandBus,
) -> Result<Vec<MemberRecord>, StoreError> {
    let rm = as_it_stands(store, bus).await?;
    let m = &rm.state.membership;
    Ok(m.members
        .values()
        .filter(|member| !member.pending_cleanup().is_empty())
        .map(|member| stratum_projections::member_record(member, Some(m.generation)))
        .collect())
}

impl Worker {
    /// Records one removal, caused by the event that asked for the cleanup,
    /// with the adapter that made it and the settings it acted with.
    async fn record_removal(&self, m: &MemberRecord, outcome: Removal) -> Result<(), StoreError> {
        let (store, bus, raft) = (&self.store, &self.bus, self.raft);
        let adapter = self.adapter.name();
        // The cause is the newest event of the member's stream that asked
        // for a cleanup, found by what it is, not by its type's name.
        let causation = store
            .read_stream(&member_stream(&m.node_id))
            .await?
            .iter()
            .rev()
            .find(|e| {
                decode(&e.event_type, e.schema_version, &e.payload)
                    .is_ok_and(|d| d.asks_for_raft_cleanup())
            })
            .map(|e| e.position);
        let mut req = CommandRequest::new(
            Command::Member(MemberCommand::RecordRaftRemoval {
                node_id: m.node_id.clone(),
                raft,
                already_gone: outcome.already_gone(),
                adapter: adapter.to_owned(),
                leader_moved: outcome.leader_moved(),
                settings: Some(self.settings.clone()),
            }),
            SERVICE_PRINCIPAL,
        );
        req.meta.causation = causation;
        match bus.execute(req).await {
            Ok(Outcome::Committed(_)) => {
                tracing::info!(node_id = %m.node_id, raft = raft.as_str(), adapter, ?outcome, "taken out of raft");
                Ok(())
            }
            Ok(Outcome::Refused(r)) => {
                tracing::warn!(node_id = %m.node_id, raft = raft.as_str(), code = r.code.as_str(), message = %r.message, "removal not recorded");
                Ok(())
            }
            Err(e) => Err(StoreError::Unavailable(e.to_string())),
        }
    }
}
