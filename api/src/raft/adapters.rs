//! The raft adapters: one per raft behind [`RaftAdapter`], each able to
//! take a peer out of its raft and to say which adapter it is, so the
//! recorded removal names it (SPEC §4, "Raft adapters").

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use stratum_domain::membership::Raft;

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
    /// Which adapter this is, as the recorded removal names it:
    /// `record-only`, `openbao-http`, `ovn-kick`, `patroni-syncobj` or
    /// `command`.
    fn name(&self) -> &str;

    /// What it calls, for the start-up log line; never a secret.
    fn target(&self) -> String {
        String::new()
    }

    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError>;
}

/// The name a record-only removal is recorded with.
pub const RECORD_ONLY: &str = "record-only";

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

/// Runs commands given as argument vectors (never shell strings) with the
/// placeholders of [`RaftPeer::fill`]. Every command must succeed: exit 0,
/// and where `success_output` is set, that word on standard output (a
/// program that exits 0 whatever happened, like `syncobj_admin`, says
/// `SUCCESS` only when it did). Output saying the server is unknown or not
/// a member means the peer was already gone, so a retry after a partial
/// success finishes instead of failing on the part already done; a program
/// that could not run (exit 126 or 127) is always a failure.
///
/// The presets [`CommandAdapter::ovn_kick`] and
/// [`CommandAdapter::patroni_syncobj`] build the standard calls; the
/// generic form serves other setups.
#[derive(Clone, Debug)]
pub struct CommandAdapter {
    pub name: String,
    pub commands: Vec<Vec<String>>,
    /// The word standard output must hold for a command to have succeeded.
    pub success_output: Option<String>,
    /// Whether the start-up line may show the whole argument vectors: only
    /// for presets, whose arguments hold no secret. Configured commands
    /// may carry a password, so only their programs are shown.
    pub show_arguments: bool,
}

/// The built-in OVN call: `cluster/kick` on both databases' raft.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OvnKick {
    pub appctl: String,
    pub nb_ctl: String,
    pub sb_ctl: String,
    /// How each database's raft names the server, with placeholders, e.g.
    /// `ssl:{host}:6643`.
    pub nb_server: String,
    pub sb_server: String,
}

/// The defaults of the OVN preset: the standard control sockets and the
/// raft ports of OVN's clustered databases.
impl Default for OvnKick {
    fn default() -> Self {
        Self {
            appctl: "ovs-appctl".into(),
            nb_ctl: "/var/run/ovn/ovnnb_db.ctl".into(),
            sb_ctl: "/var/run/ovn/ovnsb_db.ctl".into(),
            nb_server: "ssl:{host}:6643".into(),
            sb_server: "ssl:{host}:6644".into(),
        }
    }
}

/// The built-in Patroni call for its own raft (`pysyncobj`):
/// `syncobj_admin -conn <conn> -remove <host>:<port>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatroniSyncobj {
    pub program: String,
    /// A raft member to talk to, `host:port` (Patroni's `raft.self_addr`
    /// on this machine).
    pub conn: String,
    /// The raft port of the member to remove.
    pub port: u16,
}

impl Default for PatroniSyncobj {
    fn default() -> Self {
        Self {
            program: "syncobj_admin".into(),
            conn: "127.0.0.1:5010".into(),
            port: 5010,
        }
    }
}

impl CommandAdapter {
    /// Configured argument vectors, for setups the presets do not cover.
    pub fn new(commands: Vec<Vec<String>>) -> Self {
        Self {
            name: "command".into(),
            commands,
            success_output: None,
            show_arguments: false,
        }
    }

    /// SPEC §4: `ovs-appctl -t <ovnnb_db.ctl> cluster/kick OVN_Northbound
    /// <server>` and the same for `OVN_Southbound`: two rafts, one member.
    pub fn ovn_kick(k: &OvnKick) -> Self {
        let kick = |ctl: &str, db: &str, server: &str| {
            vec![
                k.appctl.clone(),
                "-t".into(),
                ctl.to_owned(),
                "cluster/kick".into(),
                db.to_owned(),
                server.to_owned(),
            ]
        };
        Self {
            name: "ovn-kick".into(),
            commands: vec![
                kick(&k.nb_ctl, "OVN_Northbound", &k.nb_server),
                kick(&k.sb_ctl, "OVN_Southbound", &k.sb_server),
            ],
            success_output: None,
            show_arguments: true,
        }
    }

    /// SPEC §4: Patroni's built-in raft has no removal call of its own.
    pub fn patroni_syncobj(p: &PatroniSyncobj) -> Self {
        Self {
            name: "patroni-syncobj".into(),
            commands: vec![vec![
                p.program.clone(),
                "-conn".into(),
                p.conn.clone(),
                "-remove".into(),
                format!("{{host}}:{}", p.port),
            ]],
            // syncobj_admin exits 0 whatever happened and prints SUCCESS
            // only when the change was made.
            success_output: Some("SUCCESS".into()),
            show_arguments: true,
        }
    }
}

#[async_trait]
impl RaftAdapter for CommandAdapter {
    fn name(&self) -> &str {
        &self.name
    }

    fn target(&self) -> String {
        self.commands
            .iter()
            .map(|argv| {
                if self.show_arguments {
                    argv.join(" ")
                } else {
                    format!("{} (arguments not shown)", argv[0])
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError> {
        let mut outcome = Removal::AlreadyGone;
        for argv in &self.commands {
            let args: Vec<String> = argv.iter().map(|a| peer.fill(a)).collect();
            let Some((program, rest)) = args.split_first() else {
                return Err(AdapterError("an empty command is configured".into()));
            };
            let mut command = tokio::process::Command::new(program);
            // The service's own settings (a database password, the
            // OpenBao token) are nothing a raft's tool needs.
            for (key, _) in std::env::vars_os() {
                if key.to_string_lossy().starts_with("STRATUM_") {
                    command.env_remove(key);
                }
            }
            let out = command
                .args(rest)
                .kill_on_drop(true)
                .output()
                .await
                .map_err(|e| AdapterError(format!("{program}: {e}")))?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let code = out.status.code();
            let succeeded = code == Some(0)
                && self
                    .success_output
                    .as_deref()
                    .is_none_or(|word| stdout.split_whitespace().any(|w| w == word));
            if succeeded {
                outcome = Removal::Removed;
                continue;
            }
            let could_not_run = matches!(code, Some(126 | 127) | None);
            if !could_not_run && (says_gone(&stderr) || says_gone(&stdout)) {
                continue;
            }
            let last = |t: &str| t.lines().last().unwrap_or("").trim().to_owned();
            let line = match last(&stderr) {
                l if l.is_empty() => last(&stdout),
                l => l,
            };
            return Err(AdapterError(format!(
                "{program} exited with {}: {line}",
                out.status
            )));
        }
        Ok(outcome)
    }
}

/// Whether a raft tool says the server is not in its raft: `ovs-appctl
/// cluster/kick` answers an unknown server so. A bare "not found" is not
/// enough: a shell says it of a missing program.
fn says_gone(output: &str) -> bool {
    let text = output.to_lowercase();
    ["unknown server", "no such server", "not a member"]
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
    fn name(&self) -> &str {
        "openbao-http"
    }

    fn target(&self) -> String {
        let mut url = format!("{}/v1/sys/storage/raft/remove-peer", self.addr);
        if let Ok(mut u) = reqwest::Url::parse(&url) {
            // Never a password from the address in a log line.
            let _ = u.set_password(None);
            let _ = u.set_username("");
            url = u.to_string();
        }
        url
    }

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
        // error naming it (`peer "<id>" not found in configuration`):
        // already gone counts as done. A 404 page from a wrong address or a
        // proxy does not name the peer, so it is a failure.
        let gone = status.is_client_error() && names_peer_not_found(&body, &peer.node_id);
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
