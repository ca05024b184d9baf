//! The write freeze an upgrade holds.

use super::support::upgrade::*;

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
        let r = s
            .when(admit_member("n-delta", "192.0.2.20"))
            .then_refused(ErrorCode::UpgradeInProgress);
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
            manifest: signed(manifest("1.2.0", "13.1", None)),
            source: ReleaseSource::Manifest,
        },
    ] {
        s.when(c.clone()).then_refused(ErrorCode::UpgradeInProgress);
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
        s.when(admit_member("n-delta", "192.0.2.20")).decided();
    }
}

#[test]
fn during_the_freeze_the_upgrades_own_reports_pass() {
    let mut s = upgrade_in(UpgradeState::BackingUp);
    // A repeated fetch report, the backup and an applied generation.
    let d = s.when(report(NODES[0], "fetch", "done")).decided();
    assert_upgrade_unchanged(&d, UPG);
    let generation = s.membership.generation;
    let d = s
        .when(Command::Member(MemberCommand::ReportAppliedGeneration {
            node_id: NODES[0].into(),
            generation: Some(generation - 1),
        }))
        .decided();
    assert_eq!(d.events.len(), 1);
    let d = run(&mut s, backup_report(UPG));
    assert_eq!(d.events.len(), 1);
    advance(&mut s);
    // Rolling: the turn's node reports.
    assert!(s.upgrades.write_freeze().is_some());
    let d = run(&mut s, report(NODES[0], "roll", "running"));
    assert_eq!(d.events.len(), 1);
    s.when(Command::Member(MemberCommand::ReportAppliedGeneration {
        node_id: NODES[1].into(),
        generation: Some(generation),
    }))
    .decided();
}

#[test]
fn node_facts_pass_the_write_freeze() {
    let facts = NodeFacts {
        ready: Some(true),
        ..Default::default()
    };
    upgrade_in(UpgradeState::BackingUp)
        .when(report_facts(NODES[0], facts.clone()))
        .then([DomainEvent::NodeFactsReported(NodeFactsReported {
            node_id: NODES[0].into(),
            facts,
        })]);
}
