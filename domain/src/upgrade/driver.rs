//! The upgrade driver's next step: what is due from the recorded facts
//! and the time, the settling after a restart, and the reboot warnings
//! and their alarms.

use chrono::{DateTime, Utc};

use crate::event::DomainEvent;
use crate::state::State;

use super::*;

impl Upgrade {
    /// The step the driver takes next, from the recorded facts and the
    /// time `now` (which comes in with the command); empty when the upgrade
    /// waits for someone, or for time.
    pub(super) fn next_step(&self, state: &State, now: DateTime<Utc>) -> Vec<DomainEvent> {
        let alarms = self.alarms_due(&state.upgrades, now);
        if !alarms.is_empty() {
            return alarms;
        }
        let id = || self.id.clone();
        let moved = |to| {
            DomainEvent::UpgradeStateChanged(UpgradeStateChanged {
                upgrade_id: id(),
                from: self.state,
                to,
            })
        };
        let settling = self.settled_at().is_some_and(|t| now < t);
        match self.state {
            UpgradeState::Planned => vec![moved(UpgradeState::Prechecking)],
            UpgradeState::Prechecking => {
                let prechecks = prechecks(state, self);
                let failed: Vec<String> = prechecks
                    .iter()
                    .filter(|p| !p.passed)
                    .map(|p| format!("{}: {}", p.name, p.message))
                    .collect();
                let checked = DomainEvent::UpgradePrechecked(UpgradePrechecked {
                    upgrade_id: id(),
                    prechecks,
                });
                if failed.is_empty() {
                    vec![checked, moved(UpgradeState::Fetching)]
                } else {
                    vec![
                        checked,
                        DomainEvent::UpgradeFailed(UpgradeFailed {
                            upgrade_id: id(),
                            reason: format!("Prechecks failed: {}", failed.join("; ")),
                        }),
                    ]
                }
            }
            UpgradeState::Fetching if self.not_finished(Phase::Fetch).is_empty() => {
                vec![moved(match self.mode {
                    UpgradeMode::Now => UpgradeState::BackingUp,
                    UpgradeMode::StageOnly => UpgradeState::Staged,
                })]
            }
            UpgradeState::BackingUp if self.backup.is_some() => {
                let mut events = vec![moved(UpgradeState::Rolling)];
                events.extend(self.turn_after(None));
                if self.nodes.is_empty() {
                    events.push(DomainEvent::UpgradeStateChanged(UpgradeStateChanged {
                        upgrade_id: id(),
                        from: UpgradeState::Rolling,
                        to: UpgradeState::Verifying,
                    }));
                }
                events
            }
            // After a restart the cluster settles before the next node's
            // turn, and before the end.
            UpgradeState::Rolling | UpgradeState::Verifying if settling => Vec::new(),
            UpgradeState::Rolling => match self.turn {
                Some(i) if self.nodes[i].finished(Phase::Roll) => match self.turn_after(Some(i)) {
                    Some(next) => vec![next],
                    None => vec![moved(UpgradeState::Verifying)],
                },
                Some(_) => Vec::new(),
                None => vec![moved(UpgradeState::Verifying)],
            },
            UpgradeState::Verifying if self.not_finished(Phase::Verify).is_empty() => {
                vec![DomainEvent::UpgradeCompleted(UpgradeCompleted {
                    upgrade_id: id(),
                    release: self.target_release.clone(),
                })]
            }
            _ => Vec::new(),
        }
    }

    /// When the settling after the last restart ends, if it has a length.
    pub fn settled_at(&self) -> Option<DateTime<Utc>> {
        let settle = i64::try_from(self.plan.settle_seconds).unwrap_or(i64::MAX);
        (settle > 0)
            .then_some(self.last_restart_at?)
            .and_then(|t| t.checked_add_signed(chrono::Duration::seconds(settle)))
    }

    /// The warnings on the record: `NodeRebootPending` for each node of a
    /// staged security upgrade that waits for its reboot, from the moment
    /// it was staged until the reboot or the end.
    pub fn warnings(&self) -> Vec<Warning> {
        let (Some(since), Some("security")) = (self.staged_at, self.plan.reboot_reason.as_deref())
        else {
            return Vec::new();
        };
        if self.state.is_terminal() {
            return Vec::new();
        }
        self.nodes
            .iter()
            .filter(|n| n.reboot_pending())
            .map(|n| Warning {
                code: NODE_REBOOT_PENDING.to_owned(),
                node_id: n.node_id.clone(),
                since,
                message: format!(
                    "{} waits for a security reboot ({}) since the upgrade was staged.",
                    n.node_id,
                    self.plan.cves.join(", ")
                ),
            })
            .collect()
    }

    /// When the reboot-pending alarm of a warning falls due.
    fn alarm_at(w: &Warning) -> DateTime<Utc> {
        w.since + chrono::Duration::days(REBOOT_ALARM_AFTER_DAYS)
    }

    /// The `node-reboot-pending` alarms due at `now` and not raised yet.
    fn alarms_due(&self, up: &Upgrades, now: DateTime<Utc>) -> Vec<DomainEvent> {
        self.warnings()
            .iter()
            .filter(|w| Self::alarm_at(w) <= now)
            .filter(|w| !self.alarm_raised(up, w))
            .map(|w| {
                DomainEvent::AlarmRaised(AlarmRaised {
                    name: NODE_REBOOT_PENDING_ALARM.to_owned(),
                    node_id: Some(w.node_id.clone()),
                    upgrade_id: Some(self.id.clone()),
                    message: format!(
                        "{} has waited {REBOOT_ALARM_AFTER_DAYS} days for its security reboot for upgrade {}.",
                        w.node_id, self.id
                    ),
                })
            })
            .collect()
    }

    /// The next moment after `now` a time-driven step may fall due: the
    /// end of the settling, or a reboot alarm. The driver asks again then
    /// (and at least once a minute). A moment already past is not one to
    /// wake for: what was due then has been decided.
    pub fn next_time_step(&self, up: &Upgrades, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let settle = self
            .settled_at()
            .filter(|_| matches!(self.state, UpgradeState::Rolling | UpgradeState::Verifying));
        let alarm = self
            .warnings()
            .iter()
            .filter(|w| !self.alarm_raised(up, w))
            .map(Self::alarm_at)
            .min();
        [settle, alarm]
            .into_iter()
            .flatten()
            .filter(|t| *t > now)
            .min()
    }

    /// Whether the reboot alarm of a warning was raised (an alarm is raised
    /// once per upgrade and node, and keeps its history when cleared).
    fn alarm_raised(&self, up: &Upgrades, w: &Warning) -> bool {
        let key = alarm_key(NODE_REBOOT_PENDING_ALARM, Some(&self.id), Some(&w.node_id));
        up.alarms.contains_key(&key)
    }

    fn turn_after(&self, i: Option<usize>) -> Option<DomainEvent> {
        let next = i.map_or(0, |i| i + 1);
        self.nodes.get(next).map(|n| {
            DomainEvent::UpgradeNodeTurnStarted(UpgradeNodeTurnStarted {
                upgrade_id: self.id.clone(),
                node_id: n.node_id.clone(),
            })
        })
    }
}
