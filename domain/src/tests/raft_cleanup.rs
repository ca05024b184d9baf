//! The raft cleanup's bookkeeping: removals recorded one raft at a time.

use super::support::membership::*;

// ---------------------------------------------------------------------------
// Raft cleanup bookkeeping
// ---------------------------------------------------------------------------

#[test]
fn each_raft_of_a_failed_member_is_removed_once() {
    let mut s = cluster_with(MemberState::Failed);
    assert_eq!(
        s.membership
            .pending_cleanups()
            .map(|(m, rafts)| (m.node_id.clone(), rafts))
            .collect::<Vec<_>>(),
        vec![("n-3".to_owned(), vec![Raft::Patroni, Raft::Openbao])]
    );

    s.when_by(
        CLEANER,
        MemberCommand::RecordRaftRemoval {
            node_id: "n-3".into(),
            raft: Raft::Openbao,
            already_gone: true,
            adapter: "openbao-http".into(),
            leader_moved: false,
        },
    )
    .then_appended(
        &mut s,
        vec![DomainEvent::RaftPeerRemoved {
            node_id: "n-3".into(),
            raft: Raft::Openbao,
            already_gone: true,
            adapter: "openbao-http".into(),
            leader_moved: false,
        }],
    );
    assert_eq!(member(&s, "n-3").pending_cleanup(), vec![Raft::Patroni]);
    assert_eq!(member(&s, "n-3").raft_cleanup_at, None);

    // The same raft twice appends nothing.
    assert_member_unchanged(&decide_ok(&s, removal("n-3", Raft::Openbao)), "n-3");
    // A raft it never reached appends nothing.
    assert_member_unchanged(&decide_ok(&s, removal("n-3", Raft::Ovn)), "n-3");

    s.when_by(CLEANER, removal("n-3", Raft::Patroni))
        .then_appended(
            &mut s,
            vec![
                DomainEvent::RaftPeerRemoved {
                    node_id: "n-3".into(),
                    raft: Raft::Patroni,
                    already_gone: false,
                    adapter: ADAPTER.into(),
                    leader_moved: false,
                },
                DomainEvent::RaftCleanupCompleted {
                    node_id: "n-3".into(),
                },
            ],
        );
    let m = member(&s, "n-3");
    assert_eq!(
        m.state,
        MemberState::Failed,
        "cleanup does not move a failed member"
    );
    assert_eq!(
        m.raft_cleanup_at,
        Some(t0() + chrono::Duration::seconds(s.position as i64))
    );
    assert!(m.pending_cleanup().is_empty());
    assert_eq!(s.membership.pending_cleanups().count(), 0);

    for raft in Raft::ALL {
        assert_member_unchanged(&decide_ok(&s, removal("n-3", raft)), "n-3");
    }
}

#[test]
fn the_last_removal_of_a_removing_member_decommissions_it() {
    let mut s = cluster_with(MemberState::Removing);
    assert_eq!(
        member(&s, "n-3").pending_cleanup(),
        vec![Raft::Patroni, Raft::Openbao, Raft::Ovn]
    );
    run_by(&mut s, CLEANER, removal("n-3", Raft::Ovn));
    assert_member_unchanged(&decide_ok(&s, removal("n-3", Raft::Ovn)), "n-3");
    run_by(&mut s, CLEANER, removal("n-3", Raft::Patroni));
    assert_eq!(member(&s, "n-3").state, MemberState::Removing);

    s.when_by(CLEANER, removal("n-3", Raft::Openbao))
        .then_appended(
            &mut s,
            vec![
                DomainEvent::RaftPeerRemoved {
                    node_id: "n-3".into(),
                    raft: Raft::Openbao,
                    already_gone: false,
                    adapter: ADAPTER.into(),
                    leader_moved: false,
                },
                DomainEvent::RaftCleanupCompleted {
                    node_id: "n-3".into(),
                },
                DomainEvent::MemberDecommissioned {
                    node_id: "n-3".into(),
                    reason: "disk failed".into(),
                    by: ALICE.into(),
                },
            ],
        );
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Decommissioned);
    assert_eq!(m.decommissioned_by.as_deref(), Some(ALICE));
    assert_eq!(m.decommission_reason.as_deref(), Some("disk failed"));
    assert_eq!(
        m.decommissioned_at,
        Some(t0() + chrono::Duration::seconds(s.position as i64))
    );
    assert!(m.raft_cleanup_at.is_some());
    assert_eq!(s.membership.generation, s.position);
}

#[test]
fn removals_of_members_not_being_cleaned_append_nothing() {
    for state in [MemberState::Joining, MemberState::Active] {
        let mut s = cluster_with(state);
        if state == MemberState::Joining {
            run_by(&mut s, ADMIN, progress("n-3", "join/raft-patroni"));
        }
        for raft in Raft::ALL {
            assert_member_unchanged(&decide_ok(&s, removal("n-3", raft)), "n-3");
        }
    }
    let s = cluster_with(MemberState::Decommissioned);
    for raft in Raft::ALL {
        assert_member_unchanged(&decide_ok(&s, removal("n-3", raft)), "n-3");
    }
}

#[test]
fn a_removal_for_an_unknown_node_is_not_found() {
    founders()
        .when(removal("n-9", Raft::Ovn))
        .then_refused(ErrorCode::NotFound);
}
