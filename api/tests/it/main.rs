//! Integration tests of the stratum service, in one binary.

mod support;

mod binary;
mod cli;
mod config_file;
mod connections;
mod console;
mod contract;
mod disk_full;
mod edges;
mod errors;
mod failover;
mod fresh_reads;
mod guides;
mod iam;
mod idempotency;
mod logs;
mod lost_tail;
mod member_changes;
mod membership;
mod metrics;
mod pipelining;
mod raft;
mod raft_serve;
mod real_rafts;
mod remote_cli;
mod replicas;
mod security;
mod sse;
mod tls;
mod transparency;
mod trust;
mod upgrade_record;
mod upgrade_serve;
mod upgrades;
mod write_path;
