//! A real PostgreSQL failover under running replicas: etcd, three
//! PostgreSQL 15 nodes under Patroni (`api/tests/ha/patroni-pg.sh`), two
//! `stratum serve` replicas on libpq's multi-host URL with
//! `target_session_attrs=read-write` (no HAProxy), and the Patroni leader
//! SIGKILLed (Patroni and its postmaster: a host crash) under load.
//!
//! - Synchronous mode (`synchronous_mode_strict`): nothing acknowledged is
//!   lost, clients see only 503s, no replica restarts, the chain verifies,
//!   the positions are gap-free, and the history the clients saw is
//!   linearizable (`stratum-history`, with the domain's own rules).
//! - Asynchronous mode with a forced lost tail: the standbys are cut off
//!   from the WAL, acknowledged writes go on, the leader dies; no replica
//!   serves a lost event once it noticed, none answers 500, each ends with
//!   the digests `stratum replay --digest` computes from the database, and
//!   the `log-events-lost` alarm names the range.
//!
//! `STRATUM_REQUIRE_HA=1` makes a machine without etcd, Patroni or
//! PostgreSQL's binaries a failure instead of a loud skip. `.ci/run` sets it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use stratum_history::member::MemberModel;
use stratum_history::{check, Options};

use crate::load::{call, count, get, longest_gap, Load};
use crate::replicas::serve;

const MEMBERS: &str = "/v1/admin/cluster/members";

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ha/patroni-pg.sh")
}

/// Whether a Patroni cluster can run here; a loud skip, or a failure where
/// it is required.
fn available() -> bool {
    crate::support::tools_available(
        &[
            "etcd",
            "patroni",
            "patronictl",
            "/usr/lib/postgresql/15/bin/postgres",
        ],
        "STRATUM_REQUIRE_HA",
        "the failover tests",
    )
}

/// etcd and three PostgreSQL nodes under Patroni, down on drop.
struct Cluster {
    dir: tempfile::TempDir,
    base_port: u16,
}

impl Cluster {
    async fn up(mode: &str, base_port: u16) -> Self {
        let c = Cluster {
            dir: tempfile::Builder::new()
                .prefix("ha")
                .tempdir_in("/tmp")
                .unwrap(),
            base_port,
        };
        c.sh("up", &[mode]).await;
        c
    }

    /// `patroni-pg.sh <cmd> <dir> <args...>`, which must succeed; its
    /// output.
    async fn sh(&self, cmd: &str, args: &[&str]) -> String {
        let out = tokio::process::Command::new("bash")
            .arg(script())
            .arg(cmd)
            .arg(self.dir.path())
            .args(args)
            .env("HA_BASE_PORT", self.base_port.to_string())
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "patroni-pg.sh {cmd} {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Waits until every standby replayed all the primary wrote.
    async fn caught_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let lsn = self.sh("lsn", &[]).await;
            let primary = lsn
                .lines()
                .find_map(|l| l.split_once(" primary ").map(|(_, p)| p.trim().to_owned()));
            let replayed: Vec<&str> = lsn
                .lines()
                .filter(|l| l.contains(" replica "))
                .filter_map(|l| l.split_whitespace().nth(3))
                .collect();
            if primary.is_some_and(|p| replayed.len() == 2 && replayed.iter().all(|r| *r == p)) {
                return;
            }
            assert!(Instant::now() < deadline, "the standbys lag: {lsn}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(script())
            .arg("down")
            .arg(self.dir.path())
            .output();
    }
}

/// `stratum <args>` on the host, which must succeed; its output.
fn stratum(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stratum {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_synchronous_failover_loses_nothing_acknowledged_and_the_history_is_linearizable() {
    if !available() {
        return;
    }
    // Below the kernel's ephemeral ports (32768-60999 here): a port there
    // may be any test's outgoing connection when etcd or PostgreSQL binds.
    let cluster = Cluster::up("sync", 27430).await;
    let url = cluster.sh("url", &[]).await;
    assert!(url.contains(',') && url.contains("target_session_attrs=read-write"));
    let (mut a, b) = tokio::join!(serve(&url), serve(&url));
    let mut b = Some(b);
    let bases = vec![a.base.clone(), b.as_ref().unwrap().base.clone()];
    let a_pid = a.pid();
    // One failover here; a soak (docs/robustness.md) asks for more, and
    // every second one kills a replica too.
    let rounds: usize = std::env::var("STRATUM_TEST_FAILOVERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);

    // 16 writers, each through its own members, and 4 readers of the
    // members the writers work on, so reads overlap writes.
    let load = Load::start(bases, 16, 4);
    let (t0, bases) = (load.t0, load.bases.clone());
    let acknowledged_after = |t: Duration| load.acknowledged_after(t);
    let mut switches = Vec::new();
    for round in 0..rounds {
        let since = t0.elapsed();
        tokio::time::sleep(Duration::from_secs(4)).await;
        let before = acknowledged_after(since);
        assert!(
            before > 50,
            "the writers run before failover {round}: {before}"
        );
        let killed_at = t0.elapsed();
        let old = cluster.sh("kill-leader", &[]).await;
        let replaced = round % 2 == 1;
        if replaced {
            // A replica dies with the leader: its clients' requests break
            // mid-way, and are retried on the other with their keys.
            drop(b.take());
        }
        let said = cluster.sh("wait-leader", &[&old]).await;
        if replaced {
            let new = serve(&url).await;
            *bases.lock().unwrap() = vec![a.base.clone(), new.base.clone()];
            b = Some(new);
        }
        // Writes go on after the switch, through the same replicas.
        let resumed = Instant::now();
        let promoted = t0.elapsed();
        while acknowledged_after(promoted) == 0 {
            assert!(
                resumed.elapsed() < Duration::from_secs(60),
                "no write was acknowledged within 60 s of {said}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        switches.push((old.clone(), said, killed_at, t0.elapsed() - promoted));
        if round + 1 < rounds {
            // The old leader rejoins as a standby before the next failover.
            cluster.sh("start", &[&old]).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = load.finish().await;
    for (old, said, killed_at, first_write) in &switches {
        eprintln!(
            "failover: {old} killed at {killed_at:?}; new leader and Patroni's seconds: {said}; \
             first acknowledged write {first_write:?} after it was writable"
        );
    }
    let (gap, gap_from) = longest_gap(&seen.acknowledged);
    eprintln!(
        "failover: {rounds} failovers; {} writes acknowledged, {} operations; longest time \
         without an acknowledged write {gap:?} from {gap_from:?}; 5xx answers {:?}",
        seen.acknowledged.len(),
        seen.history.len(),
        count(&seen.errors)
    );

    // Only 503s: no 500, nothing else.
    seen.assert_only_unavailable();
    // No restart: the replica that was never killed is the same process,
    // still running.
    assert_eq!(a.pid(), a_pid);
    assert!(a.running(), "replica a exited");
    // Nothing was lost, so nothing says so.
    let client = reqwest::Client::new();
    let (_, alarms) = get(&client, &a.base, "/v1/admin/alarms").await;
    assert!(!alarms.to_string().contains("log-events-lost"), "{alarms}");
    // Nothing acknowledged is lost: every admitted member is served, by
    // both replicas and by a fresh one.
    let fresh = serve(&url).await;
    for replica in [&a, b.as_ref().unwrap(), &fresh] {
        for node in &seen.admitted {
            let (status, body) = get(&client, &replica.base, &format!("{MEMBERS}/{node}")).await;
            assert_eq!(
                status, 200,
                "{}: acknowledged {node} is lost: {body}",
                replica.base
            );
        }
    }
    // The chain verifies, and its positions are gap-free (the export
    // verifies every position from 1).
    let (status, verified) = get(&client, &fresh.base, "/v1/admin/events/verify").await;
    assert_eq!(
        (status, &verified["verified"]),
        (200, &json!(true)),
        "{verified}"
    );
    // Every replica serves what the database holds.
    let digest = stratum(&["replay", "--digest", "--database-url", &url]);
    for replica in [&a, b.as_ref().unwrap(), &fresh] {
        let (_, m) = get(&client, &replica.base, "/v1/admin/cluster/membership").await;
        assert_eq!(m["digest"], json!(digest), "{}: {m}", replica.base);
    }
    // The auditor's read-only tools may read a standby.
    let standby = url.replace(
        "target_session_attrs=read-write",
        "target_session_attrs=standby",
    );
    let verified = stratum(&["events", "verify", "--database-url", &standby]);
    assert!(verified.starts_with("verified: "), "{verified}");
    // The history the clients saw is linearizable.
    let report = check(&MemberModel::new(), &seen.history, &Options::default());
    eprintln!("history: {:?}", report.stats);
    assert!(report.is_linearizable(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_asynchronous_failover_that_loses_a_tail_is_noticed_and_never_served() {
    if !available() {
        return;
    }
    let cluster = Cluster::up("async", 27450).await;
    let url = cluster.sh("url", &[]).await;
    // `a` writes; `b` only reads, and never writes during the switch.
    let (a, b) = tokio::join!(serve(&url), serve(&url));
    let client = reqwest::Client::new();
    let admit = |base: String, n: &str| {
        let client = client.clone();
        // kept-N at 10.7.0.N, lost-N at 10.7.1.N: one address per member.
        let (kind, num) = n.split_once('-').unwrap();
        let net = if kind == "lost" { 1 } else { 0 };
        let body = json!({"nodeId": n, "role": "compute", "mgmtIp": format!("10.7.{net}.{num}")});
        async move {
            let (status, body) = match call(&client, &base, MEMBERS, Some(&body), None).await {
                Some(a) => (a.status, a.body),
                None => (0, Value::Null),
            };
            (status, body)
        }
    };
    for n in 1..=20 {
        let (status, body) = admit(a.base.clone(), &format!("kept-{n}")).await;
        assert_eq!(status, 201, "{body}");
    }
    // Once the standbys replayed all of it, they receive nothing more,
    // and `a` goes on acknowledging.
    cluster.caught_up().await;
    cluster.sh("freeze-replication", &[]).await;
    let (_, ready) = get(&client, &a.base, "/readyz").await;
    let kept_head = ready["position"].as_u64().unwrap();
    let mut lost = Vec::new();
    for n in 1..=30 {
        let node = format!("lost-{n}");
        let (status, body) = admit(a.base.clone(), &node).await;
        assert_eq!(status, 201, "{body}");
        lost.push(node);
    }
    for node in &lost {
        let (status, _) = get(&client, &b.base, &format!("{MEMBERS}/{node}")).await;
        assert_eq!(status, 200, "b serves {node} before the failover");
    }
    let (_, ready) = get(&client, &a.base, "/readyz").await;
    let lost_head = ready["position"].as_u64().unwrap();
    assert!(lost_head > kept_head);
    let (_, tail) = get(
        &client,
        &a.base,
        &format!("/v1/admin/events?after={kept_head}&limit=1000"),
    )
    .await;
    let lost_hashes: Vec<Value> = tail["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| json!({"position": e["position"], "hash": e["hash"]}))
        .collect();
    assert_eq!(lost_hashes.len() as u64, lost_head - kept_head);

    // The leader dies with the tail only it had; a standby takes over,
    // while `a` keeps being asked to write.
    let old = cluster.sh("kill-leader", &[]).await;
    let writing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let during = tokio::spawn({
        let (client, base, writing) = (client.clone(), a.base.clone(), writing.clone());
        async move {
            let mut statuses = Vec::new();
            let mut n = 0;
            while writing.load(std::sync::atomic::Ordering::Acquire) {
                n += 1;
                let body = json!({"nodeId": format!("during-{n}"), "role": "compute", "mgmtIp": format!("10.7.{}.{}", 2 + n / 250, n % 250 + 1)});
                let key = format!("during-{n}");
                let status = call(&client, &base, MEMBERS, Some(&body), Some(&key))
                    .await
                    .map_or(0, |a| a.status);
                statuses.push(status);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            statuses
        }
    });
    cluster.sh("thaw-replication", &[]).await;
    let said = cluster.sh("wait-leader", &[&old]).await;
    let switched = Instant::now();
    eprintln!("async failover: {old} killed, {said}");

    // Within a few seconds no replica answers a lost member, and from
    // then on never; no 500 at any time.
    let mut statuses = Vec::new();
    for replica in [&a, &b] {
        loop {
            let mut served = 0;
            for node in &lost {
                let (status, _) = get(&client, &replica.base, &format!("{MEMBERS}/{node}")).await;
                statuses.push(status);
                if status == 200 {
                    served += 1;
                }
            }
            if served == 0 {
                break;
            }
            assert!(
                switched.elapsed() < Duration::from_secs(10),
                "{} still serves {served} lost members 10 s after the switch",
                replica.base
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    eprintln!(
        "async failover: lost members gone from both replicas {:?} after the switch",
        switched.elapsed()
    );
    for _ in 0..3 {
        for replica in [&a, &b] {
            for node in &lost {
                let (status, body) =
                    get(&client, &replica.base, &format!("{MEMBERS}/{node}")).await;
                assert_ne!(
                    status, 200,
                    "{} serves lost {node} again: {body}",
                    replica.base
                );
                statuses.push(status);
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    writing.store(false, std::sync::atomic::Ordering::Release);
    let during = during.await.unwrap();
    assert!(
        during.iter().all(|s| *s != 500),
        "a 500 to a write during the switch: {during:?}"
    );
    // New writes after the switch take the positions the lost tail had.
    for n in 21..=25 {
        let (status, body) = loop {
            let (status, body) = admit(a.base.clone(), &format!("kept-{n}")).await;
            statuses.push(status);
            if status != 503 {
                break (status, body);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(status, 201, "{body}");
    }
    assert!(
        statuses.iter().all(|s| *s != 500),
        "a 500 during the switch: {statuses:?}"
    );

    // Each replica's digests are the database's, now and as of a position;
    // libpq's key=value form names the same database.
    let digest = stratum(&["replay", "--digest", "--database-url", &url]);
    let by_keywords = stratum(&["replay", "--digest", "--database-url", &keywords(&url)]);
    assert_eq!(by_keywords, digest);
    let (_, ready) = get(&client, &a.base, "/readyz").await;
    let head = ready["position"].as_u64().unwrap();
    let at = kept_head.to_string();
    let digest_then = stratum(&["replay", "--digest", "--until", &at, "--database-url", &url]);
    let deadline = Instant::now() + Duration::from_secs(10);
    for replica in [&a, &b] {
        loop {
            let (_, m) = get(&client, &replica.base, "/v1/admin/cluster/membership").await;
            if m["digest"] == json!(digest) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} serves {m}, the database's digest is {digest} at {head}",
                replica.base
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (_, then) = get(
            &client,
            &replica.base,
            &format!("/v1/admin/cluster/membership?asOf={at}"),
        )
        .await;
        assert_eq!(then["digest"], json!(digest_then), "{}", replica.base);
    }
    // The loss is one alarm that names its range, and its event lists the
    // lost events' hashes.
    let (_, alarms) = get(&client, &b.base, "/v1/admin/alarms").await;
    let raised: Vec<&Value> = alarms["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["name"] == "log-events-lost")
        .collect();
    assert_eq!(raised.len(), 1, "{alarms}");
    let alarm = raised[0].clone();
    let (_, recorded) = get(&client, &b.base, "/v1/admin/events?type=EventsLost").await;
    let recorded = recorded["events"].as_array().unwrap();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0]["payload"]["lost"], Value::Array(lost_hashes));
    let message = alarm["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "events {} to {lost_head} were lost",
            kept_head + 1
        )),
        "{alarm}"
    );
}

/// `postgres://user@h1:p1,h2:p2/db?q` in libpq's key=value form.
fn keywords(url: &str) -> String {
    let rest = url.strip_prefix("postgres://").unwrap();
    let (user, rest) = rest.split_once('@').unwrap();
    let (hosts, rest) = rest.split_once('/').unwrap();
    let (db, query) = rest.split_once('?').unwrap();
    let (names, ports): (Vec<&str>, Vec<&str>) = hosts
        .split(',')
        .map(|h| h.rsplit_once(':').unwrap())
        .unzip();
    format!(
        "host={} port={} dbname={db} user={user} {}",
        names.join(","),
        ports.join(","),
        query.replace('&', " ")
    )
}
