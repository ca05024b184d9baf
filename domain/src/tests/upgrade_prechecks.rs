//! Prechecks, and how they judge the nodes' facts.

use super::support::upgrade::*;

// ---------------------------------------------------------------------------
// Prechecks
// ---------------------------------------------------------------------------

#[test]
fn prechecks_without_facts_pass_and_name_the_missing_fact() {
    let d = prechecking(cluster(), "1.1.0")
        .when_by(DRIVER, ADVANCE)
        .decided();
    let checks = prechecks_of(&d);
    for (name, fact) in [
        ("space", "space fact"),
        ("backup-space", "space fact"),
        ("schema", "schema fact"),
        ("cluster-shutdown", "shutdown fact"),
    ] {
        let c = precheck(checks, name);
        assert!(c.passed, "{c:?}");
        assert!(c.message.contains(fact), "{c:?}");
        assert!(c.message.contains("no"), "{c:?}");
    }
}

#[test]
fn a_failed_precheck_fails_the_upgrade_with_its_findings() {
    let s = prechecking(cluster(), "9.9.9");
    let d = s.when_by(DRIVER, ADVANCE).decided();
    let [DomainEvent::UpgradePrechecked(p), DomainEvent::UpgradeFailed(f)] = d.events.as_slice()
    else {
        panic!("{d:?}")
    };
    let failed: Vec<&str> = p
        .prechecks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(failed, ["release"]);
    assert_eq!(f.upgrade_id, UPG);
    let s = s.and_by(DRIVER, &d.events);
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
    let d = prechecking(cluster(), "9.9.9")
        .when_by(DRIVER, ADVANCE)
        .decided();
    let c = precheck(prechecks_of(&d), "release");
    assert!(!c.passed);
    assert!(c.message.contains("9.9.9"), "{c:?}");
    assert!(precheck(&cluster_prechecks_ok(), "release").passed);
}

#[test]
fn the_precheck_table_names_each_check_once_and_runs_every_check_it_names() {
    use crate::upgrade::prechecks::{Ctx, CHECKS};
    let names: std::collections::BTreeSet<&str> = CHECKS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), CHECKS.len(), "{PRECHECKS:?}");
    assert_eq!(PRECHECKS.len(), CHECKS.len());
    // A passing upgrade and a failing one: each check of the table, run on
    // its own, gives the finding the upgrade recorded under its name.
    for target in ["1.1.0", "9.9.9"] {
        let s = prechecking(cluster(), target);
        let d = s.when_by(DRIVER, ADVANCE).decided();
        let recorded = prechecks_of(&d);
        let recorded_names: Vec<&str> = recorded.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(recorded_names, PRECHECKS);
        let s = s.and_by(DRIVER, &d.events);
        let cx = Ctx::new(&s, upgrade(&s, UPG));
        for ((name, check), c) in CHECKS.iter().zip(recorded) {
            let (passed, message) = check(&cx);
            assert!(!message.is_empty(), "{name}");
            assert_eq!(
                (*name, passed, message.as_str()),
                (c.name.as_str(), c.passed, c.message.as_str())
            );
        }
    }
}

/// The prechecks of the plain 1.0.0 → 1.1.0 upgrade.
fn cluster_prechecks_ok() -> Vec<Precheck> {
    let d = prechecking(cluster(), "1.1.0")
        .when_by(DRIVER, ADVANCE)
        .decided();
    prechecks_of(&d).to_vec()
}

#[test]
fn version_precheck_fails_the_running_release_or_an_older_one() {
    let s = cluster_with_releases(&[
        manifest("0.9.0", "13.1", None),
        manifest("1.0.0", "13.1", None),
        manifest("1.1.0", "13.1", None),
    ]);
    for target in ["1.0.0", "0.9.0"] {
        let s = prechecking(s.clone(), target);
        let d = s.when_by(DRIVER, ADVANCE).decided();
        let c = precheck(prechecks_of(&d), "version");
        assert!(!c.passed, "{target}: {c:?}");
        assert!(c.message.contains("not newer"), "{c:?}");
        assert_eq!(
            state_of(&s.and_by(DRIVER, &d.events), UPG),
            UpgradeState::Failed
        );
    }
    let d = prechecking(s, "1.1.0").when_by(DRIVER, ADVANCE).decided();
    assert!(precheck(prechecks_of(&d), "version").passed);
}

#[test]
fn upgrade_path_precheck_fails_a_skipped_required_stop() {
    let mut target = manifest("1.1.0", "13.1", None);
    // Two stops skipped: it names the first one on the way.
    target["requiredStops"] = json!(["1.0.8", "1.0.5", "0.9.0", "1.1.0"]);
    let s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(target)]);
    let s = prechecking(s, "1.1.0");
    let d = s.when_by(DRIVER, ADVANCE).decided();
    let c = precheck(prechecks_of(&d), "upgrade-path");
    assert!(!c.passed, "{c:?}");
    assert_eq!(
        c.message,
        "1.1.0 requires a stop at 1.0.5: upgrade from 1.0.0 to 1.0.5 first, then to 1.1.0."
    );
    let s = s.and_by(DRIVER, &d.events);
    let u = upgrade(&s, UPG);
    assert_eq!(u.state, UpgradeState::Failed);
    assert!(u.failure_reason.as_deref().unwrap().contains("1.0.5"));
}

#[test]
fn upgrade_path_precheck_passes_stops_outside_the_path() {
    let mut target = manifest("1.1.0", "13.1", None);
    target["requiredStops"] = json!(["0.9.0", "1.0.0", "1.1.0"]);
    let s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(target)]);
    let d = prechecking(s, "1.1.0").when_by(DRIVER, ADVANCE).decided();
    let checks = prechecks_of(&d);
    assert!(precheck(checks, "upgrade-path").passed, "{checks:?}");
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
    let d = prechecking(s, "1.1.0").when_by(DRIVER, ADVANCE).decided();
    let c = precheck(prechecks_of(&d), "upgrade-path");
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
    let s = cluster().and(&[admitted("n-delta", Role::Control, 4)]);
    let d = prechecking(s, "1.1.0").when_by(DRIVER, ADVANCE).decided();
    let c = precheck(prechecks_of(&d), "readiness");
    assert!(!c.passed, "{c:?}");
    assert!(c.message.contains("n-delta is joining"), "{c:?}");
}

#[test]
fn readiness_precheck_fails_a_lagging_member() {
    let s = cluster();
    let generation = s.membership.generation;
    let s = prechecking(
        s.and(&[DomainEvent::AppliedGenerationReported {
            node_id: "n-alpha".into(),
            generation: generation - 1,
        }]),
        "1.1.0",
    );
    let d = s.when_by(DRIVER, ADVANCE).decided();
    let c = precheck(prechecks_of(&d), "readiness");
    assert!(!c.passed, "{c:?}");
    assert!(c.message.contains("n-alpha is lagging"), "{c:?}");
    assert!(!c.message.contains("n-bravo"), "{c:?}");
    let s = s.and_by(DRIVER, &d.events);
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
    let d = prechecking(s, "1.1.0").when_by(DRIVER, ADVANCE).decided();
    let c = precheck(prechecks_of(&d), "release-differs");
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
    let d = s
        .when(report_facts(NODES[1], first.clone()))
        .then_appended(&mut s, [facts_reported(NODES[1], first.clone())]);
    assert_eq!(d.subject, Subject::Facts(NODES[1].into()));
    s.when(report_facts(NODES[1], first)).then_nothing();
    let newer = NodeFacts {
        bundle_free_bytes: Some(3_000_000_000),
        ..Default::default()
    };
    s.when(report_facts(NODES[1], newer.clone()))
        .then_appended(&mut s, [facts_reported(NODES[1], newer.clone())]);
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
// Review follow-ups
// ---------------------------------------------------------------------------

#[test]
fn components_precheck_fails_a_node_that_runs_other_pins_than_the_running_release() {
    // testing::manifest pins `api` at a digest of its version: n-b runs
    // another one.
    let s = cluster().and(&[facts_reported(
        NODES[1],
        NodeFacts {
            images: vec![image("api", "1.0.0", 'f')],
            ..Default::default()
        },
    )]);
    let d = prechecking(s, "1.1.0").when_by(DRIVER, ADVANCE).decided();
    let c = precheck(prechecks_of(&d), "components");
    assert!(!c.passed, "{c:?}");
    assert!(
        c.message.contains(NODES[1]) && c.message.contains("api"),
        "{c:?}"
    );
}
