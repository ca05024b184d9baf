//! Node reports and the backup report; a node that switched itself back,
//! host-helper reports, and instances a verify waits for.

use super::support::upgrade::*;

// ---------------------------------------------------------------------------
// Node reports
// ---------------------------------------------------------------------------

#[test]
fn a_roll_report_from_a_node_whose_turn_has_not_come_is_not_node_turn() {
    let s = upgrade_in(UpgradeState::Rolling);
    let r = s
        .when(report(NODES[2], "roll", "done"))
        .then_refused(ErrorCode::NotNodeTurn);
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
    assert_upgrade_unchanged(&s.when(report(NODES[0], "roll", "done")).decided(), UPG);
    let r = s
        .when(report(NODES[0], "roll", "running"))
        .then_refused(ErrorCode::NotNodeTurn);
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
        let r = s
            .when(report(NODES[0], "roll", "running"))
            .then_refused(ErrorCode::NotNodeTurn);
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
        let r = s.when(report(NODES[1], "fetch", "running")).refusal();
        assert_state_conflict(&r, state.as_str());
    }
}

#[test]
fn a_verify_report_outside_verifying_is_a_state_conflict() {
    let s = upgrade_in(UpgradeState::Fetching);
    assert_state_conflict(
        &s.when(report(NODES[1], "verify", "done")).refusal(),
        "fetching",
    );
}

#[test]
fn a_report_after_the_end_is_a_state_conflict() {
    let s = upgrade_in(UpgradeState::Done);
    assert_state_conflict(
        &s.when(report(NODES[1], "verify", "failed")).refusal(),
        "done",
    );
    let s = upgrade_in(UpgradeState::Canceled);
    assert_state_conflict(
        &s.when(report(NODES[1], "fetch", "done")).refusal(),
        "canceled",
    );
}

#[test]
fn a_report_for_a_node_not_in_the_upgrade_is_not_found() {
    let s = upgrade_in(UpgradeState::Fetching);
    let r = s
        .when(report("n-delta", "fetch", "done"))
        .then_refused(ErrorCode::NotFound);
    assert!(r.message.contains("n-delta"), "{}", r.message);
    s.when(report_full(UNKNOWN, NODES[0], "fetch", "done", None))
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn an_identical_repeated_report_appends_nothing() {
    let mut s = upgrade_in(UpgradeState::Fetching);
    let c = report_full(UPG, NODES[1], "fetch", "done", Some("fetched 1.2 GiB"));
    s.when(c.clone()).then_appended(
        &mut s,
        [node_reported(
            NODES[1],
            Phase::Fetch,
            NodeStatus::Done,
            "fetched 1.2 GiB",
        )],
    );
    assert_upgrade_unchanged(&s.when(c).decided(), UPG);
    // Without its message it still says nothing new.
    assert_upgrade_unchanged(&s.when(report(NODES[1], "fetch", "done")).decided(), UPG);
    // Another message is news.
    let c = report_full(UPG, NODES[1], "fetch", "done", Some("fetched again"));
    s.when(c).then([node_reported(
        NODES[1],
        Phase::Fetch,
        NodeStatus::Done,
        "fetched again",
    )]);
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
    s.when(UpgradeCommand::ReportNode {
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
    })
    .then_appended(
        &mut s,
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
        })],
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
    let r = s
        .when(report(NODES[0], "install", "pending"))
        .then_invalid(&["phase", "state"]);
    assert_eq!(
        message_of(&r, "phase"),
        "must be one of fetch, roll, verify"
    );
    assert_eq!(
        message_of(&r, "state"),
        "must be one of running, done, failed, rolled_back"
    );
    let r = s
        .when(UpgradeCommand::ReportNode {
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
        })
        .then_invalid(&["phase", "state", "hostSteps[0].name", "hostSteps[0].state"]);
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
        assert_state_conflict(&s.when(backup_report(UPG)).refusal(), state.as_str());
    }
    // Once backed up, another bundle is refused; the same one is a repeat.
    let s = upgrade_in(UpgradeState::Rolling);
    assert_upgrade_unchanged(&s.when(backup_report(UPG)).decided(), UPG);
    let r = s
        .when(UpgradeCommand::ReportBackup {
            upgrade_id: UPG.into(),
            location: Some("target".into()),
            bundle: Some("s3://backups/other.tar".into()),
            encrypted: Some(true),
        })
        .refusal();
    assert_state_conflict(&r, "rolling");
}

#[test]
fn a_backup_report_names_every_missing_field() {
    let s = upgrade_in(UpgradeState::BackingUp);
    s.when(UpgradeCommand::ReportBackup {
        upgrade_id: UPG.into(),
        location: None,
        bundle: None,
        encrypted: None,
    })
    .then_invalid(&["location", "bundle", "encrypted"]);
    let r = s
        .when(UpgradeCommand::ReportBackup {
            upgrade_id: UPG.into(),
            location: Some("cloud".into()),
            bundle: Some(String::new()),
            encrypted: Some(true),
        })
        .then_invalid(&["location", "bundle"]);
    assert_eq!(message_of(&r, "location"), "must be one of node, target");
}

#[test]
fn a_backup_report_for_an_unknown_upgrade_is_not_found() {
    let s = upgrade_in(UpgradeState::BackingUp);
    s.when(backup_report(UNKNOWN))
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn the_backup_report_lets_the_driver_start_rolling() {
    let mut s = upgrade_in(UpgradeState::BackingUp);
    s.when(UpgradeCommand::ReportBackup {
        upgrade_id: UPG.into(),
        location: Some("target".into()),
        bundle: Some("s3://backups/upg.tar.age".into()),
        encrypted: Some(true),
    })
    .then_appended(
        &mut s,
        [DomainEvent::UpgradeBackupReported(UpgradeBackupReported {
            upgrade_id: UPG.into(),
            location: BackupLocation::Target,
            bundle: "s3://backups/upg.tar.age".into(),
            encrypted: true,
        })],
    );
    assert!(upgrade(&s, UPG)
        .waiting_for()
        .contains("backup is reported"));
    s.when_by(DRIVER, ADVANCE).then_appended(
        &mut s,
        [
            moved(UPG, UpgradeState::BackingUp, UpgradeState::Rolling),
            turn_started(UPG, NODES[0]),
        ],
    );
    assert_eq!(state_of(&s, UPG), UpgradeState::Rolling);
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
    let d = run(&mut s, report_to(UPG, &n, "roll", "rolled_back"));
    assert_switched_back(&s, &d, &n, Phase::Roll);
}

#[test]
fn a_node_that_reports_rolled_back_while_verifying_or_fetching_fails_the_upgrade_naming_it() {
    for (state, phase) in [
        (UpgradeState::Verifying, Phase::Verify),
        (UpgradeState::Fetching, Phase::Fetch),
    ] {
        let mut s = upgrade_in(state);
        let d = run(
            &mut s,
            report_to(UPG, NODES[1], phase.as_str(), "rolled_back"),
        );
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
        run(&mut s, report_to(UPG, n, "verify", "done"));
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
