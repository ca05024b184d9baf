//! OpenBao's raft, over its HTTP API: the configuration is read from
//! `GET /v1/sys/storage/raft/configuration`, the peer removed with `POST
//! /v1/sys/storage/raft/remove-peer {"server_id": nodeId}`, both with the
//! `X-Vault-Token` header against any node (a standby forwards or
//! redirects to the active one).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use tokio::time::Instant;

use super::{until_gone, AdapterError, Failure, Listing, Progress, RaftAdapter, RaftPeer, Removal};

const CONFIGURATION: &str = "/v1/sys/storage/raft/configuration";
const REMOVE_PEER: &str = "/v1/sys/storage/raft/remove-peer";

pub struct OpenBaoAdapter {
    client: reqwest::Client,
    addr: String,
    token: String,
    timeout: Duration,
}

impl std::fmt::Debug for OpenBaoAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenBaoAdapter")
            .field("addr", &self.addr)
            .field("token", &"***")
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// One server of OpenBao's raft configuration.
#[derive(Debug, Deserialize)]
pub(super) struct Server {
    pub node_id: String,
    #[serde(default)]
    pub leader: bool,
}

#[derive(Deserialize)]
struct Configuration {
    data: ConfigurationData,
}

#[derive(Deserialize)]
struct ConfigurationData {
    config: ConfigurationServers,
}

#[derive(Deserialize)]
struct ConfigurationServers {
    servers: Vec<Server>,
}

impl OpenBaoAdapter {
    /// `addr` like `https://10.0.0.1:8200`; `ca_pem` the cluster CA, if
    /// OpenBao's certificate is not signed by a public root; `timeout`
    /// bounds each request and the wait for the configuration to change.
    pub fn new(
        addr: &str,
        token: String,
        ca_pem: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Self, AdapterError> {
        let mut builder = reqwest::Client::builder().timeout(timeout);
        if let Some(pem) = ca_pem {
            let ca = reqwest::Certificate::from_pem(pem).map_err(|e| {
                AdapterError::new(Failure::Unreachable, format!("OpenBao CA certificate: {e}"))
            })?;
            builder = builder.add_root_certificate(ca);
        }
        Ok(Self {
            client: builder.build().map_err(|e| {
                AdapterError::new(Failure::Unreachable, format!("OpenBao client: {e}"))
            })?,
            addr: addr.trim_end_matches('/').to_owned(),
            token,
            timeout,
        })
    }

    fn failed(e: reqwest::Error) -> AdapterError {
        let e = e.without_url();
        if e.is_timeout() {
            AdapterError::new(
                Failure::Timeout,
                format!("OpenBao did not answer in time: {e}"),
            )
        } else {
            AdapterError::new(Failure::Unreachable, format!("OpenBao unreachable: {e}"))
        }
    }

    /// The servers OpenBao's raft configuration names now.
    pub(super) async fn servers(&self) -> Result<Vec<Server>, AdapterError> {
        let res = self
            .client
            .get(format!("{}{CONFIGURATION}", self.addr))
            .header("X-Vault-Token", &self.token)
            .headers(traced())
            .send()
            .await
            .map_err(Self::failed)?;
        let status = res.status();
        let body = res.text().await.map_err(Self::failed)?;
        if !status.is_success() {
            return Err(AdapterError::new(
                Failure::Refused,
                format!(
                    "OpenBao answered {status} to GET {CONFIGURATION}: {}",
                    one_line(&body)
                ),
            ));
        }
        serde_json::from_str::<Configuration>(&body)
            .map(|c| c.data.config.servers)
            .map_err(|e| {
                AdapterError::new(
                    Failure::Unreadable,
                    format!("OpenBao's raft configuration does not read as one: {e}"),
                )
            })
    }

    async fn names(&self, peer: &RaftPeer) -> Result<bool, AdapterError> {
        Ok(self
            .servers()
            .await?
            .iter()
            .any(|s| s.node_id == peer.node_id))
    }
}

#[async_trait]
impl RaftAdapter for OpenBaoAdapter {
    fn name(&self) -> &str {
        "openbao-http"
    }

    fn target(&self) -> String {
        let mut url = format!("{}{REMOVE_PEER}", self.addr);
        if let Ok(mut u) = reqwest::Url::parse(&url) {
            // Never a password from the address in a log line.
            let _ = u.set_password(None);
            let _ = u.set_username("");
            url = u.to_string();
        }
        url
    }

    async fn listing(&self) -> Option<Result<Listing, AdapterError>> {
        Some(self.servers().await.map(|servers| Listing {
            leader: servers.iter().find(|s| s.leader).map(|s| s.node_id.clone()),
            names: servers.into_iter().map(|s| s.node_id).collect(),
        }))
    }

    fn names_of(&self, peer: &RaftPeer) -> Vec<String> {
        vec![peer.node_id.clone()]
    }

    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError> {
        let mut done = Progress::default();
        self.remove(peer, &mut done)
            .await
            .map_err(|e| e.after(done))
    }
}

impl OpenBaoAdapter {
    async fn remove(&self, peer: &RaftPeer, done: &mut Progress) -> Result<Removal, AdapterError> {
        let before = self.servers().await?;
        let Some(listed) = before.iter().find(|s| s.node_id == peer.node_id) else {
            return Ok(Removal::AlreadyGone);
        };
        let was_leader = listed.leader;
        // OpenBao's active node steps down once its own removal is
        // committed: asking for the removal moves the leadership.
        done.leader_moved |= was_leader;
        done.removal_asked = true;
        let res = self
            .client
            .post(format!("{}{REMOVE_PEER}", self.addr))
            .header("X-Vault-Token", &self.token)
            .headers(traced())
            .json(&serde_json::json!({ "server_id": peer.node_id }))
            .send()
            .await
            .map_err(Self::failed)?;
        let status = res.status();
        if !status.is_success() {
            let body = res.text().await.unwrap_or_default();
            // A peer that left between the listing and the call: the
            // listing below says so. Any other answer is a refusal.
            if !(status.is_client_error() && names_peer_not_found(&body, &peer.node_id)) {
                return Err(AdapterError::new(
                    Failure::Refused,
                    format!("OpenBao answered {status}: {}", one_line(&body)),
                ));
            }
        }
        until_gone(
            Instant::now() + self.timeout,
            "OpenBao's raft configuration",
            || self.names(peer),
        )
        .await?;
        Ok(if was_leader {
            // OpenBao's active node steps down once its own removal is
            // committed; a standby takes over.
            Removal::RemovedAfterMovingLeader
        } else {
            Removal::Removed
        })
    }
}

/// An answer's body on one line, at most 16,000 characters.
fn one_line(body: &str) -> String {
    body.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(16_000)
        .collect()
}

/// Whether an OpenBao error answer says that this very peer is not in the
/// raft configuration: one of its `errors` names the server id and says
/// it is not found.
fn names_peer_not_found(body: &str, node_id: &str) -> bool {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(body) else {
        return false;
    };
    let quoted = format!("\"{node_id}\"");
    doc.get("errors")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|errors| {
            errors
                .iter()
                .filter_map(serde_json::Value::as_str)
                .any(|e| e.contains(&quoted) && e.to_lowercase().contains("not found"))
        })
}

/// The trace context of the call under way (`traceparent`), so OpenBao's
/// own tracing continues the trace; empty when spans are not exported.
fn traced() -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    crate::telemetry::inject(&mut headers);
    headers
}
