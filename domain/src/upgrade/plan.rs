//! What an upgrade will do, decided when it is planned: the component
//! changes, each node's kind, restarts and changes, the steps, the two
//! rollback facts and the summary an operator reads.

use std::collections::BTreeMap;

use crate::membership::MemberState;
use crate::release::{component_changes, Component, ComponentChange, ComponentKind, Release};
use crate::state::State;

use super::*;

/// What a plan is made from besides the state: the releases, the mode and
/// the service's configuration.
pub(super) struct PlanInput<'a> {
    pub target: &'a str,
    pub from: &'a str,
    pub mode: UpgradeMode,
    pub restore: bool,
    pub settle_seconds: u64,
}

impl Upgrades {
    /// The plan of an upgrade from `from` to `target`, over the members
    /// not decommissioned, in ordinal order.
    pub(super) fn plan(&self, state: &State, input: &PlanInput<'_>) -> Plan {
        let target_release = self.releases.get(input.target);
        let from_release = self.releases.get(input.from).map(|r| &r.release);
        let target = target_release.map(|r| &r.release);
        let (changes, components_from) = match (from_release, target) {
            (Some(f), Some(t)) if !f.components.is_empty() => {
                (component_changes(&f.components, &t.components), "release")
            }
            (Some(_), Some(t)) => match self.reported_components(state) {
                Some(running) => (component_changes(&running, &t.components), "nodes"),
                None => (Vec::new(), "none"),
            },
            _ => (Vec::new(), "none"),
        };
        let host = host_changes(from_release, target, &changes);
        let kind = if host
            .iter()
            .any(|c| ["os", "kernel", "kernelArgs"].contains(&c.as_str()))
        {
            NodeKind::Os
        } else if host
            .iter()
            .any(|c| ["hostBinaries", "sysext"].contains(&c.as_str()))
        {
            NodeKind::Host
        } else {
            NodeKind::Containers
        };
        let cves = match target {
            Some(t) if kind == NodeKind::Os => t.cves.clone(),
            _ => Vec::new(),
        };
        let restarts = restarts(kind, &changes);
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
                restarts: restarts.clone(),
                changes: host.clone(),
                fetched: self
                    .fetched
                    .get(&m.node_id)
                    .is_some_and(|f| f.contains(input.target)),
            })
            .collect();
        let mut steps = vec![
            PlanStep::new("prechecks", StepKind::Cluster),
            PlanStep::new("fetch", StepKind::EveryNode),
        ];
        if input.mode == UpgradeMode::StageOnly {
            steps.push(PlanStep::new("stage", StepKind::Cluster));
            steps.push(PlanStep::new("apply", StepKind::Cluster));
        }
        steps.push(PlanStep::new("backup", StepKind::Cluster));
        if input.restore {
            // Each node restores the backup first, in its roll turn.
            steps.push(PlanStep::new("restore", StepKind::Cluster));
        }
        steps.extend(nodes.iter().map(|n| PlanStep::on_node("roll", &n.node_id)));
        steps.push(PlanStep::new("verify", StepKind::EveryNode));
        let previous_os_bootable = kind != NodeKind::Os || target.is_some_and(|t| t.os.ab_slots);
        let restore_required = match (
            from_release.and_then(|f| f.schema.as_ref()),
            target.and_then(|t| t.schema.as_ref()),
        ) {
            (Some(f), Some(t)) => t.readable_by.is_some_and(|oldest| f.version < oldest),
            _ => false,
        };
        let reboot_reason = (!cves.is_empty()).then(|| "security".to_owned());
        let mut plan = Plan {
            summary: String::new(),
            signed_by: target
                .map(|t| t.signature.key_id.clone())
                .unwrap_or_default(),
            source_kind: target_release.map_or(ReleaseSource::Manifest, |r| r.source),
            kind,
            reboot_reason,
            cves,
            component_changes: changes,
            components_from: components_from.to_owned(),
            nodes,
            steps,
            previous_os_bootable,
            restore_required,
            settle_seconds: input.settle_seconds,
        };
        plan.summary = summary(&plan, input.from, input.target);
        plan
    }

    /// What the members not decommissioned report they run: the list a
    /// running release built before component lists is compared by (the
    /// first node's pin of each component; the `components` precheck fails
    /// where the nodes disagree). `None` when no node reported its pins.
    fn reported_components(&self, state: &State) -> Option<Vec<Component>> {
        let mut seen: BTreeMap<(ComponentKind, String), Component> = BTreeMap::new();
        let members = &state.membership.members;
        for (_, f) in self.facts.iter().filter(|(n, _)| {
            members
                .get(*n)
                .is_some_and(|m| m.state != MemberState::Decommissioned)
        }) {
            for c in f.facts.images.iter().chain(&f.facts.packages) {
                seen.entry((c.kind, c.name.clone()))
                    .or_insert_with(|| c.clone());
            }
        }
        (!seen.is_empty()).then(|| seen.into_values().collect())
    }
}

/// The host changes the manifests make: a subset of `os`, `kernel`,
/// `kernelArgs`, `hostBinaries`, `sysext`.
fn host_changes(
    from: Option<&Release>,
    target: Option<&Release>,
    changes: &[ComponentChange],
) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(f), Some(t)) = (from, target) {
        if f.os.version != t.os.version {
            out.push("os");
        }
        if f.os.kernel != t.os.kernel {
            out.push("kernel");
        }
        if f.os.kernel_args != t.os.kernel_args {
            out.push("kernelArgs");
        }
    }
    if changes.iter().any(|c| c.kind == "package") {
        out.push("hostBinaries");
    }
    if let (Some(f), Some(t)) = (from, target) {
        if f.sysext != t.sysext {
            out.push("sysext");
        }
    }
    out.into_iter().map(str::to_owned).collect()
}

/// What restarts on a node, in order: the changed images' services, then
/// for host packages the host's services, and for the OS the node itself.
fn restarts(kind: NodeKind, changes: &[ComponentChange]) -> Vec<String> {
    let mut out: Vec<String> = changes
        .iter()
        .filter(|c| c.kind == "image")
        .map(|c| c.name.clone())
        .collect();
    match kind {
        NodeKind::Containers => {}
        NodeKind::Host => out.push("host services".to_owned()),
        NodeKind::Os => out.push("node (reboot)".to_owned()),
    }
    out
}

/// What the operator sees, in a sentence or two.
fn summary(plan: &Plan, from: &str, target: &str) -> String {
    let n = plan.nodes.len();
    let how = match plan.kind {
        NodeKind::Containers => "containers restart, no reboot",
        NodeKind::Host => "host packages change, a soft reboot",
        NodeKind::Os => "the OS changes, a full reboot",
    };
    let mut s = format!(
        "Upgrade from {from} to {target} on {n} node{}, one at a time: {how}; {} component change{}.",
        if n == 1 { "" } else { "s" },
        plan.component_changes.len(),
        if plan.component_changes.len() == 1 { "" } else { "s" },
    );
    if plan.reboot_reason.as_deref() == Some("security") {
        s.push_str(&format!(" Security reboot for {}.", plan.cves.join(", ")));
    }
    let fetched = plan.nodes.iter().filter(|n| n.fetched).count();
    if fetched > 0 {
        s.push_str(&format!(
            " {fetched} node{} already fetched it.",
            if fetched == 1 { "" } else { "s" }
        ));
    }
    if plan.restore_required {
        s.push_str(" The old control plane cannot run the new schema: going back means a restore.");
    }
    s
}
