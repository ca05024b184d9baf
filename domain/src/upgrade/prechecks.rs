//! The prechecks: pure functions of the recorded state.
//!
//! Every precheck is one function of a `Ctx`, listed once in `CHECKS`
//! with its name; [`prechecks`] runs the table in order and [`PRECHECKS`]
//! is its list of names, so the two cannot drift apart.

use crate::membership::MemberState;
use crate::release::{compare_versions, Release};
use crate::state::State;

use super::*;

/// What a precheck reads: the recorded state, the upgrade, and what most
/// checks look up first.
pub(crate) struct Ctx<'a> {
    state: &'a State,
    u: &'a Upgrade,
    /// The target release, if registered.
    target: Option<&'a Release>,
    /// The release the upgrade starts from, if registered.
    from: Option<&'a Release>,
    /// The running release's version, or `""`.
    running: &'a str,
    rollback: bool,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(state: &'a State, u: &'a Upgrade) -> Self {
        let up = &state.upgrades;
        Ctx {
            state,
            u,
            target: up.releases.get(&u.target_release).map(|r| &r.release),
            from: up.releases.get(&u.from_release).map(|r| &r.release),
            running: up
                .running
                .as_ref()
                .map(|r| r.version.as_str())
                .unwrap_or(""),
            rollback: u.rollback_of.is_some(),
        }
    }

    fn facts(&self) -> &'a crate::Map<String, RecordedFacts> {
        &self.state.upgrades.facts
    }

    /// The plan's nodes, in roll order.
    fn plan_nodes(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.u.nodes.iter().map(|n| n.node_id.as_str())
    }

    /// What a node last reported about itself.
    fn fact_of(&self, node: &str) -> Option<&'a NodeFacts> {
        self.facts().get(node).map(|f| &f.facts)
    }
}

/// One precheck's verdict: passed, and the sentence that says why.
pub(crate) type Verdict = (bool, String);

fn pass(message: impl Into<String>) -> Verdict {
    (true, message.into())
}

fn fail(message: impl Into<String>) -> Verdict {
    (false, message.into())
}

/// One precheck.
pub(crate) type Check = fn(&Ctx) -> Verdict;

/// Every precheck, by name, in the order they run and are listed.
pub(crate) const CHECKS: &[(&str, Check)] = &[
    ("release", release),
    ("version", version),
    ("upgrade-path", upgrade_path),
    ("upgrade", other_upgrade),
    ("cluster-shutdown", cluster_shutdown),
    ("readiness", readiness),
    ("schema", schema),
    ("node", node),
    ("components", components),
    ("release-differs", release_differs),
    ("space", space),
    ("backup-space", backup_space),
];

/// The prechecks' names, in the order they run and are listed: the names
/// of `CHECKS`.
pub const PRECHECKS: [&str; CHECKS.len()] = {
    let mut names = [""; CHECKS.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = CHECKS[i].0;
        i += 1;
    }
    names
};

/// Runs every precheck of an upgrade against the recorded state. Pure: the
/// same log gives the same findings.
pub fn prechecks(state: &State, u: &Upgrade) -> Vec<Precheck> {
    let cx = Ctx::new(state, u);
    CHECKS
        .iter()
        .map(|(name, check)| {
            let (passed, message) = check(&cx);
            Precheck {
                name: (*name).to_owned(),
                passed,
                message,
            }
        })
        .collect()
}

/// `release`: the target release is registered.
fn release(cx: &Ctx) -> Verdict {
    match cx.target {
        Some(_) => pass(format!("Release {} is registered.", cx.u.target_release)),
        None => fail(format!(
            "Release {} is not registered; register its signed manifest first.",
            cx.u.target_release
        )),
    }
}

/// `version`: the target is newer than the running release, unless the
/// upgrade is a rollback.
fn version(cx: &Ctx) -> Verdict {
    let (to, running) = (&cx.u.target_release, cx.running);
    if cx.rollback {
        pass(format!("A rollback returns to {to}."))
    } else if compare_versions(to, running) == std::cmp::Ordering::Greater {
        pass(format!("{to} is newer than the running {running}."))
    } else {
        fail(format!(
            "{to} is not newer than the running release {running}."
        ))
    }
}

/// `upgrade-path`: a known-broken path, or a required stop skipped, fails
/// and says the way round.
fn upgrade_path(cx: &Ctx) -> Verdict {
    let (from, to) = (&cx.u.from_release, &cx.u.target_release);
    let Some(target) = cx.target else {
        return pass(format!("Release {to} is not registered; no path to judge."));
    };
    if let Some(k) = target.known_broken.iter().find(|k| k.from == *from) {
        return fail(format!(
            "Upgrading from {from} to {to} is known to be broken: {}. Way round: {}.",
            k.reason, k.way_round
        ));
    }
    let mut skipped: Vec<&String> = target
        .required_stops
        .iter()
        .filter(|s| {
            compare_versions(s, from) == std::cmp::Ordering::Greater
                && compare_versions(s, to) == std::cmp::Ordering::Less
        })
        .collect();
    skipped.sort_by(|a, b| compare_versions(a, b).then_with(|| a.cmp(b)));
    match skipped.first() {
        Some(stop) => fail(format!(
            "{to} requires a stop at {stop}: upgrade from {from} to {stop} first, then to {to}."
        )),
        None => pass(format!("{from} to {to} skips no required stop.")),
    }
}

/// `upgrade`: no other upgrade is active.
fn other_upgrade(cx: &Ctx) -> Verdict {
    match cx
        .state
        .upgrades
        .upgrades
        .values()
        .find(|o| o.id != cx.u.id && !o.state.is_terminal())
    {
        Some(o) => fail(format!("Upgrade {} is {}.", o.id, o.state.as_str())),
        None => pass("No other upgrade is active."),
    }
}

/// `cluster-shutdown`: no plan node reports it is shut down.
fn cluster_shutdown(cx: &Ctx) -> Verdict {
    let shut: Vec<&str> = cx
        .plan_nodes()
        .filter(|n| cx.fact_of(n).and_then(|f| f.shut_down) == Some(true))
        .collect();
    let reported = cx
        .plan_nodes()
        .filter(|n| cx.fact_of(n).is_some_and(|f| f.shut_down.is_some()))
        .count();
    if !shut.is_empty() {
        fail(format!(
            "Shut down: {}; start them before upgrading.",
            shut.join(", ")
        ))
    } else if reported == 0 {
        pass("No node has reported whether it is shut down (facts.shutDown); the service holds no shutdown fact to judge by.")
    } else {
        pass(format!("No node is shut down ({reported} reported)."))
    }
}

/// `readiness`: every member is active and current; if not, says how to
/// get there.
fn readiness(cx: &Ctx) -> Verdict {
    let members = &cx.state.membership.members;
    let generation = cx.state.membership.generation;
    let not_ready: Vec<String> = members
        .values()
        .filter(|m| m.state != MemberState::Decommissioned)
        .filter_map(|m| {
            if m.state != MemberState::Active {
                Some(format!("{} is {}", m.node_id, m.state.as_str()))
            } else if crate::membership::lagging(m.state, m.applied_generation, generation) {
                Some(format!(
                    "{} is lagging (applied generation {} of {generation})",
                    m.node_id, m.applied_generation
                ))
            } else {
                None
            }
        })
        .collect();
    if not_ready.is_empty() {
        return pass("Every member is active and current.");
    }
    let mut hints = Vec::new();
    let with_state = |s: MemberState| members.values().any(|m| m.state == s);
    if with_state(MemberState::Failed) {
        hints.push("a failed member joins again with POST .../members/{nodeId}/retry-join or leaves with POST .../members/{nodeId}/decommission");
    }
    if with_state(MemberState::Joining) {
        hints.push("a joining member must report join-complete first");
    }
    if with_state(MemberState::Removing) {
        hints.push("a removing member is decommissioned once its raft cleanup is done (raftCleanupPending)");
    }
    if not_ready.iter().any(|n| n.contains("lagging")) {
        hints.push("a lagging member's node agent must apply the current generation");
    }
    let hint = if hints.is_empty() {
        String::new()
    } else {
        format!(" Then plan the upgrade again: {}.", hints.join("; "))
    };
    fail(format!("Not ready: {}.{hint}", not_ready.join("; ")))
}

/// `schema`: every node's reported schema must be one the target migrates
/// from, and not newer than the target's.
fn schema(cx: &Ctx) -> Verdict {
    let release = &cx.u.target_release;
    let Some(spec) = cx.target.and_then(|t| t.schema.as_ref()) else {
        return pass(format!("Release {release} declares no schema (schema.version); the service holds no schema fact to judge by."));
    };
    let reported: Vec<(&str, u32)> = cx
        .plan_nodes()
        .filter_map(|n| Some((n, cx.fact_of(n)?.schema_version?)))
        .collect();
    if reported.is_empty() {
        return pass("No node has reported its schema version (facts.schemaVersion); the service holds no schema fact to judge by.");
    }
    let mut bad = Vec::new();
    for (n, v) in reported {
        if let Some(min) = spec.min_upgrade_from.filter(|min| v < *min) {
            bad.push(format!(
                "{n} runs schema {v}, {release} migrates only from {min} ({} version(s) behind)",
                min - v
            ));
        } else if v > spec.version {
            bad.push(format!(
                "{n} runs schema {v}, newer than {release}'s {}",
                spec.version
            ));
        }
    }
    if bad.is_empty() {
        pass(format!(
            "Every reported schema migrates to {}.",
            spec.version
        ))
    } else {
        fail(format!("{}.", bad.join("; ")))
    }
}

/// `node`: the plan has nodes, each still a member and none reporting it
/// is not ready.
fn node(cx: &Ctx) -> Verdict {
    let u = cx.u;
    let gone: Vec<&str> = u
        .nodes
        .iter()
        .filter(|n| {
            cx.state
                .membership
                .members
                .get(&n.node_id)
                .is_none_or(|m| m.state == MemberState::Decommissioned)
        })
        .map(|n| n.node_id.as_str())
        .collect();
    let not_ready: Vec<&str> = cx
        .plan_nodes()
        .filter(|n| cx.fact_of(n).and_then(|f| f.ready) == Some(false))
        .collect();
    if u.nodes.is_empty() {
        fail("The plan has no node to upgrade.")
    } else if !gone.is_empty() {
        fail(format!("No longer members: {}.", gone.join(", ")))
    } else if !not_ready.is_empty() {
        fail(format!(
            "Not ready by their own report (facts.ready): {}.",
            not_ready.join(", ")
        ))
    } else if cx
        .plan_nodes()
        .all(|n| cx.fact_of(n).and_then(|f| f.ready).is_none())
    {
        pass(format!(
            "{} nodes, rolled in ordinal order; no node reported whether it is ready (facts.ready).",
            u.nodes.len()
        ))
    } else {
        pass(format!(
            "{} nodes, rolled in ordinal order, ready by their own report.",
            u.nodes.len()
        ))
    }
}

/// `components`: the nodes run what the plan's component changes were
/// computed from.
fn components(cx: &Ctx) -> Verdict {
    let u = cx.u;
    let nodes: Vec<&str> = cx.plan_nodes().collect();
    match u.plan.components_from.as_str() {
        "release" => match cx.from.map(|f| drift(f, &u.from_release, cx.facts(), &nodes)) {
            Some(d) if !d.is_empty() => fail(format!(
                "Nodes do not run the running release's pins: {}.",
                d.join("; ")
            )),
            _ => pass(format!(
                "{} component changes against the running release's list{}.",
                u.plan.component_changes.len(),
                if cx.plan_nodes().any(|n| {
                    cx.fact_of(n)
                        .is_some_and(|f| !f.images.is_empty() || !f.packages.is_empty())
                }) {
                    "; the nodes that reported their pins run it"
                } else {
                    "; no node reported its pins (facts.images, facts.packages)"
                }
            )),
        },
        "nodes" => match disagreements(cx.facts(), &nodes) {
            d if d.is_empty() => pass(format!(
                "{} component changes against what the nodes report they run (the running release lists no components).",
                u.plan.component_changes.len()
            )),
            d => fail(format!(
                "The nodes do not run the same pins: {}.",
                d.join("; ")
            )),
        },
        _ => pass("The running release lists no components and no node reported its pins (facts.images, facts.packages); nothing could be compared."),
    }
}

/// `release-differs`: the target changes something the cluster runs.
fn release_differs(cx: &Ctx) -> Verdict {
    match (cx.from, cx.target) {
        _ if cx.rollback => pass("A rollback renders the release it returns to again."),
        (Some(f), Some(t))
            if f.components == t.components
                && f.os == t.os
                && f.sysext == t.sysext
                && f.schema == t.schema =>
        {
            fail(format!(
                "{} changes nothing the cluster runs.",
                cx.u.target_release
            ))
        }
        (Some(_), Some(_)) => pass("The target release differs from the running one."),
        _ => pass("One of the releases is not registered; nothing to compare."),
    }
}

/// `space`: every node still to fetch has room for the target's bundle.
fn space(cx: &Ctx) -> Verdict {
    let u = cx.u;
    let need = cx.target.and_then(|t| t.bundle_bytes);
    let short: Vec<String> = u
        .nodes
        .iter()
        .filter(|n| !n.finished(Phase::Fetch))
        .filter_map(|n| {
            let free = cx.fact_of(&n.node_id)?.bundle_free_bytes?;
            let need = need?;
            (free < need).then(|| {
                format!(
                    "{} has {} free for bundles, {} needs {} ({} short)",
                    n.node_id,
                    bytes(free),
                    u.target_release,
                    bytes(need),
                    bytes(need - free)
                )
            })
        })
        .collect();
    let reported = cx
        .plan_nodes()
        .any(|n| cx.fact_of(n).is_some_and(|f| f.bundle_free_bytes.is_some()));
    if !short.is_empty() {
        fail(format!("{}.", short.join("; ")))
    } else if need.is_none() {
        pass(format!("Release {} declares no bundle size (bundleBytes); the service holds no space fact to judge by.", u.target_release))
    } else if !reported {
        pass("No node has reported its free space (facts.bundleFreeBytes); the service holds no space fact to judge by.")
    } else {
        pass(format!(
            "Every node that reported has room for {}.",
            bytes(need.unwrap_or(0))
        ))
    }
}

/// `backup-space`: a backup on the node fits where it goes.
fn backup_space(cx: &Ctx) -> Verdict {
    match cx.u.backup_location {
        BackupLocation::Target => pass(format!(
            "The backup goes to the backup target {}, which keeps its own space.",
            cx.u.backup_target.as_deref().unwrap_or("(configured)")
        )),
        BackupLocation::Node => {
            let short: Vec<String> = cx
                .plan_nodes()
                .filter_map(|n| {
                    let f = cx.fact_of(n)?;
                    let (free, need) = (f.backup_free_bytes?, f.backup_bytes?);
                    (free < need).then(|| {
                        format!(
                            "{n} has {} free for its backup of {} ({} short)",
                            bytes(free),
                            bytes(need),
                            bytes(need - free)
                        )
                    })
                })
                .collect();
            let reported = cx.plan_nodes().any(|n| {
                cx.fact_of(n)
                    .is_some_and(|f| f.backup_free_bytes.is_some() && f.backup_bytes.is_some())
            });
            if !short.is_empty() {
                fail(format!("{}.", short.join("; ")))
            } else if !reported {
                pass("No node has reported the free space for a backup on the node and the size of one (facts.backupFreeBytes, facts.backupBytes); the service holds no space fact to judge by.")
            } else {
                pass("Every node that reported has room for its backup.")
            }
        }
    }
}

/// Where a plan node reports a pin other than the running release's, for
/// a component the release lists: the node runs something the upgrade's
/// component changes were not computed from.
fn drift(
    running: &crate::release::Release,
    version: &str,
    facts: &crate::Map<String, RecordedFacts>,
    nodes: &[&str],
) -> Vec<String> {
    let mut out = Vec::new();
    for (node, f) in facts.iter().filter(|(n, _)| nodes.contains(&n.as_str())) {
        for c in f.facts.images.iter().chain(&f.facts.packages) {
            if let Some(pinned) = running
                .components
                .iter()
                .find(|p| p.kind == c.kind && p.name == c.name)
            {
                if pinned.exact_id() != c.exact_id() {
                    out.push(format!(
                        "{node} runs {} {}, release {version} pins {}",
                        c.name,
                        c.exact_id(),
                        pinned.exact_id()
                    ));
                }
            }
        }
    }
    out
}

/// Where the nodes' reported pins disagree, named per component.
fn disagreements(facts: &crate::Map<String, RecordedFacts>, nodes: &[&str]) -> Vec<String> {
    let mut seen: std::collections::BTreeMap<(String, String), Vec<(String, String)>> =
        std::collections::BTreeMap::new();
    for (node, f) in facts.iter().filter(|(n, _)| nodes.contains(&n.as_str())) {
        for c in f.facts.images.iter().chain(&f.facts.packages) {
            seen.entry((c.kind().to_owned(), c.name.clone()))
                .or_default()
                .push((node.clone(), c.exact_id()));
        }
    }
    seen.into_iter()
        .filter(|(_, v)| v.iter().any(|(_, id)| *id != v[0].1))
        .map(|((_, name), v)| {
            let runs: Vec<String> = v.iter().map(|(n, id)| format!("{n} runs {id}")).collect();
            format!("{name}: {}", runs.join(", "))
        })
        .collect()
}

/// Bytes for a person: GiB with one decimal, or MiB below one GiB.
fn bytes(n: u64) -> String {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    const MIB: f64 = 1024.0 * 1024.0;
    let f = n as f64;
    if f >= GIB {
        format!("{:.1} GiB", f / GIB)
    } else {
        format!("{:.1} MiB", f / MIB)
    }
}
