//! Membership: the member lifecycle, join requests and the membership
//! generation (SPEC §4). Every rule of membership is decided here.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::{ErrorCode, FieldError, Findings, Refusal};
use crate::event::{
    DomainEvent, JoinRequested, MemberAdmitted, MemberJoinFailed, MemberRemovalStarted,
    MemberUpdated, StringMap,
};
use crate::state::{CommandContext, Decision, EventCtx, Subject};

/// The principal of membership the install declared.
pub const INSTALLER: &str = "stratum-installer";
/// The label that names a member's rack.
pub const RACK_LABEL: &str = "topology.rack";
/// The most bytes an error line may have.
pub const MAX_ERROR_LINE: usize = 2048;
/// The most bytes a reason may have.
pub const MAX_REASON: usize = 2048;
/// Traffic classes a binding may name.
pub const BINDING_CLASSES: [&str; 2] = ["storage", "overlay"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Control,
    Compute,
    Storage,
    Hybrid,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Control, Role::Compute, Role::Storage, Role::Hybrid];

    /// The names of [`Role::ALL`], as the API spells them.
    pub const NAMES: [&'static str; 4] = {
        let mut names = [""; 4];
        let mut i = 0;
        while i < names.len() {
            names[i] = Role::ALL[i].as_str();
            i += 1;
        }
        names
    };

    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Control => "control",
            Role::Compute => "compute",
            Role::Storage => "storage",
            Role::Hybrid => "hybrid",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Control and hybrid members vote in the three rafts and hold the
    /// virtual addresses (keepalived) and Alertmanager.
    pub fn is_voter(self) -> bool {
        matches!(self, Role::Control | Role::Hybrid)
    }

    /// Storage and hybrid members run vmstorage.
    pub fn is_storage(self) -> bool {
        matches!(self, Role::Storage | Role::Hybrid)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberState {
    Joining,
    Active,
    Failed,
    Removing,
    Decommissioned,
}

impl MemberState {
    pub const ALL: [MemberState; 5] = [
        MemberState::Joining,
        MemberState::Active,
        MemberState::Failed,
        MemberState::Removing,
        MemberState::Decommissioned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MemberState::Joining => "joining",
            MemberState::Active => "active",
            MemberState::Failed => "failed",
            MemberState::Removing => "removing",
            MemberState::Decommissioned => "decommissioned",
        }
    }

    pub fn parse(s: &str) -> Option<MemberState> {
        MemberState::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Only joining and active members are in peer lists and admitted by the
    /// node transport.
    pub fn in_peer_lists(self) -> bool {
        matches!(self, MemberState::Joining | MemberState::Active)
    }
}

/// The three rafts a voter takes part in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Raft {
    Patroni,
    Openbao,
    Ovn,
}

impl Raft {
    pub const ALL: [Raft; 3] = [Raft::Patroni, Raft::Openbao, Raft::Ovn];

    pub fn as_str(self) -> &'static str {
        match self {
            Raft::Patroni => "patroni",
            Raft::Openbao => "openbao",
            Raft::Ovn => "ovn",
        }
    }

    /// The raft a join step joins: `join/raft-openbao` names OpenBao's.
    pub fn of_step(step: &str) -> Option<Raft> {
        let name = step.strip_prefix("join/raft-")?;
        Raft::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// A member is lagging when it renders peer lists (joining or active) and
/// has not applied the cluster's generation.
pub fn lagging(state: MemberState, applied: u64, generation: u64) -> bool {
    state.in_peer_lists() && applied < generation
}

/// One member, as folded from its stream.
/// Snapshots (a cache of the fold, never the truth) serialize it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub node_id: String,
    pub state: MemberState,
    pub role: Role,
    pub mgmt_ip: String,
    pub bindings: StringMap,
    pub labels: StringMap,
    pub ordinal: u32,
    pub applied_generation: u64,
    pub join_step: Option<String>,
    pub rafts_reached: BTreeSet<Raft>,
    pub failed_step: Option<String>,
    pub failed_error: Option<String>,
    /// The rafts a cleanup must take it out of, and those already done.
    pub rafts_to_clean: BTreeSet<Raft>,
    pub rafts_removed: BTreeSet<Raft>,
    pub raft_cleanup_at: Option<DateTime<Utc>>,
    pub removal_requested_by: Option<String>,
    pub removal_started_at: Option<DateTime<Utc>>,
    pub decommission_reason: Option<String>,
    pub decommissioned_by: Option<String>,
    pub decommissioned_at: Option<DateTime<Utc>>,
    pub join_request: Option<String>,
    pub admitted_by: String,
    pub admitted_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The position of the last event of its stream.
    pub last_position: u64,
    pub version: u64,
}

impl Member {
    /// The rafts a cleanup still has to take this member out of, in order.
    pub fn pending_cleanup(&self) -> Vec<Raft> {
        self.rafts_to_clean
            .difference(&self.rafts_removed)
            .copied()
            .collect()
    }

    pub fn rack(&self) -> Option<&str> {
        self.labels.get(RACK_LABEL).map(String::as_str)
    }

    fn is_active_voter(&self) -> bool {
        self.state == MemberState::Active && self.role.is_voter()
    }

    /// The rafts this member is a peer of now: those whose join step it
    /// reported, or all three for an active voter.
    fn rafts_in(&self) -> BTreeSet<Raft> {
        if self.is_active_voter() {
            Raft::ALL.into_iter().collect()
        } else {
            self.rafts_reached.clone()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JoinRequestStatus {
    Pending,
    Approved,
    Rejected,
}

impl JoinRequestStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JoinRequestStatus::Pending => "pending",
            JoinRequestStatus::Approved => "approved",
            JoinRequestStatus::Rejected => "rejected",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequest {
    pub request_id: String,
    pub node_id: String,
    pub mgmt_ip: String,
    pub labels: StringMap,
    pub facts: String,
    pub status: JoinRequestStatus,
    pub reason: Option<String>,
    pub requested_by: String,
    pub requested_at: DateTime<Utc>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub version: u64,
}

/// Every member and join request, and the generation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub members: BTreeMap<String, Member>,
    pub join_requests: BTreeMap<String, JoinRequest>,
    /// The global position of the latest topology event.
    pub generation: u64,
    pub max_ordinal: u32,
}

/// The commands of membership. Fields a request may leave out or get wrong
/// are options here, so `decide` can name every problem at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberCommand {
    Admit {
        node_id: Option<String>,
        role: Option<String>,
        mgmt_ip: Option<String>,
        bindings: StringMap,
        labels: StringMap,
    },
    ReportJoinProgress {
        node_id: String,
        step: Option<String>,
    },
    CompleteJoin {
        node_id: String,
    },
    ReportJoinFailure {
        node_id: String,
        step: Option<String>,
        error: Option<String>,
    },
    RetryJoin {
        node_id: String,
    },
    Decommission {
        node_id: String,
        reason: Option<String>,
        force: bool,
    },
    ReportAppliedGeneration {
        node_id: String,
        generation: Option<u64>,
    },
    /// The raft cleanup process manager took the member out of one raft:
    /// `adapter` is the adapter that said the peer is gone.
    RecordRaftRemoval {
        node_id: String,
        raft: Raft,
        already_gone: bool,
        adapter: String,
        /// The peer led the raft and leadership was moved off it first.
        leader_moved: bool,
    },
    /// A change of role, address, bindings or labels (`PATCH`): a field
    /// left out stays as it is; bindings and labels replace the whole map.
    Update {
        node_id: String,
        role: Option<String>,
        mgmt_ip: Option<String>,
        bindings: Option<StringMap>,
        labels: Option<StringMap>,
        force: bool,
    },
    RequestJoin {
        request_id: String,
        node_id: Option<String>,
        mgmt_ip: Option<String>,
        labels: StringMap,
        facts: String,
    },
    ApproveJoin {
        request_id: String,
        role: Option<String>,
        mgmt_ip: Option<String>,
        bindings: Option<StringMap>,
        labels: Option<StringMap>,
    },
    RejectJoin {
        request_id: String,
        reason: Option<String>,
    },
}

impl MemberCommand {
    /// The stream whose version an `If-Match` is checked against.
    pub fn stream_id(&self) -> String {
        match self {
            MemberCommand::Admit { node_id, .. } => {
                member_stream(node_id.as_deref().unwrap_or_default())
            }
            MemberCommand::ReportJoinProgress { node_id, .. }
            | MemberCommand::CompleteJoin { node_id }
            | MemberCommand::ReportJoinFailure { node_id, .. }
            | MemberCommand::RetryJoin { node_id }
            | MemberCommand::Decommission { node_id, .. }
            | MemberCommand::ReportAppliedGeneration { node_id, .. }
            | MemberCommand::RecordRaftRemoval { node_id, .. }
            | MemberCommand::Update { node_id, .. } => member_stream(node_id),
            MemberCommand::RequestJoin { request_id, .. }
            | MemberCommand::ApproveJoin { request_id, .. }
            | MemberCommand::RejectJoin { request_id, .. } => join_request_stream(request_id),
        }
    }
}

pub fn member_stream(node_id: &str) -> String {
    format!("member/{node_id}")
}

pub fn join_request_stream(request_id: &str) -> String {
    format!("joinrequest/{request_id}")
}

/// [`valid_node_id`] as a regular expression, for the API's schema.
pub const NODE_ID_PATTERN: &str = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$";

/// A node id is a DNS label: lowercase letters, digits and inner hyphens.
pub fn valid_node_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A join step is a progress phase name: `join/<name>`.
/// [`valid_step`] as a regular expression, for the API's schema.
pub const STEP_PATTERN: &str = "^join/[a-z0-9][a-z0-9-]*$";

pub fn valid_step(step: &str) -> bool {
    step.len() <= 128
        && step.strip_prefix("join/").is_some_and(|name| {
            !name.is_empty()
                && name.as_bytes()[0] != b'-'
                && name
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        })
}

fn check_step(f: &mut Findings, step: &Option<String>) -> Option<String> {
    let step = f.required("step", step)?;
    if !valid_step(step) {
        f.push("step", "must be a join step name such as join/raft-openbao");
        return None;
    }
    Some(step.clone())
}

fn check_line(f: &mut Findings, field: &str, value: &Option<String>, max: usize) -> Option<String> {
    let value = f.required(field, value)?;
    if value.trim().is_empty() {
        f.push(field, "must not be empty");
    } else if value.contains(['\n', '\r']) {
        f.push(field, "must be one line");
    } else if value.len() > max {
        f.push(field, format!("must be at most {max} bytes"));
    } else if crate::text::check_safe(f, field, value) {
        return Some(value.clone());
    }
    None
}

fn check_ip(f: &mut Findings, field: &str, value: &str) -> Option<String> {
    match value.parse::<IpAddr>() {
        Ok(ip) => Some(ip.to_string()),
        Err(_) => {
            f.push(field, "must be an IPv4 or IPv6 address");
            None
        }
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
    pub fn member(&self, node_id: &str) -> Result<&Member, Refusal> {
        self.members
            .get(node_id)
            .ok_or_else(|| Refusal::not_found(format!("Member {node_id}")))
    }

    /// Active raft voters now.
    pub fn active_voters(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.is_active_voter())
            .count()
    }

    /// Members whose raft cleanup is still to do, for the process manager:
    /// failed and removing members, and demoted voters.
    pub fn pending_cleanups(&self) -> impl Iterator<Item = (&Member, Vec<Raft>)> {
        self.members.values().filter_map(|m| {
            let pending = m.pending_cleanup();
            (!pending.is_empty()).then_some((m, pending))
        })
    }

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
                    && m.mgmt_ip == mgmt_ip
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

    pub fn decide(&self, cmd: &MemberCommand, ctx: &CommandContext) -> Result<Decision, Refusal> {
        match cmd {
            MemberCommand::Admit {
                node_id,
                role,
                mgmt_ip,
                bindings,
                labels,
            } => {
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
                let conflicts = self.admission_conflicts(
                    &input.node_id,
                    &input.mgmt_ip,
                    input.role,
                    &input.labels,
                );
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
            MemberCommand::ReportJoinProgress { node_id, step } => {
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
                        node_id: node_id.clone(),
                        step,
                    }],
                ))
            }
            MemberCommand::CompleteJoin { node_id } => {
                let m = self.member(node_id)?;
                match m.state {
                    MemberState::Joining => Ok(decided(
                        node_id,
                        vec![DomainEvent::MemberJoinCompleted {
                            node_id: node_id.clone(),
                        }],
                    )),
                    MemberState::Active => Ok(unchanged(node_id)),
                    _ => Err(not_joining(m)),
                }
            }
            MemberCommand::ReportJoinFailure {
                node_id,
                step,
                error,
            } => {
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
                    node_id: node_id.clone(),
                    step,
                    error,
                    rafts: rafts.clone(),
                })];
                if rafts.is_empty() {
                    events.push(DomainEvent::RaftCleanupCompleted {
                        node_id: node_id.clone(),
                    });
                }
                Ok(decided(node_id, events))
            }
            MemberCommand::RetryJoin { node_id } => {
                let m = self.member(node_id)?;
                match m.state {
                    MemberState::Failed if m.raft_cleanup_at.is_some() => Ok(decided(
                        node_id,
                        vec![DomainEvent::MemberJoinRetried {
                            node_id: node_id.clone(),
                        }],
                    )),
                    MemberState::Failed => Err(Refusal::new(
                        ErrorCode::RaftCleanupPending,
                        format!(
                            "Member {node_id} is still being taken out of the rafts it reached; retry once raftCleanupAt is set."
                        ),
                    )
                    .with_details(json!({ "pending": m.pending_cleanup() }))),
                    _ => Err(Refusal::new(
                        ErrorCode::MemberNotFailed,
                        format!(
                            "Member {node_id} is {}; only a failed join can be retried.",
                            m.state.as_str()
                        ),
                    )
                    .with_details(json!({ "state": m.state }))),
                }
            }
            MemberCommand::Decommission {
                node_id,
                reason,
                force,
            } => {
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
                    node_id: node_id.clone(),
                    reason: reason.clone(),
                    forced: *force,
                    rafts: rafts.clone(),
                })];
                if rafts.is_empty() {
                    events.push(DomainEvent::MemberDecommissioned {
                        node_id: node_id.clone(),
                        reason,
                        by: ctx.principal.clone(),
                    });
                }
                Ok(decided(node_id, events))
            }
            MemberCommand::ReportAppliedGeneration {
                node_id,
                generation,
            } => {
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
                        node_id: node_id.clone(),
                        generation,
                    }],
                ))
            }
            MemberCommand::RecordRaftRemoval {
                node_id,
                raft,
                already_gone,
                adapter,
                leader_moved,
            } => {
                let m = self.member(node_id)?;
                let pending = m.pending_cleanup();
                if !pending.contains(raft) {
                    // Nothing is removed twice in the log.
                    return Ok(unchanged(node_id));
                }
                let mut events = vec![DomainEvent::RaftPeerRemoved {
                    node_id: node_id.clone(),
                    raft: *raft,
                    already_gone: *already_gone,
                    adapter: adapter.clone(),
                    leader_moved: *leader_moved,
                }];
                if pending.len() == 1 {
                    events.push(DomainEvent::RaftCleanupCompleted {
                        node_id: node_id.clone(),
                    });
                    if m.state == MemberState::Removing {
                        events.push(DomainEvent::MemberDecommissioned {
                            node_id: node_id.clone(),
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
            MemberCommand::Update {
                node_id,
                role,
                mgmt_ip,
                bindings,
                labels,
                force,
            } => self.decide_update(
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
            } => {
                let mut f = Findings::default();
                let id = f.required("nodeId", node_id).cloned();
                if let Some(id) = &id {
                    check_node_id(&mut f, "nodeId", id);
                }
                let ip = f
                    .required("mgmtIp", mgmt_ip)
                    .and_then(|ip| check_ip(&mut f, "mgmtIp", ip));
                check_labels(&mut f, "labels", labels);
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(facts) {
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
                        request_id: request_id.clone(),
                        node_id,
                        mgmt_ip: ip,
                        labels: labels.clone(),
                        facts: facts.clone(),
                    })],
                    subject: Subject::JoinRequest(request_id.clone()),
                })
            }
            MemberCommand::ApproveJoin {
                request_id,
                role,
                mgmt_ip,
                bindings,
                labels,
            } => {
                let req = self.open_request(request_id)?;
                let mut f = Findings::default();
                let role = check_role(&mut f, role);
                let ip = check_ip(&mut f, "mgmtIp", mgmt_ip.as_deref().unwrap_or(&req.mgmt_ip));
                let bindings =
                    check_bindings(&mut f, bindings.as_ref().unwrap_or(&StringMap::new()));
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
                let conflicts = self.admission_conflicts(
                    &input.node_id,
                    &input.mgmt_ip,
                    input.role,
                    &input.labels,
                );
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
                            request_id: request_id.clone(),
                            node_id: req.node_id.clone(),
                        },
                        self.admitted(input, Some(request_id.clone())),
                    ],
                    subject: Subject::JoinRequest(request_id.clone()),
                })
            }
            MemberCommand::RejectJoin { request_id, reason } => {
                let req = self.open_request(request_id)?;
                let mut f = Findings::default();
                let reason = check_line(&mut f, "reason", reason, MAX_REASON);
                let reason = f.conclude(reason)?;
                Ok(Decision {
                    events: vec![DomainEvent::JoinRequestRejected {
                        request_id: req.request_id.clone(),
                        reason,
                    }],
                    subject: Subject::JoinRequest(request_id.clone()),
                })
            }
        }
    }

    /// A member change (`PATCH`): validated like an admission, every bad
    /// field at once; a demoted voter follows the decommission's quorum
    /// rule and is taken out of its rafts; nothing changed appends nothing.
    fn decide_update(
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

    /// Folds one event into the state. Events were decided against this
    /// very state, so a missing member here is a corrupt log, and ignored.
    pub fn evolve(&mut self, ctx: &EventCtx, event: &DomainEvent) {
        if event.is_topology_change() {
            self.generation = ctx.position;
        }
        if let DomainEvent::MemberAdmitted(a) = event {
            self.max_ordinal = self.max_ordinal.max(a.ordinal);
            self.members.insert(
                a.node_id.clone(),
                Member {
                    node_id: a.node_id.clone(),
                    state: MemberState::Joining,
                    role: a.role,
                    mgmt_ip: a.mgmt_ip.clone(),
                    bindings: a.bindings.clone(),
                    labels: a.labels.clone(),
                    ordinal: a.ordinal,
                    applied_generation: 0,
                    join_step: None,
                    rafts_reached: BTreeSet::new(),
                    failed_step: None,
                    failed_error: None,
                    rafts_to_clean: BTreeSet::new(),
                    rafts_removed: BTreeSet::new(),
                    raft_cleanup_at: None,
                    removal_requested_by: None,
                    removal_started_at: None,
                    decommission_reason: None,
                    decommissioned_by: None,
                    decommissioned_at: None,
                    join_request: a.join_request.clone(),
                    admitted_by: ctx.principal.to_owned(),
                    admitted_at: ctx.occurred_at,
                    updated_at: ctx.occurred_at,
                    last_position: ctx.position,
                    version: ctx.stream_version,
                },
            );
            return;
        }
        match event {
            DomainEvent::JoinRequested(r) => {
                self.join_requests.insert(
                    r.request_id.clone(),
                    JoinRequest {
                        request_id: r.request_id.clone(),
                        node_id: r.node_id.clone(),
                        mgmt_ip: r.mgmt_ip.clone(),
                        labels: r.labels.clone(),
                        facts: r.facts.clone(),
                        status: JoinRequestStatus::Pending,
                        reason: None,
                        requested_by: ctx.principal.to_owned(),
                        requested_at: ctx.occurred_at,
                        decided_by: None,
                        decided_at: None,
                        version: ctx.stream_version,
                    },
                );
                return;
            }
            DomainEvent::JoinRequestApproved { request_id, .. }
            | DomainEvent::JoinRequestRejected { request_id, .. } => {
                if let Some(r) = self.join_requests.get_mut(request_id) {
                    r.status = if let DomainEvent::JoinRequestRejected { reason, .. } = event {
                        r.reason = Some(reason.clone());
                        JoinRequestStatus::Rejected
                    } else {
                        JoinRequestStatus::Approved
                    };
                    r.decided_by = Some(ctx.principal.to_owned());
                    r.decided_at = Some(ctx.occurred_at);
                    r.version = ctx.stream_version;
                }
                return;
            }
            _ => {}
        }
        let Some(node_id) = member_of(event) else {
            return;
        };
        let Some(m) = self.members.get_mut(node_id) else {
            return;
        };
        m.updated_at = ctx.occurred_at;
        m.version = ctx.stream_version;
        m.last_position = ctx.position;
        match event {
            DomainEvent::JoinProgressReported { step, .. } => {
                m.rafts_reached.extend(Raft::of_step(step));
                m.join_step = Some(step.clone());
            }
            DomainEvent::MemberJoinCompleted { .. } => {
                m.state = MemberState::Active;
                m.join_step = None;
            }
            DomainEvent::MemberJoinFailed(e) => {
                m.state = MemberState::Failed;
                m.failed_step = Some(e.step.clone());
                m.failed_error = Some(e.error.clone());
                m.rafts_to_clean = e.rafts.iter().copied().collect();
                m.rafts_removed.clear();
                m.raft_cleanup_at = None;
            }
            DomainEvent::RaftPeerRemoved { raft, .. } => {
                m.rafts_removed.insert(*raft);
            }
            DomainEvent::RaftCleanupCompleted { .. } => {
                m.raft_cleanup_at = Some(ctx.occurred_at);
            }
            DomainEvent::MemberJoinRetried { .. } => {
                m.state = MemberState::Joining;
                m.join_step = None;
                m.rafts_reached.clear();
                m.failed_step = None;
                m.failed_error = None;
                m.rafts_to_clean.clear();
                m.rafts_removed.clear();
                m.raft_cleanup_at = None;
            }
            DomainEvent::MemberRemovalStarted(e) => {
                m.state = MemberState::Removing;
                m.decommission_reason = Some(e.reason.clone());
                m.removal_requested_by = Some(ctx.principal.to_owned());
                m.removal_started_at = Some(ctx.occurred_at);
                m.rafts_to_clean = e.rafts.iter().copied().collect();
                m.rafts_removed.clear();
            }
            DomainEvent::MemberDecommissioned { reason, by, .. } => {
                m.state = MemberState::Decommissioned;
                m.decommission_reason = Some(reason.clone());
                m.decommissioned_by = Some(by.clone());
                m.decommissioned_at = Some(ctx.occurred_at);
            }
            DomainEvent::AppliedGenerationReported { generation, .. } => {
                m.applied_generation = *generation;
            }
            DomainEvent::MemberUpdated(e) => {
                if e.role.is_voter() && !m.role.is_voter() {
                    // A promoted voter joins its rafts anew: what an earlier
                    // demotion's cleanup removed is owed again by the next.
                    m.rafts_to_clean.clear();
                    m.rafts_removed.clear();
                    m.raft_cleanup_at = None;
                }
                m.role = e.role;
                m.mgmt_ip = e.mgmt_ip.clone();
                m.bindings = e.bindings.clone();
                m.labels = e.labels.clone();
                if !e.rafts.is_empty() {
                    m.rafts_to_clean = e.rafts.iter().copied().collect();
                    m.rafts_removed.clear();
                    m.raft_cleanup_at = None;
                }
            }
            _ => {}
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

/// The member an event is about, if it is a member event.
pub fn member_of(event: &DomainEvent) -> Option<&str> {
    use crate::event::About;
    match event.about() {
        About::Member(id) => Some(id),
        About::Upgrade(_)
        | About::JoinRequest(_)
        | About::Token(_)
        | About::Policy(_)
        | About::Principal(_)
        | About::ResourcePolicy(_)
        | About::Release(_)
        | About::RunningRelease
        | About::Facts(_)
        | About::Alarm { .. } => None,
    }
}
