//! The alarms the service keeps (cleared by an upgrade's end, kept by a
//! replica's view of what is wrong now, raised by a loss of events) and
//! the checkpoint forks.

use crate::error::Refusal;
use crate::event::DomainEvent;
use crate::state::{Decision, Subject};
use crate::upgrade::parse::ForkAcknowledgement;

use super::*;

impl Upgrades {
    /// The alarms a decision's events clear, in one place for every
    /// command: a node's reboot clears its reboot alarm, and an upgrade's
    /// end clears every alarm of the upgrade.
    pub(super) fn alarms_cleared_by(&self, events: &[DomainEvent]) -> Vec<DomainEvent> {
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

    /// Records a loss of acknowledged events once: the first replica to
    /// report the loss that begins at `first` raises its alarm, and the
    /// others' reports of the same loss find it raised.
    pub(super) fn record_lost_events(&self, lost: &EventsLost) -> Result<Decision, Refusal> {
        let key = events_lost_key(lost.first);
        let subject = Subject::Alarm(key.clone());
        if self.alarms.contains_key(&key) {
            return Ok(Decision::none(subject));
        }
        Ok(Decision {
            events: vec![DomainEvent::EventsLost(lost.clone())],
            subject,
        })
    }

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
    pub(super) fn keep_replica_settings_alarm(&self, differing: &[String]) -> Decision {
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
    pub(super) fn keep_witness_alarm(&self, replica: &str, failing: &[String]) -> Decision {
        self.keep_listing_alarm(LOG_WITNESS_FAILING_ALARM, Some(replica), failing, true, |list| {
            format!(
                "Witnesses of the log's checkpoints fail to cosign what the replica {replica} submits: {list}. Commits go on; auditors that require these witnesses refuse the checkpoints until a quorum cosigns again. Why each fails: stratum_witness_failures_total by reason, and the service's log (STRATUM_LOG_WITNESS_POLICY names the witnesses)."
            )
        })
    }

    /// Records a fork once: every replica that finds the log forked from
    /// the same signed checkpoint reports the same fork.
    pub(super) fn record_checkpoint_fork(
        &self,
        fork: &CheckpointForkFound,
    ) -> Result<Decision, Refusal> {
        let subject = Subject::Alarm(checkpoint_fork_key(fork.signed_size, &fork.signed_root));
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
    /// the log recorded.
    pub(super) fn acknowledge_checkpoint_fork(
        &self,
        ack: ForkAcknowledgement<'_>,
    ) -> Result<Decision, Refusal> {
        let ForkAcknowledgement {
            signed_size: size,
            signed_root: root,
            reason,
        } = ack;
        let subject = Subject::Alarm(checkpoint_fork_key(size, root));
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
