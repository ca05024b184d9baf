//! Given/when/then tests of membership (SPEC §4 and seed 000), and a
//! property test that no sequence of commands breaks an invariant.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::error::{ErrorCode, Refusal};
use crate::event::{
    DomainEvent, JoinRequested, MemberAdmitted, MemberJoinFailed, MemberRemovalStarted,
    MemberUpdated, StringMap,
};
use crate::state::{Command, Decision, State, Subject};
use crate::testing::{
    self, admitted, apply, assert_invalid, fields, given, given_by, message_of, one_of_each, t0,
    when, when_by,
};

const ADMIN: &str = "user/admin";
const ALICE: &str = "user/alice";
const CLEANER: &str = "system/raft-cleanup";
/// The adapter the default raft cleanup names: it calls no raft.
const ADAPTER: &str = "record-only";

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

fn cmd(c: MemberCommand) -> Command {
    Command::Member(c)
}

fn rack(r: &str) -> StringMap {
    [(RACK_LABEL.to_owned(), r.to_owned())].into()
}

fn map(pairs: &[(&str, &str)]) -> StringMap {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn admit_with(node: &str, role: &str, ip: &str, labels: StringMap) -> MemberCommand {
    MemberCommand::Admit {
        node_id: Some(node.into()),
        role: Some(role.into()),
        mgmt_ip: Some(ip.into()),
        bindings: StringMap::new(),
        labels,
    }
}

fn admit(node: &str, role: &str, ip: &str) -> MemberCommand {
    admit_with(node, role, ip, rack("r1"))
}

fn progress(node: &str, step: &str) -> MemberCommand {
    MemberCommand::ReportJoinProgress {
        node_id: node.into(),
        step: Some(step.into()),
    }
}

fn complete(node: &str) -> MemberCommand {
    MemberCommand::CompleteJoin {
        node_id: node.into(),
    }
}

fn fail(node: &str, step: &str, error: &str) -> MemberCommand {
    MemberCommand::ReportJoinFailure {
        node_id: node.into(),
        step: Some(step.into()),
        error: Some(error.into()),
    }
}

fn retry(node: &str) -> MemberCommand {
    MemberCommand::RetryJoin {
        node_id: node.into(),
    }
}

fn decommission(node: &str, reason: &str) -> MemberCommand {
    MemberCommand::Decommission {
        node_id: node.into(),
        reason: Some(reason.into()),
        force: false,
    }
}

fn force_decommission(node: &str, reason: &str) -> MemberCommand {
    MemberCommand::Decommission {
        node_id: node.into(),
        reason: Some(reason.into()),
        force: true,
    }
}

fn applied_gen(node: &str, generation: u64) -> MemberCommand {
    MemberCommand::ReportAppliedGeneration {
        node_id: node.into(),
        generation: Some(generation),
    }
}

fn removal(node: &str, raft: Raft) -> MemberCommand {
    MemberCommand::RecordRaftRemoval {
        node_id: node.into(),
        raft,
        already_gone: false,
        adapter: ADAPTER.into(),
        leader_moved: false,
    }
}

fn request(id: &str, node: &str, ip: &str) -> MemberCommand {
    MemberCommand::RequestJoin {
        request_id: id.into(),
        node_id: Some(node.into()),
        mgmt_ip: Some(ip.into()),
        labels: rack("r2"),
        facts: r#"{"cpus":8}"#.into(),
    }
}

fn approve(id: &str, role: &str) -> MemberCommand {
    MemberCommand::ApproveJoin {
        request_id: id.into(),
        role: Some(role.into()),
        mgmt_ip: None,
        bindings: None,
        labels: None,
    }
}

fn reject(id: &str, reason: Option<&str>) -> MemberCommand {
    MemberCommand::RejectJoin {
        request_id: id.into(),
        reason: reason.map(Into::into),
    }
}

// ---------------------------------------------------------------------------
// Harness helpers
// ---------------------------------------------------------------------------

/// Decides `c` by `principal` and appends what it decided, as the command
/// path does.
fn run(state: &mut State, principal: &str, c: MemberCommand) -> Decision {
    let d = when_by(state, principal, cmd(c.clone()))
        .unwrap_or_else(|r| panic!("{c:?} was refused: {r:?}"));
    apply(state, principal, &d.events);
    d
}

fn decide_ok(state: &State, c: MemberCommand) -> Decision {
    when(state, cmd(c.clone())).unwrap_or_else(|r| panic!("{c:?} was refused: {r:?}"))
}

fn refused(state: &State, c: MemberCommand) -> Refusal {
    testing::refused(state, cmd(c))
}

fn assert_unchanged(d: &Decision, node: &str) {
    assert!(
        d.events.is_empty(),
        "expected no events, got {:?}",
        d.events
    );
    assert_eq!(d.subject, Subject::Member(node.into()));
}

fn member<'a>(s: &'a State, node: &str) -> &'a Member {
    s.membership
        .members
        .get(node)
        .unwrap_or_else(|| panic!("{node} is not a member"))
}

fn completed(node: &str) -> DomainEvent {
    DomainEvent::MemberJoinCompleted {
        node_id: node.into(),
    }
}

fn admitted_at(node: &str, role: Role, ordinal: u32, ip: &str) -> DomainEvent {
    DomainEvent::MemberAdmitted(MemberAdmitted {
        node_id: node.into(),
        role,
        mgmt_ip: ip.into(),
        bindings: StringMap::new(),
        labels: rack("r1"),
        ordinal,
        join_request: None,
    })
}

/// Two active hybrid voters: n-1 (the founder, 192.0.2.11) and n-2
/// (192.0.2.12).
fn founders() -> State {
    given_by(
        INSTALLER,
        &[
            admitted("n-1", Role::Hybrid, 1),
            completed("n-1"),
            admitted("n-2", Role::Hybrid, 2),
            completed("n-2"),
        ],
    )
}

/// The founders, and n-3 (192.0.2.13, `role`) driven into `target` by
/// commands:
/// - joining: just admitted;
/// - active: join completed;
/// - failed: reached patroni, failed at join/raft-openbao, cleanup pending;
/// - removing: an active member decommissioned by alice, cleanup pending
///   (for a voter; a member with no rafts goes straight on);
/// - decommissioned: removing, and every raft removal recorded.
fn cluster_with_role(target: MemberState, role: Role) -> State {
    let mut s = founders();
    apply(&mut s, ADMIN, &[admitted("n-3", role, 3)]);
    match target {
        MemberState::Joining => {}
        MemberState::Active => {
            run(&mut s, ADMIN, complete("n-3"));
        }
        MemberState::Failed => {
            run(&mut s, ADMIN, progress("n-3", "join/raft-patroni"));
            run(
                &mut s,
                ADMIN,
                fail("n-3", "join/raft-openbao", "connection refused"),
            );
        }
        MemberState::Removing | MemberState::Decommissioned => {
            run(&mut s, ADMIN, complete("n-3"));
            run(&mut s, ALICE, decommission("n-3", "disk failed"));
            if target == MemberState::Decommissioned {
                for raft in member(&s, "n-3").pending_cleanup() {
                    run(&mut s, CLEANER, removal("n-3", raft));
                }
            }
        }
    }
    assert_eq!(member(&s, "n-3").state, target, "setup of {target:?}");
    s
}

fn cluster_with(target: MemberState) -> State {
    cluster_with_role(target, Role::Control)
}

/// The founders and a failed n-3 whose raft cleanup is done.
fn failed_and_cleaned() -> State {
    let mut s = cluster_with(MemberState::Failed);
    run(&mut s, CLEANER, removal("n-3", Raft::Patroni));
    run(&mut s, CLEANER, removal("n-3", Raft::Openbao));
    assert!(member(&s, "n-3").raft_cleanup_at.is_some());
    s
}

const NOT_JOINING: [MemberState; 4] = [
    MemberState::Active,
    MemberState::Failed,
    MemberState::Removing,
    MemberState::Decommissioned,
];

// ---------------------------------------------------------------------------
// Admit
// ---------------------------------------------------------------------------

#[test]
fn admit_appends_member_admitted_with_the_next_ordinal() {
    let s = founders();
    let d = decide_ok(
        &s,
        MemberCommand::Admit {
            node_id: Some("n-3".into()),
            role: Some("storage".into()),
            mgmt_ip: Some("192.0.2.13".into()),
            bindings: map(&[("storage", "10.1.0.13"), ("overlay", "10.2.0.13")]),
            labels: rack("r2"),
        },
    );
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
    run(&mut s, ALICE, admit("n-3", "control", "192.0.2.13"));
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
    let d = decide_ok(&State::default(), admit("n-1", "hybrid", "192.0.2.11"));
    let [DomainEvent::MemberAdmitted(a)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(a.ordinal, 1);
}

#[test]
fn admit_normalizes_addresses() {
    let d = decide_ok(
        &State::default(),
        MemberCommand::Admit {
            node_id: Some("n-1".into()),
            role: Some("hybrid".into()),
            mgmt_ip: Some("2001:DB8:0:0::0012".into()),
            bindings: map(&[("overlay", "2001:db8:0::1")]),
            labels: StringMap::new(),
        },
    );
    let [DomainEvent::MemberAdmitted(a)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(a.mgmt_ip, "2001:db8::12");
    assert_eq!(a.bindings, map(&[("overlay", "2001:db8::1")]));
}

#[test]
fn admit_lists_every_missing_field_at_once() {
    let r = refused(
        &founders(),
        MemberCommand::Admit {
            node_id: None,
            role: None,
            mgmt_ip: None,
            bindings: StringMap::new(),
            labels: StringMap::new(),
        },
    );
    assert_invalid(&r, &["nodeId", "role", "mgmtIp"]);
    for f in &r.field_errors {
        assert_eq!(f.message, "is required");
    }
    assert_eq!(r.message, "The request has 3 invalid fields.");
}

#[test]
fn admit_lists_every_invalid_field_at_once() {
    let big = "v".repeat(254);
    let r = refused(
        &founders(),
        MemberCommand::Admit {
            node_id: Some("N_1".into()),
            role: Some("boss".into()),
            mgmt_ip: Some("300.1.1.1".into()),
            bindings: map(&[("storage", "not-an-ip"), ("backup", "10.0.0.1")]),
            labels: map(&[("", "x"), ("big", big.as_str())]),
        },
    );
    assert_invalid(
        &r,
        &[
            "nodeId",
            "role",
            "mgmtIp",
            "bindings.backup",
            "bindings.storage",
            "labels",
            "labels.big",
        ],
    );
    assert_eq!(
        message_of(&r, "role"),
        "must be control, compute, storage or hybrid"
    );
    assert_eq!(message_of(&r, "mgmtIp"), "must be an IPv4 or IPv6 address");
}

#[test]
fn admit_one_invalid_field_names_it_in_the_message() {
    let r = refused(&founders(), admit("n-3", "control", "nope"));
    assert_invalid(&r, &["mgmtIp"]);
    assert_eq!(r.message, "mgmtIp must be an IPv4 or IPv6 address.");
}

#[test]
fn a_node_id_is_a_dns_label() {
    let s = founders();
    let long = "a".repeat(64);
    for bad in ["", "-n1", "n1-", "N-1", "n_1", "n.1", long.as_str()] {
        let r = refused(&s, admit(bad, "control", "192.0.2.13"));
        assert_invalid(&r, &["nodeId"]);
    }
    let max = "a".repeat(63);
    for good in ["n-3", "3", "a-b-c", max.as_str()] {
        decide_ok(&s, admit(good, "control", "192.0.2.13"));
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
        let r = refused(&s, admit("n-3", "control", "192.0.2.99"));
        assert_eq!(r.code, ErrorCode::MemberExists);
        assert_eq!(fields(&r), ["nodeId"]);
        assert_eq!(message_of(&r, "nodeId"), "is already a member");
    }
}

#[test]
fn admit_never_reuses_a_decommissioned_node_id() {
    let s = cluster_with(MemberState::Decommissioned);
    let r = refused(&s, admit("n-3", "control", "192.0.2.99"));
    assert_eq!(r.code, ErrorCode::MemberExists);
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
        let r = refused(&s, admit("n-4", "control", "192.0.2.13"));
        assert_eq!(r.code, ErrorCode::MemberExists, "{state:?}");
        assert_eq!(fields(&r), ["mgmtIp"]);
        assert_eq!(message_of(&r, "mgmtIp"), "is taken by member n-3");
    }
}

#[test]
fn an_address_taken_is_compared_after_normalization() {
    let s = given(&[admitted_at("n-1", Role::Hybrid, 1, "2001:db8::12")]);
    let r = refused(&s, admit("n-2", "control", "2001:DB8:0::0012"));
    assert_eq!(fields(&r), ["mgmtIp"]);
}

#[test]
fn a_decommissioned_members_address_is_free_again() {
    let s = cluster_with(MemberState::Decommissioned);
    let d = decide_ok(&s, admit("n-4", "control", "192.0.2.13"));
    assert_eq!(d.events.len(), 1);
}

#[test]
fn a_storage_member_needs_a_rack_label() {
    let s = founders();
    let r = refused(
        &s,
        admit_with("n-3", "storage", "192.0.2.13", map(&[("zone", "a")])),
    );
    assert_eq!(r.code, ErrorCode::MemberExists);
    assert_eq!(fields(&r), ["labels.topology.rack"]);
    assert_eq!(
        message_of(&r, "labels.topology.rack"),
        "is required for a storage member"
    );
    decide_ok(&s, admit_with("n-3", "storage", "192.0.2.13", rack("r2")));
    decide_ok(
        &s,
        admit_with("n-3", "compute", "192.0.2.13", StringMap::new()),
    );
    decide_ok(
        &s,
        admit_with("n-3", "control", "192.0.2.13", StringMap::new()),
    );
}

#[test]
fn admit_lists_every_conflict_at_once() {
    let s = founders();
    let r = refused(
        &s,
        admit_with("n-1", "storage", "192.0.2.12", StringMap::new()),
    );
    assert_eq!(r.code, ErrorCode::MemberExists);
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
    let d = run(&mut s, ADMIN, admit("n-4", "compute", "192.0.2.13"));
    let [DomainEvent::MemberAdmitted(a)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(a.ordinal, 4);
    run(&mut s, ADMIN, admit("n-5", "compute", "192.0.2.15"));
    assert_eq!(member(&s, "n-5").ordinal, 5);
    assert_eq!(s.membership.max_ordinal, 5);

    // A gap in the ordinals of the log: still max + 1.
    let s = given(&[
        admitted("n-1", Role::Hybrid, 1),
        admitted("n-7", Role::Control, 7),
    ]);
    let d = decide_ok(&s, admit("n-8", "control", "192.0.2.30"));
    let [DomainEvent::MemberAdmitted(a)] = d.events.as_slice() else {
        panic!("{:?}", d.events)
    };
    assert_eq!(a.ordinal, 8);
}

#[test]
fn a_failed_members_ordinal_is_not_reused() {
    let mut s = cluster_with(MemberState::Failed);
    run(&mut s, ADMIN, admit("n-4", "compute", "192.0.2.14"));
    assert_eq!(member(&s, "n-4").ordinal, 4);
    assert_eq!(member(&s, "n-3").ordinal, 3);
}

// ---------------------------------------------------------------------------
// Join progress
// ---------------------------------------------------------------------------

#[test]
fn progress_of_a_raft_step_adds_the_raft_reached() {
    let mut s = cluster_with(MemberState::Joining);
    let generation = s.membership.generation;
    let d = run(&mut s, ADMIN, progress("n-3", "join/raft-patroni"));
    assert_eq!(
        d.events,
        vec![DomainEvent::JoinProgressReported {
            node_id: "n-3".into(),
            step: "join/raft-patroni".into(),
        }]
    );
    run(&mut s, ADMIN, progress("n-3", "join/raft-openbao"));
    let m = member(&s, "n-3");
    assert_eq!(m.join_step.as_deref(), Some("join/raft-openbao"));
    assert_eq!(
        m.rafts_reached,
        BTreeSet::from([Raft::Patroni, Raft::Openbao])
    );
    assert_eq!(m.state, MemberState::Joining);
    assert_eq!(
        s.membership.generation, generation,
        "progress is no topology"
    );
}

#[test]
fn progress_of_another_step_reaches_no_raft() {
    let mut s = cluster_with(MemberState::Joining);
    run(&mut s, ADMIN, progress("n-3", "join/install-packages"));
    let m = member(&s, "n-3");
    assert_eq!(m.join_step.as_deref(), Some("join/install-packages"));
    assert!(m.rafts_reached.is_empty());
}

#[test]
fn the_same_step_twice_appends_nothing() {
    let mut s = cluster_with(MemberState::Joining);
    run(&mut s, ADMIN, progress("n-3", "join/raft-ovn"));
    let d = decide_ok(&s, progress("n-3", "join/raft-ovn"));
    assert_unchanged(&d, "n-3");
}

#[test]
fn progress_is_refused_unless_joining() {
    for state in NOT_JOINING {
        let s = cluster_with(state);
        let r = refused(&s, progress("n-3", "join/raft-patroni"));
        assert_eq!(r.code, ErrorCode::MemberNotJoining, "{state:?}");
        assert_eq!(r.details, Some(json!({ "state": state.as_str() })));
    }
}

#[test]
fn progress_needs_a_join_step_name() {
    let s = cluster_with(MemberState::Joining);
    let r = refused(
        &s,
        MemberCommand::ReportJoinProgress {
            node_id: "n-3".into(),
            step: None,
        },
    );
    assert_invalid(&r, &["step"]);
    assert_eq!(message_of(&r, "step"), "is required");
    let long = format!("join/{}", "a".repeat(124));
    for bad in [
        "",
        "raft-openbao",
        "join/",
        "join/Raft",
        "join/-raft",
        "join/raft openbao",
        "upgrade/raft-openbao",
        long.as_str(),
    ] {
        let r = refused(&s, progress("n-3", bad));
        assert_invalid(&r, &["step"]);
    }
    decide_ok(&s, progress("n-3", "join/0-first"));
}

#[test]
fn progress_of_an_unknown_node_is_not_found() {
    let r = refused(&founders(), progress("n-9", "join/raft-patroni"));
    assert_eq!(r.code, ErrorCode::NotFound);
}

// ---------------------------------------------------------------------------
// Join complete
// ---------------------------------------------------------------------------

#[test]
fn complete_moves_joining_to_active() {
    let mut s = cluster_with(MemberState::Joining);
    run(&mut s, ADMIN, progress("n-3", "join/raft-ovn"));
    let d = run(&mut s, ADMIN, complete("n-3"));
    assert_eq!(d.events, vec![completed("n-3")]);
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Active);
    assert_eq!(m.join_step, None);
    assert_eq!(s.membership.generation, s.position);
    assert_eq!(s.membership.active_voters(), 3);
}

#[test]
fn complete_of_an_active_member_answers_it_unchanged() {
    let s = cluster_with(MemberState::Active);
    assert_unchanged(&decide_ok(&s, complete("n-3")), "n-3");
}

#[test]
fn complete_is_refused_for_failed_removing_and_decommissioned() {
    for state in [
        MemberState::Failed,
        MemberState::Removing,
        MemberState::Decommissioned,
    ] {
        let s = cluster_with(state);
        let r = refused(&s, complete("n-3"));
        assert_eq!(r.code, ErrorCode::MemberNotJoining, "{state:?}");
    }
}

#[test]
fn complete_of_an_unknown_node_is_not_found() {
    assert_eq!(
        refused(&founders(), complete("n-9")).code,
        ErrorCode::NotFound
    );
}

// ---------------------------------------------------------------------------
// Join failed (seed 000)
// ---------------------------------------------------------------------------

#[test]
fn join_failed_moves_a_joining_member_to_failed() {
    let mut s = cluster_with(MemberState::Joining);
    run(&mut s, ADMIN, progress("n-3", "join/raft-patroni"));
    let d = run(
        &mut s,
        "node/n-3",
        fail("n-3", "join/raft-openbao", "connection refused"),
    );
    assert_eq!(d.subject, Subject::Member("n-3".into()));
    assert_eq!(
        d.events,
        vec![DomainEvent::MemberJoinFailed(MemberJoinFailed {
            node_id: "n-3".into(),
            step: "join/raft-openbao".into(),
            error: "connection refused".into(),
            rafts: vec![Raft::Patroni, Raft::Openbao],
        })]
    );
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Failed);
    assert!(!m.state.in_peer_lists());
    assert_eq!(m.failed_step.as_deref(), Some("join/raft-openbao"));
    assert_eq!(m.failed_error.as_deref(), Some("connection refused"));
    assert_eq!(m.raft_cleanup_at, None);
    assert_eq!(m.pending_cleanup(), vec![Raft::Patroni, Raft::Openbao]);
    assert_eq!(
        s.membership.generation, s.position,
        "the generation is bumped"
    );
}

#[test]
fn join_failed_of_a_member_not_joining_appends_nothing() {
    for state in NOT_JOINING {
        let s = cluster_with(state);
        let d = when(&s, cmd(fail("n-3", "join/raft-ovn", "timeout")))
            .unwrap_or_else(|r| panic!("{state:?} was refused: {r:?}"));
        assert_unchanged(&d, "n-3");
        let mut after = s.clone();
        apply(&mut after, ADMIN, &d.events);
        assert_eq!(after, s, "{state:?}: the record is unchanged");
    }
}

#[test]
fn join_failed_of_a_failed_member_keeps_its_first_failure() {
    let s = cluster_with(MemberState::Failed);
    let d = decide_ok(&s, fail("n-3", "join/raft-ovn", "another error"));
    assert_unchanged(&d, "n-3");
    let m = member(&s, "n-3");
    assert_eq!(m.failed_step.as_deref(), Some("join/raft-openbao"));
    assert_eq!(m.failed_error.as_deref(), Some("connection refused"));
}

#[test]
fn join_failed_names_both_step_and_error_when_both_are_missing() {
    let s = cluster_with(MemberState::Joining);
    let r = refused(
        &s,
        MemberCommand::ReportJoinFailure {
            node_id: "n-3".into(),
            step: None,
            error: None,
        },
    );
    assert_invalid(&r, &["step", "error"]);
    assert_eq!(message_of(&r, "step"), "is required");
    assert_eq!(message_of(&r, "error"), "is required");
}

#[test]
fn join_failed_names_both_fields_when_both_are_bad() {
    let s = cluster_with(MemberState::Joining);
    let r = refused(&s, fail("n-3", "raft-openbao", "line one\nline two"));
    assert_invalid(&r, &["step", "error"]);
}

#[test]
fn join_failed_needs_one_non_empty_error_line_of_at_most_2048_bytes() {
    let s = cluster_with(MemberState::Joining);
    let cases = [
        (String::new(), "must not be empty"),
        ("   ".to_owned(), "must not be empty"),
        ("first\nsecond".to_owned(), "must be one line"),
        ("first\rsecond".to_owned(), "must be one line"),
        ("trailing newline\n".to_owned(), "must be one line"),
        ("x".repeat(2049), "must be at most 2048 bytes"),
        // Bytes, not characters: 1025 two-byte characters are 2050 bytes.
        ("é".repeat(1025), "must be at most 2048 bytes"),
    ];
    for (error, message) in cases {
        let r = refused(&s, fail("n-3", "join/raft-openbao", &error));
        assert_invalid(&r, &["error"]);
        assert_eq!(message_of(&r, "error"), message, "{error:?}");
    }
    for error in ["x".repeat(2048), "é".repeat(1024), "a".into()] {
        let d = decide_ok(&s, fail("n-3", "join/raft-openbao", &error));
        assert!(!d.events.is_empty());
    }
}

#[test]
fn join_failed_needs_a_join_step_name() {
    let s = cluster_with(MemberState::Joining);
    for bad in ["", "openbao", "join/", "join/Raft-Openbao"] {
        let r = refused(&s, fail("n-3", bad, "timeout"));
        assert_invalid(&r, &["step"]);
    }
}

#[test]
fn join_failed_of_an_unknown_node_is_not_found() {
    let r = refused(&founders(), fail("n-9", "join/raft-openbao", "timeout"));
    assert_eq!(r.code, ErrorCode::NotFound);
}

#[test]
fn the_rafts_to_clean_are_those_reached_and_the_failed_steps_own() {
    let cases: [(&[&str], &str, Vec<Raft>); 5] = [
        (
            &["join/raft-patroni"],
            "join/raft-openbao",
            vec![Raft::Patroni, Raft::Openbao],
        ),
        (&[], "join/raft-ovn", vec![Raft::Ovn]),
        (
            &["join/raft-patroni", "join/raft-openbao", "join/raft-ovn"],
            "join/verify",
            vec![Raft::Patroni, Raft::Openbao, Raft::Ovn],
        ),
        // The failed step's raft already reached is named once.
        (
            &["join/raft-patroni"],
            "join/raft-patroni",
            vec![Raft::Patroni],
        ),
        (&["join/install-packages"], "join/firewall", vec![]),
    ];
    for (steps, failed_at, rafts) in cases {
        let mut s = cluster_with(MemberState::Joining);
        for step in steps {
            run(&mut s, ADMIN, progress("n-3", step));
        }
        let d = decide_ok(&s, fail("n-3", failed_at, "boom"));
        let DomainEvent::MemberJoinFailed(e) = &d.events[0] else {
            panic!("{:?}", d.events)
        };
        assert_eq!(e.rafts, rafts, "reached {steps:?}, failed at {failed_at}");
    }
}

#[test]
fn a_failure_with_no_raft_to_clean_completes_its_cleanup_at_once() {
    let mut s = cluster_with(MemberState::Joining);
    run(&mut s, ADMIN, progress("n-3", "join/install-packages"));
    let d = run(
        &mut s,
        ADMIN,
        fail("n-3", "join/firewall", "iptables: not found"),
    );
    assert_eq!(
        d.events,
        vec![
            DomainEvent::MemberJoinFailed(MemberJoinFailed {
                node_id: "n-3".into(),
                step: "join/firewall".into(),
                error: "iptables: not found".into(),
                rafts: vec![],
            }),
            DomainEvent::RaftCleanupCompleted {
                node_id: "n-3".into()
            },
        ]
    );
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Failed);
    assert_eq!(
        m.raft_cleanup_at,
        Some(t0() + chrono::Duration::seconds(s.position as i64))
    );
    assert!(m.pending_cleanup().is_empty());
    // The generation is the failure's position, not the bookkeeping's.
    assert_eq!(s.membership.generation, s.position - 1);
    assert_eq!(s.membership.pending_cleanups().count(), 0);
}

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

/// Runs `c` and checks the generation: the position of the last topology
/// event it appended, or unchanged when it appended none.
fn run_checking_generation(s: &mut State, principal: &str, c: MemberCommand) -> Decision {
    let before = s.membership.generation;
    let start = s.position;
    let d = run(s, principal, c);
    let last_topology = d
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.is_topology_change())
        .map(|(i, _)| start + i as u64 + 1)
        .next_back();
    assert_eq!(
        s.membership.generation,
        last_topology.unwrap_or(before),
        "after {:?}",
        d.events
    );
    d
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

    let d = run(
        &mut s,
        CLEANER,
        MemberCommand::RecordRaftRemoval {
            node_id: "n-3".into(),
            raft: Raft::Openbao,
            already_gone: true,
            adapter: "openbao-http".into(),
            leader_moved: false,
        },
    );
    assert_eq!(
        d.events,
        vec![DomainEvent::RaftPeerRemoved {
            node_id: "n-3".into(),
            raft: Raft::Openbao,
            already_gone: true,
            adapter: "openbao-http".into(),
            leader_moved: false,
        }]
    );
    assert_eq!(member(&s, "n-3").pending_cleanup(), vec![Raft::Patroni]);
    assert_eq!(member(&s, "n-3").raft_cleanup_at, None);

    // The same raft twice appends nothing.
    assert_unchanged(&decide_ok(&s, removal("n-3", Raft::Openbao)), "n-3");
    // A raft it never reached appends nothing.
    assert_unchanged(&decide_ok(&s, removal("n-3", Raft::Ovn)), "n-3");

    let d = run(&mut s, CLEANER, removal("n-3", Raft::Patroni));
    assert_eq!(
        d.events,
        vec![
            DomainEvent::RaftPeerRemoved {
                node_id: "n-3".into(),
                raft: Raft::Patroni,
                already_gone: false,
                adapter: ADAPTER.into(),
                leader_moved: false,
            },
            DomainEvent::RaftCleanupCompleted {
                node_id: "n-3".into()
            },
        ]
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
        assert_unchanged(&decide_ok(&s, removal("n-3", raft)), "n-3");
    }
}

#[test]
fn the_last_removal_of_a_removing_member_decommissions_it() {
    let mut s = cluster_with(MemberState::Removing);
    assert_eq!(
        member(&s, "n-3").pending_cleanup(),
        vec![Raft::Patroni, Raft::Openbao, Raft::Ovn]
    );
    run(&mut s, CLEANER, removal("n-3", Raft::Ovn));
    assert_unchanged(&decide_ok(&s, removal("n-3", Raft::Ovn)), "n-3");
    run(&mut s, CLEANER, removal("n-3", Raft::Patroni));
    assert_eq!(member(&s, "n-3").state, MemberState::Removing);

    let d = run(&mut s, CLEANER, removal("n-3", Raft::Openbao));
    assert_eq!(
        d.events,
        vec![
            DomainEvent::RaftPeerRemoved {
                node_id: "n-3".into(),
                raft: Raft::Openbao,
                already_gone: false,
                adapter: ADAPTER.into(),
                leader_moved: false,
            },
            DomainEvent::RaftCleanupCompleted {
                node_id: "n-3".into()
            },
            DomainEvent::MemberDecommissioned {
                node_id: "n-3".into(),
                reason: "disk failed".into(),
                by: ALICE.into(),
            },
        ]
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
            run(&mut s, ADMIN, progress("n-3", "join/raft-patroni"));
        }
        for raft in Raft::ALL {
            assert_unchanged(&decide_ok(&s, removal("n-3", raft)), "n-3");
        }
    }
    let s = cluster_with(MemberState::Decommissioned);
    for raft in Raft::ALL {
        assert_unchanged(&decide_ok(&s, removal("n-3", raft)), "n-3");
    }
}

#[test]
fn a_removal_for_an_unknown_node_is_not_found() {
    let r = refused(&founders(), removal("n-9", Raft::Ovn));
    assert_eq!(r.code, ErrorCode::NotFound);
}

// ---------------------------------------------------------------------------
// Retry join
// ---------------------------------------------------------------------------

#[test]
fn retry_after_cleanup_moves_failed_back_to_joining() {
    let mut s = failed_and_cleaned();
    let d = run(&mut s, ADMIN, retry("n-3"));
    assert_eq!(
        d.events,
        vec![DomainEvent::MemberJoinRetried {
            node_id: "n-3".into()
        }]
    );
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Joining);
    assert!(m.state.in_peer_lists());
    assert_eq!(m.ordinal, 3, "a retry keeps its ordinal");
    assert_eq!(m.failed_step, None);
    assert_eq!(m.failed_error, None);
    assert_eq!(m.join_step, None);
    assert!(m.rafts_reached.is_empty());
    assert!(m.pending_cleanup().is_empty());
    assert_eq!(m.raft_cleanup_at, None);
    assert_eq!(s.membership.generation, s.position);

    // And it can fail again, cleaning only what the new attempt reached.
    run(&mut s, ADMIN, progress("n-3", "join/raft-ovn"));
    let d = decide_ok(&s, fail("n-3", "join/verify", "timeout"));
    let DomainEvent::MemberJoinFailed(e) = &d.events[0] else {
        panic!("{:?}", d.events)
    };
    assert_eq!(e.rafts, vec![Raft::Ovn]);
}

#[test]
fn retry_of_a_failure_with_no_raft_needs_no_cleanup() {
    let mut s = cluster_with(MemberState::Joining);
    run(&mut s, ADMIN, fail("n-3", "join/packages", "apt: 404"));
    let d = decide_ok(&s, retry("n-3"));
    assert_eq!(d.events.len(), 1);
}

#[test]
fn retry_while_cleanup_is_pending_is_refused() {
    let mut s = cluster_with(MemberState::Failed);
    let r = refused(&s, retry("n-3"));
    assert_eq!(r.code, ErrorCode::RaftCleanupPending);
    assert_eq!(
        r.details,
        Some(json!({ "pending": ["patroni", "openbao"] }))
    );
    run(&mut s, CLEANER, removal("n-3", Raft::Patroni));
    let r = refused(&s, retry("n-3"));
    assert_eq!(r.code, ErrorCode::RaftCleanupPending);
    assert_eq!(r.details, Some(json!({ "pending": ["openbao"] })));
}

#[test]
fn retry_is_refused_unless_failed() {
    for state in [
        MemberState::Joining,
        MemberState::Active,
        MemberState::Removing,
        MemberState::Decommissioned,
    ] {
        let s = cluster_with(state);
        let r = refused(&s, retry("n-3"));
        assert_eq!(r.code, ErrorCode::MemberNotFailed, "{state:?}");
        assert_eq!(r.details, Some(json!({ "state": state.as_str() })));
    }
}

#[test]
fn retry_of_an_unknown_node_is_not_found() {
    assert_eq!(refused(&founders(), retry("n-9")).code, ErrorCode::NotFound);
}

// ---------------------------------------------------------------------------
// Decommission
// ---------------------------------------------------------------------------

#[test]
fn decommission_needs_a_reason() {
    let s = cluster_with(MemberState::Active);
    let r = refused(
        &s,
        MemberCommand::Decommission {
            node_id: "n-3".into(),
            reason: None,
            force: false,
        },
    );
    assert_invalid(&r, &["reason"]);
    assert_eq!(message_of(&r, "reason"), "is required");
    for bad in ["", "  ", "two\nlines"] {
        assert_invalid(&refused(&s, decommission("n-3", bad)), &["reason"]);
    }
    assert_invalid(
        &refused(&s, decommission("n-3", &"r".repeat(MAX_REASON + 1))),
        &["reason"],
    );
}

#[test]
fn decommission_of_an_active_voter_starts_its_removal_from_every_raft() {
    let mut s = cluster_with(MemberState::Active);
    let d = run(&mut s, ALICE, decommission("n-3", "disk failed"));
    assert_eq!(
        d.events,
        vec![DomainEvent::MemberRemovalStarted(MemberRemovalStarted {
            node_id: "n-3".into(),
            reason: "disk failed".into(),
            forced: false,
            rafts: vec![Raft::Patroni, Raft::Openbao, Raft::Ovn],
        })]
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
    let mut s = cluster_with(MemberState::Joining);
    run(&mut s, ADMIN, progress("n-3", "join/raft-patroni"));
    let d = run(&mut s, ALICE, decommission("n-3", "wrong rack"));
    let DomainEvent::MemberRemovalStarted(e) = &d.events[0] else {
        panic!("{:?}", d.events)
    };
    assert_eq!(e.rafts, vec![Raft::Patroni]);
    assert_eq!(d.events.len(), 1);
    assert_eq!(member(&s, "n-3").state, MemberState::Removing);
}

#[test]
fn decommission_of_a_failed_member_removes_what_its_cleanup_has_not() {
    let mut s = cluster_with(MemberState::Failed);
    run(&mut s, CLEANER, removal("n-3", Raft::Patroni));
    let d = run(&mut s, ALICE, decommission("n-3", "give up"));
    let DomainEvent::MemberRemovalStarted(e) = &d.events[0] else {
        panic!("{:?}", d.events)
    };
    assert_eq!(e.rafts, vec![Raft::Openbao]);
    assert_eq!(member(&s, "n-3").state, MemberState::Removing);
    let d = run(&mut s, CLEANER, removal("n-3", Raft::Openbao));
    assert_eq!(d.events.len(), 3);
    assert_eq!(member(&s, "n-3").state, MemberState::Decommissioned);
    assert_eq!(member(&s, "n-3").decommissioned_by.as_deref(), Some(ALICE));
}

#[test]
fn decommission_of_a_cleaned_failed_member_decommissions_it_at_once() {
    let mut s = failed_and_cleaned();
    let d = run(&mut s, ALICE, decommission("n-3", "give up"));
    assert_eq!(
        d.events,
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
        ]
    );
    assert_eq!(member(&s, "n-3").state, MemberState::Decommissioned);
}

#[test]
fn a_compute_member_with_no_rafts_goes_straight_to_decommissioned() {
    let mut s = cluster_with_role(MemberState::Active, Role::Compute);
    let d = run(&mut s, ALICE, decommission("n-3", "retired"));
    assert_eq!(
        d.events,
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
        ]
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
        assert_unchanged(&decide_ok(&s, decommission("n-3", "again")), "n-3");
        assert_unchanged(&decide_ok(&s, force_decommission("n-3", "again")), "n-3");
        assert_eq!(
            member(&s, "n-3").decommission_reason.as_deref(),
            Some("disk failed")
        );
    }
}

#[test]
fn decommission_refuses_to_leave_fewer_than_two_active_voters() {
    let s = founders();
    let r = refused(&s, decommission("n-2", "disk failed"));
    assert_eq!(r.code, ErrorCode::QuorumAtRisk);
    assert_eq!(
        r.details,
        Some(json!({ "votersBefore": 2, "votersAfter": 1 }))
    );

    let alone = given(&[admitted("n-1", Role::Control, 1), completed("n-1")]);
    let r = refused(&alone, decommission("n-1", "disk failed"));
    assert_eq!(r.code, ErrorCode::QuorumAtRisk);
    assert_eq!(
        r.details,
        Some(json!({ "votersBefore": 1, "votersAfter": 0 }))
    );
}

#[test]
fn joining_voters_do_not_count_toward_quorum() {
    let s = cluster_with(MemberState::Joining);
    let r = refused(&s, decommission("n-1", "disk failed"));
    assert_eq!(r.code, ErrorCode::QuorumAtRisk);
    assert_eq!(
        r.details,
        Some(json!({ "votersBefore": 2, "votersAfter": 1 }))
    );
    // A third active voter makes it safe.
    let s = cluster_with(MemberState::Active);
    decide_ok(&s, decommission("n-1", "disk failed"));
}

#[test]
fn force_decommissions_even_when_quorum_is_at_risk() {
    let mut s = founders();
    let d = run(&mut s, ALICE, force_decommission("n-2", "burned"));
    let DomainEvent::MemberRemovalStarted(e) = &d.events[0] else {
        panic!("{:?}", d.events)
    };
    assert!(e.forced);
    assert_eq!(e.rafts, Raft::ALL.to_vec());
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
        decide_ok(&s, decommission(node, "not needed"));
    }
}

#[test]
fn decommission_of_an_unknown_node_is_not_found() {
    assert_eq!(
        refused(&founders(), decommission("n-9", "gone")).code,
        ErrorCode::NotFound
    );
}

// ---------------------------------------------------------------------------
// Applied generation
// ---------------------------------------------------------------------------

#[test]
fn reporting_the_current_generation_does_not_bump_it() {
    let mut s = cluster_with(MemberState::Active);
    let generation = s.membership.generation;
    let d = run(&mut s, "node/n-3", applied_gen("n-3", generation));
    assert_eq!(
        d.events,
        vec![DomainEvent::AppliedGenerationReported {
            node_id: "n-3".into(),
            generation,
        }]
    );
    assert_eq!(member(&s, "n-3").applied_generation, generation);
    assert_eq!(s.membership.generation, generation);
    assert!(s.position > generation);
    // And the member is no longer lagging: the same report again is a no-op.
    assert_unchanged(&decide_ok(&s, applied_gen("n-3", generation)), "n-3");
}

#[test]
fn a_generation_above_the_clusters_is_invalid() {
    let s = cluster_with(MemberState::Active);
    let generation = s.membership.generation;
    let r = refused(&s, applied_gen("n-3", generation + 1));
    assert_invalid(&r, &["generation"]);
    assert_eq!(
        message_of(&r, "generation"),
        format!("is above the cluster's generation {generation}")
    );
    let r = refused(
        &s,
        MemberCommand::ReportAppliedGeneration {
            node_id: "n-3".into(),
            generation: None,
        },
    );
    assert_invalid(&r, &["generation"]);
}

#[test]
fn a_report_equal_to_the_current_applied_answers_unchanged() {
    let mut s = cluster_with(MemberState::Active);
    run(&mut s, "node/n-3", applied_gen("n-3", 3));
    assert_unchanged(&decide_ok(&s, applied_gen("n-3", 3)), "n-3");
    // A fresh member has applied nothing yet.
    let s = cluster_with(MemberState::Joining);
    assert_unchanged(&decide_ok(&s, applied_gen("n-3", 0)), "n-3");
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
        let d = decide_ok(&s, applied_gen("n-3", s.membership.generation));
        assert_eq!(d.events.len(), 1, "{state:?}");
    }
    let s = cluster_with(MemberState::Decommissioned);
    let r = refused(&s, applied_gen("n-3", s.membership.generation));
    assert_eq!(r.code, ErrorCode::MemberDecommissioned);
}

#[test]
fn applied_generation_of_an_unknown_node_is_not_found() {
    let s = founders();
    let r = refused(&s, applied_gen("n-9", s.membership.generation));
    assert_eq!(r.code, ErrorCode::NotFound);
}

// ---------------------------------------------------------------------------
// Join requests
// ---------------------------------------------------------------------------

#[test]
fn a_node_requests_to_join() {
    let mut s = founders();
    let d = run(&mut s, "node/n-3", request("jr-1", "n-3", "192.0.2.13"));
    assert_eq!(d.subject, Subject::JoinRequest("jr-1".into()));
    assert_eq!(
        d.events,
        vec![DomainEvent::JoinRequested(JoinRequested {
            request_id: "jr-1".into(),
            node_id: "n-3".into(),
            mgmt_ip: "192.0.2.13".into(),
            labels: rack("r2"),
            facts: r#"{"cpus":8}"#.into(),
        })]
    );
    let r = &s.membership.join_requests["jr-1"];
    assert_eq!(r.status, JoinRequestStatus::Pending);
    assert_eq!(r.requested_by, "node/n-3");
    assert_eq!(r.decided_by, None);
    assert!(!s.membership.members.contains_key("n-3"));
}

#[test]
fn a_join_request_lists_every_bad_field() {
    let r = refused(
        &founders(),
        MemberCommand::RequestJoin {
            request_id: "jr-1".into(),
            node_id: None,
            mgmt_ip: None,
            labels: StringMap::new(),
            facts: "{}".into(),
        },
    );
    assert_invalid(&r, &["nodeId", "mgmtIp"]);
    let r = refused(
        &founders(),
        MemberCommand::RequestJoin {
            request_id: "jr-1".into(),
            node_id: Some("Bad Id".into()),
            mgmt_ip: Some("999.0.0.1".into()),
            labels: map(&[("", "x")]),
            facts: "{}".into(),
        },
    );
    assert_invalid(&r, &["nodeId", "mgmtIp", "labels"]);
}

#[test]
fn a_duplicate_pending_request_answers_the_existing_one() {
    let mut s = founders();
    run(&mut s, "node/n-3", request("jr-1", "n-3", "192.0.2.13"));
    let d = decide_ok(&s, request("jr-2", "n-3", "192.0.2.13"));
    assert!(d.events.is_empty());
    assert_eq!(d.subject, Subject::JoinRequest("jr-1".into()));
}

#[test]
fn a_member_cannot_request_to_join() {
    for state in [MemberState::Active, MemberState::Decommissioned] {
        let s = cluster_with(state);
        let r = refused(&s, request("jr-1", "n-3", "192.0.2.99"));
        assert_eq!(r.code, ErrorCode::MemberExists);
        assert_eq!(fields(&r), ["nodeId"]);
    }
}

#[test]
fn approving_a_request_admits_the_node() {
    let mut s = founders();
    run(&mut s, "node/n-3", request("jr-1", "n-3", "192.0.2.13"));
    let d = run(&mut s, ALICE, approve("jr-1", "storage"));
    assert_eq!(d.subject, Subject::JoinRequest("jr-1".into()));
    assert_eq!(
        d.events,
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
        ]
    );
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
    let mut s = founders();
    run(&mut s, "node/n-3", request("jr-1", "n-3", "192.0.2.13"));
    let d = decide_ok(
        &s,
        MemberCommand::ApproveJoin {
            request_id: "jr-1".into(),
            role: Some("hybrid".into()),
            mgmt_ip: Some("192.0.2.33".into()),
            bindings: Some(map(&[("storage", "10.1.0.33")])),
            labels: Some(rack("r3")),
        },
    );
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
    let mut s = founders();
    run(&mut s, "node/n-3", request("jr-1", "n-3", "192.0.2.13"));
    let r = refused(
        &s,
        MemberCommand::ApproveJoin {
            request_id: "jr-1".into(),
            role: None,
            mgmt_ip: Some("nope".into()),
            bindings: Some(map(&[("storage", "x")])),
            labels: None,
        },
    );
    assert_invalid(&r, &["role", "mgmtIp", "bindings.storage"]);
    assert_eq!(
        s.membership.join_requests["jr-1"].status,
        JoinRequestStatus::Pending
    );
}

#[test]
fn the_cluster_may_refuse_an_approval() {
    let mut s = founders();
    run(&mut s, "node/n-3", request("jr-1", "n-3", "192.0.2.12"));
    // n-3 is admitted directly while its request is pending.
    run(&mut s, ADMIN, admit("n-3", "control", "192.0.2.13"));
    let r = refused(
        &s,
        MemberCommand::ApproveJoin {
            request_id: "jr-1".into(),
            role: Some("storage".into()),
            mgmt_ip: None,
            bindings: None,
            labels: Some(map(&[("zone", "a")])),
        },
    );
    assert_eq!(r.code, ErrorCode::JoinApprovalRefused);
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
    let mut s = founders();
    run(&mut s, "node/n-3", request("jr-1", "n-3", "192.0.2.33"));
    run(&mut s, ADMIN, admit("n-3", "compute", "192.0.2.13"));
    run(&mut s, ADMIN, decommission("n-3", "gone"));
    assert_eq!(member(&s, "n-3").state, MemberState::Decommissioned);
    let r = refused(&s, approve("jr-1", "compute"));
    assert_eq!(r.code, ErrorCode::JoinApprovalRefused);
    assert_eq!(fields(&r), ["nodeId"]);
    assert!(message_of(&r, "nodeId").contains("decommissioned"));
}

#[test]
fn rejecting_a_request_needs_a_reason() {
    let mut s = founders();
    run(&mut s, "node/n-3", request("jr-1", "n-3", "192.0.2.13"));
    assert_invalid(&refused(&s, reject("jr-1", None)), &["reason"]);
    assert_invalid(&refused(&s, reject("jr-1", Some(" "))), &["reason"]);
    let d = run(&mut s, ALICE, reject("jr-1", Some("unknown hardware")));
    assert_eq!(d.subject, Subject::JoinRequest("jr-1".into()));
    assert_eq!(
        d.events,
        vec![DomainEvent::JoinRequestRejected {
            request_id: "jr-1".into(),
            reason: "unknown hardware".into(),
        }]
    );
    let r = &s.membership.join_requests["jr-1"];
    assert_eq!(r.status, JoinRequestStatus::Rejected);
    assert_eq!(r.reason.as_deref(), Some("unknown hardware"));
    assert_eq!(r.decided_by.as_deref(), Some(ALICE));
    assert!(!s.membership.members.contains_key("n-3"));
    // A rejected node may ask again.
    let d = decide_ok(&s, request("jr-2", "n-3", "192.0.2.13"));
    assert_eq!(d.subject, Subject::JoinRequest("jr-2".into()));
    assert_eq!(d.events.len(), 1);
}

#[test]
fn a_decided_request_is_closed() {
    let mut approved = founders();
    run(
        &mut approved,
        "node/n-3",
        request("jr-1", "n-3", "192.0.2.13"),
    );
    let mut rejected = approved.clone();
    run(&mut approved, ADMIN, approve("jr-1", "compute"));
    run(&mut rejected, ADMIN, reject("jr-1", Some("no")));
    for (s, status) in [(approved, "approved"), (rejected, "rejected")] {
        for c in [approve("jr-1", "compute"), reject("jr-1", Some("late"))] {
            let r = refused(&s, c);
            assert_eq!(r.code, ErrorCode::JoinRequestClosed);
            assert_eq!(r.details, Some(json!({ "status": status })));
        }
    }
}

#[test]
fn an_unknown_request_is_not_found() {
    let s = founders();
    assert_eq!(
        refused(&s, approve("jr-9", "compute")).code,
        ErrorCode::NotFound
    );
    assert_eq!(
        refused(&s, reject("jr-9", Some("no"))).code,
        ErrorCode::NotFound
    );
}

// ---------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------

#[test]
fn commands_address_their_streams() {
    assert_eq!(admit("n-3", "control", "x").stream_id(), "member/n-3");
    assert_eq!(complete("n-3").stream_id(), "member/n-3");
    assert_eq!(removal("n-3", Raft::Ovn).stream_id(), "member/n-3");
    assert_eq!(request("jr-1", "n-3", "x").stream_id(), "joinrequest/jr-1");
    assert_eq!(approve("jr-1", "compute").stream_id(), "joinrequest/jr-1");
    assert_eq!(cmd(reject("jr-1", None)).stream_id(), "joinrequest/jr-1");
}

#[test]
fn each_event_bumps_its_members_stream_version() {
    let mut s = cluster_with(MemberState::Joining);
    assert_eq!(s.stream_version("member/n-3"), 1);
    run(&mut s, ADMIN, progress("n-3", "join/raft-patroni"));
    run(&mut s, ADMIN, fail("n-3", "join/raft-ovn", "x"));
    assert_eq!(s.stream_version("member/n-3"), 3);
    assert_eq!(member(&s, "n-3").version, 3);
    assert_eq!(member(&s, "n-3").last_position, s.position);
}

// ---------------------------------------------------------------------------
// Property: no sequence of commands breaks an invariant
// ---------------------------------------------------------------------------

const NODES: [&str; 4] = ["n-1", "n-2", "n-3", "n-4"];
const IPS: [&str; 4] = ["192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1"];
const ROLES: [&str; 4] = ["control", "compute", "storage", "hybrid"];
const STEPS: [&str; 8] = [
    "join/raft-patroni",
    "join/raft-patroni",
    "join/raft-openbao",
    "join/raft-openbao",
    "join/raft-ovn",
    "join/raft-ovn",
    "join/install",
    "bad-step",
];
const REQUESTS: [&str; 3] = ["jr-1", "jr-2", "jr-3"];
const PRINCIPALS: [&str; 3] = [ADMIN, ALICE, CLEANER];

fn pick(of: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(of).prop_map(String::from)
}

fn labels_strategy() -> impl Strategy<Value = StringMap> {
    prop_oneof![Just(StringMap::new()), Just(rack("r1")), Just(rack("r2"))]
}

fn admit_strategy() -> impl Strategy<Value = MemberCommand> {
    (pick(&NODES), pick(&ROLES), pick(&IPS), labels_strategy()).prop_map(
        |(node, role, ip, labels)| MemberCommand::Admit {
            node_id: Some(node),
            role: Some(role),
            mgmt_ip: Some(ip),
            bindings: StringMap::new(),
            labels,
        },
    )
}

fn command_strategy() -> impl Strategy<Value = MemberCommand> {
    prop_oneof![
        3 => admit_strategy(),
        2 => (pick(&NODES), pick(&STEPS)).prop_map(|(node_id, step)| {
            MemberCommand::ReportJoinProgress {
                node_id,
                step: Some(step),
            }
        }),
        2 => pick(&NODES).prop_map(|node_id| MemberCommand::CompleteJoin { node_id }),
        2 => (pick(&NODES), pick(&STEPS), prop::option::weighted(0.9, Just("boom".to_owned())))
            .prop_map(|(node_id, step, error)| MemberCommand::ReportJoinFailure {
                node_id,
                step: Some(step),
                error,
            }),
        2 => pick(&NODES).prop_map(|node_id| MemberCommand::RetryJoin { node_id }),
        2 => (pick(&NODES), prop::option::weighted(0.9, Just("retired".to_owned())), any::<bool>())
            .prop_map(|(node_id, reason, force)| MemberCommand::Decommission {
                node_id,
                reason,
                force,
            }),
        1 => (pick(&NODES), 0u64..16).prop_map(|(node_id, g)| {
            MemberCommand::ReportAppliedGeneration {
                node_id,
                generation: Some(g),
            }
        }),
        6 => (pick(&NODES), prop::sample::select(Raft::ALL.to_vec()), any::<bool>())
            .prop_map(|(node_id, raft, already_gone)| MemberCommand::RecordRaftRemoval {
                node_id,
                raft,
                already_gone,
                adapter: ADAPTER.into(),
                leader_moved: false,
            }),
        1 => (pick(&REQUESTS), pick(&NODES), pick(&IPS), labels_strategy()).prop_map(
            |(request_id, node, ip, labels)| MemberCommand::RequestJoin {
                request_id,
                node_id: Some(node),
                mgmt_ip: Some(ip),
                labels,
                facts: "{}".into(),
            }
        ),
        1 => (pick(&REQUESTS), pick(&ROLES), prop::option::of(pick(&IPS))).prop_map(
            |(request_id, role, mgmt_ip)| MemberCommand::ApproveJoin {
                request_id,
                role: Some(role),
                mgmt_ip,
                bindings: None,
                labels: None,
            }
        ),
        1 => pick(&REQUESTS).prop_map(|request_id| MemberCommand::RejectJoin {
            request_id,
            reason: Some("no".into()),
        }),
    ]
}

/// What the property remembers across steps.
#[derive(Default)]
struct Seen {
    /// Every ordinal ever given, by node.
    ordinals: BTreeMap<String, u32>,
    max_ordinal: u32,
    decommissioned: BTreeSet<String>,
    last_topology: u64,
}

fn check_invariants(s: &State, seen: &mut Seen) -> Result<(), TestCaseError> {
    let members = &s.membership.members;

    // The generation is the position of the latest topology event.
    prop_assert!(s.membership.generation <= s.position);
    prop_assert_eq!(s.membership.generation, seen.last_topology);

    // Ordinals: a node keeps its ordinal; a new one is above every ordinal
    // ever given; no two members share one.
    for m in members.values() {
        match seen.ordinals.get(&m.node_id) {
            Some(o) => prop_assert_eq!(*o, m.ordinal, "{} changed ordinal", m.node_id),
            None => {
                prop_assert!(
                    m.ordinal > seen.max_ordinal,
                    "{} got ordinal {} after {}",
                    m.node_id,
                    m.ordinal,
                    seen.max_ordinal
                );
                seen.ordinals.insert(m.node_id.clone(), m.ordinal);
                seen.max_ordinal = m.ordinal;
            }
        }
    }
    for gone in members.values().filter(|m| {
        matches!(
            m.state,
            MemberState::Failed | MemberState::Removing | MemberState::Decommissioned
        )
    }) {
        let reusers: Vec<_> = members
            .values()
            .filter(|m| m.node_id != gone.node_id && m.ordinal == gone.ordinal)
            .map(|m| m.node_id.clone())
            .collect();
        prop_assert!(
            reusers.is_empty(),
            "ordinal {} of {} reused by {:?}",
            gone.ordinal,
            gone.node_id,
            reusers
        );
    }
    let ordinals: BTreeSet<u32> = members.values().map(|m| m.ordinal).collect();
    prop_assert_eq!(ordinals.len(), members.len());
    prop_assert_eq!(
        s.membership.max_ordinal,
        members.values().map(|m| m.ordinal).max().unwrap_or(0)
    );

    // Management addresses of members not decommissioned are unique.
    let mut ips = BTreeMap::new();
    for m in members
        .values()
        .filter(|m| m.state != MemberState::Decommissioned)
    {
        if let Some(other) = ips.insert(m.mgmt_ip.clone(), m.node_id.clone()) {
            prop_assert!(
                false,
                "{} and {} share mgmt ip {}",
                other,
                m.node_id,
                m.mgmt_ip
            );
        }
    }

    // Decommissioned is for good; removing always has a raft still to
    // remove; a failed member's cleanup is done exactly when nothing is
    // pending.
    for m in members.values() {
        if seen.decommissioned.contains(&m.node_id) {
            prop_assert_eq!(m.state, MemberState::Decommissioned);
        }
        match m.state {
            MemberState::Decommissioned => {
                seen.decommissioned.insert(m.node_id.clone());
                prop_assert!(m.decommissioned_by.is_some());
                prop_assert!(m.decommission_reason.is_some());
            }
            MemberState::Removing => {
                prop_assert!(
                    !m.pending_cleanup().is_empty(),
                    "{} stuck removing",
                    m.node_id
                )
            }
            MemberState::Failed => prop_assert_eq!(
                m.raft_cleanup_at.is_some(),
                m.pending_cleanup().is_empty(),
                "{}",
                m.node_id
            ),
            MemberState::Joining | MemberState::Active => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_sequence_of_commands_breaks_an_invariant(
        admissions in prop::collection::vec(admit_strategy(), 0..6),
        steps in prop::collection::vec(
            (command_strategy(), prop::sample::select(PRINCIPALS.to_vec())),
            1..80,
        )
    ) {
        let mut s = State::default();
        let mut seen = Seen::default();
        // Most sequences start with a few admissions, so that the commands
        // after them mostly find a member to act on.
        let steps = admissions
            .into_iter()
            .map(|c| (c, INSTALLER))
            .chain(steps);
        for (c, principal) in steps {
            let before = s.clone();
            match when_by(&s, principal, cmd(c.clone())) {
                Ok(d) => {
                    let start = s.position;
                    apply(&mut s, principal, &d.events);
                    prop_assert_eq!(s.position, start + d.events.len() as u64);
                    if let Some(i) = d.events.iter().rposition(DomainEvent::is_topology_change) {
                        seen.last_topology = start + i as u64 + 1;
                    }
                    if d.events.is_empty() {
                        prop_assert_eq!(&s, &before);
                    }
                }
                Err(r) => {
                    prop_assert!(r.code != ErrorCode::Internal, "{:?}", r);
                }
            }
            check_invariants(&s, &mut seen)?;
        }
    }
}

#[test]
fn a_member_lags_only_while_it_renders_peer_lists_below_the_generation() {
    assert!(super::lagging(MemberState::Joining, 3, 4));
    assert!(super::lagging(MemberState::Active, 3, 4));
    assert!(!super::lagging(MemberState::Active, 4, 4));
    assert!(!super::lagging(MemberState::Failed, 0, 4));
    assert!(!super::lagging(MemberState::Removing, 0, 4));
    assert!(!super::lagging(MemberState::Decommissioned, 0, 4));
}

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
    let r = refused(
        &founders(),
        update("n-9", json!({ "labels": { "topology.rack": "r2" } })),
    );
    assert_eq!(r.code, ErrorCode::NotFound);
}

#[test]
fn an_update_addresses_the_members_stream() {
    assert_eq!(update("n-3", json!({})).stream_id(), "member/n-3");
}

#[test]
fn an_update_with_two_bad_fields_names_both() {
    let s = cluster_with(MemberState::Active);
    let r = refused(
        &s,
        update("n-3", json!({ "role": "boss", "mgmtIp": "nope" })),
    );
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
    let r = refused(
        &s,
        update(
            "n-3",
            json!({
                "role": "storage",
                "mgmtIp": "192.0.2.12",
                "bindings": { "storage": "not-an-ip", "backup": "10.0.0.1" },
                "labels": { "zone": "a" },
            }),
        ),
    );
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
        let r = refused(&s, update("n-1", json!({ "mgmtIp": "192.0.2.13" })));
        assert_invalid(&r, &["mgmtIp"]);
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
    let r = refused(&s, update("n-2", json!({ "mgmtIp": "2001:DB8:0::0012" })));
    assert_invalid(&r, &["mgmtIp"]);
    assert!(
        message_of(&r, "mgmtIp").contains("is taken by member n-1"),
        "{r:?}"
    );
}

#[test]
fn an_update_may_take_a_decommissioned_members_address() {
    let s = cluster_with(MemberState::Decommissioned);
    let d = decide_ok(&s, update("n-1", json!({ "mgmtIp": "192.0.2.13" })));
    assert_eq!(updated(&d).mgmt_ip, "192.0.2.13");
}

#[test]
fn an_update_normalizes_addresses_like_an_admission() {
    let s = founders();
    let d = decide_ok(
        &s,
        update(
            "n-2",
            json!({
                "mgmtIp": "2001:DB8:0:0::0012",
                "bindings": { "overlay": "2001:db8:0::1" },
            }),
        ),
    );
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
    let d = decide_ok(&s, update("n-1", json!({ "mgmtIp": "2001:DB8:0::0012" })));
    assert_unchanged(&d, "n-1");
    let d = decide_ok(
        &s,
        update(
            "n-1",
            json!({ "mgmtIp": "2001:DB8:0::0012", "labels": { "topology.rack": "r2" } }),
        ),
    );
    let e = updated(&d);
    assert_eq!(e.mgmt_ip, "2001:db8::12");
    assert_eq!(e.labels, rack("r2"));
}

#[test]
fn a_member_changed_to_storage_needs_a_rack_label() {
    // n-3 has the rack r1: it keeps it.
    let s = cluster_with(MemberState::Active);
    let d = decide_ok(&s, update("n-3", json!({ "role": "storage" })));
    assert_eq!(updated(&d).role, Role::Storage);
    assert_eq!(updated(&d).labels, rack("r1"));
    let r = refused(
        &s,
        update(
            "n-3",
            json!({ "role": "storage", "labels": { "zone": "a" } }),
        ),
    );
    assert_invalid(&r, &["labels.topology.rack"]);
    assert_eq!(
        message_of(&r, "labels.topology.rack"),
        "is required for a storage member"
    );

    // A compute member admitted with no labels at all.
    let mut s = founders();
    run(
        &mut s,
        ADMIN,
        admit_with("n-3", "compute", "192.0.2.13", StringMap::new()),
    );
    let r = refused(&s, update("n-3", json!({ "role": "storage" })));
    assert_invalid(&r, &["labels.topology.rack"]);
    let d = decide_ok(
        &s,
        update(
            "n-3",
            json!({ "role": "storage", "labels": { "topology.rack": "r2" } }),
        ),
    );
    assert_eq!(updated(&d).role, Role::Storage);
    assert_eq!(updated(&d).labels, rack("r2"));
}

#[test]
fn a_storage_member_may_not_replace_its_labels_without_the_rack() {
    let s = cluster_with_role(MemberState::Active, Role::Storage);
    for labels in [json!({ "zone": "a" }), json!({})] {
        let r = refused(&s, update("n-3", json!({ "labels": labels })));
        assert_invalid(&r, &["labels.topology.rack"]);
        assert_eq!(
            message_of(&r, "labels.topology.rack"),
            "is required for a storage member"
        );
    }
    let d = decide_ok(
        &s,
        update(
            "n-3",
            json!({ "labels": { "topology.rack": "r2", "zone": "a" } }),
        ),
    );
    assert_eq!(
        updated(&d).labels,
        map(&[(RACK_LABEL, "r2"), ("zone", "a")])
    );
    // A member that is no storage member may drop its rack.
    let s = cluster_with_role(MemberState::Active, Role::Compute);
    let d = decide_ok(&s, update("n-3", json!({ "labels": {} })));
    assert_eq!(updated(&d).labels, StringMap::new());
}

#[test]
fn an_update_of_a_removing_or_decommissioned_member_is_refused() {
    for state in [MemberState::Removing, MemberState::Decommissioned] {
        let s = cluster_with(state);
        let r = refused(
            &s,
            update("n-3", json!({ "labels": { "topology.rack": "r2" } })),
        );
        assert_eq!(r.code, ErrorCode::MemberDecommissioned, "{state:?}");
    }
}

#[test]
fn a_failed_member_may_not_move_while_its_raft_cleanup_is_pending() {
    let mut s = cluster_with(MemberState::Failed);
    let moved = update("n-3", json!({ "mgmtIp": "192.0.2.33" }));
    assert_eq!(
        refused(&s, moved.clone()).code,
        ErrorCode::RaftCleanupPending
    );
    // One raft done, one still to do.
    run(&mut s, CLEANER, removal("n-3", Raft::Patroni));
    assert_eq!(refused(&s, moved).code, ErrorCode::RaftCleanupPending);
    let r = refused(
        &s,
        update(
            "n-3",
            json!({ "mgmtIp": "192.0.2.33", "labels": { "topology.rack": "r2" } }),
        ),
    );
    assert_eq!(r.code, ErrorCode::RaftCleanupPending);
    assert_eq!(member(&s, "n-3").mgmt_ip, "192.0.2.13");
}

#[test]
fn a_failed_member_with_cleanup_pending_may_change_all_but_its_address() {
    let s = cluster_with(MemberState::Failed);
    assert!(!member(&s, "n-3").pending_cleanup().is_empty());
    let d = decide_ok(
        &s,
        update(
            "n-3",
            json!({
                "bindings": { "overlay": "10.2.0.13" },
                "labels": { "topology.rack": "r2" },
            }),
        ),
    );
    let e = updated(&d);
    assert_eq!(e.mgmt_ip, "192.0.2.13");
    assert_eq!(e.bindings, map(&[("overlay", "10.2.0.13")]));
    assert_eq!(e.labels, rack("r2"));
    // Naming the address it has is no move.
    let d = decide_ok(
        &s,
        update(
            "n-3",
            json!({ "mgmtIp": "192.0.2.13", "labels": { "topology.rack": "r2" } }),
        ),
    );
    assert_eq!(updated(&d).mgmt_ip, "192.0.2.13");
}

#[test]
fn a_failed_member_may_move_once_its_cleanup_is_done() {
    let mut s = failed_and_cleaned();
    let d = run(
        &mut s,
        ADMIN,
        update("n-3", json!({ "mgmtIp": "192.0.2.33" })),
    );
    assert_eq!(updated(&d).mgmt_ip, "192.0.2.33");
    let m = member(&s, "n-3");
    assert_eq!(m.mgmt_ip, "192.0.2.33");
    assert_eq!(m.state, MemberState::Failed);
}

#[test]
fn demoting_one_of_two_active_voters_puts_quorum_at_risk() {
    let s = founders();
    for role in ["compute", "storage"] {
        let r = refused(&s, update("n-2", json!({ "role": role })));
        assert_eq!(r.code, ErrorCode::QuorumAtRisk, "{role}");
        assert_eq!(
            r.details,
            Some(json!({ "votersBefore": 2, "votersAfter": 1 })),
            "{role}"
        );
    }
    assert_eq!(member(&s, "n-2").role, Role::Hybrid);

    let alone = given(&[admitted("n-1", Role::Control, 1), completed("n-1")]);
    let r = refused(&alone, update("n-1", json!({ "role": "compute" })));
    assert_eq!(r.code, ErrorCode::QuorumAtRisk);
    assert_eq!(
        r.details,
        Some(json!({ "votersBefore": 1, "votersAfter": 0 }))
    );
}

#[test]
fn force_demotes_a_voter_even_when_quorum_is_at_risk() {
    let mut s = founders();
    let d = run_checking_generation(
        &mut s,
        ALICE,
        update("n-2", json!({ "role": "compute", "force": true })),
    );
    let e = updated(&d);
    assert!(e.forced);
    assert_eq!(e.role, Role::Compute);
    assert_eq!(e.rafts, Raft::ALL.to_vec());
    let m = member(&s, "n-2");
    assert_eq!(m.role, Role::Compute);
    assert_eq!(m.state, MemberState::Active);
    assert_eq!(s.membership.active_voters(), 1);
}

#[test]
fn joining_voters_do_not_count_toward_the_quorum_of_a_demotion() {
    let s = cluster_with(MemberState::Joining);
    let r = refused(&s, update("n-2", json!({ "role": "compute" })));
    assert_eq!(r.code, ErrorCode::QuorumAtRisk);
    assert_eq!(
        r.details,
        Some(json!({ "votersBefore": 2, "votersAfter": 1 }))
    );
    // A third active voter makes it safe.
    let s = cluster_with(MemberState::Active);
    let d = decide_ok(&s, update("n-2", json!({ "role": "compute" })));
    assert!(!updated(&d).forced);
}

#[test]
fn a_demoted_active_voter_is_taken_out_of_every_raft() {
    let mut s = cluster_with(MemberState::Active);
    let d = run(&mut s, ALICE, update("n-3", json!({ "role": "compute" })));
    assert_eq!(d.subject, Subject::Member("n-3".into()));
    let e = updated(&d);
    assert_eq!(e.rafts, vec![Raft::Patroni, Raft::Openbao, Raft::Ovn]);
    assert!(!e.forced);
    let m = member(&s, "n-3");
    assert_eq!(m.role, Role::Compute);
    assert_eq!(m.state, MemberState::Active);
    assert_eq!(s.membership.active_voters(), 2);
}

#[test]
fn the_raft_removals_of_a_demoted_voter_are_recorded_while_it_stays_active() {
    let mut s = cluster_with(MemberState::Active);
    run(&mut s, ALICE, update("n-3", json!({ "role": "compute" })));
    for raft in [Raft::Patroni, Raft::Openbao] {
        // Bookkeeping: no topology change.
        let d = run_checking_generation(&mut s, CLEANER, removal("n-3", raft));
        assert!(
            matches!(
                d.events.as_slice(),
                [DomainEvent::RaftPeerRemoved { node_id, raft: r, .. }]
                    if node_id == "n-3" && *r == raft
            ),
            "{:?}",
            d.events
        );
        assert_eq!(member(&s, "n-3").state, MemberState::Active);
    }
    // The same raft twice appends nothing.
    assert_unchanged(&decide_ok(&s, removal("n-3", Raft::Patroni)), "n-3");

    // The last one completes the cleanup, and decommissions nothing.
    let d = run_checking_generation(&mut s, CLEANER, removal("n-3", Raft::Ovn));
    match d.events.as_slice() {
        [DomainEvent::RaftPeerRemoved {
            node_id: removed,
            raft: Raft::Ovn,
            ..
        }, DomainEvent::RaftCleanupCompleted { node_id }] => {
            assert_eq!(removed, "n-3");
            assert_eq!(node_id, "n-3");
        }
        other => panic!("expected the removal and the cleanup completed, got {other:?}"),
    }
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Active);
    assert_eq!(m.role, Role::Compute);
    assert!(m.pending_cleanup().is_empty());
    for raft in Raft::ALL {
        assert_unchanged(&decide_ok(&s, removal("n-3", raft)), "n-3");
    }
}

#[test]
fn a_demoted_joining_voter_is_taken_out_of_the_rafts_it_reached() {
    let mut s = cluster_with(MemberState::Joining);
    let d = decide_ok(&s, update("n-3", json!({ "role": "compute" })));
    assert!(updated(&d).rafts.is_empty(), "{d:?}");
    run(&mut s, ADMIN, progress("n-3", "join/raft-patroni"));
    run(&mut s, ADMIN, progress("n-3", "join/raft-openbao"));
    let d = decide_ok(&s, update("n-3", json!({ "role": "storage" })));
    let e = updated(&d);
    assert_eq!(e.rafts, vec![Raft::Patroni, Raft::Openbao]);
    assert!(!e.forced, "a joining voter is no active voter");
}

#[test]
fn a_demoted_failed_voter_still_owes_every_raft_its_cleanup_had_pending() {
    // Reached patroni, failed at join/raft-openbao: both still to clean.
    let mut s = cluster_with(MemberState::Failed);
    run(&mut s, ADMIN, update("n-3", json!({ "role": "compute" })));
    let m = member(&s, "n-3");
    assert_eq!(m.role, Role::Compute);
    assert_eq!(m.state, MemberState::Failed);
    assert_eq!(m.pending_cleanup(), vec![Raft::Patroni, Raft::Openbao]);
    run(&mut s, CLEANER, removal("n-3", Raft::Patroni));
    let d = run(&mut s, CLEANER, removal("n-3", Raft::Openbao));
    assert!(
        matches!(
            d.events.last(),
            Some(DomainEvent::RaftCleanupCompleted { .. })
        ),
        "{:?}",
        d.events
    );
    assert!(member(&s, "n-3").raft_cleanup_at.is_some());
}

#[test]
fn a_demoted_failed_voter_whose_cleanup_is_done_is_in_no_raft() {
    let mut s = failed_and_cleaned();
    let cleaned_at = member(&s, "n-3").raft_cleanup_at;
    let d = run(&mut s, ADMIN, update("n-3", json!({ "role": "compute" })));
    assert!(updated(&d).rafts.is_empty(), "{d:?}");
    let m = member(&s, "n-3");
    assert!(m.pending_cleanup().is_empty());
    assert_eq!(m.raft_cleanup_at, cleaned_at, "its cleanup stays done");
    // So it can still be retried.
    decide_ok(&s, retry("n-3"));
}

#[test]
fn changes_that_demote_no_voter_name_no_rafts() {
    // Voter to voter, even with only two active voters.
    let s = founders();
    let d = decide_ok(&s, update("n-2", json!({ "role": "control" })));
    let e = updated(&d);
    assert_eq!(e.role, Role::Control);
    assert!(e.rafts.is_empty(), "{e:?}");
    assert!(!e.forced);
    // Non-voter to non-voter, and a promotion.
    let s = cluster_with_role(MemberState::Active, Role::Compute);
    for (role, to) in [("storage", Role::Storage), ("control", Role::Control)] {
        let d = decide_ok(&s, update("n-3", json!({ "role": role })));
        assert_eq!(updated(&d).role, to);
        assert!(updated(&d).rafts.is_empty(), "{role}: {d:?}");
    }
    // Not a role change at all.
    let s = cluster_with(MemberState::Active);
    let d = decide_ok(
        &s,
        update("n-3", json!({ "labels": { "topology.rack": "r2" } })),
    );
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
        let d = decide_ok(&s, update("n-3", json!({})));
        assert_unchanged(&d, "n-3");
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
    assert_unchanged(&decide_ok(&s, update("n-3", same)), "n-3");
    assert_unchanged(
        &decide_ok(
            &s,
            update("n-3", json!({ "role": "control", "force": true })),
        ),
        "n-3",
    );
    // Naming its own role is no demotion, even with only two voters.
    assert_unchanged(
        &decide_ok(&founders(), update("n-2", json!({ "role": "hybrid" }))),
        "n-2",
    );
}

#[test]
fn an_update_changes_the_member_and_bumps_the_generation() {
    let mut s = cluster_with(MemberState::Active);
    let version = member(&s, "n-3").version;
    let d = run_checking_generation(
        &mut s,
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
    );
    assert_eq!(d.subject, Subject::Member("n-3".into()));
    assert_eq!(
        d.events,
        vec![DomainEvent::MemberUpdated(MemberUpdated {
            node_id: "n-3".into(),
            role: Role::Hybrid,
            mgmt_ip: "192.0.2.33".into(),
            bindings: map(&[("storage", "10.1.0.33")]),
            labels: map(&[(RACK_LABEL, "r2"), ("zone", "a")]),
            forced: false,
            rafts: vec![],
        })]
    );
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
    decide_ok(&s, update("n-1", json!({ "mgmtIp": "192.0.2.13" })));
}

#[test]
fn an_update_replaces_whole_maps_and_keeps_what_it_leaves_out() {
    let mut s = founders();
    run(
        &mut s,
        ADMIN,
        MemberCommand::Admit {
            node_id: Some("n-3".into()),
            role: Some("compute".into()),
            mgmt_ip: Some("192.0.2.13".into()),
            bindings: map(&[("storage", "10.1.0.13"), ("overlay", "10.2.0.13")]),
            labels: map(&[(RACK_LABEL, "r1"), ("zone", "a")]),
        },
    );
    let d = run(
        &mut s,
        ADMIN,
        update("n-3", json!({ "bindings": { "overlay": "10.2.0.99" } })),
    );
    assert_eq!(
        updated(&d),
        &MemberUpdated {
            node_id: "n-3".into(),
            role: Role::Compute,
            mgmt_ip: "192.0.2.13".into(),
            bindings: map(&[("overlay", "10.2.0.99")]),
            labels: map(&[(RACK_LABEL, "r1"), ("zone", "a")]),
            forced: false,
            rafts: vec![],
        }
    );
    run(
        &mut s,
        ADMIN,
        update("n-3", json!({ "labels": { "topology.rack": "r2" } })),
    );
    let m = member(&s, "n-3");
    assert_eq!(m.labels, rack("r2"), "the zone label is gone");
    assert_eq!(m.bindings, map(&[("overlay", "10.2.0.99")]));
    run(&mut s, ADMIN, update("n-3", json!({ "bindings": {} })));
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
        let d = run_checking_generation(
            &mut s,
            ADMIN,
            update("n-3", json!({ "labels": { "topology.rack": "r2" } })),
        );
        assert_eq!(updated(&d).labels, rack("r2"), "{state:?}");
        let m = member(&s, "n-3");
        assert_eq!(m.state, state, "an update keeps the state");
        assert_eq!(m.rack(), Some("r2"), "{state:?}");
        assert_eq!(m.version, version + 1, "{state:?}");
        assert_eq!(s.membership.generation, s.position, "{state:?}");
    }
}

#[test]
fn a_voter_demoted_cleaned_and_promoted_again_owes_every_raft_to_its_decommission() {
    let mut s = cluster_with(MemberState::Active);
    run(&mut s, ALICE, update("n-3", json!({ "role": "compute" })));
    for raft in Raft::ALL {
        run(&mut s, CLEANER, removal("n-3", raft));
    }
    assert!(member(&s, "n-3").raft_cleanup_at.is_some());
    // Promoted again, it rejoins its rafts: the earlier cleanup is history.
    run(&mut s, ALICE, update("n-3", json!({ "role": "hybrid" })));
    assert_eq!(member(&s, "n-3").raft_cleanup_at, None);
    let d = decide_ok(
        &s,
        MemberCommand::Decommission {
            node_id: "n-3".into(),
            reason: Some("retired".into()),
            force: false,
        },
    );
    assert!(
        matches!(
            d.events.as_slice(),
            [DomainEvent::MemberRemovalStarted(e)] if e.rafts == Raft::ALL.to_vec()
        ),
        "{:?}",
        d.events
    );
    // Demoted again, it is taken out of all three again.
    let d = decide_ok(&s, update("n-3", json!({ "role": "storage" })));
    assert_eq!(updated(&d).rafts, Raft::ALL.to_vec());
}

#[test]
fn a_decommissioned_member_whose_address_was_reused_is_refused_for_its_state() {
    let mut s = cluster_with(MemberState::Decommissioned);
    let ip = member(&s, "n-3").mgmt_ip.clone();
    // Another member takes the decommissioned member's address.
    run(&mut s, ALICE, update("n-2", json!({ "mgmtIp": ip })));
    let r = refused(
        &s,
        update("n-3", json!({ "labels": { "topology.rack": "r9" } })),
    );
    assert_eq!(r.code, ErrorCode::MemberDecommissioned, "{r:?}");
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
    let r = crate::testing::when_by(&s, "node/n-x", Command::Member(ask("n-y"))).unwrap_err();
    assert_eq!(r.code, ErrorCode::AccessDenied);
    assert_eq!(
        r.details.as_ref().unwrap()["resource"],
        "stratum:member/n-y"
    );
    assert!(crate::testing::when_by(&s, "node/n-x", Command::Member(ask("n-x"))).is_ok());
    // An operator files one for any node.
    assert!(crate::testing::when_by(&s, "user/alice", Command::Member(ask("n-y"))).is_ok());
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
