//! What a client records: one [`Operation`] per request, with the time it
//! was invoked and, when an answer came, the answer and the time it came.

use std::fmt::Debug;
use std::time::{Duration, Instant};

/// A point in time of a history: any monotonic clock, as long as every
/// client of one history reads the same one. `u64` (nanoseconds, or any
/// tick, as hand-written histories use), [`Instant`] and [`Duration`]
/// (since a common origin) are provided.
pub trait Time: Copy + Ord + Debug {
    /// How the report shows this time, relative to `origin` (the first
    /// invocation of the history).
    fn show(self, origin: Self) -> String;
}

impl Time for u64 {
    /// The number itself: hand-written histories use small ticks.
    fn show(self, _origin: Self) -> String {
        self.to_string()
    }
}

impl Time for Instant {
    fn show(self, origin: Self) -> String {
        format!("+{:?}", self.saturating_duration_since(origin))
    }
}

impl Time for Duration {
    fn show(self, origin: Self) -> String {
        format!("+{:?}", self.saturating_sub(origin))
    }
}

/// How an operation ended, as far as its client knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome<Ret, T = u64> {
    /// An answer came at `at`: the operation took effect (or was refused)
    /// at one instant between its invocation and `at`, and answered `ret`.
    Returned { ret: Ret, at: T },
    /// No answer that says what happened came: the request timed out, the
    /// connection broke, or the server said it may or may not have stored
    /// it. The operation may take effect at any instant after its
    /// invocation, until the end of the history (the server may still be
    /// carrying it out), or never; what it would have answered is not
    /// known. The checker treats it as returning at +infinity and as
    /// optional: a history is linearizable if some linearization includes
    /// every operation with an answer, whichever of these it includes.
    Unknown,
}

/// One operation of a history: what `client` asked, when, and how it
/// ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation<Op, Ret, T = u64> {
    /// Who issued it. Only shown in reports: one client's operations need
    /// not be sequential for the checker (though they are, for a client
    /// that waits for each answer).
    pub client: usize,
    pub op: Op,
    /// Read before the request was sent.
    pub invoked: T,
    pub outcome: Outcome<Ret, T>,
}

impl<Op, Ret, T: Time> Operation<Op, Ret, T> {
    /// An operation that answered `ret` at `returned` (read after the
    /// answer was received and parsed).
    pub fn returned(client: usize, op: Op, invoked: T, ret: Ret, returned: T) -> Self {
        Self {
            client,
            op,
            invoked,
            outcome: Outcome::Returned { ret, at: returned },
        }
    }

    /// An operation whose outcome is unknown (see [`Outcome::Unknown`]).
    pub fn unknown(client: usize, op: Op, invoked: T) -> Self {
        Self {
            client,
            op,
            invoked,
            outcome: Outcome::Unknown,
        }
    }

    /// The answer, if one came.
    pub fn ret(&self) -> Option<&Ret> {
        match &self.outcome {
            Outcome::Returned { ret, .. } => Some(ret),
            Outcome::Unknown => None,
        }
    }

    /// When the answer came; `None` (+infinity) if none did.
    pub fn returned_at(&self) -> Option<T> {
        match &self.outcome {
            Outcome::Returned { at, .. } => Some(*at),
            Outcome::Unknown => None,
        }
    }
}
