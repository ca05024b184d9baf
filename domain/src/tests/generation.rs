//! The membership generation, the generation members report having applied,
//! and lagging.

use super::support::membership::*;

// ---------------------------------------------------------------------------
// The membership generation
// ---------------------------------------------------------------------------

#[test]
fn only_topology_events_are_topology_changes() {
    for e in one_of_each() {
        let expected = matches!(
            e,
            DomainEvent::MemberAdmitted(_)
                | DomainEvent::MemberJoinCompleted { .. }
                | DomainEvent::MemberJoinFailed(_)
                | DomainEvent::MemberJoinRetried { .. }
                | DomainEvent::MemberRemovalStarted(_)
                | DomainEvent::MemberDecommissioned { .. }
                | DomainEvent::MemberUpdated(_)
        );
        assert_eq!(e.is_topology_change(), expected, "{}", e.event_type());
    }
}

#[test]
fn the_generation_is_the_position_of_the_latest_topology_event() {
    let mut s = State::default();
    let g = |s: &State| s.membership.generation;

    run_checking_generation(&mut s, INSTALLER, admit("n-1", "hybrid", "192.0.2.11"));
    assert_eq!(g(&s), 1);
    run_checking_generation(&mut s, "node/n-1", progress("n-1", "join/raft-patroni"));
    assert_eq!((s.position, g(&s)), (2, 1));
    run_checking_generation(&mut s, "node/n-1", applied_gen("n-1", 1));
    assert_eq!((s.position, g(&s)), (3, 1));
    run_checking_generation(&mut s, "node/n-1", complete("n-1"));
    assert_eq!(g(&s), 4);
    run_checking_generation(&mut s, INSTALLER, admit("n-2", "hybrid", "192.0.2.12"));
    run_checking_generation(&mut s, "node/n-2", complete("n-2"));
    run_checking_generation(&mut s, ADMIN, admit("n-3", "control", "192.0.2.13"));
    assert_eq!(g(&s), 7);
    run_checking_generation(&mut s, "node/n-3", progress("n-3", "join/raft-patroni"));
    run_checking_generation(&mut s, "node/n-3", fail("n-3", "join/raft-ovn", "kick"));
    assert_eq!((s.position, g(&s)), (9, 9));
    run_checking_generation(&mut s, CLEANER, removal("n-3", Raft::Patroni));
    assert_eq!((s.position, g(&s)), (10, 9));
    run_checking_generation(&mut s, CLEANER, removal("n-3", Raft::Ovn));
    assert_eq!(
        (s.position, g(&s)),
        (12, 9),
        "removal and cleanup completed"
    );
    run_checking_generation(&mut s, ADMIN, retry("n-3"));
    assert_eq!(g(&s), 13);
    run_checking_generation(&mut s, "node/n-3", complete("n-3"));
    assert_eq!(g(&s), 14);
    run_checking_generation(&mut s, "node/n-3", applied_gen("n-3", 14));
    assert_eq!((s.position, g(&s)), (15, 14));
    run_checking_generation(&mut s, ALICE, decommission("n-3", "rack moved"));
    assert_eq!(g(&s), 16);
    run_checking_generation(&mut s, CLEANER, removal("n-3", Raft::Patroni));
    run_checking_generation(&mut s, CLEANER, removal("n-3", Raft::Openbao));
    assert_eq!((s.position, g(&s)), (18, 16));
    let d = run_checking_generation(&mut s, CLEANER, removal("n-3", Raft::Ovn));
    assert_eq!(d.events.len(), 3);
    assert_eq!((s.position, g(&s)), (21, 21), "decommissioned bumps it");
    // Join requests change no peer list either.
    run_checking_generation(&mut s, "node/n-4", request("jr-1", "n-4", "192.0.2.14"));
    run_checking_generation(&mut s, ADMIN, reject("jr-1", Some("unknown hardware")));
    assert_eq!((s.position, g(&s)), (23, 21));
    run_checking_generation(&mut s, "node/n-4", request("jr-2", "n-4", "192.0.2.14"));
    run_checking_generation(&mut s, ADMIN, approve("jr-2", "compute"));
    assert_eq!((s.position, g(&s)), (26, 26), "the admission bumps it");
}

// ---------------------------------------------------------------------------
// Applied generation
// ---------------------------------------------------------------------------

#[test]
fn reporting_the_current_generation_does_not_bump_it() {
    let mut s = cluster_with(MemberState::Active);
    let generation = s.membership.generation;
    s.when_by("node/n-3", applied_gen("n-3", generation))
        .then_appended(
            &mut s,
            vec![DomainEvent::AppliedGenerationReported {
                node_id: "n-3".into(),
                generation,
            }],
        );
    assert_eq!(member(&s, "n-3").applied_generation, generation);
    assert_eq!(s.membership.generation, generation);
    assert!(s.position > generation);
    // And the member is no longer lagging: the same report again is a no-op.
    assert_member_unchanged(&s.when(applied_gen("n-3", generation)).decided(), "n-3");
}

#[test]
fn a_generation_above_the_clusters_is_invalid() {
    let s = cluster_with(MemberState::Active);
    let generation = s.membership.generation;
    let r = s
        .when(applied_gen("n-3", generation + 1))
        .then_invalid(&["generation"]);
    assert_eq!(
        message_of(&r, "generation"),
        format!("is above the cluster's generation {generation}")
    );
    s.when(MemberCommand::ReportAppliedGeneration {
        node_id: "n-3".into(),
        generation: None,
    })
    .then_invalid(&["generation"]);
}

#[test]
fn a_report_equal_to_the_current_applied_answers_unchanged() {
    let s = cluster_with(MemberState::Active).and_by(
        "node/n-3",
        &[DomainEvent::AppliedGenerationReported {
            node_id: "n-3".into(),
            generation: 3,
        }],
    );
    assert_member_unchanged(&s.when(applied_gen("n-3", 3)).then_nothing(), "n-3");
    // A fresh member has applied nothing yet.
    let s = cluster_with(MemberState::Joining);
    assert_member_unchanged(&s.when(applied_gen("n-3", 0)).decided(), "n-3");
}

#[test]
fn every_state_but_decommissioned_reports_its_applied_generation() {
    for state in [
        MemberState::Joining,
        MemberState::Active,
        MemberState::Failed,
        MemberState::Removing,
    ] {
        let s = cluster_with(state);
        let d = s
            .when(applied_gen("n-3", s.membership.generation))
            .decided();
        assert_eq!(d.events.len(), 1, "{state:?}");
    }
    let s = cluster_with(MemberState::Decommissioned);
    s.when(applied_gen("n-3", s.membership.generation))
        .then_refused(ErrorCode::MemberDecommissioned);
}

#[test]
fn applied_generation_of_an_unknown_node_is_not_found() {
    let s = founders();
    s.when(applied_gen("n-9", s.membership.generation))
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn a_member_lags_only_while_it_renders_peer_lists_below_the_generation() {
    assert!(crate::membership::lagging(MemberState::Joining, 3, 4));
    assert!(crate::membership::lagging(MemberState::Active, 3, 4));
    assert!(!crate::membership::lagging(MemberState::Active, 4, 4));
    assert!(!crate::membership::lagging(MemberState::Failed, 0, 4));
    assert!(!crate::membership::lagging(MemberState::Removing, 0, 4));
    assert!(!crate::membership::lagging(
        MemberState::Decommissioned,
        0,
        4
    ));
}
