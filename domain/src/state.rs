//! The whole decision state of the service, the commands it decides, and
//! the one `decide`/`evolve` pair the command path calls.
//!
//! Every stream lives in one [`State`] so that rules spanning streams (a
//! mgmt address unique among members, the ordinal as max+1, quorum) are
//! decided against one consistent view; the command path holds the state of
//! the whole log under its write lock.

use chrono::{DateTime, Utc};

use crate::error::{ErrorCode, Refusal};
use crate::event::DomainEvent;
use crate::iam::{
    policy_stream, principal_stream, resource_policy_stream, token_stream, Iam, IamCommand,
};
use crate::log::Recorded;
use crate::membership::{join_request_stream, member_stream, MemberCommand, Membership};
use crate::release::{release_stream, RUNNING_RELEASE_STREAM};
use crate::upgrade::{upgrade_stream, UpgradeCommand, Upgrades};

/// What a command is decided with besides the state: when and by whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandContext {
    pub now: DateTime<Utc>,
    pub principal: String,
    /// The policies the caller holds (its token's and its principal's),
    /// for the rule that nobody grants what they do not hold; `None` for
    /// the service itself and the host's operator (the CLI).
    pub held_policies: Option<Vec<String>>,
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
    Upgrade(String),
    Release(String),
    RunningRelease,
    Policy(String),
    Principal(String),
    ResourcePolicy(String),
    /// A node's facts report.
    Facts(String),
    /// An alarm, by its key.
    Alarm(String),
    /// The log's storage version.
    StorageVersion,
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
    Upgrade(UpgradeCommand),
    /// Finalize the log's storage version (an upgrade of stratum itself).
    Finalize(crate::storage::Finalize),
}

impl Command {
    /// The stream the command is addressed to; `If-Match` is checked
    /// against its version.
    pub fn stream_id(&self) -> String {
        match self {
            Command::Member(c) => c.stream_id(),
            Command::Iam(c) => c.stream_id(),
            Command::Upgrade(c) => c.stream_id(),
            Command::Finalize(_) => crate::storage::STORAGE_STREAM.to_owned(),
        }
    }

    /// Whether the command may run while an upgrade freezes writes (node
    /// facts included: they are observations, not changes): the
    /// upgrade's own reports (node reports, backup, applied generation),
    /// its driver and its cancel, the raft cleanup the service itself
    /// records (a removal, and a removed peer seen back: a stale voter is
    /// never left waiting for an upgrade), and token issue and revocation.
    /// Every other change waits.
    pub fn passes_write_freeze(&self) -> bool {
        match self {
            Command::Upgrade(c) => c.passes_write_freeze(),
            Command::Member(c) => matches!(
                c,
                MemberCommand::ReportAppliedGeneration { .. }
                    | MemberCommand::RecordRaftRemoval { .. }
                    | MemberCommand::RecordRaftPeerReturn { .. }
            ),
            // A leaked token can always be revoked, and an expired or
            // revoked one replaced, however long an upgrade holds the
            // freeze: the node agents and operators driving it need them.
            Command::Iam(c) => matches!(
                c,
                IamCommand::RevokeToken { .. } | IamCommand::IssueToken { .. }
            ),
            // Finalizing stratum's own upgrade does not change the cloud's
            // membership: it need not wait for the cloud's upgrade.
            Command::Finalize(_) => true,
        }
    }
}

/// The stream an event belongs to.
pub fn stream_of(event: &DomainEvent) -> String {
    use crate::event::About;
    match event.about() {
        About::Member(id) => member_stream(id),
        // An upgrade's alarm is part of the upgrade's history.
        About::Upgrade(id)
        | About::Alarm {
            upgrade: Some(id), ..
        } => upgrade_stream(id),
        About::Alarm {
            name,
            upgrade: None,
        } => format!("alarm/{name}"),
        About::JoinRequest(id) => join_request_stream(id),
        About::Token(id) => token_stream(id),
        About::Policy(name) => policy_stream(name),
        About::Principal(p) => principal_stream(p),
        About::ResourcePolicy(r) => resource_policy_stream(r),
        About::Release(v) => release_stream(v),
        About::RunningRelease => RUNNING_RELEASE_STREAM.to_owned(),
        About::Facts(node) => crate::upgrade::facts_stream(node),
        About::Storage => crate::storage::STORAGE_STREAM.to_owned(),
    }
}

/// Serializable for snapshots: a cache of the fold at a position, which a
/// replay can always rebuild.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct State {
    pub membership: Membership,
    pub iam: Iam,
    pub upgrades: Upgrades,
    /// The log's storage version: what may be written.
    #[serde(default)]
    pub storage: crate::storage::StorageVersion,
    /// The version of every stream.
    pub streams: crate::Map<String, u64>,
    /// The position of the last event folded.
    pub position: u64,
}

impl State {
    pub fn stream_version(&self, stream_id: &str) -> u64 {
        self.streams.get(stream_id).copied().unwrap_or(0)
    }

    /// `If-Match`: the stream a command addresses must be at the version
    /// its request names (PRECONDITION_FAILED, with the current version).
    pub fn expect_version(&self, stream_id: &str, expected: u64) -> Result<(), Refusal> {
        let current = self.stream_version(stream_id);
        if current == expected {
            return Ok(());
        }
        Err(Refusal::new(
            ErrorCode::PreconditionFailed,
            format!("{stream_id} is at version {current}, not {expected}."),
        )
        .with_details(serde_json::json!({ "currentVersion": current })))
    }

    /// Decides a command. The write freeze of SPEC §5 is decided here, in
    /// the one place every change passes, not in each handler.
    pub fn decide(&self, cmd: &Command, ctx: &CommandContext) -> Result<Decision, Refusal> {
        if let Some(u) = self.upgrades.write_freeze() {
            if !cmd.passes_write_freeze() {
                return Err(Refusal::new(
                    ErrorCode::UpgradeInProgress,
                    format!(
                        "Upgrade {} is {}: changes wait until it ends. Reads keep working. {}",
                        u.id,
                        u.state.as_str(),
                        u.waiting_for()
                    ),
                )
                .with_details(serde_json::json!({
                    "upgradeId": u.id,
                    "state": u.state.as_str(),
                    "retryAfterSeconds": u.retry_after(ctx.now),
                })));
            }
        }
        if let (Command::Member(MemberCommand::Decommission { .. }), Some(u)) =
            (cmd, self.upgrades.active_upgrade())
        {
            // Its plan names every member; one leaving now would be waited
            // for in vain.
            return Err(Refusal::new(
                ErrorCode::UpgradeStateConflict,
                format!(
                    "Upgrade {} is {}: a member leaves once it ends; cancel it first if it must not wait.",
                    u.id,
                    u.state.as_str()
                ),
            )
            .with_details(serde_json::json!({ "upgradeId": u.id, "state": u.state.as_str() })));
        }
        match cmd {
            Command::Member(c) => self.membership.decide(c, ctx),
            Command::Iam(c) => self.iam.decide(self, c, ctx),
            Command::Upgrade(c) => self.upgrades.decide(self, c, ctx),
            Command::Finalize(c) => self.storage.decide(c, ctx),
        }
    }

    /// The upgrade whose driver step is due at `now`, if any: what the
    /// upgrade driver acts on.
    pub fn upgrade_step_due(&self, now: DateTime<Utc>) -> Option<&str> {
        let u = self.upgrades.active_upgrade()?;
        let ctx = CommandContext {
            now,
            principal: crate::iam::SERVICE_PRINCIPAL.to_owned(),
            held_policies: None,
        };
        match self.upgrades.decide(self, &UpgradeCommand::Advance, &ctx) {
            Ok(d) if !d.events.is_empty() => Some(&u.id),
            _ => None,
        }
    }

    /// When, after `now`, a time-driven step of the active upgrade may fall
    /// due next (the end of a settling, a reboot alarm).
    pub fn upgrade_wake_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.upgrades
            .active_upgrade()?
            .next_time_step(&self.upgrades, now)
    }

    pub fn evolve(&mut self, ctx: &EventCtx, stream_id: &str, event: &DomainEvent) {
        self.position = ctx.position;
        // A stream already known is updated in place: no copy of its id.
        match self.streams.get_mut(stream_id) {
            Some(v) => *v = ctx.stream_version,
            None => {
                self.streams
                    .insert(stream_id.to_owned(), ctx.stream_version);
            }
        }
        self.membership.evolve(ctx, event);
        self.iam.evolve(ctx, event);
        self.upgrades.evolve(ctx, event);
        self.storage.evolve(ctx, event);
    }
}
