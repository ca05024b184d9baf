//! The prechecks: pure functions of the recorded state.

use crate::membership::MemberState;
use crate::release::{compare_versions, Release};
use crate::state::State;

use super::*;

/// Runs every precheck of an upgrade against the recorded state. Pure: the
/// same log gives the same findings.
pub fn prechecks(state: &State, u: &Upgrade) -> Vec<Precheck> {
    let up = &state.upgrades;
    let target = up.releases.get(&u.target_release).map(|r| &r.release);
    let from = up.releases.get(&u.from_release).map(|r| &r.release);
    let running = up
        .running
        .as_ref()
        .map(|r| r.version.as_str())
        .unwrap_or("");
    let rollback = u.rollback_of.is_some();
    let check = |name: &str, passed: bool, message: String| Precheck {
        name: name.to_owned(),
        passed,
        message,
    };
    let mut out = Vec::with_capacity(PRECHECKS.len());

    out.push(match target {
        Some(_) => check(
            "release",
            true,
            format!("Release {} is registered.", u.target_release),
        ),
        None => check(
            "release",
            false,
            format!(
                "Release {} is not registered; register its signed manifest first.",
                u.target_release
            ),
        ),
    });

    let newer = compare_versions(&u.target_release, running) == std::cmp::Ordering::Greater;
    out.push(if rollback {
        check(
            "version",
            true,
            format!("A rollback returns to {}.", u.target_release),
        )
    } else if newer {
        check(
            "version",
            true,
            format!("{} is newer than the running {running}.", u.target_release),
        )
    } else {
        check(
            "version",
            false,
            format!(
                "{} is not newer than the running release {running}.",
                u.target_release
            ),
        )
    });

    out.push(upgrade_path(target, &u.from_release, &u.target_release));

    out.push(
        match up
            .upgrades
            .values()
            .find(|o| o.id != u.id && !o.state.is_terminal())
        {
            Some(o) => check(
                "upgrade",
                false,
                format!("Upgrade {} is {}.", o.id, o.state.as_str()),
            ),
            None => check("upgrade", true, "No other upgrade is active.".into()),
        },
    );

    let facts = &up.facts;
    let plan_nodes = || u.nodes.iter().map(|n| n.node_id.as_str());
    let fact_of = |node: &str| facts.get(node).map(|f| &f.facts);
    let shut: Vec<&str> = plan_nodes()
        .filter(|n| fact_of(n).and_then(|f| f.shut_down) == Some(true))
        .collect();
    let reported = plan_nodes()
        .filter(|n| fact_of(n).is_some_and(|f| f.shut_down.is_some()))
        .count();
    out.push(if !shut.is_empty() {
        check(
            "cluster-shutdown",
            false,
            format!("Shut down: {}; start them before upgrading.", shut.join(", ")),
        )
    } else if reported == 0 {
        check(
            "cluster-shutdown",
            true,
            "No node has reported whether it is shut down (facts.shutDown); the service holds no shutdown fact to judge by.".into(),
        )
    } else {
        check(
            "cluster-shutdown",
            true,
            format!("No node is shut down ({reported} reported)."),
        )
    });

    let generation = state.membership.generation;
    let not_ready: Vec<String> = state
        .membership
        .members
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
    out.push(if not_ready.is_empty() {
        check(
            "readiness",
            true,
            "Every member is active and current.".into(),
        )
    } else {
        let mut hints = Vec::new();
        let with_state = |s: MemberState| {
            state
                .membership
                .members
                .values()
                .any(|m| m.state == s)
        };
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
        check(
            "readiness",
            false,
            format!("Not ready: {}.{hint}", not_ready.join("; ")),
        )
    });

    out.push(schema_check(
        target.and_then(|t| t.schema.as_ref()),
        &u.target_release,
        plan_nodes().map(|n| (n, fact_of(n).and_then(|f| f.schema_version))),
    ));

    let gone: Vec<&str> = u
        .nodes
        .iter()
        .filter(|n| {
            state
                .membership
                .members
                .get(&n.node_id)
                .is_none_or(|m| m.state == MemberState::Decommissioned)
        })
        .map(|n| n.node_id.as_str())
        .collect();
    let not_ready: Vec<&str> = plan_nodes()
        .filter(|n| fact_of(n).and_then(|f| f.ready) == Some(false))
        .collect();
    out.push(if u.nodes.is_empty() {
        check("node", false, "The plan has no node to upgrade.".into())
    } else if !gone.is_empty() {
        check(
            "node",
            false,
            format!("No longer members: {}.", gone.join(", ")),
        )
    } else if !not_ready.is_empty() {
        check(
            "node",
            false,
            format!(
                "Not ready by their own report (facts.ready): {}.",
                not_ready.join(", ")
            ),
        )
    } else if plan_nodes().all(|n| fact_of(n).and_then(|f| f.ready).is_none()) {
        check(
            "node",
            true,
            format!(
                "{} nodes, rolled in ordinal order; no node reported whether it is ready (facts.ready).",
                u.nodes.len()
            ),
        )
    } else {
        check(
            "node",
            true,
            format!("{} nodes, rolled in ordinal order, ready by their own report.", u.nodes.len()),
        )
    });

    let drift = from.map(|f| drift(f, &u.from_release, facts, &plan_nodes().collect::<Vec<_>>()));
    out.push(match u.plan.components_from.as_str() {
        "release" => match drift {
            Some(d) if !d.is_empty() => check(
                "components",
                false,
                format!("Nodes do not run the running release's pins: {}.", d.join("; ")),
            ),
            _ => check(
                "components",
                true,
                format!(
                    "{} component changes against the running release's list{}.",
                    u.plan.component_changes.len(),
                    if plan_nodes().any(|n| fact_of(n).is_some_and(|f| !f.images.is_empty() || !f.packages.is_empty())) {
                        "; the nodes that reported their pins run it"
                    } else {
                        "; no node reported its pins (facts.images, facts.packages)"
                    }
                ),
            ),
        },
        "nodes" => match disagreements(facts, &plan_nodes().collect::<Vec<_>>()) {
            d if d.is_empty() => check(
                "components",
                true,
                format!(
                    "{} component changes against what the nodes report they run (the running release lists no components).",
                    u.plan.component_changes.len()
                ),
            ),
            d => check(
                "components",
                false,
                format!("The nodes do not run the same pins: {}.", d.join("; ")),
            ),
        },
        _ => check(
            "components",
            true,
            "The running release lists no components and no node reported its pins (facts.images, facts.packages); nothing could be compared.".into(),
        ),
    });

    out.push(match (from, target) {
        _ if rollback => check(
            "release-differs",
            true,
            "A rollback renders the release it returns to again.".into(),
        ),
        (Some(f), Some(t))
            if f.components == t.components
                && f.os == t.os
                && f.sysext == t.sysext
                && f.schema == t.schema =>
        {
            check(
                "release-differs",
                false,
                format!("{} changes nothing the cluster runs.", u.target_release),
            )
        }
        (Some(_), Some(_)) => check(
            "release-differs",
            true,
            "The target release differs from the running one.".into(),
        ),
        _ => check(
            "release-differs",
            true,
            "One of the releases is not registered; nothing to compare.".into(),
        ),
    });

    let need = target.and_then(|t| t.bundle_bytes);
    let space: Vec<String> = u
        .nodes
        .iter()
        .filter(|n| !n.finished(Phase::Fetch))
        .filter_map(|n| {
            let free = fact_of(&n.node_id)?.bundle_free_bytes?;
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
    let space_reported =
        plan_nodes().any(|n| fact_of(n).is_some_and(|f| f.bundle_free_bytes.is_some()));
    out.push(if !space.is_empty() {
        check("space", false, format!("{}.", space.join("; ")))
    } else if need.is_none() {
        check(
            "space",
            true,
            format!("Release {} declares no bundle size (bundleBytes); the service holds no space fact to judge by.", u.target_release),
        )
    } else if !space_reported {
        check(
            "space",
            true,
            "No node has reported its free space (facts.bundleFreeBytes); the service holds no space fact to judge by.".into(),
        )
    } else {
        check("space", true, format!("Every node that reported has room for {}.", bytes(need.unwrap_or(0))))
    });

    out.push(match u.backup_location {
        BackupLocation::Target => check(
            "backup-space",
            true,
            format!(
                "The backup goes to the backup target {}, which keeps its own space.",
                u.backup_target.as_deref().unwrap_or("(configured)")
            ),
        ),
        BackupLocation::Node => {
            let short: Vec<String> = plan_nodes()
                .filter_map(|n| {
                    let f = fact_of(n)?;
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
            let reported = plan_nodes().any(|n| {
                fact_of(n).is_some_and(|f| f.backup_free_bytes.is_some() && f.backup_bytes.is_some())
            });
            if !short.is_empty() {
                check("backup-space", false, format!("{}.", short.join("; ")))
            } else if !reported {
                check(
                    "backup-space",
                    true,
                    "No node has reported the free space for a backup on the node and the size of one (facts.backupFreeBytes, facts.backupBytes); the service holds no space fact to judge by.".into(),
                )
            } else {
                check("backup-space", true, "Every node that reported has room for its backup.".into())
            }
        }
    });
    out
}

/// `upgrade-path`: a known-broken path, or a required stop skipped, fails
/// and says the way round.
fn upgrade_path(target: Option<&Release>, from: &str, to: &str) -> Precheck {
    let check = |passed: bool, message: String| Precheck {
        name: "upgrade-path".to_owned(),
        passed,
        message,
    };
    let Some(target) = target else {
        return check(
            true,
            format!("Release {to} is not registered; no path to judge."),
        );
    };
    if let Some(k) = target.known_broken.iter().find(|k| k.from == from) {
        return check(
            false,
            format!(
                "Upgrading from {from} to {to} is known to be broken: {}. Way round: {}.",
                k.reason, k.way_round
            ),
        );
    }
    let mut skipped: Vec<&String> = target
        .required_stops
        .iter()
        .filter(|s| {
            compare_versions(s, from) == std::cmp::Ordering::Greater
                && compare_versions(s, to) == std::cmp::Ordering::Less
        })
        .collect();
    skipped.sort_by(|a, b| compare_versions(a, b));
    match skipped.first() {
        Some(stop) => check(
            false,
            format!(
                "{to} requires a stop at {stop}: upgrade from {from} to {stop} first, then to {to}."
            ),
        ),
        None => check(true, format!("{from} to {to} skips no required stop.")),
    }
}

/// `schema`: every node's reported schema must be one the target migrates
/// from, and not newer than the target's.
fn schema_check<'a>(
    target: Option<&crate::release::SchemaSpec>,
    release: &str,
    nodes: impl Iterator<Item = (&'a str, Option<u32>)>,
) -> Precheck {
    let check = |passed: bool, message: String| Precheck {
        name: "schema".to_owned(),
        passed,
        message,
    };
    let Some(spec) = target else {
        return check(
            true,
            format!("Release {release} declares no schema (schema.version); the service holds no schema fact to judge by."),
        );
    };
    let reported: Vec<(&str, u32)> = nodes.filter_map(|(n, v)| Some((n, v?))).collect();
    if reported.is_empty() {
        return check(
            true,
            "No node has reported its schema version (facts.schemaVersion); the service holds no schema fact to judge by.".into(),
        );
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
        check(
            true,
            format!("Every reported schema migrates to {}.", spec.version),
        )
    } else {
        check(false, format!("{}.", bad.join("; ")))
    }
}

/// Where a plan node reports a pin other than the running release's, for
/// a component the release lists: the node runs something the upgrade's
/// component changes were not computed from.
fn drift(
    running: &crate::release::Release,
    version: &str,
    facts: &std::collections::BTreeMap<String, RecordedFacts>,
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
fn disagreements(
    facts: &std::collections::BTreeMap<String, RecordedFacts>,
    nodes: &[&str],
) -> Vec<String> {
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
