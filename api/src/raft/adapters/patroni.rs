//! Patroni's own raft (`pysyncobj`), through `syncobj_admin`: `-status`
//! lists the members and the leader, `-transfer` moves leadership off the
//! peer when it leads (pysyncobj refuses to remove its leader), and
//! `-remove <host>:<port>` takes it out. `syncobj_admin` exits 0 whatever
//! happened: only `SUCCESS` and the listing count.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::command::run;
use super::{until_gone, AdapterError, Failure, Listing, Progress, RaftAdapter, RaftPeer, Removal};

/// The settings of the Patroni adapter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatroniSyncobj {
    pub program: String,
    /// Raft members to talk to, `host:port` (Patroni's `raft.self_addr`
    /// of the control nodes); the first that answers and is not the peer
    /// being removed is used.
    pub conns: Vec<String>,
    /// The raft port of the member to remove.
    pub port: u16,
}

impl Default for PatroniSyncobj {
    fn default() -> Self {
        Self {
            program: "syncobj_admin".into(),
            conns: vec!["127.0.0.1:5010".into()],
            port: 5010,
        }
    }
}

#[derive(Clone, Debug)]
pub struct PatroniSyncobjAdapter {
    pub settings: PatroniSyncobj,
    pub timeout: Duration,
}

/// What `syncobj_admin -status` says.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Status {
    /// The member answering and its partners, `host:port`.
    pub members: Vec<String>,
    /// The leader's `host:port`, if there is one.
    pub leader: Option<String>,
}

impl PatroniSyncobjAdapter {
    pub fn new(settings: PatroniSyncobj, timeout: Duration) -> Self {
        Self { settings, timeout }
    }

    /// How the raft names the peer: `host:port`.
    fn address(&self, peer: &RaftPeer) -> String {
        format!("{}:{}", peer.host(), self.settings.port)
    }

    async fn admin(&self, conn: &str, args: &[&str]) -> Result<String, AdapterError> {
        let mut argv = vec![
            self.settings.program.clone(),
            "-conn".into(),
            conn.to_owned(),
        ];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let ran = run(&argv, self.timeout).await?;
        // It prints its failures on standard output and exits 0.
        let out = ran.stdout.trim().to_owned();
        if !ran.succeeded() {
            return Err(AdapterError::new(
                Failure::Refused,
                format!(
                    "syncobj_admin -conn {conn} {}: {}",
                    args.join(" "),
                    ran.message()
                ),
            ));
        }
        Ok(out)
    }

    /// The raft's membership as its leader lists it, asked through the
    /// first configured member that answers, other than the peer (which
    /// may be down, or be on its way out): a follower's listing may lag.
    async fn status(&self, peer: &str) -> Result<Status, AdapterError> {
        let s = self.any_status(peer).await?;
        if let Some(leader) = s
            .leader
            .as_deref()
            .filter(|l| *l != peer && *l != s.members[0])
        {
            if let Ok(Ok(at_leader)) = self
                .admin(leader, &["-status"])
                .await
                .map(|out| parse_status(&out))
            {
                if at_leader.leader.as_deref() == Some(leader) {
                    return Ok(at_leader);
                }
            }
        }
        Ok(s)
    }

    async fn any_status(&self, peer: &str) -> Result<Status, AdapterError> {
        let port = format!(":{}", self.settings.port);
        let mut last = None;
        for conn in self.settings.conns.iter().filter(|c| *c != peer) {
            match self.admin(conn, &["-status"]).await {
                Ok(out) => match parse_status(&out) {
                    // Members listed at another port than the setting's
                    // would make every removal look done.
                    Ok(s) if !s.members[0].ends_with(&port) => {
                        last = Some(AdapterError::new(
                            Failure::Unreadable,
                            format!(
                                "the raft member at {conn} is {}, not at port {}: set STRATUM_PATRONI_RAFT_PORT to the raft's port",
                                s.members[0], self.settings.port
                            ),
                        ))
                    }
                    Ok(s) => return Ok(s),
                    Err(why) => {
                        last = Some(AdapterError::new(
                            Failure::Unreachable,
                            format!("syncobj_admin -conn {conn} -status: {why}"),
                        ))
                    }
                },
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            AdapterError::new(
                Failure::Unreachable,
                format!("no raft member to ask other than {peer} itself: set STRATUM_PATRONI_RAFT_CONN to several members"),
            )
        }))
    }

    /// Moves leadership off the peer: asks it (the leader) to transfer
    /// leadership, again each second, until another member leads; pysyncobj
    /// answers `SUCCESS TRANSFER` when it only sent the request, and the old
    /// leader may win the election that follows. A leader that is down loses
    /// leadership by itself once the others elect one.
    async fn move_leader(&self, peer: &str) -> Result<(), AdapterError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let said = match self.admin(peer, &["-transfer"]).await {
                Ok(out) => out,
                Err(e) => e.message,
            };
            let asked = Instant::now();
            while asked.elapsed() < Duration::from_secs(1) {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Ok(Status {
                    leader: Some(l), ..
                }) = self.status(peer).await
                {
                    if l != peer {
                        return Ok(());
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(AdapterError::new(
                    Failure::Refused,
                    format!("{peer} leads the raft and leadership did not move off it; -transfer said: {said}"),
                ));
            }
        }
    }
}

#[async_trait]
impl RaftAdapter for PatroniSyncobjAdapter {
    fn name(&self) -> &str {
        "patroni-syncobj"
    }

    fn target(&self) -> String {
        format!(
            "{} -conn {} -remove {{host}}:{}",
            self.settings.program,
            self.settings.conns.join(","),
            self.settings.port
        )
    }

    async fn listing(&self) -> Option<Result<Listing, AdapterError>> {
        // No member to leave out: any configured one may answer.
        Some(self.status("").await.map(|s| Listing {
            names: s.members.into_iter().collect(),
            leader: s.leader,
        }))
    }

    fn names_of(&self, peer: &RaftPeer) -> Vec<String> {
        vec![self.address(peer)]
    }

    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError> {
        let mut done = Progress::default();
        self.remove(peer, &mut done)
            .await
            .map_err(|e| e.after(done))
    }
}

impl PatroniSyncobjAdapter {
    async fn remove(&self, peer: &RaftPeer, done: &mut Progress) -> Result<Removal, AdapterError> {
        let addr = self.address(peer);
        let before = self.status(&addr).await?;
        if !before.members.contains(&addr) {
            return Ok(Removal::AlreadyGone);
        }
        let mut outcome = Removal::Removed;
        if before.leader.as_deref() == Some(addr.as_str()) {
            tracing::info!(peer = %addr, "the peer leads Patroni's raft: leadership is moved off it first");
            done.leader_moved = true;
            self.move_leader(&addr).await?;
            outcome = Removal::RemovedAfterMovingLeader;
        }
        // The leader applies the change; ask it directly.
        let leader = self
            .status(&addr)
            .await?
            .leader
            .filter(|l| *l != addr)
            .ok_or_else(|| {
                AdapterError::new(
                    Failure::Refused,
                    "the raft has no leader to remove the peer",
                )
            })?;
        done.removal_asked = true;
        let said = self.admin(&leader, &["-remove", &addr]).await?;
        if !said.split_whitespace().any(|w| w == "SUCCESS") {
            // FAIL REMOVE: the raft said no, unless the peer left anyway.
            if self.status(&addr).await?.members.contains(&addr) {
                return Err(AdapterError::new(
                    Failure::Refused,
                    format!("syncobj_admin -conn {leader} -remove {addr}: {said}"),
                ));
            }
        }
        let what = "syncobj_admin -status";
        until_gone(Instant::now() + self.timeout, what, || async {
            Ok(self.status(&addr).await?.members.contains(&addr))
        })
        .await?;
        Ok(outcome)
    }
}

/// Reads `syncobj_admin -status`: `key: value` lines with `self`,
/// `leader` (`None` without one) and `partner_node_status_server_<addr>`.
pub(super) fn parse_status(text: &str) -> Result<Status, String> {
    let fields: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let me = fields
        .get("self")
        .ok_or_else(|| format!("not a status: {}", super::whole_message(text, "")))?;
    let mut members = vec![(*me).to_owned()];
    members.extend(
        fields
            .keys()
            .filter_map(|k| k.strip_prefix("partner_node_status_server_"))
            .map(str::to_owned),
    );
    let leader = fields
        .get("leader")
        .filter(|l| !l.is_empty() && **l != "None")
        .map(|l| (*l).to_owned());
    Ok(Status { members, leader })
}
