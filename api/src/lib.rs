//! The stratum service: the one write path, the reads, the process
//! managers, the HTTP API and the `stratum` command line, over the event
//! store of the `stratum-store` crate.

pub mod auth;
pub mod backoff;
pub mod build;
pub mod checkpoint;
pub mod cli;
pub mod command;
pub mod error;
pub mod http;
pub mod listener;
pub mod metrics;
pub mod note;
pub mod raft;
pub mod reads;
pub mod rebuild;
pub mod replicas;
pub mod service;
pub mod settings;
pub mod systemd;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;
pub mod upgrade_driver;
pub mod witness;
