//! What nodes report: their part of an upgrade, the backup, and the facts
//! of what they run and hold.

use serde_json::json;

use crate::error::{ErrorCode, Refusal};
use crate::event::DomainEvent;
use crate::state::{Decision, State, Subject};
use crate::upgrade::parse::NodeReport;

use super::*;

impl Upgrades {
    /// A node's report of its part: nothing new appends nothing; a fetch
    /// or verify in its state, a roll in its turn; a failure, or a node
    /// that switched itself back, fails the upgrade.
    pub(super) fn report_node(
        &self,
        upgrade_id: &str,
        node_id: &str,
        r: NodeReport<'_>,
    ) -> Result<Decision, Refusal> {
        let (phase, status) = (r.phase, r.status);
        let u = self.upgrade(upgrade_id)?;
        let Some(idx) = u.nodes.iter().position(|n| n.node_id == node_id) else {
            return Err(Refusal::not_found(format!(
                "Node {node_id} of upgrade {upgrade_id}"
            )));
        };
        let node = &u.nodes[idx];
        let message = r.message.clone().unwrap_or_default();
        let unchanged = node.phase == phase
            && node.state == status
            && (message.is_empty() || message == node.message)
            && r.host_steps.as_ref().is_none_or(|h| *h == node.host_steps)
            && r.rebooted_at
                .is_none_or(|t| Some(crate::log::log_precision(t)) == node.rebooted_at)
            && r.instances.as_ref().is_none_or(|i| *i == node.instances)
            && r.host_state.as_ref().is_none_or(|h| *h == node.host_state)
            && r.running_instances
                .as_ref()
                .is_none_or(|i| *i == node.running_instances);
        if unchanged {
            return Ok(Decision::none(Subject::Upgrade(upgrade_id.to_owned())));
        }
        if u.state.is_terminal() {
            return Err(state_conflict(u, "it takes no more reports."));
        }
        // A node whose fetch or verify fails, whenever it reports it, fails
        // the upgrade: from the prechecks on, any state but `planned` can
        // go to `failed`. So does a node that switched itself back to its
        // release, in any phase: the upgrade cannot reach done with a node
        // on the old release. A roll is otherwise only reported in the
        // node's turn.
        let rolled_back = status == NodeStatus::RolledBack;
        let fails_it = (rolled_back || status == NodeStatus::Failed && phase != Phase::Roll)
            && u.state.can_move_to(UpgradeState::Failed);
        match phase {
            _ if fails_it => {}
            Phase::Roll if u.state != UpgradeState::Rolling || u.turn != Some(idx) => {
                let turn = u
                    .turn
                    .filter(|_| u.state == UpgradeState::Rolling)
                    .map(|i| u.nodes[i].node_id.clone());
                return Err(Refusal::new(
                    ErrorCode::NotNodeTurn,
                    match &turn {
                        Some(t) => format!("It is {t}'s turn to roll, not {node_id}'s."),
                        None => format!(
                            "Upgrade {upgrade_id} is {}; no node rolls now.",
                            u.state.as_str()
                        ),
                    },
                )
                .with_details(json!({ "turn": turn, "state": u.state.as_str() })));
            }
            Phase::Fetch if u.state != UpgradeState::Fetching => {
                return Err(state_conflict(u, "fetch is reported while fetching."));
            }
            Phase::Verify if u.state != UpgradeState::Verifying => {
                return Err(state_conflict(u, "verify is reported while verifying."));
            }
            _ => {}
        }
        let mut events = vec![DomainEvent::UpgradeNodeReported(UpgradeNodeReported {
            upgrade_id: upgrade_id.to_owned(),
            node_id: node_id.to_owned(),
            phase,
            state: status,
            message: message.clone(),
            host_steps: r.host_steps.clone(),
            // The log keeps microseconds: decide at the precision replay sees.
            rebooted_at: r.rebooted_at.map(crate::log::log_precision),
            instances: r.instances.clone(),
            host_state: r.host_state.clone(),
            running_instances: r.running_instances.clone(),
        })];
        if rolled_back {
            events.push(DomainEvent::UpgradeFailed(UpgradeFailed {
                upgrade_id: upgrade_id.to_owned(),
                reason: format!(
                    "{node_id} switched itself back to {} during {}; the upgrade cannot reach done with a node on the old release.",
                    node.previous_release,
                    phase.as_str()
                ),
            }));
        } else if status == NodeStatus::Failed {
            let why = if message.is_empty() {
                "no message".to_owned()
            } else {
                message
            };
            events.push(DomainEvent::UpgradeFailed(UpgradeFailed {
                upgrade_id: upgrade_id.to_owned(),
                reason: format!("{node_id} failed {}: {why}", phase.as_str()),
            }));
        }
        Ok(upgrade_decision(upgrade_id, events))
    }
    /// The backup an upgrade took: reported again as it was appends
    /// nothing; otherwise only while backing up.
    pub(super) fn report_backup(
        &self,
        upgrade_id: &str,
        backup: Backup,
    ) -> Result<Decision, Refusal> {
        let u = self.upgrade(upgrade_id)?;
        if u.backup.as_ref() == Some(&backup) {
            return Ok(Decision::none(Subject::Upgrade(upgrade_id.to_owned())));
        }
        if u.state != UpgradeState::BackingUp {
            return Err(state_conflict(u, "a backup is reported while backing_up."));
        }
        Ok(upgrade_decision(
            upgrade_id,
            vec![DomainEvent::UpgradeBackupReported(UpgradeBackupReported {
                upgrade_id: upgrade_id.to_owned(),
                location: backup.location,
                bundle: backup.bundle,
                encrypted: backup.encrypted,
            })],
        ))
    }

    /// A node agent's facts (parsed, their refusal answered after the
    /// member's): recorded when they differ from its last report (the
    /// newest report wins).
    pub(super) fn report_facts(
        &self,
        state: &State,
        node_id: &str,
        facts: Result<&NodeFacts, Refusal>,
    ) -> Result<Decision, Refusal> {
        let member = state.membership.member(node_id)?;
        // A decommissioned node reports nothing more: its facts are of no
        // node the cluster has.
        if !member.state.node_may_authenticate() {
            return Err(Refusal::new(
                ErrorCode::MemberDecommissioned,
                format!(
                    "Member {node_id} is {}; it reports no facts.",
                    member.state.as_str()
                ),
            )
            .with_details(json!({ "state": member.state })));
        }
        // What it reports is judged once who reports may.
        let facts = facts?;
        let subject = Subject::Facts(member.node_id.clone());
        if self.facts.get(node_id).is_some_and(|r| r.facts == *facts) {
            return Ok(Decision::none(subject));
        }
        Ok(Decision {
            events: vec![DomainEvent::NodeFactsReported(NodeFactsReported {
                node_id: node_id.to_owned(),
                facts: facts.clone(),
            })],
            subject,
        })
    }
}
