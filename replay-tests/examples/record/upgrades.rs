//! The upgrade scenarios, each an upgrade driven through its states by the
//! nodes' reports and the upgrade driver.

use super::*;

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

/// The release tooling registers `manifest`, signed (again) with the test
/// key.
async fn register(bus: &CommandBus, manifest: serde_json::Value) {
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
        register(bus, manifest).await;
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

/// Upgrade `id` once it fetches, after each of its nodes reported its
/// fetch done.
async fn fetched(store: &Arc<dyn EventStore>, bus: &CommandBus, id: &str) -> Upgrade {
    let u = until(store, id, |u| u.state == UpgradeState::Fetching).await;
    for n in nodes(&u) {
        report(bus, id, &n, "fetch").await;
    }
    u
}

/// Once upgrade `id` backs up, its first node reports the backup taken.
async fn backed_up(store: &Arc<dyn EventStore>, bus: &CommandBus, id: &str) {
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
}

/// Runs upgrade `id` (past its prechecks) through to `done`.
async fn drive_to_done(store: &Arc<dyn EventStore>, bus: &CommandBus, id: &str) {
    let u = fetched(store, bus, id).await;
    backed_up(store, bus, id).await;
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

pub(super) async fn upgrade_to_done(
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
pub(super) static CLOCK_OFFSET: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

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

pub(super) async fn upgrade_security_alarm(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    cluster(store, bus, 2, "1.1.0").await;
    let mut m = stratum_domain::testing::manifest("1.2.0", "14.0", None);
    m["cves"] = serde_json::json!(["CVE-2026-1234"]);
    register(bus, m).await;
    let id = create(bus, "1.2.0", "stage-only").await;
    let u = fetched(store, bus, &id).await;
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
    backed_up(store, bus, &id).await;
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

pub(super) async fn upgrade_node_rolled_back(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    cluster(store, bus, 2, "1.1.0").await;
    let id = create(bus, "1.1.0", "now").await;
    fetched(store, bus, &id).await;
    backed_up(store, bus, &id).await;
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

pub(super) async fn upgrade_staged_canceled(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    cluster(store, bus, 2, "1.1.0").await;
    let id = create(bus, "1.1.0", "stage-only").await;
    fetched(store, bus, &id).await;
    until(store, &id, |u| u.state == UpgradeState::Staged).await;
    exec(
        bus,
        "user/alice",
        up(UpgradeCommand::Cancel { upgrade_id: id }),
    )
    .await;
}

pub(super) async fn upgrade_precheck_failed(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    cluster(store, bus, 2, "1.1.0").await;
    let mut manifest = stratum_domain::testing::manifest("1.2.0", "13.1", None);
    manifest["requiredStops"] = serde_json::json!(["1.1.0"]);
    register(bus, manifest).await;
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
pub(super) async fn upgrade_rollback_restore_required(
    store: &Arc<dyn EventStore>,
    bus: &CommandBus,
) {
    let with_schema = |v: &str, schema: serde_json::Value| {
        let mut m = stratum_domain::testing::manifest(v, "13.1", None);
        m["schema"] = schema;
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
    rolled_back(store, bus, undone).await;
}

pub(super) async fn upgrade_rollback(store: &Arc<dyn EventStore>, bus: &CommandBus) {
    let undone = upgrade_to_done(store, bus, 2, "1.1.0").await;
    rolled_back(store, bus, undone).await;
}

/// Rolls upgrade `undone` back, its backup restored, and runs the rollback
/// to `done`.
async fn rolled_back(store: &Arc<dyn EventStore>, bus: &CommandBus, undone: String) {
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
