//! Recorded event logs and what replaying them must give.
//!
//! A recorded log lives in `logs/` in two forms: JSON lines (`.jsonl`, the
//! export format auditors read) and postcard (`.postcard`, the stored
//! envelope). Golden bytes of every stored event version live in
//! `fixtures/events/`. See `docs/replay-tests.md`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use stratum_domain::log::{decode_log, ChainVerifier, LogLine, Recorded};
use stratum_projections::{
    doc_kind, member_records, membership_summary, peers, JoinRequestRecord, ReadModels,
};

/// This crate's folder.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Reads a recorded log in either form.
pub fn read_log(path: &Path) -> Result<Vec<Recorded>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("postcard") => decode_log(&bytes).map_err(|e| e.to_string()),
        Some("jsonl") => std::str::from_utf8(&bytes)
            .map_err(|e| e.to_string())?
            .lines()
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str::<LogLine>(l)
                    .map_err(|e| format!("line {}: {e}", i + 1))?
                    .to_recorded()
                    .map_err(|e| format!("line {}: {e}", i + 1))
            })
            .collect(),
        _ => Err(format!("{}: not a .jsonl or .postcard log", path.display())),
    }
}

/// Checks the hash chain of a whole log.
pub fn verify(events: &[Recorded]) -> Result<(), String> {
    let mut v = ChainVerifier::default();
    events
        .iter()
        .try_for_each(|e| v.check(e))
        .map_err(|b| format!("the chain breaks at position {}: {b:?}", b.position()))
}

/// Every read model as deterministic JSON: what a snapshot compares.
pub fn render(rm: &ReadModels) -> Value {
    let m = &rm.state.membership;
    let records = member_records(m);
    let join_requests: Vec<JoinRequestRecord> = m
        .join_requests
        .values()
        .map(JoinRequestRecord::from)
        .collect();
    let rows = rm.all_rows();
    let doc =
        |d: &str| -> Value { serde_json::from_str(d).expect("read model documents are JSON") };
    let tokens: Vec<Value> = rows.tokens.iter().map(|t| doc(&t.doc)).collect();
    let mut docs = rows.docs.clone();
    docs.sort_by(|a, b| (a.kind, a.sort_key, &a.id).cmp(&(b.kind, b.sort_key, &b.id)));
    let of_kind = |kind: &str| -> Vec<Value> {
        docs.iter()
            .filter(|d| d.kind == kind)
            .map(|d| doc(&d.doc))
            .collect()
    };
    let running = of_kind(doc_kind::CLUSTER).pop().unwrap_or(Value::Null);
    json!({
        "position": rm.state.position,
        "membership": membership_summary(m.generation, &records),
        "members": records,
        "peers": peers(m.generation, &records),
        "joinRequests": join_requests,
        "tokens": tokens,
        "releases": of_kind(doc_kind::RELEASE),
        "runningRelease": running,
        "upgrades": of_kind(doc_kind::UPGRADE),
        "alarms": of_kind(doc_kind::ALARM),
        "facts": of_kind(doc_kind::FACTS),
    })
}

/// Replays a log through every projection.
pub fn replay(events: &[Recorded]) -> ReadModels {
    ReadModels::replay(events).expect("every event of a recorded log decodes")
}
