//! Test support: a given/when/then harness over the pure domain, and one
//! example of every event type (for codec tests and golden fixtures).

use chrono::{DateTime, TimeZone, Utc};

use crate::error::Refusal;
use crate::event::{
    DomainEvent, JoinRequested, MemberAdmitted, MemberJoinFailed, MemberRemovalStarted,
};
use crate::membership::{Raft, Role};
use crate::state::{stream_of, Command, CommandContext, Decision, EventCtx, State};

/// A fixed instant, so tests never read the clock.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

/// Folds `events` (all by `principal`) into a fresh state, positions 1..n.
pub fn given_by(principal: &str, events: &[DomainEvent]) -> State {
    let mut state = State::default();
    apply(&mut state, principal, events);
    state
}

pub fn given(events: &[DomainEvent]) -> State {
    given_by("user/admin", events)
}

/// Folds more events into `state`, as if appended after its position.
pub fn apply(state: &mut State, principal: &str, events: &[DomainEvent]) {
    for e in events {
        let stream = stream_of(e);
        let ctx = EventCtx {
            position: state.position + 1,
            stream_version: state.stream_version(&stream) + 1,
            occurred_at: t0() + chrono::Duration::seconds(state.position as i64 + 1),
            principal,
        };
        state.evolve(&ctx, &stream, e);
    }
}

pub fn when(state: &State, cmd: Command) -> Result<Decision, Refusal> {
    when_by(state, "user/admin", cmd)
}

pub fn when_by(state: &State, principal: &str, cmd: Command) -> Result<Decision, Refusal> {
    state.decide(
        &cmd,
        &CommandContext {
            now: t0(),
            principal: principal.to_owned(),
        },
    )
}

pub fn admitted(node_id: &str, role: Role, ordinal: u32) -> DomainEvent {
    DomainEvent::MemberAdmitted(MemberAdmitted {
        node_id: node_id.into(),
        role,
        mgmt_ip: format!("192.0.2.{}", 10 + ordinal),
        bindings: Default::default(),
        labels: [("topology.rack".to_owned(), "r1".to_owned())].into(),
        ordinal,
        join_request: None,
    })
}

/// One example of every event type, in the newest shape.
pub fn one_of_each() -> Vec<DomainEvent> {
    let n = || "n-msst0002".to_owned();
    vec![
        admitted("n-msst0002", Role::Hybrid, 2),
        DomainEvent::JoinProgressReported {
            node_id: n(),
            step: "join/raft-patroni".into(),
        },
        DomainEvent::MemberJoinCompleted { node_id: n() },
        DomainEvent::MemberJoinFailed(MemberJoinFailed {
            node_id: n(),
            step: "join/raft-openbao".into(),
            error: "connection refused".into(),
            rafts: vec![Raft::Patroni, Raft::Openbao],
        }),
        DomainEvent::RaftPeerRemoved {
            node_id: n(),
            raft: Raft::Ovn,
            already_gone: true,
        },
        DomainEvent::RaftCleanupCompleted { node_id: n() },
        DomainEvent::MemberJoinRetried { node_id: n() },
        DomainEvent::MemberRemovalStarted(MemberRemovalStarted {
            node_id: n(),
            reason: "disk failed".into(),
            forced: false,
            rafts: vec![Raft::Patroni, Raft::Openbao, Raft::Ovn],
        }),
        DomainEvent::MemberDecommissioned {
            node_id: n(),
            reason: "disk failed".into(),
            by: "user/alice".into(),
        },
        DomainEvent::AppliedGenerationReported {
            node_id: n(),
            generation: 42,
        },
        DomainEvent::JoinRequested(JoinRequested {
            request_id: "jr-0000000001".into(),
            node_id: "n-msst0003".into(),
            mgmt_ip: "192.0.2.13".into(),
            labels: [("topology.rack".to_owned(), "r2".to_owned())].into(),
            facts: r#"{"cpus":8}"#.into(),
        }),
        DomainEvent::JoinRequestApproved {
            request_id: "jr-0000000001".into(),
            node_id: "n-msst0003".into(),
        },
        DomainEvent::JoinRequestRejected {
            request_id: "jr-0000000002".into(),
            reason: "unknown hardware".into(),
        },
        DomainEvent::TokenIssued(crate::iam::TokenIssued {
            token_id: "tok-0000000001".into(),
            principal: "user/admin".into(),
            secret_sha256: [7; 32],
            policies: vec!["AdministratorAccess".into()],
            expires_at: Some(t0() + chrono::Duration::days(30)),
        }),
    ]
}
