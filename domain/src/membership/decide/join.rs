//! A member's admission and its join: progress, completion, failure and
//! retry.

use serde_json::json;

use crate::error::{ErrorCode, Refusal};
use crate::event::{DomainEvent, MemberJoinFailed};
use crate::membership::parse::{Admission, JoinFailure};
use crate::state::Decision;

use super::*;

impl Membership {
    /// An admission (SPEC §4): its fields checked, every conflict with the
    /// members at once.
    pub(super) fn admit(&self, input: Admission) -> Result<Decision, Refusal> {
        let conflicts =
            self.admission_conflicts(&input.node_id, &input.mgmt_ip, input.role, &input.labels);
        if !conflicts.is_empty() {
            return Err(Refusal::new(
                ErrorCode::MemberExists,
                "The cluster refuses to admit this member.",
            )
            .with_field_errors(conflicts));
        }
        let node_id = input.node_id.clone();
        Ok(decided(&node_id, vec![self.admitted(input, None)]))
    }

    /// A joining member's progress; the step it is at again appends nothing.
    pub(super) fn report_join_progress(
        &self,
        node_id: &str,
        step: String,
    ) -> Result<Decision, Refusal> {
        let m = self.member(node_id)?;
        if m.state != MemberState::Joining {
            return Err(not_joining(m));
        }
        if m.join_step.as_deref() == Some(step.as_str()) {
            return Ok(unchanged(node_id));
        }
        Ok(decided(
            node_id,
            vec![DomainEvent::JoinProgressReported {
                node_id: node_id.to_owned(),
                step,
            }],
        ))
    }

    /// A join completed: joining becomes active; an active member is answered
    /// unchanged.
    pub(super) fn complete_join(&self, node_id: &str) -> Result<Decision, Refusal> {
        let m = self.member(node_id)?;
        match m.state {
            MemberState::Joining => Ok(decided(
                node_id,
                vec![DomainEvent::MemberJoinCompleted {
                    node_id: node_id.to_owned(),
                }],
            )),
            MemberState::Active => Ok(unchanged(node_id)),
            MemberState::Failed | MemberState::Removing | MemberState::Decommissioned => {
                Err(not_joining(m))
            }
        }
    }

    /// A join failed (seed 000): the member is taken out of the rafts it
    /// reached and the failed step's own.
    pub(super) fn report_join_failure(
        &self,
        node_id: &str,
        failure: JoinFailure,
    ) -> Result<Decision, Refusal> {
        let JoinFailure { step, error } = failure;
        let m = self.member(node_id)?;
        if m.state != MemberState::Joining {
            // The seed: any other state answers the record unchanged.
            return Ok(unchanged(node_id));
        }
        let mut rafts = m.rafts_reached.clone();
        rafts.extend(Raft::of_step(&step));
        let rafts: Vec<Raft> = rafts.into_iter().collect();
        let mut events = vec![DomainEvent::MemberJoinFailed(MemberJoinFailed {
            node_id: node_id.to_owned(),
            step,
            error,
            rafts: rafts.clone(),
        })];
        if rafts.is_empty() {
            events.push(DomainEvent::RaftCleanupCompleted {
                node_id: node_id.to_owned(),
            });
        }
        Ok(decided(node_id, events))
    }

    /// A failed join tried again, once its raft cleanup is done.
    pub(super) fn retry_join(&self, node_id: &str) -> Result<Decision, Refusal> {
        let m = self.member(node_id)?;
        match m.state {
            MemberState::Failed if m.raft_cleanup_at.is_some() => Ok(decided(
                node_id,
                vec![DomainEvent::MemberJoinRetried {
                    node_id: node_id.to_owned(),
                }],
            )),
            MemberState::Failed => Err(Refusal::new(
                ErrorCode::RaftCleanupPending,
                format!(
                    "Member {node_id} is still being taken out of the rafts it reached; retry once raftCleanupAt is set."
                ),
            )
            .with_details(json!({ "pending": m.pending_cleanup() }))),
            MemberState::Joining
            | MemberState::Active
            | MemberState::Removing
            | MemberState::Decommissioned => Err(Refusal::new(
                ErrorCode::MemberNotFailed,
                format!(
                    "Member {node_id} is {}; only a failed join can be retried.",
                    m.state.as_str()
                ),
            )
            .with_details(json!({ "state": m.state }))),
        }
    }
}
