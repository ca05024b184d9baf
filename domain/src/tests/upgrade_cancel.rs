//! Canceling an upgrade (seed 004) and acknowledging its end.

use super::support::upgrade::*;

// ---------------------------------------------------------------------------
// Cancel (seed 004): from each of the ten states
// ---------------------------------------------------------------------------

fn assert_cancels(from: UpgradeState) {
    let mut s = upgrade_in(from);
    let d = s.when_by(ALICE, cancel(UPG)).then_appended(
        &mut s,
        [DomainEvent::UpgradeCanceled(UpgradeRef {
            upgrade_id: UPG.into(),
        })],
    );
    assert_eq!(d.subject, Subject::Upgrade(UPG.into()));
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
    let r = s
        .when(cancel(UPG))
        .then_refused(ErrorCode::UpgradeNotCancelable);
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
    let mut s = upgrade_in(UpgradeState::Fetching).and(&[node_reported(
        NODES[0],
        Phase::Fetch,
        NodeStatus::Done,
        "",
    )]);
    s.when(cancel(UPG)).then_appended(
        &mut s,
        [DomainEvent::UpgradeCanceled(UpgradeRef {
            upgrade_id: UPG.into(),
        })],
    );
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
    let d = s.when_by(ALICE, cancel(UPG)).then_nothing();
    assert_upgrade_unchanged(&d, UPG);
    // The first cancel's principal stays on record.
    assert_eq!(upgrade(&s, UPG).canceled_by.as_deref(), Some(ADMIN));
}

#[test]
fn cancel_an_unknown_upgrade_is_not_found() {
    let s = upgrade_in(UpgradeState::Fetching);
    let r = s.when(cancel(UNKNOWN)).then_refused(ErrorCode::NotFound);
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
        let r = s.when(cancel(UPG)).refusal();
        assert_ne!(r.code, ErrorCode::UpgradeInProgress, "{r:?}");
        assert_eq!(r.code, ErrorCode::UpgradeNotCancelable, "{r:?}");
        assert_eq!(r.details, Some(json!({ "state": state.as_str() })));
    }
}

// ---------------------------------------------------------------------------
// Acknowledge
// ---------------------------------------------------------------------------

#[test]
fn acknowledge_marks_a_failed_upgrades_findings_read() {
    let mut s = upgrade_in(UpgradeState::Failed);
    s.when(acknowledge(UPG)).then_appended(
        &mut s,
        [DomainEvent::UpgradeAcknowledged(UpgradeRef {
            upgrade_id: UPG.into(),
        })],
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
    let s = upgrade_in(UpgradeState::Failed).and(&[DomainEvent::UpgradeAcknowledged(UpgradeRef {
        upgrade_id: UPG.into(),
    })]);
    let at = upgrade(&s, UPG).acknowledged_at;
    let d = s.when(acknowledge(UPG)).then_nothing();
    assert_upgrade_unchanged(&d, UPG);
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
        assert_state_conflict(&s.when(acknowledge(UPG)).refusal(), state.as_str());
    }
    cluster()
        .when(acknowledge(UNKNOWN))
        .then_refused(ErrorCode::NotFound);
}
