//! The domain's tests, by concept: one file per command family or rule,
//! and one [`support`] module they share.

mod support;

mod admit;
mod checkpoint_fork;
mod decommission;
mod generation;
mod gwt_ratio;
mod iam_catalog;
mod iam_escalation;
mod iam_evaluation;
mod iam_managed_policies;
mod iam_policies;
mod iam_policy_documents;
mod iam_tokens;
mod join;
mod join_requests;
mod lost_events;
mod member_update;
mod membership_invariants;
mod raft_cleanup;
mod releases;
mod storage_version;
mod stored_catalogue;
mod stored_codec;
mod upgrade_cancel;
mod upgrade_node_reports;
mod upgrade_plan;
mod upgrade_prechecks;
mod upgrade_reboots;
mod upgrade_rollback;
mod upgrade_start;
mod upgrade_walk;
mod upgrade_write_freeze;
