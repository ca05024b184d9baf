//! The upgrade driver: the process manager that moves the active upgrade on
//! from the recorded facts (SPEC §5).
//!
//! It holds no state of its own. The writer tells it, after every commit,
//! whether a driver step is due (the domain decides that from the log), and
//! the driver answers with [`UpgradeCommand::Advance`], which the domain
//! decides under the log's write lock like any command: prechecks, the move
//! to the next state, the next node's roll turn. Every step is an event
//! whose causation is the position the step was found due at, so a
//! restarted service finds the same step due and carries on. Two replicas
//! may both send `Advance`; the second finds nothing due and appends
//! nothing.
//!
//! Time-driven steps (the end of a settling, the 7-day reboot alarm) are
//! decided at the command's time: the writer publishes when the next one
//! falls due, and the driver asks then, and at least once a minute.
//!
//! A replica learns what is due from its own writes. When other replicas
//! wrote since (the head moved past what this writer judged), the driver
//! sends one `Advance` every [`PROBE`] to look: so an upgrade moves on even
//! when the replica that recorded its last fact went away.

use std::time::Duration;
use tracing::Instrument;

use stratum_domain::iam::SERVICE_PRINCIPAL;
use stratum_domain::upgrade::UpgradeCommand;
use stratum_domain::{Command, ErrorCode};

use crate::backoff::Backoff;
use crate::command::{CommandBus, CommandRequest, Outcome};

/// How often a replica looks for a step other replicas' writes made due.
pub const PROBE: Duration = Duration::from_secs(2);
/// How often, at most, the driver asks whether a time-driven step (the end
/// of a settling, a reboot alarm) is due: once a minute, and sooner when
/// the domain says when one falls due.
pub const TICK: Duration = Duration::from_secs(60);

pub struct UpgradeDriver {
    bus: CommandBus,
    backoff: Backoff,
    tick: Duration,
}

impl UpgradeDriver {
    pub fn new(bus: CommandBus, backoff: Backoff) -> Self {
        Self {
            bus,
            backoff,
            tick: TICK,
        }
    }

    /// Asks at least every `tick` whether a time-driven step is due.
    pub fn with_tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    pub async fn run(self) {
        let mut due = self.bus.upgrade_due();
        let head = self.bus.head();
        let mut probe = tokio::time::interval(PROBE);
        probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut delay = self.backoff.first;
        loop {
            let now = due.borrow_and_update().clone();
            if let Some(upgrade) = now.upgrade {
                if self.advance(Some(&upgrade), now.at).await {
                    delay = self.backoff.first;
                } else {
                    tokio::time::sleep(delay).await;
                    delay = self.backoff.after(delay);
                }
                continue;
            }
            // A time-driven step falls due at `wake_at` (the writer's clock):
            // sleep until then, a minute at most, and ask.
            // A wake time already past is no wake time (what was due then
            // is decided); the tick still asks once a minute.
            let until = now
                .wake_at
                .and_then(|t| (t - self.bus.now()).to_std().ok())
                .map_or(self.tick, |d| d.min(self.tick));
            let time_step = tokio::time::sleep(until);
            tokio::select! {
                changed = due.changed() => {
                    if changed.is_err() {
                        return; // the writer stopped
                    }
                }
                _ = probe.tick() => {
                    let others_wrote = *head.borrow() > now.at;
                    if others_wrote {
                        self.advance(None, now.at).await;
                    }
                }
                _ = time_step, if now.active => {
                    if !self.advance(None, now.at).await {
                        tokio::time::sleep(delay).await;
                        delay = self.backoff.after(delay);
                    }
                }
            }
        }
    }

    /// Sends one `Advance`; answers whether it went through (a step taken,
    /// nothing due, or no active upgrade).
    async fn advance(&self, upgrade: Option<&str>, at: u64) -> bool {
        let mut req =
            CommandRequest::new(Command::Upgrade(UpgradeCommand::Advance), SERVICE_PRINCIPAL);
        req.meta.causation = Some(at);
        req.meta.correlation = upgrade.map(str::to_owned);
        let step = tracing::debug_span!("upgrade step", upgrade = upgrade.unwrap_or("-"), at);
        match self.bus.execute(req).instrument(step).await {
            Ok(Outcome::Committed(reply)) => {
                if reply.position.is_some() {
                    tracing::info!(upgrade = upgrade.unwrap_or("-"), "upgrade moved on");
                }
                true
            }
            Ok(Outcome::Refused(r)) if r.code == ErrorCode::NotFound => true,
            Ok(Outcome::Refused(r)) => {
                tracing::warn!(code = r.code.as_str(), message = %r.message, "the upgrade driver's step was refused");
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "the upgrade driver could not write; retrying");
                false
            }
        }
    }
}
