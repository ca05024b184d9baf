//! Decommissioning a member, and the quorum rule.

use super::support::membership::*;

// ---------------------------------------------------------------------------
// Decommission
// ---------------------------------------------------------------------------

#[test]
fn decommission_needs_a_reason() {
    let s = cluster_with(MemberState::Active);
    let r = s
        .when(MemberCommand::Decommission {
            node_id: "n-3".into(),
            reason: None,
            force: false,
        })
        .then_invalid(&["reason"]);
    assert_eq!(message_of(&r, "reason"), "is required");
    for bad in ["", "  ", "two\nlines"] {
        assert_invalid(&s.when(decommission("n-3", bad)).refusal(), &["reason"]);
    }
    assert_invalid(
        &s.when(decommission("n-3", &"r".repeat(MAX_REASON + 1)))
            .refusal(),
        &["reason"],
    );
}

#[test]
fn decommission_of_an_active_voter_starts_its_removal_from_every_raft() {
    let mut s = cluster_with(MemberState::Active);
    s.when_by(ALICE, decommission("n-3", "disk failed"))
        .then_appended(
            &mut s,
            vec![DomainEvent::MemberRemovalStarted(MemberRemovalStarted {
                node_id: "n-3".into(),
                reason: "disk failed".into(),
                forced: false,
                rafts: vec![Raft::Patroni, Raft::Openbao, Raft::Ovn],
            })],
        );
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Removing);
    assert!(!m.state.in_peer_lists());
    assert_eq!(m.decommission_reason.as_deref(), Some("disk failed"));
    assert_eq!(m.removal_requested_by.as_deref(), Some(ALICE));
    assert_eq!(m.decommissioned_by, None);
    assert_eq!(s.membership.generation, s.position);
    assert_eq!(s.membership.active_voters(), 2);
}

#[test]
fn decommission_of_a_joining_member_removes_it_from_the_rafts_it_reached() {
    let mut s = cluster_with(MemberState::Joining).and(&[progressed("n-3", "join/raft-patroni")]);
    s.when_by(ALICE, decommission("n-3", "wrong rack"))
        .then_appended(
            &mut s,
            [removal_started(
                "n-3",
                "wrong rack",
                false,
                &[Raft::Patroni],
            )],
        );
    assert_eq!(member(&s, "n-3").state, MemberState::Removing);
}

#[test]
fn decommission_of_a_failed_member_removes_what_its_cleanup_has_not() {
    let mut s =
        cluster_with(MemberState::Failed).and_by(CLEANER, &[raft_removed("n-3", Raft::Patroni)]);
    s.when_by(ALICE, decommission("n-3", "give up"))
        .then_appended(
            &mut s,
            [removal_started("n-3", "give up", false, &[Raft::Openbao])],
        );
    assert_eq!(member(&s, "n-3").state, MemberState::Removing);
    s.when_by(CLEANER, removal("n-3", Raft::Openbao))
        .then_appended(
            &mut s,
            cleanup_of("n-3", &[Raft::Openbao], Some(("give up", ALICE))),
        );
    assert_eq!(member(&s, "n-3").state, MemberState::Decommissioned);
    assert_eq!(member(&s, "n-3").decommissioned_by.as_deref(), Some(ALICE));
}

#[test]
fn decommission_of_a_cleaned_failed_member_decommissions_it_at_once() {
    let mut s = failed_and_cleaned();
    s.when_by(ALICE, decommission("n-3", "give up"))
        .then_appended(
            &mut s,
            vec![
                DomainEvent::MemberRemovalStarted(MemberRemovalStarted {
                    node_id: "n-3".into(),
                    reason: "give up".into(),
                    forced: false,
                    rafts: vec![],
                }),
                DomainEvent::MemberDecommissioned {
                    node_id: "n-3".into(),
                    reason: "give up".into(),
                    by: ALICE.into(),
                },
            ],
        );
    assert_eq!(member(&s, "n-3").state, MemberState::Decommissioned);
}

#[test]
fn a_compute_member_with_no_rafts_goes_straight_to_decommissioned() {
    let mut s = cluster_with_role(MemberState::Active, Role::Compute);
    s.when_by(ALICE, decommission("n-3", "retired"))
        .then_appended(
            &mut s,
            vec![
                DomainEvent::MemberRemovalStarted(MemberRemovalStarted {
                    node_id: "n-3".into(),
                    reason: "retired".into(),
                    forced: false,
                    rafts: vec![],
                }),
                DomainEvent::MemberDecommissioned {
                    node_id: "n-3".into(),
                    reason: "retired".into(),
                    by: ALICE.into(),
                },
            ],
        );
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Decommissioned);
    assert_eq!(m.decommissioned_by.as_deref(), Some(ALICE));
    assert_eq!(m.decommission_reason.as_deref(), Some("retired"));
    assert_eq!(
        m.decommissioned_at,
        Some(t0() + chrono::Duration::seconds(s.position as i64))
    );
    assert_eq!(s.membership.generation, s.position);
    assert_eq!(s.membership.pending_cleanups().count(), 0);
}

#[test]
fn decommission_of_removing_or_decommissioned_answers_it_unchanged() {
    for state in [MemberState::Removing, MemberState::Decommissioned] {
        let s = cluster_with(state);
        assert_member_unchanged(&s.when(decommission("n-3", "again")).decided(), "n-3");
        assert_member_unchanged(&s.when(force_decommission("n-3", "again")).decided(), "n-3");
        assert_eq!(
            member(&s, "n-3").decommission_reason.as_deref(),
            Some("disk failed")
        );
    }
}

#[test]
fn decommission_refuses_to_leave_fewer_than_two_active_voters() {
    let s = founders();
    let r = s
        .when(decommission("n-2", "disk failed"))
        .then_refused(ErrorCode::QuorumAtRisk);
    assert_eq!(
        r.details,
        Some(json!({ "votersBefore": 2, "votersAfter": 1 }))
    );

    let r = given(&[admitted("n-1", Role::Control, 1), completed("n-1")])
        .when(decommission("n-1", "disk failed"))
        .then_refused(ErrorCode::QuorumAtRisk);
    assert_eq!(
        r.details,
        Some(json!({ "votersBefore": 1, "votersAfter": 0 }))
    );
}

#[test]
fn joining_voters_do_not_count_toward_quorum() {
    let s = cluster_with(MemberState::Joining);
    let r = s
        .when(decommission("n-1", "disk failed"))
        .then_refused(ErrorCode::QuorumAtRisk);
    assert_eq!(
        r.details,
        Some(json!({ "votersBefore": 2, "votersAfter": 1 }))
    );
    // A third active voter makes it safe.
    let s = cluster_with(MemberState::Active);
    s.when(decommission("n-1", "disk failed")).decided();
}

#[test]
fn force_decommissions_even_when_quorum_is_at_risk() {
    let mut s = founders();
    s.when_by(ALICE, force_decommission("n-2", "burned"))
        .then_appended(&mut s, [removal_started("n-2", "burned", true, &Raft::ALL)]);
    assert_eq!(member(&s, "n-2").state, MemberState::Removing);
}

#[test]
fn quorum_only_guards_active_voters() {
    // The founder alone, and members that are no active voters.
    let mut s = given(&[admitted("n-1", Role::Hybrid, 1), completed("n-1")]);
    apply(
        &mut s,
        ADMIN,
        &[
            admitted("n-2", Role::Compute, 2),
            completed("n-2"),
            admitted("n-3", Role::Storage, 3),
            completed("n-3"),
            admitted("n-4", Role::Control, 4),
        ],
    );
    for node in ["n-2", "n-3", "n-4"] {
        s.when(decommission(node, "not needed")).decided();
    }
}

#[test]
fn decommission_of_an_unknown_node_is_not_found() {
    founders()
        .when(decommission("n-9", "gone"))
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn a_node_credential_stops_authenticating_once_its_decommission_is_accepted() {
    use crate::membership::MemberState;
    for state in MemberState::ALL {
        let expected = !matches!(state, MemberState::Removing | MemberState::Decommissioned);
        assert_eq!(state.node_may_authenticate(), expected, "{state:?}");
    }
}
