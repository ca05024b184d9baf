//! Admitting a member (SPEC §4): its input, the ordinal, the conflicts.

use super::support::membership::*;

// ---------------------------------------------------------------------------
// Admit
// ---------------------------------------------------------------------------

#[test]
fn admit_appends_member_admitted_with_the_next_ordinal() {
    let s = founders();
    let d = s
        .when(MemberCommand::Admit {
            node_id: Some("n-3".into()),
            role: Some("storage".into()),
            mgmt_ip: Some("192.0.2.13".into()),
            bindings: map(&[("storage", "10.1.0.13"), ("overlay", "10.2.0.13")]),
            labels: rack("r2"),
        })
        .decided();
    assert_eq!(d.subject, Subject::Member("n-3".into()));
    assert_eq!(
        d.events,
        vec![DomainEvent::MemberAdmitted(MemberAdmitted {
            node_id: "n-3".into(),
            role: Role::Storage,
            mgmt_ip: "192.0.2.13".into(),
            bindings: map(&[("storage", "10.1.0.13"), ("overlay", "10.2.0.13")]),
            labels: rack("r2"),
            ordinal: 3,
            join_request: None,
        })]
    );
}

#[test]
fn an_admitted_member_is_joining_and_bumps_the_generation() {
    let mut s = founders();
    s.when_by(ALICE, admit("n-3", "control", "192.0.2.13"))
        .then_appended(
            &mut s,
            [DomainEvent::MemberAdmitted(admitted_event(
                "n-3",
                Role::Control,
                3,
                "192.0.2.13",
            ))],
        );
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Joining);
    assert!(m.state.in_peer_lists());
    assert_eq!(m.ordinal, 3);
    assert_eq!(m.rack(), Some("r1"));
    assert_eq!(m.admitted_by, ALICE);
    assert_eq!(m.admitted_at, t0() + chrono::Duration::seconds(5));
    assert_eq!(m.applied_generation, 0);
    assert_eq!(m.version, 1);
    assert_eq!(s.membership.generation, 5);
    assert_eq!(s.membership.generation, s.position);
}

#[test]
fn the_founder_gets_ordinal_one() {
    let d = State::default()
        .when(admit("n-1", "hybrid", "192.0.2.11"))
        .decided();
    let [DomainEvent::MemberAdmitted(a)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(a.ordinal, 1);
}

#[test]
fn admit_normalizes_addresses() {
    let d = State::default()
        .when(MemberCommand::Admit {
            node_id: Some("n-1".into()),
            role: Some("hybrid".into()),
            mgmt_ip: Some("2001:DB8:0:0::0012".into()),
            bindings: map(&[("overlay", "2001:db8:0::1")]),
            labels: StringMap::new(),
        })
        .decided();
    let [DomainEvent::MemberAdmitted(a)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(a.mgmt_ip, "2001:db8::12");
    assert_eq!(a.bindings, map(&[("overlay", "2001:db8::1")]));
}

#[test]
fn admit_lists_every_missing_field_at_once() {
    let r = founders()
        .when(MemberCommand::Admit {
            node_id: None,
            role: None,
            mgmt_ip: None,
            bindings: StringMap::new(),
            labels: StringMap::new(),
        })
        .then_invalid(&["nodeId", "role", "mgmtIp"]);
    for f in &r.field_errors {
        assert_eq!(f.message, "is required");
    }
    assert_eq!(r.message, "The request has 3 invalid fields.");
}

#[test]
fn admit_lists_every_invalid_field_at_once() {
    let big = "v".repeat(254);
    let r = founders()
        .when(MemberCommand::Admit {
            node_id: Some("N_1".into()),
            role: Some("boss".into()),
            mgmt_ip: Some("300.1.1.1".into()),
            bindings: map(&[("storage", "not-an-ip"), ("backup", "10.0.0.1")]),
            labels: map(&[("", "x"), ("big", big.as_str())]),
        })
        .then_invalid(&[
            "nodeId",
            "role",
            "mgmtIp",
            "bindings.backup",
            "bindings.storage",
            "labels",
            "labels.big",
        ]);
    assert_eq!(
        message_of(&r, "role"),
        "must be control, compute, storage or hybrid"
    );
    assert_eq!(message_of(&r, "mgmtIp"), "must be an IPv4 or IPv6 address");
}

#[test]
fn admit_one_invalid_field_names_it_in_the_message() {
    let r = founders()
        .when(admit("n-3", "control", "nope"))
        .then_invalid(&["mgmtIp"]);
    assert_eq!(r.message, "mgmtIp must be an IPv4 or IPv6 address.");
}

#[test]
fn a_node_id_is_a_dns_label() {
    let s = founders();
    let long = "a".repeat(64);
    for bad in ["", "-n1", "n1-", "N-1", "n_1", "n.1", long.as_str()] {
        s.when(admit(bad, "control", "192.0.2.13"))
            .then_invalid(&["nodeId"]);
    }
    let max = "a".repeat(63);
    for good in ["n-3", "3", "a-b-c", max.as_str()] {
        s.when(admit(good, "control", "192.0.2.13")).decided();
    }
}

#[test]
fn admit_refuses_a_node_id_already_a_member() {
    for state in [
        MemberState::Joining,
        MemberState::Active,
        MemberState::Failed,
    ] {
        let s = cluster_with(state);
        let r = s
            .when(admit("n-3", "control", "192.0.2.99"))
            .then_refused(ErrorCode::MemberExists);
        assert_eq!(fields(&r), ["nodeId"]);
        assert_eq!(message_of(&r, "nodeId"), "is already a member");
    }
}

#[test]
fn admit_never_reuses_a_decommissioned_node_id() {
    let s = cluster_with(MemberState::Decommissioned);
    let r = s
        .when(admit("n-3", "control", "192.0.2.99"))
        .then_refused(ErrorCode::MemberExists);
    assert_eq!(fields(&r), ["nodeId"]);
    assert!(message_of(&r, "nodeId").contains("decommissioned"), "{r:?}");
}

#[test]
fn admit_refuses_an_address_taken_by_a_member_not_decommissioned() {
    for state in [
        MemberState::Joining,
        MemberState::Active,
        MemberState::Failed,
        MemberState::Removing,
    ] {
        let s = cluster_with(state);
        let r = s
            .when(admit("n-4", "control", "192.0.2.13"))
            .then_refused(ErrorCode::MemberExists);
        assert_eq!(fields(&r), ["mgmtIp"]);
        assert_eq!(message_of(&r, "mgmtIp"), "is taken by member n-3");
    }
}

#[test]
fn an_address_taken_is_compared_after_normalization() {
    let r = given(&[admitted_at("n-1", Role::Hybrid, 1, "2001:db8::12")])
        .when(admit("n-2", "control", "2001:DB8:0::0012"))
        .refusal();
    assert_eq!(fields(&r), ["mgmtIp"]);
}

#[test]
fn a_decommissioned_members_address_is_free_again() {
    let s = cluster_with(MemberState::Decommissioned);
    let d = s.when(admit("n-4", "control", "192.0.2.13")).decided();
    assert_eq!(d.events.len(), 1);
}

#[test]
fn a_storage_member_needs_a_rack_label() {
    let s = founders();
    let r = s
        .when(admit_with(
            "n-3",
            "storage",
            "192.0.2.13",
            map(&[("zone", "a")]),
        ))
        .then_refused(ErrorCode::MemberExists);
    assert_eq!(fields(&r), ["labels.topology.rack"]);
    assert_eq!(
        message_of(&r, "labels.topology.rack"),
        "is required for a storage member"
    );
    s.when(admit_with("n-3", "storage", "192.0.2.13", rack("r2")))
        .decided();
    s.when(admit_with("n-3", "compute", "192.0.2.13", StringMap::new()))
        .decided();
    s.when(admit_with("n-3", "control", "192.0.2.13", StringMap::new()))
        .decided();
}

#[test]
fn admit_lists_every_conflict_at_once() {
    let s = founders();
    let r = s
        .when(admit_with("n-1", "storage", "192.0.2.12", StringMap::new()))
        .then_refused(ErrorCode::MemberExists);
    assert_eq!(
        fields(&r),
        ["nodeId", "mgmtIp", "labels.topology.rack"],
        "{r:?}"
    );
    assert_eq!(message_of(&r, "mgmtIp"), "is taken by member n-2");
}

#[test]
fn the_ordinal_is_max_plus_one_and_never_reused() {
    // n-3 holds the highest ordinal and is decommissioned.
    let mut s = cluster_with(MemberState::Decommissioned);
    s.when(admit("n-4", "compute", "192.0.2.13")).then_appended(
        &mut s,
        [DomainEvent::MemberAdmitted(admitted_event(
            "n-4",
            Role::Compute,
            4,
            "192.0.2.13",
        ))],
    );
    s.when(admit("n-5", "compute", "192.0.2.15")).then_appended(
        &mut s,
        [DomainEvent::MemberAdmitted(admitted_event(
            "n-5",
            Role::Compute,
            5,
            "192.0.2.15",
        ))],
    );
    assert_eq!(member(&s, "n-5").ordinal, 5);
    assert_eq!(s.membership.max_ordinal, 5);

    // A gap in the ordinals of the log: still max + 1.
    let s = given(&[
        admitted("n-1", Role::Hybrid, 1),
        admitted("n-7", Role::Control, 7),
    ]);
    let d = s.when(admit("n-8", "control", "192.0.2.30")).decided();
    let [DomainEvent::MemberAdmitted(a)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(a.ordinal, 8);
}

#[test]
fn a_failed_members_ordinal_is_not_reused() {
    let mut s = cluster_with(MemberState::Failed);
    s.when(admit("n-4", "compute", "192.0.2.14")).then_appended(
        &mut s,
        [DomainEvent::MemberAdmitted(admitted_event(
            "n-4",
            Role::Compute,
            4,
            "192.0.2.14",
        ))],
    );
    assert_eq!(member(&s, "n-4").ordinal, 4);
    assert_eq!(member(&s, "n-3").ordinal, 3);
}
