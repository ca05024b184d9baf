//! Raft cleanup: a process manager that takes failed and decommissioned
//! members back out of every raft they reached (SPEC §4).
//!
//! It reacts to the recorded facts, not to requests: whatever member the
//! read models show as failed or removing with rafts still to clean is
//! worked on, so pending cleanups resume after a restart from the log alone.
//! Each removal is recorded as an event through the ordinary command path;
//! the domain refuses to record one raft twice. Failures are retried with
//! exponential backoff. On PostgreSQL it runs on one replica at a time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use stratum_domain::iam::SERVICE_PRINCIPAL;
use stratum_domain::membership::{member_stream, MemberCommand, MemberState, Raft};
use stratum_domain::Command;
use stratum_projections::MemberRecord;
use tokio::time::Instant;

use crate::command::CommandRequest;
use crate::http::AppState;
use crate::store::MemberFilter;

/// The advisory lock key of the raft cleanup role.
pub const RAFT_CLEANUP_LOCK: i64 = 0x5354_5241_0001;

/// The peer to take out of a raft.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftPeer {
    pub node_id: String,
    pub address: String,
}

/// What a removal found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    Removed,
    /// The peer was not there: counts as done.
    AlreadyGone,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AdapterError(pub String);

/// Takes a peer out of one raft.
#[async_trait]
pub trait RaftAdapter: Send + Sync {
    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError>;
}

/// The default on a single machine with no raft to call: the removal is
/// recorded and succeeds, so the embedded default works end to end.
#[derive(Debug, Default)]
pub struct RecordOnly;

#[async_trait]
impl RaftAdapter for RecordOnly {
    async fn remove_peer(&self, _peer: &RaftPeer) -> Result<Removal, AdapterError> {
        Ok(Removal::Removed)
    }
}

/// Runs configured commands, given as argument vectors (never shell
/// strings) with `{nodeId}` and `{address}` placeholders: OVN's
/// `ovs-appctl ... cluster/kick` on both databases, or Patroni's
/// `syncobj_admin -remove`. Every command must succeed; an exit status in
/// `gone_statuses`, or an error saying the server is unknown or not found,
/// means the peer was already gone (so a retry after a partial success
/// finishes instead of failing on the part already done).
#[derive(Clone, Debug)]
pub struct CommandAdapter {
    pub commands: Vec<Vec<String>>,
    pub gone_statuses: Vec<i32>,
}

#[async_trait]
impl RaftAdapter for CommandAdapter {
    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError> {
        let mut outcome = Removal::AlreadyGone;
        for argv in &self.commands {
            let args: Vec<String> = argv
                .iter()
                .map(|a| {
                    a.replace("{nodeId}", &peer.node_id)
                        .replace("{address}", &peer.address)
                })
                .collect();
            let Some((program, rest)) = args.split_first() else {
                return Err(AdapterError("an empty command is configured".into()));
            };
            let out = tokio::process::Command::new(program)
                .args(rest)
                .kill_on_drop(true)
                .output()
                .await
                .map_err(|e| AdapterError(format!("{program}: {e}")))?;
            match out.status.code() {
                Some(0) => outcome = Removal::Removed,
                Some(c) if self.gone_statuses.contains(&c) => {}
                _ if says_gone(&out.stderr) || says_gone(&out.stdout) => {}
                _ => {
                    let err = String::from_utf8_lossy(&out.stderr);
                    let line = err.lines().last().unwrap_or("").trim();
                    return Err(AdapterError(format!(
                        "{program} exited with {}: {line}",
                        out.status
                    )));
                }
            }
        }
        Ok(outcome)
    }
}

fn says_gone(output: &[u8]) -> bool {
    let text = String::from_utf8_lossy(output).to_lowercase();
    [
        "unknown server",
        "not found",
        "no such server",
        "not a member",
    ]
    .iter()
    .any(|p| text.contains(p))
}

/// One adapter per raft.
#[derive(Clone)]
pub struct RaftAdapters {
    pub patroni: Arc<dyn RaftAdapter>,
    pub openbao: Arc<dyn RaftAdapter>,
    pub ovn: Arc<dyn RaftAdapter>,
}

impl Default for RaftAdapters {
    fn default() -> Self {
        Self {
            patroni: Arc::new(RecordOnly),
            openbao: Arc::new(RecordOnly),
            ovn: Arc::new(RecordOnly),
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
}

/// Retry timing of failed removals.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }
}

/// The raft cleanup process manager.
pub struct RaftCleanup {
    state: AppState,
    adapters: RaftAdapters,
    backoff: Backoff,
    /// When each failing removal may be tried again, and its next delay.
    retry: HashMap<(String, Raft), (Instant, Duration)>,
}

impl RaftCleanup {
    pub fn new(state: AppState, adapters: RaftAdapters, backoff: Backoff) -> Self {
        Self {
            state,
            adapters,
            backoff,
            retry: HashMap::new(),
        }
    }

    /// Runs until the task is aborted: leads when it can, works when the log
    /// moves or a retry falls due.
    pub async fn run(mut self) {
        let mut head = self.state.bus.head();
        loop {
            let lead = match self.state.store.try_lead(RAFT_CLEANUP_LOCK).await {
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
            loop {
                head.borrow_and_update();
                let next = match self.pass().await {
                    Ok(next) => next,
                    Err(e) => {
                        tracing::warn!(error = %e, "raft cleanup pass failed");
                        Some(Instant::now() + self.backoff.first)
                    }
                };
                let wake = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(30));
                tokio::select! {
                    _ = head.changed() => {}
                    _ = tokio::time::sleep_until(wake) => {}
                }
                if !lead.still_held().await {
                    tracing::warn!("lost the raft cleanup lock; trying to take it again");
                    break;
                }
            }
            drop(lead);
        }
    }

    /// One pass over every pending removal; answers when a retry falls due.
    pub async fn pass(&mut self) -> Result<Option<Instant>, crate::store::StoreError> {
        let mut next: Option<Instant> = None;
        for record in self.pending().await? {
            for raft in record.raft_cleanup_pending.clone() {
                let key = (record.node_id.clone(), raft);
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
                match self.adapters.get(raft).remove_peer(&peer).await {
                    Ok(outcome) => {
                        self.retry.remove(&key);
                        self.record(&record, raft, outcome).await?;
                    }
                    Err(e) => {
                        let delay = self
                            .retry
                            .get(&key)
                            .map_or(self.backoff.first, |(_, d)| (*d * 2).min(self.backoff.max));
                        let due = Instant::now() + delay;
                        tracing::warn!(node_id = %record.node_id, raft = raft.as_str(), error = %e, retry_in_ms = delay.as_millis() as u64, "raft removal failed");
                        self.retry.insert(key, (due, delay));
                        next = Some(next.map_or(due, |n| n.min(due)));
                    }
                }
            }
        }
        Ok(next)
    }

    async fn pending(&self) -> Result<Vec<MemberRecord>, crate::store::StoreError> {
        let mut out = Vec::new();
        for state in [MemberState::Failed, MemberState::Removing] {
            let mut after = None;
            loop {
                let docs = self
                    .state
                    .store
                    .member_docs(&MemberFilter {
                        state: Some(state.as_str().to_owned()),
                        after: after.clone(),
                        limit: 500,
                        ..Default::default()
                    })
                    .await?;
                let n = docs.len();
                for d in docs {
                    let r: MemberRecord = serde_json::from_str(&d)
                        .map_err(|e| crate::store::StoreError::Corrupt(e.to_string()))?;
                    after = Some(r.node_id.clone());
                    if !r.raft_cleanup_pending.is_empty() {
                        out.push(r);
                    }
                }
                if n < 500 {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Records one removal, caused by the event that asked for the cleanup.
    async fn record(
        &self,
        m: &MemberRecord,
        raft: Raft,
        outcome: Removal,
    ) -> Result<(), crate::store::StoreError> {
        let causation = self
            .state
            .store
            .read_stream(&member_stream(&m.node_id))
            .await?
            .iter()
            .rev()
            .find(|e| e.event_type == "MemberJoinFailed" || e.event_type == "MemberRemovalStarted")
            .map(|e| e.position);
        let mut req = CommandRequest::new(
            Command::Member(MemberCommand::RecordRaftRemoval {
                node_id: m.node_id.clone(),
                raft,
                already_gone: outcome == Removal::AlreadyGone,
            }),
            SERVICE_PRINCIPAL,
        );
        req.meta.causation = causation;
        match self.state.bus.execute(req).await {
            Ok(reply) if reply.status < 300 => {
                tracing::info!(node_id = %m.node_id, raft = raft.as_str(), ?outcome, "taken out of raft");
                Ok(())
            }
            Ok(reply) => {
                tracing::warn!(node_id = %m.node_id, raft = raft.as_str(), status = reply.status, "removal not recorded");
                Ok(())
            }
            Err(e) => Err(crate::store::StoreError::Unavailable(e.message)),
        }
    }
}

/// OpenBao's raft, over its HTTP API: `POST /v1/sys/storage/raft/remove-peer`
/// with `{"server_id": nodeId}` and the `X-Vault-Token` header, against the
/// active node (a standby redirects there).
pub struct OpenBaoAdapter {
    client: reqwest::Client,
    addr: String,
    token: String,
}

impl std::fmt::Debug for OpenBaoAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenBaoAdapter")
            .field("addr", &self.addr)
            .field("token", &"***")
            .finish()
    }
}

impl OpenBaoAdapter {
    /// `addr` like `https://10.0.0.1:8200`; `ca_pem` the cluster CA, if
    /// OpenBao's certificate is not signed by a public root.
    pub fn new(addr: &str, token: String, ca_pem: Option<&[u8]>) -> Result<Self, AdapterError> {
        let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
        if let Some(pem) = ca_pem {
            let ca = reqwest::Certificate::from_pem(pem)
                .map_err(|e| AdapterError(format!("OpenBao CA certificate: {e}")))?;
            builder = builder.add_root_certificate(ca);
        }
        Ok(Self {
            client: builder
                .build()
                .map_err(|e| AdapterError(format!("OpenBao client: {e}")))?,
            addr: addr.trim_end_matches('/').to_owned(),
            token,
        })
    }
}

#[async_trait]
impl RaftAdapter for OpenBaoAdapter {
    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError> {
        let res = self
            .client
            .post(format!("{}/v1/sys/storage/raft/remove-peer", self.addr))
            .header("X-Vault-Token", &self.token)
            .json(&serde_json::json!({ "server_id": peer.node_id }))
            .send()
            .await
            .map_err(|e| AdapterError(format!("OpenBao unreachable: {}", e.without_url())))?;
        let status = res.status();
        if status.is_success() {
            return Ok(Removal::Removed);
        }
        let body = res.text().await.unwrap_or_default();
        // OpenBao answers a peer that is not in the configuration with an
        // error naming it as not found: already gone counts as done.
        // A bare 404 may be a wrong address or path: only an answer that
        // says the peer is not found counts.
        let gone = status.is_client_error() && body.to_lowercase().contains("not found");
        if gone {
            return Ok(Removal::AlreadyGone);
        }
        let line = body
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect::<String>();
        Err(AdapterError(format!("OpenBao answered {status}: {line}")))
    }
}

/// The raft adapters the environment configures; the record-only default
/// for any raft it does not name.
///
/// - `STRATUM_OPENBAO_ADDR`, `STRATUM_OPENBAO_TOKEN` (and optionally
///   `STRATUM_OPENBAO_CACERT`, a PEM file): OpenBao over HTTP.
/// - `STRATUM_RAFT_OVN_COMMANDS`, `STRATUM_RAFT_PATRONI_COMMANDS`: JSON arrays
///   of argument vectors with `{nodeId}` and `{address}` placeholders, e.g.
///   `[["ovs-appctl","-t","/var/run/ovn/ovnnb_db.ctl","cluster/kick","OVN_Northbound","{address}"],
///     ["ovs-appctl","-t","/var/run/ovn/ovnsb_db.ctl","cluster/kick","OVN_Southbound","{address}"]]`.
pub fn adapters_from_env() -> Result<RaftAdapters, AdapterError> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut adapters = RaftAdapters::default();
    if let Some(addr) = var("STRATUM_OPENBAO_ADDR") {
        let token = var("STRATUM_OPENBAO_TOKEN").ok_or_else(|| {
            AdapterError("STRATUM_OPENBAO_ADDR is set without STRATUM_OPENBAO_TOKEN".into())
        })?;
        let ca = match var("STRATUM_OPENBAO_CACERT") {
            Some(path) => {
                Some(std::fs::read(&path).map_err(|e| AdapterError(format!("{path}: {e}")))?)
            }
            None => None,
        };
        adapters.openbao = Arc::new(OpenBaoAdapter::new(&addr, token, ca.as_deref())?);
    }
    let commands = |k: &str| -> Result<Option<CommandAdapter>, AdapterError> {
        let Some(json) = var(k) else { return Ok(None) };
        let commands: Vec<Vec<String>> = serde_json::from_str(&json).map_err(|e| {
            AdapterError(format!("{k} must be a JSON array of argument vectors: {e}"))
        })?;
        if commands.is_empty() || commands.iter().any(Vec::is_empty) {
            return Err(AdapterError(format!("{k} names an empty command")));
        }
        Ok(Some(CommandAdapter {
            commands,
            gone_statuses: Vec::new(),
        }))
    };
    if let Some(c) = commands("STRATUM_RAFT_OVN_COMMANDS")? {
        adapters.ovn = Arc::new(c);
    }
    if let Some(c) = commands("STRATUM_RAFT_PATRONI_COMMANDS")? {
        adapters.patroni = Arc::new(c);
    }
    Ok(adapters)
}
