//! Integration tests of the stratum service, in one binary.

mod support;

mod binary;
mod cli;
mod connections;
mod contract;
mod disk_full;
mod edges;
mod errors;
mod fresh_reads;
mod iam;
mod idempotency;
mod logs;
mod member_changes;
mod membership;
mod metrics;
mod raft;
mod raft_serve;
mod replicas;
mod sse;
mod store;
mod upgrade_record;
mod upgrade_serve;
mod upgrades;
