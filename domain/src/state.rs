//! The whole decision state of the service, the commands it decides, and
//! the one `decide`/`evolve` pair the command path calls.
//!
//! Every stream lives in one [`State`] so that rules spanning streams (a
//! mgmt address unique among members, the ordinal as max+1, quorum) are
//! decided against one consistent view; the command path holds the state of
//! the whole log under its write lock.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use crate::error::Refusal;
use crate::event::DomainEvent;
use crate::iam::{token_stream, Iam, IamCommand};
use crate::log::Recorded;
use crate::membership::{join_request_stream, member_of, member_stream, MemberCommand, Membership};

/// What a command is decided with besides the state: when and by whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandContext {
    pub now: DateTime<Utc>,
    pub principal: String,
}

/// What `evolve` learns about an event besides its payload.
#[derive(Clone, Copy, Debug)]
pub struct EventCtx<'a> {
    pub position: u64,
    pub stream_version: u64,
    pub occurred_at: DateTime<Utc>,
    pub principal: &'a str,
}

impl<'a> EventCtx<'a> {
    pub fn of(r: &'a Recorded) -> Self {
        Self {
            position: r.position,
            stream_version: r.stream_version,
            occurred_at: r.occurred_at,
            principal: &r.meta.principal,
        }
    }
}

/// The record a command's answer shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    Member(String),
    JoinRequest(String),
    Token(String),
}

/// The events a command decided (possibly none: the state already says what
/// the command asks), and the record its answer shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub events: Vec<DomainEvent>,
    pub subject: Subject,
}

impl Decision {
    pub fn none(subject: Subject) -> Self {
        Self {
            events: Vec::new(),
            subject,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Member(MemberCommand),
    Iam(IamCommand),
}

impl Command {
    /// The stream the command is addressed to; `If-Match` is checked
    /// against its version.
    pub fn stream_id(&self) -> String {
        match self {
            Command::Member(c) => c.stream_id(),
            Command::Iam(c) => c.stream_id(),
        }
    }
}

/// The stream an event belongs to.
pub fn stream_of(event: &DomainEvent) -> String {
    if let Some(node_id) = member_of(event) {
        return member_stream(node_id);
    }
    match event {
        DomainEvent::JoinRequested(r) => join_request_stream(&r.request_id),
        DomainEvent::JoinRequestApproved { request_id, .. }
        | DomainEvent::JoinRequestRejected { request_id, .. } => join_request_stream(request_id),
        DomainEvent::TokenIssued(t) => token_stream(&t.token_id),
        _ => unreachable!("member events are handled above"),
    }
}

/// Serializable for snapshots: a cache of the fold at a position, which a
/// replay can always rebuild.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct State {
    pub membership: Membership,
    pub iam: Iam,
    /// The version of every stream.
    pub streams: HashMap<String, u64>,
    /// The position of the last event folded.
    pub position: u64,
}

impl State {
    pub fn stream_version(&self, stream_id: &str) -> u64 {
        self.streams.get(stream_id).copied().unwrap_or(0)
    }

    pub fn decide(&self, cmd: &Command, ctx: &CommandContext) -> Result<Decision, Refusal> {
        match cmd {
            Command::Member(c) => self.membership.decide(c, ctx),
            Command::Iam(c) => self.iam.decide(c, ctx.now, self.position == 0),
        }
    }

    pub fn evolve(&mut self, ctx: &EventCtx, stream_id: &str, event: &DomainEvent) {
        self.position = ctx.position;
        self.streams
            .insert(stream_id.to_owned(), ctx.stream_version);
        self.membership.evolve(ctx, event);
        self.iam.evolve(ctx, event);
    }
}
