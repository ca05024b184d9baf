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

mod membership;
mod upgrades;

use std::sync::Arc;
use std::time::Duration;

use stratum_api::command::{CommandBus, CommandRequest};
use stratum_api::service::{self, ServiceConfig};
use stratum_domain::membership::MemberCommand;
use stratum_domain::release::TrustedKeys;
use stratum_domain::upgrade::{Upgrade, UpgradeCommand, UpgradeState};
use stratum_domain::Command;
use stratum_store::EventStore;

use membership::{member_changes, membership};
use upgrades::{
    upgrade_node_rolled_back, upgrade_precheck_failed, upgrade_rollback,
    upgrade_rollback_restore_required, upgrade_security_alarm, upgrade_staged_canceled,
    upgrade_to_done, CLOCK_OFFSET,
};

/// Runs `c` as `principal`, which must commit.
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

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("stratum-record-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
