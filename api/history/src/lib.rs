//! A linearizability checker for histories of concurrent operations, and a
//! model of one member's lifecycle decided by the domain itself, for the
//! failover tests: clients drive the API of several replicas while the
//! database fails over, record what they asked and what they were
//! answered, and the history must be explainable by some order in which
//! every request took effect at one instant between its invocation and its
//! answer (Herlihy & Wing's linearizability).
//!
//! # The algorithm
//!
//! [`check`] follows the search of Wing & Gong ("Testing and verifying
//! concurrent objects", J. Parallel Distrib. Comput. 17, 1993), with the
//! memoization of Lowe ("Testing for linearizability", Concurrency and
//! Computation: Practice and Experience 29(4), 2017), as the Porcupine
//! checker does it (<https://github.com/anishathalye/porcupine>):
//!
//! 1. The history is partitioned by [`Model::key`] (Porcupine's
//!    P-compositionality: a history is linearizable if and only if each
//!    key's sub-history is, for objects whose keys are independent), and
//!    each partition is searched on its own. A cluster's history of
//!    thousands of operations over hundreds of members is hundreds of
//!    searches over a few dozen operations each.
//! 2. A partition's invocations and answers are put in one list in time
//!    order (an invocation before an answer at the same instant: touching
//!    operations count as concurrent). The search walks the list: at the
//!    invocation of an operation that can take effect next (the model
//!    accepts its answer in the current state), it takes effect: the
//!    operation's entries are lifted out of the list and the walk starts
//!    over; an invocation that cannot is passed over. Reaching the answer
//!    of an operation that has not taken effect means the choices made
//!    cannot be extended (that operation would have to take effect after
//!    it answered): the last choice is undone and the walk goes on after
//!    it. An empty list is a linearization; backtracking past the first
//!    choice proves there is none.
//! 3. Lowe's cache: the configurations reached, each a pair (the set of
//!    operations that have taken effect, as a bitset; the model state),
//!    are remembered, and a choice that reaches a configuration already
//!    seen is not explored again: the rest of the search from it depends
//!    on nothing else. This turns the factorial blow-up of concurrent
//!    operations that commute (reads) into the number of distinct subsets
//!    actually reachable. Model states are interned, and each (state,
//!    operation) pair is stepped once.
//! 4. Operations of unknown outcome (a write whose answer never came, or
//!    came back as "it may have been stored"): their answer is put at
//!    +infinity, after every other entry, and their answer is
//!    unconstrained. The walk succeeds as soon as it reaches the first such
//!    answer: every operation with a known outcome has then taken effect,
//!    and the unknown ones that have not may never have. So an unknown
//!    write may take effect at any point after its invocation, including
//!    long after every other operation answered, or never.
//! 5. Each partition's search is bounded by [`Options::with_max_steps`];
//!    one that runs out is reported inconclusive, never a hang.
//!
//! A partition with no linearization is reported with its operations, the
//! longest linearizable prefix the search found (with the model state after
//! each operation), and the operation whose answer came before it could
//! follow that prefix; see [`Violation`].
//!
//! # Recording a history
//!
//! Each client records, per request, an [`Operation`]: its client number,
//! the operation, the time read just before sending it, and how it ended,
//! all times from one monotonic clock shared by every client (an
//! [`std::time::Instant`], or nanoseconds since one common instant). The
//! clients' records are concatenated (any order) and checked once they
//! have all stopped. With the [`MemberModel`]:
//!
//! - a write answered 2xx: [`MemberRet::Accepted`], with the time the
//!   answer was read; refused 4xx: [`MemberRet::Refused`] with the body's
//!   `code`;
//! - a write with no answer, a timeout, a broken connection, or a 5xx that
//!   does not say nothing was stored: [`Operation::unknown`]; one that
//!   says nothing was stored (or a 429): [`MemberRet::NotStored`], or left
//!   out;
//! - a read answered 200: [`MemberRet::Found`] with the `state` member
//!   (and the `ETag`'s number as the version, to compare it too); 404:
//!   [`MemberRet::NotFound`]; a read that failed (5xx, timeout) was not
//!   served and is left out of the history;
//! - a write retried with the same `Idempotency-Key` is one operation:
//!   invoked when the first attempt was sent, ended as the last attempt
//!   ended (the key makes all attempts one effect, and a kept answer
//!   replayed to a later attempt is the answer of that one effect).
//!   Without a key, each attempt is an operation of its own.
//!
//! The outcome is a [`Report`]: check [`Report::verdict`] and print the
//! report (its `Display` lists every violation) when it is not
//! [`Verdict::Linearizable`].

mod checker;
mod history;
pub mod member;

#[cfg(test)]
mod tests;

pub use checker::{check, Model, Options, Report, Stats, Verdict, Violation};
pub use history::{Operation, Outcome, Time};
pub use member::{Folded, MemberModel, MemberOp, MemberRet};
