//! Folding the upgrade events into the state.

use crate::event::DomainEvent;
use crate::state::EventCtx;

use super::*;

impl Upgrades {
    /// Folds one event. Events were decided against this very state, so
    /// an unknown upgrade here is a corrupt log, and ignored.
    pub fn evolve(&mut self, ctx: &EventCtx, event: &DomainEvent) {
        let at = ctx.occurred_at;
        match event {
            DomainEvent::ReleaseRegistered(e) => {
                // Validated when registered; read as recorded since.
                let mut release = crate::release::read_recorded(&e.manifest);
                release.version = e.version.clone();
                self.releases.insert(
                    e.version.clone(),
                    RegisteredRelease {
                        release,
                        source: e.source,
                        manifest: e.manifest.clone(),
                        registered_by: ctx.principal.to_owned(),
                        registered_at: at,
                        registered_position: ctx.position,
                    },
                );
                return;
            }
            DomainEvent::RunningReleaseSet(e) => {
                self.running = Some(RunningRelease {
                    version: e.version.clone(),
                    set_by: ctx.principal.to_owned(),
                    set_at: at,
                    changes: 1,
                });
                return;
            }
            DomainEvent::NodeFactsReported(e) => {
                let version = self.facts.get(&e.node_id).map_or(0, |f| f.version) + 1;
                self.facts.insert(
                    e.node_id.clone(),
                    RecordedFacts {
                        facts: e.facts.clone(),
                        reported_by: ctx.principal.to_owned(),
                        reported_at: at,
                        version,
                    },
                );
                return;
            }
            DomainEvent::AlarmRaised(e) => {
                let key = alarm_key(&e.name, e.upgrade_id.as_deref(), e.node_id.as_deref());
                self.alarms.insert(
                    key,
                    Alarm {
                        name: e.name.clone(),
                        node_id: e.node_id.clone(),
                        upgrade_id: e.upgrade_id.clone(),
                        message: e.message.clone(),
                        raised_at: at,
                        cleared_at: None,
                        raised_position: ctx.position,
                    },
                );
            }
            DomainEvent::EventsLost(e) => {
                self.alarms.insert(
                    events_lost_key(e.first),
                    Alarm {
                        name: LOG_EVENTS_LOST_ALARM.to_owned(),
                        node_id: None,
                        upgrade_id: None,
                        message: format!(
                            "Acknowledged events {} to {} were lost in a database failover: the \
                             database's log ended at position {} ({}) when a replica found its \
                             log gone. The {} lost events' hashes are in the EventsLost event \
                             at position {}.",
                            e.first,
                            e.last,
                            e.database_position,
                            e.database_hash,
                            e.lost.len(),
                            ctx.position
                        ),
                        raised_at: at,
                        cleared_at: None,
                        raised_position: ctx.position,
                    },
                );
                return;
            }
            DomainEvent::CheckpointForkFound(e) => {
                let key = checkpoint_fork_key(e.signed_size, &e.signed_root);
                self.alarms.insert(
                    key.clone(),
                    Alarm {
                        name: CHECKPOINT_FORK_ALARM.to_owned(),
                        node_id: None,
                        upgrade_id: None,
                        message: format!(
                            "The log no longer extends the newest signed checkpoint: it was \
                             signed at size {} with root {}, and the log now has {} events with \
                             root {}. The database was restored from an older copy or lost \
                             events in a failover. No checkpoint is signed until an operator \
                             acknowledges this fork (POST /v1/admin/log/fork/acknowledge).",
                            e.signed_size, e.signed_root, e.log_size, e.log_root
                        ),
                        raised_at: at,
                        cleared_at: None,
                        raised_position: ctx.position,
                    },
                );
                self.checkpoint_forks.insert(
                    key,
                    CheckpointFork {
                        found: e.clone(),
                        acknowledged: None,
                    },
                );
                return;
            }
            DomainEvent::CheckpointForkAcknowledged(e) => {
                let key = checkpoint_fork_key(e.signed_size, &e.signed_root);
                if let Some(a) = self.alarms.get_mut(&key) {
                    a.cleared_at = Some(at);
                }
                if let Some(k) = self.checkpoint_forks.get_mut(&key) {
                    k.acknowledged = Some((ctx.principal.to_owned(), e.reason.clone()));
                }
                return;
            }
            // Folded by the log's storage version, not by any upgrade.
            DomainEvent::StorageVersionFinalized(_) => return,
            DomainEvent::RaftPeerReturned(e) => {
                self.alarms.insert(
                    raft_peer_returned_key(e.raft, &e.node_id),
                    Alarm {
                        name: RAFT_PEER_RETURNED_ALARM.to_owned(),
                        node_id: Some(e.node_id.clone()),
                        upgrade_id: None,
                        message: format!(
                            "Member {node} was taken out of the {raft} raft at {removed} \
                             (position {position}), and the raft's own listing names it again \
                             at {at}. The node still runs its {raft} member: stratum removes \
                             it again, and it may keep coming back until the node stops its \
                             raft members (see the operator guide).",
                            node = e.node_id,
                            raft = e.raft.as_str(),
                            removed = e
                                .removed_at
                                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                            position = e.removed_position,
                            at = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                        ),
                        raised_at: at,
                        cleared_at: None,
                        raised_position: ctx.position,
                    },
                );
                return;
            }
            DomainEvent::RaftPeerRemoved { node_id, raft, .. } => {
                // The removal again ends a return's alarm.
                if let Some(a) = self.alarms.get_mut(&raft_peer_returned_key(*raft, node_id)) {
                    a.cleared_at.get_or_insert(at);
                }
                return;
            }
            DomainEvent::AlarmCleared(e) => {
                let key = alarm_key(&e.name, e.upgrade_id.as_deref(), e.node_id.as_deref());
                if let Some(a) = self.alarms.get_mut(&key) {
                    a.cleared_at = Some(at);
                }
            }
            DomainEvent::UpgradePlanned(e) => {
                let restore = e.restore_backup;
                let nodes = e
                    .plan
                    .nodes
                    .iter()
                    .map(|n| UpgradeNode {
                        node_id: n.node_id.clone(),
                        ordinal: n.ordinal,
                        kind: n.kind,
                        phase: Phase::Fetch,
                        // What a node fetched for an earlier upgrade stays
                        // there: its fetch starts done.
                        state: if n.fetched {
                            NodeStatus::Done
                        } else {
                            NodeStatus::Pending
                        },
                        message: String::new(),
                        host_steps: host_steps(n.kind, restore),
                        host_state: String::new(),
                        previous_release: e.from_release.clone(),
                        instances: Vec::new(),
                        running_instances: Vec::new(),
                        rebooted_at: None,
                    })
                    .collect();
                self.upgrades.insert(
                    e.upgrade_id.clone(),
                    Upgrade {
                        id: e.upgrade_id.clone(),
                        mode: e.mode,
                        state: UpgradeState::Planned,
                        target_release: e.target_release.clone(),
                        from_release: e.from_release.clone(),
                        backup_location: e.backup_location,
                        backup_encrypted: e.backup_encrypted,
                        backup_target: e.backup_target.clone(),
                        backup: None,
                        plan: e.plan.clone(),
                        prechecks: Vec::new(),
                        nodes,
                        turn: None,
                        failure_reason: None,
                        last_restart_at: None,
                        staged_at: None,
                        rollback_of: e.rollback_of.clone(),
                        restore_backup: restore,
                        rolled_back_by: None,
                        acknowledged_at: None,
                        created_by: ctx.principal.to_owned(),
                        created_at: at,
                        canceled_by: None,
                        canceled_at: None,
                        updated_at: at,
                        created_position: ctx.position,
                        version: ctx.stream_version,
                    },
                );
                self.active = Some(e.upgrade_id.clone());
                return;
            }
            // Named, not a wildcard: a new event type must be decided here
            // (an upgrade's own events are folded below).
            DomainEvent::MemberAdmitted(_)
            | DomainEvent::JoinProgressReported { .. }
            | DomainEvent::MemberJoinCompleted { .. }
            | DomainEvent::MemberJoinFailed(_)
            | DomainEvent::RaftCleanupCompleted { .. }
            | DomainEvent::MemberJoinRetried { .. }
            | DomainEvent::MemberRemovalStarted(_)
            | DomainEvent::MemberDecommissioned { .. }
            | DomainEvent::MemberUpdated(_)
            | DomainEvent::AppliedGenerationReported { .. }
            | DomainEvent::JoinRequested(_)
            | DomainEvent::JoinRequestApproved { .. }
            | DomainEvent::JoinRequestRejected { .. }
            | DomainEvent::TokenIssued(_)
            | DomainEvent::UpgradeStateChanged(_)
            | DomainEvent::UpgradePrechecked(_)
            | DomainEvent::UpgradeNodeTurnStarted(_)
            | DomainEvent::UpgradeNodeReported(_)
            | DomainEvent::UpgradeBackupReported(_)
            | DomainEvent::UpgradeFailed(_)
            | DomainEvent::UpgradeCompleted(_)
            | DomainEvent::UpgradeCanceled(_)
            | DomainEvent::UpgradeRolledBack(_)
            | DomainEvent::UpgradeAcknowledged(_)
            | DomainEvent::TokenRevoked(_)
            | DomainEvent::PolicyCreated(_)
            | DomainEvent::PrincipalPoliciesSet(_)
            | DomainEvent::ResourcePolicySet(_) => {}
        }
        let Some(id) = upgrade_of(event) else {
            return;
        };
        let Some(u) = self.upgrades.get_mut(id) else {
            return;
        };
        u.updated_at = at;
        u.version = ctx.stream_version;
        match event {
            DomainEvent::UpgradeStateChanged(e) => {
                u.state = e.to;
                if e.to == UpgradeState::Staged {
                    u.staged_at = Some(at);
                }
                if e.to == UpgradeState::Verifying {
                    u.turn = None;
                    for n in &mut u.nodes {
                        n.phase = Phase::Verify;
                        n.state = NodeStatus::Pending;
                    }
                }
            }
            DomainEvent::UpgradePrechecked(e) => u.prechecks = e.prechecks.clone(),
            DomainEvent::UpgradeNodeTurnStarted(e) => {
                u.turn = u.nodes.iter().position(|n| n.node_id == e.node_id);
                if let Some(n) = u.nodes.iter_mut().find(|n| n.node_id == e.node_id) {
                    n.phase = Phase::Roll;
                    n.state = NodeStatus::Pending;
                }
            }
            DomainEvent::UpgradeNodeReported(e) => {
                if let Some(n) = u.nodes.iter_mut().find(|n| n.node_id == e.node_id) {
                    n.phase = e.phase;
                    n.state = e.state;
                    if !e.message.is_empty() {
                        n.message = e.message.clone();
                    }
                    if let Some(h) = &e.host_steps {
                        n.host_steps = h.clone();
                    }
                    if let Some(i) = &e.instances {
                        n.instances = i.clone();
                    }
                    if let Some(h) = &e.host_state {
                        n.host_state = h.clone();
                    }
                    if let Some(i) = &e.running_instances {
                        n.running_instances = i.clone();
                    }
                    if e.rebooted_at.is_some() {
                        n.rebooted_at = e.rebooted_at;
                        // A new reboot: the instances that ran then must
                        // run again, whatever ran before.
                        if e.running_instances.is_none() {
                            n.running_instances.clear();
                        }
                    }
                }
                // The last restart or reboot the upgrade caused: a reported
                // reboot, or a roll done on a node whose plan restarts
                // something; never earlier than the one before, and never
                // later than when the service heard of it (a node's clock
                // may be off).
                let rolled = e.phase == Phase::Roll
                    && e.state == NodeStatus::Done
                    && u.plan
                        .nodes
                        .iter()
                        .any(|n| n.node_id == e.node_id && !n.restarts.is_empty());
                let restart = match e.rebooted_at {
                    Some(t) => Some(t.min(at)),
                    None if rolled => Some(at),
                    None => None,
                };
                if let Some(t) = restart {
                    u.last_restart_at = Some(u.last_restart_at.map_or(t, |l| l.max(t)));
                }
                if e.phase == Phase::Fetch && e.state == NodeStatus::Done {
                    self.fetched
                        .entry(e.node_id.clone())
                        .or_default()
                        .insert(u.target_release.clone());
                }
            }
            DomainEvent::UpgradeBackupReported(e) => {
                u.backup = Some(Backup {
                    location: e.location,
                    bundle: e.bundle.clone(),
                    encrypted: e.encrypted,
                });
            }
            DomainEvent::UpgradeFailed(e) => {
                u.state = UpgradeState::Failed;
                u.failure_reason = Some(e.reason.clone());
            }
            DomainEvent::UpgradeCompleted(e) => {
                u.state = UpgradeState::Done;
                self.running = Some(RunningRelease {
                    version: e.release.clone(),
                    set_by: e.upgrade_id.clone(),
                    set_at: at,
                    changes: self.running.as_ref().map_or(0, |r| r.changes) + 1,
                });
            }
            DomainEvent::UpgradeCanceled(_) => {
                u.state = UpgradeState::Canceled;
                u.canceled_by = Some(ctx.principal.to_owned());
                u.canceled_at = Some(at);
            }
            DomainEvent::UpgradeRolledBack(e) => u.rolled_back_by = Some(e.by.clone()),
            DomainEvent::UpgradeAcknowledged(_) => u.acknowledged_at = Some(at),
            // Named, not a wildcard: a new event type must be decided here.
            DomainEvent::MemberAdmitted(_)
            | DomainEvent::JoinProgressReported { .. }
            | DomainEvent::MemberJoinCompleted { .. }
            | DomainEvent::MemberJoinFailed(_)
            | DomainEvent::RaftPeerRemoved { .. }
            | DomainEvent::RaftPeerReturned(_)
            | DomainEvent::RaftCleanupCompleted { .. }
            | DomainEvent::MemberJoinRetried { .. }
            | DomainEvent::MemberRemovalStarted(_)
            | DomainEvent::MemberDecommissioned { .. }
            | DomainEvent::MemberUpdated(_)
            | DomainEvent::AppliedGenerationReported { .. }
            | DomainEvent::JoinRequested(_)
            | DomainEvent::JoinRequestApproved { .. }
            | DomainEvent::JoinRequestRejected { .. }
            | DomainEvent::TokenIssued(_)
            | DomainEvent::ReleaseRegistered(_)
            | DomainEvent::RunningReleaseSet(_)
            | DomainEvent::UpgradePlanned(_)
            | DomainEvent::TokenRevoked(_)
            | DomainEvent::PolicyCreated(_)
            | DomainEvent::PrincipalPoliciesSet(_)
            | DomainEvent::ResourcePolicySet(_)
            | DomainEvent::NodeFactsReported(_)
            | DomainEvent::AlarmRaised(_)
            | DomainEvent::AlarmCleared(_)
            | DomainEvent::EventsLost(_)
            | DomainEvent::CheckpointForkFound(_)
            | DomainEvent::CheckpointForkAcknowledged(_)
            | DomainEvent::StorageVersionFinalized(_) => {}
        }
        if self.active.as_deref() == Some(id)
            && self.upgrades.get(id).is_some_and(|u| u.state.is_terminal())
        {
            self.active = None;
        }
    }
}

/// The upgrade an upgrade event belongs to.
pub fn upgrade_of(event: &DomainEvent) -> Option<&str> {
    use crate::event::About;
    match event.about() {
        About::Upgrade(id) => Some(id),
        About::Alarm { upgrade, .. } => upgrade,
        About::Member(_)
        | About::JoinRequest(_)
        | About::Token(_)
        | About::Policy(_)
        | About::Principal(_)
        | About::ResourcePolicy(_)
        | About::Release(_)
        | About::RunningRelease
        | About::Storage
        | About::Facts(_) => None,
    }
}
