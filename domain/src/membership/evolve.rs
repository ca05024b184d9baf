//! Folding the membership events.

use std::collections::BTreeSet;

use crate::event::DomainEvent;
use crate::state::EventCtx;

use super::*;

impl Membership {
    /// Folds one event into the state. Events were decided against this
    /// very state, so a missing member here is a corrupt log, and ignored.
    pub fn evolve(&mut self, ctx: &EventCtx, event: &DomainEvent) {
        if event.is_topology_change() {
            self.generation = ctx.position;
        }
        match event {
            DomainEvent::MemberAdmitted(a) => {
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
                        rafts_recorded_only: BTreeSet::new(),
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
            }
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
            }
            DomainEvent::JoinRequestApproved { request_id, .. } => {
                self.decide_request(ctx, request_id, JoinRequestStatus::Approved, None);
            }
            DomainEvent::JoinRequestRejected { request_id, reason } => {
                self.decide_request(ctx, request_id, JoinRequestStatus::Rejected, Some(reason));
            }
            DomainEvent::JoinProgressReported { node_id, step } => {
                if let Some(m) = self.touched(node_id, ctx) {
                    m.rafts_reached.extend(Raft::of_step(step));
                    // Into the step already there: its buffer is reused.
                    match &mut m.join_step {
                        Some(s) => s.clone_from(step),
                        None => m.join_step = Some(step.clone()),
                    }
                }
            }
            DomainEvent::MemberJoinCompleted { node_id } => {
                if let Some(m) = self.touched(node_id, ctx) {
                    m.state = MemberState::Active;
                    m.join_step = None;
                }
            }
            DomainEvent::MemberJoinFailed(e) => {
                if let Some(m) = self.touched(&e.node_id, ctx) {
                    m.state = MemberState::Failed;
                    m.failed_step = Some(e.step.clone());
                    m.failed_error = Some(e.error.clone());
                    m.rafts_to_clean = e.rafts.iter().copied().collect();
                    m.rafts_removed.clear();
                    m.rafts_recorded_only.clear();
                    m.raft_cleanup_at = None;
                }
            }
            DomainEvent::RaftPeerRemoved {
                node_id,
                raft,
                adapter,
                ..
            } => {
                if let Some(m) = self.touched(node_id, ctx) {
                    m.rafts_removed.insert(*raft);
                    if adapter == super::RECORD_ONLY_ADAPTER {
                        m.rafts_recorded_only.insert(*raft);
                    }
                }
            }
            DomainEvent::RaftPeerReturned(e) => {
                if let Some(m) = self.touched(&e.node_id, ctx) {
                    // Owed again: the cleanup is not done until it is.
                    m.rafts_removed.remove(&e.raft);
                    m.rafts_recorded_only.remove(&e.raft);
                    m.raft_cleanup_at = None;
                }
            }
            DomainEvent::RaftCleanupCompleted { node_id } => {
                if let Some(m) = self.touched(node_id, ctx) {
                    m.raft_cleanup_at = Some(ctx.occurred_at);
                }
            }
            DomainEvent::MemberJoinRetried { node_id } => {
                if let Some(m) = self.touched(node_id, ctx) {
                    m.state = MemberState::Joining;
                    m.join_step = None;
                    m.rafts_reached.clear();
                    m.failed_step = None;
                    m.failed_error = None;
                    m.rafts_to_clean.clear();
                    m.rafts_removed.clear();
                    m.rafts_recorded_only.clear();
                    m.raft_cleanup_at = None;
                }
            }
            DomainEvent::MemberRemovalStarted(e) => {
                if let Some(m) = self.touched(&e.node_id, ctx) {
                    m.state = MemberState::Removing;
                    m.decommission_reason = Some(e.reason.clone());
                    m.removal_requested_by = Some(ctx.principal.to_owned());
                    m.removal_started_at = Some(ctx.occurred_at);
                    m.rafts_to_clean = e.rafts.iter().copied().collect();
                    m.rafts_removed.clear();
                    m.rafts_recorded_only.clear();
                }
            }
            DomainEvent::MemberDecommissioned {
                node_id,
                reason,
                by,
            } => {
                if let Some(m) = self.touched(node_id, ctx) {
                    m.state = MemberState::Decommissioned;
                    m.decommission_reason = Some(reason.clone());
                    m.decommissioned_by = Some(by.clone());
                    m.decommissioned_at = Some(ctx.occurred_at);
                }
            }
            DomainEvent::AppliedGenerationReported {
                node_id,
                generation,
            } => {
                if let Some(m) = self.touched(node_id, ctx) {
                    m.applied_generation = *generation;
                }
            }
            DomainEvent::MemberUpdated(e) => {
                if let Some(m) = self.touched(&e.node_id, ctx) {
                    if e.role.is_voter() && !m.role.is_voter() {
                        // A promoted voter joins its rafts anew: what an earlier
                        // demotion's cleanup removed is owed again by the next.
                        m.rafts_to_clean.clear();
                        m.rafts_removed.clear();
                        m.rafts_recorded_only.clear();
                        m.raft_cleanup_at = None;
                    }
                    m.role = e.role;
                    m.mgmt_ip = e.mgmt_ip.clone();
                    m.bindings = e.bindings.clone();
                    m.labels = e.labels.clone();
                    if !e.rafts.is_empty() {
                        m.rafts_to_clean = e.rafts.iter().copied().collect();
                        m.rafts_removed.clear();
                        m.rafts_recorded_only.clear();
                        m.raft_cleanup_at = None;
                    }
                }
            }
            // The other families' events: they fold them. Named, not a
            // wildcard, so a new event type must be decided here too.
            DomainEvent::TokenIssued(_)
            | DomainEvent::TokenRevoked(_)
            | DomainEvent::PolicyCreated(_)
            | DomainEvent::PrincipalPoliciesSet(_)
            | DomainEvent::ResourcePolicySet(_)
            | DomainEvent::ReleaseRegistered(_)
            | DomainEvent::RunningReleaseSet(_)
            | DomainEvent::UpgradePlanned(_)
            | DomainEvent::UpgradeStateChanged(_)
            | DomainEvent::UpgradePrechecked(_)
            | DomainEvent::UpgradeNodeTurnStarted(_)
            | DomainEvent::UpgradeNodeReported(_)
            | DomainEvent::UpgradeBackupReported(_)
            | DomainEvent::UpgradeFailed(_)
            | DomainEvent::UpgradeCompleted(_)
            | DomainEvent::UpgradeCanceled(_)
            | DomainEvent::UpgradeRolledBack(_)
            | DomainEvent::UpgradeAcknowledged(_)
            | DomainEvent::NodeFactsReported(_)
            | DomainEvent::AlarmRaised(_)
            | DomainEvent::AlarmCleared(_)
            | DomainEvent::EventsLost(_)
            | DomainEvent::CheckpointForkFound(_)
            | DomainEvent::CheckpointForkAcknowledged(_) => {}
            DomainEvent::StorageVersionFinalized(f) => {
                // The member rows change with the finalization, not while
                // the previous build may still write them.
                self.record_only_shown |= f.level >= RECORD_ONLY_SHOWN_FROM;
            }
        }
    }

    /// The member an event changes, with its record's version, time and
    /// position moved on; `None` for a member the log never admitted (a
    /// corrupt log: ignored).
    fn touched(&mut self, node_id: &str, ctx: &EventCtx) -> Option<&mut Member> {
        let m = self.members.get_mut(node_id)?;
        m.updated_at = ctx.occurred_at;
        m.version = ctx.stream_version;
        m.last_position = ctx.position;
        Some(m)
    }

    /// A join request approved or rejected.
    fn decide_request(
        &mut self,
        ctx: &EventCtx,
        request_id: &str,
        status: JoinRequestStatus,
        reason: Option<&String>,
    ) {
        if let Some(r) = self.join_requests.get_mut(request_id) {
            r.status = status;
            if let Some(reason) = reason {
                r.reason = Some(reason.clone());
            }
            r.decided_by = Some(ctx.principal.to_owned());
            r.decided_at = Some(ctx.occurred_at);
            r.version = ctx.stream_version;
        }
    }
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
        | About::Storage
        | About::Facts(_)
        | About::Alarm { .. } => None,
    }
}
