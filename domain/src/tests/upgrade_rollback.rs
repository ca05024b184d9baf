//! Rolling back: the rollback command, its safety (schemas) and the previous
//! OS staying bootable.

use super::support::upgrade::*;

// ---------------------------------------------------------------------------
// Rollback
// ---------------------------------------------------------------------------

#[test]
fn rollback_of_a_done_upgrade_plans_an_upgrade_to_its_from_release() {
    let s = upgrade_in(UpgradeState::Done);
    let d = s.when(rollback(UPG, UPG2, false)).decided();
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
    let s = s.and(&d.events);
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
    let s = after(
        upgrade_in(UpgradeState::Done),
        &[
            (ADMIN, cmd(rollback(UPG, UPG2, false))),
            (DRIVER, cmd(ADVANCE)),
        ],
    );
    let d = s.when_by(DRIVER, ADVANCE).decided();
    assert!(
        matches!(d.events.as_slice(), [DomainEvent::UpgradePrechecked(_), ..]),
        "{d:?}"
    );
    let s = s.and_by(DRIVER, &d.events);
    let u = upgrade(&s, UPG2);
    assert_eq!(u.state, UpgradeState::Fetching, "{:?}", u.failure_reason);
    let version = precheck(&u.prechecks, "version");
    assert!(version.passed, "{version:?}");
    assert!(version.message.contains("rollback"), "{version:?}");
    assert!(precheck(&u.prechecks, "release-differs").passed);
    let s = walked_on(s, UPG2, UpgradeState::Done);
    assert_eq!(s.upgrades.running.as_ref().unwrap().version, "1.0.0");
    assert_eq!(s.upgrades.running.as_ref().unwrap().set_by, UPG2);
}

#[test]
fn a_rollback_that_restores_the_backup_starts_each_node_with_restore() {
    let s = upgrade_in(UpgradeState::Done);
    let d = s.when(rollback(UPG, UPG2, true)).decided();
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
    let s = s.and(&d.events);
    let u = upgrade(&s, UPG2);
    assert!(u.restore_backup);
    for n in &u.nodes {
        let names: Vec<&str> = n.host_steps.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["restore", "pull", "restart"], "{}", n.node_id);
    }
}

#[test]
fn rollback_of_a_failed_upgrade_returns_to_its_from_release() {
    let d = upgrade_in(UpgradeState::Failed)
        .when(rollback(UPG, UPG2, false))
        .decided();
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
        assert_state_conflict(
            &s.when(rollback(UPG, UPG2, false)).refusal(),
            state.as_str(),
        );
    }
}

#[test]
fn rolling_back_twice_is_refused() {
    let s = after(
        upgrade_in(UpgradeState::Done),
        &[(ADMIN, cmd(rollback(UPG, UPG2, false)))],
    );
    let r = s.when(rollback(UPG, "upg-0000000003", false)).refusal();
    assert_state_conflict(&r, "done");
    assert!(r.message.contains(UPG2), "{}", r.message);
    // Still refused once the rollback itself is done.
    let s = walked_on(s, UPG2, UpgradeState::Done);
    let r = s.when(rollback(UPG, "upg-0000000003", false)).refusal();
    assert_state_conflict(&r, "done");
}

#[test]
fn restoring_a_backup_the_upgrade_never_took_is_invalid() {
    let s = upgrade_in(UpgradeState::Failed);
    assert_eq!(upgrade(&s, UPG).backup, None);
    let r = s
        .when(rollback(UPG, UPG2, true))
        .then_invalid(&["restoreBackup"]);
    assert!(message_of(&r, "restoreBackup").contains("no backup"));
}

#[test]
fn rollback_of_an_unknown_upgrade_is_not_found() {
    upgrade_in(UpgradeState::Done)
        .when(rollback(UNKNOWN, UPG2, false))
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn rollback_while_another_upgrade_is_active_is_upgrade_already_active() {
    let s = after(
        upgrade_in(UpgradeState::Failed),
        &[(ADMIN, cmd(create(UPG2, "1.1.0")))],
    );
    s.when(rollback(UPG, "upg-0000000003", false))
        .then_refused(ErrorCode::UpgradeAlreadyActive);
    assert_eq!(upgrade(&s, UPG).rolled_back_by, None);
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
    let d = schema_cluster().when(create(UPG, "1.1.0")).decided();
    let plan = &planned(&d).plan;
    assert!(plan.restore_required, "{plan:?}");
}

#[test]
fn a_rollback_without_restore_onto_a_schema_the_old_release_cannot_run_is_restore_required() {
    let s = after(schema_cluster(), &[(ADMIN, cmd(create(UPG, "1.1.0")))]);
    let s = walked_on(s, UPG, UpgradeState::Done);
    s.when(rollback(UPG, UPG2, false))
        .then_refused(ErrorCode::RestoreRequired);
    assert_eq!(upgrade(&s, UPG).rolled_back_by, None);
    assert!(!s.upgrades.upgrades.contains_key(UPG2));
    assert_eq!(s.upgrades.active, None);
}

#[test]
fn a_rollback_with_restore_onto_a_schema_the_old_release_cannot_run_starts_every_node_with_restore()
{
    let s = after(schema_cluster(), &[(ADMIN, cmd(create(UPG, "1.1.0")))]);
    let s = walked_on(s, UPG, UpgradeState::Done);
    assert!(upgrade(&s, UPG).backup.is_some(), "the backup was reported");
    let d = s.when(rollback(UPG, UPG2, true)).decided();
    let p = planned(&d);
    assert!(p.restore_backup);
    assert_eq!(p.target_release, "1.0.0");
    let s = s.and(&d.events);
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
    let s = after(cluster(), &[(ADMIN, cmd(create(UPG, "1.1.0")))]);
    assert!(!upgrade(&s, UPG).plan.restore_required);
    let s = walked_on(s, UPG, UpgradeState::Done);
    let d = s.when(rollback(UPG, UPG2, false)).decided();
    assert!(!planned(&d).restore_backup);
    let s = s.and(&d.events);
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
    let d = os_cluster().when(create(UPG, "1.1.0")).decided();
    let plan = &planned(&d).plan;
    assert_eq!(plan.kind, NodeKind::Containers);
    assert!(plan.previous_os_bootable, "{plan:?}");
}

#[test]
fn an_os_change_leaves_the_previous_os_bootable_only_with_ab_slots() {
    let s = os_cluster();
    let d = s.when(create(UPG, "1.2.0")).decided();
    let plain = &planned(&d).plan;
    assert_eq!(plain.kind, NodeKind::Os);
    assert!(!plain.previous_os_bootable, "{plain:?}");
    let d = s.when(create(UPG, "1.3.0")).decided();
    let ab = &planned(&d).plan;
    assert_eq!(ab.kind, NodeKind::Os);
    assert!(ab.previous_os_bootable, "{ab:?}");
}
