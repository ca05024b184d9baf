//! What an upgrade will do, decided when it is planned.

use crate::membership::MemberState;
use crate::release::component_changes;
use crate::state::State;

use super::*;

impl Upgrades {
    /// The plan of an upgrade from the running release to `target`, over
    /// the members not decommissioned, in ordinal order.
    pub(super) fn plan(&self, state: &State, target: &str, from: &str, mode: UpgradeMode) -> Plan {
        let target_release = self.releases.get(target).map(|r| &r.release);
        let from_release = self.releases.get(from).map(|r| &r.release);
        let (changes, components_from) = match (from_release, target_release) {
            (Some(f), Some(t)) if !f.components.is_empty() => {
                (component_changes(&f.components, &t.components), "release")
            }
            _ => (Vec::new(), "none"),
        };
        let os_changes = match (from_release, target_release) {
            (Some(f), Some(t)) => f.os != t.os,
            _ => false,
        };
        let kind = if os_changes {
            NodeKind::Os
        } else if changes.iter().any(|c| c.kind == "package") {
            NodeKind::Host
        } else {
            NodeKind::Containers
        };
        let cves = match target_release {
            Some(t) if kind == NodeKind::Os => t.cves.clone(),
            _ => Vec::new(),
        };
        let mut members: Vec<_> = state
            .membership
            .members
            .values()
            .filter(|m| m.state != MemberState::Decommissioned)
            .collect();
        members.sort_by_key(|m| m.ordinal);
        let nodes: Vec<PlanNode> = members
            .iter()
            .map(|m| PlanNode {
                node_id: m.node_id.clone(),
                ordinal: m.ordinal,
                kind,
            })
            .collect();
        let mut steps = vec!["prechecks".to_owned(), "fetch".to_owned()];
        if mode == UpgradeMode::StageOnly {
            steps.extend(["stage".to_owned(), "apply".to_owned()]);
        }
        steps.push("backup".to_owned());
        steps.extend(nodes.iter().map(|n| format!("roll {}", n.node_id)));
        steps.push("verify".to_owned());
        Plan {
            kind,
            reboot_reason: (!cves.is_empty()).then(|| "security".to_owned()),
            cves,
            component_changes: changes,
            components_from: components_from.to_owned(),
            nodes,
            steps,
        }
    }
}
