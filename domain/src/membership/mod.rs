//! Membership: the member lifecycle, join requests and the membership
//! generation (SPEC §4). Every rule of membership is decided here.
//!
//! The module is split along its seams: this file holds the records (a
//! member, a join request, the membership) and the commands; [`parse`]
//! parses each command's fields into the typed value its decision takes;
//! [`decide`] decides them, one function per command split by family,
//! holding only the rules; and [`evolve`] folds the events.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::Refusal;

mod decide;
mod evolve;
mod parse;

pub use evolve::member_of;

/// Labels and bindings are ordered maps so every rendering is deterministic.
pub type StringMap = BTreeMap<String, String>;

/// The principal of membership the install declared.
pub const INSTALLER: &str = "stratum-installer";
/// The label that names a member's rack.
pub const RACK_LABEL: &str = "topology.rack";
/// The most bytes an error line may have.
pub const MAX_ERROR_LINE: usize = 2048;
/// The most bytes a reason may have.
pub const MAX_REASON: usize = 2048;
/// The most bytes a node's facts may have, as JSON (a join request's
/// and a facts report's).
pub const MAX_JOIN_FACTS: usize = 64 * 1024;
/// Traffic classes a binding may name.
pub const BINDING_CLASSES: [&str; 2] = ["storage", "overlay"];

string_enum! {
    pub enum Role {
        Control = "control",
        Compute = "compute",
        Storage = "storage",
        Hybrid = "hybrid",
    }
}

impl Role {
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

string_enum! {
    pub enum MemberState {
        Joining = "joining",
        Active = "active",
        Failed = "failed",
        Removing = "removing",
        Decommissioned = "decommissioned",
    }
}

impl MemberState {
    /// Only joining and active members are in peer lists and admitted by the
    /// node transport.
    pub fn in_peer_lists(self) -> bool {
        matches!(self, MemberState::Joining | MemberState::Active)
    }

    /// Whether a node's own credential (its client certificate) still
    /// authenticates it: not once its decommission is accepted, while its
    /// removal from the rafts runs and after.
    pub fn node_may_authenticate(self) -> bool {
        match self {
            MemberState::Joining | MemberState::Active | MemberState::Failed => true,
            MemberState::Removing | MemberState::Decommissioned => false,
        }
    }
}

/// The adapter a removal names when no raft was called (none is
/// configured for it): the removal is in the record only.
pub const RECORD_ONLY_ADAPTER: &str = "record-only";

string_enum! {
    /// The three rafts a voter takes part in.
    pub enum Raft {
        Patroni = "patroni",
        Openbao = "openbao",
        Ovn = "ovn",
    }
}

impl Raft {
    /// The raft a join step joins: `join/raft-openbao` names OpenBao's.
    pub fn of_step(step: &str) -> Option<Raft> {
        Raft::parse(step.strip_prefix("join/raft-")?)
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
    /// The removals recorded without calling the raft (the `record-only`
    /// adapter, where none is configured): in the record, not known to be
    /// out of the raft.
    #[serde(default)]
    pub rafts_recorded_only: BTreeSet<Raft>,
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

string_enum! {
    pub enum JoinRequestStatus {
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
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
    pub members: crate::Map<String, Member>,
    pub join_requests: crate::Map<String, JoinRequest>,
    /// The global position of the latest topology event.
    pub generation: u64,
    pub max_ordinal: u32,
    /// Whether members' rows hold their record-only removals: from the
    /// finalization of storage level [`RECORD_ONLY_SHOWN_FROM`] on (the API
    /// shows them always).
    #[serde(default)]
    pub record_only_shown: bool,
}

/// The storage level from which members' rows hold their record-only
/// removals (`raftsRecordedOnly`).
pub const RECORD_ONLY_SHOWN_FROM: u16 = 2;

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
        /// The digest of the process-manager settings the removal was
        /// made with.
        settings: Option<String>,
    },
    /// The raft cleanup process manager read a raft's own listing and it
    /// names a member whose removal from it is recorded (at
    /// `removed_position`, `removed_at`): the member returned.
    RecordRaftPeerReturn {
        node_id: String,
        raft: Raft,
        removed_position: u64,
        removed_at: DateTime<Utc>,
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
            | MemberCommand::RecordRaftPeerReturn { node_id, .. }
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
}
