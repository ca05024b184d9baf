//! The alarms upgrades and the service raise, and their keys: one alarm
//! of a name per upgrade and node, raised and perhaps cleared by events.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The code of the warning a staged security upgrade raises per node.
pub const NODE_REBOOT_PENDING: &str = "NodeRebootPending";
/// The alarm raised when that warning lasts [`REBOOT_ALARM_AFTER_DAYS`].
pub const NODE_REBOOT_PENDING_ALARM: &str = "node-reboot-pending";
/// Raised when acknowledged events were lost in a database failover: one
/// alarm per loss, keyed by its first lost position.
pub const LOG_EVENTS_LOST_ALARM: &str = "log-events-lost";

/// The alarm of a log that forks from the newest signed checkpoint.
pub const CHECKPOINT_FORK_ALARM: &str = "log-checkpoint-fork";

/// The alarm of live replicas whose process-manager settings are not the
/// agreed ones (an upgrade of stratum itself, `crate::storage`).
pub const REPLICA_SETTINGS_DIFFER_ALARM: &str = "replica-settings-differ";

/// The alarm of witnesses that fail to cosign the log's checkpoints
/// (`STRATUM_LOG_WITNESS_POLICY`).
pub const LOG_WITNESS_FAILING_ALARM: &str = "log-witness-failing";

/// The key of the fork from the signed checkpoint of `size` and `root`
/// (hex): of its alarm, and in [`Upgrades::checkpoint_forks`]. Replicas that
/// remembered different checkpoints report different forks.
pub fn checkpoint_fork_key(size: u64, root: &str) -> String {
    format!("{CHECKPOINT_FORK_ALARM}/{size}/{root}")
}

/// The key of the alarm of the loss that begins at `first`.
pub fn events_lost_key(first: u64) -> String {
    format!("{LOG_EVENTS_LOST_ALARM}/{first}")
}
pub const REBOOT_ALARM_AFTER_DAYS: i64 = 7;

/// The alarm raised when a raft's own listing names a member again after
/// its removal from that raft was recorded; cleared when the removal is
/// recorded again.
pub const RAFT_PEER_RETURNED_ALARM: &str = "raft-peer-returned";

/// The key of the alarm of `node_id`'s return to `raft`: one per raft and
/// member.
pub fn raft_peer_returned_key(raft: crate::membership::Raft, node_id: &str) -> String {
    format!("{RAFT_PEER_RETURNED_ALARM}/{}/{node_id}", raft.as_str())
}

/// An alarm, raised and perhaps cleared: both are events.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alarm {
    pub name: String,
    pub node_id: Option<String>,
    pub upgrade_id: Option<String>,
    pub message: String,
    pub raised_at: DateTime<Utc>,
    pub cleared_at: Option<DateTime<Utc>>,
    /// The position of its raise (lists sort by it).
    pub raised_position: u64,
}

/// An alarm's key: one alarm of a name per upgrade and node.
pub fn alarm_key(name: &str, upgrade_id: Option<&str>, node_id: Option<&str>) -> String {
    format!(
        "{name}/{}/{}",
        upgrade_id.unwrap_or("-"),
        node_id.unwrap_or("-")
    )
}
