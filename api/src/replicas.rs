//! This replica in the registry (`stratum_replicas`, an expand step of the
//! store): what it is, its heartbeat, and the registry as the API, the CLI
//! and the metrics show it.
//!
//! A replica says what it is so that replicas of two builds on one
//! database (an upgrade of stratum itself) can be told apart: its build
//! (version and commit), the stored event versions it reads and the ones
//! it writes, the schema versions it runs on, and its process managers'
//! settings (without secrets) and their digest. Its heartbeat is written
//! in the database's time, so a host's clock does not make it look silent.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use stratum_store::{EventStore, ReplicaRow, Replicas, StoreError};
use tokio_util::sync::CancellationToken;

use crate::checkpoint::LogKey;
use crate::raft::RaftAdapters;
use stratum_domain::upgrade::UpgradeConfig;

/// What a replica's process managers act on.
pub struct Managers<'a> {
    pub adapters: &'a RaftAdapters,
    pub upgrade: &'a UpgradeConfig,
    pub log_key: Option<&'a LogKey>,
}

/// How often a replica says it is alive.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// A replica not heard from for this long is silent: three heartbeats.
pub const SILENT_AFTER: Duration = Duration::from_secs(15);

/// What the process managers act on, as this replica is configured:
/// each raft's adapter and what it calls, how often the rafts are read
/// again, the upgrade driver's settling and backup target, and the
/// checkpoint signer's key name and origin. Never a secret: adapters say
/// what they call without credentials, the backup target is redacted.
pub fn manager_settings(cfg: &Managers<'_>) -> Value {
    let mut raft = serde_json::Map::new();
    for r in stratum_domain::membership::Raft::ALL {
        let a = cfg.adapters.get(r);
        raft.insert(
            r.as_str().to_owned(),
            json!({"adapter": a.name(), "calls": a.target()}),
        );
    }
    raft.insert(
        "recheck".into(),
        json!(humantime::format_duration(cfg.adapters.recheck).to_string()),
    );
    let backup = cfg.upgrade.backup_target.as_ref().map(|t| {
        json!({
            "target": stratum_store::redact_url(&t.url),
            "recipient": t.recipient,
        })
    });
    json!({
        "raft": raft,
        "upgrade": {"settleSeconds": cfg.upgrade.settle_seconds, "backup": backup},
        "signer": cfg.log_key.map(|k| json!({"key": k.name, "origin": k.origin})),
    })
}

/// The row this replica registers: `id` new at every start.
pub fn describe(cfg: &Managers<'_>, listen: &str, schema: (i64, i64)) -> ReplicaRow {
    let settings = stratum_domain::release::canonical(&manager_settings(cfg));
    let versions = serde_json::to_string(&stratum_domain::stored::newest_versions())
        .expect("a map of names to numbers");
    ReplicaRow {
        id: uuid::Uuid::now_v7().to_string(),
        host: host_name(),
        listen: listen.to_owned(),
        version: crate::build::VERSION.to_owned(),
        commit: crate::build::commit(),
        // What it reads, and the newest it writes once the log's storage
        // level allows (before that it writes what the level does: the
        // list's `storage.writes`).
        reads: versions.clone(),
        writes: versions,
        schema_min: schema.0,
        schema_max: schema.1,
        settings_digest: hex::encode(Sha256::digest(settings.as_bytes())),
        settings,
        started_at: 0,
        heartbeat_at: 0,
        stopped_at: None,
        projections: stratum_projections::versions::this_build(),
    }
}

/// The host's name, as the kernel has it: `uname(2)`, which a sandbox
/// that hides `/proc/sys` (the unit's `ProcSubset=pid`) still answers.
fn host_name() -> String {
    let name = rustix::system::uname();
    Some(name.nodename().to_string_lossy().trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Beats every [`HEARTBEAT`] until `stop`, registering again if its row
/// was removed; a failed beat is logged and tried again at the next.
pub async fn heartbeat(store: Arc<dyn EventStore>, row: ReplicaRow, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(HEARTBEAT) => {}
            () = stop.cancelled() => return,
        }
        let beat = match store.replica_heartbeat(&row.id).await {
            Ok(true) => Ok(()),
            Ok(false) => store.register_replica(&row).await,
            Err(e) => Err(e),
        };
        if let Err(e) = beat {
            tracing::warn!(error = %e, "the replica's heartbeat was not written; trying again");
        }
    }
}

/// Whether a replica is serving, silent or stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplicaState {
    Live,
    Silent,
    Stopped,
}

impl ReplicaState {
    pub const ALL: [ReplicaState; 3] = [
        ReplicaState::Live,
        ReplicaState::Silent,
        ReplicaState::Stopped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaState::Live => "live",
            ReplicaState::Silent => "silent",
            ReplicaState::Stopped => "stopped",
        }
    }

    pub fn of(row: &ReplicaRow, now: i64) -> Self {
        if row.stopped_at.is_some() {
            ReplicaState::Stopped
        } else if now - row.heartbeat_at > SILENT_AFTER.as_micros() as i64 {
            ReplicaState::Silent
        } else {
            ReplicaState::Live
        }
    }
}

/// The registry as the API shows it: each replica with its state, and
/// whether it is the one answering (`this`).
pub fn records(all: &Replicas, this: &str) -> Vec<Value> {
    let time = |micros: i64| {
        stratum_domain::log::micros_to_time(micros)
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    };
    let parsed = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
    all.rows
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "host": r.host,
                "listen": r.listen,
                "version": r.version,
                "commit": r.commit,
                "reads": parsed(&r.reads),
                "writes": parsed(&r.writes),
                "schema": {"min": r.schema_min, "max": r.schema_max},
                "settings": parsed(&r.settings),
                "settingsDigest": r.settings_digest,
                "startedAt": time(r.started_at),
                "heartbeatAt": time(r.heartbeat_at),
                "stoppedAt": r.stopped_at.map(time),
                "state": ReplicaState::of(r, all.now),
                "this": r.id == this,
            })
        })
        .collect()
}

/// Registers this replica (at start).
pub async fn register(store: &dyn EventStore, row: &ReplicaRow) -> Result<(), StoreError> {
    store.register_replica(row).await?;
    tracing::info!(
        replica = %row.id,
        version = %row.version,
        commit = %row.commit,
        settings = %row.settings_digest,
        "registered as a replica"
    );
    // Replicas that would act differently: said at start, where the
    // operator who started this one looks.
    for other in others_differing(&store.replicas().await?, row) {
        tracing::warn!(
            replica = %other.id,
            host = %other.host,
            listen = %other.listen,
            settings = %other.settings_digest,
            "a live replica's process-manager settings differ from this one's \
             (`stratum replicas list` shows both): give every replica the same settings"
        );
    }
    Ok(())
}

/// The live replicas other than the one whose id is `me`.
pub fn live_others<'a>(all: &'a Replicas, me: &'a str) -> impl Iterator<Item = &'a ReplicaRow> {
    all.rows
        .iter()
        .filter(move |r| r.id != me && ReplicaState::of(r, all.now) == ReplicaState::Live)
}

/// The live replicas other than `me` whose process-manager settings are
/// not `me`'s.
pub fn others_differing<'a>(all: &'a Replicas, me: &'a ReplicaRow) -> Vec<&'a ReplicaRow> {
    live_others(all, &me.id)
        .filter(|r| r.settings_digest != me.settings_digest)
        .collect()
}

/// Which process-manager settings are agreed, and by what: the last
/// finalization recorded them in the log; while it records none, they are
/// those of the live replica running longest (what the cluster has run
/// with), this one when it is alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreement {
    /// The agreed settings' digest.
    pub digest: String,
    /// What made them the agreed ones, for a person.
    pub by: String,
}

impl Agreement {
    pub fn of(
        all: &Replicas,
        storage: &stratum_domain::storage::StorageVersion,
        me: &ReplicaRow,
    ) -> Self {
        if let Some(f) = &storage.finalized {
            return Agreement {
                digest: f.settings.clone(),
                by: format!("the finalization at position {}", f.position),
            };
        }
        let senior = all
            .rows
            .iter()
            .filter(|r| ReplicaState::of(r, all.now) == ReplicaState::Live || r.id == me.id)
            .min_by_key(|r| (r.started_at, r.id.clone()));
        match senior {
            Some(r) if r.id != me.id => Agreement {
                digest: r.settings_digest.clone(),
                by: format!(
                    "replica {} on {} (stratum {} {}), the live replica running longest, as the log records no finalization",
                    r.id, r.host, r.version, r.commit
                ),
            },
            _ => Agreement {
                digest: me.settings_digest.clone(),
                by: "this replica, the live replica running longest".into(),
            },
        }
    }
}

/// The gate of the process managers that act through the agreed settings
/// (the raft cleanup): this replica acts only while its settings are the
/// agreed ones. One whose settings differ raises the
/// `replica-settings-differ` alarm (an error in its log, the
/// `stratum_replica_settings_differ` metric, and the replica list) and
/// never acts on them.
#[derive(Clone)]
pub struct Acting {
    store: Arc<dyn EventStore>,
    bus: crate::command::CommandBus,
    me: Arc<ReplicaRow>,
    differs: Arc<std::sync::atomic::AtomicBool>,
}

/// The alarm of replicas with settings other than the agreed ones.
pub use stratum_domain::upgrade::REPLICA_SETTINGS_DIFFER_ALARM as SETTINGS_DIFFER_ALARM;

/// The live replicas whose settings are not the agreed ones, each with
/// what the alarm says of it.
pub fn differing<'a>(all: &'a Replicas, agreed: &Agreement) -> Vec<(&'a ReplicaRow, String)> {
    all.rows
        .iter()
        .filter(|r| {
            ReplicaState::of(r, all.now) == ReplicaState::Live && r.settings_digest != agreed.digest
        })
        .map(|r| {
            let said = format!(
                "replica {} on {} (stratum {} {}) has settings {} where {} agreed on {}",
                r.id,
                r.host,
                r.version,
                r.commit,
                stratum_domain::storage::short(&r.settings_digest),
                agreed.by,
                stratum_domain::storage::short(&agreed.digest)
            );
            (r, said)
        })
        .collect()
}

/// Keeps the `replica-settings-differ` alarm in the log as the registry
/// stands, every [`HEARTBEAT`] until `stop`: raised while a live replica's
/// settings are not the agreed ones, cleared once none are. Every replica
/// of this build runs it (the domain records each change once), so the
/// alarm is kept whichever replicas run.
pub async fn keep_settings_alarm(acting: Acting, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(HEARTBEAT) => {}
            () = stop.cancelled() => return,
        }
        let Ok(all) = acting.store.replicas().await else {
            continue; // the gate says so, and fails closed
        };
        let rm = acting.bus.published();
        let agreed = Agreement::of(&all, &rm.state.storage, &acting.me);
        let differing: Vec<String> = differing(&all, &agreed)
            .into_iter()
            .map(|(_, said)| said)
            .collect();
        let key = stratum_domain::upgrade::alarm_key(SETTINGS_DIFFER_ALARM, None, None);
        let raised = rm
            .state
            .upgrades
            .alarms
            .get(&key)
            .is_some_and(|a| a.cleared_at.is_none());
        if differing.is_empty() != raised {
            continue; // the log says so already
        }
        let req = crate::command::CommandRequest::new(
            stratum_domain::Command::Upgrade(
                stratum_domain::upgrade::UpgradeCommand::KeepReplicaSettingsAlarm { differing },
            ),
            stratum_domain::iam::SERVICE_PRINCIPAL,
        );
        if let Err(e) = acting.bus.execute(req).await {
            tracing::warn!(error = %e, "the replica-settings-differ alarm was not kept; trying again");
        }
    }
}

impl Acting {
    pub fn new(
        store: Arc<dyn EventStore>,
        bus: crate::command::CommandBus,
        me: Arc<ReplicaRow>,
    ) -> Self {
        Self {
            store,
            bus,
            me,
            differs: Default::default(),
        }
    }

    /// Whether this replica's settings differ from the agreed ones (as
    /// last checked).
    pub fn differs(&self) -> bool {
        self.differs.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The digest of this replica's settings.
    pub fn digest(&self) -> &str {
        &self.me.settings_digest
    }

    /// Whether this replica may act now. A registry it cannot read is a
    /// no: it fails closed.
    pub async fn may_act(&self) -> bool {
        let all = match self.store.replicas().await {
            Ok(all) => all,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the replica registry; the raft cleanup waits");
                return false;
            }
        };
        let storage = self.bus.published().state.storage.clone();
        let agreed = Agreement::of(&all, &storage, &self.me);
        let differs = agreed.digest != self.me.settings_digest;
        let was = self
            .differs
            .swap(differs, std::sync::atomic::Ordering::Relaxed);
        if differs && !was {
            tracing::error!(
                alarm = SETTINGS_DIFFER_ALARM,
                settings = %self.me.settings_digest,
                agreed = %agreed.digest,
                by = %agreed.by,
                "this replica's process-manager settings differ from the agreed ones: it does not run the raft cleanup. \
                 Start it with the agreed settings (stratum replicas list shows each replica's), \
                 or, to change them, give every replica the new ones and run stratum replicas finalize"
            );
        } else if was && !differs {
            tracing::info!(
                alarm = SETTINGS_DIFFER_ALARM,
                "this replica's settings are the agreed ones again"
            );
        }
        !differs
    }
}

#[async_trait::async_trait]
impl crate::raft::Agreed for Acting {
    async fn may_act(&self) -> bool {
        Acting::may_act(self).await
    }

    fn settings_digest(&self) -> &str {
        self.digest()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratum_domain::storage::{Finalization, StorageVersion};

    /// A registry row: `started` and `beat` in seconds of the database's
    /// clock, `now` being 100.
    fn row(id: &str, settings: &str, started: i64, beat: i64, stopped: bool) -> ReplicaRow {
        ReplicaRow {
            id: id.into(),
            host: "cp-1".into(),
            listen: "127.0.0.1:8080".into(),
            version: "0.1.0".into(),
            commit: "c0ffee".into(),
            reads: "{}".into(),
            writes: "{}".into(),
            schema_min: 6,
            schema_max: 6,
            settings: "{}".into(),
            settings_digest: settings.into(),
            started_at: started * 1_000_000,
            heartbeat_at: beat * 1_000_000,
            stopped_at: stopped.then_some(beat * 1_000_000),
            projections: String::new(),
        }
    }

    fn registry(rows: Vec<ReplicaRow>) -> Replicas {
        Replicas {
            now: 100 * 1_000_000,
            rows,
        }
    }

    fn finalized(settings: &str) -> StorageVersion {
        StorageVersion {
            level: 2,
            finalized: Some(Finalization {
                position: 42,
                at: chrono::DateTime::UNIX_EPOCH,
                by: "user/ops-lead".into(),
                settings: settings.into(),
                replicas: Vec::new(),
            }),
        }
    }

    #[test]
    fn before_any_finalization_the_live_replica_running_longest_is_agreed() {
        let me = row("r-new", "bbb", 50, 99, false);
        let all = registry(vec![
            // Started first, but stopped, and silent: neither counts.
            row("r-gone", "zzz", 1, 20, true),
            row("r-hung", "yyy", 2, 60, false),
            row("r-old", "aaa", 10, 98, false),
            me.clone(),
        ]);
        let agreed = Agreement::of(&all, &StorageVersion::default(), &me);
        assert_eq!(agreed.digest, "aaa");
        assert!(agreed.by.contains("r-old"), "{}", agreed.by);
        // Alone, a replica agrees with itself (even before its first beat
        // is read back).
        let alone = Agreement::of(
            &registry(vec![row("r-gone", "zzz", 1, 20, true)]),
            &StorageVersion::default(),
            &me,
        );
        assert_eq!(alone.digest, "bbb");
    }

    #[test]
    fn after_a_finalization_its_settings_are_agreed_whoever_runs_longest() {
        let me = row("r-new", "bbb", 50, 99, false);
        let all = registry(vec![row("r-old", "aaa", 10, 98, false), me.clone()]);
        let agreed = Agreement::of(&all, &finalized("bbb"), &me);
        assert_eq!(agreed.digest, "bbb");
        assert!(agreed.by.contains("position 42"), "{}", agreed.by);
        // A replica restarted with other settings than those recorded
        // is not agreed with, however long it has run.
        let restarted = row("r-new", "ccc", 1, 99, false);
        assert_eq!(
            Agreement::of(&all, &finalized("bbb"), &restarted).digest,
            "bbb"
        );
    }
}
