//! Given/when/then tests of the upgrade record (issue 11): rollback safety,
//! the rollback facts of the plan, node reports (`rolled_back`, host-step
//! lists, instances), settling, reboot warnings and the 7-day alarm,
//! prechecks judging the nodes' facts, `componentsFrom: nodes`, fetched
//! bundles, the backup target and the plan's shape.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use crate::error::{ErrorCode, Refusal};
use crate::event::DomainEvent;
use crate::release::{canonical, Component, ComponentKind};
use crate::state::{Command, CommandContext, Decision, State, Subject};
use crate::testing::{
    self, apply, assert_invalid, manifest, registered, t0, when, when_by, RELEASE_KEY_ID,
};
use crate::upgrade::*;
use crate::upgrade_tests::{
    cluster, cluster_with, cluster_with_releases, resigned, ADMIN, DRIVER, NODES, UPG, UPG2,
};

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

fn cmd(c: UpgradeCommand) -> Command {
    Command::Upgrade(c)
}

fn create_with(id: &str, target: &str, mode: &str, config: UpgradeConfig) -> UpgradeCommand {
    UpgradeCommand::Create {
        upgrade_id: id.into(),
        target_release: Some(target.into()),
        mode: Some(mode.into()),
        backup_location: Some("node".into()),
        backup_encrypted: Some(false),
        config,
    }
}

fn create(id: &str, target: &str) -> UpgradeCommand {
    create_with(id, target, "now", UpgradeConfig::default())
}

/// The optional parts of a node report.
#[derive(Default)]
struct Extra {
    host_steps: Option<Vec<HostStep>>,
    rebooted_at: Option<DateTime<Utc>>,
    instances: Option<Vec<String>>,
    host_state: Option<String>,
    running_instances: Option<Vec<String>>,
}

fn report_with(id: &str, node: &str, phase: &str, state: &str, x: Extra) -> UpgradeCommand {
    UpgradeCommand::ReportNode {
        upgrade_id: id.into(),
        node_id: node.into(),
        phase: Some(phase.into()),
        state: Some(state.into()),
        message: None,
        host_steps: x.host_steps,
        rebooted_at: x.rebooted_at,
        instances: x.instances,
        host_state: x.host_state,
        running_instances: x.running_instances,
    }
}

fn report(id: &str, node: &str, phase: &str, state: &str) -> UpgradeCommand {
    report_with(id, node, phase, state, Extra::default())
}

fn rebooted(at: DateTime<Utc>) -> Extra {
    Extra {
        rebooted_at: Some(at),
        ..Default::default()
    }
}

fn backup_report(id: &str) -> UpgradeCommand {
    UpgradeCommand::ReportBackup {
        upgrade_id: id.into(),
        location: Some("node".into()),
        bundle: Some(format!("/var/lib/stratum/backup/{id}.tar")),
        encrypted: Some(false),
    }
}

fn apply_staged(id: &str) -> UpgradeCommand {
    UpgradeCommand::Apply {
        upgrade_id: id.into(),
    }
}

fn cancel(id: &str) -> UpgradeCommand {
    UpgradeCommand::Cancel {
        upgrade_id: id.into(),
    }
}

fn rollback(id: &str, new_id: &str, restore_backup: bool) -> UpgradeCommand {
    UpgradeCommand::Rollback {
        upgrade_id: id.into(),
        new_upgrade_id: new_id.into(),
        restore_backup,
        config: UpgradeConfig::default(),
    }
}

fn report_facts(node: &str, facts: NodeFacts) -> UpgradeCommand {
    UpgradeCommand::ReportFacts {
        node_id: node.into(),
        facts,
    }
}

// ---------------------------------------------------------------------------
// Harness helpers
// ---------------------------------------------------------------------------

/// Decides `c` by `principal` and appends what it decided.
fn run_by(s: &mut State, principal: &str, c: UpgradeCommand) -> Decision {
    let d = when_by(s, principal, cmd(c.clone()))
        .unwrap_or_else(|r| panic!("{c:?} was refused: {r:?}"));
    apply(s, principal, &d.events);
    d
}

fn run(s: &mut State, c: UpgradeCommand) -> Decision {
    run_by(s, ADMIN, c)
}

fn refused(s: &State, c: UpgradeCommand) -> Refusal {
    testing::refused(s, cmd(c))
}

/// The driver's tick at `now` (the clock is an input of `decide`): the
/// step that is due, appended.
fn advance_at(s: &mut State, now: DateTime<Utc>) -> Vec<DomainEvent> {
    let ctx = CommandContext {
        now,
        principal: DRIVER.to_owned(),
        held_policies: None,
    };
    let d = s
        .decide(&cmd(UpgradeCommand::Advance), &ctx)
        .unwrap_or_else(|r| panic!("Advance at {now} was refused: {r:?}"));
    apply(s, DRIVER, &d.events);
    d.events
}

fn advance(s: &mut State) -> Vec<DomainEvent> {
    advance_at(s, t0())
}

fn upgrade<'a>(s: &'a State, id: &str) -> &'a Upgrade {
    s.upgrades
        .upgrades
        .get(id)
        .unwrap_or_else(|| panic!("no upgrade {id}"))
}

fn state_of(s: &State, id: &str) -> UpgradeState {
    upgrade(s, id).state
}

fn node<'a>(s: &'a State, id: &str, node_id: &str) -> &'a UpgradeNode {
    upgrade(s, id)
        .nodes
        .iter()
        .find(|n| n.node_id == node_id)
        .unwrap_or_else(|| panic!("{node_id} is not in upgrade {id}"))
}

/// The node whose roll turn it is.
fn turn(s: &State, id: &str) -> String {
    let u = upgrade(s, id);
    let i = u.turn.unwrap_or_else(|| panic!("no turn in {u:?}"));
    u.nodes[i].node_id.clone()
}

fn precheck<'a>(checks: &'a [Precheck], name: &str) -> &'a Precheck {
    checks
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no precheck {name} in {checks:?}"))
}

fn turn_started(id: &str, node_id: &str) -> DomainEvent {
    DomainEvent::UpgradeNodeTurnStarted(UpgradeNodeTurnStarted {
        upgrade_id: id.into(),
        node_id: node_id.into(),
    })
}

fn alarm_cleared(id: &str, node_id: &str) -> DomainEvent {
    DomainEvent::AlarmCleared(AlarmCleared {
        name: NODE_REBOOT_PENDING_ALARM.into(),
        node_id: Some(node_id.into()),
        upgrade_id: Some(id.into()),
    })
}

/// The nodes whose reboot alarm of [`UPG`] `events` clear (and no other
/// alarm is cleared).
fn cleared_nodes(events: &[DomainEvent]) -> BTreeSet<String> {
    events
        .iter()
        .filter_map(|e| match e {
            DomainEvent::AlarmCleared(a) => {
                assert_eq!(a.name, NODE_REBOOT_PENDING_ALARM, "{a:?}");
                assert_eq!(a.upgrade_id.as_deref(), Some(UPG), "{a:?}");
                Some(a.node_id.clone().unwrap_or_default())
            }
            _ => None,
        })
        .collect()
}

fn node_set(nodes: &[&str]) -> BTreeSet<String> {
    nodes.iter().map(|n| (*n).to_owned()).collect()
}

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|x| (*x).to_owned()).collect()
}

fn host_step_names(n: &UpgradeNode) -> Vec<&str> {
    n.host_steps.iter().map(|h| h.name.as_str()).collect()
}

/// The plan event of a decision.
fn planned(d: &Decision) -> &UpgradePlanned {
    d.events
        .iter()
        .find_map(|e| match e {
            DomainEvent::UpgradePlanned(p) => Some(p),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no UpgradePlanned in {d:?}"))
}

/// The plan an upgrade to `target` would get in `s` (nothing appended).
fn plan_of(s: &State, target: &str) -> Plan {
    // An id no test upgrade takes.
    let d = when(s, cmd(create("upg-pppppppppp", target)))
        .unwrap_or_else(|r| panic!("create to {target} was refused: {r:?}"));
    planned(&d).plan.clone()
}

fn image(name: &str, version: &str, digest: char) -> Component {
    Component {
        kind: ComponentKind::Image,
        name: name.into(),
        version: version.into(),
        digest: format!("sha256:{}", digest.to_string().repeat(64)),
        epoch: 0,
        release: String::new(),
        arch: String::new(),
    }
}

/// Whether `message` states `bytes` as a number: plain or grouped digits
/// (`500000000`, `500,000,000`), or in MB, GB, MiB or GiB (`500 MB`,
/// `0.5 GB`, `476.8 MiB`), not as part of a larger number.
fn names_amount(message: &str, bytes: u64) -> bool {
    let digits = bytes.to_string();
    let grouped = |sep: char| {
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(sep);
            }
            out.push(c);
        }
        out
    };
    let mut forms = vec![digits.clone(), grouped(','), grouped('_'), grouped(' ')];
    for (unit, size) in [
        ("MB", 1e6),
        ("GB", 1e9),
        ("MiB", 1_048_576.0),
        ("GiB", 1_073_741_824.0),
    ] {
        let v = bytes as f64 / size;
        for decimals in 0usize..=2 {
            let text = format!("{v:.decimals$}");
            let back: f64 = text.parse().unwrap_or(0.0);
            if (back - v).abs() <= v * 0.05 {
                forms.push(format!("{text} {unit}"));
                forms.push(format!("{text}{unit}"));
            }
        }
    }
    forms.iter().any(|form| {
        message.match_indices(form.as_str()).any(|(at, _)| {
            let before = message[..at].chars().next_back();
            let mut after = message[at + form.len()..].chars();
            let starts_clean = before.is_none_or(|c| !c.is_ascii_digit() && c != '.');
            let ends_clean = !form.ends_with(|c: char| c.is_ascii_digit())
                || match after.next() {
                    Some(c) if c.is_ascii_digit() => false,
                    Some('.' | ',' | '_') => after.next().is_none_or(|c| !c.is_ascii_digit()),
                    _ => true,
                };
            starts_clean && ends_clean
        })
    })
}

// ---------------------------------------------------------------------------
// Givens
// ---------------------------------------------------------------------------

/// Takes the one action that moves upgrade `id` on from where it is, then
/// lets the driver advance.
fn step(s: &mut State, id: &str) {
    match state_of(s, id) {
        UpgradeState::Planned | UpgradeState::Prechecking => {}
        UpgradeState::Fetching => {
            for n in NODES {
                run(s, report(id, n, "fetch", "done"));
            }
        }
        UpgradeState::Staged => {
            run(s, apply_staged(id));
            return;
        }
        UpgradeState::BackingUp => {
            run(s, backup_report(id));
        }
        UpgradeState::Rolling => {
            let n = turn(s, id);
            run(s, report(id, &n, "roll", "done"));
        }
        UpgradeState::Verifying => {
            for n in NODES {
                run(s, report(id, n, "verify", "done"));
            }
        }
        end => panic!("upgrade {id} is {end:?}: it moves no more"),
    }
    advance(s);
}

/// Walks upgrade `id` on until it is in `to`.
fn drive(s: &mut State, id: &str, to: UpgradeState) {
    for _ in 0..20 {
        if state_of(s, id) == to {
            return;
        }
        step(s, id);
    }
    panic!("upgrade {id} never reached {to:?}: {:?}", upgrade(s, id));
}

/// The plain cluster with upgrade [`UPG`] to 1.1.0 driven to `to`.
fn upgrade_in(to: UpgradeState) -> State {
    let mut s = cluster();
    run(&mut s, create(UPG, "1.1.0"));
    drive(&mut s, UPG, to);
    s
}

/// The prechecks an upgrade to `target` finds in `s` (created and advanced
/// through prechecking).
fn prechecks_in(mut s: State, target: &str) -> (State, Vec<Precheck>) {
    run(&mut s, create(UPG, target));
    advance(&mut s);
    advance(&mut s);
    let checks = upgrade(&s, UPG).prechecks.clone();
    (s, checks)
}

// ---------------------------------------------------------------------------
// 1. Rollback safety
// ---------------------------------------------------------------------------

/// 1.0.0 runs schema 6; 1.1.0 migrates to schema 7, which only a control
/// plane of schema 7 or newer can run.
fn schema_cluster() -> State {
    let mut from = manifest("1.0.0", "13.1", None);
    from["schema"] = json!({ "version": 6 });
    let mut to = manifest("1.1.0", "13.1", None);
    to["schema"] = json!({ "version": 7, "readableBy": 7 });
    cluster_with_releases(&[resigned(from), resigned(to)])
}

#[test]
fn a_target_schema_the_running_release_cannot_run_makes_the_plan_require_a_restore() {
    let plan = plan_of(&schema_cluster(), "1.1.0");
    assert!(plan.restore_required, "{plan:?}");
}

#[test]
fn a_rollback_without_restore_onto_a_schema_the_old_release_cannot_run_is_restore_required() {
    let mut s = schema_cluster();
    run(&mut s, create(UPG, "1.1.0"));
    drive(&mut s, UPG, UpgradeState::Done);
    let r = refused(&s, rollback(UPG, UPG2, false));
    assert_eq!(r.code, ErrorCode::RestoreRequired, "{r:?}");
    assert_eq!(upgrade(&s, UPG).rolled_back_by, None);
    assert!(!s.upgrades.upgrades.contains_key(UPG2));
    assert_eq!(s.upgrades.active, None);
}

#[test]
fn a_rollback_with_restore_onto_a_schema_the_old_release_cannot_run_starts_every_node_with_restore()
{
    let mut s = schema_cluster();
    run(&mut s, create(UPG, "1.1.0"));
    drive(&mut s, UPG, UpgradeState::Done);
    assert!(upgrade(&s, UPG).backup.is_some(), "the backup was reported");
    let d = run(&mut s, rollback(UPG, UPG2, true));
    let p = planned(&d);
    assert!(p.restore_backup);
    assert_eq!(p.target_release, "1.0.0");
    let rb = upgrade(&s, UPG2);
    assert_eq!(rb.nodes.len(), NODES.len());
    for n in &rb.nodes {
        assert_eq!(
            host_step_names(n).first(),
            Some(&"restore"),
            "{}: {:?}",
            n.node_id,
            n.host_steps
        );
    }
    assert_eq!(upgrade(&s, UPG).rolled_back_by.as_deref(), Some(UPG2));
}

#[test]
fn without_schemas_no_restore_is_required_and_a_rollback_without_restore_is_accepted() {
    let mut s = cluster();
    run(&mut s, create(UPG, "1.1.0"));
    assert!(!upgrade(&s, UPG).plan.restore_required);
    drive(&mut s, UPG, UpgradeState::Done);
    let d = run(&mut s, rollback(UPG, UPG2, false));
    assert!(!planned(&d).restore_backup);
    for n in &upgrade(&s, UPG2).nodes {
        assert!(!host_step_names(n).contains(&"restore"), "{n:?}");
    }
}

// ---------------------------------------------------------------------------
// 2. The previous OS stays bootable
// ---------------------------------------------------------------------------

/// 1.1.0 changes containers only, 1.2.0 the OS, 1.3.0 the OS with A/B slots.
fn os_cluster() -> State {
    let mut ab = manifest("1.3.0", "13.2", None);
    ab["os"]["abSlots"] = json!(true);
    cluster_with_releases(&[
        manifest("1.0.0", "13.1", None),
        manifest("1.1.0", "13.1", None),
        manifest("1.2.0", "13.2", None),
        resigned(ab),
    ])
}

#[test]
fn the_previous_os_stays_bootable_in_a_containers_only_upgrade() {
    let plan = plan_of(&os_cluster(), "1.1.0");
    assert_eq!(plan.kind, NodeKind::Containers);
    assert!(plan.previous_os_bootable, "{plan:?}");
}

#[test]
fn an_os_change_leaves_the_previous_os_bootable_only_with_ab_slots() {
    let s = os_cluster();
    let plain = plan_of(&s, "1.2.0");
    assert_eq!(plain.kind, NodeKind::Os);
    assert!(!plain.previous_os_bootable, "{plain:?}");
    let ab = plan_of(&s, "1.3.0");
    assert_eq!(ab.kind, NodeKind::Os);
    assert!(ab.previous_os_bootable, "{ab:?}");
}

// ---------------------------------------------------------------------------
// 3. A node that switched itself back
// ---------------------------------------------------------------------------

/// Asserts that `d` recorded `node_id`'s `rolled_back` report and failed
/// the upgrade naming the node.
fn assert_switched_back(s: &State, d: &Decision, node_id: &str, phase: Phase) {
    let [DomainEvent::UpgradeNodeReported(r), DomainEvent::UpgradeFailed(f)] = d.events.as_slice()
    else {
        panic!("{:?}", d.events)
    };
    assert_eq!((r.phase, r.state), (phase, NodeStatus::RolledBack));
    assert_eq!(f.upgrade_id, UPG);
    assert!(f.reason.contains(node_id), "{}", f.reason);
    assert!(f.reason.contains("switched itself back"), "{}", f.reason);
    let u = upgrade(s, UPG);
    assert_eq!(u.state, UpgradeState::Failed);
    assert_eq!(u.failure_reason.as_deref(), Some(f.reason.as_str()));
    assert_eq!(node(s, UPG, node_id).state, NodeStatus::RolledBack);
    assert_eq!(s.upgrades.active, None);
    assert_eq!(s.upgrades.running.as_ref().unwrap().version, "1.0.0");
}

#[test]
fn a_node_that_reports_rolled_back_in_its_roll_fails_the_upgrade_naming_it() {
    let mut s = upgrade_in(UpgradeState::Rolling);
    let n = turn(&s, UPG);
    let d = run(&mut s, report(UPG, &n, "roll", "rolled_back"));
    assert_switched_back(&s, &d, &n, Phase::Roll);
}

#[test]
fn a_node_that_reports_rolled_back_while_verifying_or_fetching_fails_the_upgrade_naming_it() {
    for (state, phase) in [
        (UpgradeState::Verifying, Phase::Verify),
        (UpgradeState::Fetching, Phase::Fetch),
    ] {
        let mut s = upgrade_in(state);
        let d = run(&mut s, report(UPG, NODES[1], phase.as_str(), "rolled_back"));
        assert_switched_back(&s, &d, NODES[1], phase);
    }
}

// ---------------------------------------------------------------------------
// 4. Host-helper reports
// ---------------------------------------------------------------------------

#[test]
fn a_host_helper_report_with_its_unit_lists_and_intent_is_recorded_on_the_node() {
    let mut s = upgrade_in(UpgradeState::Rolling);
    let n = turn(&s, UPG);
    let steps = vec![
        HostStep {
            name: "restore".into(),
            state: "done".into(),
            reboot_mode: "none".into(),
            detail: "restored the backup".into(),
            stopped_units: strings(&["patroni.service"]),
            ..Default::default()
        },
        HostStep {
            name: "pull".into(),
            state: "done".into(),
            reboot_mode: "none".into(),
            detail: "pulled api".into(),
            ..Default::default()
        },
        HostStep {
            name: "switch-sysext".into(),
            state: "done".into(),
            reboot_mode: "soft".into(),
            detail: "switched stratum-host".into(),
            restarted_units: strings(&["stratum-agent.service"]),
            switched_sysexts: strings(&["stratum-host"]),
            ..Default::default()
        },
        HostStep {
            name: "restart".into(),
            state: "running".into(),
            reboot_mode: "none".into(),
            detail: "restarting onto the pins".into(),
            pending_units: strings(&["stratum-worker.service"]),
            restarted_units: strings(&["stratum-api.service"]),
            ..Default::default()
        },
    ];
    let d = run(
        &mut s,
        report_with(
            UPG,
            &n,
            "roll",
            "running",
            Extra {
                host_steps: Some(steps.clone()),
                host_state: Some("rendering".into()),
                ..Default::default()
            },
        ),
    );
    let [DomainEvent::UpgradeNodeReported(e)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(e.host_steps.as_ref(), Some(&steps));
    assert_eq!(e.host_state.as_deref(), Some("rendering"));
    let rec = node(&s, UPG, &n);
    assert_eq!(rec.host_steps, steps);
    assert_eq!(rec.host_steps[0].stopped_units, ["patroni.service"]);
    assert_eq!(rec.host_steps[2].switched_sysexts, ["stratum-host"]);
    assert_eq!(rec.host_steps[2].restarted_units, ["stratum-agent.service"]);
    assert_eq!(rec.host_steps[3].pending_units, ["stratum-worker.service"]);
    assert_eq!(rec.host_steps[3].restarted_units, ["stratum-api.service"]);
    // The helper's intent, not a copy of the report's state.
    assert_eq!(rec.host_state, "rendering");
    assert_eq!(rec.state, NodeStatus::Running);
}

// ---------------------------------------------------------------------------
// 5. Verify waits for the instances of a rebooted node
// ---------------------------------------------------------------------------

#[test]
fn verify_done_of_a_rebooted_node_counts_only_once_its_instances_run_again() {
    let mut s = upgrade_in(UpgradeState::Rolling);
    let first = turn(&s, UPG);
    assert_eq!(first, NODES[0]);
    run(
        &mut s,
        report_with(
            UPG,
            &first,
            "roll",
            "done",
            Extra {
                rebooted_at: Some(t0() + Duration::minutes(5)),
                instances: Some(strings(&["vm-1", "vm-2"])),
                ..Default::default()
            },
        ),
    );
    advance(&mut s);
    drive(&mut s, UPG, UpgradeState::Verifying);
    for n in &NODES[1..] {
        run(&mut s, report(UPG, n, "verify", "done"));
    }
    run(
        &mut s,
        report_with(
            UPG,
            &first,
            "verify",
            "done",
            Extra {
                running_instances: Some(strings(&["vm-1"])),
                ..Default::default()
            },
        ),
    );
    let events = advance(&mut s);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, DomainEvent::UpgradeCompleted(_))),
        "{events:?}"
    );
    assert_eq!(state_of(&s, UPG), UpgradeState::Verifying);
    assert!(
        upgrade(&s, UPG).waiting_for().contains(&first),
        "{}",
        upgrade(&s, UPG).waiting_for()
    );

    run(
        &mut s,
        report_with(
            UPG,
            &first,
            "verify",
            "done",
            Extra {
                running_instances: Some(strings(&["vm-1", "vm-2"])),
                ..Default::default()
            },
        ),
    );
    assert_eq!(
        advance(&mut s),
        [DomainEvent::UpgradeCompleted(UpgradeCompleted {
            upgrade_id: UPG.into(),
            release: "1.1.0".into(),
        })]
    );
    assert_eq!(state_of(&s, UPG), UpgradeState::Done);
}

// ---------------------------------------------------------------------------
// 6. Settling after a restart
// ---------------------------------------------------------------------------

fn settling_upgrade_rolling() -> State {
    let mut s = cluster();
    run(
        &mut s,
        create_with(
            UPG,
            "1.1.0",
            "now",
            UpgradeConfig {
                settle_seconds: 60,
                ..Default::default()
            },
        ),
    );
    assert_eq!(upgrade(&s, UPG).plan.settle_seconds, 60);
    drive(&mut s, UPG, UpgradeState::Rolling);
    s
}

#[test]
fn after_a_restart_the_next_nodes_turn_waits_for_the_settle_time() {
    let mut s = settling_upgrade_rolling();
    let first = turn(&s, UPG);
    assert_eq!(first, NODES[0]);
    // The node rebooted a minute before it reported (the report comes in
    // at t0): a reboot time is never later than when it was heard of.
    let t = t0() - Duration::minutes(1);
    run(
        &mut s,
        report_with(UPG, &first, "roll", "done", rebooted(t)),
    );
    assert_eq!(upgrade(&s, UPG).last_restart_at, Some(t));
    assert_eq!(s.upgrade_wake_at(t), Some(t + Duration::seconds(60)));
    assert_eq!(
        s.upgrade_wake_at(t + Duration::seconds(60)),
        None,
        "a moment already past is no wake time"
    );

    assert!(advance_at(&mut s, t + Duration::seconds(30)).is_empty());
    assert_eq!(turn(&s, UPG), first, "still the first node's turn");

    assert_eq!(
        advance_at(&mut s, t + Duration::seconds(61)),
        [turn_started(UPG, NODES[1])]
    );
    assert_eq!(turn(&s, UPG), NODES[1]);
}

#[test]
fn a_roll_that_restarts_containers_settles_from_when_it_was_reported() {
    let mut s = settling_upgrade_rolling();
    let first = turn(&s, UPG);
    assert!(!upgrade(&s, UPG).plan.nodes[0].restarts.is_empty());
    run(&mut s, report(UPG, &first, "roll", "done"));
    let heard = upgrade(&s, UPG).updated_at;
    assert_eq!(upgrade(&s, UPG).last_restart_at, Some(heard));
    assert!(advance_at(&mut s, heard + Duration::seconds(30)).is_empty());
    assert_eq!(
        advance_at(&mut s, heard + Duration::seconds(61)),
        [turn_started(UPG, NODES[1])]
    );
}

#[test]
fn a_reported_reboot_time_in_the_future_counts_from_when_it_was_heard() {
    let mut s = settling_upgrade_rolling();
    let first = turn(&s, UPG);
    run(
        &mut s,
        report_with(
            UPG,
            &first,
            "roll",
            "done",
            rebooted(t0() + Duration::hours(5)),
        ),
    );
    let heard = upgrade(&s, UPG).updated_at;
    assert_eq!(upgrade(&s, UPG).last_restart_at, Some(heard));
}

// ---------------------------------------------------------------------------
// 7. Reboot warnings and the 7-day alarm
// ---------------------------------------------------------------------------

/// A stage-only upgrade to 1.1.0, an OS change fixing a CVE, staged.
fn staged_security_upgrade() -> State {
    let mut security = manifest("1.1.0", "13.2", None);
    security["cves"] = json!(["CVE-2026-0001"]);
    let mut s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(security)]);
    run(
        &mut s,
        create_with(UPG, "1.1.0", "stage-only", UpgradeConfig::default()),
    );
    assert_eq!(
        upgrade(&s, UPG).plan.reboot_reason.as_deref(),
        Some("security")
    );
    drive(&mut s, UPG, UpgradeState::Staged);
    s
}

fn staged_at(s: &State) -> DateTime<Utc> {
    upgrade(s, UPG).staged_at.expect("the upgrade was staged")
}

/// The `(name, node, upgrade)` of each alarm raised in `events`.
fn raised(events: &[DomainEvent]) -> Vec<(String, Option<String>, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            DomainEvent::AlarmRaised(a) => {
                Some((a.name.clone(), a.node_id.clone(), a.upgrade_id.clone()))
            }
            _ => None,
        })
        .collect()
}

fn reboot_alarms_for(nodes: &[&str]) -> Vec<(String, Option<String>, Option<String>)> {
    nodes
        .iter()
        .map(|n| {
            (
                "node-reboot-pending".to_owned(),
                Some((*n).to_owned()),
                Some(UPG.to_owned()),
            )
        })
        .collect()
}

/// The staged security upgrade with its alarms raised 7 days after staging.
fn staged_with_alarms() -> (State, DateTime<Utc>) {
    let mut s = staged_security_upgrade();
    let at = staged_at(&s) + Duration::days(7);
    let events = advance_at(&mut s, at);
    assert_eq!(raised(&events), reboot_alarms_for(&NODES));
    (s, at)
}

#[test]
fn a_staged_security_upgrade_warns_that_each_node_waits_for_its_reboot() {
    let s = staged_security_upgrade();
    let staged = staged_at(&s);
    let warnings = upgrade(&s, UPG).warnings();
    let seen: Vec<(&str, &str, DateTime<Utc>)> = warnings
        .iter()
        .map(|w| (w.code.as_str(), w.node_id.as_str(), w.since))
        .collect();
    assert_eq!(
        seen,
        NODES
            .iter()
            .map(|n| ("NodeRebootPending", *n, staged))
            .collect::<Vec<_>>()
    );
    assert!(warnings.iter().all(|w| !w.message.is_empty()));
    assert_eq!(s.upgrade_wake_at(staged), Some(staged + Duration::days(7)));
}

#[test]
fn a_security_upgrade_that_was_never_staged_has_no_reboot_warnings() {
    let mut security = manifest("1.1.0", "13.2", None);
    security["cves"] = json!(["CVE-2026-0001"]);
    let mut s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(security)]);
    run(&mut s, create(UPG, "1.1.0"));
    drive(&mut s, UPG, UpgradeState::Rolling);
    assert!(upgrade(&s, UPG).warnings().is_empty());
}

#[test]
fn the_reboot_pending_alarm_is_raised_seven_days_after_staging_and_only_once() {
    let mut s = staged_security_upgrade();
    let staged = staged_at(&s);
    assert!(advance_at(&mut s, staged + Duration::days(6)).is_empty());
    assert!(s.upgrades.alarms.is_empty());

    let events = advance_at(&mut s, staged + Duration::days(7));
    assert_eq!(raised(&events), reboot_alarms_for(&NODES));
    assert_eq!(events.len(), NODES.len(), "{events:?}");
    let active: Vec<&Alarm> = s
        .upgrades
        .alarms
        .values()
        .filter(|a| a.cleared_at.is_none())
        .collect();
    assert_eq!(active.len(), NODES.len(), "{active:?}");
    assert!(active.iter().all(|a| a.name == NODE_REBOOT_PENDING_ALARM));

    assert!(advance_at(&mut s, staged + Duration::days(8)).is_empty());
    assert_eq!(s.upgrades.alarms.len(), NODES.len());
    assert_eq!(state_of(&s, UPG), UpgradeState::Staged);
}

#[test]
fn a_nodes_reboot_clears_its_alarm_in_the_same_decision() {
    let (mut s, at) = staged_with_alarms();
    let later = at + Duration::hours(1);
    run(&mut s, apply_staged(UPG));
    run(&mut s, backup_report(UPG));
    advance_at(&mut s, later);
    let first = turn(&s, UPG);
    assert_eq!(first, NODES[0]);
    let d = run(
        &mut s,
        report_with(UPG, &first, "roll", "done", rebooted(later)),
    );
    assert!(
        matches!(d.events.first(), Some(DomainEvent::UpgradeNodeReported(_))),
        "{:?}",
        d.events
    );
    assert_eq!(d.events[1..], [alarm_cleared(UPG, &first)]);
    for a in s.upgrades.alarms.values() {
        assert_eq!(
            a.cleared_at.is_some(),
            a.node_id.as_deref() == Some(first.as_str()),
            "{a:?}"
        );
    }
    let waiting: Vec<String> = upgrade(&s, UPG)
        .warnings()
        .into_iter()
        .map(|w| w.node_id)
        .collect();
    assert_eq!(waiting, strings(&NODES[1..]));
}

#[test]
fn canceling_a_staged_upgrade_clears_its_reboot_alarms() {
    let (mut s, _) = staged_with_alarms();
    let d = run(&mut s, cancel(UPG));
    assert_eq!(
        d.events[0],
        DomainEvent::UpgradeCanceled(UpgradeRef {
            upgrade_id: UPG.into()
        })
    );
    assert_eq!(cleared_nodes(&d.events), node_set(&NODES));
    assert_eq!(d.events.len(), 1 + NODES.len(), "{:?}", d.events);
    assert!(s.upgrades.alarms.values().all(|a| a.cleared_at.is_some()));
    assert!(upgrade(&s, UPG).warnings().is_empty());
}

#[test]
fn an_upgrade_that_ends_clears_the_alarms_its_nodes_still_hold() {
    let (mut s, at) = staged_with_alarms();
    let later = at + Duration::hours(1);
    run(&mut s, apply_staged(UPG));
    run(&mut s, backup_report(UPG));
    advance_at(&mut s, later);
    run(
        &mut s,
        report_with(UPG, NODES[0], "roll", "done", rebooted(later)),
    );
    assert_eq!(advance_at(&mut s, later), [turn_started(UPG, NODES[1])]);
    let d = run(&mut s, report(UPG, NODES[1], "roll", "failed"));
    assert!(
        d.events
            .iter()
            .any(|e| matches!(e, DomainEvent::UpgradeFailed(_))),
        "{:?}",
        d.events
    );
    assert_eq!(cleared_nodes(&d.events), node_set(&NODES[1..]));
    assert!(s.upgrades.alarms.values().all(|a| a.cleared_at.is_some()));
}

// ---------------------------------------------------------------------------
// 8. Prechecks judge the nodes' facts
// ---------------------------------------------------------------------------

#[test]
fn a_facts_report_is_recorded_and_the_newest_wins() {
    let mut s = cluster();
    let first = NodeFacts {
        bundle_free_bytes: Some(1_500_000_000),
        ready: Some(true),
        ..Default::default()
    };
    let d = run(&mut s, report_facts(NODES[1], first.clone()));
    assert_eq!(d.subject, Subject::Facts(NODES[1].into()));
    assert_eq!(
        d.events,
        [DomainEvent::NodeFactsReported(NodeFactsReported {
            node_id: NODES[1].into(),
            facts: first.clone(),
        })]
    );
    assert!(run(&mut s, report_facts(NODES[1], first)).events.is_empty());
    let newer = NodeFacts {
        bundle_free_bytes: Some(3_000_000_000),
        ..Default::default()
    };
    run(&mut s, report_facts(NODES[1], newer.clone()));
    let rec = &s.upgrades.facts[NODES[1]];
    assert_eq!(rec.facts, newer);
    assert_eq!(rec.version, 2);
}

/// 1.1.0's bundle takes 2 GB, and it migrates from schema 6 on.
fn facts_cluster() -> State {
    let mut target = manifest("1.1.0", "13.1", None);
    target["bundleBytes"] = json!(2_000_000_000u64);
    target["schema"] = json!({ "version": 7, "minUpgradeFrom": 6 });
    cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(target)])
}

/// The prechecks of the upgrade to 1.1.0 after each `(node, facts)`
/// report.
fn prechecks_with_facts(reports: &[(&str, NodeFacts)]) -> (State, Vec<Precheck>) {
    let mut s = facts_cluster();
    for (n, f) in reports {
        run(&mut s, report_facts(n, f.clone()));
    }
    prechecks_in(s, "1.1.0")
}

/// Asserts that precheck `name` failed naming `node_id`, and that it
/// failed the upgrade.
fn assert_failed_on<'a>(
    s: &State,
    checks: &'a [Precheck],
    name: &str,
    node_id: &str,
) -> &'a Precheck {
    let c = precheck(checks, name);
    assert!(!c.passed, "{c:?}");
    assert!(c.message.contains(node_id), "{c:?}");
    let u = upgrade(s, UPG);
    assert_eq!(u.state, UpgradeState::Failed);
    let reason = u.failure_reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("Prechecks failed: "), "{reason}");
    assert!(reason.contains(&format!("{name}: ")), "{reason}");
    c
}

#[test]
fn prechecks_without_facts_pass_and_name_the_fact_no_node_reported() {
    let (s, checks) = prechecks_with_facts(&[]);
    for (name, fact) in [
        ("space", "space"),
        ("backup-space", "space"),
        ("schema", "schema"),
        ("cluster-shutdown", "shut"),
    ] {
        let c = precheck(&checks, name);
        assert!(c.passed, "{c:?}");
        let m = c.message.to_lowercase();
        assert!(m.contains(fact), "{c:?}");
        assert!(m.contains("no"), "{c:?}");
    }
    assert!(precheck(&checks, "node").passed);
    assert_eq!(state_of(&s, UPG), UpgradeState::Fetching);
}

#[test]
fn space_precheck_fails_a_node_without_room_for_the_bundle_and_says_how_much_is_missing() {
    let roomy = NodeFacts {
        bundle_free_bytes: Some(3_000_000_000),
        ..Default::default()
    };
    let (s, checks) = prechecks_with_facts(&[
        (NODES[0], roomy.clone()),
        (
            NODES[1],
            NodeFacts {
                bundle_free_bytes: Some(1_500_000_000),
                ..Default::default()
            },
        ),
        (NODES[2], roomy),
    ]);
    let c = assert_failed_on(&s, &checks, "space", NODES[1]);
    assert!(names_amount(&c.message, 500_000_000), "{c:?}");
}

#[test]
fn space_precheck_passes_when_every_node_has_room_for_the_bundle() {
    let roomy = NodeFacts {
        bundle_free_bytes: Some(3_000_000_000),
        ..Default::default()
    };
    let reports: Vec<(&str, NodeFacts)> = NODES.iter().map(|n| (*n, roomy.clone())).collect();
    let (s, checks) = prechecks_with_facts(&reports);
    assert!(precheck(&checks, "space").passed, "{checks:?}");
    assert_eq!(state_of(&s, UPG), UpgradeState::Fetching);
}

#[test]
fn backup_space_precheck_fails_a_node_with_less_free_than_its_backup_takes() {
    let (s, checks) = prechecks_with_facts(&[
        (
            NODES[0],
            NodeFacts {
                backup_free_bytes: Some(9_000_000_000),
                backup_bytes: Some(3_000_000_000),
                ..Default::default()
            },
        ),
        (
            NODES[2],
            NodeFacts {
                backup_free_bytes: Some(1_000_000_000),
                backup_bytes: Some(3_000_000_000),
                ..Default::default()
            },
        ),
    ]);
    let c = assert_failed_on(&s, &checks, "backup-space", NODES[2]);
    assert!(names_amount(&c.message, 2_000_000_000), "{c:?}");
}

#[test]
fn schema_precheck_fails_a_node_on_a_schema_older_than_the_target_migrates_from() {
    let (s, checks) = prechecks_with_facts(&[
        (
            NODES[0],
            NodeFacts {
                schema_version: Some(5),
                ..Default::default()
            },
        ),
        (
            NODES[1],
            NodeFacts {
                schema_version: Some(6),
                ..Default::default()
            },
        ),
    ]);
    let c = assert_failed_on(&s, &checks, "schema", NODES[0]);
    assert!(c.message.contains('5') && c.message.contains('6'), "{c:?}");
}

#[test]
fn cluster_shutdown_precheck_fails_a_node_that_is_shut_down() {
    let (s, checks) = prechecks_with_facts(&[(
        NODES[1],
        NodeFacts {
            shut_down: Some(true),
            ..Default::default()
        },
    )]);
    assert_failed_on(&s, &checks, "cluster-shutdown", NODES[1]);
}

#[test]
fn node_precheck_fails_a_node_that_reports_it_is_not_ready() {
    let (s, checks) = prechecks_with_facts(&[(
        NODES[2],
        NodeFacts {
            ready: Some(false),
            ..Default::default()
        },
    )]);
    assert_failed_on(&s, &checks, "node", NODES[2]);
}

// ---------------------------------------------------------------------------
// 9. componentsFrom: nodes
// ---------------------------------------------------------------------------

#[test]
fn a_running_release_without_components_is_compared_by_what_the_nodes_run() {
    let mut old = manifest("1.0.0", "13.1", None);
    old["components"] = json!([]);
    let target = manifest("1.1.0", "13.1", None);
    let target_digest = target["components"][0]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut s = cluster_with_releases(&[resigned(old), target]);

    let before = plan_of(&s, "1.1.0");
    assert_eq!(before.components_from, "none");
    assert!(before.component_changes.is_empty());

    for n in NODES {
        run(
            &mut s,
            report_facts(
                n,
                NodeFacts {
                    images: vec![image("api", "0.9.0", 'a'), image("worker", "0.9.0", 'c')],
                    ..Default::default()
                },
            ),
        );
    }
    let plan = plan_of(&s, "1.1.0");
    assert_eq!(plan.components_from, "nodes");
    let changes: Vec<(&str, &str, &str, &str)> = plan
        .component_changes
        .iter()
        .map(|c| {
            (
                c.kind.as_str(),
                c.name.as_str(),
                c.from_id.as_str(),
                c.to_id.as_str(),
            )
        })
        .collect();
    let a = format!("sha256:{}", "a".repeat(64));
    let c = format!("sha256:{}", "c".repeat(64));
    assert_eq!(
        changes,
        [
            ("image", "api", a.as_str(), target_digest.as_str()),
            ("image", "worker", c.as_str(), ""),
        ]
    );
    assert_eq!(plan.component_changes[0].from, "0.9.0@aaaaaaaaaaaa");
}

// ---------------------------------------------------------------------------
// 10. Fetched bundles stay
// ---------------------------------------------------------------------------

#[test]
fn a_later_upgrade_to_a_release_a_node_already_fetched_starts_its_fetch_done() {
    let mut s = cluster_with_releases(&[
        manifest("1.0.0", "13.1", None),
        manifest("1.1.0", "13.1", None),
        manifest("1.2.0", "13.1", None),
    ]);
    run(&mut s, create(UPG, "1.1.0"));
    drive(&mut s, UPG, UpgradeState::Fetching);
    run(&mut s, report(UPG, NODES[1], "fetch", "done"));
    run(&mut s, cancel(UPG));

    // Another release was not fetched.
    assert!(plan_of(&s, "1.2.0").nodes.iter().all(|n| !n.fetched));

    let d = run(&mut s, create(UPG2, "1.1.0"));
    let plan = &planned(&d).plan;
    let fetched: Vec<(&str, bool)> = plan
        .nodes
        .iter()
        .map(|n| (n.node_id.as_str(), n.fetched))
        .collect();
    assert_eq!(
        fetched,
        [(NODES[0], false), (NODES[1], true), (NODES[2], false)]
    );
    assert!(plan.summary.contains("already fetched"), "{}", plan.summary);
    let n = node(&s, UPG2, NODES[1]);
    assert_eq!((n.phase, n.state), (Phase::Fetch, NodeStatus::Done));
    let other = node(&s, UPG2, NODES[0]);
    assert_eq!(
        (other.phase, other.state),
        (Phase::Fetch, NodeStatus::Pending)
    );

    drive(&mut s, UPG2, UpgradeState::Fetching);
    let waiting = upgrade(&s, UPG2).waiting_for();
    assert!(!waiting.contains(NODES[1]), "{waiting}");
    assert!(
        waiting.contains(NODES[0]) && waiting.contains(NODES[2]),
        "{waiting}"
    );
}

// ---------------------------------------------------------------------------
// 11. The backup target
// ---------------------------------------------------------------------------

fn create_backup(location: Option<&str>, config: UpgradeConfig) -> UpgradeCommand {
    UpgradeCommand::Create {
        upgrade_id: UPG.into(),
        target_release: Some("1.1.0".into()),
        mode: None,
        backup_location: location.map(Into::into),
        backup_encrypted: None,
        config,
    }
}

#[test]
fn a_backup_to_the_target_with_none_configured_is_invalid_naming_backup_location() {
    let r = refused(
        &cluster(),
        create_backup(Some("target"), UpgradeConfig::default()),
    );
    assert_invalid(&r, &["backup.location"]);
}

#[test]
fn without_a_configured_target_the_backup_stays_on_the_node() {
    let d = when(
        &cluster(),
        cmd(create_backup(None, UpgradeConfig::default())),
    )
    .unwrap();
    let p = planned(&d);
    assert_eq!(p.backup_location, BackupLocation::Node);
    assert_eq!(p.backup_target, None);
}

#[test]
fn with_a_configured_target_the_backup_goes_there_encrypted_to_its_recipient() {
    let url = "s3://backups.example/stratum";
    let mut s = cluster();
    let d = run(
        &mut s,
        create_backup(
            None,
            UpgradeConfig {
                backup_target: Some(BackupTarget {
                    url: url.into(),
                    recipient: Some("age1qyqszqgpqyqszqgpqyqszqgpqyqszqgp".into()),
                }),
                ..Default::default()
            },
        ),
    );
    let p = planned(&d);
    assert_eq!(p.backup_location, BackupLocation::Target);
    assert_eq!(p.backup_target.as_deref(), Some(url));
    assert!(p.backup_encrypted);
    let u = upgrade(&s, UPG);
    assert_eq!(u.backup_location, BackupLocation::Target);
    assert_eq!(u.backup_target.as_deref(), Some(url));
    assert!(u.backup_encrypted);
}

// ---------------------------------------------------------------------------
// 12. The plan's shape
// ---------------------------------------------------------------------------

#[test]
fn the_plan_summary_names_both_releases_and_signed_by_the_target_manifests_key() {
    let plan = plan_of(&cluster(), "1.1.0");
    assert!(!plan.summary.is_empty());
    assert!(
        plan.summary.contains("1.0.0") && plan.summary.contains("1.1.0"),
        "{}",
        plan.summary
    );
    assert_eq!(plan.signed_by, RELEASE_KEY_ID);
}

#[test]
fn a_release_loaded_from_install_media_plans_with_source_kind_media() {
    let target = manifest("1.1.0", "13.1", None);
    let s = cluster_with(&[
        registered(&manifest("1.0.0", "13.1", None)),
        DomainEvent::ReleaseRegistered(ReleaseRegistered {
            version: "1.1.0".into(),
            manifest: canonical(&target),
            source: ReleaseSource::Media,
        }),
    ]);
    assert_eq!(plan_of(&s, "1.1.0").source_kind, ReleaseSource::Media);
    assert_eq!(
        plan_of(&cluster(), "1.1.0").source_kind,
        ReleaseSource::Manifest
    );
}

#[test]
fn plan_steps_are_objects_with_a_kind_and_one_roll_per_node() {
    let plan = plan_of(&cluster(), "1.1.0");
    let named = |name: &str| {
        plan.steps
            .iter()
            .find(|st| st.name == name)
            .unwrap_or_else(|| panic!("no step {name} in {:?}", plan.steps))
    };
    assert_eq!(named("prechecks").kind, StepKind::Cluster);
    assert_eq!(named("prechecks").node_id, None);
    assert_eq!(named("fetch").kind, StepKind::EveryNode);
    assert_eq!(named("verify").kind, StepKind::EveryNode);
    assert_eq!(
        plan.steps.first().map(|st| st.name.as_str()),
        Some("prechecks")
    );
    assert_eq!(plan.steps.last().map(|st| st.name.as_str()), Some("verify"));
    let rolls: Vec<(Option<&str>, StepKind)> = plan
        .steps
        .iter()
        .filter(|st| st.name == "roll")
        .map(|st| (st.node_id.as_deref(), st.kind))
        .collect();
    assert_eq!(
        rolls,
        NODES
            .iter()
            .map(|n| (Some(*n), StepKind::Node))
            .collect::<Vec<_>>()
    );
}

#[test]
fn an_os_and_kernel_change_lists_os_and_kernel_among_each_nodes_changes() {
    let mut target = manifest("1.1.0", "13.2", None);
    target["os"]["kernel"] = json!("6.13");
    let s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(target)]);
    let plan = plan_of(&s, "1.1.0");
    assert_eq!(plan.kind, NodeKind::Os);
    assert_eq!(plan.nodes.len(), NODES.len());
    for n in &plan.nodes {
        assert!(n.changes.iter().any(|c| c.as_str() == "os"), "{n:?}");
        assert!(n.changes.iter().any(|c| c.as_str() == "kernel"), "{n:?}");
        assert!(
            !n.changes.iter().any(|c| c.as_str() == "kernelArgs"),
            "{n:?}"
        );
        assert!(n.restarts.iter().any(|r| r.as_str() == "api"), "{n:?}");
    }
}

#[test]
fn restarts_list_the_changed_images_and_a_containers_upgrade_changes_nothing_on_the_host() {
    let plan = plan_of(&cluster(), "1.1.0");
    for n in &plan.nodes {
        assert_eq!(n.restarts, ["api"], "{n:?}");
        assert!(n.changes.is_empty(), "{n:?}");
    }
}

// ---------------------------------------------------------------------------
// Review follow-ups
// ---------------------------------------------------------------------------

#[test]
fn components_precheck_fails_a_node_that_runs_other_pins_than_the_running_release() {
    let mut s = cluster();
    // testing::manifest pins `api` at a digest of its version: n-b runs
    // another one.
    run(
        &mut s,
        report_facts(
            NODES[1],
            NodeFacts {
                images: vec![image("api", "1.0.0", 'f')],
                ..Default::default()
            },
        ),
    );
    let (_, checks) = prechecks_in(s, "1.1.0");
    let c = precheck(&checks, "components");
    assert!(!c.passed, "{c:?}");
    assert!(
        c.message.contains(NODES[1]) && c.message.contains("api"),
        "{c:?}"
    );
}

#[test]
fn node_facts_pass_the_write_freeze() {
    let mut s = upgrade_in(UpgradeState::BackingUp);
    let d = run(
        &mut s,
        report_facts(
            NODES[0],
            NodeFacts {
                ready: Some(true),
                ..Default::default()
            },
        ),
    );
    assert!(matches!(
        d.events.as_slice(),
        [DomainEvent::NodeFactsReported(_)]
    ));
}

#[test]
fn a_reported_reboot_is_decided_at_the_precision_the_log_keeps() {
    let mut s = upgrade_in(UpgradeState::Rolling);
    let first = turn(&s, UPG);
    let precise = t0() - Duration::nanoseconds(1_234_567);
    let d = run(
        &mut s,
        report_with(UPG, &first, "roll", "done", rebooted(precise)),
    );
    for e in &d.events {
        let enc = crate::stored::encode(e);
        let back = crate::stored::decode(enc.event_type, enc.schema_version, &enc.payload).unwrap();
        assert_eq!(&back, e, "what replay reads is what was decided");
    }
    // The same report again appends nothing.
    let again = run(
        &mut s,
        report_with(UPG, &first, "roll", "done", rebooted(precise)),
    );
    assert!(again.events.is_empty(), "{:?}", again.events);
}
