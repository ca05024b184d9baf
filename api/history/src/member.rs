//! The model of one member's lifecycle, decided by the domain itself.
//!
//! The failover test's clients admit members, complete or fail their
//! joins, decommission them and read them back. Each member is a key of
//! its own: its state is the domain's [`State`] folded from that member's
//! events only, and every write is decided by the domain's own
//! [`State::decide`] with one fixed [`CommandContext`], so the model cannot
//! drift from the rules the service enforces. The domain is pure, so the
//! same state and command always give the same decision, as the checker
//! requires.
//!
//! # What the test must keep to
//!
//! Partitioning by member is sound only if no rule spanning members
//! decides any answer, and the state folded from the clients' commands
//! is the member's real state only if nobody else writes to its stream:
//!
//! - every member is admitted with role `compute` (no raft votes, hence no
//!   quorum rule; no rack rule) and bindings and labels left out;
//! - each node id has a management address of its own, used by every
//!   admission of that node id and by no other member (the address must be
//!   unique among members; the model cannot see the others);
//! - join failures name steps that are not raft steps (`join/install`,
//!   not `join/raft-openbao`): a failure at a raft step owes a raft
//!   cleanup that the service itself records on the member's stream,
//!   which no client history contains; for the same reason no join
//!   progress is reported, and no node agent reports applied generations;
//! - no upgrade runs (its write freeze refuses every change);
//! - request bodies are valid (the HTTP layer's findings about a malformed
//!   body are not the domain's), and no `If-Match` is sent.
//!
//! Ordinals (max+1 over all members) differ from the service's, but no
//! answer the model compares shows them.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use stratum_domain::membership::{Member, MemberCommand};
use stratum_domain::state::{stream_of, EventCtx};
use stratum_domain::{Command, CommandContext, DomainEvent, State};

use crate::checker::Model;

/// The principal the model decides as: the principal only shows in who
/// admitted or decommissioned a member, which no compared answer shows.
pub const MODEL_PRINCIPAL: &str = "user/admin";

/// One request of the failover test about one member, as its HTTP
/// request says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberOp {
    /// `POST /v1/admin/cluster/members`
    /// `{"nodeId", "role": "compute", "mgmtIp"}`.
    Admit { node_id: String, mgmt_ip: String },
    /// `POST /v1/admin/cluster/members/{nodeId}/join-complete`.
    CompleteJoin { node_id: String },
    /// `POST /v1/admin/cluster/members/{nodeId}/join-failed`
    /// `{"step", "error"}`; `step` must not be a raft step.
    ReportJoinFailure {
        node_id: String,
        step: String,
        error: String,
    },
    /// `POST /v1/admin/cluster/members/{nodeId}/retry-join`.
    RetryJoin { node_id: String },
    /// `POST /v1/admin/cluster/members/{nodeId}/decommission`
    /// `{"reason"}` (not forced).
    Decommission { node_id: String, reason: String },
    /// `GET /v1/admin/cluster/members/{nodeId}`.
    Get { node_id: String },
}

impl MemberOp {
    pub fn node_id(&self) -> &str {
        match self {
            MemberOp::Admit { node_id, .. }
            | MemberOp::CompleteJoin { node_id }
            | MemberOp::ReportJoinFailure { node_id, .. }
            | MemberOp::RetryJoin { node_id }
            | MemberOp::Decommission { node_id, .. }
            | MemberOp::Get { node_id } => node_id,
        }
    }

    /// The command the API decides for this request (as
    /// `api/src/http/members.rs` builds it); `None` for the read.
    pub fn command(&self) -> Option<Command> {
        let node_id = self.node_id().to_owned();
        let c = match self {
            MemberOp::Admit { mgmt_ip, .. } => MemberCommand::Admit {
                node_id: Some(node_id),
                role: Some("compute".to_owned()),
                mgmt_ip: Some(mgmt_ip.clone()),
                bindings: Default::default(),
                labels: Default::default(),
            },
            MemberOp::CompleteJoin { .. } => MemberCommand::CompleteJoin { node_id },
            MemberOp::ReportJoinFailure { step, error, .. } => MemberCommand::ReportJoinFailure {
                node_id,
                step: Some(step.clone()),
                error: Some(error.clone()),
            },
            MemberOp::RetryJoin { .. } => MemberCommand::RetryJoin { node_id },
            MemberOp::Decommission { reason, .. } => MemberCommand::Decommission {
                node_id,
                reason: Some(reason.clone()),
                force: false,
            },
            MemberOp::Get { .. } => return None,
        };
        Some(Command::Member(c))
    }
}

/// What a request answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberRet {
    /// A write answered 2xx (201 for an admission, 200 otherwise, a kept
    /// answer to a retried `Idempotency-Key` included). A write the state
    /// already satisfies (completing an active member's join) is accepted
    /// and changes nothing, as the domain decides.
    Accepted,
    /// A write refused by the domain: the `code` member of the error body
    /// (`MEMBER_EXISTS`, `NOT_FOUND`, `MEMBER_NOT_JOINING`, ...), which
    /// must be the code the domain decides in the state the write took
    /// effect in. It changes nothing.
    Refused(String),
    /// A write definitely not carried out for a reason outside the domain
    /// (a 503 or 429 whose answer says nothing was stored): it changes
    /// nothing and says nothing about the state. (Dropping it from the
    /// history is equivalent.) A 503 that may have stored the write is no
    /// answer: record the operation with an unknown outcome.
    NotStored,
    /// A read answered 404.
    NotFound,
    /// A read answered the member: its `state` member, and its version
    /// (the number in its `ETag`), if the caller wants it compared.
    Found { state: String, version: Option<u64> },
}

/// The model state: the domain's [`State`] folded from one member's
/// events, shared (cloning it is cheap).
///
/// The domain's state is not `Hash` (its stream versions are a
/// `HashMap`), and the domain is not changed for a test tool; so equality
/// is the domain's own, over the whole state (exact: two states are equal
/// only if they are the same fold), and the hash is taken from a compact
/// part of it (the log position, and the member's lifecycle state and
/// version), which equal states share. States folded from the same
/// decisions in the same order are equal: every event is folded at the
/// same fixed time, by the same principal.
#[derive(Clone, Default)]
pub struct Folded(Arc<State>);

impl Folded {
    /// The whole domain state.
    pub fn domain(&self) -> &State {
        &self.0
    }

    /// The member, once admitted.
    pub fn member(&self) -> Option<&Member> {
        self.0.membership.members.values().next()
    }
}

impl PartialEq for Folded {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for Folded {}

impl Hash for Folded {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.position.hash(h);
        self.member().map(|m| (m.state, m.version)).hash(h);
    }
}

impl std::fmt::Debug for Folded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.member() {
            None => f.write_str("no member"),
            Some(m) => {
                write!(f, "{} v{}", m.state.as_str(), m.version)?;
                if let Some(step) = &m.failed_step {
                    write!(f, " (failed at {step})")?;
                }
                Ok(())
            }
        }
    }
}

/// The model: one key per node id.
#[derive(Clone, Debug)]
pub struct MemberModel {
    ctx: CommandContext,
}

impl Default for MemberModel {
    fn default() -> Self {
        Self::new()
    }
}

impl MemberModel {
    /// Decides as [`MODEL_PRINCIPAL`], holding every policy (as the
    /// service's own principal and the operator do), at one fixed time
    /// (the Unix epoch: the membership rules of these commands never read
    /// it).
    pub fn new() -> Self {
        Self {
            ctx: CommandContext {
                now: Default::default(),
                principal: MODEL_PRINCIPAL.to_owned(),
                held_policies: None,
            },
        }
    }

    /// `events` folded into `state`, as if appended after its position.
    fn fold(&self, state: &Folded, events: &[DomainEvent]) -> Folded {
        let mut s = State::clone(&state.0);
        for e in events {
            let stream = stream_of(e);
            let ctx = EventCtx {
                position: s.position + 1,
                stream_version: s.stream_version(&stream) + 1,
                occurred_at: self.ctx.now,
                principal: &self.ctx.principal,
            };
            s.evolve(&ctx, &stream, e);
        }
        Folded(Arc::new(s))
    }
}

impl Model for MemberModel {
    type Key = String;
    type Op = MemberOp;
    type Ret = MemberRet;
    type State = Folded;

    fn init(&self) -> Folded {
        Folded::default()
    }

    fn key(&self, op: &MemberOp) -> String {
        op.node_id().to_owned()
    }

    fn step(&self, state: &Folded, op: &MemberOp, ret: Option<&MemberRet>) -> Option<Folded> {
        if ret == Some(&MemberRet::NotStored) {
            return Some(state.clone());
        }
        let Some(cmd) = op.command() else {
            let member = state.0.membership.members.get(op.node_id());
            let fits = match (ret, member) {
                (None, _) | (Some(MemberRet::NotFound), None) => true,
                (Some(MemberRet::Found { state: s, version }), Some(m)) => {
                    m.state.as_str() == s && version.is_none_or(|v| v == m.version)
                }
                _ => false,
            };
            return fits.then(|| state.clone());
        };
        let decided = state.0.decide(&cmd, &self.ctx);
        let fits = match (ret, &decided) {
            (None, _) | (Some(MemberRet::Accepted), Ok(_)) => true,
            (Some(MemberRet::Refused(code)), Err(r)) => r.code.as_str() == code,
            _ => false,
        };
        if !fits {
            return None;
        }
        match decided {
            Ok(d) if !d.events.is_empty() => Some(self.fold(state, &d.events)),
            _ => Some(state.clone()),
        }
    }
}
