//! The host's commands: they open the database directly (`--database-url`),
//! for the host's operator and for auditors holding a copy of it.

use std::io::Write;
use std::sync::Arc;

use super::{Db, EventsCmd, TokenCmd};
use stratum_store::{
    self as store, redact_url, verify_chain, Access, EventStore, Verification, READ_CHUNK,
};

/// `events verify|import|export` against the database.
pub async fn events(command: EventsCmd) -> anyhow::Result<i32> {
    match command {
        EventsCmd::Import { file, db } => {
            let store = open(&db).await?;
            let n = import(store, &file).await?;
            println!("imported {n} events from {}", file.display());
            Ok(0)
        }
        EventsCmd::Verify {
            file,
            expect_head,
            allow_empty,
            key,
            checkpoint,
            witness_policy,
            db,
        } => {
            let what = if file.is_some() { "export" } else { "log" };
            let mut tree_behind = None;
            let verification = match file {
                Some(path) => {
                    let key = key.as_deref().map(crate::note::verifier).transpose()?;
                    let policy = witness_policy
                        .as_deref()
                        .map(crate::witness::Policy::load)
                        .transpose()?;
                    verify_file(
                        &path,
                        expect_head,
                        key.as_ref(),
                        checkpoint.as_deref(),
                        policy.as_ref(),
                    )?
                }
                None => {
                    let store = open_existing(&db, Access::ReadOnly).await?;
                    let v = verify_chain(&*store, expect_head).await?;
                    if let Verification::Intact { position, .. } = v {
                        tree_behind = stratum_store::tree::behind(&*store, position).await?;
                    }
                    v
                }
            };
            match verification {
                Verification::Intact { position: 0, .. } if !allow_empty => {
                    println!(
                    "broken at position 1: the {what} holds no events, and an empty {what} proves nothing \
                     (say --allow-empty to accept one)"
                );
                    Ok(1)
                }
                Verification::Intact { position, hash } => {
                    println!(
                        "verified: {position} events, head {position}:{}",
                        hex::encode(hash)
                    );
                    if let Some(from) = tree_behind {
                        // Derived data, not the log: said apart from a break.
                        eprintln!("{}", tree_behind_note(from));
                    }
                    Ok(0)
                }
                Verification::Broken { position, reason } => {
                    println!("broken at position {position}: {reason}");
                    Ok(1)
                }
            }
        }
        EventsCmd::Export { after, until, db } => {
            let store = open_existing(&db, Access::ReadOnly).await?;
            let mut out = std::io::stdout().lock();
            match export(&*store, after, until, &mut out).await {
                Err(Exported::Write(e)) if super::closed_pipe(&e) => Ok(0),
                Err(Exported::Write(e)) => Err(e.into()),
                Err(Exported::Read(e)) => Err(e),
                Ok(()) => Ok(0),
            }
        }
        EventsCmd::List { .. } | EventsCmd::Tail { .. } => Err(anyhow::anyhow!(
            "this command reads a running server: give --server URL (or STRATUM_SERVER)"
        )),
    }
}

/// Opens a database that must already exist: every command but `serve` and
/// `events import` reads or adds to a record someone made, and a typo in a
/// SQLite path must not answer about an empty database it just created.
pub async fn open_existing(db: &Db, access: Access) -> anyhow::Result<Arc<dyn EventStore>> {
    if db.database_url.starts_with("sqlite:") {
        use std::str::FromStr;
        let opts = sqlx::sqlite::SqliteConnectOptions::from_str(&db.database_url)
            .map_err(|e| cannot_open(db, e))?;
        let path = opts.get_filename();
        let in_memory = path.as_os_str().is_empty() || path.to_string_lossy().contains(":memory:");
        if !in_memory && !path.exists() {
            return Err(anyhow::anyhow!(
                "no database at {}: only `stratum serve` and `stratum events import` create one",
                path.display()
            ));
        }
    }
    store::connect_as(&db.database_url, access)
        .await
        .map_err(|e| cannot_open(db, e))
}

/// Opens the database, creating an SQLite file that does not exist yet.
pub async fn open(db: &Db) -> anyhow::Result<Arc<dyn EventStore>> {
    store::connect(&db.database_url)
        .await
        .map_err(|e| cannot_open(db, e))
}

fn cannot_open(db: &Db, e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("cannot open {}: {e}", redact_url(&db.database_url))
}

/// Prints a host command's answer, on standard output when it succeeded
/// and on standard error when not, and answers its exit code.
pub fn emit((code, out): (i32, String)) -> i32 {
    if code == 0 {
        println!("{out}");
    } else {
        eprintln!("{out}");
    }
    code
}

/// Who a change on the command line is recorded as: the host's user, as
/// `USER` names it (`root` when it is unset and the process runs as
/// root). A name that is not a principal's (a line break, a slash, empty)
/// is refused: the record names who did it, and nobody else.
fn host_principal() -> anyhow::Result<String> {
    let user = match std::env::var("USER") {
        Ok(user) => user,
        Err(std::env::VarError::NotPresent) if rustix::process::geteuid().is_root() => {
            "root".to_owned()
        }
        Err(_) => anyhow::bail!("USER is not set: it names who this change is recorded as"),
    };
    if !stratum_domain::iam::valid_principal_name(&user) {
        anyhow::bail!(
            "USER must be 1 to 63 letters, digits, '-', '_' or '.' to be recorded as who did it, not {user:?}"
        );
    }
    Ok(format!("host/{user}"))
}

/// Runs a `stratum token` command; answers the exit code and what to print:
/// `list` as `-o` says (a table by default, like the remote `tokens
/// list`); `create` and `revoke` the token record as JSON, with its secret
/// right after `create`, for scripts to keep.
pub async fn token(cmd: TokenCmd, format: super::output::Format) -> anyhow::Result<(i32, String)> {
    use stratum_domain::iam::IamCommand;
    use stratum_domain::Command;
    let (db, command) = match cmd {
        TokenCmd::List { db } => {
            let store = open_existing(&db, Access::ReadOnly).await?;
            let docs: Vec<serde_json::Value> = store
                .token_docs()
                .await?
                .into_iter()
                .filter_map(|(_, d)| serde_json::from_str(&d).ok())
                .collect();
            let shown = super::output::render(
                &serde_json::Value::Array(docs),
                super::output::Shape::Tokens,
                format,
            );
            return Ok((0, super::output::for_terminal(&shown).into_owned()));
        }
        TokenCmd::Create {
            principal,
            policies,
            expires_at,
            db,
        } => {
            let secret = crate::auth::new_secret();
            let cmd = IamCommand::IssueToken {
                token_id: crate::auth::new_id("tok"),
                principal: Some(principal),
                verifier: stratum_domain::iam::SecretVerifier::Sha256(crate::auth::secret_hash(
                    &secret,
                )),
                policies,
                expires_at,
            };
            (db, (cmd, Some(secret)))
        }
        TokenCmd::Revoke { id, db } => (db, (IamCommand::RevokeToken { token_id: id }, None)),
    };
    let (command, secret) = command;
    let reply = execute_on_host(
        &db,
        crate::command::CommandRequest::new(Command::Iam(command), host_principal()?),
    )
    .await?;
    let reply = match reply.committed() {
        Ok(c) => c,
        Err(refusal) => return Ok((1, refusal_json(refusal))),
    };
    let mut body = reply.json();
    if let (Some(secret), serde_json::Value::Object(m)) = (secret, &mut body) {
        // Shown once, on standard output; the service keeps only its hash.
        m.insert("token".into(), secret.into());
    }
    Ok((0, body.to_string()))
}

/// `stratum releases import --file`: a release from install media,
/// checked against the trusted keys and recorded with source `media`.
pub async fn import_release(
    file: &std::path::Path,
    db: &Db,
    keys: &super::release_keys::ReleaseKeyArgs,
) -> anyhow::Result<(i32, String)> {
    use stratum_domain::upgrade::{ReleaseSource, UpgradeCommand};
    let text =
        std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let manifest: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not a JSON manifest: {e}", file.display()))?;
    let keys = keys.keys()?;
    let req = crate::command::CommandRequest::new(
        stratum_domain::Command::Upgrade(UpgradeCommand::RegisterRelease {
            manifest: stratum_domain::release::SignedManifest::verify(manifest, &keys),
            source: ReleaseSource::Media,
        }),
        host_principal()?,
    );
    Ok(match execute_on_host(db, req).await?.committed() {
        Ok(c) => (0, c.body),
        Err(refusal) => (1, refusal_json(refusal)),
    })
}

/// A refusal as the one JSON error shape the API answers.
fn refusal_json(refusal: stratum_domain::Refusal) -> String {
    crate::error::ApiError::from(refusal)
        .body(&uuid::Uuid::now_v7().to_string())
        .to_string()
}

/// Runs one command on the host, against the database, through the same
/// command bus the API writes through.
async fn execute_on_host(
    db: &Db,
    req: crate::command::CommandRequest,
) -> anyhow::Result<crate::command::Outcome> {
    let bus =
        crate::command::CommandBus::start(open_existing(db, Access::ReadWrite).await?).await?;
    Ok(bus.execute(req).await?)
}

/// Reads an export line by line.
fn export_lines(
    path: &std::path::Path,
) -> anyhow::Result<impl Iterator<Item = (usize, std::io::Result<String>)>> {
    use std::io::BufRead;
    let f = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(std::io::BufReader::new(f).lines().enumerate())
}

/// Verifies an export offline (see [`stratum_domain::export::verify`]);
/// with a verifier key, it must end with a checkpoint signed by it of its
/// own size and root, and reach a checkpoint held earlier with its root;
/// with a witness policy, that checkpoint must carry a quorum of its
/// witnesses' cosignatures.
pub fn verify_file(
    path: &std::path::Path,
    recorded: Option<stratum_domain::log::RecordedHead>,
    key: Option<&signed_note::StandardVerifier>,
    held: Option<&std::path::Path>,
    witnesses: Option<&crate::witness::Policy>,
) -> anyhow::Result<Verification> {
    let held = match (key, held) {
        (Some(k), Some(p)) => {
            let note =
                std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            if let Some(policy) = witnesses {
                policy
                    .require(&note)
                    .map_err(|e| anyhow::anyhow!("--checkpoint {}: refused: {e}", p.display()))?;
            }
            Some(
                crate::checkpoint::open(&note, k)
                    .map_err(|e| anyhow::anyhow!("--checkpoint {}: {e}", p.display()))?,
            )
        }
        _ => None,
    };
    let lines = export_lines(path)?.map(|(_, line)| line);
    let check = stratum_domain::export::verify(lines, recorded, held.as_ref().map(|h| h.size))?;
    let Some(key) = key else {
        return Ok(check.verification);
    };
    let Verification::Intact { position, .. } = check.verification else {
        return Ok(check.verification);
    };
    let broken = |reason: String| Ok(Verification::Broken { position, reason });
    let Some(note) = check.checkpoint else {
        return broken("the export ends with no signed checkpoint (an export through a server that signs carries one)".into());
    };
    let signed = match crate::checkpoint::open(&note, key) {
        Ok(s) => s,
        Err(e) => return broken(format!("its checkpoint: {e}")),
    };
    if signed.size != position {
        // Where the two part: the first position one of them lacks.
        return Ok(Verification::Broken {
            position: signed.size.min(position) + 1,
            reason: format!(
                "its checkpoint is of a log of {} events, and the export holds {position}",
                signed.size
            ),
        });
    }
    if signed.root != check.root {
        return broken(format!(
            "the root of its {position} events is not the one its checkpoint signed: the events are not those the log signed"
        ));
    }
    if let Some(h) = held {
        match check.root_at {
            None => {
                return broken(format!(
                    "it holds {position} events, fewer than the {} of the checkpoint kept: the log was cut back",
                    h.size
                ))
            }
            Some(r) if r != h.root => {
                return broken(format!(
                    "its first {} events do not have the root of the checkpoint kept: the log was rewritten",
                    h.size
                ))
            }
            Some(_) => {}
        }
    }
    Ok(Verification::Intact {
        position,
        hash: match check.verification {
            Verification::Intact { hash, .. } => hash,
            Verification::Broken { .. } => unreachable!("intact above"),
        },
    })
}

/// Replays an export (up to `until`) into read models, without a database.
pub fn replay_file(
    path: &std::path::Path,
    until: Option<u64>,
) -> anyhow::Result<stratum_projections::ReadModels> {
    let mut rm = stratum_projections::ReadModels::default();
    rm.set_tracking(false);
    let mut v = stratum_domain::log::ChainVerifier::default();
    for (n, line) in export_lines(path)? {
        let line = line?;
        if stratum_domain::export::checkpoint_of(&line).is_some() {
            continue;
        }
        let e = stratum_domain::export::parse_line(n, &line).map_err(anyhow::Error::msg)?;
        if until.is_some_and(|u| e.position > u) {
            break;
        }
        v.check(&e)
            .map_err(|b| anyhow::anyhow!("line {}: the chain breaks: {b}", n + 1))?;
        rm.apply_recorded(&e)
            .map_err(|err| anyhow::anyhow!("line {}: {err}", n + 1))?;
    }
    Ok(rm)
}

/// Imports an export into an empty database: the events as they are
/// (positions, hashes), checked line by line, then every read model.
pub async fn import(store: Arc<dyn EventStore>, path: &std::path::Path) -> anyhow::Result<u64> {
    if store.head().await?.position != 0 {
        return Err(anyhow::anyhow!(
            "import needs an empty database; this one already has events"
        ));
    }
    let mut v = stratum_domain::log::ChainVerifier::default();
    let mut chunk = Vec::with_capacity(READ_CHUNK as usize);
    let mut lines = export_lines(path)?;
    loop {
        let next = lines.next();
        if let Some((n, line)) = next.as_ref().map(|(n, l)| (*n, l)) {
            let line = line.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
            // The checkpoint trailer: the events are what is loaded.
            if stratum_domain::export::checkpoint_of(line).is_none() {
                let e = stratum_domain::export::parse_line(n, line).map_err(anyhow::Error::msg)?;
                v.check(&e)
                    .map_err(|b| anyhow::anyhow!("line {}: the chain breaks: {b}", n + 1))?;
                chunk.push(e);
            }
        }
        if chunk.len() == READ_CHUNK as usize || (next.is_none() && !chunk.is_empty()) {
            let mut tx = store.begin_write().await?;
            tx.append(&chunk).await?;
            tx.commit().await?;
            chunk.clear();
        }
        if next.is_none() {
            break;
        }
    }
    let rm = crate::command::load(store.clone(), None).await?;
    store
        .replace_read_models(&rm.all_rows(), rm.state.position)
        .await?;
    Ok(v.position)
}

/// Why an export stopped: the log could not be read, or the output not
/// written.
#[derive(Debug)]
pub enum Exported {
    Read(anyhow::Error),
    Write(std::io::Error),
}

impl std::fmt::Display for Exported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exported::Read(e) => write!(f, "{e}"),
            Exported::Write(e) => write!(f, "{e}"),
        }
    }
}

/// Writes events as JSON lines, up to `until` or the head as the export
/// starts.
pub async fn export(
    store: &dyn EventStore,
    after: u64,
    until: Option<u64>,
    out: &mut impl Write,
) -> Result<(), Exported> {
    let until = match until {
        Some(u) => u,
        None => {
            store
                .head()
                .await
                .map_err(|e| Exported::Read(e.into()))?
                .position
        }
    };
    let mut at = after;
    while let Some((lines, last)) = store::export_chunk(store, at, until)
        .await
        .map_err(|e| Exported::Read(anyhow::Error::msg(e)))?
    {
        out.write_all(&lines).map_err(Exported::Write)?;
        at = last;
    }
    // The checkpoint a server signed at this size, if one did.
    if after == 0 {
        if let Ok(Some(c)) = store.signed_checkpoint().await {
            if c.size == until && until > 0 {
                out.write_all(&stratum_domain::export::checkpoint_line(&c.note))
                    .map_err(Exported::Write)?;
            }
        }
    }
    Ok(())
}

/// What `events verify` and `replay --check` say of a tree behind the log
/// (`stratum_store::tree::behind`): derived data, not a break.
pub(super) fn tree_behind_note(from: u64) -> String {
    format!(
        "note: the log's tree kept beside it covers the events before position {from}; \
         those from {from} on were appended by a build that does not keep it, and a \
         running replica of this build fills it in (the log itself is whole)"
    )
}
