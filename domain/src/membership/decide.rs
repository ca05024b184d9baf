//! Deciding the membership commands: one function per command.

use std::net::IpAddr;

use serde_json::json;

use crate::error::{ErrorCode, FieldError, Findings, Refusal};
use crate::event::{
    DomainEvent, JoinRequested, MemberAdmitted, MemberJoinFailed, MemberRemovalStarted,
    MemberUpdated, RaftPeerReturned, StringMap,
};
use crate::state::{CommandContext, Decision, Subject};
use crate::text::check_line;

use super::*;

fn check_step(f: &mut Findings, step: &Option<String>) -> Option<String> {
    let step = f.required("step", step)?;
    if !valid_step(step) {
        f.push("step", "must be a join step name such as join/raft-openbao");
        return None;
    }
    Some(step.clone())
}

/// An address as the record keeps it: parsed, an IPv4-mapped IPv6 address
/// as the IPv4 address it is, in its one written form; an address no
/// peer can be reached at (unspecified, multicast, broadcast) is refused.
/// Loopback stays allowed, for tests and single-host setups.
fn check_ip(f: &mut Findings, field: &str, value: &str) -> Option<String> {
    match value.parse::<IpAddr>().map(|ip| ip.to_canonical()) {
        Ok(ip) if ip.is_unspecified() || ip.is_multicast() => {
            f.push(
                field,
                "must be a unicast address: not unspecified (0.0.0.0, ::) or multicast",
            );
            None
        }
        Ok(IpAddr::V4(v4)) if v4.is_broadcast() => {
            f.push(field, "must be a unicast address, not broadcast");
            None
        }
        Ok(ip) => Some(ip.to_string()),
        Err(_) => {
            f.push(field, "must be an IPv4 or IPv6 address");
            None
        }
    }
}

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

fn check_node_id(f: &mut Findings, field: &str, value: &str) {
    if !valid_node_id(value) {
        f.push(
            field,
            "must be 1 to 63 lowercase letters, digits or inner hyphens",
        );
    }
}

fn check_labels(f: &mut Findings, field: &str, labels: &StringMap) {
    crate::text::check_labels(f, field, labels);
}

fn check_bindings(f: &mut Findings, bindings: &StringMap) -> StringMap {
    let mut out = StringMap::new();
    for (class, addr) in bindings {
        let field = format!("bindings.{class}");
        if !BINDING_CLASSES.contains(&class.as_str()) {
            f.push(&field, "is not a traffic class (storage or overlay)");
        } else if let Some(ip) = check_ip(f, &field, addr) {
            out.insert(class.clone(), ip);
        }
    }
    out
}

fn check_role(f: &mut Findings, role: &Option<String>) -> Option<Role> {
    let role = f.required("role", role)?;
    let parsed = Role::parse(role);
    if parsed.is_none() {
        f.push("role", "must be control, compute, storage or hybrid");
    }
    parsed
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

    fn admitted(&self, a: AdmitInput, join_request: Option<String>) -> DomainEvent {
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

    /// Decides a membership command: each has its own function below.
    pub fn decide(&self, cmd: &MemberCommand, ctx: &CommandContext) -> Result<Decision, Refusal> {
        match cmd {
            MemberCommand::Admit {
                node_id,
                role,
                mgmt_ip,
                bindings,
                labels,
            } => self.admit(node_id, role, mgmt_ip, bindings, labels),
            MemberCommand::ReportJoinProgress { node_id, step } => {
                self.report_join_progress(node_id, step)
            }
            MemberCommand::CompleteJoin { node_id } => self.complete_join(node_id),
            MemberCommand::ReportJoinFailure {
                node_id,
                step,
                error,
            } => self.report_join_failure(node_id, step, error),
            MemberCommand::RetryJoin { node_id } => self.retry_join(node_id),
            MemberCommand::Decommission {
                node_id,
                reason,
                force,
            } => self.decommission(node_id, reason, *force, ctx),
            MemberCommand::ReportAppliedGeneration {
                node_id,
                generation,
            } => self.report_applied_generation(node_id, generation),
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
                HowRemoved {
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
            MemberCommand::Update {
                node_id,
                role,
                mgmt_ip,
                bindings,
                labels,
                force,
            } => self.update(
                node_id,
                UpdateInput {
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
            } => self.request_join(request_id, node_id, mgmt_ip, labels, facts, ctx),
            MemberCommand::ApproveJoin {
                request_id,
                role,
                mgmt_ip,
                bindings,
                labels,
            } => self.approve_join(request_id, role, mgmt_ip, bindings, labels),
            MemberCommand::RejectJoin { request_id, reason } => {
                self.reject_join(request_id, reason)
            }
        }
    }

    /// An admission (SPEC §4): every bad field at once, then every conflict
    /// with the members at once.
    fn admit(
        &self,
        node_id: &Option<String>,
        role: &Option<String>,
        mgmt_ip: &Option<String>,
        bindings: &StringMap,
        labels: &StringMap,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        let id = f.required("nodeId", node_id).cloned();
        if let Some(id) = &id {
            check_node_id(&mut f, "nodeId", id);
        }
        let role = check_role(&mut f, role);
        let ip = f
            .required("mgmtIp", mgmt_ip)
            .and_then(|ip| check_ip(&mut f, "mgmtIp", ip));
        let bindings = check_bindings(&mut f, bindings);
        check_labels(&mut f, "labels", labels);
        let ((node_id, role), mgmt_ip) = f.conclude(id.zip(role).zip(ip))?;
        let input = AdmitInput {
            node_id,
            role,
            mgmt_ip,
            bindings,
            labels: labels.clone(),
        };
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
    fn report_join_progress(
        &self,
        node_id: &str,
        step: &Option<String>,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        let step = check_step(&mut f, step);
        let step = f.conclude(step)?;
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
    fn complete_join(&self, node_id: &str) -> Result<Decision, Refusal> {
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
    fn report_join_failure(
        &self,
        node_id: &str,
        step: &Option<String>,
        error: &Option<String>,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        let step = check_step(&mut f, step);
        let error = check_line(&mut f, "error", error, MAX_ERROR_LINE);
        let (step, error) = f.conclude(step.zip(error))?;
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
    fn retry_join(&self, node_id: &str) -> Result<Decision, Refusal> {
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

    /// A decommission: the quorum rule unless forced, then the member is
    /// taken out of every raft it is in or still owes a cleanup.
    fn decommission(
        &self,
        node_id: &str,
        reason: &Option<String>,
        force: bool,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        let reason = check_line(&mut f, "reason", reason, MAX_REASON);
        let reason = f.conclude(reason)?;
        let m = self.member(node_id)?;
        if matches!(m.state, MemberState::Removing | MemberState::Decommissioned) {
            return Ok(unchanged(node_id));
        }
        if m.is_active_voter() && !force {
            self.quorum_kept(node_id, "Decommissioning")?;
        }
        let rafts: Vec<Raft> = m
            .rafts_in()
            .union(&m.rafts_to_clean)
            .filter(|r| !m.rafts_removed.contains(r))
            .copied()
            .collect();
        let mut events = vec![DomainEvent::MemberRemovalStarted(MemberRemovalStarted {
            node_id: node_id.to_owned(),
            reason: reason.clone(),
            forced: force,
            rafts: rafts.clone(),
        })];
        if rafts.is_empty() {
            events.push(DomainEvent::MemberDecommissioned {
                node_id: node_id.to_owned(),
                reason,
                by: ctx.principal.clone(),
            });
        }
        Ok(decided(node_id, events))
    }

    /// The generation a member has applied: never above the cluster's.
    fn report_applied_generation(
        &self,
        node_id: &str,
        generation: &Option<u64>,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        if let Some(g) = f.required("generation", generation) {
            if *g > self.generation {
                f.push(
                    "generation",
                    format!("is above the cluster's generation {}", self.generation),
                );
            }
        }
        let generation = f.conclude(*generation)?;
        let m = self.member(node_id)?;
        if m.state == MemberState::Decommissioned {
            return Err(Refusal::new(
                ErrorCode::MemberDecommissioned,
                format!("Member {node_id} is decommissioned."),
            ));
        }
        if m.applied_generation == generation {
            return Ok(unchanged(node_id));
        }
        Ok(decided(
            node_id,
            vec![DomainEvent::AppliedGenerationReported {
                node_id: node_id.to_owned(),
                generation,
            }],
        ))
    }

    /// The raft cleanup took a member out of one raft; the last one completes
    /// the cleanup, and a removing member's decommission.
    fn record_raft_removal(
        &self,
        node_id: &str,
        raft: Raft,
        how: HowRemoved<'_>,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        let m = self.member(node_id)?;
        let pending = m.pending_cleanup();
        if !pending.contains(&raft) {
            // Nothing is removed twice in the log.
            return Ok(unchanged(node_id));
        }
        let mut events = vec![DomainEvent::RaftPeerRemoved {
            node_id: node_id.to_owned(),
            raft,
            already_gone: how.already_gone,
            adapter: how.adapter.to_owned(),
            leader_moved: how.leader_moved,
            settings: how.settings.map(str::to_owned),
        }];
        if pending.len() == 1 {
            events.push(DomainEvent::RaftCleanupCompleted {
                node_id: node_id.to_owned(),
            });
            if m.state == MemberState::Removing {
                events.push(DomainEvent::MemberDecommissioned {
                    node_id: node_id.to_owned(),
                    reason: m.decommission_reason.clone().unwrap_or_default(),
                    by: m
                        .removal_requested_by
                        .clone()
                        .unwrap_or_else(|| ctx.principal.clone()),
                });
            }
        }
        Ok(decided(node_id, events))
    }

    /// A raft's own listing names a member whose removal from it is
    /// recorded: it returned, and the raft is owed its removal again. Only
    /// a standing removal can be undone (a return already recorded, or a
    /// raft never removed, appends nothing). A raft that names peers by
    /// address cannot tell the member from another that now holds its
    /// address, so while a member that is not failed or decommissioned
    /// holds it, nothing is recorded: the cleanup never takes a live
    /// member's address out of a raft.
    fn record_raft_peer_return(
        &self,
        node_id: &str,
        raft: Raft,
        removed_position: u64,
        removed_at: DateTime<Utc>,
    ) -> Result<Decision, Refusal> {
        let m = self.member(node_id)?;
        if !m.rafts_removed.contains(&raft) {
            return Ok(unchanged(node_id));
        }
        if let Some(holder) = self.address_holder(m) {
            return Err(Refusal::new(
                ErrorCode::MemberExists,
                format!(
                    "Member {node_id}'s address {} is now held by member {}: a raft's listing of that address may name the live member, so {node_id}'s return is not recorded.",
                    m.mgmt_ip, holder.node_id
                ),
            )
            .with_details(json!({ "holder": holder.node_id, "raft": raft })));
        }
        Ok(decided(
            node_id,
            vec![DomainEvent::RaftPeerReturned(RaftPeerReturned {
                node_id: node_id.to_owned(),
                raft,
                removed_position,
                removed_at,
            })],
        ))
    }

    /// A node asks to join: one open request per node, none for a member.
    fn request_join(
        &self,
        request_id: &str,
        node_id: &Option<String>,
        mgmt_ip: &Option<String>,
        labels: &StringMap,
        facts: &str,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        let id = f.required("nodeId", node_id).cloned();
        if let Some(id) = &id {
            check_node_id(&mut f, "nodeId", id);
        }
        let ip = f
            .required("mgmtIp", mgmt_ip)
            .and_then(|ip| check_ip(&mut f, "mgmtIp", ip));
        check_labels(&mut f, "labels", labels);
        if facts.len() > MAX_JOIN_FACTS {
            f.push(
                "facts",
                format!("must be at most {MAX_JOIN_FACTS} bytes as JSON"),
            );
        } else if let Ok(v) = serde_json::from_str::<serde_json::Value>(facts) {
            crate::text::check_json_safe(&mut f, "facts", &v);
        }
        let (node_id, ip) = f.conclude(id.zip(ip))?;
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
    fn approve_join(
        &self,
        request_id: &str,
        role: &Option<String>,
        mgmt_ip: &Option<String>,
        bindings: &Option<StringMap>,
        labels: &Option<StringMap>,
    ) -> Result<Decision, Refusal> {
        let req = self.open_request(request_id)?;
        let mut f = Findings::default();
        let role = check_role(&mut f, role);
        let ip = check_ip(&mut f, "mgmtIp", mgmt_ip.as_deref().unwrap_or(&req.mgmt_ip));
        let bindings = check_bindings(&mut f, bindings.as_ref().unwrap_or(&StringMap::new()));
        let labels = labels.clone().unwrap_or_else(|| req.labels.clone());
        check_labels(&mut f, "labels", &labels);
        let (role, mgmt_ip) = f.conclude(role.zip(ip))?;
        let input = AdmitInput {
            node_id: req.node_id.clone(),
            role,
            mgmt_ip,
            bindings,
            labels,
        };
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
    fn reject_join(&self, request_id: &str, reason: &Option<String>) -> Result<Decision, Refusal> {
        let req = self.open_request(request_id)?;
        let mut f = Findings::default();
        let reason = check_line(&mut f, "reason", reason, MAX_REASON);
        let reason = f.conclude(reason)?;
        Ok(Decision {
            events: vec![DomainEvent::JoinRequestRejected {
                request_id: req.request_id.clone(),
                reason,
            }],
            subject: Subject::JoinRequest(request_id.to_owned()),
        })
    }

    /// A member change (`PATCH`): validated like an admission, every bad
    /// field at once; a demoted voter follows the decommission's quorum
    /// rule and is taken out of its rafts; nothing changed appends nothing.
    fn update(
        &self,
        node_id: &str,
        input: UpdateInput<'_>,
        force: bool,
    ) -> Result<Decision, Refusal> {
        let m = self.member(node_id)?;
        // A decommissioned member is out of the cluster whatever the body
        // says: 409 before any field is judged.
        if matches!(m.state, MemberState::Removing | MemberState::Decommissioned) {
            return Err(Refusal::new(
                ErrorCode::MemberDecommissioned,
                format!(
                    "Member {node_id} is {}; a decommissioned member cannot be changed.",
                    m.state.as_str()
                ),
            )
            .with_details(json!({ "state": m.state })));
        }
        let mut f = Findings::default();
        let role = match input.role {
            Some(_) => check_role(&mut f, input.role),
            None => Some(m.role),
        };
        let mgmt_ip = match input.mgmt_ip {
            Some(ip) => check_ip(&mut f, "mgmtIp", ip),
            None => Some(m.mgmt_ip.clone()),
        };
        let bindings = match input.bindings {
            Some(b) => check_bindings(&mut f, b),
            None => m.bindings.clone(),
        };
        let labels = input.labels.clone().unwrap_or_else(|| m.labels.clone());
        check_labels(&mut f, "labels", &labels);
        // Only an address the change gives is judged: the one a member
        // keeps was judged when it got it.
        if let Some(ip) = mgmt_ip.as_deref().filter(|ip| *ip != m.mgmt_ip) {
            f.0.extend(self.address_taken(ip, Some(node_id)));
        }
        if let Some(role) = role {
            f.0.extend(rack_missing(role, &labels));
        }
        let (role, mgmt_ip) = f.conclude(role.zip(mgmt_ip))?;
        if role == m.role && mgmt_ip == m.mgmt_ip && bindings == m.bindings && labels == m.labels {
            return Ok(unchanged(node_id));
        }
        let pending = m.pending_cleanup();
        let promoted = role.is_voter() && !m.role.is_voter();
        if !pending.is_empty() && (mgmt_ip != m.mgmt_ip || promoted) {
            return Err(Refusal::new(
                ErrorCode::RaftCleanupPending,
                format!(
                    "Member {node_id} is still being taken out of the rafts it reached; change its address or make it a voter once raftCleanupAt is set."
                ),
            )
            .with_details(json!({ "pending": pending })));
        }
        let demoted = m.role.is_voter() && !role.is_voter();
        if demoted && m.is_active_voter() && !force {
            self.quorum_kept(node_id, "Demoting")?;
        }
        // Like a decommission's: the rafts it is in, and any still owed by
        // a cleanup, less those it was already taken out of.
        let rafts: Vec<Raft> = if demoted {
            m.rafts_in()
                .union(&m.rafts_to_clean)
                .filter(|r| !m.rafts_removed.contains(r))
                .copied()
                .collect()
        } else {
            Vec::new()
        };
        Ok(decided(
            node_id,
            vec![DomainEvent::MemberUpdated(MemberUpdated {
                node_id: node_id.to_owned(),
                role,
                mgmt_ip,
                bindings,
                labels,
                forced: force,
                rafts,
            })],
        ))
    }

    /// The quorum rule of SPEC §4: taking an active voter away must leave
    /// at least two active voters.
    fn quorum_kept(&self, node_id: &str, doing: &str) -> Result<(), Refusal> {
        let before = self.active_voters();
        let after = before.saturating_sub(1);
        if after < 2 {
            return Err(Refusal::new(
                ErrorCode::QuorumAtRisk,
                format!(
                    "{doing} {node_id} would leave {after} active raft voter(s); at least 2 must remain. Send force to do it anyway."
                ),
            )
            .with_details(json!({ "votersBefore": before, "votersAfter": after })));
        }
        Ok(())
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

/// A storage member must name its rack.
fn rack_missing(role: Role, labels: &StringMap) -> Option<FieldError> {
    (role == Role::Storage && !labels.contains_key(RACK_LABEL)).then(|| {
        FieldError::new(
            format!("labels.{RACK_LABEL}"),
            "is required for a storage member",
        )
    })
}

/// The fields of a member change, as the request gave them.
struct UpdateInput<'a> {
    role: &'a Option<String>,
    mgmt_ip: &'a Option<String>,
    bindings: &'a Option<StringMap>,
    labels: &'a Option<StringMap>,
}

struct AdmitInput {
    node_id: String,
    role: Role,
    mgmt_ip: String,
    bindings: StringMap,
    labels: StringMap,
}

fn not_joining(m: &Member) -> Refusal {
    Refusal::new(
        ErrorCode::MemberNotJoining,
        format!("Member {} is {}, not joining.", m.node_id, m.state.as_str()),
    )
    .with_details(json!({ "state": m.state }))
}

/// How a raft's adapter took a peer out, as the raft cleanup reports it.
struct HowRemoved<'a> {
    already_gone: bool,
    adapter: &'a str,
    leader_moved: bool,
    settings: Option<&'a str>,
}
