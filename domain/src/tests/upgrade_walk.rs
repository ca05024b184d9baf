//! The whole walk of an upgrade (SPEC §5), and stage-only upgrades.

use super::support::upgrade::*;

// ---------------------------------------------------------------------------
// The whole walk
// ---------------------------------------------------------------------------

#[test]
fn create_plans_every_member_in_ordinal_order() {
    let s = cluster();
    let d = s.when(create(UPG, "1.1.0")).decided();
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
    let s = cluster();
    let d = s.when_by(ALICE, create(UPG, "1.1.0")).decided();
    assert!(
        matches!(d.events.as_slice(), [DomainEvent::UpgradePlanned(p)] if p.upgrade_id == UPG),
        "{d:?}"
    );
    let s = s.and_by(ALICE, &d.events);
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
    cluster()
        .when(UpgradeCommand::Advance)
        .then_refused(ErrorCode::NotFound);
    let s = upgrade_in(UpgradeState::Done);
    s.when(UpgradeCommand::Advance)
        .then_refused(ErrorCode::NotFound);
}

// ---------------------------------------------------------------------------
// Stage-only and apply
// ---------------------------------------------------------------------------

#[test]
fn a_stage_only_upgrade_stops_in_staged_after_fetching() {
    let s = cluster();
    let d = s.when(create_with(UPG, "1.1.0", "stage-only")).decided();
    let [DomainEvent::UpgradePlanned(p)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(p.mode, UpgradeMode::StageOnly);
    assert_eq!(
        &step_names(&p.plan)[..4],
        ["prechecks", "fetch", "stage", "apply"]
    );
    let mut s = walked_on(s.and(&d.events), UPG, UpgradeState::Fetching);
    for n in NODES {
        s.when(report(n, "fetch", "done")).then_appended(
            &mut s,
            [node_reported(n, Phase::Fetch, NodeStatus::Done, "")],
        );
    }
    s.when_by(DRIVER, ADVANCE).then_appended(
        &mut s,
        [moved(UPG, UpgradeState::Fetching, UpgradeState::Staged)],
    );
    assert_eq!(state_of(&s, UPG), UpgradeState::Staged);
    assert!(s.upgrades.write_freeze().is_none());
    assert_eq!(s.upgrades.active.as_deref(), Some(UPG));
    assert!(upgrade(&s, UPG).waiting_for().contains("apply"));
}

#[test]
fn advance_does_nothing_in_staged() {
    let s = upgrade_in(UpgradeState::Staged);
    s.when_by(DRIVER, ADVANCE).then_nothing();
    s.when_by(DRIVER, ADVANCE).then_nothing();
}

#[test]
fn apply_moves_a_staged_upgrade_to_backing_up() {
    let mut s = upgrade_in(UpgradeState::Staged);
    let d = s.when(apply_staged(UPG)).then_appended(
        &mut s,
        [moved(UPG, UpgradeState::Staged, UpgradeState::BackingUp)],
    );
    assert_eq!(d.subject, Subject::Upgrade(UPG.into()));
    assert_eq!(state_of(&s, UPG), UpgradeState::BackingUp);
    assert!(s.upgrades.write_freeze().is_some());
    let s = walked_on(s, UPG, UpgradeState::Done);
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
        let r = s.when(apply_staged(UPG)).refusal();
        assert_state_conflict(&r, state.as_str());
    }
    let s = after(
        cluster(),
        &[(ADMIN, cmd(create_with(UPG, "1.1.0", "stage-only")))],
    );
    let s = walked_on(s, UPG, UpgradeState::Fetching);
    assert_state_conflict(&s.when(apply_staged(UPG)).refusal(), "fetching");
}

#[test]
fn apply_of_an_unknown_upgrade_is_not_found() {
    cluster()
        .when(apply_staged(UNKNOWN))
        .then_refused(ErrorCode::NotFound);
}
