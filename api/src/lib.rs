//! The stratum service: the event store, the one write path, the HTTP API
//! and the `stratum` command line.

pub mod command;
pub mod error;
pub mod store;
