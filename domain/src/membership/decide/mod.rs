//! Deciding the membership commands, one function per command, split by
//! family: [`join`] (admission and a node's join), [`requests`] (join
//! requests), [`member`] (a member's change, decommission and applied
//! generation) and [`rafts`] (what the raft cleanup records). Each
//! command's fields are parsed in [`super::parse`]: the functions here take
//! the typed value and hold only the rules, with the checks against the
//! members that admissions and changes share kept here.

mod join;
mod member;
mod rafts;
mod requests;

use std::net::IpAddr;

use serde_json::json;

use crate::error::{ErrorCode, FieldError, Refusal};
use crate::event::{DomainEvent, MemberAdmitted, StringMap};
use crate::state::{CommandContext, Decision, Subject};

use super::parse::{self, Admission};
use super::*;

impl Membership {
    /// Another member, neither failed nor decommissioned, that holds
    /// `m`'s address: a raft listing addresses cannot tell it from `m`.
    pub fn address_holder(&self, m: &Member) -> Option<&Member> {
        self.members.values().find(|o| {
            o.node_id != m.node_id
                && same_address(&o.mgmt_ip, &m.mgmt_ip)
                && !matches!(o.state, MemberState::Failed | MemberState::Decommissioned)
        })
    }
}

/// Whether two recorded addresses are the same address, whatever form an
/// older event wrote one in.
fn same_address(a: &str, b: &str) -> bool {
    match (a.parse::<IpAddr>(), b.parse::<IpAddr>()) {
        (Ok(a), Ok(b)) => a.to_canonical() == b.to_canonical(),
        _ => a == b,
    }
}

fn unchanged(node_id: &str) -> Decision {
    Decision::none(Subject::Member(node_id.to_owned()))
}

fn decided(node_id: &str, events: Vec<DomainEvent>) -> Decision {
    Decision {
        events,
        subject: Subject::Member(node_id.to_owned()),
    }
}

impl Membership {
    /// The refusals of admitting `node_id` at `mgmt_ip` with `role` and
    /// `labels`, each at its field.
    fn admission_conflicts(
        &self,
        node_id: &str,
        mgmt_ip: &str,
        role: Role,
        labels: &StringMap,
    ) -> Vec<FieldError> {
        let mut out = Vec::new();
        if let Some(m) = self.members.get(node_id) {
            let what = if m.state == MemberState::Decommissioned {
                "was decommissioned; node ids are never reused"
            } else {
                "is already a member"
            };
            out.push(FieldError::new("nodeId", what));
        }
        out.extend(self.address_taken(mgmt_ip, None));
        out.extend(rack_missing(role, labels));
        out
    }

    /// An address held by a member not decommissioned (other than
    /// `except`, a member keeping its own), as a finding at `mgmtIp`.
    fn address_taken(&self, mgmt_ip: &str, except: Option<&str>) -> Option<FieldError> {
        self.members
            .values()
            .find(|m| {
                m.state != MemberState::Decommissioned
                    && same_address(&m.mgmt_ip, mgmt_ip)
                    && Some(m.node_id.as_str()) != except
            })
            .map(|m| FieldError::new("mgmtIp", format!("is taken by member {}", m.node_id)))
    }

    fn admitted(&self, a: Admission, join_request: Option<String>) -> DomainEvent {
        DomainEvent::MemberAdmitted(MemberAdmitted {
            node_id: a.node_id,
            role: a.role,
            mgmt_ip: a.mgmt_ip,
            bindings: a.bindings,
            labels: a.labels,
            ordinal: self.max_ordinal + 1,
            join_request,
        })
    }

    /// Decides a membership command: its fields parsed at the edge, then
    /// the rules of its function.
    pub fn decide(&self, cmd: &MemberCommand, ctx: &CommandContext) -> Result<Decision, Refusal> {
        match cmd {
            MemberCommand::Admit {
                node_id,
                role,
                mgmt_ip,
                bindings,
                labels,
            } => self.admit(parse::admission(node_id, role, mgmt_ip, bindings, labels)?),
            MemberCommand::ReportJoinProgress { node_id, step } => {
                self.report_join_progress(node_id, parse::join_step(step)?)
            }
            MemberCommand::CompleteJoin { node_id } => self.complete_join(node_id),
            MemberCommand::ReportJoinFailure {
                node_id,
                step,
                error,
            } => self.report_join_failure(node_id, parse::join_failure(step, error)?),
            MemberCommand::RetryJoin { node_id } => self.retry_join(node_id),
            MemberCommand::Decommission {
                node_id,
                reason,
                force,
            } => self.decommission(node_id, parse::reason(reason)?, *force, ctx),
            MemberCommand::ReportAppliedGeneration {
                node_id,
                generation,
            } => self.report_applied_generation(node_id, parse::generation(generation)?),
            MemberCommand::RecordRaftRemoval {
                node_id,
                raft,
                already_gone,
                adapter,
                leader_moved,
                settings,
            } => self.record_raft_removal(
                node_id,
                *raft,
                rafts::HowRemoved {
                    already_gone: *already_gone,
                    adapter,
                    leader_moved: *leader_moved,
                    settings: settings.as_deref(),
                },
                ctx,
            ),
            MemberCommand::RecordRaftPeerReturn {
                node_id,
                raft,
                removed_position,
                removed_at,
            } => self.record_raft_peer_return(node_id, *raft, *removed_position, *removed_at),
            // A change is judged against the member it changes: its fields
            // are parsed over the member's once it is found.
            MemberCommand::Update {
                node_id,
                role,
                mgmt_ip,
                bindings,
                labels,
                force,
            } => self.update(
                node_id,
                member::UpdateInput {
                    role,
                    mgmt_ip,
                    bindings,
                    labels,
                },
                *force,
            ),
            MemberCommand::RequestJoin {
                request_id,
                node_id,
                mgmt_ip,
                labels,
                facts,
            } => self.request_join(
                request_id,
                parse::join_ask(node_id, mgmt_ip, labels, facts)?,
                ctx,
            ),
            // An approval keeps what it leaves out from the request: its
            // fields are parsed over the request's once it is found open.
            MemberCommand::ApproveJoin {
                request_id,
                role,
                mgmt_ip,
                bindings,
                labels,
            } => self.approve_join(
                request_id,
                requests::ApprovalInput {
                    role,
                    mgmt_ip,
                    bindings,
                    labels,
                },
            ),
            // The request is judged before the reason: the reason's
            // refusal waits for the request's.
            MemberCommand::RejectJoin { request_id, reason } => {
                self.reject_join(request_id, parse::reason(reason))
            }
        }
    }
}

/// A storage member must name its rack.
fn rack_missing(role: Role, labels: &StringMap) -> Option<FieldError> {
    (role == Role::Storage && !labels.contains_key(RACK_LABEL)).then(|| {
        FieldError::new(
            format!("labels.{RACK_LABEL}"),
            "is required for a storage member",
        )
    })
}

fn not_joining(m: &Member) -> Refusal {
    Refusal::new(
        ErrorCode::MemberNotJoining,
        format!("Member {} is {}, not joining.", m.node_id, m.state.as_str()),
    )
    .with_details(json!({ "state": m.state }))
}
