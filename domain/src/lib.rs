//! The pure domain of stratum: commands, events, state, and the `decide` and
//! `evolve` functions that every rule of the spec lives in.
//!
//! Nothing here performs I/O, reads the clock or draws random numbers: time,
//! ids and the acting principal come in with the command, so every decision
//! can be replayed and unit tested. Storage errors never appear here; a
//! [`Refusal`] is a business refusal only.

// Clocks, random ids, randomness, the environment and files are refused
// by clippy.toml; a use of one is an error, not a warning.
#![deny(clippy::disallowed_methods)]

// First, so every module below can declare its enums with it.
#[macro_use]
mod string_enum;

pub mod error;
pub mod event;
pub mod export;
pub mod iam;
pub mod log;
pub mod membership;
pub mod policy;
pub mod release;
pub mod state;
pub mod storage;
pub mod stored;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
pub mod text;
pub mod tree;
pub mod upgrade;

pub use error::{ErrorCode, FieldError, Refusal};

/// The maps the state keeps its entities in: persistent ordered maps that
/// share structure, so a copy of the state (the writer keeps one per batch
/// in flight beside the one it published) costs what the batch changes,
/// not a copy of every member.
pub type Map<K, V> = imbl::OrdMap<K, V>;
pub use event::DomainEvent;
pub use log::{EventMeta, Recorded};
pub use state::{Command, CommandContext, Decision, State};
