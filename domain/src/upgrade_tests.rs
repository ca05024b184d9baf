//! Given/when/then tests of the upgrade rules (SPEC §5).

use serde_json::{json, Value};

use crate::error::{ErrorCode, Refusal};
use crate::event::{DomainEvent, StringMap};
use crate::membership::{MemberCommand, Role, RACK_LABEL};
use crate::release::{canonical, sign};
use crate::state::{Command, Decision, State, Subject};
use crate::testing::{
    self, admitted, apply, assert_invalid, given, manifest, message_of, registered, release_key,
    t0, when, when_by, RELEASE_KEY_ID,
};
use crate::upgrade::*;

pub(crate) const ADMIN: &str = "user/admin";
const ALICE: &str = "user/alice";
pub(crate) const DRIVER: &str = crate::iam::SERVICE_PRINCIPAL;
pub(crate) const UPG: &str = "upg-0000000001";
pub(crate) const UPG2: &str = "upg-0000000002";
const UNKNOWN: &str = "upg-zzzzzzzzzz";

/// The members, in ordinal order: not their names' order, so a roll that
/// went by name (or by map order) would show.
pub(crate) const NODES: [&str; 3] = ["n-charlie", "n-alpha", "n-bravo"];

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

fn cmd(c: UpgradeCommand) -> Command {
    Command::Upgrade(c)
}

fn create_with(id: &str, target: &str, mode: &str) -> UpgradeCommand {
    UpgradeCommand::Create {
        upgrade_id: id.into(),
        target_release: Some(target.into()),
        mode: Some(mode.into()),
        backup_location: Some("node".into()),
        backup_encrypted: Some(false),
        config: UpgradeConfig::default(),
    }
}

fn create(id: &str, target: &str) -> UpgradeCommand {
    create_with(id, target, "now")
}

fn report_full(
    id: &str,
    node: &str,
    phase: &str,
    state: &str,
    message: Option<&str>,
) -> UpgradeCommand {
    UpgradeCommand::ReportNode {
        upgrade_id: id.into(),
        node_id: node.into(),
        phase: Some(phase.into()),
        state: Some(state.into()),
        message: message.map(Into::into),
        host_steps: None,
        rebooted_at: None,
        instances: None,
        host_state: None,
        running_instances: None,
    }
}

fn report(node: &str, phase: &str, state: &str) -> UpgradeCommand {
    report_full(UPG, node, phase, state, None)
}

fn backup_report(id: &str) -> UpgradeCommand {
    UpgradeCommand::ReportBackup {
        upgrade_id: id.into(),
        location: Some("node".into()),
        bundle: Some(format!("/var/lib/stratum/backup/{id}.tar")),
        encrypted: Some(false),
    }
}

fn cancel(id: &str) -> UpgradeCommand {
    UpgradeCommand::Cancel {
        upgrade_id: id.into(),
    }
}

fn apply_staged(id: &str) -> UpgradeCommand {
    UpgradeCommand::Apply {
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

/// A plan's steps as text: `roll n-1` for a node's step.
fn step_names(p: &Plan) -> Vec<String> {
    p.steps
        .iter()
        .map(|s| match &s.node_id {
            Some(n) => format!("{} {n}", s.name),
            None => s.name.clone(),
        })
        .collect()
}

fn acknowledge(id: &str) -> UpgradeCommand {
    UpgradeCommand::Acknowledge {
        upgrade_id: id.into(),
    }
}

fn admit_member(node: &str, ip: &str) -> Command {
    Command::Member(MemberCommand::Admit {
        node_id: Some(node.into()),
        role: Some("control".into()),
        mgmt_ip: Some(ip.into()),
        bindings: StringMap::new(),
        labels: [(RACK_LABEL.to_owned(), "r1".to_owned())].into(),
    })
}

// ---------------------------------------------------------------------------
// Harness helpers
// ---------------------------------------------------------------------------

/// Decides `c` by `principal` and appends what it decided, as the command
/// path does.
fn run_by(s: &mut State, principal: &str, c: UpgradeCommand) -> Decision {
    let d = when_by(s, principal, cmd(c.clone()))
        .unwrap_or_else(|r| panic!("{c:?} was refused: {r:?}"));
    apply(s, principal, &d.events);
    d
}

fn run(s: &mut State, c: UpgradeCommand) -> Decision {
    run_by(s, ADMIN, c)
}

/// The upgrade driver's tick: the step that is due, appended.
fn advance(s: &mut State) -> Vec<DomainEvent> {
    let d = run_by(s, DRIVER, UpgradeCommand::Advance);
    d.events
}

fn refused(s: &State, c: UpgradeCommand) -> Refusal {
    testing::refused(s, cmd(c))
}

fn assert_state_conflict(r: &Refusal, state: &str) {
    assert_eq!(r.code, ErrorCode::UpgradeStateConflict, "{r:?}");
    assert_eq!(r.details, Some(json!({ "state": state })), "{r:?}");
}

fn assert_unchanged(d: &Decision, id: &str) {
    assert!(
        d.events.is_empty(),
        "expected no events, got {:?}",
        d.events
    );
    assert_eq!(d.subject, Subject::Upgrade(id.into()));
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
fn turn(s: &State, id: &str) -> &'static str {
    let u = upgrade(s, id);
    let i = u.turn.unwrap_or_else(|| panic!("no turn in {u:?}"));
    NODES
        .into_iter()
        .find(|n| *n == u.nodes[i].node_id)
        .expect("a known node")
}

fn precheck<'a>(checks: &'a [Precheck], name: &str) -> &'a Precheck {
    checks
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no precheck {name} in {checks:?}"))
}

fn moved(id: &str, from: UpgradeState, to: UpgradeState) -> DomainEvent {
    DomainEvent::UpgradeStateChanged(UpgradeStateChanged {
        upgrade_id: id.into(),
        from,
        to,
    })
}

fn turn_started(id: &str, node_id: &str) -> DomainEvent {
    DomainEvent::UpgradeNodeTurnStarted(UpgradeNodeTurnStarted {
        upgrade_id: id.into(),
        node_id: node_id.into(),
    })
}

/// The same manifest, signed again after a change.
pub(crate) fn resigned(mut m: Value) -> Value {
    sign(&mut m, RELEASE_KEY_ID, &release_key());
    m
}

// ---------------------------------------------------------------------------
// Givens
// ---------------------------------------------------------------------------

/// Every member reports the cluster's generation: none is lagging.
pub(crate) fn make_current(s: &mut State) {
    let generation = s.membership.generation;
    let reports: Vec<DomainEvent> = s
        .membership
        .members
        .keys()
        .map(|n| DomainEvent::AppliedGenerationReported {
            node_id: n.clone(),
            generation,
        })
        .collect();
    apply(s, ADMIN, &reports);
}

/// Three active, current control members (ordinals 1, 2, 3 as [`NODES`]),
/// the releases registered by `registrations`, and 1.0.0 running.
pub(crate) fn cluster_with(registrations: &[DomainEvent]) -> State {
    let mut s = State::default();
    for (i, n) in NODES.iter().enumerate() {
        apply(
            &mut s,
            ADMIN,
            &[
                admitted(n, Role::Control, i as u32 + 1),
                DomainEvent::MemberJoinCompleted {
                    node_id: (*n).into(),
                },
            ],
        );
    }
    make_current(&mut s);
    apply(&mut s, ADMIN, registrations);
    apply(
        &mut s,
        ADMIN,
        &[DomainEvent::RunningReleaseSet(RunningReleaseSet {
            version: "1.0.0".into(),
        })],
    );
    s
}

/// Three active, current control members, these releases registered, and
/// 1.0.0 running.
pub(crate) fn cluster_with_releases(releases: &[Value]) -> State {
    let registrations: Vec<DomainEvent> = releases.iter().map(registered).collect();
    cluster_with(&registrations)
}

/// Releases 1.0.0 (running) and 1.1.0, which changes the `api` image only.
pub(crate) fn cluster() -> State {
    cluster_with_releases(&[
        manifest("1.0.0", "13.1", None),
        manifest("1.1.0", "13.1", None),
    ])
}

/// Takes the one action that moves upgrade `id` on from where it is (the
/// reports it waits for, or apply), then lets the driver advance.
fn step(s: &mut State, id: &str) {
    match state_of(s, id) {
        UpgradeState::Planned | UpgradeState::Prechecking => {}
        UpgradeState::Fetching => {
            for n in NODES {
                run(s, report_full(id, n, "fetch", "done", None));
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
            run(s, report_full(id, n, "roll", "done", None));
        }
        UpgradeState::Verifying => {
            for n in NODES {
                run(s, report_full(id, n, "verify", "done", None));
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

/// The cluster with upgrade [`UPG`] to 1.1.0 in `target`: a stage-only
/// upgrade for staged, one whose node failed its fetch for failed, and one
/// canceled while planned for canceled.
fn upgrade_in(target: UpgradeState) -> State {
    let mut s = cluster();
    match target {
        UpgradeState::Staged => {
            run(&mut s, create_with(UPG, "1.1.0", "stage-only"));
            drive(&mut s, UPG, UpgradeState::Staged);
        }
        UpgradeState::Failed => {
            run(&mut s, create(UPG, "1.1.0"));
            drive(&mut s, UPG, UpgradeState::Fetching);
            run(
                &mut s,
                report_full(UPG, NODES[1], "fetch", "failed", Some("disk full")),
            );
        }
        UpgradeState::Canceled => {
            run(&mut s, create(UPG, "1.1.0"));
            run(&mut s, cancel(UPG));
        }
        other => {
            run(&mut s, create(UPG, "1.1.0"));
            drive(&mut s, UPG, other);
        }
    }
    assert_eq!(state_of(&s, UPG), target, "setup of {target:?}");
    s
}

/// The prechecks an upgrade to `target` finds in `s` (the upgrade is
/// created and advanced through prechecking).
fn prechecks_in(mut s: State, target: &str) -> (State, Vec<Precheck>) {
    run(&mut s, create(UPG, target));
    advance(&mut s);
    advance(&mut s);
    let checks = upgrade(&s, UPG).prechecks.clone();
    (s, checks)
}

// ---------------------------------------------------------------------------
// The whole walk
// ---------------------------------------------------------------------------

#[test]
fn create_plans_every_member_in_ordinal_order() {
    let s = cluster();
    let d = when(&s, cmd(create(UPG, "1.1.0"))).unwrap();
    assert_eq!(d.subject, Subject::Upgrade(UPG.into()));
    let [DomainEvent::UpgradePlanned(p)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(p.upgrade_id, UPG);
    assert_eq!(p.mode, UpgradeMode::Now);
    assert_eq!(p.target_release, "1.1.0");
    assert_eq!(p.from_release, "1.0.0");
    assert_eq!(p.backup_location, BackupLocation::Node);
    assert_eq!(p.rollback_of, None);
    assert!(!p.restore_backup);
    let nodes: Vec<(&str, u32)> = p
        .plan
        .nodes
        .iter()
        .map(|n| (n.node_id.as_str(), n.ordinal))
        .collect();
    assert_eq!(nodes, [("n-charlie", 1), ("n-alpha", 2), ("n-bravo", 3)]);
    assert_eq!(p.plan.kind, NodeKind::Containers);
    assert_eq!(p.plan.components_from, "release");
    assert_eq!(p.plan.component_changes.len(), 1);
    assert_eq!(p.plan.component_changes[0].name, "api");
    assert_eq!(
        step_names(&p.plan),
        [
            "prechecks",
            "fetch",
            "backup",
            "roll n-charlie",
            "roll n-alpha",
            "roll n-bravo",
            "verify"
        ]
    );
}

#[test]
fn a_planned_upgrade_is_active_and_waits_for_the_driver() {
    let mut s = cluster();
    run_by(&mut s, ALICE, create(UPG, "1.1.0"));
    let u = upgrade(&s, UPG);
    assert_eq!(u.state, UpgradeState::Planned);
    assert_eq!(u.created_by, ALICE);
    assert!(!u.prechecked());
    assert_eq!(u.backup, None);
    assert!(u
        .nodes
        .iter()
        .all(|n| n.phase == Phase::Fetch && n.state == NodeStatus::Pending));
    assert!(u.nodes.iter().all(|n| n.previous_release == "1.0.0"));
    assert_eq!(s.upgrades.active.as_deref(), Some(UPG));
    assert!(s.upgrades.write_freeze().is_none());
    assert!(
        u.waiting_for().contains("upgrade driver"),
        "{}",
        u.waiting_for()
    );
}

#[test]
fn a_three_node_upgrade_walks_from_planned_to_done() {
    let mut s = cluster();
    let mut seen = Vec::new();
    let mut saw = |s: &State| {
        let st = state_of(s, UPG);
        if seen.last() != Some(&st) {
            seen.push(st);
        }
    };
    run(&mut s, create(UPG, "1.1.0"));
    saw(&s);

    // planned → prechecking → fetching.
    assert_eq!(
        advance(&mut s),
        [moved(UPG, UpgradeState::Planned, UpgradeState::Prechecking)]
    );
    saw(&s);
    assert_eq!(upgrade(&s, UPG).waiting_for(), "Running the prechecks.");
    let events = advance(&mut s);
    saw(&s);
    let [DomainEvent::UpgradePrechecked(p), last] = events.as_slice() else {
        panic!("{events:?}")
    };
    let names: Vec<&str> = p.prechecks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, PRECHECKS);
    assert!(p.prechecks.iter().all(|c| c.passed), "{:?}", p.prechecks);
    assert_eq!(
        *last,
        moved(UPG, UpgradeState::Prechecking, UpgradeState::Fetching)
    );
    assert!(upgrade(&s, UPG).prechecked());

    // fetching: waits for every node's fetch.
    assert!(advance(&mut s).is_empty());
    assert_eq!(
        upgrade(&s, UPG).waiting_for(),
        "Waiting for n-charlie, n-alpha, n-bravo to report fetch done."
    );
    assert!(s.upgrades.write_freeze().is_none());
    let d = run(&mut s, report("n-charlie", "fetch", "done"));
    assert_eq!(d.events.len(), 1);
    assert!(advance(&mut s).is_empty());
    assert_eq!(
        upgrade(&s, UPG).waiting_for(),
        "Waiting for n-alpha, n-bravo to report fetch done."
    );
    run(&mut s, report("n-alpha", "fetch", "running"));
    run(&mut s, report("n-alpha", "fetch", "done"));
    assert!(advance(&mut s).is_empty());
    assert_eq!(
        upgrade(&s, UPG).waiting_for(),
        "Waiting for n-bravo to report fetch done."
    );
    run(&mut s, report("n-bravo", "fetch", "done"));

    // backing_up: the freeze starts; waits for the backup.
    assert_eq!(
        advance(&mut s),
        [moved(UPG, UpgradeState::Fetching, UpgradeState::BackingUp)]
    );
    saw(&s);
    assert_eq!(s.upgrades.write_freeze().map(|u| u.id.as_str()), Some(UPG));
    assert!(advance(&mut s).is_empty());
    assert_eq!(
        upgrade(&s, UPG).waiting_for(),
        "Waiting for the backup report (location node)."
    );
    run(&mut s, backup_report(UPG));
    assert_eq!(
        upgrade(&s, UPG).backup,
        Some(Backup {
            location: BackupLocation::Node,
            bundle: format!("/var/lib/stratum/backup/{UPG}.tar"),
            encrypted: false,
        })
    );

    // rolling: one node at a time, in ordinal order.
    assert_eq!(
        advance(&mut s),
        [
            moved(UPG, UpgradeState::BackingUp, UpgradeState::Rolling),
            turn_started(UPG, "n-charlie"),
        ]
    );
    saw(&s);
    for (i, n) in NODES.iter().enumerate() {
        assert_eq!(turn(&s, UPG), *n);
        assert!(s.upgrades.write_freeze().is_some());
        assert_eq!(
            upgrade(&s, UPG).waiting_for(),
            format!("Waiting for {n} to report roll done (node {} of 3).", i + 1)
        );
        assert!(advance(&mut s).is_empty());
        run(&mut s, report(n, "roll", "running"));
        assert!(advance(&mut s).is_empty());
        run(&mut s, report(n, "roll", "done"));
        let expected = match NODES.get(i + 1) {
            Some(next) => turn_started(UPG, next),
            None => moved(UPG, UpgradeState::Rolling, UpgradeState::Verifying),
        };
        assert_eq!(advance(&mut s), [expected]);
    }
    saw(&s);

    // verifying: waits for every node's verify; the freeze holds.
    assert_eq!(upgrade(&s, UPG).turn, None);
    assert!(s.upgrades.write_freeze().is_some());
    assert_eq!(
        upgrade(&s, UPG).waiting_for(),
        "Waiting for n-charlie, n-alpha, n-bravo to report verify done."
    );
    for n in NODES {
        assert!(advance(&mut s).is_empty());
        run(&mut s, report(n, "verify", "done"));
    }
    assert_eq!(
        advance(&mut s),
        [DomainEvent::UpgradeCompleted(UpgradeCompleted {
            upgrade_id: UPG.into(),
            release: "1.1.0".into(),
        })]
    );
    saw(&s);

    // done: the target runs, the freeze is lifted.
    assert_eq!(
        seen,
        [
            UpgradeState::Planned,
            UpgradeState::Prechecking,
            UpgradeState::Fetching,
            UpgradeState::BackingUp,
            UpgradeState::Rolling,
            UpgradeState::Verifying,
            UpgradeState::Done,
        ]
    );
    assert!(s.upgrades.write_freeze().is_none());
    assert_eq!(s.upgrades.active, None);
    let running = s.upgrades.running.as_ref().unwrap();
    assert_eq!(running.version, "1.1.0");
    assert_eq!(running.set_by, UPG);
    assert_eq!(
        upgrade(&s, UPG).waiting_for(),
        "Nothing: the cluster runs release 1.1.0."
    );
    assert_eq!(upgrade(&s, UPG).failure_reason, None);
}

#[test]
fn every_move_the_driver_makes_is_an_edge_of_the_state_machine() {
    use UpgradeState::*;
    for (mode, expected) in [
        (
            "now",
            vec![
                Planned,
                Prechecking,
                Fetching,
                BackingUp,
                Rolling,
                Verifying,
                Done,
            ],
        ),
        (
            "stage-only",
            vec![
                Planned,
                Prechecking,
                Fetching,
                Staged,
                BackingUp,
                Rolling,
                Verifying,
                Done,
            ],
        ),
    ] {
        let mut s = cluster();
        run(&mut s, create_with(UPG, "1.1.0", mode));
        let mut seen = vec![Planned];
        while state_of(&s, UPG) != Done {
            let before = state_of(&s, UPG);
            step(&mut s, UPG);
            let after = state_of(&s, UPG);
            if before != after {
                assert!(before.can_move_to(after), "{mode}: {before:?} → {after:?}");
                seen.push(after);
            }
        }
        assert_eq!(seen, expected, "{mode}");
    }
}

#[test]
fn advance_without_an_active_upgrade_is_not_found() {
    let r = refused(&cluster(), UpgradeCommand::Advance);
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
    let s = upgrade_in(UpgradeState::Done);
    assert_eq!(
        refused(&s, UpgradeCommand::Advance).code,
        ErrorCode::NotFound
    );
}

// ---------------------------------------------------------------------------
// Stage-only and apply
// ---------------------------------------------------------------------------

#[test]
fn a_stage_only_upgrade_stops_in_staged_after_fetching() {
    let mut s = cluster();
    let d = run(&mut s, create_with(UPG, "1.1.0", "stage-only"));
    let [DomainEvent::UpgradePlanned(p)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(p.mode, UpgradeMode::StageOnly);
    assert_eq!(
        &step_names(&p.plan)[..4],
        ["prechecks", "fetch", "stage", "apply"]
    );
    drive(&mut s, UPG, UpgradeState::Fetching);
    for n in NODES {
        run(&mut s, report(n, "fetch", "done"));
    }
    assert_eq!(
        advance(&mut s),
        [moved(UPG, UpgradeState::Fetching, UpgradeState::Staged)]
    );
    assert_eq!(state_of(&s, UPG), UpgradeState::Staged);
    assert!(s.upgrades.write_freeze().is_none());
    assert_eq!(s.upgrades.active.as_deref(), Some(UPG));
    assert!(upgrade(&s, UPG).waiting_for().contains("apply"));
}

#[test]
fn advance_does_nothing_in_staged() {
    let mut s = upgrade_in(UpgradeState::Staged);
    let before = s.clone();
    assert!(advance(&mut s).is_empty());
    assert!(advance(&mut s).is_empty());
    assert_eq!(s, before);
}

#[test]
fn apply_moves_a_staged_upgrade_to_backing_up() {
    let mut s = upgrade_in(UpgradeState::Staged);
    let d = run(&mut s, apply_staged(UPG));
    assert_eq!(d.subject, Subject::Upgrade(UPG.into()));
    assert_eq!(
        d.events,
        [moved(UPG, UpgradeState::Staged, UpgradeState::BackingUp)]
    );
    assert_eq!(state_of(&s, UPG), UpgradeState::BackingUp);
    assert!(s.upgrades.write_freeze().is_some());
    drive(&mut s, UPG, UpgradeState::Done);
    assert_eq!(s.upgrades.running.as_ref().unwrap().version, "1.1.0");
}

#[test]
fn apply_on_an_upgrade_that_is_not_staged_is_a_state_conflict() {
    for state in [
        UpgradeState::Planned,
        UpgradeState::Fetching,
        UpgradeState::Done,
        UpgradeState::Canceled,
    ] {
        let s = upgrade_in(state);
        let r = refused(&s, apply_staged(UPG));
        assert_state_conflict(&r, state.as_str());
    }
    let mut s = cluster();
    run(&mut s, create_with(UPG, "1.1.0", "stage-only"));
    drive(&mut s, UPG, UpgradeState::Fetching);
    assert_state_conflict(&refused(&s, apply_staged(UPG)), "fetching");
}

#[test]
fn apply_of_an_unknown_upgrade_is_not_found() {
    let r = refused(&cluster(), apply_staged(UNKNOWN));
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
}

// ---------------------------------------------------------------------------
// Cancel (seed 004): from each of the ten states
// ---------------------------------------------------------------------------

fn assert_cancels(from: UpgradeState) {
    let mut s = upgrade_in(from);
    let d = run_by(&mut s, ALICE, cancel(UPG));
    assert_eq!(d.subject, Subject::Upgrade(UPG.into()));
    assert_eq!(
        d.events,
        [DomainEvent::UpgradeCanceled(UpgradeRef {
            upgrade_id: UPG.into()
        })],
        "from {from:?}"
    );
    let u = upgrade(&s, UPG);
    assert_eq!(u.state, UpgradeState::Canceled);
    assert_eq!(u.canceled_by.as_deref(), Some(ALICE));
    assert!(u.canceled_at.is_some());
    assert_eq!(u.waiting_for(), "Nothing: it was canceled.");
    assert_eq!(s.upgrades.active, None);
    assert!(s.upgrades.write_freeze().is_none());
    // Nothing that runs changed.
    assert_eq!(s.upgrades.running.as_ref().unwrap().version, "1.0.0");
}

fn assert_not_cancelable(from: UpgradeState) {
    let s = upgrade_in(from);
    let r = refused(&s, cancel(UPG));
    assert_eq!(r.code, ErrorCode::UpgradeNotCancelable, "{r:?}");
    assert_eq!(r.details, Some(json!({ "state": from.as_str() })));
    assert!(r.message.contains(from.as_str()), "{}", r.message);
}

#[test]
fn cancel_a_planned_upgrade() {
    assert_cancels(UpgradeState::Planned);
}

#[test]
fn cancel_a_prechecking_upgrade() {
    assert_cancels(UpgradeState::Prechecking);
}

#[test]
fn cancel_a_fetching_upgrade_keeps_what_the_nodes_fetched() {
    let mut s = upgrade_in(UpgradeState::Fetching);
    run(&mut s, report(NODES[0], "fetch", "done"));
    run(&mut s, cancel(UPG));
    assert_eq!(state_of(&s, UPG), UpgradeState::Canceled);
    let n = node(&s, UPG, NODES[0]);
    assert_eq!((n.phase, n.state), (Phase::Fetch, NodeStatus::Done));
    assert_cancels(UpgradeState::Fetching);
}

#[test]
fn cancel_a_staged_upgrade() {
    assert_cancels(UpgradeState::Staged);
}

#[test]
fn cancel_a_backing_up_upgrade_is_not_cancelable() {
    assert_not_cancelable(UpgradeState::BackingUp);
}

#[test]
fn cancel_a_rolling_upgrade_is_not_cancelable() {
    assert_not_cancelable(UpgradeState::Rolling);
}

#[test]
fn cancel_a_verifying_upgrade_is_not_cancelable() {
    assert_not_cancelable(UpgradeState::Verifying);
}

#[test]
fn cancel_a_done_upgrade_is_not_cancelable() {
    assert_not_cancelable(UpgradeState::Done);
}

#[test]
fn cancel_a_failed_upgrade_is_not_cancelable() {
    assert_not_cancelable(UpgradeState::Failed);
}

#[test]
fn cancel_a_canceled_upgrade_answers_it_unchanged() {
    let s = upgrade_in(UpgradeState::Canceled);
    let d = when_by(&s, ALICE, cmd(cancel(UPG))).unwrap();
    assert_unchanged(&d, UPG);
    // The first cancel's principal stays on record.
    assert_eq!(upgrade(&s, UPG).canceled_by.as_deref(), Some(ADMIN));
}

#[test]
fn cancel_an_unknown_upgrade_is_not_found() {
    let s = upgrade_in(UpgradeState::Fetching);
    let r = refused(&s, cancel(UNKNOWN));
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
    assert!(r.message.contains(UNKNOWN), "{}", r.message);
}

#[test]
fn cancel_during_the_write_freeze_answers_its_own_conflict() {
    for state in [
        UpgradeState::BackingUp,
        UpgradeState::Rolling,
        UpgradeState::Verifying,
    ] {
        let s = upgrade_in(state);
        assert!(s.upgrades.write_freeze().is_some());
        assert!(cmd(cancel(UPG)).passes_write_freeze());
        let r = refused(&s, cancel(UPG));
        assert_ne!(r.code, ErrorCode::UpgradeInProgress, "{r:?}");
        assert_eq!(r.code, ErrorCode::UpgradeNotCancelable, "{r:?}");
        assert_eq!(r.details, Some(json!({ "state": state.as_str() })));
    }
}

// ---------------------------------------------------------------------------
// Write freeze
// ---------------------------------------------------------------------------

#[test]
fn the_write_freeze_holds_from_backing_up_to_verifying() {
    for state in UpgradeState::ALL.iter().copied() {
        let s = upgrade_in(state);
        let frozen = matches!(
            state,
            UpgradeState::BackingUp | UpgradeState::Rolling | UpgradeState::Verifying
        );
        assert_eq!(s.upgrades.write_freeze().is_some(), frozen, "{state:?}");
        assert_eq!(state.freezes_writes(), frozen, "{state:?}");
    }
}

#[test]
fn during_the_freeze_a_member_change_is_refused_upgrade_in_progress() {
    for state in [
        UpgradeState::BackingUp,
        UpgradeState::Rolling,
        UpgradeState::Verifying,
    ] {
        let s = upgrade_in(state);
        let r = when(&s, admit_member("n-delta", "192.0.2.20")).unwrap_err();
        assert_eq!(r.code, ErrorCode::UpgradeInProgress, "{state:?}: {r:?}");
        let details = r.details.unwrap();
        assert_eq!(details["upgradeId"], UPG);
        assert_eq!(details["state"], state.as_str());
        // Waiting on a report (the backup, a node): a minute.
        assert_eq!(details["retryAfterSeconds"], 60, "{state:?}");
        assert!(r.message.contains(UPG), "{}", r.message);
    }
}

#[test]
fn during_the_freeze_other_upgrade_commands_are_refused_upgrade_in_progress() {
    let s = upgrade_in(UpgradeState::BackingUp);
    for c in [
        create(UPG2, "1.1.0"),
        apply_staged(UPG),
        acknowledge(UPG),
        rollback(UPG, UPG2, false),
        UpgradeCommand::SetRunningRelease {
            version: Some("1.1.0".into()),
        },
        UpgradeCommand::RegisterRelease {
            manifest: manifest("1.2.0", "13.1", None),
            source: ReleaseSource::Manifest,
        },
    ] {
        let r = refused(&s, c.clone());
        assert_eq!(r.code, ErrorCode::UpgradeInProgress, "{c:?}: {r:?}");
    }
}

#[test]
fn before_the_backup_and_after_the_end_member_changes_pass() {
    for state in [
        UpgradeState::Fetching,
        UpgradeState::Staged,
        UpgradeState::Done,
        UpgradeState::Failed,
    ] {
        let s = upgrade_in(state);
        let d = when(&s, admit_member("n-delta", "192.0.2.20"));
        assert!(d.is_ok(), "{state:?}: {d:?}");
    }
}

#[test]
fn during_the_freeze_the_upgrades_own_reports_pass() {
    let mut s = upgrade_in(UpgradeState::BackingUp);
    // A repeated fetch report, the backup and an applied generation.
    let d = when(&s, cmd(report(NODES[0], "fetch", "done"))).unwrap();
    assert_unchanged(&d, UPG);
    let generation = s.membership.generation;
    let d = when(
        &s,
        Command::Member(MemberCommand::ReportAppliedGeneration {
            node_id: NODES[0].into(),
            generation: Some(generation - 1),
        }),
    )
    .unwrap();
    assert_eq!(d.events.len(), 1);
    let d = run(&mut s, backup_report(UPG));
    assert_eq!(d.events.len(), 1);
    advance(&mut s);
    // Rolling: the turn's node reports.
    assert!(s.upgrades.write_freeze().is_some());
    let d = run(&mut s, report(NODES[0], "roll", "running"));
    assert_eq!(d.events.len(), 1);
    let d = when(
        &s,
        Command::Member(MemberCommand::ReportAppliedGeneration {
            node_id: NODES[1].into(),
            generation: Some(generation),
        }),
    );
    assert!(d.is_ok(), "{d:?}");
}

// ---------------------------------------------------------------------------
// One upgrade at a time; create's input
// ---------------------------------------------------------------------------

#[test]
fn a_second_create_while_one_is_active_is_upgrade_already_active() {
    for state in [
        UpgradeState::Planned,
        UpgradeState::Fetching,
        UpgradeState::Staged,
    ] {
        let s = upgrade_in(state);
        let r = refused(&s, create(UPG2, "1.1.0"));
        assert_eq!(r.code, ErrorCode::UpgradeAlreadyActive, "{r:?}");
        assert_eq!(
            r.details,
            Some(json!({ "upgradeId": UPG, "state": state.as_str() }))
        );
    }
}

#[test]
fn once_the_active_upgrade_ends_create_works_again() {
    for state in [UpgradeState::Canceled, UpgradeState::Failed] {
        let mut s = upgrade_in(state);
        assert_eq!(s.upgrades.active, None);
        let d = run(&mut s, create(UPG2, "1.1.0"));
        assert!(
            matches!(d.events.as_slice(), [DomainEvent::UpgradePlanned(p)] if p.upgrade_id == UPG2),
            "{d:?}"
        );
        assert_eq!(s.upgrades.active.as_deref(), Some(UPG2));
    }
    let mut s = upgrade_in(UpgradeState::Done);
    apply(
        &mut s,
        ADMIN,
        &[registered(&manifest("1.2.0", "13.1", None))],
    );
    let d = run(&mut s, create(UPG2, "1.2.0"));
    let [DomainEvent::UpgradePlanned(p)] = d.events.as_slice() else {
        panic!("{d:?}")
    };
    assert_eq!(p.from_release, "1.1.0");
}

#[test]
fn create_without_a_running_release_is_running_release_not_set() {
    let s = given(&[
        registered(&manifest("1.0.0", "13.1", None)),
        registered(&manifest("1.1.0", "13.1", None)),
    ]);
    let r = refused(&s, create(UPG, "1.1.0"));
    assert_eq!(r.code, ErrorCode::RunningReleaseNotSet, "{r:?}");
}

#[test]
fn create_names_every_bad_field_at_once() {
    let r = refused(
        &cluster(),
        UpgradeCommand::Create {
            upgrade_id: UPG.into(),
            target_release: None,
            mode: Some("later".into()),
            backup_location: Some("cloud".into()),
            backup_encrypted: None,
            config: UpgradeConfig::default(),
        },
    );
    assert_invalid(&r, &["targetRelease", "mode", "backup.location"]);
    assert_eq!(message_of(&r, "targetRelease"), "is required");
    assert_eq!(message_of(&r, "mode"), "must be one of now, stage-only");
    assert_eq!(
        message_of(&r, "backup.location"),
        "must be one of node, target"
    );
    assert_eq!(r.message, "The request has 3 invalid fields.");
}

#[test]
fn create_with_an_empty_target_or_a_bad_id_is_invalid() {
    let mut c = create("upg-NOPE", "");
    let r = refused(&cluster(), c.clone());
    assert_invalid(&r, &["targetRelease", "id"]);
    if let UpgradeCommand::Create { upgrade_id, .. } = &mut c {
        *upgrade_id = UPG.into();
    }
    assert_invalid(&refused(&cluster(), c), &["targetRelease"]);
}

#[test]
fn create_defaults_to_now_and_a_backup_on_the_node() {
    let d = when(
        &cluster(),
        cmd(UpgradeCommand::Create {
            upgrade_id: UPG.into(),
            target_release: Some("1.1.0".into()),
            mode: None,
            backup_location: None,
            backup_encrypted: None,
            config: UpgradeConfig::default(),
        }),
    )
    .unwrap();
    let [DomainEvent::UpgradePlanned(p)] = d.events.as_slice() else {
        panic!("{d:?}")
    };
    assert_eq!(p.mode, UpgradeMode::Now);
    assert_eq!(p.backup_location, BackupLocation::Node);
    assert!(!p.backup_encrypted);
}

// ---------------------------------------------------------------------------
// The plan's kind
// ---------------------------------------------------------------------------

#[test]
fn a_package_change_is_a_host_upgrade_and_an_os_change_an_os_one() {
    let mut security = manifest("1.2.0", "13.2", None);
    security["cves"] = json!(["CVE-2026-0001"]);
    let s = cluster_with_releases(&[
        manifest("1.0.0", "13.1", None),
        manifest("1.1.0", "13.1", Some("1.1")),
        resigned(security),
    ]);
    let plan_of = |target: &str| {
        let d = when(&s, cmd(create(UPG, target))).unwrap();
        match d.events.as_slice() {
            [DomainEvent::UpgradePlanned(p)] => p.plan.clone(),
            other => panic!("{other:?}"),
        }
    };
    let host = plan_of("1.1.0");
    assert_eq!(host.kind, NodeKind::Host);
    assert!(host.nodes.iter().all(|n| n.kind == NodeKind::Host));
    assert_eq!(host.reboot_reason, None);
    let os = plan_of("1.2.0");
    assert_eq!(os.kind, NodeKind::Os);
    assert_eq!(os.reboot_reason.as_deref(), Some("security"));
    assert_eq!(os.cves, ["CVE-2026-0001"]);
    let mut s2 = s.clone();
    run(&mut s2, create(UPG, "1.2.0"));
    let names: Vec<&str> = node(&s2, UPG, NODES[0])
        .host_steps
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    assert_eq!(names, ["pull", "stage-os", "reboot"]);
}

// ---------------------------------------------------------------------------
// Prechecks
// ---------------------------------------------------------------------------

#[test]
fn prechecks_without_facts_pass_and_name_the_missing_fact() {
    let (_, checks) = prechecks_in(cluster(), "1.1.0");
    for (name, fact) in [
        ("space", "space fact"),
        ("backup-space", "space fact"),
        ("schema", "schema fact"),
        ("cluster-shutdown", "shutdown fact"),
    ] {
        let c = precheck(&checks, name);
        assert!(c.passed, "{c:?}");
        assert!(c.message.contains(fact), "{c:?}");
        assert!(c.message.contains("no"), "{c:?}");
    }
}

#[test]
fn a_failed_precheck_fails_the_upgrade_with_its_findings() {
    let mut s = cluster();
    run(&mut s, create(UPG, "9.9.9"));
    advance(&mut s);
    let events = advance(&mut s);
    let [DomainEvent::UpgradePrechecked(p), DomainEvent::UpgradeFailed(f)] = events.as_slice()
    else {
        panic!("{events:?}")
    };
    let failed: Vec<&str> = p
        .prechecks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(failed, ["release"]);
    assert_eq!(f.upgrade_id, UPG);
    let u = upgrade(&s, UPG);
    assert_eq!(u.state, UpgradeState::Failed);
    let reason = u.failure_reason.as_deref().unwrap();
    assert!(
        reason.starts_with("Prechecks failed: release: "),
        "{reason}"
    );
    assert!(reason.contains("9.9.9 is not registered"), "{reason}");
    assert_eq!(s.upgrades.active, None);
    assert_eq!(s.upgrades.running.as_ref().unwrap().version, "1.0.0");
    assert!(
        u.waiting_for().contains("acknowledge"),
        "{}",
        u.waiting_for()
    );
}

#[test]
fn release_precheck_fails_an_unknown_target() {
    let (_, checks) = prechecks_in(cluster(), "9.9.9");
    let c = precheck(&checks, "release");
    assert!(!c.passed);
    assert!(c.message.contains("9.9.9"), "{c:?}");
    assert!(precheck(&cluster_prechecks_ok(), "release").passed);
}

/// The prechecks of the plain 1.0.0 → 1.1.0 upgrade.
fn cluster_prechecks_ok() -> Vec<Precheck> {
    prechecks_in(cluster(), "1.1.0").1
}

#[test]
fn version_precheck_fails_the_running_release_or_an_older_one() {
    let s = cluster_with_releases(&[
        manifest("0.9.0", "13.1", None),
        manifest("1.0.0", "13.1", None),
        manifest("1.1.0", "13.1", None),
    ]);
    for target in ["1.0.0", "0.9.0"] {
        let (s, checks) = prechecks_in(s.clone(), target);
        let c = precheck(&checks, "version");
        assert!(!c.passed, "{target}: {c:?}");
        assert!(c.message.contains("not newer"), "{c:?}");
        assert_eq!(state_of(&s, UPG), UpgradeState::Failed);
    }
    let (_, checks) = prechecks_in(s, "1.1.0");
    assert!(precheck(&checks, "version").passed);
}

#[test]
fn upgrade_path_precheck_fails_a_skipped_required_stop() {
    let mut target = manifest("1.1.0", "13.1", None);
    // Two stops skipped: it names the first one on the way.
    target["requiredStops"] = json!(["1.0.8", "1.0.5", "0.9.0", "1.1.0"]);
    let s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(target)]);
    let (s, checks) = prechecks_in(s, "1.1.0");
    let c = precheck(&checks, "upgrade-path");
    assert!(!c.passed, "{c:?}");
    assert_eq!(
        c.message,
        "1.1.0 requires a stop at 1.0.5: upgrade from 1.0.0 to 1.0.5 first, then to 1.1.0."
    );
    let u = upgrade(&s, UPG);
    assert_eq!(u.state, UpgradeState::Failed);
    assert!(u.failure_reason.as_deref().unwrap().contains("1.0.5"));
}

#[test]
fn upgrade_path_precheck_passes_stops_outside_the_path() {
    let mut target = manifest("1.1.0", "13.1", None);
    target["requiredStops"] = json!(["0.9.0", "1.0.0", "1.1.0"]);
    let s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(target)]);
    let (_, checks) = prechecks_in(s, "1.1.0");
    assert!(precheck(&checks, "upgrade-path").passed, "{checks:?}");
}

#[test]
fn upgrade_path_precheck_fails_a_known_broken_path_and_says_the_way_round() {
    let mut target = manifest("1.1.0", "13.1", None);
    target["knownBroken"] = json!([
        {"from": "0.9.0", "reason": "other", "wayRound": "other way"},
        {"from": "1.0.0", "reason": "the raft snapshot format changed",
         "wayRound": "upgrade to 1.0.5 first"},
    ]);
    let s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(target)]);
    let (_, checks) = prechecks_in(s, "1.1.0");
    let c = precheck(&checks, "upgrade-path");
    assert!(!c.passed, "{c:?}");
    assert!(
        c.message.contains("the raft snapshot format changed"),
        "{c:?}"
    );
    assert!(
        c.message.contains("Way round: upgrade to 1.0.5 first"),
        "{c:?}"
    );
}

#[test]
fn readiness_precheck_fails_a_member_that_is_not_active() {
    let mut s = cluster();
    apply(&mut s, ADMIN, &[admitted("n-delta", Role::Control, 4)]);
    let (_, checks) = prechecks_in(s, "1.1.0");
    let c = precheck(&checks, "readiness");
    assert!(!c.passed, "{c:?}");
    assert!(c.message.contains("n-delta is joining"), "{c:?}");
}

#[test]
fn readiness_precheck_fails_a_lagging_member() {
    let mut s = cluster();
    let generation = s.membership.generation;
    apply(
        &mut s,
        ADMIN,
        &[DomainEvent::AppliedGenerationReported {
            node_id: "n-alpha".into(),
            generation: generation - 1,
        }],
    );
    let (s, checks) = prechecks_in(s, "1.1.0");
    let c = precheck(&checks, "readiness");
    assert!(!c.passed, "{c:?}");
    assert!(c.message.contains("n-alpha is lagging"), "{c:?}");
    assert!(!c.message.contains("n-bravo"), "{c:?}");
    assert_eq!(state_of(&s, UPG), UpgradeState::Failed);
}

#[test]
fn readiness_precheck_passes_active_current_members() {
    let c = precheck(&cluster_prechecks_ok(), "readiness").clone();
    assert!(c.passed, "{c:?}");
}

#[test]
fn release_differs_precheck_fails_an_identical_release() {
    let mut same = manifest("1.0.0", "13.1", None);
    same["version"] = json!("1.1.0");
    let s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(same)]);
    let (_, checks) = prechecks_in(s, "1.1.0");
    let c = precheck(&checks, "release-differs");
    assert!(!c.passed, "{c:?}");
    assert!(c.message.contains("changes nothing"), "{c:?}");
    assert!(precheck(&cluster_prechecks_ok(), "release-differs").passed);
}

#[test]
fn node_and_components_prechecks_describe_the_plan() {
    let checks = cluster_prechecks_ok();
    let node = precheck(&checks, "node");
    assert!(node.passed);
    assert!(node.message.starts_with("3 nodes"), "{node:?}");
    let comp = precheck(&checks, "components");
    assert!(comp.passed);
    assert!(comp.message.starts_with("1 component changes"), "{comp:?}");
    assert!(precheck(&checks, "upgrade").passed);
}

// ---------------------------------------------------------------------------
// Node reports
// ---------------------------------------------------------------------------

#[test]
fn a_roll_report_from_a_node_whose_turn_has_not_come_is_not_node_turn() {
    let s = upgrade_in(UpgradeState::Rolling);
    let r = refused(&s, report(NODES[2], "roll", "done"));
    assert_eq!(r.code, ErrorCode::NotNodeTurn, "{r:?}");
    assert_eq!(
        r.details,
        Some(json!({ "turn": NODES[0], "state": "rolling" }))
    );
    assert!(r.message.contains(NODES[0]), "{}", r.message);
}

#[test]
fn a_roll_report_from_a_node_that_already_rolled_is_not_node_turn() {
    let mut s = upgrade_in(UpgradeState::Rolling);
    step(&mut s, UPG);
    assert_eq!(turn(&s, UPG), NODES[1]);
    // Its own done again is a repeat; anything else is out of turn.
    assert_unchanged(
        &when(&s, cmd(report(NODES[0], "roll", "done"))).unwrap(),
        UPG,
    );
    let r = refused(&s, report(NODES[0], "roll", "running"));
    assert_eq!(r.code, ErrorCode::NotNodeTurn, "{r:?}");
    assert_eq!(
        r.details,
        Some(json!({ "turn": NODES[1], "state": "rolling" }))
    );
}

#[test]
fn a_roll_report_outside_rolling_is_not_node_turn() {
    for state in [
        UpgradeState::Fetching,
        UpgradeState::BackingUp,
        UpgradeState::Verifying,
    ] {
        let s = upgrade_in(state);
        let r = refused(&s, report(NODES[0], "roll", "running"));
        assert_eq!(r.code, ErrorCode::NotNodeTurn, "{state:?}: {r:?}");
        assert_eq!(
            r.details,
            Some(json!({ "turn": null, "state": state.as_str() }))
        );
    }
}

#[test]
fn a_fetch_report_outside_fetching_is_a_state_conflict() {
    for state in [UpgradeState::Planned, UpgradeState::Rolling] {
        let s = upgrade_in(state);
        let r = refused(&s, report(NODES[1], "fetch", "running"));
        assert_state_conflict(&r, state.as_str());
    }
}

#[test]
fn a_verify_report_outside_verifying_is_a_state_conflict() {
    let s = upgrade_in(UpgradeState::Fetching);
    assert_state_conflict(&refused(&s, report(NODES[1], "verify", "done")), "fetching");
}

#[test]
fn a_report_after_the_end_is_a_state_conflict() {
    let s = upgrade_in(UpgradeState::Done);
    assert_state_conflict(&refused(&s, report(NODES[1], "verify", "failed")), "done");
    let s = upgrade_in(UpgradeState::Canceled);
    assert_state_conflict(&refused(&s, report(NODES[1], "fetch", "done")), "canceled");
}

#[test]
fn a_report_for_a_node_not_in_the_upgrade_is_not_found() {
    let s = upgrade_in(UpgradeState::Fetching);
    let r = refused(&s, report("n-delta", "fetch", "done"));
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
    assert!(r.message.contains("n-delta"), "{}", r.message);
    let r = refused(&s, report_full(UNKNOWN, NODES[0], "fetch", "done", None));
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
}

#[test]
fn an_identical_repeated_report_appends_nothing() {
    let mut s = upgrade_in(UpgradeState::Fetching);
    let c = report_full(UPG, NODES[1], "fetch", "done", Some("fetched 1.2 GiB"));
    assert_eq!(run(&mut s, c.clone()).events.len(), 1);
    assert_unchanged(&when(&s, cmd(c)).unwrap(), UPG);
    // Without its message it still says nothing new.
    assert_unchanged(
        &when(&s, cmd(report(NODES[1], "fetch", "done"))).unwrap(),
        UPG,
    );
    // Another message is news.
    let c = report_full(UPG, NODES[1], "fetch", "done", Some("fetched again"));
    assert_eq!(when(&s, cmd(c)).unwrap().events.len(), 1);
}

#[test]
fn a_report_is_recorded_on_its_node() {
    let mut s = upgrade_in(UpgradeState::Fetching);
    let steps = vec![HostStep {
        name: "pull".into(),
        state: "done".into(),
        reboot_mode: "none".into(),
        detail: "pulled api".into(),
        ..Default::default()
    }];
    let d = run(
        &mut s,
        UpgradeCommand::ReportNode {
            upgrade_id: UPG.into(),
            node_id: NODES[1].into(),
            phase: Some("fetch".into()),
            state: Some("running".into()),
            message: Some("pulling".into()),
            host_steps: Some(steps.clone()),
            rebooted_at: None,
            instances: Some(vec!["vm-1".into()]),
            host_state: None,
            running_instances: None,
        },
    );
    assert_eq!(
        d.events,
        [DomainEvent::UpgradeNodeReported(UpgradeNodeReported {
            upgrade_id: UPG.into(),
            node_id: NODES[1].into(),
            phase: Phase::Fetch,
            state: NodeStatus::Running,
            message: "pulling".into(),
            host_steps: Some(steps.clone()),
            rebooted_at: None,
            instances: Some(vec!["vm-1".into()]),
            host_state: None,
            running_instances: None,
        })]
    );
    let n = node(&s, UPG, NODES[1]);
    assert_eq!((n.phase, n.state), (Phase::Fetch, NodeStatus::Running));
    assert_eq!(n.message, "pulling");
    assert_eq!(n.host_steps, steps);
    assert_eq!(n.instances, ["vm-1"]);
    // The other nodes are untouched.
    assert_eq!(node(&s, UPG, NODES[0]).state, NodeStatus::Pending);
}

#[test]
fn a_failed_report_fails_the_upgrade_with_the_nodes_message() {
    let mut s = upgrade_in(UpgradeState::Rolling);
    let d = run(
        &mut s,
        report_full(UPG, NODES[0], "roll", "failed", Some("api did not start")),
    );
    assert_eq!(d.events.len(), 2);
    assert_eq!(
        d.events[1],
        DomainEvent::UpgradeFailed(UpgradeFailed {
            upgrade_id: UPG.into(),
            reason: "n-charlie failed roll: api did not start".into(),
        })
    );
    let u = upgrade(&s, UPG);
    assert_eq!(u.state, UpgradeState::Failed);
    assert!(u
        .failure_reason
        .as_deref()
        .unwrap()
        .contains("api did not start"));
    assert_eq!(node(&s, UPG, NODES[0]).state, NodeStatus::Failed);
    assert!(s.upgrades.write_freeze().is_none());
    assert_eq!(s.upgrades.active, None);
    assert_eq!(s.upgrades.running.as_ref().unwrap().version, "1.0.0");
}

#[test]
fn a_failed_fetch_or_verify_fails_the_upgrade_too() {
    let s = upgrade_in(UpgradeState::Failed);
    let reason = upgrade(&s, UPG).failure_reason.clone().unwrap();
    assert_eq!(reason, "n-alpha failed fetch: disk full");
    let mut s = upgrade_in(UpgradeState::Verifying);
    run(&mut s, report(NODES[2], "verify", "failed"));
    assert_eq!(state_of(&s, UPG), UpgradeState::Failed);
    assert_eq!(
        upgrade(&s, UPG).failure_reason.as_deref(),
        Some("n-bravo failed verify: no message")
    );
}

#[test]
fn bad_phase_and_state_values_are_invalid_input_naming_both() {
    let s = upgrade_in(UpgradeState::Fetching);
    let r = refused(&s, report(NODES[0], "install", "pending"));
    assert_invalid(&r, &["phase", "state"]);
    assert_eq!(
        message_of(&r, "phase"),
        "must be one of fetch, roll, verify"
    );
    assert_eq!(
        message_of(&r, "state"),
        "must be one of running, done, failed, rolled_back"
    );
    let r = refused(
        &s,
        UpgradeCommand::ReportNode {
            upgrade_id: UPG.into(),
            node_id: NODES[0].into(),
            phase: None,
            state: None,
            message: None,
            host_steps: Some(vec![HostStep {
                name: String::new(),
                state: "sleeping".into(),
                reboot_mode: "none".into(),
                detail: String::new(),
                ..Default::default()
            }]),
            rebooted_at: None,
            instances: None,
            host_state: None,
            running_instances: None,
        },
    );
    assert_invalid(
        &r,
        &["phase", "state", "hostSteps[0].name", "hostSteps[0].state"],
    );
    assert_eq!(message_of(&r, "phase"), "is required");
}

#[test]
fn rebooted_at_sets_the_last_restart() {
    let mut s = upgrade_in(UpgradeState::Rolling);
    assert_eq!(upgrade(&s, UPG).last_restart_at, None);
    // A reboot before the report came in (reports are folded at t0 + their
    // position in these tests).
    let at = t0() + chrono::Duration::seconds(1);
    let d = run(
        &mut s,
        UpgradeCommand::ReportNode {
            upgrade_id: UPG.into(),
            node_id: NODES[0].into(),
            phase: Some("roll".into()),
            state: Some("running".into()),
            message: None,
            host_steps: None,
            rebooted_at: Some(at),
            instances: None,
            host_state: None,
            running_instances: None,
        },
    );
    let [DomainEvent::UpgradeNodeReported(e)] = d.events.as_slice() else {
        panic!("{d:?}")
    };
    assert_eq!(e.rebooted_at, Some(at));
    assert_eq!(upgrade(&s, UPG).last_restart_at, Some(at));
}

// ---------------------------------------------------------------------------
// Backup report
// ---------------------------------------------------------------------------

#[test]
fn a_backup_report_outside_backing_up_is_a_state_conflict() {
    for state in [
        UpgradeState::Planned,
        UpgradeState::Fetching,
        UpgradeState::Staged,
    ] {
        let s = upgrade_in(state);
        assert_state_conflict(&refused(&s, backup_report(UPG)), state.as_str());
    }
    // Once backed up, another bundle is refused; the same one is a repeat.
    let s = upgrade_in(UpgradeState::Rolling);
    assert_unchanged(&when(&s, cmd(backup_report(UPG))).unwrap(), UPG);
    let r = refused(
        &s,
        UpgradeCommand::ReportBackup {
            upgrade_id: UPG.into(),
            location: Some("target".into()),
            bundle: Some("s3://backups/other.tar".into()),
            encrypted: Some(true),
        },
    );
    assert_state_conflict(&r, "rolling");
}

#[test]
fn a_backup_report_names_every_missing_field() {
    let s = upgrade_in(UpgradeState::BackingUp);
    let r = refused(
        &s,
        UpgradeCommand::ReportBackup {
            upgrade_id: UPG.into(),
            location: None,
            bundle: None,
            encrypted: None,
        },
    );
    assert_invalid(&r, &["location", "bundle", "encrypted"]);
    let r = refused(
        &s,
        UpgradeCommand::ReportBackup {
            upgrade_id: UPG.into(),
            location: Some("cloud".into()),
            bundle: Some(String::new()),
            encrypted: Some(true),
        },
    );
    assert_invalid(&r, &["location", "bundle"]);
    assert_eq!(message_of(&r, "location"), "must be one of node, target");
}

#[test]
fn a_backup_report_for_an_unknown_upgrade_is_not_found() {
    let s = upgrade_in(UpgradeState::BackingUp);
    let r = refused(&s, backup_report(UNKNOWN));
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
}

#[test]
fn the_backup_report_lets_the_driver_start_rolling() {
    let mut s = upgrade_in(UpgradeState::BackingUp);
    let d = run(
        &mut s,
        UpgradeCommand::ReportBackup {
            upgrade_id: UPG.into(),
            location: Some("target".into()),
            bundle: Some("s3://backups/upg.tar.age".into()),
            encrypted: Some(true),
        },
    );
    assert_eq!(
        d.events,
        [DomainEvent::UpgradeBackupReported(UpgradeBackupReported {
            upgrade_id: UPG.into(),
            location: BackupLocation::Target,
            bundle: "s3://backups/upg.tar.age".into(),
            encrypted: true,
        })]
    );
    assert!(upgrade(&s, UPG)
        .waiting_for()
        .contains("backup is reported"));
    advance(&mut s);
    assert_eq!(state_of(&s, UPG), UpgradeState::Rolling);
}

// ---------------------------------------------------------------------------
// Rollback
// ---------------------------------------------------------------------------

#[test]
fn rollback_of_a_done_upgrade_plans_an_upgrade_to_its_from_release() {
    let mut s = upgrade_in(UpgradeState::Done);
    let d = run(&mut s, rollback(UPG, UPG2, false));
    assert_eq!(d.subject, Subject::Upgrade(UPG2.into()));
    let [DomainEvent::UpgradePlanned(p), DomainEvent::UpgradeRolledBack(rb)] = d.events.as_slice()
    else {
        panic!("{d:?}")
    };
    assert_eq!(p.upgrade_id, UPG2);
    assert_eq!(p.target_release, "1.0.0");
    assert_eq!(p.from_release, "1.1.0");
    assert_eq!(p.rollback_of.as_deref(), Some(UPG));
    assert!(!p.restore_backup);
    assert_eq!(p.mode, UpgradeMode::Now);
    assert_eq!(
        *rb,
        UpgradeRolledBack {
            upgrade_id: UPG.into(),
            by: UPG2.into()
        }
    );
    assert_eq!(upgrade(&s, UPG).rolled_back_by.as_deref(), Some(UPG2));
    assert_eq!(upgrade(&s, UPG).state, UpgradeState::Done);
    let rb = upgrade(&s, UPG2);
    assert_eq!(rb.rollback_of.as_deref(), Some(UPG));
    assert_eq!(rb.state, UpgradeState::Planned);
    assert_eq!(s.upgrades.active.as_deref(), Some(UPG2));
    let names: Vec<&str> = rb.nodes[0]
        .host_steps
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    assert_eq!(names, ["pull", "restart"]);
}

#[test]
fn a_rollback_passes_the_version_precheck_and_returns_to_the_old_release() {
    let mut s = upgrade_in(UpgradeState::Done);
    run(&mut s, rollback(UPG, UPG2, false));
    advance(&mut s);
    advance(&mut s);
    let u = upgrade(&s, UPG2);
    assert_eq!(u.state, UpgradeState::Fetching, "{:?}", u.failure_reason);
    let version = precheck(&u.prechecks, "version");
    assert!(version.passed, "{version:?}");
    assert!(version.message.contains("rollback"), "{version:?}");
    assert!(precheck(&u.prechecks, "release-differs").passed);
    drive(&mut s, UPG2, UpgradeState::Done);
    assert_eq!(s.upgrades.running.as_ref().unwrap().version, "1.0.0");
    assert_eq!(s.upgrades.running.as_ref().unwrap().set_by, UPG2);
}

#[test]
fn a_rollback_that_restores_the_backup_starts_each_node_with_restore() {
    let mut s = upgrade_in(UpgradeState::Done);
    let d = run(&mut s, rollback(UPG, UPG2, true));
    let [DomainEvent::UpgradePlanned(p), _] = d.events.as_slice() else {
        panic!("{d:?}")
    };
    assert!(p.restore_backup);
    let steps = step_names(&p.plan);
    let backup = steps.iter().position(|st| st == "backup").unwrap();
    assert_eq!(
        steps.get(backup + 1).map(String::as_str),
        Some("restore"),
        "restore comes right after the backup, before any roll: {steps:?}"
    );
    let u = upgrade(&s, UPG2);
    assert!(u.restore_backup);
    for n in &u.nodes {
        let names: Vec<&str> = n.host_steps.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["restore", "pull", "restart"], "{}", n.node_id);
    }
}

#[test]
fn rollback_of_a_failed_upgrade_returns_to_its_from_release() {
    let mut s = upgrade_in(UpgradeState::Failed);
    let d = run(&mut s, rollback(UPG, UPG2, false));
    let [DomainEvent::UpgradePlanned(p), _] = d.events.as_slice() else {
        panic!("{d:?}")
    };
    assert_eq!(p.target_release, "1.0.0");
    assert_eq!(p.rollback_of.as_deref(), Some(UPG));
}

#[test]
fn rollback_of_an_upgrade_that_has_not_finished_is_a_state_conflict() {
    for state in [
        UpgradeState::Planned,
        UpgradeState::Fetching,
        UpgradeState::Staged,
        UpgradeState::Canceled,
    ] {
        let s = upgrade_in(state);
        assert_state_conflict(&refused(&s, rollback(UPG, UPG2, false)), state.as_str());
    }
}

#[test]
fn rolling_back_twice_is_refused() {
    let mut s = upgrade_in(UpgradeState::Done);
    run(&mut s, rollback(UPG, UPG2, false));
    let r = refused(&s, rollback(UPG, "upg-0000000003", false));
    assert_state_conflict(&r, "done");
    assert!(r.message.contains(UPG2), "{}", r.message);
    // Still refused once the rollback itself is done.
    drive(&mut s, UPG2, UpgradeState::Done);
    let r = refused(&s, rollback(UPG, "upg-0000000003", false));
    assert_state_conflict(&r, "done");
}

#[test]
fn restoring_a_backup_the_upgrade_never_took_is_invalid() {
    let s = upgrade_in(UpgradeState::Failed);
    assert_eq!(upgrade(&s, UPG).backup, None);
    let r = refused(&s, rollback(UPG, UPG2, true));
    assert_invalid(&r, &["restoreBackup"]);
    assert!(message_of(&r, "restoreBackup").contains("no backup"));
}

#[test]
fn rollback_of_an_unknown_upgrade_is_not_found() {
    let r = refused(
        &upgrade_in(UpgradeState::Done),
        rollback(UNKNOWN, UPG2, false),
    );
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
}

#[test]
fn rollback_while_another_upgrade_is_active_is_upgrade_already_active() {
    let mut s = upgrade_in(UpgradeState::Failed);
    run(&mut s, create(UPG2, "1.1.0"));
    let r = refused(&s, rollback(UPG, "upg-0000000003", false));
    assert_eq!(r.code, ErrorCode::UpgradeAlreadyActive, "{r:?}");
    assert_eq!(upgrade(&s, UPG).rolled_back_by, None);
}

// ---------------------------------------------------------------------------
// Acknowledge
// ---------------------------------------------------------------------------

#[test]
fn acknowledge_marks_a_failed_upgrades_findings_read() {
    let mut s = upgrade_in(UpgradeState::Failed);
    let d = run(&mut s, acknowledge(UPG));
    assert_eq!(
        d.events,
        [DomainEvent::UpgradeAcknowledged(UpgradeRef {
            upgrade_id: UPG.into()
        })]
    );
    let u = upgrade(&s, UPG);
    assert_eq!(
        u.acknowledged_at,
        Some(t0() + chrono::Duration::seconds(s.position as i64))
    );
    assert_eq!(u.state, UpgradeState::Failed);
    assert!(
        u.waiting_for().contains("acknowledged"),
        "{}",
        u.waiting_for()
    );
}

#[test]
fn acknowledge_twice_appends_nothing() {
    let mut s = upgrade_in(UpgradeState::Failed);
    run(&mut s, acknowledge(UPG));
    let at = upgrade(&s, UPG).acknowledged_at;
    let d = run(&mut s, acknowledge(UPG));
    assert_unchanged(&d, UPG);
    assert_eq!(upgrade(&s, UPG).acknowledged_at, at);
}

#[test]
fn acknowledge_of_an_upgrade_that_did_not_fail_is_a_state_conflict() {
    for state in [
        UpgradeState::Planned,
        UpgradeState::Staged,
        UpgradeState::Done,
        UpgradeState::Canceled,
    ] {
        let s = upgrade_in(state);
        assert_state_conflict(&refused(&s, acknowledge(UPG)), state.as_str());
    }
    let r = refused(&cluster(), acknowledge(UNKNOWN));
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
}

// ---------------------------------------------------------------------------
// Releases and the running release
// ---------------------------------------------------------------------------

#[test]
fn register_release_records_its_canonical_manifest() {
    let s = cluster();
    let m = manifest("1.2.0", "13.1", None);
    let d = when(
        &s,
        cmd(UpgradeCommand::RegisterRelease {
            manifest: m.clone(),
            source: ReleaseSource::Manifest,
        }),
    )
    .unwrap();
    assert_eq!(d.subject, Subject::Release("1.2.0".into()));
    assert_eq!(
        d.events,
        [DomainEvent::ReleaseRegistered(ReleaseRegistered {
            version: "1.2.0".into(),
            manifest: canonical(&m),
            source: ReleaseSource::Manifest,
        })]
    );
}

#[test]
fn a_valid_manifest_reads_the_same_as_recorded_and_as_parsed() {
    let mut m = manifest("1.2.0", "13.1", Some("kernel-6.1"));
    m["requiredStops"] = json!(["1.1.0"]);
    m["knownBroken"] = json!([{"from": "1.0.1", "reason": "r", "wayRound": "w"}]);
    m["cves"] = json!(["CVE-2026-0001"]);
    m["os"]["kernelArgs"] = json!(["quiet"]);
    assert_eq!(
        crate::release::read_recorded(&canonical(&m)),
        crate::release::parse_manifest(&m).unwrap()
    );
}

#[test]
fn a_recorded_release_is_read_as_recorded_even_where_todays_parser_refuses_it() {
    // A manifest recorded by an older service, with a field and a digest
    // today's parser refuses: replay must still hold the release.
    let mut m = manifest("1.2.0", "13.1", None);
    m["futureField"] = json!({"anything": true});
    m["components"] = json!([
        {"kind": "image", "name": "api", "version": "1.2.0", "digest": "md5:abc"},
        {"kind": "helm-chart", "name": "later-kind", "version": "1"}
    ]);
    assert!(crate::release::parse_manifest(&m).is_err());
    let s = given(&[crate::testing::registered(&m)]);
    let r = &s.upgrades.releases["1.2.0"];
    assert_eq!(r.release.version, "1.2.0");
    assert_eq!(r.release.os.version, "13.1");
    assert_eq!(r.release.components.len(), 1, "an unknown kind is left out");
    assert_eq!(r.release.components[0].digest, "md5:abc");
    assert_eq!(r.manifest, canonical(&m), "the recorded text is kept as is");
}

#[test]
fn registering_the_same_manifest_twice_appends_nothing() {
    let mut s = cluster();
    let m = manifest("1.2.0", "13.1", None);
    let c = UpgradeCommand::RegisterRelease {
        manifest: m.clone(),
        source: ReleaseSource::Manifest,
    };
    assert_eq!(run(&mut s, c.clone()).events.len(), 1);
    assert!(s.upgrades.releases.contains_key("1.2.0"));
    let d = when(&s, cmd(c)).unwrap();
    assert!(d.events.is_empty(), "{d:?}");
    assert_eq!(d.subject, Subject::Release("1.2.0".into()));
    // The same manifest with its members in another order is the same.
    let reordered: Value =
        serde_json::from_str(&serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let d = when(
        &s,
        cmd(UpgradeCommand::RegisterRelease {
            manifest: reordered,
            source: ReleaseSource::Manifest,
        }),
    )
    .unwrap();
    assert!(d.events.is_empty(), "{d:?}");
}

#[test]
fn another_manifest_under_a_registered_version_is_release_exists() {
    let s = cluster();
    let r = refused(
        &s,
        UpgradeCommand::RegisterRelease {
            manifest: manifest("1.1.0", "13.2", None),
            source: ReleaseSource::Manifest,
        },
    );
    assert_eq!(r.code, ErrorCode::ReleaseExists, "{r:?}");
    assert!(r.message.contains("1.1.0"), "{}", r.message);
}

#[test]
fn an_invalid_manifest_is_invalid_input() {
    let mut m = manifest("1.2.0", "", None);
    m["version"] = json!("two");
    let r = refused(
        &cluster(),
        UpgradeCommand::RegisterRelease {
            manifest: m,
            source: ReleaseSource::Manifest,
        },
    );
    assert_invalid(&r, &["version", "os.version"]);
}

#[test]
fn set_running_release_sets_it_once() {
    let mut s = given(&[registered(&manifest("1.0.0", "13.1", None))]);
    let c = UpgradeCommand::SetRunningRelease {
        version: Some("1.0.0".into()),
    };
    let d = run(&mut s, c.clone());
    assert_eq!(d.subject, Subject::RunningRelease);
    assert_eq!(
        d.events,
        [DomainEvent::RunningReleaseSet(RunningReleaseSet {
            version: "1.0.0".into()
        })]
    );
    assert_eq!(s.upgrades.running.as_ref().unwrap().version, "1.0.0");
    assert!(when(&s, cmd(c)).unwrap().events.is_empty());
}

#[test]
fn set_running_release_of_an_unregistered_version_is_invalid() {
    let s = given(&[registered(&manifest("1.0.0", "13.1", None))]);
    let r = refused(
        &s,
        UpgradeCommand::SetRunningRelease {
            version: Some("2.0.0".into()),
        },
    );
    assert_invalid(&r, &["version"]);
    assert_eq!(message_of(&r, "version"), "release 2.0.0 is not registered");
    let r = refused(&s, UpgradeCommand::SetRunningRelease { version: None });
    assert_invalid(&r, &["version"]);
}

#[test]
fn a_second_running_release_is_running_release_already_set() {
    let s = cluster();
    let r = refused(
        &s,
        UpgradeCommand::SetRunningRelease {
            version: Some("1.1.0".into()),
        },
    );
    assert_eq!(r.code, ErrorCode::RunningReleaseAlreadySet, "{r:?}");
    assert_eq!(r.details, Some(json!({ "version": "1.0.0" })));
    // After an upgrade moved it, the install-time release is refused too.
    let s = upgrade_in(UpgradeState::Done);
    let r = refused(
        &s,
        UpgradeCommand::SetRunningRelease {
            version: Some("1.0.0".into()),
        },
    );
    assert_eq!(r.code, ErrorCode::RunningReleaseAlreadySet, "{r:?}");
    assert_eq!(r.details, Some(json!({ "version": "1.1.0" })));
}

// ---------------------------------------------------------------------------
// The state machine and ids
// ---------------------------------------------------------------------------

#[test]
fn the_allowed_moves_are_exactly_those_of_the_spec() {
    use UpgradeState::*;
    let mut allowed = vec![
        (Planned, Prechecking),
        (Prechecking, Fetching),
        (Fetching, Staged),
        (Fetching, BackingUp),
        (Staged, BackingUp),
        (BackingUp, Rolling),
        (Rolling, Verifying),
        (Verifying, Done),
    ];
    for from in [Prechecking, Fetching, Staged, BackingUp, Rolling, Verifying] {
        allowed.push((from, Failed));
    }
    for from in [Planned, Prechecking, Fetching, Staged] {
        allowed.push((from, Canceled));
    }
    assert_eq!(UpgradeState::ALL.len(), 10);
    for &from in UpgradeState::ALL {
        for &to in UpgradeState::ALL {
            assert_eq!(
                from.can_move_to(to),
                allowed.contains(&(from, to)),
                "{from:?} → {to:?}"
            );
        }
    }
}

#[test]
fn terminal_states_have_no_way_out_and_cancelable_ones_reach_canceled() {
    for &s in UpgradeState::ALL {
        let outgoing = UpgradeState::ALL.iter().any(|&to| s.can_move_to(to));
        assert_eq!(s.is_terminal(), !outgoing, "{s:?}");
        assert_eq!(
            s.cancelable(),
            s.can_move_to(UpgradeState::Canceled),
            "{s:?}"
        );
        assert_eq!(UpgradeState::parse(s.as_str()), Some(s));
    }
}

#[test]
fn upgrade_ids_are_upg_and_ten_of_digits_and_lowercase_letters() {
    for ok in ["upg-0123456789", "upg-abcdefghij", "upg-4k2j9x0qpa", UPG] {
        assert!(valid_upgrade_id(ok), "{ok}");
    }
    for bad in [
        "",
        "upg-",
        "upg-012345678",
        "upg-01234567890",
        "upg-ABCDEFGHIJ",
        "upg-abcdefghiJ",
        "UPG-0123456789",
        "upg_0123456789",
        "upg-01234-6789",
        "upg-01234 6789",
        "xupg-0123456789",
        "0123456789",
        "upg-01234567é",
    ] {
        assert!(!valid_upgrade_id(bad), "{bad}");
    }
}

#[test]
fn a_node_failing_in_any_state_from_the_prechecks_on_fails_the_upgrade() {
    for st in [
        UpgradeState::Prechecking,
        UpgradeState::Staged,
        UpgradeState::BackingUp,
        UpgradeState::Rolling,
    ] {
        let mut s = upgrade_in(st);
        // A roll out of turn is refused even when it failed.
        let r = refused(&s, report(NODES[2], "roll", "failed"));
        assert_eq!(r.code, ErrorCode::NotNodeTurn, "from {st:?}");
        // Not its phase: a failed fetch is a failure all the same.
        run(&mut s, report(NODES[2], "fetch", "failed"));
        assert_eq!(state_of(&s, UPG), UpgradeState::Failed, "from {st:?}");
        assert!(upgrade(&s, UPG)
            .failure_reason
            .as_deref()
            .is_some_and(|r| r.starts_with(NODES[2])));
    }
    // A planned upgrade cannot fail: the report is out of place.
    let s = upgrade_in(UpgradeState::Planned);
    let r = refused(&s, report(NODES[2], "fetch", "failed"));
    assert_eq!(r.code, ErrorCode::UpgradeStateConflict);
}

#[test]
fn an_upgrade_whose_rollback_failed_or_was_canceled_may_be_rolled_back_again() {
    let mut s = upgrade_in(UpgradeState::Done);
    run(&mut s, rollback(UPG, UPG2, false));
    run(
        &mut s,
        UpgradeCommand::Cancel {
            upgrade_id: UPG2.into(),
        },
    );
    // The canceled rollback undid nothing: another may start.
    let d = run(&mut s, rollback(UPG, "upg-zzzzzzzzzz", false));
    assert_eq!(d.subject, Subject::Upgrade("upg-zzzzzzzzzz".into()));
    assert_eq!(
        upgrade(&s, UPG).rolled_back_by.as_deref(),
        Some("upg-zzzzzzzzzz")
    );
    // While that one runs, or once it is done, it is not rolled back twice.
    let r = refused(&s, rollback(UPG, "upg-yyyyyyyyyy", false));
    assert_eq!(r.code, ErrorCode::UpgradeStateConflict);
}

#[test]
fn a_new_upgrade_never_takes_an_existing_id() {
    let s = upgrade_in(UpgradeState::Canceled);
    let r = refused(&s, create(UPG, "1.1.0"));
    assert_eq!(r.code, ErrorCode::VersionConflict);
}

#[test]
fn a_token_can_be_revoked_during_the_write_freeze() {
    let mut s = upgrade_in(UpgradeState::BackingUp);
    let issued = DomainEvent::TokenIssued(crate::iam::TokenIssued {
        token_id: "tok-1".into(),
        principal: "user/alice".into(),
        verifier: crate::iam::SecretVerifier::Sha256([1; 32]),
        policies: vec!["ReadOnly".into()],
        expires_at: None,
    });
    crate::testing::apply(&mut s, "user/admin", &[issued]);
    let d = when(
        &s,
        Command::Iam(crate::iam::IamCommand::RevokeToken {
            token_id: "tok-1".into(),
        }),
    )
    .unwrap();
    assert_eq!(d.events.len(), 1);
}

#[test]
fn a_writer_refused_while_the_cluster_settles_is_told_to_come_back_when_it_has() {
    let mut s = upgrade_in(UpgradeState::Rolling);
    let u = s.upgrades.upgrades.get_mut(UPG).unwrap();
    u.plan.settle_seconds = 120;
    u.last_restart_at = Some(t0() - chrono::Duration::seconds(30));
    let r = when(&s, admit_member("n-delta", "192.0.2.20")).unwrap_err();
    assert_eq!(r.details.unwrap()["retryAfterSeconds"], 91);
    // Bounded: a long settle still asks again within 10 minutes, a nearly
    // finished one not sooner than 5 s.
    let u = s.upgrades.upgrades.get_mut(UPG).unwrap();
    u.plan.settle_seconds = 7200;
    assert_eq!(u.retry_after(t0()), 600);
    u.plan.settle_seconds = 31;
    assert_eq!(u.retry_after(t0()), 5);
}

#[test]
fn a_token_can_be_issued_during_the_write_freeze() {
    for state in [
        UpgradeState::BackingUp,
        UpgradeState::Rolling,
        UpgradeState::Verifying,
    ] {
        let s = upgrade_in(state);
        let d = when(
            &s,
            Command::Iam(crate::iam::IamCommand::IssueToken {
                token_id: "tok-2".into(),
                principal: Some("node/n-1".into()),
                verifier: crate::iam::SecretVerifier::Sha256([2; 32]),
                policies: vec!["NodeAgent".into()],
                expires_at: None,
            }),
        )
        .unwrap_or_else(|r| panic!("{state:?}: {r:?}"));
        assert!(
            matches!(d.events[..], [DomainEvent::TokenIssued(_)]),
            "{state:?}"
        );
    }
}

#[test]
fn no_member_is_decommissioned_while_an_upgrade_is_active() {
    let decommission = || {
        Command::Member(MemberCommand::Decommission {
            node_id: NODES[0].into(),
            reason: Some("disk".into()),
            force: true,
        })
    };
    for st in [
        UpgradeState::Planned,
        UpgradeState::Fetching,
        UpgradeState::Staged,
    ] {
        let s = upgrade_in(st);
        let r = when(&s, decommission()).unwrap_err();
        assert_eq!(r.code, ErrorCode::UpgradeStateConflict, "{st:?}");
        assert_eq!(r.details.as_ref().unwrap()["upgradeId"], UPG);
    }
    let s = upgrade_in(UpgradeState::Canceled);
    assert!(when(&s, decommission()).is_ok(), "after the upgrade ends");
}
