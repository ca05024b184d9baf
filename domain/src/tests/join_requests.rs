//! Join requests: a node asks, an operator approves or rejects.

use super::support::membership::*;

// ---------------------------------------------------------------------------
// Join requests
// ---------------------------------------------------------------------------

#[test]
fn a_node_requests_to_join() {
    let mut s = founders();
    let d = s
        .when_by("node/n-3", request("jr-1", "n-3", "192.0.2.13"))
        .then_appended(
            &mut s,
            vec![DomainEvent::JoinRequested(JoinRequested {
                request_id: "jr-1".into(),
                node_id: "n-3".into(),
                mgmt_ip: "192.0.2.13".into(),
                labels: rack("r2"),
                facts: r#"{"cpus":8}"#.into(),
            })],
        );
    assert_eq!(d.subject, Subject::JoinRequest("jr-1".into()));
    let r = &s.membership.join_requests["jr-1"];
    assert_eq!(r.status, JoinRequestStatus::Pending);
    assert_eq!(r.requested_by, "node/n-3");
    assert_eq!(r.decided_by, None);
    assert!(!s.membership.members.contains_key("n-3"));
}

#[test]
fn a_join_request_lists_every_bad_field() {
    founders()
        .when(MemberCommand::RequestJoin {
            request_id: "jr-1".into(),
            node_id: None,
            mgmt_ip: None,
            labels: StringMap::new(),
            facts: "{}".into(),
        })
        .then_invalid(&["nodeId", "mgmtIp"]);
    founders()
        .when(MemberCommand::RequestJoin {
            request_id: "jr-1".into(),
            node_id: Some("Bad Id".into()),
            mgmt_ip: Some("999.0.0.1".into()),
            labels: map(&[("", "x")]),
            facts: "{}".into(),
        })
        .then_invalid(&["nodeId", "mgmtIp", "labels"]);
}

#[test]
fn a_duplicate_pending_request_answers_the_existing_one() {
    let s = founders().and_by("node/n-3", &[requested("jr-1", "n-3", "192.0.2.13")]);
    let d = s.when(request("jr-2", "n-3", "192.0.2.13")).then_nothing();
    assert_eq!(d.subject, Subject::JoinRequest("jr-1".into()));
}

#[test]
fn a_member_cannot_request_to_join() {
    for state in [MemberState::Active, MemberState::Decommissioned] {
        let s = cluster_with(state);
        let r = s
            .when(request("jr-1", "n-3", "192.0.2.99"))
            .then_refused(ErrorCode::MemberExists);
        assert_eq!(fields(&r), ["nodeId"]);
    }
}

#[test]
fn approving_a_request_admits_the_node() {
    let mut s = founders().and_by("node/n-3", &[requested("jr-1", "n-3", "192.0.2.13")]);
    let d = s.when_by(ALICE, approve("jr-1", "storage")).then_appended(
        &mut s,
        vec![
            DomainEvent::JoinRequestApproved {
                request_id: "jr-1".into(),
                node_id: "n-3".into(),
            },
            DomainEvent::MemberAdmitted(MemberAdmitted {
                node_id: "n-3".into(),
                role: Role::Storage,
                mgmt_ip: "192.0.2.13".into(),
                bindings: StringMap::new(),
                labels: rack("r2"),
                ordinal: 3,
                join_request: Some("jr-1".into()),
            }),
        ],
    );
    assert_eq!(d.subject, Subject::JoinRequest("jr-1".into()));
    let r = &s.membership.join_requests["jr-1"];
    assert_eq!(r.status, JoinRequestStatus::Approved);
    assert_eq!(r.decided_by.as_deref(), Some(ALICE));
    assert!(r.decided_at.is_some());
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Joining);
    assert_eq!(m.join_request.as_deref(), Some("jr-1"));
    assert_eq!(m.admitted_by, ALICE);
    assert_eq!(s.membership.generation, s.position);
}

#[test]
fn an_approval_may_override_address_bindings_and_labels() {
    let s = founders().and_by("node/n-3", &[requested("jr-1", "n-3", "192.0.2.13")]);
    let d = s
        .when(MemberCommand::ApproveJoin {
            request_id: "jr-1".into(),
            role: Some("hybrid".into()),
            mgmt_ip: Some("192.0.2.33".into()),
            bindings: Some(map(&[("storage", "10.1.0.33")])),
            labels: Some(rack("r3")),
        })
        .decided();
    let DomainEvent::MemberAdmitted(a) = &d.events[1] else {
        panic!("{:?}", d.events)
    };
    assert_eq!(a.mgmt_ip, "192.0.2.33");
    assert_eq!(a.bindings, map(&[("storage", "10.1.0.33")]));
    assert_eq!(a.labels, rack("r3"));
    assert_eq!(a.role, Role::Hybrid);
}

#[test]
fn an_approval_with_bad_fields_is_invalid_input() {
    let s = founders().and_by("node/n-3", &[requested("jr-1", "n-3", "192.0.2.13")]);
    s.when(MemberCommand::ApproveJoin {
        request_id: "jr-1".into(),
        role: None,
        mgmt_ip: Some("nope".into()),
        bindings: Some(map(&[("storage", "x")])),
        labels: None,
    })
    .then_invalid(&["role", "mgmtIp", "bindings.storage"]);
    assert_eq!(
        s.membership.join_requests["jr-1"].status,
        JoinRequestStatus::Pending
    );
}

#[test]
fn the_cluster_may_refuse_an_approval() {
    // n-3 is admitted directly while its request is pending.
    let s = founders()
        .and_by("node/n-3", &[requested("jr-1", "n-3", "192.0.2.12")])
        .and(&[DomainEvent::MemberAdmitted(admitted_event(
            "n-3",
            Role::Control,
            3,
            "192.0.2.13",
        ))]);
    let r = s
        .when(MemberCommand::ApproveJoin {
            request_id: "jr-1".into(),
            role: Some("storage".into()),
            mgmt_ip: None,
            bindings: None,
            labels: Some(map(&[("zone", "a")])),
        })
        .then_refused(ErrorCode::JoinApprovalRefused);
    assert_eq!(
        fields(&r),
        ["nodeId", "mgmtIp", "labels.topology.rack"],
        "{r:?}"
    );
    assert_eq!(message_of(&r, "nodeId"), "is already a member");
    assert_eq!(message_of(&r, "mgmtIp"), "is taken by member n-2");
}

#[test]
fn an_approval_never_reuses_a_decommissioned_node_id() {
    let s = founders()
        .and_by("node/n-3", &[requested("jr-1", "n-3", "192.0.2.33")])
        .and(&[
            DomainEvent::MemberAdmitted(admitted_event("n-3", Role::Compute, 3, "192.0.2.13")),
            removal_started("n-3", "gone", false, &[]),
            decommissioned("n-3", "gone", ADMIN),
        ]);
    assert_eq!(member(&s, "n-3").state, MemberState::Decommissioned);
    let r = s
        .when(approve("jr-1", "compute"))
        .then_refused(ErrorCode::JoinApprovalRefused);
    assert_eq!(fields(&r), ["nodeId"]);
    assert!(message_of(&r, "nodeId").contains("decommissioned"));
}

#[test]
fn rejecting_a_request_needs_a_reason() {
    let mut s = founders().and_by("node/n-3", &[requested("jr-1", "n-3", "192.0.2.13")]);
    assert_invalid(&s.when(reject("jr-1", None)).refusal(), &["reason"]);
    assert_invalid(&s.when(reject("jr-1", Some(" "))).refusal(), &["reason"]);
    let d = s
        .when_by(ALICE, reject("jr-1", Some("unknown hardware")))
        .then_appended(
            &mut s,
            vec![DomainEvent::JoinRequestRejected {
                request_id: "jr-1".into(),
                reason: "unknown hardware".into(),
            }],
        );
    assert_eq!(d.subject, Subject::JoinRequest("jr-1".into()));
    let r = &s.membership.join_requests["jr-1"];
    assert_eq!(r.status, JoinRequestStatus::Rejected);
    assert_eq!(r.reason.as_deref(), Some("unknown hardware"));
    assert_eq!(r.decided_by.as_deref(), Some(ALICE));
    assert!(!s.membership.members.contains_key("n-3"));
    // A rejected node may ask again.
    let d = s
        .when(request("jr-2", "n-3", "192.0.2.13"))
        .then([requested("jr-2", "n-3", "192.0.2.13")]);
    assert_eq!(d.subject, Subject::JoinRequest("jr-2".into()));
}

#[test]
fn a_decided_request_is_closed() {
    let asked = founders().and_by("node/n-3", &[requested("jr-1", "n-3", "192.0.2.13")]);
    let approved = asked.clone().and(&[
        DomainEvent::JoinRequestApproved {
            request_id: "jr-1".into(),
            node_id: "n-3".into(),
        },
        DomainEvent::MemberAdmitted(MemberAdmitted {
            labels: rack("r2"),
            join_request: Some("jr-1".into()),
            ..admitted_event("n-3", Role::Compute, 3, "192.0.2.13")
        }),
    ]);
    let rejected = asked.and(&[DomainEvent::JoinRequestRejected {
        request_id: "jr-1".into(),
        reason: "no".into(),
    }]);
    for (s, status) in [(approved, "approved"), (rejected, "rejected")] {
        for c in [approve("jr-1", "compute"), reject("jr-1", Some("late"))] {
            let r = s.when(c).then_refused(ErrorCode::JoinRequestClosed);
            assert_eq!(r.details, Some(json!({ "status": status })));
        }
    }
}

#[test]
fn an_unknown_request_is_not_found() {
    let s = founders();
    s.when(approve("jr-9", "compute"))
        .then_refused(ErrorCode::NotFound);
    s.when(reject("jr-9", Some("no")))
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn a_node_requests_a_join_only_for_itself() {
    let s = founders();
    let ask = |node: &str| MemberCommand::RequestJoin {
        request_id: "jr-0000000009".into(),
        node_id: Some(node.into()),
        mgmt_ip: Some("192.0.2.99".into()),
        labels: Default::default(),
        facts: "{}".into(),
    };
    let r = s
        .when_by("node/n-x", ask("n-y"))
        .then_refused(ErrorCode::AccessDenied);
    assert_eq!(
        r.details.as_ref().unwrap()["resource"],
        "stratum:member/n-y"
    );
    s.when_by("node/n-x", ask("n-x")).decided();
    // An operator files one for any node.
    s.when_by("user/alice", ask("n-y")).decided();
}
