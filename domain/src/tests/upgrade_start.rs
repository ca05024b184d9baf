//! Starting an upgrade: one at a time, create's input, the plan's kind, the
//! state machine and the ids.

use super::support::upgrade::*;

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
        let r = s
            .when(create(UPG2, "1.1.0"))
            .then_refused(ErrorCode::UpgradeAlreadyActive);
        assert_eq!(
            r.details,
            Some(json!({ "upgradeId": UPG, "state": state.as_str() }))
        );
    }
}

#[test]
fn once_the_active_upgrade_ends_create_works_again() {
    for state in [UpgradeState::Canceled, UpgradeState::Failed] {
        let s = upgrade_in(state);
        assert_eq!(s.upgrades.active, None);
        let d = s.when(create(UPG2, "1.1.0")).decided();
        assert!(
            matches!(d.events.as_slice(), [DomainEvent::UpgradePlanned(p)] if p.upgrade_id == UPG2),
            "{d:?}"
        );
        let s = s.and(&d.events);
        assert_eq!(s.upgrades.active.as_deref(), Some(UPG2));
    }
    let s = upgrade_in(UpgradeState::Done).and(&[registered(&manifest("1.2.0", "13.1", None))]);
    let d = s.when(create(UPG2, "1.2.0")).decided();
    let [DomainEvent::UpgradePlanned(p)] = d.events.as_slice() else {
        panic!("{d:?}")
    };
    assert_eq!(p.from_release, "1.1.0");
}

#[test]
fn create_without_a_running_release_is_running_release_not_set() {
    given(&[
        registered(&manifest("1.0.0", "13.1", None)),
        registered(&manifest("1.1.0", "13.1", None)),
    ])
    .when(create(UPG, "1.1.0"))
    .then_refused(ErrorCode::RunningReleaseNotSet);
}

#[test]
fn create_names_every_bad_field_at_once() {
    let r = cluster()
        .when(UpgradeCommand::Create {
            upgrade_id: UPG.into(),
            target_release: None,
            mode: Some("later".into()),
            backup_location: Some("cloud".into()),
            backup_encrypted: None,
            config: UpgradeConfig::default(),
        })
        .then_invalid(&["targetRelease", "mode", "backup.location"]);
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
    cluster()
        .when(c.clone())
        .then_invalid(&["targetRelease", "id"]);
    if let UpgradeCommand::Create { upgrade_id, .. } = &mut c {
        *upgrade_id = UPG.into();
    }
    assert_invalid(&cluster().when(c).refusal(), &["targetRelease"]);
}

#[test]
fn create_defaults_to_now_and_a_backup_on_the_node() {
    let d = cluster()
        .when(UpgradeCommand::Create {
            upgrade_id: UPG.into(),
            target_release: Some("1.1.0".into()),
            mode: None,
            backup_location: None,
            backup_encrypted: None,
            config: UpgradeConfig::default(),
        })
        .decided();
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
    let planned_to = |target: &str| {
        let d = s.when(create(UPG, target)).decided();
        match d.events.as_slice() {
            [DomainEvent::UpgradePlanned(p)] => (p.plan.clone(), d),
            other => panic!("{other:?}"),
        }
    };
    let (host, _) = planned_to("1.1.0");
    assert_eq!(host.kind, NodeKind::Host);
    assert!(host.nodes.iter().all(|n| n.kind == NodeKind::Host));
    assert_eq!(host.reboot_reason, None);
    let (os, d) = planned_to("1.2.0");
    assert_eq!(os.kind, NodeKind::Os);
    assert_eq!(os.reboot_reason.as_deref(), Some("security"));
    assert_eq!(os.cves, ["CVE-2026-0001"]);
    let s2 = s.clone().and(&d.events);
    let names: Vec<&str> = node(&s2, UPG, NODES[0])
        .host_steps
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    assert_eq!(names, ["pull", "stage-os", "reboot"]);
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
    for from in UpgradeState::ALL {
        for to in UpgradeState::ALL {
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
    for s in UpgradeState::ALL {
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
        s.when(report(NODES[2], "roll", "failed"))
            .then_refused(ErrorCode::NotNodeTurn);
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
    s.when(report(NODES[2], "fetch", "failed"))
        .then_refused(ErrorCode::UpgradeStateConflict);
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
    s.when(rollback(UPG, "upg-yyyyyyyyyy", false))
        .then_refused(ErrorCode::UpgradeStateConflict);
}

#[test]
fn a_new_upgrade_never_takes_an_existing_id() {
    let s = upgrade_in(UpgradeState::Canceled);
    s.when(create(UPG, "1.1.0"))
        .then_refused(ErrorCode::VersionConflict);
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
    let d = s
        .when(Command::Iam(crate::iam::IamCommand::RevokeToken {
            token_id: "tok-1".into(),
        }))
        .decided();
    assert_eq!(d.events.len(), 1);
}

#[test]
fn a_writer_refused_while_the_cluster_settles_is_told_to_come_back_when_it_has() {
    let mut s = upgrade_in(UpgradeState::Rolling);
    let u = s.upgrades.upgrades.get_mut(UPG).unwrap();
    u.plan.settle_seconds = 120;
    u.last_restart_at = Some(t0() - chrono::Duration::seconds(30));
    let r = s.when(admit_member("n-delta", "192.0.2.20")).refusal();
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
        let d = s
            .when(Command::Iam(crate::iam::IamCommand::IssueToken {
                token_id: "tok-2".into(),
                principal: Some("node/n-1".into()),
                verifier: crate::iam::SecretVerifier::Sha256([2; 32]),
                policies: vec!["NodeAgent".into()],
                expires_at: None,
            }))
            .decided();
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
        let r = s
            .when(decommission())
            .then_refused(ErrorCode::UpgradeStateConflict);
        assert_eq!(r.details.as_ref().unwrap()["upgradeId"], UPG);
    }
    let s = upgrade_in(UpgradeState::Canceled);
    // After the upgrade ends.
    s.when(decommission()).decided();
}
