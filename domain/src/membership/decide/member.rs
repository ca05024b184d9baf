//! A member's life once admitted: a change of role, address, bindings or
//! labels, a decommission (both under the quorum rule), and the generation
//! it applied.

use serde_json::json;

use crate::error::{ErrorCode, FieldError, Refusal};
use crate::event::{DomainEvent, MemberRemovalStarted, MemberUpdated, StringMap};
use crate::membership::parse::MemberChange;
use crate::state::{CommandContext, Decision};

use super::*;

/// The fields of a member change, as the request gave them.
pub(super) struct UpdateInput<'a> {
    pub role: &'a Option<String>,
    pub mgmt_ip: &'a Option<String>,
    pub bindings: &'a Option<StringMap>,
    pub labels: &'a Option<StringMap>,
}

impl Membership {
    /// A member change (`PATCH`): validated like an admission, every bad
    /// field at once; a demoted voter follows the decommission's quorum
    /// rule and is taken out of its rafts; nothing changed appends nothing.
    pub(super) fn update(
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
        let (
            MemberChange {
                role,
                mgmt_ip,
                bindings,
                labels,
            },
            mut f,
        ) = parse::member_change(input.role, input.mgmt_ip, input.bindings, input.labels, m);
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

    /// A decommission: the quorum rule unless forced, then the member is
    /// taken out of every raft it is in or still owes a cleanup.
    pub(super) fn decommission(
        &self,
        node_id: &str,
        reason: String,
        force: bool,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
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
    pub(super) fn report_applied_generation(
        &self,
        node_id: &str,
        generation: u64,
    ) -> Result<Decision, Refusal> {
        if generation > self.generation {
            return Err(Refusal::invalid(vec![FieldError::new(
                "generation",
                format!("is above the cluster's generation {}", self.generation),
            )]));
        }
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
}
