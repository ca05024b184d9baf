//! The log's storage version as the API shows it (`GET
//! /v1/admin/replicas`, `stratum replicas finalize`).

use serde_json::{json, Value};
use stratum_domain::storage::{StorageVersion, LEVELS, NEWEST_LEVEL};
use stratum_domain::stored::levels::{adds, writes_at};

/// The level the log is at, what it writes, its last finalization, and
/// the levels this build could finalize it at next.
pub fn storage_version_record(s: &StorageVersion) -> Value {
    let listed = |level: u16| -> Vec<String> {
        writes_at(level)
            .into_iter()
            .map(|(t, v)| format!("{t}/{v}"))
            .collect()
    };
    json!({
        "level": s.level,
        "newestLevel": NEWEST_LEVEL,
        "writes": listed(s.level),
        "finalized": s.finalized.as_ref().map(|f| json!({
            "position": f.position,
            "at": f.at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            "by": f.by,
            "settings": f.settings,
            "replicas": f.replicas,
        })),
        "pending": LEVELS
            .iter()
            .filter(|l| l.number > s.level)
            .map(|l| json!({
                "level": l.number,
                "adds": adds(l.number).iter().map(|(t, v)| format!("{t}/{v}")).collect::<Vec<_>>(),
                "summary": l.summary,
            }))
            .collect::<Vec<_>>(),
    })
}
