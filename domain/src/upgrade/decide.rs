//! Deciding the upgrade commands, one function per command (the driver's
//! next step is in [`super::driver`]).

use chrono::{DateTime, Utc};
use serde_json::json;

use crate::error::{ErrorCode, FieldError, Findings, Refusal};
use crate::event::DomainEvent;
use crate::release::{canonical, parse_manifest, SignedManifest};
use crate::state::{CommandContext, Decision, State, Subject};

use super::plan::PlanInput;
use super::*;

/// A node's report, as the request gave it.
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

fn upgrade_decision(id: &str, events: Vec<DomainEvent>) -> Decision {
    Decision {
        events,
        subject: Subject::Upgrade(id.to_owned()),
    }
}

fn state_conflict(u: &Upgrade, what: &str) -> Refusal {
    Refusal::new(
        ErrorCode::UpgradeStateConflict,
        format!("Upgrade {} is {}: {what}", u.id, u.state.as_str()),
    )
    .with_details(json!({ "state": u.state.as_str() }))
}

impl Upgrades {
    /// Ids are drawn at random by the caller; one already taken is refused
    /// rather than overwriting an upgrade's history.
    fn refuse_taken_id(&self, id: &str) -> Result<(), Refusal> {
        if self.upgrades.contains_key(id) {
            return Err(Refusal::new(
                ErrorCode::VersionConflict,
                format!("Upgrade id {id} is taken; retry."),
            ));
        }
        Ok(())
    }

    fn refuse_if_active(&self) -> Result<(), Refusal> {
        match self.active_upgrade() {
            Some(u) => Err(Refusal::new(
                ErrorCode::UpgradeAlreadyActive,
                format!(
                    "Upgrade {} is {}; one upgrade runs at a time.",
                    u.id,
                    u.state.as_str()
                ),
            )
            .with_details(json!({ "upgradeId": u.id, "state": u.state.as_str() }))),
            None => Ok(()),
        }
    }

    pub fn decide(
        &self,
        state: &State,
        cmd: &UpgradeCommand,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        let mut decision = match cmd {
            UpgradeCommand::RegisterRelease { manifest, source } => {
                self.register_release(manifest, *source)
            }
            UpgradeCommand::SetRunningRelease { version } => self.set_running_release(version),
            UpgradeCommand::Create {
                upgrade_id,
                target_release,
                mode,
                backup_location,
                backup_encrypted,
                config,
            } => self.create(
                state,
                upgrade_id,
                target_release,
                mode,
                (backup_location, backup_encrypted),
                config,
            ),
            UpgradeCommand::Advance => match self.active_upgrade() {
                Some(u) => Ok(upgrade_decision(&u.id, u.next_step(state, ctx.now))),
                None => Err(Refusal::new(ErrorCode::NotFound, "No upgrade is active.")),
            },
            UpgradeCommand::Apply { upgrade_id } => self.apply(upgrade_id),
            UpgradeCommand::ReportNode {
                upgrade_id,
                node_id,
                phase,
                state: status,
                message,
                host_steps,
                rebooted_at,
                instances,
                host_state,
                running_instances,
            } => self.report_node(
                upgrade_id,
                node_id,
                NodeReportInput {
                    phase,
                    status,
                    message,
                    host_steps,
                    rebooted_at: *rebooted_at,
                    instances,
                    host_state,
                    running_instances,
                },
            ),
            UpgradeCommand::ReportBackup {
                upgrade_id,
                location,
                bundle,
                encrypted,
            } => self.report_backup(upgrade_id, location, bundle, encrypted),
            UpgradeCommand::Cancel { upgrade_id } => self.cancel(upgrade_id),
            UpgradeCommand::Rollback {
                upgrade_id,
                new_upgrade_id,
                restore_backup,
                config,
            } => self.rollback(state, upgrade_id, new_upgrade_id, *restore_backup, config),
            UpgradeCommand::Acknowledge { upgrade_id } => self.acknowledge(upgrade_id),
            UpgradeCommand::ReportFacts { node_id, facts } => {
                self.report_facts(state, node_id, facts)
            }
            UpgradeCommand::RecordLostEvents(lost) => self.record_lost_events(lost),
            UpgradeCommand::RecordCheckpointFork(fork) => self.record_checkpoint_fork(fork),
            UpgradeCommand::AcknowledgeCheckpointFork {
                signed_size,
                signed_root,
                reason,
            } => self.acknowledge_checkpoint_fork(*signed_size, signed_root, reason),
            UpgradeCommand::KeepReplicaSettingsAlarm { differing } => {
                Ok(self.keep_replica_settings_alarm(differing))
            }
            UpgradeCommand::KeepWitnessAlarm { replica, failing } => {
                Ok(self.keep_witness_alarm(replica, failing))
            }
        }?;
        let clears = self.alarms_cleared_by(&decision.events);
        decision.events.extend(clears);
        Ok(decision)
    }

    /// The alarms a decision's events clear, in one place for every
    /// command: a node's reboot clears its reboot alarm, and an upgrade's
    /// end clears every alarm of the upgrade.
    fn alarms_cleared_by(&self, events: &[DomainEvent]) -> Vec<DomainEvent> {
        let mut out = Vec::new();
        let mut cleared = std::collections::BTreeSet::new();
        for e in events {
            let (upgrade, node) = match e {
                DomainEvent::UpgradeNodeReported(r) if r.rebooted_at.is_some() => {
                    (r.upgrade_id.as_str(), Some(r.node_id.as_str()))
                }
                DomainEvent::UpgradeCompleted(UpgradeCompleted { upgrade_id, .. })
                | DomainEvent::UpgradeFailed(UpgradeFailed { upgrade_id, .. })
                | DomainEvent::UpgradeCanceled(UpgradeRef { upgrade_id }) => {
                    (upgrade_id.as_str(), None)
                }
                _ => continue,
            };
            for (key, a) in self.alarms.iter().filter(|(_, a)| {
                a.cleared_at.is_none()
                    && a.upgrade_id.as_deref() == Some(upgrade)
                    && node.is_none_or(|n| a.node_id.as_deref() == Some(n))
            }) {
                // One clear per alarm, however many events of the decision
                // clear it.
                if !cleared.insert(key.clone()) {
                    continue;
                }
                out.push(DomainEvent::AlarmCleared(AlarmCleared {
                    name: a.name.clone(),
                    node_id: a.node_id.clone(),
                    upgrade_id: a.upgrade_id.clone(),
                }));
            }
        }
        out
    }

    fn create(
        &self,
        state: &State,
        upgrade_id: &str,
        target_release: &Option<String>,
        mode: &Option<String>,
        (backup_location, backup_encrypted): (&Option<String>, &Option<bool>),
        config: &UpgradeConfig,
    ) -> Result<Decision, Refusal> {
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
        self.refuse_if_active()?;
        self.refuse_taken_id(upgrade_id)?;
        let running = self.running_release()?;
        let plan = self.plan(
            state,
            &PlanInput {
                target: &target,
                from: running,
                mode,
                restore: false,
                settle_seconds: config.settle_seconds,
            },
        );
        let (backup_target, encrypted) = match (location, &config.backup_target) {
            (BackupLocation::Target, Some(t)) => (
                Some(t.url.clone()),
                t.recipient.is_some() || backup_encrypted.unwrap_or(false),
            ),
            _ => (None, backup_encrypted.unwrap_or(false)),
        };
        Ok(upgrade_decision(
            upgrade_id,
            vec![DomainEvent::UpgradePlanned(UpgradePlanned {
                upgrade_id: upgrade_id.to_owned(),
                mode,
                target_release: target,
                from_release: running.to_owned(),
                backup_location: location,
                backup_encrypted: encrypted,
                backup_target,
                rollback_of: None,
                restore_backup: false,
                plan,
            })],
        ))
    }

    fn report_backup(
        &self,
        upgrade_id: &str,
        location: &Option<String>,
        bundle: &Option<String>,
        encrypted: &Option<bool>,
    ) -> Result<Decision, Refusal> {
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
            crate::text::check_text(&mut f, "bundle", b, crate::text::MAX_MESSAGE);
        }
        let encrypted = f.required("encrypted", encrypted).copied();
        let ((location, bundle), encrypted) = f.conclude(location.zip(bundle).zip(encrypted))?;
        let u = self.upgrade(upgrade_id)?;
        let backup = Backup {
            location,
            bundle,
            encrypted,
        };
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

    fn rollback(
        &self,
        state: &State,
        upgrade_id: &str,
        new_upgrade_id: &str,
        restore_backup: bool,
        config: &UpgradeConfig,
    ) -> Result<Decision, Refusal> {
        let u = self.upgrade(upgrade_id)?;
        if !matches!(u.state, UpgradeState::Done | UpgradeState::Failed) {
            return Err(state_conflict(
                u,
                "only a done or failed upgrade is rolled back.",
            ));
        }
        // A rollback that failed or was canceled undid nothing: the
        // upgrade may be rolled back again.
        if let Some(by) = u.rolled_back_by.as_deref().filter(|by| {
            self.upgrades
                .get(*by)
                .is_some_and(|r| !matches!(r.state, UpgradeState::Failed | UpgradeState::Canceled))
        }) {
            return Err(state_conflict(
                u,
                &format!("it was already rolled back by {by}."),
            ));
        }
        if restore_backup && u.backup.is_none() {
            return Err(Refusal::invalid(vec![FieldError::new(
                "restoreBackup",
                format!("upgrade {upgrade_id} took no backup to restore"),
            )]));
        }
        // The old control plane cannot run the new schema: only the backup
        // taken before the upgrade brings the cluster back.
        // Only an upgrade that reached a node's roll can have migrated the
        // schema; one that failed before has nothing to restore.
        let migrated = u.nodes.iter().any(|n| n.phase >= Phase::Roll);
        if u.plan.restore_required && migrated && !restore_backup {
            return Err(Refusal::new(
                ErrorCode::RestoreRequired,
                format!(
                    "Release {} cannot run on the schema {} migrated to: roll back with restoreBackup: true.",
                    u.from_release, u.target_release
                ),
            )
            .with_details(json!({ "upgradeId": upgrade_id, "restoreRequired": true })));
        }
        self.refuse_if_active()?;
        self.refuse_taken_id(new_upgrade_id)?;
        let running = self.running_release()?;
        let plan = self.plan(
            state,
            &PlanInput {
                target: &u.from_release,
                from: running,
                mode: UpgradeMode::Now,
                restore: restore_backup,
                settle_seconds: config.settle_seconds,
            },
        );
        Ok(upgrade_decision(
            new_upgrade_id,
            vec![
                DomainEvent::UpgradePlanned(UpgradePlanned {
                    upgrade_id: new_upgrade_id.to_owned(),
                    mode: UpgradeMode::Now,
                    target_release: u.from_release.clone(),
                    from_release: running.to_owned(),
                    backup_location: u.backup_location,
                    backup_encrypted: u.backup_encrypted,
                    backup_target: u.backup_target.clone(),
                    rollback_of: Some(upgrade_id.to_owned()),
                    restore_backup,
                    plan,
                }),
                DomainEvent::UpgradeRolledBack(UpgradeRolledBack {
                    upgrade_id: upgrade_id.to_owned(),
                    by: new_upgrade_id.to_owned(),
                }),
            ],
        ))
    }

    fn register_release(
        &self,
        signed: &SignedManifest,
        source: ReleaseSource,
    ) -> Result<Decision, Refusal> {
        let manifest = signed.manifest();
        // An unsigned or badly signed manifest is refused, naming the
        // signature first and then whatever else is wrong with it.
        let parsed = parse_manifest(manifest);
        if let Err(bad) = signed.signed_by() {
            let mut errors = vec![bad.clone()];
            if let Err(more) = parsed {
                errors.extend(more.into_iter().filter(|f| f.field != bad.field));
            }
            return Err(Refusal::invalid(errors));
        }
        let release = parsed.map_err(Refusal::invalid)?;
        let text = canonical(manifest);
        let subject = Subject::Release(release.version.clone());
        if let Some(known) = self.releases.get(&release.version) {
            if known.manifest == text {
                return Ok(Decision::none(subject));
            }
            return Err(Refusal::new(
                ErrorCode::ReleaseExists,
                format!(
                    "Release {} is registered with another manifest; a release never changes.",
                    release.version
                ),
            ));
        }
        Ok(Decision {
            events: vec![DomainEvent::ReleaseRegistered(ReleaseRegistered {
                version: release.version,
                manifest: text,
                source,
            })],
            subject,
        })
    }

    fn set_running_release(&self, version: &Option<String>) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        let version = f.required("version", version).cloned();
        if let Some(v) = &version {
            if !self.releases.contains_key(v) {
                f.push("version", format!("release {v} is not registered"));
            }
        }
        let version = f.conclude(version)?;
        match &self.running {
            Some(r) if r.version == version => Ok(Decision::none(Subject::RunningRelease)),
            Some(r) => Err(Refusal::new(
                ErrorCode::RunningReleaseAlreadySet,
                format!(
                    "The cluster runs release {}; after install only upgrades change it.",
                    r.version
                ),
            )
            .with_details(json!({ "version": r.version }))),
            None => Ok(Decision {
                events: vec![DomainEvent::RunningReleaseSet(RunningReleaseSet {
                    version,
                })],
                subject: Subject::RunningRelease,
            }),
        }
    }

    fn apply(&self, upgrade_id: &str) -> Result<Decision, Refusal> {
        let u = self.upgrade(upgrade_id)?;
        if u.state != UpgradeState::Staged {
            return Err(state_conflict(u, "only a staged upgrade is applied."));
        }
        Ok(upgrade_decision(
            upgrade_id,
            vec![DomainEvent::UpgradeStateChanged(UpgradeStateChanged {
                upgrade_id: upgrade_id.to_owned(),
                from: UpgradeState::Staged,
                to: UpgradeState::BackingUp,
            })],
        ))
    }

    fn cancel(&self, upgrade_id: &str) -> Result<Decision, Refusal> {
        let u = self.upgrade(upgrade_id)?;
        match u.state {
            UpgradeState::Canceled => Ok(Decision::none(Subject::Upgrade(upgrade_id.to_owned()))),
            s if s.cancelable() => Ok(upgrade_decision(
                upgrade_id,
                vec![DomainEvent::UpgradeCanceled(UpgradeRef {
                    upgrade_id: upgrade_id.to_owned(),
                })],
            )),
            s => Err(Refusal::new(
                ErrorCode::UpgradeNotCancelable,
                match s {
                    UpgradeState::Done => format!(
                        "Upgrade {upgrade_id} is done: there is nothing left to cancel; roll it back to return to the release before it."
                    ),
                    UpgradeState::Failed if u.backup.is_none() => format!(
                        "Upgrade {upgrade_id} failed before its backup, so nothing of it is left to cancel: acknowledge its findings, and plan a new upgrade once the cause is mended."
                    ),
                    UpgradeState::Failed => format!(
                        "Upgrade {upgrade_id} failed after its backup: there is nothing left to cancel; roll it back with that backup, or acknowledge its findings."
                    ),
                    _ => format!(
                        "Upgrade {upgrade_id} is {}: from the backup on it runs to its end; roll it back once it is done or failed.",
                        s.as_str()
                    ),
                },
            )
            .with_details(json!({ "state": s.as_str() }))),
        }
    }

    fn acknowledge(&self, upgrade_id: &str) -> Result<Decision, Refusal> {
        let u = self.upgrade(upgrade_id)?;
        if u.state != UpgradeState::Failed {
            return Err(state_conflict(
                u,
                "only a failed upgrade's findings are acknowledged.",
            ));
        }
        let events = if u.acknowledged_at.is_some() {
            Vec::new()
        } else {
            vec![DomainEvent::UpgradeAcknowledged(UpgradeRef {
                upgrade_id: upgrade_id.to_owned(),
            })]
        };
        Ok(upgrade_decision(upgrade_id, events))
    }

    fn running_release(&self) -> Result<&str, Refusal> {
        self.running.as_ref().map(|r| r.version.as_str()).ok_or_else(|| {
            Refusal::new(
                ErrorCode::RunningReleaseNotSet,
                "The cluster's running release is not set; set it at install with PUT /v1/admin/cluster/release.",
            )
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn report_node(
        &self,
        upgrade_id: &str,
        node_id: &str,
        r: NodeReportInput<'_>,
    ) -> Result<Decision, Refusal> {
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
        use crate::text::{check_items, check_text, MAX_MESSAGE, MAX_NAME};
        if let Some(m) = r.message {
            check_text(&mut f, "message", m, MAX_MESSAGE);
        }
        if let Some(steps) = r.host_steps {
            check_items(&mut f, "hostSteps", steps);
        }
        for (i, step) in r.host_steps.iter().flatten().enumerate() {
            if step.name.is_empty() {
                f.push(&format!("hostSteps[{i}].name"), "is required");
            }
            check_text(
                &mut f,
                &format!("hostSteps[{i}].name"),
                &step.name,
                MAX_NAME,
            );
            check_text(
                &mut f,
                &format!("hostSteps[{i}].detail"),
                &step.detail,
                MAX_MESSAGE,
            );
            for (field, units) in [
                ("pendingUnits", &step.pending_units),
                ("restartedUnits", &step.restarted_units),
                ("stoppedUnits", &step.stopped_units),
            ] {
                check_items(&mut f, &format!("hostSteps[{i}].{field}"), units);
            }
            for (j, unit) in step
                .pending_units
                .iter()
                .chain(&step.restarted_units)
                .chain(&step.stopped_units)
                .enumerate()
            {
                check_text(
                    &mut f,
                    &format!("hostSteps[{i}].units[{j}]"),
                    unit,
                    MAX_NAME,
                );
            }
            if !HOST_STEP_STATES.contains(&step.state.as_str()) {
                f.push(
                    &format!("hostSteps[{i}].state"),
                    format!("must be one of {}", HOST_STEP_STATES.join(", ")),
                );
            }
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

    /// A node agent's facts: validated, and recorded when they differ from
    /// its last report (the newest report wins).
    fn report_facts(
        &self,
        state: &State,
        node_id: &str,
        facts: &NodeFacts,
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
            .with_details(serde_json::json!({ "state": member.state })));
        }
        let mut f = Findings::default();
        for (field, list, kind) in [
            (
                "images",
                &facts.images,
                crate::release::ComponentKind::Image,
            ),
            (
                "packages",
                &facts.packages,
                crate::release::ComponentKind::Package,
            ),
        ] {
            crate::text::check_items(&mut f, field, list);
            for (i, c) in list.iter().enumerate() {
                for (part, text) in [
                    ("name", &c.name),
                    ("version", &c.version),
                    ("digest", &c.digest),
                ] {
                    if text.len() > crate::text::MAX_NAME {
                        f.push(
                            &format!("{field}[{i}].{part}"),
                            format!("must be at most {} bytes", crate::text::MAX_NAME),
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

impl Upgrades {
    /// Records a loss of acknowledged events once: the first replica to
    /// report the loss that begins at `first` raises its alarm, and the
    /// others' reports of the same loss find it raised.
    fn record_lost_events(&self, lost: &EventsLost) -> Result<Decision, Refusal> {
        let key = events_lost_key(lost.first);
        let subject = Subject::Alarm(key.clone());
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
        if self.alarms.contains_key(&key) {
            return Ok(Decision::none(subject));
        }
        Ok(Decision {
            events: vec![DomainEvent::EventsLost(lost.clone())],
            subject,
        })
    }
}

impl Upgrades {
    /// Keeps an alarm that lists what is wrong now: raised, with the
    /// message `message` makes of the list, while the list is not empty,
    /// and cleared once it is; nothing when the alarm already says so.
    /// With `follow`, an active alarm whose list changed is raised again
    /// with the new one. `of`: whose alarm it is (in the `nodeId` slot of
    /// its key), when each reporter keeps one of its own.
    fn keep_listing_alarm(
        &self,
        name: &str,
        of: Option<&str>,
        list: &[String],
        follow: bool,
        message: impl FnOnce(String) -> String,
    ) -> Decision {
        let key = alarm_key(name, None, of);
        let subject = Subject::Alarm(key.clone());
        let active = self.alarms.get(&key).filter(|a| a.cleared_at.is_none());
        let message = message(list.join("; "));
        let changed = follow && active.is_some_and(|a| a.message != message);
        let event = match (list.is_empty(), active.is_some()) {
            (false, false) => DomainEvent::AlarmRaised(AlarmRaised {
                name: name.to_owned(),
                node_id: of.map(str::to_owned),
                upgrade_id: None,
                message,
            }),
            (false, true) if changed => DomainEvent::AlarmRaised(AlarmRaised {
                name: name.to_owned(),
                node_id: of.map(str::to_owned),
                upgrade_id: None,
                message,
            }),
            (true, true) => DomainEvent::AlarmCleared(AlarmCleared {
                name: name.to_owned(),
                node_id: of.map(str::to_owned),
                upgrade_id: None,
            }),
            // The alarm says so already.
            (false, true) | (true, false) => return Decision::none(subject),
        };
        Decision {
            events: vec![event],
            subject,
        }
    }

    /// The `replica-settings-differ` alarm, while live replicas' settings
    /// differ from the agreed ones.
    fn keep_replica_settings_alarm(&self, differing: &[String]) -> Decision {
        self.keep_listing_alarm(REPLICA_SETTINGS_DIFFER_ALARM, None, differing, false, |list| {
            format!(
                "Live replicas run with process-manager settings other than the agreed ones, and never run the raft cleanup with them: {list}. Give them the agreed settings, or give every replica the new ones and finalize again (stratum replicas list)."
            )
        })
    }

    /// The `log-witness-failing` alarm of one replica, while witnesses
    /// fail to cosign what it submits; raised again when the witnesses
    /// failing change. Each replica keeps its own, so two replicas that
    /// see the witnesses differently do not raise and clear one in turn.
    fn keep_witness_alarm(&self, replica: &str, failing: &[String]) -> Decision {
        self.keep_listing_alarm(LOG_WITNESS_FAILING_ALARM, Some(replica), failing, true, |list| {
            format!(
                "Witnesses of the log's checkpoints fail to cosign what the replica {replica} submits: {list}. Commits go on; auditors that require these witnesses refuse the checkpoints until a quorum cosigns again. Why each fails: stratum_witness_failures_total by reason, and the service's log (STRATUM_LOG_WITNESS_POLICY names the witnesses)."
            )
        })
    }

    /// Records a fork once: every replica that finds the log forked from
    /// the same signed checkpoint reports the same fork.
    fn record_checkpoint_fork(&self, fork: &CheckpointForkFound) -> Result<Decision, Refusal> {
        let subject = Subject::Alarm(checkpoint_fork_key(fork.signed_size, &fork.signed_root));
        let mut f = Findings::default();
        if !valid_hash(&fork.signed_root) {
            f.push("signedRoot", "must be 64 lowercase hex digits");
        }
        if !valid_hash(&fork.log_root) {
            f.push("logRoot", "must be 64 lowercase hex digits");
        }
        f.into_result()?;
        if self
            .checkpoint_fork(fork.signed_size, &fork.signed_root)
            .is_some()
        {
            return Ok(Decision::none(subject));
        }
        Ok(Decision {
            events: vec![DomainEvent::CheckpointForkFound(fork.clone())],
            subject,
        })
    }

    /// Accepts the fork of the signed checkpoint named: it must be the one
    /// the log recorded, and a reason is required.
    fn acknowledge_checkpoint_fork(
        &self,
        size: u64,
        root: &str,
        reason: &Option<String>,
    ) -> Result<Decision, Refusal> {
        let subject = Subject::Alarm(checkpoint_fork_key(size, root));
        let mut f = Findings::default();
        if !valid_hash(root) {
            f.push("signedRoot", "must be 64 lowercase hex digits");
        }
        let reason =
            crate::text::check_line(&mut f, "reason", reason, crate::membership::MAX_REASON);
        let reason = f.conclude(reason)?;
        match self.checkpoint_fork(size, root) {
            Some(k) if k.acknowledged.is_some() => Ok(Decision::none(subject)),
            Some(_) => Ok(Decision {
                events: vec![DomainEvent::CheckpointForkAcknowledged(
                    CheckpointForkAcknowledged {
                        signed_size: size,
                        signed_root: root.to_owned(),
                        reason,
                    },
                )],
                subject,
            }),
            None => Err(Refusal::not_found(format!(
                "A checkpoint fork from the signed checkpoint of size {size} and root {root}"
            ))),
        }
    }
}

/// A SHA-256 as the log shows it: 64 lowercase hex digits.
fn valid_hash(h: &str) -> bool {
    h.len() == 64
        && h.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}
