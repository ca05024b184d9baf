//! The helpers of the membership tests: command builders, and the
//! clusters they are decided in.

pub use super::*;
pub use crate::membership::*;

pub const CLEANER: &str = "system/raft-cleanup";
/// The adapter the default raft cleanup names: it calls no raft.
pub const ADAPTER: &str = "record-only";

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

pub fn rack(r: &str) -> StringMap {
    [(RACK_LABEL.to_owned(), r.to_owned())].into()
}

pub fn map(pairs: &[(&str, &str)]) -> StringMap {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub fn admit_with(node: &str, role: &str, ip: &str, labels: StringMap) -> MemberCommand {
    MemberCommand::Admit {
        node_id: Some(node.into()),
        role: Some(role.into()),
        mgmt_ip: Some(ip.into()),
        bindings: StringMap::new(),
        labels,
    }
}

pub fn admit(node: &str, role: &str, ip: &str) -> MemberCommand {
    admit_with(node, role, ip, rack("r1"))
}

pub fn progress(node: &str, step: &str) -> MemberCommand {
    MemberCommand::ReportJoinProgress {
        node_id: node.into(),
        step: Some(step.into()),
    }
}

pub fn complete(node: &str) -> MemberCommand {
    MemberCommand::CompleteJoin {
        node_id: node.into(),
    }
}

pub fn fail(node: &str, step: &str, error: &str) -> MemberCommand {
    MemberCommand::ReportJoinFailure {
        node_id: node.into(),
        step: Some(step.into()),
        error: Some(error.into()),
    }
}

pub fn retry(node: &str) -> MemberCommand {
    MemberCommand::RetryJoin {
        node_id: node.into(),
    }
}

pub fn decommission(node: &str, reason: &str) -> MemberCommand {
    MemberCommand::Decommission {
        node_id: node.into(),
        reason: Some(reason.into()),
        force: false,
    }
}

pub fn force_decommission(node: &str, reason: &str) -> MemberCommand {
    MemberCommand::Decommission {
        node_id: node.into(),
        reason: Some(reason.into()),
        force: true,
    }
}

pub fn applied_gen(node: &str, generation: u64) -> MemberCommand {
    MemberCommand::ReportAppliedGeneration {
        node_id: node.into(),
        generation: Some(generation),
    }
}

pub fn removal(node: &str, raft: Raft) -> MemberCommand {
    MemberCommand::RecordRaftRemoval {
        node_id: node.into(),
        raft,
        already_gone: false,
        adapter: ADAPTER.into(),
        leader_moved: false,
        settings: None,
    }
}

pub fn request(id: &str, node: &str, ip: &str) -> MemberCommand {
    MemberCommand::RequestJoin {
        request_id: id.into(),
        node_id: Some(node.into()),
        mgmt_ip: Some(ip.into()),
        labels: rack("r2"),
        facts: r#"{"cpus":8}"#.into(),
    }
}

pub fn approve(id: &str, role: &str) -> MemberCommand {
    MemberCommand::ApproveJoin {
        request_id: id.into(),
        role: Some(role.into()),
        mgmt_ip: None,
        bindings: None,
        labels: None,
    }
}

pub fn reject(id: &str, reason: Option<&str>) -> MemberCommand {
    MemberCommand::RejectJoin {
        request_id: id.into(),
        reason: reason.map(Into::into),
    }
}

// ---------------------------------------------------------------------------
// Harness helpers
// ---------------------------------------------------------------------------

#[track_caller]
pub fn assert_member_unchanged(d: &Decision, node: &str) {
    assert_unchanged(d, Subject::Member(node.into()));
}

pub fn member<'a>(s: &'a State, node: &str) -> &'a Member {
    s.membership
        .members
        .get(node)
        .unwrap_or_else(|| panic!("{node} is not a member"))
}

pub fn completed(node: &str) -> DomainEvent {
    DomainEvent::MemberJoinCompleted {
        node_id: node.into(),
    }
}

pub fn admitted_at(node: &str, role: Role, ordinal: u32, ip: &str) -> DomainEvent {
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
pub fn founders() -> State {
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

/// The founders, and n-3 (192.0.2.13, `role`) in `target`, from the
/// events its commands decide:
/// - joining: just admitted;
/// - active: join completed;
/// - failed: reached patroni, failed at join/raft-openbao, cleanup pending;
/// - removing: an active member decommissioned by alice, cleanup pending
///   (for a voter; a member with no rafts goes straight on);
/// - decommissioned: removing, and every raft removal recorded.
pub fn cluster_with_role(target: MemberState, role: Role) -> State {
    let s = founders().and(&[admitted("n-3", role, 3)]);
    let rafts = if role.is_voter() {
        Raft::ALL.to_vec()
    } else {
        Vec::new()
    };
    let s = match target {
        MemberState::Joining => s,
        MemberState::Active => s.and(&[completed("n-3")]),
        MemberState::Failed => s.and(&[
            progressed("n-3", "join/raft-patroni"),
            join_failed(
                "n-3",
                "join/raft-openbao",
                "connection refused",
                &[Raft::Patroni, Raft::Openbao],
            ),
        ]),
        MemberState::Removing | MemberState::Decommissioned => {
            let mut decided = vec![removal_started("n-3", "disk failed", false, &rafts)];
            if rafts.is_empty() {
                decided.push(decommissioned("n-3", "disk failed", ALICE));
            }
            let s = s.and(&[completed("n-3")]).and_by(ALICE, &decided);
            if target == MemberState::Decommissioned && !rafts.is_empty() {
                s.and_by(
                    CLEANER,
                    &cleanup_of("n-3", &rafts, Some(("disk failed", ALICE))),
                )
            } else {
                s
            }
        }
    };
    assert_eq!(member(&s, "n-3").state, target, "setup of {target:?}");
    s
}

pub fn cluster_with(target: MemberState) -> State {
    cluster_with_role(target, Role::Control)
}

/// The founders and a failed n-3 whose raft cleanup is done.
pub fn failed_and_cleaned() -> State {
    let s = cluster_with(MemberState::Failed).and_by(
        CLEANER,
        &cleanup_of("n-3", &[Raft::Patroni, Raft::Openbao], None),
    );
    assert!(member(&s, "n-3").raft_cleanup_at.is_some());
    s
}

// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------

pub fn progressed(node: &str, step: &str) -> DomainEvent {
    DomainEvent::JoinProgressReported {
        node_id: node.into(),
        step: step.into(),
    }
}

pub fn join_failed(node: &str, step: &str, error: &str, rafts: &[Raft]) -> DomainEvent {
    DomainEvent::MemberJoinFailed(MemberJoinFailed {
        node_id: node.into(),
        step: step.into(),
        error: error.into(),
        rafts: rafts.to_vec(),
    })
}

pub fn retried(node: &str) -> DomainEvent {
    DomainEvent::MemberJoinRetried {
        node_id: node.into(),
    }
}

pub fn removal_started(node: &str, reason: &str, forced: bool, rafts: &[Raft]) -> DomainEvent {
    DomainEvent::MemberRemovalStarted(MemberRemovalStarted {
        node_id: node.into(),
        reason: reason.into(),
        forced,
        rafts: rafts.to_vec(),
    })
}

pub fn decommissioned(node: &str, reason: &str, by: &str) -> DomainEvent {
    DomainEvent::MemberDecommissioned {
        node_id: node.into(),
        reason: reason.into(),
        by: by.into(),
    }
}

/// The removal of `node` from `raft` as [`removal`] records it.
pub fn raft_removed(node: &str, raft: Raft) -> DomainEvent {
    DomainEvent::RaftPeerRemoved {
        node_id: node.into(),
        raft,
        already_gone: false,
        adapter: ADAPTER.into(),
        leader_moved: false,
        settings: None,
    }
}

pub fn cleanup_completed(node: &str) -> DomainEvent {
    DomainEvent::RaftCleanupCompleted {
        node_id: node.into(),
    }
}

/// What recording [`removal`] of `node` from each of `rafts` (all it owes)
/// decides, in order: each removal, then the cleanup's completion and, for
/// a removing member (its reason and who asked), its decommission.
pub fn cleanup_of(node: &str, rafts: &[Raft], removing: Option<(&str, &str)>) -> Vec<DomainEvent> {
    let mut events: Vec<DomainEvent> = rafts.iter().map(|r| raft_removed(node, *r)).collect();
    events.push(cleanup_completed(node));
    if let Some((reason, by)) = removing {
        events.push(decommissioned(node, reason, by));
    }
    events
}

pub const NOT_JOINING: [MemberState; 4] = [
    MemberState::Active,
    MemberState::Failed,
    MemberState::Removing,
    MemberState::Decommissioned,
];

/// Runs `c` and checks the generation: the position of the last topology
/// event it appended, or unchanged when it appended none.
pub fn run_checking_generation(s: &mut State, principal: &str, c: MemberCommand) -> Decision {
    let before = s.membership.generation;
    let start = s.position;
    let d = run_by(s, principal, c);
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

/// A `MemberUpdated` of `node` to `role` at `ip`, no bindings, rack r1,
/// not forced, no raft to leave: a base for `MemberUpdated { .., ..base }`.
pub fn update_of(node: &str, role: Role, ip: &str) -> MemberUpdated {
    MemberUpdated {
        node_id: node.into(),
        role,
        mgmt_ip: ip.into(),
        bindings: StringMap::new(),
        labels: rack("r1"),
        forced: false,
        rafts: vec![],
    }
}

/// n-3 (192.0.2.13, rack r1), a control member, demoted to compute: taken
/// out of `rafts`.
pub fn n3_demoted(rafts: &[Raft]) -> DomainEvent {
    DomainEvent::MemberUpdated(MemberUpdated {
        rafts: rafts.to_vec(),
        ..update_of("n-3", Role::Compute, "192.0.2.13")
    })
}

/// Asserts the generation after `d` was folded into `before` (giving
/// `after`): the position of the last topology event it appended, or
/// unchanged when it appended none.
#[track_caller]
pub fn assert_generation(before: &State, d: &Decision, after: &State) {
    let last_topology = d
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.is_topology_change())
        .map(|(i, _)| before.position + i as u64 + 1)
        .next_back();
    assert_eq!(
        after.membership.generation,
        last_topology.unwrap_or(before.membership.generation),
        "after {:?}",
        d.events
    );
}

/// The `MemberAdmitted` of `node` at `ip`, rack r1, no bindings.
pub fn admitted_event(node: &str, role: Role, ordinal: u32, ip: &str) -> MemberAdmitted {
    MemberAdmitted {
        node_id: node.into(),
        role,
        mgmt_ip: ip.into(),
        bindings: StringMap::new(),
        labels: rack("r1"),
        ordinal,
        join_request: None,
    }
}

/// The join request [`request`] records.
pub fn requested(id: &str, node: &str, ip: &str) -> DomainEvent {
    DomainEvent::JoinRequested(JoinRequested {
        request_id: id.into(),
        node_id: node.into(),
        mgmt_ip: ip.into(),
        labels: rack("r2"),
        facts: r#"{"cpus":8}"#.into(),
    })
}
