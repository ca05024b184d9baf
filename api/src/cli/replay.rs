//! `stratum replay`: the read models folded again from the log, by this
//! build's projections: checked against the stored rows (`--check`),
//! written over them (`--rebuild`), digested (`--digest`), written out
//! entity by entity (`--dump`), or compared with what another build made
//! (`--diff`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use stratum_projections::dump::{self, Dump};
use stratum_projections::ReadModels;
use stratum_store::{Access, EventStore, StoredReadModels};

use super::host::{open_existing, replay_file, tree_behind_note};
use super::output::{self, Format, Shape};
use super::Db;

/// What `stratum replay` is asked to do.
#[derive(Debug)]
pub enum Mode {
    Check,
    Rebuild,
    Digest,
    /// Write the dump to this file (`-`: standard output).
    Dump(PathBuf),
    /// Compare with a dump, or with the database's tables.
    Diff {
        against: Option<PathBuf>,
    },
}

/// `stratum replay`.
pub async fn run(
    mode: Mode,
    until: Option<u64>,
    file: Option<PathBuf>,
    db: Db,
    format: Format,
) -> anyhow::Result<i32> {
    match mode {
        Mode::Digest => {
            let rm = fold(file.as_deref(), &db, until).await?;
            println!("{}", rm.membership_digest());
            Ok(0)
        }
        Mode::Dump(to) => {
            let rm = fold(file.as_deref(), &db, until).await?;
            let dump = rm.dump();
            write_dump(&to, &dump.to_text())?;
            if to != Path::new("-") {
                eprintln!(
                    "wrote {} entities at position {} to {}",
                    dump.entities.len(),
                    dump.position,
                    to.display()
                );
            }
            Ok(0)
        }
        Mode::Diff { against } => diff(against, until, file, db, format).await,
        Mode::Check => check(db).await,
        Mode::Rebuild => rebuild(db).await,
    }
}

/// The read models folded by this build from the database's log or an
/// export, up to `until`, which must be a position of the log.
async fn fold(file: Option<&Path>, db: &Db, until: Option<u64>) -> anyhow::Result<ReadModels> {
    let rm = fold_to(file, db, until).await?;
    if let Some(until) = until.filter(|u| *u > rm.state.position) {
        // As the API answers 404 for an `asOf` past the head.
        return Err(anyhow::anyhow!(
            "--until {until} is past the end of the log, which ends at position {}",
            rm.state.position
        ));
    }
    Ok(rm)
}

/// [`fold`], to `until` or the end of the log, whichever comes first.
async fn fold_to(file: Option<&Path>, db: &Db, until: Option<u64>) -> anyhow::Result<ReadModels> {
    Ok(match file {
        Some(path) => replay_file(path, until)?,
        None => {
            let store = open_existing(db, Access::ReadOnly).await?;
            replay_with_progress(store, until, "folding").await?
        }
    })
}

fn write_dump(to: &Path, text: &str) -> anyhow::Result<()> {
    if to == Path::new("-") {
        use std::io::IsTerminal;
        let mut out = std::io::stdout().lock();
        // Canonical JSON keeps format characters as they are; on a
        // terminal they are shown escaped (as JSON escapes them), never
        // obeyed. A pipe or a file gets the canonical bytes.
        if out.is_terminal() {
            out.write_all(output::for_terminal(text).as_bytes())?;
        } else {
            out.write_all(text.as_bytes())?;
        }
        return Ok(out.flush()?);
    }
    // Written beside, then renamed: a dump is never half there.
    crate::note::keep(to, text).map_err(|e| anyhow::anyhow!("{}: {e}", to.display()))
}

/// The database's read-model tables as a dump.
pub fn dump_of_tables(stored: &StoredReadModels) -> Dump {
    let docs = stored.docs.iter().map(|(kind_id, doc)| {
        let (kind, id) = kind_id.split_once('/').unwrap_or((kind_id, ""));
        (kind, id, doc.as_str())
    });
    let members = stored
        .members
        .iter()
        .map(|(id, doc)| (dump::MEMBER, id.as_str(), doc.as_str()));
    let requests = stored
        .join_requests
        .iter()
        .map(|(id, doc)| (dump::JOIN_REQUEST, id.as_str(), doc.as_str()));
    let tokens = stored
        .tokens
        .iter()
        .map(|(id, doc)| (dump::TOKEN, id.as_str(), doc.as_str()));
    let entities: Vec<(&str, &str, &str)> =
        members.chain(requests).chain(tokens).chain(docs).collect();
    let versions = versions_of_rows(&entities, &stored.other_versions);
    Dump::of_rows(entities, stored.generation, stored.checkpoint, versions)
}

/// The projection version the rows of each projection are of: this
/// build's where none is of another, the other one where all are of it;
/// a projection whose rows are of several versions is left out.
fn versions_of_rows(
    entities: &[(&str, &str, &str)],
    others: &[(String, String, u32)],
) -> std::collections::BTreeMap<String, u32> {
    let mut out = std::collections::BTreeMap::new();
    for p in stratum_projections::PROJECTIONS {
        let of_p = |kind: &str| dump::projection_of(kind) == Some(p.name);
        let rows = entities.iter().filter(|(k, _, _)| of_p(k)).count();
        let other: std::collections::BTreeSet<u32> = others
            .iter()
            .filter(|(k, _, _)| of_p(k))
            .map(|(_, _, v)| *v)
            .collect();
        let n_other = others.iter().filter(|(k, _, _)| of_p(k)).count();
        match (other.len(), other.first()) {
            (0, _) => {
                out.insert(p.name.to_owned(), p.version);
            }
            (1, Some(v)) if n_other == rows => {
                out.insert(p.name.to_owned(), *v);
            }
            _ => {}
        }
    }
    out
}

/// `replay --diff`: this build's fold against a dump or the tables, at the
/// position the other side stands at.
async fn diff(
    against: Option<PathBuf>,
    until: Option<u64>,
    file: Option<PathBuf>,
    db: Db,
    format: Format,
) -> anyhow::Result<i32> {
    let (before, what) = match &against {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("--against {}: {e}", path.display()))?;
            let dump = Dump::parse(&text)
                .map_err(|e| anyhow::anyhow!("--against {}: {e}", path.display()))?;
            (dump, format!("the read models in {}", path.display()))
        }
        None => {
            // The rows and the position they stand at, read in one
            // snapshot: servers may go on writing meanwhile.
            let store = open_existing(&db, Access::ReadOnly).await?;
            let stored = store.read_models().await?;
            (dump_of_tables(&stored), "the database's read models".into())
        }
    };
    if let Some(u) = until.filter(|u| *u != before.position) {
        return Err(anyhow::anyhow!(
            "--until {u}: {what} stand at position {}, and a diff compares read models at one position (write a dump at {u} with `replay --dump FILE --until {u}` and give it with --against)",
            before.position
        ));
    }
    let after = fold_to(file.as_deref(), &db, Some(before.position))
        .await?
        .dump();
    if after.position != before.position {
        return Err(anyhow::anyhow!(
            "{what} stand at position {}, and the log folded ends at position {}",
            before.position,
            after.position
        ));
    }
    let moved: Vec<String> = after
        .versions
        .iter()
        .filter_map(|(name, v)| match before.versions.get(name) {
            Some(old) if old != v => Some(format!("{name} {old} → {v}")),
            _ => None,
        })
        .collect();
    if !moved.is_empty() {
        eprintln!("projection versions: {}", moved.join(", "));
    }
    let differences = dump::diff(&before, &after);
    if differences.is_empty() {
        return Ok(0);
    }
    let rows = serde_json::Value::Array(differences.iter().map(|d| d.to_json()).collect());
    let shown = output::render(&rows, Shape::Diff, format);
    println!("{}", output::for_terminal(&shown));
    Ok(1)
}

/// `replay --check`: the stored rows and the log's tree against a replay.
/// Like with like: rows another projection version made are not compared
/// with this build's fold, and are counted.
async fn check(db: Db) -> anyhow::Result<i32> {
    let store = open_existing(&db, Access::ReadOnly).await?;
    // A check compares the rows with a replay to the position they stand
    // at, read in one snapshot: servers may go on writing meanwhile.
    let mut stored = store.read_models().await?;
    let head = stored.checkpoint;
    let rm = replay_with_progress(store.clone(), Some(head), "checking").await?;
    let mut expected = StoredReadModels::from_changes(&rm.all_rows(), rm.state.position);
    let others = set_aside_other_versions(&mut stored, &mut expected);
    let mut drift = drift(&stored, &expected);
    // The Merkle tree kept beside the log is checked the same way.
    if let Err((position, why)) = stratum_store::tree::check_rows(&*store, head).await? {
        drift.push(format!("the log's tree at position {position}: {why}"));
    }
    if drift.is_empty() {
        println!(
            "read models and the log's tree match a replay of {} events",
            rm.state.position
        );
        if let Some(note) = others {
            eprintln!("{note}");
        }
        if let Some(from) = stratum_store::tree::behind(&*store, head).await? {
            eprintln!("{}", tree_behind_note(from));
        }
        Ok(0)
    } else {
        for d in &drift {
            println!("drift: {d}");
        }
        if let Some(note) = others {
            eprintln!("{note}");
        }
        Ok(1)
    }
}

/// Takes the rows of other projection versions out of both sides of a
/// check, and says how many there were, by projection and version. So are
/// the rows this fold makes that no stored row stands for yet, of a
/// projection whose rows are of another version: rows that version did
/// not make (a new kind, say).
fn set_aside_other_versions(
    stored: &mut StoredReadModels,
    expected: &mut StoredReadModels,
) -> Option<String> {
    use std::collections::{BTreeMap, BTreeSet};
    if stored.other_versions.is_empty() {
        return None;
    }
    let others = std::mem::take(&mut stored.other_versions);
    let mut by: BTreeMap<(&str, u32), usize> = BTreeMap::new();
    let mut aside: BTreeSet<(&str, String)> = BTreeSet::new();
    for (kind, id, version) in &others {
        let p = dump::projection_of(kind).unwrap_or("an unknown projection");
        *by.entry((p, *version)).or_default() += 1;
        let key = match kind.as_str() {
            dump::MEMBER | dump::JOIN_REQUEST | dump::TOKEN => id.clone(),
            _ => format!("{kind}/{id}"),
        };
        aside.insert((kind.as_str(), key));
    }
    let behind: BTreeSet<&str> = by.keys().map(|(p, _)| *p).collect();
    for ((rows, kind_of), (made, _)) in tables(stored).into_iter().zip(tables(expected)) {
        let set_aside = |k: &String| aside.contains(&(kind_of(k), k.clone()));
        let there: BTreeSet<String> = rows.iter().map(|(k, _)| k.clone()).collect();
        let of_behind =
            |k: &String| dump::projection_of(kind_of(k)).is_some_and(|p| behind.contains(p));
        made.retain(|(k, _)| !set_aside(k) && (there.contains(k) || !of_behind(k)));
        rows.retain(|(k, _)| !set_aside(k));
    }
    let listed: Vec<String> = by
        .iter()
        .map(|((p, v), n)| {
            let ours = stratum_projections::versions::version_of(p).unwrap_or(0);
            format!("{n} of {p} version {v} (this build folds {ours})")
        })
        .collect();
    Some(format!(
        "not compared: rows of other projection versions, {}; a server of this build writes them again once no replica of those versions is live",
        listed.join(", ")
    ))
}

/// The four tables of read-model rows, each with the entity kind of a row
/// by its key (a document's key is `kind/id`).
type Table<'a> = (&'a mut Vec<(String, String)>, fn(&str) -> &str);

fn tables(s: &mut StoredReadModels) -> [Table<'_>; 4] {
    fn member(_: &str) -> &str {
        dump::MEMBER
    }
    fn join_request(_: &str) -> &str {
        dump::JOIN_REQUEST
    }
    fn token(_: &str) -> &str {
        dump::TOKEN
    }
    fn doc(key: &str) -> &str {
        key.split_once('/').map_or(key, |(kind, _)| kind)
    }
    [
        (&mut s.members, member),
        (&mut s.join_requests, join_request),
        (&mut s.tokens, token),
        (&mut s.docs, doc),
    ]
}

/// `replay --rebuild`: every row written again from a replay, while
/// servers may go on writing: the replay is folded up to the log's head
/// again under the log's lock, and the rows written in that write, so
/// what a server committed meanwhile is in them.
async fn rebuild(db: Db) -> anyhow::Result<i32> {
    let store = open_existing(&db, Access::ReadWrite).await?;
    let mut rm = replay_with_progress(store.clone(), None, "rebuilding").await?;
    let mut tx = store.begin_write().await?;
    let written = async {
        for e in tx.events_after(rm.state.position).await? {
            rm.apply_recorded(&e).map_err(|err| {
                stratum_store::StoreError::Corrupt(format!("position {}: {err}", e.position))
            })?;
        }
        tx.clear_read_models().await?;
        tx.write_changes(&rm.all_rows(), rm.state.position).await
    }
    .await;
    match written {
        Ok(()) => tx.commit().await?,
        Err(e) => {
            let _ = tx.rollback().await;
            return Err(e.into());
        }
    }
    let rows = stratum_store::tree::rebuild(&*store).await?;
    println!(
        "rebuilt the read models from {} events, and the log's tree ({rows} rows)",
        rm.state.position
    );
    Ok(0)
}

async fn replay_with_progress(
    store: Arc<dyn EventStore>,
    until: Option<u64>,
    what: &str,
) -> anyhow::Result<ReadModels> {
    let head = store.head().await?.position;
    let bar = progress(until.map_or(head, |u| u.min(head)), what);
    let moved = bar.clone();
    let rm = crate::command::replay(store, until, move |p| moved.set_position(p)).await?;
    bar.finish_and_clear();
    Ok(rm)
}

fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} events ({per_sec}, {eta} left)")
            .expect("a valid template"),
    );
    bar.set_message(what.to_owned());
    bar
}

/// Where stored read models differ from a rebuild.
pub fn drift(stored: &StoredReadModels, rebuilt: &StoredReadModels) -> Vec<String> {
    let mut out = Vec::new();
    let mut rows = |kind: &str, a: &[(String, String)], b: &[(String, String)]| {
        let a: std::collections::BTreeMap<_, _> = a.iter().cloned().collect();
        let b: std::collections::BTreeMap<_, _> = b.iter().cloned().collect();
        for (k, v) in &b {
            match a.get(k) {
                None => out.push(format!("{kind} {k} is missing")),
                Some(s) if s != v => out.push(format!("{kind} {k} differs")),
                _ => {}
            }
        }
        for k in a.keys().filter(|k| !b.contains_key(*k)) {
            out.push(format!("{kind} {k} should not exist"));
        }
    };
    rows("member", &stored.members, &rebuilt.members);
    rows(
        "join request",
        &stored.join_requests,
        &rebuilt.join_requests,
    );
    rows("token", &stored.tokens, &rebuilt.tokens);
    rows("document", &stored.docs, &rebuilt.docs);
    if stored.generation != rebuilt.generation {
        out.push(format!(
            "generation is {}, a replay says {}",
            stored.generation, rebuilt.generation
        ));
    }
    if stored.checkpoint != rebuilt.checkpoint {
        out.push(format!(
            "checkpoint is {}, the log is at {}",
            stored.checkpoint, rebuilt.checkpoint
        ));
    }
    out
}
