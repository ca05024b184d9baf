//! Records event logs: runs a scenario through the real service (with its
//! raft cleanup and upgrade driver) on a fresh SQLite database and writes
//! the log it produced in both forms to `logs/<name>.jsonl` and
//! `logs/<name>.postcard`.
//!
//! `cargo run -p stratum-replay-tests --example record -- <name>...`
//!
//! - `membership`: a founder and two joiners, one failing at
//!   `join/raft-openbao` after reaching Patroni's raft; a voter
//!   decommissioned (removing, raft cleanup, decommissioned); a join request
//!   approved and one rejected; nodes reporting the generation they applied.
//! - `member-changes`: members re-addressed, relabelled and re-bound with
//!   `PATCH`; a voter demoted with `force` and taken out of its rafts while
//!   it stays active; a joiner failing at `join/raft-ovn`, cleaned by the
//!   record-only adapters (each removal says `adapter: "record-only"`).
//! - `upgrade-security-alarm`: a stage-only upgrade to an OS release that
//!   fixes a CVE, staged: `NodeRebootPending` warnings, then (on a clock
//!   moved 7 days on) the `node-reboot-pending` alarms, cleared one by one
//!   as the nodes reboot after apply; verify waits for the instances that
//!   ran on a rebooted node.
//! - `upgrade-node-rolled-back`: a node switches itself back to the
//!   release it ran before, in its roll turn: the upgrade fails naming it.
//! - `upgrade-rollback-restore-required`: an upgrade to a release whose
//!   schema the old control plane cannot run (`plan.restoreRequired`); its
//!   rollback without a restore is refused `RESTORE_REQUIRED`, and with the
//!   backup restored it runs to `done`.
//! - `upgrade-staged-canceled`: a stage-only upgrade fetched by both nodes
//!   and canceled in `staged`.
//! - `upgrade-done`: a three-node upgrade from `planned` to `done`, with its
//!   backup, roll turns in ordinal order and verification.
//! - `upgrade-precheck-failed`: an upgrade skipping a required stop fails
//!   its `upgrade-path` precheck; its findings are acknowledged.
//! - `upgrade-rollback`: an upgrade to `done`, then rolled back with its
//!   backup restored, to `done` again.
//!
//! A recorded log is committed and never recorded again: its snapshot
//! (`tests/snapshots`) holds the times and ids it was recorded with.

use std::sync::Arc;
use std::time::Duration;

use stratum_api::command::{CommandBus, CommandRequest};
use stratum_api::service::{self, ServiceConfig};
use stratum_domain::membership::MemberCommand;
use stratum_domain::release::TrustedKeys;
use stratum_domain::upgrade::{Upgrade, UpgradeCommand, UpgradeState};
use stratum_domain::Command;
use stratum_store::EventStore;

async fn run(bus: &CommandBus, principal: &str, c: MemberCommand) {
    let reply = bus
        .execute(CommandRequest::new(Command::Member(c), principal))
        .await
        .unwrap();
    if let Err(refusal) = reply.committed() {
        panic!("{refusal:?}");
    }
}

fn admit(node_id: &str, role: &str, ip: &str, rack: &str) -> MemberCommand {
    MemberCommand::Admit {
        node_id: Some(node_id.into()),
        role: Some(role.into()),
        mgmt_ip: Some(ip.into()),
        bindings: [("storage".to_owned(), ip.replace("192.0.2", "10.1.0"))].into(),
        labels: [("topology.rack".to_owned(), rack.to_owned())].into(),
    }
}

fn step(node_id: &str, s: &str) -> MemberCommand {
    MemberCommand::ReportJoinProgress {
        node_id: node_id.into(),
        step: Some(s.into()),
    }
}

async fn membership(store: Arc<dyn EventStore>, bus: &CommandBus) {
    let installer = "stratum-installer";
    let admin = "user/admin";

    run(
        bus,
        installer,
        admit("n-msst0001", "hybrid", "192.0.2.11", "r1"),
    )
    .await;
    run(
        bus,
        installer,
        MemberCommand::CompleteJoin {
            node_id: "n-msst0001".into(),
        },
    )
    .await;
    run(
        bus,
        admin,
        admit("n-msst0002", "hybrid", "192.0.2.12", "r1"),
    )
    .await;
    run(
        bus,
        admin,
        admit("n-msst0003", "hybrid", "192.0.2.13", "r2"),
    )
    .await;
    for s in ["join/packages", "join/raft-patroni"] {
        run(bus, "node/n-msst0002", step("n-msst0002", s)).await;
    }
    run(
        bus,
        "node/n-msst0002",
        MemberCommand::ReportJoinFailure {
            node_id: "n-msst0002".into(),
            step: Some("join/raft-openbao".into()),
            error: Some("Error joining raft: permission denied (403)".into()),
        },
    )
    .await;
    for s in [
        "join/packages",
        "join/raft-patroni",
        "join/raft-openbao",
        "join/raft-ovn",
    ] {
        run(bus, "node/n-msst0003", step("n-msst0003", s)).await;
    }
    run(
        bus,
        "node/n-msst0003",
        MemberCommand::CompleteJoin {
            node_id: "n-msst0003".into(),
        },
    )
    .await;
    run(
        bus,
        "node/n-msst0004",
        MemberCommand::RequestJoin {
            request_id: "jr-0000000001".into(),
            node_id: Some("n-msst0004".into()),
            mgmt_ip: Some("192.0.2.14".into()),
            labels: [("topology.rack".to_owned(), "r2".to_owned())].into(),
            facts: r#"{"cpus":32,"memoryGiB":256}"#.into(),
        },
    )
    .await;
    run(
        bus,
        admin,
        MemberCommand::ApproveJoin {
            request_id: "jr-0000000001".into(),
            role: Some("hybrid".into()),
            mgmt_ip: None,
            bindings: None,
            labels: None,
        },
    )
    .await;
    run(
        bus,
        "node/n-msst0004",
        MemberCommand::CompleteJoin {
            node_id: "n-msst0004".into(),
        },
    )
    .await;
    run(
        bus,
        "node/n-msst0009",
        MemberCommand::RequestJoin {
            request_id: "jr-0000000002".into(),
            node_id: Some("n-msst0009".into()),
            mgmt_ip: Some("192.0.2.19".into()),
            labels: Default::default(),
            facts: "{}".into(),
        },
    )
    .await;
    run(
        bus,
        admin,
        MemberCommand::RejectJoin {
            request_id: "jr-0000000002".into(),
            reason: Some("unknown hardware".into()),
        },
    )
    .await;
    run(
        bus,
        "user/alice",
        MemberCommand::Decommission {
            node_id: "n-msst0004".into(),
            reason: Some("motherboard replaced under RMA 7731".into()),
            force: false,
        },
    )
    .await;
    // The raft cleanup runs after the answers; wait for it.
    for _ in 0..200 {
        let rm = stratum_api::command::load(store.clone(), None)
            .await
            .unwrap();
        let m = &rm.state.membership.members;
        if m["n-msst0002"].raft_cleanup_at.is_some()
            && m["n-msst0004"].state == stratum_domain::membership::MemberState::Decommissioned
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let generation = stratum_api::command::load(store.clone(), None)
        .await
        .unwrap()
        .state
        .membership
        .generation;
    for n in ["n-msst0001", "n-msst0003"] {
        run(
            bus,
            &format!("node/{n}"),
            MemberCommand::ReportAppliedGeneration {
                node_id: n.into(),
                generation: Some(generation),
            },
        )
        .await;
    }
}

fn update(node_id: &str, body: serde_json::Value) -> MemberCommand {
    let s = |k: &str| body.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let map = |k: &str| {
        body.get(k)
            .map(|v| serde_json::from_value(v.clone()).expect("a string map"))
    };
    MemberCommand::Update {
        node_id: node_id.into(),
        role: s("role"),
        mgmt_ip: s("mgmtIp"),
        bindings: map("bindings"),
        labels: map("labels"),
        force: body.get("force").and_then(|v| v.as_bool()).unwrap_or(false),
    }
}

/// Waits until every member's raft cleanup is done.
async fn cleanups_done(store: &Arc<dyn EventStore>) {
    for _ in 0..200 {
        let rm = stratum_api::command::load(store.clone(), None)
            .await
            .unwrap();
        if rm.state.membership.pending_cleanups().next().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("a raft cleanup did not finish");
}

async fn member_changes(store: Arc<dyn EventStore>, bus: &CommandBus) {
    let installer = "stratum-installer";
    let admin = "user/admin";
    for (n, ip, rack) in [
        ("n-msst0001", "192.0.2.11", "r1"),
        ("n-msst0002", "192.0.2.12", "r1"),
        ("n-msst0003", "192.0.2.13", "r2"),
    ] {
        run(bus, installer, admit(n, "hybrid", ip, rack)).await;
        run(
            bus,
            installer,
            MemberCommand::CompleteJoin { node_id: n.into() },
        )
        .await;
    }
    // A wrong rack label, corrected.
    run(
        bus,
        admin,
        update(
            "n-msst0003",
            serde_json::json!({"labels": {"topology.rack": "r3", "hw": "gen11"}}),
        ),
    )
    .await;
    // A re-addressed node, with its storage binding.
    run(
        bus,
        "user/alice",
        update(
            "n-msst0002",
            serde_json::json!({"mgmtIp": "192.0.2.22", "bindings": {"storage": "10.1.0.22", "overlay": "10.2.0.22"}}),
        ),
    )
    .await;
    // A change that changes nothing appends nothing.
    run(
        bus,
        "user/alice",
        update("n-msst0002", serde_json::json!({"mgmtIp": "192.0.2.22"})),
    )
    .await;
    // Two voters stay: n-msst0003 is demoted and leaves its rafts.
    run(
        bus,
        admin,
        update("n-msst0003", serde_json::json!({"role": "storage"})),
    )
    .await;
    cleanups_done(&store).await;
    // A compute joiner and a voter joiner; the voter fails at OVN's raft.
    run(
        bus,
        admin,
        admit("n-msst0004", "compute", "192.0.2.14", "r2"),
    )
    .await;
    run(
        bus,
        admin,
        admit("n-msst0005", "control", "192.0.2.15", "r1"),
    )
    .await;
    for s in ["join/packages", "join/raft-patroni", "join/raft-openbao"] {
        run(bus, "node/n-msst0005", step("n-msst0005", s)).await;
    }
    run(
        bus,
        "node/n-msst0005",
        MemberCommand::ReportJoinFailure {
            node_id: "n-msst0005".into(),
            step: Some("join/raft-ovn".into()),
            error: Some("ovsdb-server: cluster/join: connection timed out".into()),
        },
    )
    .await;
    cleanups_done(&store).await;
    // The last two voters: demoting one more needs force.
    run(
        bus,
        admin,
        update(
            "n-msst0002",
            serde_json::json!({"role": "compute", "force": true}),
        ),
    )
    .await;
    cleanups_done(&store).await;
}

#[tokio::main]
async fn main() {
    let names: Vec<String> = std::env::args().skip(1).collect();
    if names.is_empty() {
        eprintln!("usage: record <name>...; names: {}", SCENARIOS.join(", "));
        std::process::exit(2);
    }
    for name in &names {
        if !SCENARIOS.contains(&name.as_str()) {
            eprintln!("unknown log {name}; names: {}", SCENARIOS.join(", "));
            std::process::exit(2);
        }
        record(name).await;
    }
}

const SCENARIOS: [&str; 9] = [
    "upgrade-rollback-restore-required",
    "membership",
    "member-changes",
    "upgrade-security-alarm",
    "upgrade-node-rolled-back",
    "upgrade-staged-canceled",
    "upgrade-done",
    "upgrade-precheck-failed",
    "upgrade-rollback",
];

async fn record(name: &str) {
    let dir = tempfile_dir();
    let url = format!("sqlite://{}/record.db", dir.display());
    let store = stratum_store::connect(&url).await.unwrap();
    let svc = service::start(
        store.clone(),
        ServiceConfig {
            bootstrap_token: Some("recorded-log-token".into()),
            release_keys: TrustedKeys::parse(&stratum_domain::testing::release_keys_spec())
                .unwrap(),
            clock: stratum_api::command::Clock::from_fn(|| {
                chrono::Utc::now()
                    + chrono::Duration::seconds(
                        CLOCK_OFFSET.load(std::sync::atomic::Ordering::SeqCst),
                    )
            }),
            driver_tick: Some(Duration::from_millis(50)),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let bus = &svc.state.bus;
    match name {
        "membership" => membership(store.clone(), bus).await,
        "member-changes" => member_changes(store.clone(), bus).await,
        "upgrade-security-alarm" => upgrade_security_alarm(&store, bus).await,
        "upgrade-node-rolled-back" => upgrade_node_rolled_back(&store, bus).await,
        "upgrade-staged-canceled" => upgrade_staged_canceled(&store, bus).await,
        "upgrade-done" => {
            let id = upgrade_to_done(&store, bus, 3, "1.1.0").await;
            println!("upgrade {id} done");
        }
        "upgrade-precheck-failed" => upgrade_precheck_failed(&store, bus).await,
        "upgrade-rollback" => upgrade_rollback(&store, bus).await,
        "upgrade-rollback-restore-required" => upgrade_rollback_restore_required(&store, bus).await,
        _ => unreachable!("checked in main"),
    }
    let events = store.read_after(0, u32::MAX).await.unwrap();
    let logs = stratum_replay_tests::root().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut jsonl = Vec::new();
    stratum_api::cli::export(&*store, 0, None, &mut jsonl)
        .await
        .unwrap();
    std::fs::write(logs.join(format!("{name}.jsonl")), jsonl).unwrap();
    std::fs::write(
        logs.join(format!("{name}.postcard")),
        stratum_domain::log::encode_log(&events),
    )
    .unwrap();
    println!(
        "recorded {} events to {}/{name}.*",
        events.len(),
        logs.display()
    );
    drop(svc);
    let _ = std::fs::remove_dir_all(dir);
}

async fn exec(bus: &CommandBus, principal: &str, c: Command) -> serde_json::Value {
    let reply = bus
        .execute(CommandRequest::new(c, principal))
        .await
        .unwrap()
        .committed()
        .unwrap_or_else(|refusal| panic!("{refusal:?}"));
    reply.json()
}

fn up(c: UpgradeCommand) -> Command {
    Command::Upgrade(c)
}

/// `n` active, current hybrid members; releases 1.0.0 (running) and `to`
/// registered.
async fn cluster(store: &Arc<dyn EventStore>, bus: &CommandBus, n: usize, to: &str) {
    let manifests = ["1.0.0", to]
        .iter()
        .map(|v| stratum_domain::testing::manifest(v, "13.1", None))
        .collect();
    cluster_with(store, bus, n, manifests).await;
}

/// `n` active, current hybrid members, these manifests registered, and the
/// first of them running.
async fn cluster_with(
    store: &Arc<dyn EventStore>,
    bus: &CommandBus,
    n: usize,
    manifests: Vec<serde_json::Value>,
) {
    for i in 1..=n {
        let id = format!("n-msst000{i}");
        run(
            bus,
            "stratum-installer",
            admit(&id, "hybrid", &format!("192.0.2.1{i}"), "r1"),
        )
        .await;
        run(
            bus,
            &format!("node/{id}"),
            MemberCommand::CompleteJoin {
                node_id: id.clone(),
            },
        )
        .await;
    }
    let generation = load(store).await.membership.generation;
    for i in 1..=n {
        let id = format!("n-msst000{i}");
        run(
            bus,
            &format!("node/{id}"),
            MemberCommand::ReportAppliedGeneration {
                node_id: id.clone(),
                generation: Some(generation),
            },
        )
        .await;
    }
    let running = manifests[0]["version"].as_str().unwrap().to_owned();
    for manifest in manifests {
        exec(
            bus,
            "user/release-bot",
            up(UpgradeCommand::RegisterRelease {
                manifest: stratum_domain::testing::signed(manifest),
                source: stratum_domain::upgrade::ReleaseSource::Manifest,
            }),
        )
        .await;
    }
    exec(
        bus,
        "stratum-installer",
        up(UpgradeCommand::SetRunningRelease {
            version: Some(running),
        }),
    )
    .await;
}

async fn load(store: &Arc<dyn EventStore>) -> stratum_domain::State {
    stratum_api::command::load(store.clone(), None)
        .await
        .unwrap()
        .state
}

/// Waits until the driver has moved upgrade `id` to a state `ok` accepts.
async fn until(store: &Arc<dyn EventStore>, id: &str, ok: impl Fn(&Upgrade) -> bool) -> Upgrade {
    for _ in 0..500 {
        if let Some(u) = load(store).await.upgrades.upgrades.get(id) {
            if ok(u) {
                return u.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("upgrade {id} did not get there");
}

async fn create(bus: &CommandBus, target: &str, mode: &str) -> String {
    let created = exec(
        bus,
        "user/alice",
        up(UpgradeCommand::Create {
            upgrade_id: stratum_api::auth::new_id("upg"),
            target_release: Some(target.into()),
            mode: Some(mode.into()),
            backup_location: Some("node".into()),
            backup_encrypted: Some(true),
            config: Default::default(),
        }),
    )
    .await;
    created["id"].as_str().unwrap().to_owned()
}

async fn report(bus: &CommandBus, id: &str, node: &str, phase: &str) {
    exec(
        bus,
        &format!("node/{node}"),
        up(UpgradeCommand::ReportNode {
            upgrade_id: id.into(),
            node_id: node.into(),
            phase: Some(phase.into()),
            state: Some("done".into()),
            message: Some(format!("{phase} done")),
            host_steps: None,
            rebooted_at: None,
            instances: None,
            host_state: None,
            running_instances: None,
        }),
    )
    .await;
}

fn nodes(u: &Upgrade) -> Vec<String> {
    u.nodes.iter().map(|n| n.node_id.clone()).collect()
}

/// Runs upgrade `id` (past its prechecks) through to `done`.
async fn drive_to_done(store: &Arc<dyn EventStore>, bus: &CommandBus, id: &str) {
    let u = until(store, id, |u| u.state == UpgradeState::Fetching).await;
    for n in nodes(&u) {
        report(bus, id, &n, "fetch").await;
    }
    until(store, id, |u| u.state == UpgradeState::BackingUp).await;
    exec(
        bus,
        "node/n-msst0001",
        up(UpgradeCommand::ReportBackup {
            upgrade_id: id.into(),
            location: Some("node".into()),
            bundle: Some(format!("/var/lib/stratum/backup/{id}.tar.age")),
            encrypted: Some(true),
        }),
    )
    .await;
    for n in nodes(&u) {
        until(store, id, |u| {
            u.state == UpgradeState::Rolling
                && u.turn.map(|t| u.nodes[t].node_id.as_str()) == Some(n.as_str())
        })
        .await;
        report(bus, id, &n, "roll").await;
    }
    until(store, id, |u| u.state == UpgradeState::Verifying).await;
    for n in nodes(&u) {
        report(bus, id, &n, "verify").await;
    }
    until(store, id, |u| u.state == UpgradeState::Done).await;
}

async fn upgrade_to_done(
    store: &Arc<dyn EventStore>,
    bus: &CommandBus,
    n: usize,
    to: &str,
) -> String {
    cluster(store, bus, n, to).await;
    let id = create(bus, to, "now").await;
    drive_to_done(store, bus, &id).await;
    id
}

/// How far the recording's clock runs ahead of the wall clock, in seconds.
static CLOCK_OFFSET: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

async fn report_with(bus: &CommandBus, id: &str, node: &str, body: serde_json::Value) {
    let s = |k: &str| body.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let list = |k: &str| {
        body.get(k)
            .map(|v| serde_json::from_value::<Vec<String>>(v.clone()).unwrap())
    };
    exec(
        bus,
        &format!("node/{node}"),
        up(UpgradeCommand::ReportNode {
            upgrade_id: id.into(),
            node_id: node.into(),
            phase: s("phase"),
            state: s("state"),
            message: s("message"),
            host_steps: None,
            rebooted_at: s("rebootedAt").map(|t| t.parse().unwrap()),
            instances: list("instances"),
            host_state: s("hostState"),
            running_instances: list("runningInstances"),
        }),
    )
    .await;
}

async fn upgrade_security_alarm(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    cluster(store, bus, 2, "1.1.0").await;
    let mut m = stratum_domain::testing::manifest("1.2.0", "14.0", None);
    m["cves"] = serde_json::json!(["CVE-2026-1234"]);
    stratum_domain::release::sign(
        &mut m,
        stratum_domain::testing::RELEASE_KEY_ID,
        &stratum_domain::testing::release_key(),
    );
    exec(
        bus,
        "user/release-bot",
        up(UpgradeCommand::RegisterRelease {
            manifest: stratum_domain::testing::signed(m),
            source: stratum_domain::upgrade::ReleaseSource::Manifest,
        }),
    )
    .await;
    let id = create(bus, "1.2.0", "stage-only").await;
    let u = until(store, &id, |u| u.state == UpgradeState::Fetching).await;
    for n in nodes(&u) {
        report(bus, &id, &n, "fetch").await;
    }
    until(store, &id, |u| u.state == UpgradeState::Staged).await;
    // A week passes with the security reboot pending.
    CLOCK_OFFSET.store(7 * 24 * 3600 + 1, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..200 {
        if load(store).await.upgrades.alarms.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        load(store).await.upgrades.alarms.len(),
        2,
        "two alarms raised"
    );
    exec(
        bus,
        "user/alice",
        up(UpgradeCommand::Apply {
            upgrade_id: id.clone(),
        }),
    )
    .await;
    until(store, &id, |u| u.state == UpgradeState::BackingUp).await;
    exec(
        bus,
        "node/n-msst0001",
        up(UpgradeCommand::ReportBackup {
            upgrade_id: id.clone(),
            location: Some("node".into()),
            bundle: Some(format!("/var/lib/stratum/backup/{id}.tar.age")),
            encrypted: Some(true),
        }),
    )
    .await;
    let rebooted = (chrono::Utc::now() + chrono::Duration::days(7)).to_rfc3339();
    for n in nodes(&u) {
        until(store, &id, |u| {
            u.state == UpgradeState::Rolling
                && u.turn.map(|t| u.nodes[t].node_id.as_str()) == Some(n.as_str())
        })
        .await;
        report_with(
            bus,
            &id,
            &n,
            serde_json::json!({"phase": "roll", "state": "done", "rebootedAt": rebooted,
                               "instances": ["vm-7"], "hostState": "rebooted"}),
        )
        .await;
    }
    until(store, &id, |u| u.state == UpgradeState::Verifying).await;
    for n in nodes(&u) {
        report_with(
            bus,
            &id,
            &n,
            serde_json::json!({"phase": "verify", "state": "done", "runningInstances": ["vm-7"]}),
        )
        .await;
    }
    until(store, &id, |u| u.state == UpgradeState::Done).await;
}

async fn upgrade_node_rolled_back(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    cluster(store, bus, 2, "1.1.0").await;
    let id = create(bus, "1.1.0", "now").await;
    let u = until(store, &id, |u| u.state == UpgradeState::Fetching).await;
    for n in nodes(&u) {
        report(bus, &id, &n, "fetch").await;
    }
    until(store, &id, |u| u.state == UpgradeState::BackingUp).await;
    exec(
        bus,
        "node/n-msst0001",
        up(UpgradeCommand::ReportBackup {
            upgrade_id: id.clone(),
            location: Some("node".into()),
            bundle: Some(format!("/var/lib/stratum/backup/{id}.tar.age")),
            encrypted: Some(true),
        }),
    )
    .await;
    until(store, &id, |u| {
        u.state == UpgradeState::Rolling && u.turn == Some(0)
    })
    .await;
    report_with(
        bus,
        &id,
        "n-msst0001",
        serde_json::json!({"phase": "roll", "state": "rolled_back",
                           "message": "api did not start on 1.1.0; switched back to 1.0.0",
                           "hostState": "rolled-back"}),
    )
    .await;
    until(store, &id, |u| u.state == UpgradeState::Failed).await;
}

async fn upgrade_staged_canceled(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    cluster(store, bus, 2, "1.1.0").await;
    let id = create(bus, "1.1.0", "stage-only").await;
    let u = until(store, &id, |u| u.state == UpgradeState::Fetching).await;
    for n in nodes(&u) {
        report(bus, &id, &n, "fetch").await;
    }
    until(store, &id, |u| u.state == UpgradeState::Staged).await;
    exec(
        bus,
        "user/alice",
        up(UpgradeCommand::Cancel { upgrade_id: id }),
    )
    .await;
}

async fn upgrade_precheck_failed(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    cluster(store, bus, 2, "1.1.0").await;
    let mut manifest = stratum_domain::testing::manifest("1.2.0", "13.1", None);
    manifest["requiredStops"] = serde_json::json!(["1.1.0"]);
    stratum_domain::release::sign(
        &mut manifest,
        stratum_domain::testing::RELEASE_KEY_ID,
        &stratum_domain::testing::release_key(),
    );
    exec(
        bus,
        "user/release-bot",
        up(UpgradeCommand::RegisterRelease {
            manifest: stratum_domain::testing::signed(manifest),
            source: stratum_domain::upgrade::ReleaseSource::Manifest,
        }),
    )
    .await;
    let id = create(bus, "1.2.0", "now").await;
    until(store, &id, |u| u.state == UpgradeState::Failed).await;
    exec(
        bus,
        "user/alice",
        up(UpgradeCommand::Acknowledge { upgrade_id: id }),
    )
    .await;
}

/// 1.0.0 runs schema 6; 1.1.0 migrates to schema 7, which an older control
/// plane cannot run: the plan requires a restore, and the rollback takes
/// one.
async fn upgrade_rollback_restore_required(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    let with_schema = |v: &str, schema: serde_json::Value| {
        let mut m = stratum_domain::testing::manifest(v, "13.1", None);
        m["schema"] = schema;
        stratum_domain::release::sign(
            &mut m,
            stratum_domain::testing::RELEASE_KEY_ID,
            &stratum_domain::testing::release_key(),
        );
        m
    };
    cluster_with(
        store,
        bus,
        2,
        vec![
            with_schema("1.0.0", serde_json::json!({"version": 6})),
            with_schema(
                "1.1.0",
                serde_json::json!({"version": 7, "minUpgradeFrom": 6, "readableBy": 7}),
            ),
        ],
    )
    .await;
    let undone = create(bus, "1.1.0", "now").await;
    drive_to_done(store, bus, &undone).await;
    assert!(
        load(store).await.upgrades.upgrades[&undone]
            .plan
            .restore_required
    );
    let refused = bus
        .execute(CommandRequest::new(
            up(UpgradeCommand::Rollback {
                upgrade_id: undone.clone(),
                new_upgrade_id: stratum_api::auth::new_id("upg"),
                restore_backup: false,
                config: Default::default(),
            }),
            "user/alice",
        ))
        .await
        .unwrap();
    assert!(
        matches!(&refused, stratum_api::command::Outcome::Refused(r)
            if r.code == stratum_domain::ErrorCode::RestoreRequired),
        "{refused:?}"
    );
    let rollback = exec(
        bus,
        "user/alice",
        up(UpgradeCommand::Rollback {
            upgrade_id: undone,
            new_upgrade_id: stratum_api::auth::new_id("upg"),
            restore_backup: true,
            config: Default::default(),
        }),
    )
    .await;
    let id = rollback["id"].as_str().unwrap().to_owned();
    drive_to_done(store, bus, &id).await;
}

async fn upgrade_rollback(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    let undone = upgrade_to_done(store, bus, 2, "1.1.0").await;
    let rollback = exec(
        bus,
        "user/alice",
        up(UpgradeCommand::Rollback {
            upgrade_id: undone,
            new_upgrade_id: stratum_api::auth::new_id("upg"),
            restore_backup: true,
            config: Default::default(),
        }),
    )
    .await;
    let id = rollback["id"].as_str().unwrap().to_owned();
    drive_to_done(store, bus, &id).await;
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("stratum-record-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
