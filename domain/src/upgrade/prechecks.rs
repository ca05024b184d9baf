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

    out.push(check(
        "cluster-shutdown",
        true,
        "No cluster shutdown is recorded; the service holds no shutdown fact to judge by.".into(),
    ));

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
        check(
            "readiness",
            false,
            format!("Not ready: {}.", not_ready.join("; ")),
        )
    });

    out.push(check(
        "schema",
        true,
        "No schema versions are recorded for the releases; the service holds no schema fact to judge by.".into(),
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
    out.push(if u.nodes.is_empty() {
        check("node", false, "The plan has no node to upgrade.".into())
    } else if !gone.is_empty() {
        check(
            "node",
            false,
            format!("No longer members: {}.", gone.join(", ")),
        )
    } else {
        check(
            "node",
            true,
            format!("{} nodes, rolled in ordinal order.", u.nodes.len()),
        )
    });

    out.push(match u.plan.components_from.as_str() {
        "release" => check(
            "components",
            true,
            format!(
                "{} component changes against the running release's list.",
                u.plan.component_changes.len()
            ),
        ),
        _ => check(
            "components",
            true,
            "The running release lists no components; nothing could be compared.".into(),
        ),
    });

    out.push(match (from, target) {
        _ if rollback => check(
            "release-differs",
            true,
            "A rollback renders the release it returns to again.".into(),
        ),
        (Some(f), Some(t)) if f.components == t.components && f.os == t.os => check(
            "release-differs",
            false,
            format!("{} changes nothing the cluster runs.", u.target_release),
        ),
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

    out.push(check(
        "space",
        true,
        "No node has reported its free space; the service holds no space fact to judge by.".into(),
    ));
    out.push(check(
        "backup-space",
        true,
        format!(
            "No free space is reported for a backup at {}; the service holds no space fact to judge by.",
            u.backup_location.as_str()
        ),
    ));
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
