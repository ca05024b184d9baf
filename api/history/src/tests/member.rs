//! The member model: the domain's own decisions, and the bad histories a
//! failover could produce.

use crate::member::{MemberModel, MemberOp, MemberRet};
use crate::{check, Model, Operation, Options, Report, Verdict};

type Op = Operation<MemberOp, MemberRet>;

const N: &str = "n-compute1";

fn admit() -> MemberOp {
    MemberOp::Admit {
        node_id: N.into(),
        mgmt_ip: "192.0.2.51".into(),
    }
}

fn complete() -> MemberOp {
    MemberOp::CompleteJoin { node_id: N.into() }
}

fn join_failed() -> MemberOp {
    MemberOp::ReportJoinFailure {
        node_id: N.into(),
        step: "join/install".into(),
        error: "disk not found".into(),
    }
}

fn retry() -> MemberOp {
    MemberOp::RetryJoin { node_id: N.into() }
}

fn decommission() -> MemberOp {
    MemberOp::Decommission {
        node_id: N.into(),
        reason: "failover test".into(),
    }
}

fn get() -> MemberOp {
    MemberOp::Get { node_id: N.into() }
}

fn refused(code: &str) -> MemberRet {
    MemberRet::Refused(code.into())
}

/// A read that saw the member in `state`, version not compared.
fn saw(state: &str) -> MemberRet {
    MemberRet::Found {
        state: state.into(),
        version: None,
    }
}

/// A read that saw the member in `state` at `version`.
fn saw_at(state: &str, version: u64) -> MemberRet {
    MemberRet::Found {
        state: state.into(),
        version: Some(version),
    }
}

fn op(client: usize, op: MemberOp, from: u64, ret: MemberRet, to: u64) -> Op {
    Operation::returned(client, op, from, ret, to)
}

fn checked(history: &[Op]) -> Report<String> {
    check(&MemberModel::new(), history, &Options::default())
}

fn assert_linearizable(history: &[Op]) {
    let report = checked(history);
    assert_eq!(report.verdict(), Verdict::Linearizable, "{report}");
}

fn assert_violation(history: &[Op]) -> crate::Violation<String> {
    let report = checked(history);
    assert_eq!(report.verdict(), Verdict::Violation, "{report}");
    assert_eq!(report.violations[0].key, N);
    report.violations.into_iter().next().unwrap()
}

#[test]
fn the_model_decides_as_the_domain_does() {
    let m = MemberModel::new();
    let s0 = m.init();
    assert!(s0.member().is_none());
    let acc = Some(&MemberRet::Accepted);
    // Joining, then active, then decommissioned: a compute member is in
    // no raft, so its removal completes at once (two events).
    let s1 = m.step(&s0, &admit(), acc).unwrap();
    assert_eq!(format!("{s1:?}"), "joining v1");
    let s2 = m.step(&s1, &complete(), acc).unwrap();
    assert_eq!(format!("{s2:?}"), "active v2");
    let s3 = m.step(&s2, &decommission(), acc).unwrap();
    assert_eq!(format!("{s3:?}"), "decommissioned v4");
    // The domain's refusals, by code; anything else does not fit.
    let exists = refused("MEMBER_EXISTS");
    assert_eq!(m.step(&s1, &admit(), Some(&exists)), Some(s1.clone()));
    assert_eq!(m.step(&s1, &admit(), acc), None);
    assert_eq!(m.step(&s1, &admit(), Some(&refused("INVALID_INPUT"))), None);
    let not_found = refused("NOT_FOUND");
    assert_eq!(m.step(&s0, &complete(), Some(&not_found)), Some(s0.clone()));
    let not_joining = refused("MEMBER_NOT_JOINING");
    assert_eq!(
        m.step(&s3, &complete(), Some(&not_joining)),
        Some(s3.clone())
    );
    // Completing an active member's join again is accepted, unchanged.
    assert_eq!(m.step(&s2, &complete(), acc), Some(s2.clone()));
    // An unknown outcome leaves the state the command leads to.
    assert_eq!(m.step(&s0, &admit(), None), Some(s1.clone()));
    assert_eq!(m.step(&s1, &admit(), None), Some(s1.clone()));
    // Not stored: no change, whatever the state.
    assert_eq!(
        m.step(&s2, &decommission(), Some(&MemberRet::NotStored)),
        Some(s2.clone())
    );
    // Reads compare the state, and the version when given.
    assert!(m.step(&s0, &get(), Some(&MemberRet::NotFound)).is_some());
    assert!(m.step(&s1, &get(), Some(&MemberRet::NotFound)).is_none());
    assert!(m.step(&s2, &get(), Some(&saw("active"))).is_some());
    assert!(m.step(&s2, &get(), Some(&saw_at("active", 2))).is_some());
    assert!(m.step(&s2, &get(), Some(&saw_at("active", 3))).is_none());
    assert!(m.step(&s2, &get(), Some(&saw("joining"))).is_none());
}

#[test]
fn states_folded_from_the_same_decisions_are_equal_and_others_are_not() {
    use std::hash::{BuildHasher, RandomState};
    let m = MemberModel::new();
    let acc = Some(&MemberRet::Accepted);
    let a = m.step(&m.init(), &admit(), acc).unwrap();
    let b = m.step(&m.init(), &admit(), None).unwrap();
    assert_eq!(a, b);
    let hasher = RandomState::new();
    assert_eq!(hasher.hash_one(&a), hasher.hash_one(&b));
    // Failed at another step: same lifecycle state and version, yet not
    // the same state (the domain would answer differently).
    let other_step = MemberOp::ReportJoinFailure {
        node_id: N.into(),
        step: "join/network".into(),
        error: "disk not found".into(),
    };
    let f1 = m.step(&a, &join_failed(), acc).unwrap();
    let f2 = m.step(&a, &other_step, acc).unwrap();
    assert_eq!(format!("{f1:?}"), "failed v3 (failed at join/install)");
    assert_ne!(f1, f2);
    assert_eq!(f1.member().unwrap().version, f2.member().unwrap().version);
}

#[test]
fn a_whole_lifecycle_is_linearizable() {
    assert_linearizable(&[
        op(1, get(), 0, MemberRet::NotFound, 5),
        op(1, admit(), 10, MemberRet::Accepted, 20),
        op(2, get(), 30, saw_at("joining", 1), 40),
        op(1, complete(), 50, MemberRet::Accepted, 60),
        op(2, get(), 70, saw_at("active", 2), 80),
        op(3, complete(), 90, MemberRet::Accepted, 100),
        op(1, decommission(), 110, MemberRet::Accepted, 120),
        op(2, get(), 130, saw_at("decommissioned", 4), 140),
        op(3, complete(), 150, refused("MEMBER_NOT_JOINING"), 160),
        op(3, admit(), 170, refused("MEMBER_EXISTS"), 180),
        op(1, decommission(), 190, MemberRet::Accepted, 200),
        op(2, get(), 210, saw_at("decommissioned", 4), 220),
    ]);
}

#[test]
fn a_failed_join_retried_is_linearizable() {
    assert_linearizable(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(1, join_failed(), 20, MemberRet::Accepted, 30),
        op(2, get(), 40, saw_at("failed", 3), 50),
        op(2, complete(), 60, refused("MEMBER_NOT_JOINING"), 70),
        op(1, retry(), 80, MemberRet::Accepted, 90),
        op(2, get(), 100, saw_at("joining", 4), 110),
        op(1, complete(), 120, MemberRet::Accepted, 130),
        op(2, retry(), 140, refused("MEMBER_NOT_FAILED"), 150),
    ]);
}

#[test]
fn overlapping_admissions_one_accepted_one_refused_are_linearizable() {
    assert_linearizable(&[
        op(1, admit(), 0, MemberRet::Accepted, 20),
        op(2, admit(), 5, refused("MEMBER_EXISTS"), 15),
        // Concurrent reads may see either side of the admission.
        op(3, get(), 2, MemberRet::NotFound, 12),
        op(4, get(), 3, saw("joining"), 13),
    ]);
    // The refused one may have finished first: the accepted one took
    // effect before it nonetheless.
    assert_linearizable(&[
        op(1, admit(), 0, MemberRet::Accepted, 30),
        op(2, admit(), 5, refused("MEMBER_EXISTS"), 10),
    ]);
}

#[test]
fn two_acknowledged_admissions_of_one_node_are_a_violation() {
    assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 20),
        op(2, admit(), 5, MemberRet::Accepted, 15),
    ]);
    assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(2, admit(), 20, MemberRet::Accepted, 30),
    ]);
}

#[test]
fn an_acknowledged_admission_lost_after_a_failover_is_a_violation() {
    let v = assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(2, get(), 20, saw("joining"), 30),
        op(2, get(), 40, MemberRet::NotFound, 50),
    ]);
    assert_eq!(v.longest_prefix, [0, 1]);
    assert_eq!(v.blocked, 2);
    assert!(v.description.contains("=> joining v1"), "{v}");
    // Never read before: lost all the same.
    assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(2, get(), 20, MemberRet::NotFound, 30),
    ]);
}

#[test]
fn a_stale_read_after_a_completed_write_is_a_violation() {
    assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(1, complete(), 20, MemberRet::Accepted, 30),
        op(2, get(), 40, saw("joining"), 50),
    ]);
}

#[test]
fn a_read_of_a_state_never_reached_is_a_violation() {
    // Active without a join completed.
    assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(2, get(), 5, saw("active"), 50),
    ]);
    // Joining at a version no history of it has.
    assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(2, get(), 20, saw_at("joining", 2), 30),
    ]);
}

#[test]
fn a_refusal_that_contradicts_the_state_is_a_violation() {
    assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(2, decommission(), 20, refused("NOT_FOUND"), 30),
    ]);
    // The right refusal with the wrong code.
    assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(2, admit(), 20, refused("INVALID_INPUT"), 30),
    ]);
}

#[test]
fn a_read_that_goes_back_in_time_is_a_violation() {
    assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(1, complete(), 20, MemberRet::Accepted, 100),
        op(2, get(), 30, saw("active"), 40),
        op(2, get(), 50, saw("joining"), 60),
    ]);
}

#[test]
fn reads_concurrent_with_a_completion_may_see_either_state() {
    assert_linearizable(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(1, complete(), 20, MemberRet::Accepted, 100),
        op(2, get(), 30, saw("joining"), 40),
        op(2, get(), 50, saw("active"), 60),
        op(3, get(), 25, saw("joining"), 90),
    ]);
}

#[test]
fn an_admission_of_unknown_outcome_may_take_effect_late_or_never() {
    let unknown = || Operation::unknown(1, admit(), 0);
    // Seen.
    assert_linearizable(&[unknown(), op(2, get(), 10, saw("joining"), 20)]);
    // Never seen.
    assert_linearizable(&[unknown(), op(2, get(), 10, MemberRet::NotFound, 20)]);
    // Not seen, then seen: it was still being carried out.
    assert_linearizable(&[
        unknown(),
        op(2, get(), 10, MemberRet::NotFound, 20),
        op(2, get(), 30, saw_at("joining", 1), 40),
    ]);
    // Another client's admission won: the unknown one was refused, or
    // never happened.
    assert_linearizable(&[
        unknown(),
        op(2, admit(), 10, MemberRet::Accepted, 20),
        op(2, get(), 30, saw_at("joining", 1), 40),
    ]);
}

#[test]
fn an_admission_of_unknown_outcome_once_seen_stays_seen() {
    assert_violation(&[
        Operation::unknown(1, admit(), 0),
        op(2, get(), 10, saw("joining"), 20),
        op(2, get(), 30, MemberRet::NotFound, 40),
    ]);
    // Nor can it be seen before it was sent.
    assert_violation(&[
        op(2, get(), 0, saw("joining"), 10),
        Operation::unknown(1, admit(), 20),
    ]);
    // Seen, so a later acknowledged admission must have been refused.
    assert_violation(&[
        Operation::unknown(1, admit(), 0),
        op(2, get(), 10, saw("joining"), 20),
        op(3, admit(), 30, MemberRet::Accepted, 40),
    ]);
}

#[test]
fn a_decommission_of_unknown_outcome_seen_is_final() {
    assert_violation(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        Operation::unknown(1, decommission(), 20),
        op(2, get(), 30, saw("decommissioned"), 40),
        op(3, complete(), 50, MemberRet::Accepted, 60),
    ]);
    // Not seen, a completed join may precede it.
    assert_linearizable(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        Operation::unknown(1, decommission(), 20),
        op(3, complete(), 50, MemberRet::Accepted, 60),
        op(2, get(), 70, saw_at("decommissioned", 4), 80),
    ]);
}

#[test]
fn a_write_not_stored_changes_nothing() {
    assert_linearizable(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(1, decommission(), 20, MemberRet::NotStored, 30),
        op(2, get(), 40, saw_at("joining", 1), 50),
    ]);
}

#[test]
fn memoization_keeps_concurrent_reads_of_a_member_from_blowing_up() {
    // An admission concurrent with 2n reads, n before it and n after it,
    // then a read of a state never reached: n!² orders to rule out, but
    // 2^n + 4^n configurations.
    let n = 7;
    let mut history = vec![op(0, admit(), 0, MemberRet::Accepted, 1000)];
    for i in 0..n {
        history.push(op(1 + i, get(), 1 + i as u64, MemberRet::NotFound, 900));
        history.push(op(100 + i, get(), 1 + i as u64, saw("joining"), 900));
    }
    history.push(op(999, get(), 2000, saw("active"), 2001));
    let report = checked(&history);
    assert_eq!(report.verdict(), Verdict::Violation, "{report}");
    let s = &report.stats;
    assert!(s.configurations <= (1 << n) + (1 << (2 * n)), "{s:?}");
    // The domain decides each (state, operation) once: two states (no
    // member, joining) by 16 operations at most.
    assert!(s.model_steps <= 2 * history.len() as u64, "{s:?}");
    let plain = check(
        &MemberModel::new(),
        &history,
        &Options::default().without_memoization(),
    );
    assert_eq!(plain.verdict(), Verdict::Inconclusive, "{plain}");
}

#[test]
fn members_are_checked_independently() {
    let other = |op: MemberOp| match op {
        MemberOp::Admit { .. } => MemberOp::Admit {
            node_id: "n-compute2".into(),
            mgmt_ip: "192.0.2.52".into(),
        },
        MemberOp::Get { .. } => MemberOp::Get {
            node_id: "n-compute2".into(),
        },
        _ => unreachable!(),
    };
    let report = checked(&[
        op(1, admit(), 0, MemberRet::Accepted, 10),
        op(2, other(admit()), 0, MemberRet::Accepted, 10),
        op(3, get(), 20, saw("joining"), 30),
        op(3, other(get()), 20, MemberRet::NotFound, 30),
    ]);
    assert_eq!(report.stats.partitions, 2);
    assert_eq!(report.violations.len(), 1, "{report}");
    assert_eq!(report.violations[0].key, "n-compute2");
    assert_eq!(report.violations[0].operations, [1, 3]);
}

/// Histories like the failover test's, linearizable by construction:
/// `members` members, `per_member` requests each from 4 clients with
/// overlapping intervals, each taking effect at a point drawn inside its
/// interval and answering what the domain answers there. A tenth of the
/// writes never hear back, and half of those never took effect.
fn generated(rng: &mut super::Lcg, members: usize, per_member: u64) -> Vec<Op> {
    use stratum_domain::CommandContext;
    let m = MemberModel::new();
    let ctx = CommandContext {
        now: Default::default(),
        principal: crate::member::MODEL_PRINCIPAL.into(),
        held_policies: None,
    };
    let mut out = Vec::new();
    for member in 0..members {
        let node_id = format!("n-gen{member}");
        let mut ops = Vec::new();
        for i in 0..per_member {
            let invoked = i * 5 + rng.below(5);
            let len = 1 + rng.below(40);
            let point = invoked + rng.below(len);
            let node_id = node_id.clone();
            let op = match rng.below(12) {
                0..=1 => MemberOp::Admit {
                    node_id,
                    mgmt_ip: format!("10.0.{}.{}", member / 250, member % 250 + 1),
                },
                2 => MemberOp::CompleteJoin { node_id },
                3 => MemberOp::ReportJoinFailure {
                    node_id,
                    step: "join/install".into(),
                    error: "disk not found".into(),
                },
                4 => MemberOp::RetryJoin { node_id },
                5 => MemberOp::Decommission {
                    node_id,
                    reason: "failover test".into(),
                },
                _ => MemberOp::Get { node_id },
            };
            let unknown = op.command().is_some() && rng.below(10) == 0;
            let applied = !unknown || rng.below(2) == 0;
            ops.push((point, invoked, invoked + len, op, unknown, applied));
        }
        ops.sort_by_key(|o| o.0);
        let mut state = m.init();
        for (n, (_, invoked, returned, op, unknown, applied)) in ops.into_iter().enumerate() {
            let ret = match (op.command(), state.member()) {
                (None, None) => MemberRet::NotFound,
                (None, Some(s)) => saw_at(s.state.as_str(), s.version),
                (Some(cmd), _) => match state.domain().decide(&cmd, &ctx) {
                    Ok(_) => MemberRet::Accepted,
                    Err(r) => MemberRet::Refused(r.code.as_str().into()),
                },
            };
            if applied {
                state = m
                    .step(&state, &op, Some(&ret))
                    .expect("the domain's answer");
            }
            out.push(match unknown {
                true => Operation::unknown(n % 4, op, invoked),
                false => Operation::returned(n % 4, op, invoked, ret, returned),
            });
        }
    }
    out
}

#[test]
fn failover_sized_histories_are_checked_cheaply() {
    let mut history = generated(&mut super::Lcg(11), 200, 30);
    let report = checked(&history);
    assert_eq!(report.verdict(), Verdict::Linearizable, "{report}");
    let s = &report.stats;
    assert_eq!((s.partitions, s.operations), (200, 6000));
    assert!(s.unknown > 100, "{s:?}");
    assert!(s.steps < 50 * 6000, "{s:?}");

    // One read that saw a member joining at version 1 now says active at
    // version 1, which no history of a member has: that member alone
    // fails.
    let i = history
        .iter()
        .position(|o| o.ret() == Some(&saw_at("joining", 1)))
        .unwrap();
    history[i].outcome = crate::Outcome::Returned {
        ret: saw_at("active", 1),
        at: history[i].returned_at().unwrap(),
    };
    let report = checked(&history);
    assert_eq!(report.violations.len(), 1, "{report}");
    assert_eq!(report.violations[0].key, history[i].op.node_id());
    assert!(report.violations[0].operations.contains(&i));
}
