//! Recorded event logs and what replaying them must give.
//!
//! A recorded log lives in `logs/` in two forms: JSON lines (`.jsonl`, the
//! export format auditors read) and postcard (`.postcard`, the stored
//! envelope). Golden bytes of every stored event version live in
//! `fixtures/events/`. What this build's projections make of each recorded
//! log, entity by entity, is kept as its golden dump in `dumps/`, made at
//! the projections' versions. See `docs/replay-tests.md`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use stratum_domain::log::{decode_log, ChainVerifier, LogLine, Recorded};
use stratum_projections::dump::Dump;
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
        "membership": membership_summary(m),
        "members": records,
        "peers": peers(m),
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

/// Where the golden dump of a recorded log (`logs/NAME.jsonl`) is kept:
/// what this build's projections made of it when their versions were
/// last recorded.
pub fn golden_dump_path(name: &str) -> PathBuf {
    root().join("dumps").join(format!("{name}.jsonl"))
}

/// The names of the recorded logs (their `.jsonl` stems), sorted.
pub fn log_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("logs"))
        .expect("the recorded logs")
        .filter_map(|e| {
            let path = e.ok()?.path();
            (path.extension()? == "jsonl").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    names
}

/// How a fold's dump of a recorded log stands to its golden dump.
#[derive(Debug, PartialEq, Eq)]
pub enum Golden {
    /// The same read models, at the same versions.
    Same,
    /// The read models differ only where a projection's version moved (or
    /// only the versions moved): `bless` records the new dump.
    Bumped(String),
    /// A projection makes other read models at the version that made the
    /// golden ones: it needs a new version.
    ChangedWithoutBump(String),
    /// The golden dump is of a log of another length: the log was recorded
    /// again, and its golden dump is made again only once deleted.
    LogChanged(String),
}

/// Compares this build's dump of recorded log `name` with its golden one.
pub fn against_golden(name: &str, golden: &Dump, now: &Dump) -> Golden {
    use std::collections::BTreeMap;
    use stratum_projections::dump::{diff, projection_of};
    if golden.position != now.position {
        return Golden::LogChanged(format!(
            "the golden dump of `{name}` is of a log of {} events, and the log holds {}: a re-recorded log's \
             golden dump is made again by deleting it and running `cargo run -p stratum-replay-tests --example bless`",
            golden.position, now.position
        ));
    }
    let mut by_projection: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for d in diff(golden, now) {
        let p = projection_of(&d.kind).unwrap_or("(no projection)");
        let show = |v: &Option<Value>| v.as_ref().map_or("-".to_owned(), Value::to_string);
        by_projection.entry(p).or_default().push(format!(
            "{} {} {}{}: {} → {}",
            d.kind,
            d.id,
            d.change.as_str(),
            if d.field.is_empty() {
                String::new()
            } else {
                format!(" {}", d.field)
            },
            show(&d.before),
            show(&d.after),
        ));
    }
    let version = |dump: &Dump, p: &str| dump.versions.get(p).copied();
    let mut unbumped = Vec::new();
    let mut bumped = Vec::new();
    for (p, changes) in &by_projection {
        let listed: String = changes
            .iter()
            .take(20)
            .map(|c| format!("\n  {c}"))
            .collect();
        let more = changes.len().saturating_sub(20);
        let more = if more > 0 {
            format!("\n  ... and {more} more")
        } else {
            String::new()
        };
        if version(golden, p) == version(now, p) {
            unbumped.push(format!(
                "projection `{p}` (version {}) makes other read models of the recorded log `{name}` than its golden dump ({}):{listed}{more}\n\
                 A fold that changes its output needs a new version: bump the `version` of `{p}` in PROJECTIONS \
                 (projections/src/lib.rs), then `cargo run -p stratum-replay-tests --example bless` records the new \
                 dump (docs/replay-tests.md, \"Changing a projection\").",
                version(now, p).map_or("?".into(), |v| v.to_string()),
                golden_dump_path(name).display(),
            ));
        } else {
            bumped.push(format!("projection `{p}` changed:{listed}{more}"));
        }
    }
    if !unbumped.is_empty() {
        return Golden::ChangedWithoutBump(unbumped.join("\n"));
    }
    if golden.versions != now.versions || !bumped.is_empty() {
        bumped.push(format!(
            "the golden dump of `{name}` was made at versions {:?}, this build's projections are at {:?}: \
             `cargo run -p stratum-replay-tests --example bless` records it",
            golden.versions, now.versions
        ));
        return Golden::Bumped(bumped.join("\n"));
    }
    Golden::Same
}

/// What `bless` does with the golden dump of log `name` (its text, when
/// there is one) given this build's dump: `Ok(true)` writes it, `Ok(false)`
/// keeps it, and an error (a projection changed without a new version, or
/// a log recorded again) writes nothing and says why.
pub fn bless_dump(name: &str, golden: Option<&str>, now: &Dump) -> Result<bool, String> {
    let Some(text) = golden else {
        return Ok(true);
    };
    let golden =
        Dump::parse(text).map_err(|e| format!("{}: {e}", golden_dump_path(name).display()))?;
    match against_golden(name, &golden, now) {
        Golden::Same => Ok(false),
        Golden::Bumped(_) => Ok(true),
        Golden::ChangedWithoutBump(why) | Golden::LogChanged(why) => Err(why),
    }
}
