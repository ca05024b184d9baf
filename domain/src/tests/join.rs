//! A member's join (SPEC §4, seed 000): progress, completion, failure and retry.

use super::support::membership::*;

// ---------------------------------------------------------------------------
// Join progress
// ---------------------------------------------------------------------------

#[test]
fn progress_of_a_raft_step_adds_the_raft_reached() {
    let mut s = cluster_with(MemberState::Joining);
    let generation = s.membership.generation;
    s.when_by(ADMIN, progress("n-3", "join/raft-patroni"))
        .then_appended(
            &mut s,
            vec![DomainEvent::JoinProgressReported {
                node_id: "n-3".into(),
                step: "join/raft-patroni".into(),
            }],
        );
    s.when(progress("n-3", "join/raft-openbao"))
        .then_appended(&mut s, [progressed("n-3", "join/raft-openbao")]);
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
    s.when(progress("n-3", "join/install-packages"))
        .then_appended(&mut s, [progressed("n-3", "join/install-packages")]);
    let m = member(&s, "n-3");
    assert_eq!(m.join_step.as_deref(), Some("join/install-packages"));
    assert!(m.rafts_reached.is_empty());
}

#[test]
fn the_same_step_twice_appends_nothing() {
    let d = cluster_with(MemberState::Joining)
        .and(&[progressed("n-3", "join/raft-ovn")])
        .when(progress("n-3", "join/raft-ovn"))
        .then_nothing();
    assert_member_unchanged(&d, "n-3");
}

#[test]
fn progress_is_refused_unless_joining() {
    for state in NOT_JOINING {
        let r = cluster_with(state)
            .when(progress("n-3", "join/raft-patroni"))
            .then_refused(ErrorCode::MemberNotJoining);
        assert_eq!(r.details, Some(json!({ "state": state.as_str() })));
    }
}

#[test]
fn progress_needs_a_join_step_name() {
    let s = cluster_with(MemberState::Joining);
    let r = s
        .when(MemberCommand::ReportJoinProgress {
            node_id: "n-3".into(),
            step: None,
        })
        .then_invalid(&["step"]);
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
        s.when(progress("n-3", bad)).then_invalid(&["step"]);
    }
    s.when(progress("n-3", "join/0-first"))
        .then([progressed("n-3", "join/0-first")]);
}

#[test]
fn progress_of_an_unknown_node_is_not_found() {
    founders()
        .when(progress("n-9", "join/raft-patroni"))
        .then_refused(ErrorCode::NotFound);
}

// ---------------------------------------------------------------------------
// Join complete
// ---------------------------------------------------------------------------

#[test]
fn complete_moves_joining_to_active() {
    let mut s = cluster_with(MemberState::Joining).and(&[progressed("n-3", "join/raft-ovn")]);
    s.when_by(ADMIN, complete("n-3"))
        .then_appended(&mut s, vec![completed("n-3")]);
    let m = member(&s, "n-3");
    assert_eq!(m.state, MemberState::Active);
    assert_eq!(m.join_step, None);
    assert_eq!(s.membership.generation, s.position);
    assert_eq!(s.membership.active_voters(), 3);
}

#[test]
fn complete_of_an_active_member_answers_it_unchanged() {
    let d = cluster_with(MemberState::Active)
        .when(complete("n-3"))
        .then_nothing();
    assert_member_unchanged(&d, "n-3");
}

#[test]
fn complete_is_refused_for_failed_removing_and_decommissioned() {
    for state in [
        MemberState::Failed,
        MemberState::Removing,
        MemberState::Decommissioned,
    ] {
        cluster_with(state)
            .when(complete("n-3"))
            .then_refused(ErrorCode::MemberNotJoining);
    }
}

#[test]
fn complete_of_an_unknown_node_is_not_found() {
    founders()
        .when(complete("n-9"))
        .then_refused(ErrorCode::NotFound);
}

// ---------------------------------------------------------------------------
// Join failed (seed 000)
// ---------------------------------------------------------------------------

#[test]
fn join_failed_moves_a_joining_member_to_failed() {
    let mut s = cluster_with(MemberState::Joining).and(&[progressed("n-3", "join/raft-patroni")]);
    let d = s
        .when_by(
            "node/n-3",
            fail("n-3", "join/raft-openbao", "connection refused"),
        )
        .then_appended(
            &mut s,
            vec![DomainEvent::MemberJoinFailed(MemberJoinFailed {
                node_id: "n-3".into(),
                step: "join/raft-openbao".into(),
                error: "connection refused".into(),
                rafts: vec![Raft::Patroni, Raft::Openbao],
            })],
        );
    assert_eq!(d.subject, Subject::Member("n-3".into()));
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
        let d = s
            .when(fail("n-3", "join/raft-ovn", "timeout"))
            .then_nothing();
        assert_member_unchanged(&d, "n-3");
    }
}

#[test]
fn join_failed_of_a_failed_member_keeps_its_first_failure() {
    let s = cluster_with(MemberState::Failed);
    let d = s
        .when(fail("n-3", "join/raft-ovn", "another error"))
        .then_nothing();
    assert_member_unchanged(&d, "n-3");
    let m = member(&s, "n-3");
    assert_eq!(m.failed_step.as_deref(), Some("join/raft-openbao"));
    assert_eq!(m.failed_error.as_deref(), Some("connection refused"));
}

#[test]
fn join_failed_names_both_step_and_error_when_both_are_missing() {
    let s = cluster_with(MemberState::Joining);
    let r = s
        .when(MemberCommand::ReportJoinFailure {
            node_id: "n-3".into(),
            step: None,
            error: None,
        })
        .then_invalid(&["step", "error"]);
    assert_eq!(message_of(&r, "step"), "is required");
    assert_eq!(message_of(&r, "error"), "is required");
}

#[test]
fn join_failed_names_both_fields_when_both_are_bad() {
    let s = cluster_with(MemberState::Joining);
    s.when(fail("n-3", "raft-openbao", "line one\nline two"))
        .then_invalid(&["step", "error"]);
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
        let r = s
            .when(fail("n-3", "join/raft-openbao", &error))
            .then_invalid(&["error"]);
        assert_eq!(message_of(&r, "error"), message, "{error:?}");
    }
    for error in ["x".repeat(2048), "é".repeat(1024), "a".into()] {
        s.when(fail("n-3", "join/raft-openbao", &error))
            .then([join_failed(
                "n-3",
                "join/raft-openbao",
                &error,
                &[Raft::Openbao],
            )]);
    }
}

#[test]
fn join_failed_needs_a_join_step_name() {
    let s = cluster_with(MemberState::Joining);
    for bad in ["", "openbao", "join/", "join/Raft-Openbao"] {
        s.when(fail("n-3", bad, "timeout")).then_invalid(&["step"]);
    }
}

#[test]
fn join_failed_of_an_unknown_node_is_not_found() {
    founders()
        .when(fail("n-9", "join/raft-openbao", "timeout"))
        .then_refused(ErrorCode::NotFound);
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
        let reached: Vec<DomainEvent> = steps.iter().map(|st| progressed("n-3", st)).collect();
        let mut expected = vec![join_failed("n-3", failed_at, "boom", &rafts)];
        if rafts.is_empty() {
            expected.push(cleanup_completed("n-3"));
        }
        cluster_with(MemberState::Joining)
            .and(&reached)
            .when(fail("n-3", failed_at, "boom"))
            .then(expected);
    }
}

#[test]
fn a_failure_with_no_raft_to_clean_completes_its_cleanup_at_once() {
    let mut s =
        cluster_with(MemberState::Joining).and(&[progressed("n-3", "join/install-packages")]);
    s.when_by(ADMIN, fail("n-3", "join/firewall", "iptables: not found"))
        .then_appended(
            &mut s,
            vec![
                DomainEvent::MemberJoinFailed(MemberJoinFailed {
                    node_id: "n-3".into(),
                    step: "join/firewall".into(),
                    error: "iptables: not found".into(),
                    rafts: vec![],
                }),
                DomainEvent::RaftCleanupCompleted {
                    node_id: "n-3".into(),
                },
            ],
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
// Retry join
// ---------------------------------------------------------------------------

#[test]
fn retry_after_cleanup_moves_failed_back_to_joining() {
    let mut s = failed_and_cleaned();
    s.when_by(ADMIN, retry("n-3")).then_appended(
        &mut s,
        vec![DomainEvent::MemberJoinRetried {
            node_id: "n-3".into(),
        }],
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
    s.and(&[progressed("n-3", "join/raft-ovn")])
        .when(fail("n-3", "join/verify", "timeout"))
        .then([join_failed("n-3", "join/verify", "timeout", &[Raft::Ovn])]);
}

#[test]
fn retry_of_a_failure_with_no_raft_needs_no_cleanup() {
    cluster_with(MemberState::Joining)
        .and(&[
            join_failed("n-3", "join/packages", "apt: 404", &[]),
            cleanup_completed("n-3"),
        ])
        .when(retry("n-3"))
        .then([retried("n-3")]);
}

#[test]
fn retry_while_cleanup_is_pending_is_refused() {
    let mut s = cluster_with(MemberState::Failed);
    let r = s
        .when(retry("n-3"))
        .then_refused(ErrorCode::RaftCleanupPending);
    assert_eq!(
        r.details,
        Some(json!({ "pending": ["patroni", "openbao"] }))
    );
    s = s.and_by(CLEANER, &[raft_removed("n-3", Raft::Patroni)]);
    let r = s
        .when(retry("n-3"))
        .then_refused(ErrorCode::RaftCleanupPending);
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
        let r = cluster_with(state)
            .when(retry("n-3"))
            .then_refused(ErrorCode::MemberNotFailed);
        assert_eq!(r.details, Some(json!({ "state": state.as_str() })));
    }
}

#[test]
fn retry_of_an_unknown_node_is_not_found() {
    founders()
        .when(retry("n-9"))
        .then_refused(ErrorCode::NotFound);
}
