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
            settings: None,
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
            settings: None,
        }],
    );
    assert_eq!(member(&s, "n-3").pending_cleanup(), vec![Raft::Patroni]);
    assert_eq!(member(&s, "n-3").raft_cleanup_at, None);

    // The same raft twice appends nothing.
    assert_member_unchanged(&s.when(removal("n-3", Raft::Openbao)).decided(), "n-3");
    // A raft it never reached appends nothing.
    assert_member_unchanged(&s.when(removal("n-3", Raft::Ovn)).decided(), "n-3");

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
                    settings: None,
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
        assert_member_unchanged(&s.when(removal("n-3", raft)).decided(), "n-3");
    }
}

#[test]
fn the_last_removal_of_a_removing_member_decommissions_it() {
    let mut s = cluster_with(MemberState::Removing);
    assert_eq!(
        member(&s, "n-3").pending_cleanup(),
        vec![Raft::Patroni, Raft::Openbao, Raft::Ovn]
    );
    s.when_by(CLEANER, removal("n-3", Raft::Ovn))
        .then_appended(&mut s, [raft_removed("n-3", Raft::Ovn)]);
    assert_member_unchanged(&s.when(removal("n-3", Raft::Ovn)).then_nothing(), "n-3");
    s.when_by(CLEANER, removal("n-3", Raft::Patroni))
        .then_appended(&mut s, [raft_removed("n-3", Raft::Patroni)]);
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
                    settings: None,
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
            s = s.and(&[progressed("n-3", "join/raft-patroni")]);
        }
        for raft in Raft::ALL {
            assert_member_unchanged(&s.when(removal("n-3", raft)).decided(), "n-3");
        }
    }
    let s = cluster_with(MemberState::Decommissioned);
    for raft in Raft::ALL {
        assert_member_unchanged(&s.when(removal("n-3", raft)).decided(), "n-3");
    }
}

#[test]
fn a_removal_for_an_unknown_node_is_not_found() {
    founders()
        .when(removal("n-9", Raft::Ovn))
        .then_refused(ErrorCode::NotFound);
}

// ---------------------------------------------------------------------------
// A removed peer that comes back
// ---------------------------------------------------------------------------

fn returned(node: &str, raft: Raft, removed_position: u64) -> MemberCommand {
    MemberCommand::RecordRaftPeerReturn {
        node_id: node.into(),
        raft,
        removed_position,
        removed_at: t0(),
    }
}

#[test]
fn a_returned_peer_is_owed_its_removal_again_and_raises_an_alarm_until_then() {
    let mut s = failed_and_cleaned();
    let cleaned_at = member(&s, "n-3").raft_cleanup_at;
    assert!(cleaned_at.is_some());

    s.when_by(CLEANER, returned("n-3", Raft::Openbao, 7))
        .then_appended(
            &mut s,
            vec![DomainEvent::RaftPeerReturned(RaftPeerReturned {
                node_id: "n-3".into(),
                raft: Raft::Openbao,
                removed_position: 7,
                removed_at: t0(),
            })],
        );
    let m = member(&s, "n-3");
    assert_eq!(m.pending_cleanup(), vec![Raft::Openbao]);
    assert_eq!(m.raft_cleanup_at, None, "the cleanup is no longer done");
    assert_eq!(m.state, MemberState::Failed);
    let key = crate::upgrade::raft_peer_returned_key(Raft::Openbao, "n-3");
    let alarm = &s.upgrades.alarms[&key];
    assert_eq!(alarm.name, crate::upgrade::RAFT_PEER_RETURNED_ALARM);
    assert_eq!(alarm.node_id.as_deref(), Some("n-3"));
    assert_eq!(alarm.cleared_at, None);
    assert!(alarm.message.contains("openbao") && alarm.message.contains("position 7"));
    // A retry waits for the removal again.
    s.when(retry("n-3"))
        .then_refused(ErrorCode::RaftCleanupPending);
    // The same return again appends nothing; another raft's is its own.
    assert_member_unchanged(&s.when(returned("n-3", Raft::Openbao, 7)).decided(), "n-3");

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
                    settings: None,
                },
                DomainEvent::RaftCleanupCompleted {
                    node_id: "n-3".into(),
                },
            ],
        );
    let m = member(&s, "n-3");
    assert!(m.pending_cleanup().is_empty());
    assert!(m.raft_cleanup_at > cleaned_at);
    assert!(s.upgrades.alarms[&key].cleared_at.is_some());
}

#[test]
fn a_decommissioned_member_s_return_is_removed_again_and_stays_decommissioned() {
    let mut s = cluster_with(MemberState::Decommissioned);
    let generation = s.membership.generation;
    s.when_by(CLEANER, returned("n-3", Raft::Ovn, 9))
        .then_appended(
            &mut s,
            [DomainEvent::RaftPeerReturned(RaftPeerReturned {
                node_id: "n-3".into(),
                raft: Raft::Ovn,
                removed_position: 9,
                removed_at: t0(),
            })],
        );
    assert_eq!(member(&s, "n-3").pending_cleanup(), vec![Raft::Ovn]);
    assert_eq!(s.membership.generation, generation, "no peer list changes");
    s.when_by(CLEANER, removal("n-3", Raft::Ovn)).then_appended(
        &mut s,
        vec![
            DomainEvent::RaftPeerRemoved {
                node_id: "n-3".into(),
                raft: Raft::Ovn,
                already_gone: false,
                adapter: ADAPTER.into(),
                leader_moved: false,
                settings: None,
            },
            DomainEvent::RaftCleanupCompleted {
                node_id: "n-3".into(),
            },
        ],
    );
    assert_eq!(member(&s, "n-3").state, MemberState::Decommissioned);
}

#[test]
fn only_a_standing_removal_can_be_returned_from() {
    // A raft the cleanup still owes, or one never removed, records nothing.
    let s = cluster_with(MemberState::Failed);
    for raft in Raft::ALL {
        assert_member_unchanged(&s.when(returned("n-3", raft, 5)).decided(), "n-3");
    }
    for state in [MemberState::Joining, MemberState::Active] {
        let s = cluster_with(state);
        for raft in Raft::ALL {
            assert_member_unchanged(&s.when(returned("n-3", raft, 5)).decided(), "n-3");
        }
    }
    // After a retried join, what the earlier cleanup removed is gone from
    // the record: the member is a peer again by right.
    let s = failed_and_cleaned().and(&[retried("n-3")]);
    assert_member_unchanged(&s.when(returned("n-3", Raft::Patroni, 5)).decided(), "n-3");
    founders()
        .when(returned("n-9", Raft::Ovn, 5))
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn a_return_is_not_recorded_while_a_live_member_holds_the_address() {
    // n-3 failed at 192.0.2.13 and was cleaned; n-4 now holds that address
    // (a failed member's address is free again only once it is
    // decommissioned, so n-3 is decommissioned here first).
    let s = cluster_with(MemberState::Decommissioned).and(&[DomainEvent::MemberAdmitted(
        admitted_event("n-4", Role::Control, 4, "192.0.2.13"),
    )]);
    s.when_by(CLEANER, returned("n-3", Raft::Patroni, 5))
        .then_refused(ErrorCode::MemberExists);
    assert!(member(&s, "n-3").pending_cleanup().is_empty());
}
