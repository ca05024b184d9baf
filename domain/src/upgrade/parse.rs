//! The edge of the upgrade commands: each command's fields, as the request
//! gave them, parsed into the typed value its decision takes, or refused
//! naming every bad field at once. Nothing here reads the state; the rules
//! are in [`super::decide`].

use chrono::{DateTime, Utc};

use crate::error::{Findings, Refusal};
use crate::release::{canonical, parse_manifest, ComponentKind, Release, SignedManifest};
use crate::text::{check_items, check_text, MAX_MESSAGE, MAX_NAME};

use super::*;

/// A new upgrade, as `create` asks for it.
pub(super) struct NewUpgrade<'a> {
    pub id: &'a str,
    pub target: String,
    pub mode: UpgradeMode,
    pub location: BackupLocation,
    pub encrypted: Option<bool>,
    pub config: &'a UpgradeConfig,
}

/// The fields of [`UpgradeCommand::Create`].
pub(super) fn new_upgrade<'a>(
    upgrade_id: &'a str,
    target_release: &Option<String>,
    mode: &Option<String>,
    (backup_location, backup_encrypted): (&Option<String>, &Option<bool>),
    config: &'a UpgradeConfig,
) -> Result<NewUpgrade<'a>, Refusal> {
    let mut f = Findings::default();
    let target = f.required("targetRelease", target_release).cloned();
    if target.as_deref() == Some("") {
        f.push("targetRelease", "is required");
    }
    let mode = match mode.as_deref() {
        None => Some(UpgradeMode::Now),
        Some(m) => UpgradeMode::parse(m).or_else(|| {
            f.push("mode", format!("must be one of {}", UpgradeMode::one_of()));
            None
        }),
    };
    // The backup goes to the configured target, or stays on the node
    // when none is configured; a target asked for without one is a
    // mistake of the request.
    let location = match backup_location.as_deref() {
        None if config.backup_target.is_some() => Some(BackupLocation::Target),
        None => Some(BackupLocation::Node),
        Some(l) => match BackupLocation::parse(l) {
            Some(BackupLocation::Target) if config.backup_target.is_none() => {
                f.push(
                    "backup.location",
                    "is target, but no backup target is configured (STRATUM_BACKUP_TARGET); use node",
                );
                None
            }
            Some(l) => Some(l),
            None => {
                f.push(
                    "backup.location",
                    format!("must be one of {}", BackupLocation::one_of()),
                );
                None
            }
        },
    };
    if !valid_upgrade_id(upgrade_id) {
        f.push("id", "is not upg- and 10 of [0-9a-z]");
    }
    let ((target, mode), location) = f.conclude(target.zip(mode).zip(location))?;
    Ok(NewUpgrade {
        id: upgrade_id,
        target,
        mode,
        location,
        encrypted: *backup_encrypted,
        config,
    })
}

/// A node's report, as the request gave it (the fields of
/// [`UpgradeCommand::ReportNode`] but its ids).
pub(super) struct NodeReportInput<'a> {
    pub phase: &'a Option<String>,
    pub status: &'a Option<String>,
    pub message: &'a Option<String>,
    pub host_steps: &'a Option<Vec<HostStep>>,
    pub rebooted_at: Option<DateTime<Utc>>,
    pub instances: &'a Option<Vec<String>>,
    pub host_state: &'a Option<String>,
    pub running_instances: &'a Option<Vec<String>>,
}

/// A node's report, checked: its phase and state parsed, the rest within
/// bounds. A field left out is `None`: the report says nothing of it.
pub(super) struct NodeReport<'a> {
    pub phase: Phase,
    pub status: NodeStatus,
    pub message: &'a Option<String>,
    pub host_steps: &'a Option<Vec<HostStep>>,
    pub rebooted_at: Option<DateTime<Utc>>,
    pub instances: &'a Option<Vec<String>>,
    pub host_state: &'a Option<String>,
    pub running_instances: &'a Option<Vec<String>>,
}

pub(super) fn node_report(r: NodeReportInput<'_>) -> Result<NodeReport<'_>, Refusal> {
    let mut f = Findings::default();
    let phase = f.required("phase", r.phase).and_then(|p| {
        Phase::parse(p).or_else(|| {
            f.push("phase", format!("must be one of {}", Phase::one_of()));
            None
        })
    });
    let status = f.required("state", r.status).and_then(|s| {
        NodeStatus::parse(s)
            .filter(|s| *s != NodeStatus::Pending)
            .or_else(|| {
                f.push("state", "must be one of running, done, failed, rolled_back");
                None
            })
    });
    if let Some(m) = r.message {
        check_text(&mut f, "message", m, MAX_MESSAGE);
    }
    if let Some(steps) = r.host_steps {
        check_items(&mut f, "hostSteps", steps);
    }
    for (i, step) in r.host_steps.iter().flatten().enumerate() {
        check_host_step(&mut f, i, step);
    }
    if let Some(h) = r.host_state {
        if h.is_empty() || h.len() > 64 || h.contains(['\n', '\r']) {
            f.push("hostState", "must be one line of 1 to 64 bytes");
        } else {
            crate::text::check_safe(&mut f, "hostState", h);
        }
    }
    for (field, list) in [
        ("instances", r.instances),
        ("runningInstances", r.running_instances),
    ] {
        if let Some(list) = list {
            check_items(&mut f, field, list);
        }
    }
    for (i, name) in r
        .instances
        .iter()
        .chain(r.running_instances)
        .flatten()
        .enumerate()
    {
        check_text(&mut f, &format!("instances[{i}]"), name, MAX_NAME);
    }
    let (phase, status) = f.conclude(phase.zip(status))?;
    Ok(NodeReport {
        phase,
        status,
        message: r.message,
        host_steps: r.host_steps,
        rebooted_at: r.rebooted_at,
        instances: r.instances,
        host_state: r.host_state,
        running_instances: r.running_instances,
    })
}

fn check_host_step(f: &mut Findings, i: usize, step: &HostStep) {
    if step.name.is_empty() {
        f.push(&format!("hostSteps[{i}].name"), "is required");
    }
    check_text(f, &format!("hostSteps[{i}].name"), &step.name, MAX_NAME);
    check_text(
        f,
        &format!("hostSteps[{i}].detail"),
        &step.detail,
        MAX_MESSAGE,
    );
    for (field, units) in [
        ("pendingUnits", &step.pending_units),
        ("restartedUnits", &step.restarted_units),
        ("stoppedUnits", &step.stopped_units),
    ] {
        check_items(f, &format!("hostSteps[{i}].{field}"), units);
    }
    for (j, unit) in step
        .pending_units
        .iter()
        .chain(&step.restarted_units)
        .chain(&step.stopped_units)
        .enumerate()
    {
        check_text(f, &format!("hostSteps[{i}].units[{j}]"), unit, MAX_NAME);
    }
    if !HOST_STEP_STATES.contains(&step.state.as_str()) {
        f.push(
            &format!("hostSteps[{i}].state"),
            format!("must be one of {}", HOST_STEP_STATES.join(", ")),
        );
    }
}

/// The fields of [`UpgradeCommand::ReportBackup`]: the backup reported.
pub(super) fn backup(
    location: &Option<String>,
    bundle: &Option<String>,
    encrypted: &Option<bool>,
) -> Result<Backup, Refusal> {
    let mut f = Findings::default();
    let location = f.required("location", location).and_then(|l| {
        BackupLocation::parse(l).or_else(|| {
            f.push(
                "location",
                format!("must be one of {}", BackupLocation::one_of()),
            );
            None
        })
    });
    let bundle = f.required("bundle", bundle).cloned();
    if bundle.as_deref() == Some("") {
        f.push("bundle", "is required");
    } else if let Some(b) = &bundle {
        check_text(&mut f, "bundle", b, MAX_MESSAGE);
    }
    let encrypted = f.required("encrypted", encrypted).copied();
    let ((location, bundle), encrypted) = f.conclude(location.zip(bundle).zip(encrypted))?;
    Ok(Backup {
        location,
        bundle,
        encrypted,
    })
}

/// A release to register: its manifest parsed, and the canonical text the
/// log keeps.
pub(super) struct NewRelease {
    pub release: Release,
    pub manifest: String,
    pub source: ReleaseSource,
}

/// The fields of [`UpgradeCommand::RegisterRelease`]. An unsigned or badly
/// signed manifest is refused, naming the signature first and then
/// whatever else is wrong with it.
pub(super) fn new_release(
    signed: &SignedManifest,
    source: ReleaseSource,
) -> Result<NewRelease, Refusal> {
    let manifest = signed.manifest();
    let parsed = parse_manifest(manifest);
    if let Err(bad) = signed.signed_by() {
        let mut errors = vec![bad.clone()];
        if let Err(more) = parsed {
            errors.extend(more.into_iter().filter(|f| f.field != bad.field));
        }
        return Err(Refusal::invalid(errors));
    }
    let release = parsed.map_err(Refusal::invalid)?;
    Ok(NewRelease {
        release,
        manifest: canonical(manifest),
        source,
    })
}

/// The field of [`UpgradeCommand::SetRunningRelease`]: the version.
pub(super) fn running_version(version: &Option<String>) -> Result<String, Refusal> {
    let mut f = Findings::default();
    let version = f.required("version", version).cloned();
    f.conclude(version)
}

/// A node agent's facts, checked: each component of its kind and within
/// bounds, and the whole within the bound of a join request's facts.
pub(super) fn facts(facts: &NodeFacts) -> Result<&NodeFacts, Refusal> {
    let mut f = Findings::default();
    for (field, list, kind) in [
        ("images", &facts.images, ComponentKind::Image),
        ("packages", &facts.packages, ComponentKind::Package),
    ] {
        check_items(&mut f, field, list);
        for (i, c) in list.iter().enumerate() {
            for (part, text) in [
                ("name", &c.name),
                ("version", &c.version),
                ("digest", &c.digest),
            ] {
                if text.len() > MAX_NAME {
                    f.push(
                        &format!("{field}[{i}].{part}"),
                        format!("must be at most {MAX_NAME} bytes"),
                    );
                }
            }
            if c.kind != kind {
                f.push(
                    &format!("{field}[{i}].kind"),
                    format!("must be {}", c.kind_of(kind)),
                );
            }
            if c.name.is_empty() {
                f.push(&format!("{field}[{i}].name"), "is required");
            }
            if c.version.is_empty() {
                f.push(&format!("{field}[{i}].version"), "is required");
            }
        }
    }
    if let Ok(v) = serde_json::to_value(facts) {
        // Bounded as a whole too, as a join request's facts are.
        let size = v.to_string().len();
        if size > crate::membership::MAX_JOIN_FACTS {
            f.push(
                "facts",
                format!(
                    "must be at most {} bytes as JSON, not {size}",
                    crate::membership::MAX_JOIN_FACTS
                ),
            );
        }
        crate::text::check_json_safe(&mut f, "facts", &v);
    }
    f.into_result()?;
    Ok(facts)
}

/// A loss of acknowledged events, checked: a position range from 1, each
/// lost event within it in rising order, and the hashes as the log shows
/// them.
pub(super) fn events_lost(lost: &EventsLost) -> Result<&EventsLost, Refusal> {
    let mut f = Findings::default();
    if lost.first == 0 || lost.last < lost.first {
        f.push("last", "must be a position range first..=last, from 1");
    }
    if !valid_hash(&lost.database_hash) {
        f.push("databaseHash", "must be 64 lowercase hex digits");
    }
    let mut after = lost.first.saturating_sub(1);
    for (i, e) in lost.lost.iter().enumerate() {
        if e.position <= after || e.position > lost.last {
            f.push(
                &format!("lost[{i}].position"),
                "must rise within first..=last",
            );
        }
        if !valid_hash(&e.hash) {
            f.push(
                &format!("lost[{i}].hash"),
                "must be 64 lowercase hex digits",
            );
        }
        after = e.position;
    }
    f.into_result()?;
    Ok(lost)
}

/// A fork found, checked: both roots as the log shows hashes.
pub(super) fn checkpoint_fork(fork: &CheckpointForkFound) -> Result<&CheckpointForkFound, Refusal> {
    let mut f = Findings::default();
    if !valid_hash(&fork.signed_root) {
        f.push("signedRoot", "must be 64 lowercase hex digits");
    }
    if !valid_hash(&fork.log_root) {
        f.push("logRoot", "must be 64 lowercase hex digits");
    }
    f.into_result()?;
    Ok(fork)
}

/// The acceptance of a fork, checked: the signed checkpoint it names, and
/// the reason (required, one line).
pub(super) struct ForkAcknowledgement<'a> {
    pub signed_size: u64,
    pub signed_root: &'a str,
    pub reason: String,
}

/// The fields of [`UpgradeCommand::AcknowledgeCheckpointFork`].
pub(super) fn fork_acknowledgement<'a>(
    signed_size: u64,
    signed_root: &'a str,
    reason: &Option<String>,
) -> Result<ForkAcknowledgement<'a>, Refusal> {
    let mut f = Findings::default();
    if !valid_hash(signed_root) {
        f.push("signedRoot", "must be 64 lowercase hex digits");
    }
    let reason = crate::text::check_line(&mut f, "reason", reason, crate::membership::MAX_REASON);
    let reason = f.conclude(reason)?;
    Ok(ForkAcknowledgement {
        signed_size,
        signed_root,
        reason,
    })
}

/// A SHA-256 as the log shows it: 64 lowercase hex digits.
fn valid_hash(h: &str) -> bool {
    h.len() == 64
        && h.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}
