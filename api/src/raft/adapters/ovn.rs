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
use super::{until_gone, AdapterError, Failure, Listing, Progress, RaftAdapter, RaftPeer, Removal};

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
    /// The address of the server answering (`(self)`).
    pub me: Option<String>,
    /// Who leads, as the answering server knows it, and in which term
    /// (`02e1 term 3`): a new term is an election.
    pub leader: Option<String>,
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

    /// How a listing names a database's server: the database, a space, the
    /// server's address (`OVN_Northbound ssl:10.0.0.5:6643`).
    fn listed(db: &str, server: &str) -> String {
        format!("{db} {server}")
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

    async fn listing(&self) -> Option<Result<Listing, AdapterError>> {
        let mut listing = Listing::default();
        let mut leaders = Vec::new();
        // The databases' server forms do not matter to their status.
        let none = RaftPeer {
            node_id: String::new(),
            address: String::new(),
        };
        for db in self.dbs(&none) {
            let status = match self.status(&db).await {
                Ok(s) => s,
                Err(e) => return Some(Err(e)),
            };
            listing.names.extend(
                status
                    .servers
                    .iter()
                    .map(|server| Self::listed(db.name, server)),
            );
            leaders.push(format!(
                "{} {}",
                db.name,
                status.leader.as_deref().unwrap_or("none")
            ));
        }
        listing.leader = Some(leaders.join(", "));
        Some(Ok(listing))
    }

    fn names_of(&self, peer: &RaftPeer) -> Vec<String> {
        self.dbs(peer)
            .iter()
            .map(|db| Self::listed(db.name, &db.server))
            .collect()
    }

    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError> {
        let mut done = Progress::default();
        self.remove(peer, &mut done)
            .await
            .map_err(|e| e.after(done))
    }
}

impl OvnKickAdapter {
    async fn remove(&self, peer: &RaftPeer, done: &mut Progress) -> Result<Removal, AdapterError> {
        let mut outcome = Removal::AlreadyGone;
        for db in self.dbs(peer) {
            let status = self.status(&db).await?;
            if !status.servers.contains(&db.server) {
                // "Not listed" proves the peer gone only if the raft names
                // servers the way the setting does: a wrong scheme or port
                // would make every removal look done.
                let form = match db.name {
                    "OVN_Northbound" => &self.settings.nb_server,
                    _ => &self.settings.sb_server,
                };
                if !status.servers.iter().any(|s| same_form(form, s)) {
                    return Err(AdapterError::new(
                        Failure::Unreadable,
                        format!(
                            "{} at {} lists its servers as {}, none of the form `{form}`: set STRATUM_OVN_{}_SERVER to how the raft names them",
                            db.name,
                            db.ctl,
                            status.servers.join(", "),
                            if db.name == "OVN_Northbound" { "NB" } else { "SB" },
                        ),
                    ));
                }
                continue;
            }
            if status.me.as_deref() == Some(db.server.as_str()) {
                // Kicking itself, the server would leave, and its socket
                // would answer nothing more about the raft.
                return Err(AdapterError::new(
                    Failure::Refused,
                    format!(
                        "{} at {} is the server being removed; name another member's control socket to remove it",
                        db.name, db.ctl
                    ),
                ));
            }
            // The answer only says the change started: on a follower,
            // "sent removal request to leader", even when the leader then
            // drops it. `unknown server`: it left since the listing.
            done.removal_asked = true;
            if let Err(e) = self
                .appctl(db.ctl, &["cluster/kick", db.name, &db.server])
                .await
            {
                if !e.message.contains("unknown server") {
                    return Err(e);
                }
            }
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

/// Whether `listed` has the shape of the server form `form`: what comes
/// before its first placeholder and after its last (`ssl:` and `:6643`).
fn same_form(form: &str, listed: &str) -> bool {
    let (Some(open), Some(close)) = (form.find('{'), form.rfind('}')) else {
        return form == listed;
    };
    let (head, tail) = (&form[..open], &form[close + 1..]);
    listed.len() > head.len() + tail.len() && listed.starts_with(head) && listed.ends_with(tail)
}

/// Reads `cluster/status`: the answering server must be a cluster member,
/// and its `Servers:` section names each server as `<sid> (<sid> at
/// <address>)`, its own followed by `(self)`. Every server listed votes.
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
    let mut lines = text.lines().skip_while(|l| l.trim() != "Servers:");
    if lines.next().is_none() {
        return Err("it has no Servers section".into());
    }
    let mut servers = Vec::new();
    let mut me = None;
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
        let address = rest[..end].trim().to_owned();
        if rest[end + 1..].trim_start().starts_with("(self)") {
            me = Some(address.clone());
        }
        servers.push(address);
    }
    if servers.is_empty() {
        return Err("its Servers section names no server".into());
    }
    let leader = field("Leader:").map(|l| match field("Term:") {
        Some(term) => format!("{l} term {term}"),
        None => l.to_owned(),
    });
    Ok(Status {
        servers,
        me,
        leader,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As ovsdb-server 3.1 prints it on a follower.
    const FOLLOWER: &str = "9330
Name: OVN_Northbound
Cluster ID: d7a5 (d7a5c3e6-e118-42b1-bae7-bee8f3fe0503)
Server ID: 9330 (9330c4fd-8e25-4736-818d-f5e2b5bfb278)
Address: tcp:127.0.1.12:6643
Status: cluster member
Role: follower
Term: 1
Leader: 02e1
Vote: unknown

Election timer: 1000
Log: [2, 6]
Entries not yet committed: 0
Entries not yet applied: 0
Connections: ->0000 <-02e1 <-650e ->650e <-efd0 ->efd0
Disconnections: 0
Servers:
    02e1 (02e1 at tcp:127.0.1.11:6643) last msg 39 ms ago
    efd0 (efd0 at tcp:127.0.1.21:6643)
    9330 (9330 at tcp:127.0.1.12:6643) (self)
    650e (650e at tcp:127.0.1.13:6643)
";

    #[test]
    fn a_follower_s_status_lists_every_server_and_itself() {
        let s = parse_status(FOLLOWER).unwrap();
        assert_eq!(
            s.servers,
            [
                "tcp:127.0.1.11:6643",
                "tcp:127.0.1.21:6643",
                "tcp:127.0.1.12:6643",
                "tcp:127.0.1.13:6643"
            ]
        );
        assert_eq!(s.me.as_deref(), Some("tcp:127.0.1.12:6643"));
        assert_eq!(s.leader.as_deref(), Some("02e1 term 1"));
        // Whole addresses: 127.0.1.1 is not 127.0.1.11.
        assert!(!s.servers.contains(&"tcp:127.0.1.1:6643".to_owned()));
    }

    #[test]
    fn a_leader_s_status_with_indexes_reads_the_same() {
        let text = FOLLOWER.replace("Role: follower", "Role: leader").replace(
            "(02e1 at tcp:127.0.1.11:6643) last msg 39 ms ago",
            "(02e1 at tcp:127.0.1.11:6643) next_index=6 match_index=5 last msg 29 ms ago",
        );
        assert_eq!(parse_status(&text).unwrap().servers.len(), 4);
    }

    #[test]
    fn a_listing_of_another_form_is_told_apart() {
        assert!(same_form("tcp:{host}:6643", "tcp:127.0.1.11:6643"));
        assert!(!same_form("ssl:{host}:6643", "tcp:127.0.1.11:6643"));
        assert!(!same_form("tcp:{host}:6643", "tcp:127.0.1.11:6641"));
        assert!(same_form("{nodeId}", "n-1"));
    }

    #[test]
    fn a_server_that_left_or_joins_is_no_listing() {
        let leaving = FOLLOWER.replace("Status: cluster member", "Status: leaving cluster");
        assert!(parse_status(&leaving)
            .unwrap_err()
            .contains("not a cluster member"));
        assert!(parse_status("unknown cluster").is_err());
    }
}
