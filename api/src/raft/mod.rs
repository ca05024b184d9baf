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

pub mod adapters;
pub mod config;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use stratum_domain::iam::SERVICE_PRINCIPAL;
use stratum_domain::membership::{member_stream, MemberCommand, Raft};
use stratum_domain::stored::decode;
use stratum_domain::Command;
use stratum_projections::MemberRecord;
use tokio::time::Instant;

pub use adapters::{
    AdapterError, CommandAdapter, Failure, OpenBaoAdapter, OvnKick, OvnKickAdapter, PatroniSyncobj,
    PatroniSyncobjAdapter, RaftAdapter, RaftAdapters, RaftPeer, RecordOnly, Removal,
    DEFAULT_TIMEOUT, RECORD_ONLY,
};
pub use config::{ConfigError, RaftArgs};

use crate::backoff::Backoff;
use crate::command::{CommandBus, CommandRequest, Outcome};
use stratum_store::{EventStore, StoreError};

/// The advisory lock key of the raft cleanup role.
pub const RAFT_CLEANUP_LOCK: i64 = 0x5354_5241_0001;

/// The raft cleanup process manager: one worker per raft, so a raft that
/// hangs or fails delays only its own removals.
pub struct RaftCleanup {
    store: Arc<dyn EventStore>,
    bus: CommandBus,
    adapters: RaftAdapters,
    backoff: Backoff,
}

/// The removals of one raft.
struct Worker {
    store: Arc<dyn EventStore>,
    bus: CommandBus,
    raft: Raft,
    adapter: Arc<dyn RaftAdapter>,
    backoff: Backoff,
    /// When each failing removal may be tried again, and its next delay.
    retry: HashMap<String, (Instant, Duration)>,
}

impl RaftCleanup {
    pub fn new(
        store: Arc<dyn EventStore>,
        bus: CommandBus,
        adapters: RaftAdapters,
        backoff: Backoff,
    ) -> Self {
        Self {
            store,
            bus,
            adapters,
            backoff,
        }
    }

    /// Runs until the task is aborted: leads when it can; while it leads,
    /// each raft's worker works when the log moves or a retry falls due.
    pub async fn run(self) {
        loop {
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
                        backoff: self.backoff,
                        retry: HashMap::new(),
                    }
                    .run(),
                );
            }
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if !lead.still_held().await {
                    tracing::warn!("lost the raft cleanup lock; trying to take it again");
                    break;
                }
            }
            drop(workers);
            drop(lead);
        }
    }
}

impl Worker {
    async fn run(mut self) {
        let mut head = self.bus.head();
        loop {
            head.borrow_and_update();
            let next = match self.pass().await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(raft = self.raft.as_str(), error = %e, "raft cleanup pass failed");
                    Some(Instant::now() + self.backoff.first)
                }
            };
            let wake = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(30));
            tokio::select! {
                _ = head.changed() => {}
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
            if let Some((due, _)) = self.retry.get(&key) {
                if *due > Instant::now() {
                    next = Some(next.map_or(*due, |n| n.min(*due)));
                    continue;
                }
            }
            let peer = RaftPeer {
                node_id: record.node_id.clone(),
                address: record.mgmt_ip.clone(),
            };
            match self.adapter.remove_peer(&peer).await {
                Ok(outcome) => {
                    crate::metrics::global()
                        .raft_removals
                        .with_label_values(&[raft.as_str()])
                        .inc();
                    self.retry.remove(&key);
                    record_removal(
                        &self.store,
                        &self.bus,
                        &record,
                        raft,
                        outcome,
                        self.adapter.name(),
                    )
                    .await?;
                }
                Err(e) => {
                    crate::metrics::global()
                        .raft_failures
                        .with_label_values(&[raft.as_str(), e.failure.as_str()])
                        .inc();
                    let delay = self
                        .retry
                        .get(&key)
                        .map_or(self.backoff.first, |(_, d)| self.backoff.after(*d));
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
                    self.retry.insert(key, (due, delay));
                    next = Some(next.map_or(due, |n| n.min(due)));
                }
            }
        }
        Ok(next)
    }
}

/// Every member with rafts still to clean: failed and removing members,
/// and demoted voters; from the read models once they include the log as
/// it stands.
async fn pending(
    store: &Arc<dyn EventStore>,
    bus: &CommandBus,
) -> Result<Vec<MemberRecord>, StoreError> {
    let head = store.head().await?.position;
    let rm = bus
        .reached(head)
        .await
        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
    let m = &rm.state.membership;
    Ok(m.members
        .values()
        .filter(|member| !member.pending_cleanup().is_empty())
        .map(|member| stratum_projections::member_record(member, Some(m.generation)))
        .collect())
}

/// Records one removal, caused by the event that asked for the cleanup.
async fn record_removal(
    store: &Arc<dyn EventStore>,
    bus: &CommandBus,
    m: &MemberRecord,
    raft: Raft,
    outcome: Removal,
    adapter: &str,
) -> Result<(), StoreError> {
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
