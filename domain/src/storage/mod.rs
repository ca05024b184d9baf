//! The log's storage version: which stored versions and event types a build
//! may write, recorded in the log itself (issue 32).
//!
//! Replicas of two builds can share one database during an upgrade of
//! stratum itself. The older build decodes only the stored versions it was
//! built with, so the newer one must not write anything else until every
//! replica can read it. The formats come in numbered levels ([`LEVELS`]):
//! level 1 is everything written before levels existed; each later level
//! adds stored versions and event types. A log that records no
//! finalization is at level 1. `StorageVersionFinalized` moves the log to
//! a level from its own position on; it is the first event of that level,
//! so a build that cannot read the level cannot read the event either, and
//! refuses the database naming it.
//!
//! Finalizing is refused, naming them, while a live replica cannot read the
//! level's formats or runs process managers with other settings than the
//! one finalizing: it records the agreed settings, the only ones the
//! process managers act on (like CockroachDB's cluster version, which a new
//! binary runs at the old value until the upgrade is finalized, and
//! Kubernetes' storage version, which changes only when every API server
//! can decode it).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

mod decide;

/// One level of the log's formats: what it adds to the one before it.
#[derive(Clone, Copy, Debug)]
pub struct Level {
    pub number: u16,
    /// What the level brings, for a person.
    pub summary: &'static str,
}

/// Every level, oldest first. A level is never changed once released: a
/// new stored version or event type is marked with a new level in the
/// event table of [`crate::stored`], and the level is named here (what
/// each adds is read from the table: `stored::levels::adds`).
pub const LEVELS: &[Level] = &[
    Level {
        number: 1,
        summary: "the formats written before the storage version was recorded",
    },
    Level {
        number: 2,
        summary: "the finalization event itself; raft removals name the digest of the \
                  settings they were made with",
    },
];

/// The level a log is at when it records no finalization.
pub const BASE_LEVEL: u16 = 1;

/// The newest level this build writes (and reads).
pub const NEWEST_LEVEL: u16 = LEVELS[LEVELS.len() - 1].number;

/// The event type of a finalization.
pub const FINALIZED_TYPE: &str = "StorageVersionFinalized";

/// The stream finalizations are appended to.
pub const STORAGE_STREAM: &str = "storage-version";

/// The log moved to `level` from this event's position on. It says which
/// versions may be written from here (so an auditor with another build
/// reads what changed), the digest of the process-manager settings every
/// live replica agreed on, and the replicas that were live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageVersionFinalized {
    pub level: u16,
    /// `Type/version` of the newest version of each type writable from here.
    pub writes: Vec<String>,
    /// The digest of the agreed process-manager settings.
    pub settings: String,
    /// The live replicas that agreed, by id.
    pub replicas: Vec<String>,
}

/// A live replica as the registry shows it, for the finalization's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaView {
    pub id: String,
    pub host: String,
    pub version: String,
    pub commit: String,
    /// The newest stored version of each type it reads.
    pub reads: BTreeMap<String, u16>,
    pub settings: String,
}

impl ReplicaView {
    /// Who the replica is, for a refusal: id, host and build.
    pub fn named(&self) -> String {
        format!(
            "{} on {} (stratum {} {})",
            self.id, self.host, self.version, self.commit
        )
    }
}

/// Finalize the log's storage version at `level` (this build's newest when
/// `None`), with the settings of the replica asking (`settings`, a digest),
/// given every live replica and every session of a build that does not
/// register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finalize {
    pub level: Option<u16>,
    pub settings: String,
    pub replicas: Vec<ReplicaView>,
    /// Sessions of builds from before the replica registry, which register
    /// nothing and read only level 1 (as the store sees them: `pid N from
    /// ADDR since TIME`).
    pub unregistered: Vec<String>,
}

/// When and by whom the log was finalized at its level.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finalization {
    pub position: u64,
    pub at: DateTime<Utc>,
    pub by: String,
    pub settings: String,
    pub replicas: Vec<String>,
}

/// The log's storage version as folded from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageVersion {
    pub level: u16,
    /// The last finalization; `None` while the log records none.
    pub finalized: Option<Finalization>,
}

impl Default for StorageVersion {
    fn default() -> Self {
        Self {
            level: BASE_LEVEL,
            finalized: None,
        }
    }
}

impl StorageVersion {
    /// The agreed process-manager settings, once a finalization recorded
    /// them.
    pub fn agreed_settings(&self) -> Option<&str> {
        self.finalized.as_ref().map(|f| f.settings.as_str())
    }
}

/// The first 12 hex digits of a digest, as people compare them.
pub fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// Whether this build reads the log past a finalization: `Err` names the
/// finalization when it moved the log to a level newer than this build's
/// (every build decodes the finalization itself, whose shape never
/// changes, so the refusal can say what happened).
pub fn readable_after(level: u16, position: u64) -> Result<(), String> {
    if level <= NEWEST_LEVEL {
        return Ok(());
    }
    Err(format!(
        "the log was finalized at storage level {} (StorageVersionFinalized at position {position}); \
         this build reads levels up to {NEWEST_LEVEL}: run a build that reads level {}, \
         as the upgrade that finalized it did. A finalized log is not taken back to an earlier build \
         except by restoring a backup taken before the finalization",
        level, level
    ))
}
