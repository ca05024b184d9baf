//! The upgrade driver: the process manager that moves the active upgrade on
//! from the recorded facts (SPEC §5).
//!
//! It holds no state of its own. The writer tells it, after every commit,
//! whether a driver step is due (the domain decides that from the log), and
//! the driver answers with [`UpgradeCommand::Advance`], which the domain
//! decides under the log's write lock like any command: prechecks, the move
//! to the next state, the next node's roll turn. Every step is an event, so
//! a restarted service finds the same step due and carries on. Two replicas
//! may both send `Advance`; the second finds nothing due and appends nothing.

use std::time::Duration;

use stratum_domain::iam::SERVICE_PRINCIPAL;
use stratum_domain::upgrade::UpgradeCommand;
use stratum_domain::Command;

use crate::command::{CommandBus, CommandRequest};
use crate::raft::Backoff;

pub struct UpgradeDriver {
    bus: CommandBus,
    backoff: Backoff,
}

impl UpgradeDriver {
    pub fn new(bus: CommandBus, backoff: Backoff) -> Self {
        Self { bus, backoff }
    }

    pub async fn run(self) {
        let mut due = self.bus.upgrade_due();
        let mut delay = self.backoff.first;
        loop {
            let upgrade = due.borrow_and_update().clone();
            let Some(upgrade) = upgrade else {
                if due.changed().await.is_err() {
                    return; // the writer stopped
                }
                continue;
            };
            let req =
                CommandRequest::new(Command::Upgrade(UpgradeCommand::Advance), SERVICE_PRINCIPAL);
            match self.bus.execute(req).await {
                Ok(reply) if reply.status < 300 => {
                    delay = self.backoff.first;
                    if reply.position.is_some() {
                        tracing::info!(%upgrade, "upgrade moved on");
                    }
                }
                Ok(reply) => {
                    tracing::warn!(%upgrade, status = reply.status, body = %reply.body, "the upgrade driver's step was refused");
                    self.wait(&mut delay).await;
                }
                Err(e) => {
                    tracing::warn!(%upgrade, error = %e.message, "the upgrade driver could not write; retrying");
                    self.wait(&mut delay).await;
                }
            }
        }
    }

    async fn wait(&self, delay: &mut Duration) {
        tokio::time::sleep(*delay).await;
        *delay = (*delay * 2).min(self.backoff.max);
    }
}
