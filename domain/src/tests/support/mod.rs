//! What every test of the domain shares: one meaning per helper, and a
//! given/when/then over the whole decision state, as disintegrate's
//! `TestHarness::given(events).when(command).then(events)`:
//!
//! ```ignore
//! given(&[admitted("n-1", Role::Hybrid, 1)])
//!     .when(complete("n-1"))
//!     .then([DomainEvent::MemberJoinCompleted { node_id: "n-1".into() }]);
//! founders()
//!     .when(admit("n-1", "compute", "192.0.2.99"))
//!     .then_refused(ErrorCode::MemberExists);
//! ```
//!
//! The helpers of one command family (its command builders and the
//! clusters it is tested in) live in [`membership`], [`upgrade`] and
//! [`iam`]; each re-exports this module, so a test file imports one of
//! them.

pub mod iam;
pub mod membership;
pub mod upgrade;

pub use std::collections::{BTreeMap, BTreeSet, HashSet};

pub use chrono::{DateTime, Duration, Utc};
pub use serde_json::{json, Value};

pub use crate::error::{ErrorCode, Refusal};
pub use crate::event::*;
pub use crate::iam::IamCommand;
pub use crate::membership::MemberCommand;
pub use crate::state::{Command, CommandContext, Decision, State, Subject};
pub use crate::testing::*;
pub use crate::upgrade::UpgradeCommand;

/// The bootstrap administrator: the principal `when` and `run` act as.
pub const ADMIN: &str = "user/admin";
pub const ALICE: &str = "user/alice";

/// A command of any family, or a [`Command`] itself.
pub trait IntoCommand {
    fn into_command(self) -> Command;
}

impl IntoCommand for Command {
    fn into_command(self) -> Command {
        self
    }
}

impl IntoCommand for MemberCommand {
    fn into_command(self) -> Command {
        Command::Member(self)
    }
}

impl IntoCommand for IamCommand {
    fn into_command(self) -> Command {
        Command::Iam(self)
    }
}

impl IntoCommand for UpgradeCommand {
    fn into_command(self) -> Command {
        Command::Upgrade(self)
    }
}

pub fn cmd(c: impl IntoCommand) -> Command {
    c.into_command()
}

/// Decides `c` by `principal` and appends what it decided, as the command
/// path does; panics if it is refused.
pub fn run_by(s: &mut State, principal: &str, c: impl IntoCommand) -> Decision {
    let c = c.into_command();
    let d = when_by(s, principal, c.clone()).unwrap_or_else(|r| panic!("{c:?} was refused: {r:?}"));
    apply(s, principal, &d.events);
    d
}

/// [`run_by`] the [`ADMIN`].
pub fn run(s: &mut State, c: impl IntoCommand) -> Decision {
    run_by(s, ADMIN, c)
}

/// A decision that appends nothing, and answers with `subject`.
#[track_caller]
pub fn assert_unchanged(d: &Decision, subject: Subject) {
    assert!(
        d.events.is_empty(),
        "expected no events, got {:?}",
        d.events
    );
    assert_eq!(d.subject, subject);
}

/// `given(events).and_by(principal, events)`: more events folded into a
/// given state, appended by `principal` (the fold records who asked).
pub trait And: Sized {
    /// Folds `events`, appended by the [`ADMIN`].
    fn and(self, events: &[DomainEvent]) -> Self {
        self.and_by(ADMIN, events)
    }

    /// Folds `events`, appended by `principal`.
    fn and_by(self, principal: &str, events: &[DomainEvent]) -> Self;

    /// Folds a history: each append's events, by who appended them.
    fn and_history(self, history: &[Appended]) -> Self {
        history
            .iter()
            .fold(self, |s, (principal, events)| s.and_by(principal, events))
    }
}

/// `s` and the history `steps` make from it ([`history`]), folded: a
/// given whose setup is easier said as commands, its state still only
/// from events.
pub fn after(s: State, steps: &[(&'static str, Command)]) -> State {
    let h = history(&s, steps);
    s.and_history(&h)
}

/// One append of a history: who appended it, and its events.
pub type Appended = (&'static str, Vec<DomainEvent>);

/// The history `steps` make from `s`: each command decided by its
/// principal and appended in turn, as the command path does; for a
/// `given(...).and_history(...)` whose setup is easier said as commands.
/// Panics if one is refused.
pub fn history(s: &State, steps: &[(&'static str, Command)]) -> Vec<Appended> {
    let mut s = s.clone();
    steps
        .iter()
        .map(|(principal, c)| {
            let d = s.when_by(principal, c.clone()).decided();
            apply(&mut s, principal, &d.events);
            (*principal, d.events)
        })
        .collect()
}

impl And for State {
    fn and_by(mut self, principal: &str, events: &[DomainEvent]) -> Self {
        apply(&mut self, principal, events);
        self
    }
}

/// `state.when(command)`: decides a command in a state, for a `then`.
/// The state is the given: [`given`] folds events into one (`given(events)
/// .when(command).then(events)`), and any scenario's state will do.
pub trait When {
    /// Decides `c` by the [`ADMIN`].
    fn when(&self, c: impl IntoCommand) -> Then {
        self.when_by(ADMIN, c)
    }

    /// Decides `c` by `principal`.
    fn when_by(&self, principal: &str, c: impl IntoCommand) -> Then {
        self.when_at(t0(), principal, c)
    }

    /// Decides `c` by `principal` at `now` (the clock is an input of
    /// `decide`).
    fn when_at(&self, now: DateTime<Utc>, principal: &str, c: impl IntoCommand) -> Then;

    /// Decides `c` by `principal` holding only the policies `held` (a
    /// token's).
    fn when_holding(&self, principal: &str, held: &[&str], c: impl IntoCommand) -> Then;
}

impl When for State {
    fn when_at(&self, now: DateTime<Utc>, principal: &str, c: impl IntoCommand) -> Then {
        decide_in(self, now, principal, None, c)
    }

    fn when_holding(&self, principal: &str, held: &[&str], c: impl IntoCommand) -> Then {
        let held = held.iter().map(|p| (*p).to_owned()).collect();
        decide_in(self, t0(), principal, Some(held), c)
    }
}

fn decide_in(
    state: &State,
    now: DateTime<Utc>,
    principal: &str,
    held_policies: Option<Vec<String>>,
    c: impl IntoCommand,
) -> Then {
    let command = c.into_command();
    let ctx = CommandContext {
        now,
        principal: principal.to_owned(),
        held_policies,
    };
    let outcome = state.decide(&command, &ctx);
    Then {
        command,
        principal: principal.to_owned(),
        outcome,
    }
}

/// What a command was decided to: the events, or a refusal.
#[derive(Debug)]
#[must_use = "a `when` asserts nothing until `then`"]
pub struct Then {
    command: Command,
    principal: String,
    outcome: Result<Decision, Refusal>,
}

impl Then {
    /// Asserts the command was decided, to exactly `expected`; the
    /// decision, for what else a test looks at.
    #[track_caller]
    pub fn then(self, expected: impl AsRef<[DomainEvent]>) -> Decision {
        let d = self.decided();
        assert_eq!(d.events, expected.as_ref(), "{d:?}");
        d
    }

    /// [`Then::then`], and appends the events to `state`, the state the
    /// command was decided in, as the command path does: for a scenario
    /// that goes on.
    #[track_caller]
    pub fn then_appended(self, state: &mut State, expected: impl AsRef<[DomainEvent]>) -> Decision {
        let principal = self.principal.clone();
        let d = self.then(expected);
        apply(state, &principal, &d.events);
        d
    }

    /// Asserts the command was decided and appends nothing (the state
    /// already says what it asks).
    #[track_caller]
    pub fn then_nothing(self) -> Decision {
        self.then([])
    }

    /// The decision, whatever its events; panics if it was refused.
    #[track_caller]
    pub fn decided(self) -> Decision {
        let command = self.command;
        self.outcome
            .unwrap_or_else(|r| panic!("{command:?} was refused: {r:?}"))
    }

    /// Asserts the command was refused with `code`; the refusal, for what
    /// else a test looks at.
    #[track_caller]
    pub fn then_refused(self, code: ErrorCode) -> Refusal {
        let r = self.refusal();
        assert_eq!(r.code, code, "{r:?}");
        r
    }

    /// Asserts the command was refused as `INVALID_INPUT`, naming exactly
    /// `expected` fields, in order ([`assert_invalid`]).
    #[track_caller]
    pub fn then_invalid(self, expected: &[&str]) -> Refusal {
        let r = self.refusal();
        assert_invalid(&r, expected);
        r
    }

    /// The refusal; panics if the command was decided.
    #[track_caller]
    pub fn refusal(self) -> Refusal {
        match self.outcome {
            Ok(d) => panic!("{:?} was decided, not refused: {d:?}", self.command),
            Err(r) => r,
        }
    }
}
