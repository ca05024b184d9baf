//! What the raft cleanup records: a member taken out of a raft, and a
//! member a raft's own listing names again.

use serde_json::json;

use crate::error::{ErrorCode, Refusal};
use crate::event::{DomainEvent, RaftPeerReturned};
use crate::state::{CommandContext, Decision};

use super::*;

/// How a raft's adapter took a peer out, as the raft cleanup reports it.
pub(super) struct HowRemoved<'a> {
    pub already_gone: bool,
    pub adapter: &'a str,
    pub leader_moved: bool,
    pub settings: Option<&'a str>,
}

impl Membership {
    /// The raft cleanup took a member out of one raft; the last one completes
    /// the cleanup, and a removing member's decommission.
    pub(super) fn record_raft_removal(
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
    pub(super) fn record_raft_peer_return(
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
}
