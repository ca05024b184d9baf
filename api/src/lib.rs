//! The stratum service: the event store, the one write path, the HTTP API
//! and the `stratum` command line.

pub mod auth;
pub mod cli;
pub mod command;
pub mod error;
pub mod http;
pub mod listener;
pub mod metrics;
pub mod raft;
pub mod reads;
pub mod service;
pub mod store;
#[doc(hidden)]
pub mod testing;
pub mod tls;
pub mod upgrade_driver;
