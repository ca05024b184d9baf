//! OVN's two clustered databases (SPEC §4): the peer is kicked from the
//! Northbound and the Southbound raft with `ovs-appctl -t <ctl>
//! cluster/kick <db> <server>`, and each database's `cluster/status` is
//! read before (was it there?) and after (is it gone?). `cluster/kick`
//! only starts a change, on the leader or by asking the leader, and exits
//! 0 even when the leader then loses leadership and drops it: only the
//! listing says whether it happened.

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::command::run;
use super::{until_gone, AdapterError, Failure, RaftAdapter, RaftPeer, Removal};

/// The settings of the OVN adapter.
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

/// The defaults: the standard control sockets and the raft ports of OVN's
/// clustered databases.
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

#[derive(Clone, Debug)]
pub struct OvnKickAdapter {
    pub settings: OvnKick,
    pub timeout: Duration,
}

/// One of the two databases.
struct Db<'a> {
    name: &'static str,
    ctl: &'a str,
    server: String,
}

/// What `cluster/status` says of a database's raft.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Status {
    /// The addresses of the servers the raft's configuration names.
    pub servers: Vec<String>,
    /// Whether the server answering is the leader.
    pub leader: bool,
}

impl OvnKickAdapter {
    pub fn new(settings: OvnKick, timeout: Duration) -> Self {
        Self { settings, timeout }
    }

    fn dbs(&self, peer: &RaftPeer) -> [Db<'_>; 2] {
        [
            Db {
                name: "OVN_Northbound",
                ctl: &self.settings.nb_ctl,
                server: peer.fill(&self.settings.nb_server),
            },
            Db {
                name: "OVN_Southbound",
                ctl: &self.settings.sb_ctl,
                server: peer.fill(&self.settings.sb_server),
            },
        ]
    }

    /// `ovs-appctl --timeout=<s> -t <ctl> <args>`: ovs-appctl's own
    /// timeout, and the child killed at ours in case it hangs anyway.
    fn argv(&self, ctl: &str, args: &[&str]) -> Vec<String> {
        let secs = self.timeout.as_secs().max(1);
        let mut v = vec![
            self.settings.appctl.clone(),
            format!("--timeout={secs}"),
            "-t".into(),
            ctl.to_owned(),
        ];
        v.extend(args.iter().map(|a| (*a).to_owned()));
        v
    }

    async fn appctl(&self, ctl: &str, args: &[&str]) -> Result<String, AdapterError> {
        let argv = self.argv(ctl, args);
        let ran = run(&argv, self.timeout + Duration::from_secs(1)).await?;
        if ran.succeeded() {
            return Ok(ran.stdout);
        }
        let message = ran.message();
        // ovs-appctl exits 2 when it cannot reach the server, and says so.
        let failure = if message.contains("cannot connect")
            || message.contains("No such file")
            || message.contains("Connection refused")
        {
            Failure::Unreachable
        } else if message.contains("timeout") || message.contains("timed out") {
            Failure::Timeout
        } else {
            Failure::Refused
        };
        Err(AdapterError::new(
            failure,
            format!("ovs-appctl -t {ctl} {}: {message}", args.join(" ")),
        ))
    }

    async fn status(&self, db: &Db<'_>) -> Result<Status, AdapterError> {
        let out = self.appctl(db.ctl, &["cluster/status", db.name]).await?;
        parse_status(&out).map_err(|why| {
            AdapterError::new(
                Failure::Unreadable,
                format!("cluster/status {} at {}: {why}", db.name, db.ctl),
            )
        })
    }
}

#[async_trait]
impl RaftAdapter for OvnKickAdapter {
    fn name(&self) -> &str {
        "ovn-kick"
    }

    fn target(&self) -> String {
        let s = &self.settings;
        format!(
            "{a} -t {nb} cluster/kick OVN_Northbound {nbs}; {a} -t {sb} cluster/kick OVN_Southbound {sbs}",
            a = s.appctl,
            nb = s.nb_ctl,
            nbs = s.nb_server,
            sb = s.sb_ctl,
            sbs = s.sb_server,
        )
    }

    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError> {
        let mut outcome = Removal::AlreadyGone;
        for db in self.dbs(peer) {
            let status = self.status(&db).await?;
            if !status.servers.contains(&db.server) {
                continue;
            }
            // The answer only says the change started: on a follower,
            // "sent removal request to leader".
            self.appctl(db.ctl, &["cluster/kick", db.name, &db.server])
                .await?;
            let what = format!("cluster/status {} at {}", db.name, db.ctl);
            until_gone(Instant::now() + self.timeout, &what, || async {
                Ok(self.status(&db).await?.servers.contains(&db.server))
            })
            .await?;
            outcome = Removal::Removed;
        }
        Ok(outcome)
    }
}

/// Reads `cluster/status`: the answering server must be a cluster member,
/// and its `Servers:` section names each server as `<sid> (<sid> at
/// <address>)`, its own with `(self)`.
pub(super) fn parse_status(text: &str) -> Result<Status, String> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).map(str::trim))
    };
    let member = field("Status:").ok_or("it has no Status line")?;
    if member != "cluster member" {
        return Err(format!(
            "the server answering is not a cluster member (Status: {member})"
        ));
    }
    let leader = field("Role:") == Some("leader");
    let mut lines = text.lines().skip_while(|l| l.trim() != "Servers:");
    if lines.next().is_none() {
        return Err("it has no Servers section".into());
    }
    let mut servers = Vec::new();
    for line in lines {
        if !line.starts_with(char::is_whitespace) || line.trim().is_empty() {
            break;
        }
        let Some(at) = line.find(" at ") else {
            return Err(format!("a server line without an address: {}", line.trim()));
        };
        let rest = &line[at + 4..];
        let end = rest
            .find(')')
            .ok_or_else(|| format!("an unclosed server line: {}", line.trim()))?;
        servers.push(rest[..end].trim().to_owned());
    }
    if servers.is_empty() {
        return Err("its Servers section names no server".into());
    }
    Ok(Status { servers, leader })
}
