//! Join requests: a node asks to join, an operator approves or rejects.

use serde_json::json;

use crate::error::{ErrorCode, FieldError, Refusal};
use crate::event::{DomainEvent, JoinRequested, StringMap};
use crate::membership::parse::JoinAsk;
use crate::state::{CommandContext, Decision, Subject};

use super::*;

/// The fields of an approval, as the request gave them: what it leaves
/// out is the join request's.
pub(super) struct ApprovalInput<'a> {
    pub role: &'a Option<String>,
    pub mgmt_ip: &'a Option<String>,
    pub bindings: &'a Option<StringMap>,
    pub labels: &'a Option<StringMap>,
}

impl Membership {
    /// A node asks to join: one open request per node, none for a member.
    pub(super) fn request_join(
        &self,
        request_id: &str,
        ask: JoinAsk<'_>,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        let JoinAsk {
            node_id,
            mgmt_ip: ip,
            labels,
            facts,
        } = ask;
        // A node asks to join as itself: a node's token files no
        // request in another node's name.
        if let Some(own) = ctx.principal.strip_prefix("node/") {
            if own != node_id {
                return Err(Refusal::new(
                    ErrorCode::AccessDenied,
                    format!("{} may request a join only for node {own}.", ctx.principal),
                )
                .with_details(json!({
                    "action": crate::iam::Action::RequestJoin.name(),
                    "resource": format!("stratum:member/{node_id}"),
                })));
            }
        }
        if let Some(pending) = self
            .join_requests
            .values()
            .find(|r| r.node_id == node_id && r.status == JoinRequestStatus::Pending)
        {
            return Ok(Decision::none(Subject::JoinRequest(
                pending.request_id.clone(),
            )));
        }
        if self.members.contains_key(&node_id) {
            return Err(Refusal::new(
                ErrorCode::MemberExists,
                format!("Node {node_id} is already on record as a member."),
            )
            .with_field_errors(vec![FieldError::new("nodeId", "is already a member")]));
        }
        Ok(Decision {
            events: vec![DomainEvent::JoinRequested(JoinRequested {
                request_id: request_id.to_owned(),
                node_id,
                mgmt_ip: ip,
                labels: labels.clone(),
                facts: facts.to_owned(),
            })],
            subject: Subject::JoinRequest(request_id.to_owned()),
        })
    }

    /// An open request approved: the node is admitted as the request and the
    /// approval say.
    pub(super) fn approve_join(
        &self,
        request_id: &str,
        a: ApprovalInput<'_>,
    ) -> Result<Decision, Refusal> {
        let req = self.open_request(request_id)?;
        let input = parse::approval(
            &req.node_id,
            a.role,
            a.mgmt_ip.as_deref().unwrap_or(&req.mgmt_ip),
            a.bindings.as_ref().unwrap_or(&StringMap::new()),
            a.labels.clone().unwrap_or_else(|| req.labels.clone()),
        )?;
        let conflicts =
            self.admission_conflicts(&input.node_id, &input.mgmt_ip, input.role, &input.labels);
        if !conflicts.is_empty() {
            return Err(Refusal::new(
                ErrorCode::JoinApprovalRefused,
                "The cluster refuses this join.",
            )
            .with_field_errors(conflicts));
        }
        Ok(Decision {
            events: vec![
                DomainEvent::JoinRequestApproved {
                    request_id: request_id.to_owned(),
                    node_id: req.node_id.clone(),
                },
                self.admitted(input, Some(request_id.to_owned())),
            ],
            subject: Subject::JoinRequest(request_id.to_owned()),
        })
    }

    /// An open request rejected, with a reason.
    pub(super) fn reject_join(
        &self,
        request_id: &str,
        reason: Result<String, Refusal>,
    ) -> Result<Decision, Refusal> {
        let req = self.open_request(request_id)?;
        let reason = reason?;
        Ok(Decision {
            events: vec![DomainEvent::JoinRequestRejected {
                request_id: req.request_id.clone(),
                reason,
            }],
            subject: Subject::JoinRequest(request_id.to_owned()),
        })
    }

    fn open_request(&self, request_id: &str) -> Result<&JoinRequest, Refusal> {
        let req = self
            .join_requests
            .get(request_id)
            .ok_or_else(|| Refusal::not_found(format!("Join request {request_id}")))?;
        if req.status != JoinRequestStatus::Pending {
            return Err(Refusal::new(
                ErrorCode::JoinRequestClosed,
                format!("Join request {request_id} was already decided."),
            )
            .with_details(json!({ "status": req.status })));
        }
        Ok(req)
    }
}
