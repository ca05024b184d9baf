//! The plan: `componentsFrom: nodes`, fetched bundles, the backup target
//! and the plan's shape.

use super::support::upgrade::*;

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
    let s = cluster_with_releases(&[resigned(old), target]);

    let d = s.when(create(UPG, "1.1.0")).decided();
    let before = &planned(&d).plan;
    assert_eq!(before.components_from, "none");
    assert!(before.component_changes.is_empty());

    let s = s.and(&NODES.map(|n| {
        facts_reported(
            n,
            NodeFacts {
                images: vec![image("api", "0.9.0", 'a'), image("worker", "0.9.0", 'c')],
                ..Default::default()
            },
        )
    }));
    let d = s.when(create(UPG, "1.1.0")).decided();
    let plan = &planned(&d).plan;
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
    let s = cluster_with_releases(&[
        manifest("1.0.0", "13.1", None),
        manifest("1.1.0", "13.1", None),
        manifest("1.2.0", "13.1", None),
    ]);
    let s = after(s, &[(ADMIN, cmd(create(UPG, "1.1.0")))]);
    let s = walked_on(s, UPG, UpgradeState::Fetching);
    let s = after(
        s,
        &[
            (ADMIN, cmd(report_to(UPG, NODES[1], "fetch", "done"))),
            (ADMIN, cmd(cancel(UPG))),
        ],
    );

    // Another release was not fetched.
    let d = s.when(create("upg-pppppppppp", "1.2.0")).decided();
    assert!(planned(&d).plan.nodes.iter().all(|n| !n.fetched));

    let d = s.when(create(UPG2, "1.1.0")).decided();
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
    let s = s.and(&d.events);
    let n = node(&s, UPG2, NODES[1]);
    assert_eq!((n.phase, n.state), (Phase::Fetch, NodeStatus::Done));
    let other = node(&s, UPG2, NODES[0]);
    assert_eq!(
        (other.phase, other.state),
        (Phase::Fetch, NodeStatus::Pending)
    );

    let s = walked_on(s, UPG2, UpgradeState::Fetching);
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
    cluster()
        .when(create_backup(Some("target"), UpgradeConfig::default()))
        .then_invalid(&["backup.location"]);
}

#[test]
fn without_a_configured_target_the_backup_stays_on_the_node() {
    let d = cluster()
        .when(create_backup(None, UpgradeConfig::default()))
        .decided();
    let p = planned(&d);
    assert_eq!(p.backup_location, BackupLocation::Node);
    assert_eq!(p.backup_target, None);
}

#[test]
fn with_a_configured_target_the_backup_goes_there_encrypted_to_its_recipient() {
    let url = "s3://backups.example/stratum";
    let s = cluster();
    let d = s
        .when(create_backup(
            None,
            UpgradeConfig {
                backup_target: Some(BackupTarget {
                    url: url.into(),
                    recipient: Some("age1qyqszqgpqyqszqgpqyqszqgpqyqszqgp".into()),
                }),
                ..Default::default()
            },
        ))
        .decided();
    let p = planned(&d);
    assert_eq!(p.backup_location, BackupLocation::Target);
    assert_eq!(p.backup_target.as_deref(), Some(url));
    assert!(p.backup_encrypted);
    let s = s.and(&d.events);
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
    let d = cluster().when(create(UPG, "1.1.0")).decided();
    let plan = &planned(&d).plan;
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
    let d = s.when(create(UPG, "1.1.0")).decided();
    assert_eq!(planned(&d).plan.source_kind, ReleaseSource::Media);
    let d = cluster().when(create(UPG, "1.1.0")).decided();
    assert_eq!(planned(&d).plan.source_kind, ReleaseSource::Manifest);
}

#[test]
fn plan_steps_are_objects_with_a_kind_and_one_roll_per_node() {
    let d = cluster().when(create(UPG, "1.1.0")).decided();
    let plan = &planned(&d).plan;
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
    let d = s.when(create(UPG, "1.1.0")).decided();
    let plan = &planned(&d).plan;
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
    let d = cluster().when(create(UPG, "1.1.0")).decided();
    let plan = &planned(&d).plan;
    for n in &plan.nodes {
        assert_eq!(n.restarts, ["api"], "{n:?}");
        assert!(n.changes.is_empty(), "{n:?}");
    }
}
