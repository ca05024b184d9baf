//! Member changes (PATCH): role, address, bindings and labels.

use super::support::membership::*;

// ---------------------------------------------------------------------------
// ---- Member changes (PATCH) ----
// ---------------------------------------------------------------------------

/// The PATCH `body` of `node`, taken apart as the API does: a key left out
/// is left as is; `bindings` and `labels` replace the whole map.
fn update(node: &str, body: serde_json::Value) -> MemberCommand {
    let obj = body.as_object().expect("a PATCH body is an object");
    for key in obj.keys() {
        assert!(
            ["role", "mgmtIp", "bindings", "labels", "force"].contains(&key.as_str()),
            "no such PATCH field: {key}"
        );
    }
    let text = |k: &str| obj.get(k).map(|v| v.as_str().expect("a string").to_owned());
    let strings = |k: &str| {
        obj.get(k)
            .map(|v| serde_json::from_value::<StringMap>(v.clone()).expect("a map of strings"))
    };
    MemberCommand::Update {
        node_id: node.into(),
        role: text("role"),
        mgmt_ip: text("mgmtIp"),
        bindings: strings("bindings"),
        labels: strings("labels"),
        force: obj
            .get("force")
            .is_some_and(|v| v.as_bool().expect("a bool")),
    }
}

/// The one `MemberUpdated` a decision appended.
fn updated(d: &Decision) -> &MemberUpdated {
    match d.events.as_slice() {
        [DomainEvent::MemberUpdated(e)] => e,
        other => panic!("expected one MemberUpdated, got {other:?}"),
    }
}

/// An `INVALID_INPUT` refusal naming exactly `expected`, in whatever order
/// the checks found them.
fn assert_invalid_fields(r: &Refusal, expected: &[&str]) {
    let mut got = fields(r);
    got.sort_unstable();
    let mut want = expected.to_vec();
    want.sort_unstable();
    assert_eq!(r.code, ErrorCode::InvalidInput, "{r:?}");
    assert_eq!(got, want, "{r:?}");
}

#[test]
fn an_update_of_an_unknown_node_is_not_found() {
    founders()
        .when(update(
            "n-9",
            json!({ "labels": { "topology.rack": "r2" } }),
        ))
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn an_update_addresses_the_members_stream() {
    assert_eq!(update("n-3", json!({})).stream_id(), "member/n-3");
}

#[test]
fn an_update_with_two_bad_fields_names_both() {
    let s = cluster_with(MemberState::Active);
    let r = s
        .when(update("n-3", json!({ "role": "boss", "mgmtIp": "nope" })))
        .refusal();
    assert_invalid_fields(&r, &["role", "mgmtIp"]);
    assert_eq!(
        message_of(&r, "role"),
        "must be control, compute, storage or hybrid"
    );
    assert_eq!(message_of(&r, "mgmtIp"), "must be an IPv4 or IPv6 address");
}

#[test]
fn an_update_lists_every_problem_at_once() {
    // n-3 is compute, so becoming storage demotes no voter.
    let s = cluster_with_role(MemberState::Active, Role::Compute);
    let r = s
        .when(update(
            "n-3",
            json!({
                "role": "storage",
                "mgmtIp": "192.0.2.12",
                "bindings": { "storage": "not-an-ip", "backup": "10.0.0.1" },
                "labels": { "zone": "a" },
            }),
        ))
        .refusal();
    assert_invalid_fields(
        &r,
        &[
            "mgmtIp",
            "bindings.backup",
            "bindings.storage",
            "labels.topology.rack",
        ],
    );
    assert!(
        message_of(&r, "mgmtIp").contains("is taken by member n-2"),
        "{r:?}"
    );
    assert_eq!(
        message_of(&r, "labels.topology.rack"),
        "is required for a storage member"
    );
    assert_eq!(member(&s, "n-3").role, Role::Compute);
}

#[test]
fn an_update_may_not_take_an_address_another_member_holds() {
    for state in [
        MemberState::Joining,
        MemberState::Active,
        MemberState::Failed,
        MemberState::Removing,
    ] {
        let s = cluster_with(state);
        let r = s
            .when(update("n-1", json!({ "mgmtIp": "192.0.2.13" })))
            .then_invalid(&["mgmtIp"]);
        assert!(
            message_of(&r, "mgmtIp").contains("is taken by member n-3"),
            "{state:?}: {r:?}"
        );
    }
    // Compared after normalization.
    let s = given(&[
        admitted_at("n-1", Role::Hybrid, 1, "2001:db8::12"),
        admitted_at("n-2", Role::Hybrid, 2, "192.0.2.12"),
    ]);
    let r = s
        .when(update("n-2", json!({ "mgmtIp": "2001:DB8:0::0012" })))
        .then_invalid(&["mgmtIp"]);
    assert!(
        message_of(&r, "mgmtIp").contains("is taken by member n-1"),
        "{r:?}"
    );
}

#[test]
fn an_update_may_take_a_decommissioned_members_address() {
    let s = cluster_with(MemberState::Decommissioned);
    let d = s
        .when(update("n-1", json!({ "mgmtIp": "192.0.2.13" })))
        .decided();
    assert_eq!(updated(&d).mgmt_ip, "192.0.2.13");
}

#[test]
fn an_update_normalizes_addresses_like_an_admission() {
    let s = founders();
    let d = s
        .when(update(
            "n-2",
            json!({
                "mgmtIp": "2001:DB8:0:0::0012",
                "bindings": { "overlay": "2001:db8:0::1" },
            }),
        ))
        .decided();
    let e = updated(&d);
    assert_eq!(e.mgmt_ip, "2001:db8::12");
    assert_eq!(e.bindings, map(&[("overlay", "2001:db8::1")]));
}

#[test]
fn a_member_keeping_its_own_address_is_no_conflict() {
    let s = given(&[
        admitted_at("n-1", Role::Hybrid, 1, "2001:db8::12"),
        completed("n-1"),
    ]);
    // Its own address, spelled another way, changes nothing.
    let d = s
        .when(update("n-1", json!({ "mgmtIp": "2001:DB8:0::0012" })))
        .decided();
    assert_member_unchanged(&d, "n-1");
    let d = s
        .when(update(
            "n-1",
            json!({ "mgmtIp": "2001:DB8:0::0012", "labels": { "topology.rack": "r2" } }),
        ))
        .decided();
    let e = updated(&d);
    assert_eq!(e.mgmt_ip, "2001:db8::12");
    assert_eq!(e.labels, rack("r2"));
}

#[test]
fn a_member_changed_to_storage_needs_a_rack_label() {
    // n-3 has the rack r1: it keeps it.
    let s = cluster_with(MemberState::Active);
    let d = s
        .when(update("n-3", json!({ "role": "storage" })))
        .decided();
    assert_eq!(updated(&d).role, Role::Storage);
    assert_eq!(updated(&d).labels, rack("r1"));
    let r = s
        .when(update(
            "n-3",
            json!({ "role": "storage", "labels": { "zone": "a" } }),
        ))
        .then_invalid(&["labels.topology.rack"]);
    assert_eq!(
        message_of(&r, "labels.topology.rack"),
        "is required for a storage member"
    );

    // A compute member admitted with no labels at all.
    let s = founders().and(&[DomainEvent::MemberAdmitted(MemberAdmitted {
        labels: StringMap::new(),
        ..admitted_event("n-3", Role::Compute, 3, "192.0.2.13")
    })]);
    s.when(update("n-3", json!({ "role": "storage" })))
        .then_invalid(&["labels.topology.rack"]);
    let d = s
        .when(update(
            "n-3",
            json!({ "role": "storage", "labels": { "topology.rack": "r2" } }),
        ))
        .decided();
    assert_eq!(updated(&d).role, Role::Storage);
    assert_eq!(updated(&d).labels, rack("r2"));
}

#[test]
fn a_storage_member_may_not_replace_its_labels_without_the_rack() {
    let s = cluster_with_role(MemberState::Active, Role::Storage);
    for labels in [json!({ "zone": "a" }), json!({})] {
        let r = s
            .when(update("n-3", json!({ "labels": labels })))
            .then_invalid(&["labels.topology.rack"]);
        assert_eq!(
            message_of(&r, "labels.topology.rack"),
            "is required for a storage member"
        );
    }
    let d = s
        .when(update(
            "n-3",
            json!({ "labels": { "topology.rack": "r2", "zone": "a" } }),
        ))
        .decided();
    assert_eq!(
        updated(&d).labels,
        map(&[(RACK_LABEL, "r2"), ("zone", "a")])
    );
    // A member that is no storage member may drop its rack.
    let s = cluster_with_role(MemberState::Active, Role::Compute);
    let d = s.when(update("n-3", json!({ "labels": {} }))).decided();
    assert_eq!(updated(&d).labels, StringMap::new());
}

#[test]
fn an_update_of_a_removing_or_decommissioned_member_is_refused() {
    for state in [MemberState::Removing, MemberState::Decommissioned] {
        let s = cluster_with(state);
        s.when(update(
            "n-3",
            json!({ "labels": { "topology.rack": "r2" } }),
        ))
        .then_refused(ErrorCode::MemberDecommissioned);
    }
}

#[test]
fn a_failed_member_may_not_move_while_its_raft_cleanup_is_pending() {
    let s = cluster_with(MemberState::Failed);
    let moved = update("n-3", json!({ "mgmtIp": "192.0.2.33" }));
    s.when(moved.clone())
        .then_refused(ErrorCode::RaftCleanupPending);
    // One raft done, one still to do.
    let s = s.and_by(CLEANER, &[raft_removed("n-3", Raft::Patroni)]);
    s.when(moved).then_refused(ErrorCode::RaftCleanupPending);
    s.when(update(
        "n-3",
        json!({ "mgmtIp": "192.0.2.33", "labels": { "topology.rack": "r2" } }),
    ))
    .then_refused(ErrorCode::RaftCleanupPending);
    assert_eq!(member(&s, "n-3").mgmt_ip, "192.0.2.13");
}

#[test]
fn a_failed_member_with_cleanup_pending_may_change_all_but_its_address() {
    let s = cluster_with(MemberState::Failed);
    assert!(!member(&s, "n-3").pending_cleanup().is_empty());
    let d = s
        .when(update(
            "n-3",
            json!({
                "bindings": { "overlay": "10.2.0.13" },
                "labels": { "topology.rack": "r2" },
            }),
        ))
        .decided();
    let e = updated(&d);
    assert_eq!(e.mgmt_ip, "192.0.2.13");
    assert_eq!(e.bindings, map(&[("overlay", "10.2.0.13")]));
    assert_eq!(e.labels, rack("r2"));
    // Naming the address it has is no move.
    let d = s
        .when(update(
            "n-3",
            json!({ "mgmtIp": "192.0.2.13", "labels": { "topology.rack": "r2" } }),
        ))
        .decided();
    assert_eq!(updated(&d).mgmt_ip, "192.0.2.13");
}

#[test]
fn a_failed_member_may_move_once_its_cleanup_is_done() {
    let mut s = failed_and_cleaned();
    s.when(update("n-3", json!({ "mgmtIp": "192.0.2.33" })))
        .then_appended(
            &mut s,
            [DomainEvent::MemberUpdated(update_of(
                "n-3",
                Role::Control,
                "192.0.2.33",
            ))],
        );
    let m = member(&s, "n-3");
    assert_eq!(m.mgmt_ip, "192.0.2.33");
    assert_eq!(m.state, MemberState::Failed);
}

#[test]
fn demoting_one_of_two_active_voters_puts_quorum_at_risk() {
    let s = founders();
    for role in ["compute", "storage"] {
        let r = s
            .when(update("n-2", json!({ "role": role })))
            .then_refused(ErrorCode::QuorumAtRisk);
        assert_eq!(
            r.details,
            Some(json!({ "votersBefore": 2, "votersAfter": 1 })),
            "{role}"
        );
    }
    assert_eq!(member(&s, "n-2").role, Role::Hybrid);

    let r = given(&[admitted("n-1", Role::Control, 1), completed("n-1")])
        .when(update("n-1", json!({ "role": "compute" })))
        .then_refused(ErrorCode::QuorumAtRisk);
    assert_eq!(
        r.details,
        Some(json!({ "votersBefore": 1, "votersAfter": 0 }))
    );
}

#[test]
fn force_demotes_a_voter_even_when_quorum_is_at_risk() {
    let mut s = founders();
    let before = s.clone();
    let d = s
        .when_by(
            ALICE,
            update("n-2", json!({ "role": "compute", "force": true })),
        )
        .then_appended(
            &mut s,
            [DomainEvent::MemberUpdated(MemberUpdated {
                forced: true,
                rafts: Raft::ALL.to_vec(),
                ..update_of("n-2", Role::Compute, "192.0.2.12")
            })],
        );
    assert_generation(&before, &d, &s);
    let m = member(&s, "n-2");
    assert_eq!(m.role, Role::Compute);
    assert_eq!(m.state, MemberState::Active);
    assert_eq!(s.membership.active_voters(), 1);
}

#[test]
fn joining_voters_do_not_count_toward_the_quorum_of_a_demotion() {
    let s = cluster_with(MemberState::Joining);
    let r = s
        .when(update("n-2", json!({ "role": "compute" })))
        .then_refused(ErrorCode::QuorumAtRisk);
    assert_eq!(
        r.details,
        Some(json!({ "votersBefore": 2, "votersAfter": 1 }))
    );
    // A third active voter makes it safe.
    let s = cluster_with(MemberState::Active);
    let d = s
        .when(update("n-2", json!({ "role": "compute" })))
        .decided();
    assert!(!updated(&d).forced);
}

#[test]
fn a_demoted_active_voter_is_taken_out_of_every_raft() {
    let mut s = cluster_with(MemberState::Active);
    let d = s
        .when_by(ALICE, update("n-3", json!({ "role": "compute" })))
        .then_appended(
            &mut s,
            [n3_demoted(&[Raft::Patroni, Raft::Openbao, Raft::Ovn])],
        );
    assert_eq!(d.subject, Subject::Member("n-3".into()));
    let m = member(&s, "n-3");
    assert_eq!(m.role, Role::Compute);
    assert_eq!(m.state, MemberState::Active);
    assert_eq!(s.membership.active_voters(), 2);
}

#[test]
fn the_raft_removals_of_a_demoted_voter_are_recorded_while_it_stays_active() {
    let mut s = cluster_with(MemberState::Active).and_by(ALICE, &[n3_demoted(&Raft::ALL)]);
    for raft in [Raft::Patroni, Raft::Openbao] {
        // Bookkeeping: no topology change.
        let before = s.clone();
        let d = s
            .when_by(CLEANER, removal("n-3", raft))
            .then_appended(&mut s, [raft_removed("n-3", raft)]);
        assert_generation(&before, &d, &s);
        assert_eq!(member(&s, "n-3").state, MemberState::Active);
    }
    // The same raft twice appends nothing.
    assert_member_unchanged(&s.when(removal("n-3", Raft::Patroni)).decided(), "n-3");

    // The last one completes the cleanup, and decommissions nothing.
    let before = s.clone();
    let d = s.when_by(CLEANER, removal("n-3", Raft::Ovn)).then_appended(
        &mut s,
        [raft_removed("n-3", Raft::Ovn), cleanup_completed("n-3")],
    );
    assert_generation(&before, &d, &s);
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Active);
    assert_eq!(m.role, Role::Compute);
    assert!(m.pending_cleanup().is_empty());
    for raft in Raft::ALL {
        assert_member_unchanged(&s.when(removal("n-3", raft)).decided(), "n-3");
    }
}

#[test]
fn a_demoted_joining_voter_is_taken_out_of_the_rafts_it_reached() {
    let mut s = cluster_with(MemberState::Joining);
    let d = s
        .when(update("n-3", json!({ "role": "compute" })))
        .decided();
    assert!(updated(&d).rafts.is_empty(), "{d:?}");
    s = s.and(&[
        progressed("n-3", "join/raft-patroni"),
        progressed("n-3", "join/raft-openbao"),
    ]);
    let d = s
        .when(update("n-3", json!({ "role": "storage" })))
        .decided();
    let e = updated(&d);
    assert_eq!(e.rafts, vec![Raft::Patroni, Raft::Openbao]);
    assert!(!e.forced, "a joining voter is no active voter");
}

#[test]
fn a_demoted_failed_voter_still_owes_every_raft_its_cleanup_had_pending() {
    // Reached patroni, failed at join/raft-openbao: both still to clean.
    let mut s = cluster_with(MemberState::Failed);
    s.when(update("n-3", json!({ "role": "compute" })))
        .then_appended(&mut s, [n3_demoted(&[Raft::Patroni, Raft::Openbao])]);
    let m = member(&s, "n-3");
    assert_eq!(m.role, Role::Compute);
    assert_eq!(m.state, MemberState::Failed);
    assert_eq!(m.pending_cleanup(), vec![Raft::Patroni, Raft::Openbao]);
    let mut s = s.and_by(CLEANER, &[raft_removed("n-3", Raft::Patroni)]);
    s.when_by(CLEANER, removal("n-3", Raft::Openbao))
        .then_appended(
            &mut s,
            [raft_removed("n-3", Raft::Openbao), cleanup_completed("n-3")],
        );
    assert!(member(&s, "n-3").raft_cleanup_at.is_some());
}

#[test]
fn a_demoted_failed_voter_whose_cleanup_is_done_is_in_no_raft() {
    let mut s = failed_and_cleaned();
    let cleaned_at = member(&s, "n-3").raft_cleanup_at;
    s.when(update("n-3", json!({ "role": "compute" })))
        .then_appended(&mut s, [n3_demoted(&[])]);
    let m = member(&s, "n-3");
    assert!(m.pending_cleanup().is_empty());
    assert_eq!(m.raft_cleanup_at, cleaned_at, "its cleanup stays done");
    // So it can still be retried.
    s.when(retry("n-3")).decided();
}

#[test]
fn changes_that_demote_no_voter_name_no_rafts() {
    // Voter to voter, even with only two active voters.
    let s = founders();
    let d = s
        .when(update("n-2", json!({ "role": "control" })))
        .decided();
    let e = updated(&d);
    assert_eq!(e.role, Role::Control);
    assert!(e.rafts.is_empty(), "{e:?}");
    assert!(!e.forced);
    // Non-voter to non-voter, and a promotion.
    let s = cluster_with_role(MemberState::Active, Role::Compute);
    for (role, to) in [("storage", Role::Storage), ("control", Role::Control)] {
        let d = s.when(update("n-3", json!({ "role": role }))).decided();
        assert_eq!(updated(&d).role, to);
        assert!(updated(&d).rafts.is_empty(), "{role}: {d:?}");
    }
    // Not a role change at all.
    let s = cluster_with(MemberState::Active);
    let d = s
        .when(update(
            "n-3",
            json!({ "labels": { "topology.rack": "r2" } }),
        ))
        .decided();
    assert!(updated(&d).rafts.is_empty(), "{d:?}");
}

#[test]
fn an_empty_update_appends_nothing() {
    for state in [
        MemberState::Joining,
        MemberState::Active,
        MemberState::Failed,
    ] {
        let s = cluster_with(state);
        let d = s.when(update("n-3", json!({}))).decided();
        assert_member_unchanged(&d, "n-3");
    }
}

#[test]
fn an_update_to_the_values_a_member_has_appends_nothing() {
    let s = cluster_with(MemberState::Active);
    let same = json!({
        "role": "control",
        "mgmtIp": "192.0.2.13",
        "bindings": {},
        "labels": { "topology.rack": "r1" },
    });
    assert_member_unchanged(&s.when(update("n-3", same)).decided(), "n-3");
    assert_member_unchanged(
        &s.when(update("n-3", json!({ "role": "control", "force": true })))
            .decided(),
        "n-3",
    );
    // Naming its own role is no demotion, even with only two voters.
    assert_member_unchanged(
        &founders()
            .when(update("n-2", json!({ "role": "hybrid" })))
            .decided(),
        "n-2",
    );
}

#[test]
fn an_update_changes_the_member_and_bumps_the_generation() {
    let mut s = cluster_with(MemberState::Active);
    let version = member(&s, "n-3").version;
    let before = s.clone();
    let d = s
        .when_by(
            ALICE,
            update(
                "n-3",
                json!({
                    "role": "hybrid",
                    "mgmtIp": "192.0.2.33",
                    "bindings": { "storage": "10.1.0.33" },
                    "labels": { "topology.rack": "r2", "zone": "a" },
                }),
            ),
        )
        .then_appended(
            &mut s,
            vec![DomainEvent::MemberUpdated(MemberUpdated {
                node_id: "n-3".into(),
                role: Role::Hybrid,
                mgmt_ip: "192.0.2.33".into(),
                bindings: map(&[("storage", "10.1.0.33")]),
                labels: map(&[(RACK_LABEL, "r2"), ("zone", "a")]),
                forced: false,
                rafts: vec![],
            })],
        );
    assert_generation(&before, &d, &s);
    assert_eq!(d.subject, Subject::Member("n-3".into()));
    assert!(d.events[0].is_topology_change());
    let m = member(&s, "n-3");
    assert_eq!(m.role, Role::Hybrid);
    assert_eq!(m.mgmt_ip, "192.0.2.33");
    assert_eq!(m.bindings, map(&[("storage", "10.1.0.33")]));
    assert_eq!(m.rack(), Some("r2"));
    assert_eq!(m.labels, map(&[(RACK_LABEL, "r2"), ("zone", "a")]));
    assert_eq!(m.state, MemberState::Active);
    assert_eq!(m.ordinal, 3, "an update keeps the ordinal");
    assert_eq!(m.version, version + 1);
    assert_eq!(s.stream_version("member/n-3"), version + 1);
    assert_eq!(m.last_position, s.position);
    assert_eq!(s.membership.generation, s.position);
    // The old address is free again.
    s.when(update("n-1", json!({ "mgmtIp": "192.0.2.13" })))
        .decided();
}

#[test]
fn an_update_replaces_whole_maps_and_keeps_what_it_leaves_out() {
    let mut s = founders().and(&[DomainEvent::MemberAdmitted(MemberAdmitted {
        bindings: map(&[("storage", "10.1.0.13"), ("overlay", "10.2.0.13")]),
        labels: map(&[(RACK_LABEL, "r1"), ("zone", "a")]),
        ..admitted_event("n-3", Role::Compute, 3, "192.0.2.13")
    })]);
    s.when(update(
        "n-3",
        json!({ "bindings": { "overlay": "10.2.0.99" } }),
    ))
    .then_appended(
        &mut s,
        [DomainEvent::MemberUpdated(MemberUpdated {
            node_id: "n-3".into(),
            role: Role::Compute,
            mgmt_ip: "192.0.2.13".into(),
            bindings: map(&[("overlay", "10.2.0.99")]),
            labels: map(&[(RACK_LABEL, "r1"), ("zone", "a")]),
            forced: false,
            rafts: vec![],
        })],
    );
    s.when(update(
        "n-3",
        json!({ "labels": { "topology.rack": "r2" } }),
    ))
    .then_appended(
        &mut s,
        [DomainEvent::MemberUpdated(MemberUpdated {
            bindings: map(&[("overlay", "10.2.0.99")]),
            labels: rack("r2"),
            ..update_of("n-3", Role::Compute, "192.0.2.13")
        })],
    );
    let m = member(&s, "n-3");
    assert_eq!(m.labels, rack("r2"), "the zone label is gone");
    assert_eq!(m.bindings, map(&[("overlay", "10.2.0.99")]));
    s.when(update("n-3", json!({ "bindings": {} })))
        .then_appended(
            &mut s,
            [DomainEvent::MemberUpdated(MemberUpdated {
                labels: rack("r2"),
                ..update_of("n-3", Role::Compute, "192.0.2.13")
            })],
        );
    let m = member(&s, "n-3");
    assert_eq!(m.bindings, StringMap::new());
    assert_eq!(m.labels, rack("r2"));
    assert_eq!(m.role, Role::Compute);
    assert_eq!(m.mgmt_ip, "192.0.2.13");
}

#[test]
fn joining_active_and_failed_members_can_be_updated() {
    for state in [
        MemberState::Joining,
        MemberState::Active,
        MemberState::Failed,
    ] {
        let mut s = cluster_with(state);
        let version = member(&s, "n-3").version;
        let before = s.clone();
        let d = s
            .when(update(
                "n-3",
                json!({ "labels": { "topology.rack": "r2" } }),
            ))
            .then_appended(
                &mut s,
                [DomainEvent::MemberUpdated(MemberUpdated {
                    labels: rack("r2"),
                    ..update_of("n-3", Role::Control, "192.0.2.13")
                })],
            );
        assert_generation(&before, &d, &s);
        let m = member(&s, "n-3");
        assert_eq!(m.state, state, "an update keeps the state");
        assert_eq!(m.rack(), Some("r2"), "{state:?}");
        assert_eq!(m.version, version + 1, "{state:?}");
        assert_eq!(s.membership.generation, s.position, "{state:?}");
    }
}

#[test]
fn a_voter_demoted_cleaned_and_promoted_again_owes_every_raft_to_its_decommission() {
    let s = cluster_with(MemberState::Active)
        .and_by(ALICE, &[n3_demoted(&Raft::ALL)])
        .and_by(CLEANER, &cleanup_of("n-3", &Raft::ALL, None));
    assert!(member(&s, "n-3").raft_cleanup_at.is_some());
    // Promoted again, it rejoins its rafts: the earlier cleanup is history.
    let s = s.and_by(
        ALICE,
        &[DomainEvent::MemberUpdated(update_of(
            "n-3",
            Role::Hybrid,
            "192.0.2.13",
        ))],
    );
    assert_eq!(member(&s, "n-3").raft_cleanup_at, None);
    let d = s
        .when(MemberCommand::Decommission {
            node_id: "n-3".into(),
            reason: Some("retired".into()),
            force: false,
        })
        .decided();
    assert!(
        matches!(
            d.events.as_slice(),
            [DomainEvent::MemberRemovalStarted(e)] if e.rafts == Raft::ALL.to_vec()
        ),
        "{:?}",
        d.events
    );
    // Demoted again, it is taken out of all three again.
    let d = s
        .when(update("n-3", json!({ "role": "storage" })))
        .decided();
    assert_eq!(updated(&d).rafts, Raft::ALL.to_vec());
}

#[test]
fn a_decommissioned_member_whose_address_was_reused_is_refused_for_its_state() {
    let mut s = cluster_with(MemberState::Decommissioned);
    let ip = member(&s, "n-3").mgmt_ip.clone();
    // Another member takes the decommissioned member's address.
    s.when_by(ALICE, update("n-2", json!({ "mgmtIp": ip })))
        .then_appended(
            &mut s,
            [DomainEvent::MemberUpdated(MemberUpdated {
                role: Role::Hybrid,
                ..update_of("n-2", Role::Hybrid, "192.0.2.13")
            })],
        );
    s.when(update(
        "n-3",
        json!({ "labels": { "topology.rack": "r9" } }),
    ))
    .then_refused(ErrorCode::MemberDecommissioned);
}

#[test]
fn if_match_holds_a_command_to_its_streams_version() {
    let s = crate::testing::given(&[crate::testing::admitted("n-1", Role::Compute, 1)]);
    let stream = crate::membership::member_stream("n-1");
    assert_eq!(s.expect_version(&stream, 1), Ok(()));
    let refused = s.expect_version(&stream, 0).unwrap_err();
    assert_eq!(refused.code, ErrorCode::PreconditionFailed);
    assert_eq!(refused.details.unwrap()["currentVersion"], 1);
}
