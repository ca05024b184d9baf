//! The `stratum` command line: `serve`, `events verify|export|import`,
//! `replay`, `token create|list|revoke`.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::command::READ_CHUNK;
use crate::listener::{self, ConnArgs};
use crate::raft::RaftArgs;
use crate::service::{self, ServiceConfig};
use crate::store::{
    self, redact_url, verify_chain, Access, EventStore, StoredReadModels, Verification,
};
use stratum_domain::release::TrustedKeys;

#[derive(Parser, Debug)]
#[command(
    name = "stratum",
    version,
    about = "The control plane's record of cluster membership and upgrades."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
    #[command(flatten)]
    pub log: LogArgs,
}

/// How the binary logs (to standard error), for every command.
#[derive(Args, Debug, Clone)]
pub struct LogArgs {
    /// What is logged: a level (`info`, `debug`...) or `tracing` directives
    /// such as `info,stratum_api=debug`.
    #[arg(long, global = true, env = "STRATUM_LOG", default_value = "info")]
    pub log_level: String,
    /// `text` (coloured only on a terminal) or `json` (one object per line).
    #[arg(long, global = true, env = "STRATUM_LOG_FORMAT", default_value = "text",
          value_parser = ["text", "json"])]
    pub log_format: String,
}

impl LogArgs {
    /// Installs the process's logger, or says why the level is not one.
    pub fn install(&self) -> Result<(), String> {
        use std::io::IsTerminal;
        let filter = tracing_subscriber::EnvFilter::try_new(&self.log_level)
            .map_err(|e| format!("STRATUM_LOG (--log-level) {:?}: {e}", self.log_level))?;
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        if self.log_format == "json" {
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .init();
        } else {
            builder.with_ansi(std::io::stderr().is_terminal()).init();
        }
        Ok(())
    }
}

#[derive(Args, Debug, Clone)]
pub struct Db {
    /// `sqlite://stratum.db` (created if missing) or `postgres://...`.
    #[arg(
        long,
        env = "STRATUM_DATABASE_URL",
        default_value = "sqlite://stratum.db"
    )]
    pub database_url: String,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Runs the HTTP API.
    Serve {
        #[arg(long, env = "STRATUM_LISTEN", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Where Prometheus scrapes `GET /metrics` (no token; bind it to
        /// the monitoring network). Off unless set.
        #[arg(long, env = "STRATUM_METRICS_LISTEN")]
        metrics_listen: Option<SocketAddr>,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        raft: Box<RaftArgs>,
        #[command(flatten)]
        upgrade: UpgradeArgs,
        #[command(flatten)]
        conn: Box<ConnArgs>,
    },
    /// Registers releases from the host.
    Releases {
        #[command(subcommand)]
        command: ReleasesCmd,
    },
    /// Manages API tokens from the host, with direct access to the
    /// database (for the host's operator, e.g. to recover access).
    Token {
        #[command(subcommand)]
        command: TokenCmd,
    },
    /// Reads the event log.
    Events {
        #[command(subcommand)]
        command: EventsCmd,
    },
    /// Rebuilds the read models from the log, checks them against it, or
    /// prints the digest of the membership read model at a position.
    Replay {
        /// Compares a rebuild with the stored read models; exits 1 on drift.
        #[arg(long, group = "mode")]
        check: bool,
        /// Rebuilds every read model from position 0.
        #[arg(long, group = "mode")]
        rebuild: bool,
        /// Prints the digest of the membership read model (what the API's
        /// `GET /v1/admin/cluster/membership?asOf=P` answers).
        #[arg(long, group = "mode")]
        digest: bool,
        /// With --digest: replay only up to this position.
        #[arg(long, requires = "digest")]
        until: Option<u64>,
        /// With --digest: replay an export instead of the database.
        #[arg(long, requires = "digest")]
        file: Option<std::path::PathBuf>,
        #[command(flatten)]
        db: Db,
    },
}

/// How upgrades are planned: recorded in each plan.
#[derive(Args, Debug, Clone)]
pub struct UpgradeArgs {
    /// How long the cluster settles after a node's restart before the next
    /// node's turn or the end, e.g. `60s`.
    #[arg(long, env = "STRATUM_UPGRADE_SETTLE", default_value = "60s")]
    pub upgrade_settle: String,
    /// Where upgrade backups go when one is configured, e.g.
    /// `s3://backups/stratum`; without it backups stay on the node.
    #[arg(long, env = "STRATUM_BACKUP_TARGET")]
    pub backup_target: Option<String>,
    /// The recipient backups to the target are encrypted to (an age or
    /// PGP recipient).
    #[arg(long, env = "STRATUM_BACKUP_RECIPIENT")]
    pub backup_recipient: Option<String>,
}

impl UpgradeArgs {
    pub fn config(&self) -> anyhow_like::Result<stratum_domain::upgrade::UpgradeConfig> {
        let settle = humantime::parse_duration(self.upgrade_settle.trim()).map_err(|e| {
            anyhow_like::Error(format!(
                "STRATUM_UPGRADE_SETTLE must be a duration such as 60s or 2m, not `{}`: {e}",
                self.upgrade_settle
            ))
        })?;
        let given = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let target = given(&self.backup_target);
        let recipient = given(&self.backup_recipient);
        if target.is_none() && recipient.is_some() {
            return Err(anyhow_like::Error(
                "STRATUM_BACKUP_RECIPIENT is set without STRATUM_BACKUP_TARGET".into(),
            ));
        }
        Ok(stratum_domain::upgrade::UpgradeConfig {
            backup_target: target
                .map(|url| stratum_domain::upgrade::BackupTarget { url, recipient }),
            settle_seconds: settle.as_secs(),
        })
    }
}

#[derive(Subcommand, Debug)]
pub enum ReleasesCmd {
    /// Registers a release manifest loaded from install media (its
    /// `sourceKind` is `media`); the signature is checked against the
    /// trusted release keys like any registration.
    Import {
        #[arg(long)]
        file: std::path::PathBuf,
        #[command(flatten)]
        db: Db,
    },
}

#[derive(Subcommand, Debug)]
pub enum TokenCmd {
    /// Creates a token and prints it, with its secret, once.
    Create {
        /// `user/<name>`, `node/<nodeId>` or `stratum-installer`.
        #[arg(long)]
        principal: String,
        /// A managed or custom policy name (repeat for more).
        #[arg(long = "policy")]
        policies: Vec<String>,
        /// RFC 3339: when the token stops working.
        #[arg(long)]
        expires_at: Option<chrono::DateTime<chrono::Utc>>,
        #[command(flatten)]
        db: Db,
    },
    /// Lists the tokens (never their secrets), one JSON object a line.
    List {
        #[command(flatten)]
        db: Db,
    },
    /// Revokes a token: it stops working on the next request.
    Revoke {
        id: String,
        #[command(flatten)]
        db: Db,
    },
}

#[derive(Subcommand, Debug)]
pub enum EventsCmd {
    /// Recomputes the hash chain; exits 1 naming the first bad position.
    /// With `--file`, checks an export offline, without any database.
    Verify {
        /// An export (`stratum events export`) to check instead of the database.
        #[arg(long)]
        file: Option<std::path::PathBuf>,
        /// A head written down earlier, as `POSITION:HASH` (what a previous
        /// verify printed): the log must still reach it with that hash, so
        /// a cut tail or a log rewritten from the start is caught.
        #[arg(long, value_name = "POSITION:HASH")]
        expect_head: Option<stratum_domain::log::RecordedHead>,
        /// Accept a log or export with no events (a new installation's);
        /// without it an empty one exits 1, as it proves nothing.
        #[arg(long)]
        allow_empty: bool,
        #[command(flatten)]
        db: Db,
    },
    /// Loads an export into an empty database, keeping positions and
    /// hashes, then builds the read models from it.
    Import {
        #[arg(long)]
        file: std::path::PathBuf,
        #[command(flatten)]
        db: Db,
    },
    /// Writes the log as JSON lines, payloads decoded, to standard output.
    Export {
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long)]
        until: Option<u64>,
        #[command(flatten)]
        db: Db,
    },
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

/// Opens a database that must already exist: every command but `serve` and
/// `events import` reads or adds to a record someone made, and a typo in a
/// SQLite path must not answer about an empty database it just created.
async fn open_existing(db: &Db, access: Access) -> anyhow_like::Result<Arc<dyn EventStore>> {
    if db.database_url.starts_with("sqlite:") {
        use std::str::FromStr;
        let opts = sqlx::sqlite::SqliteConnectOptions::from_str(&db.database_url)
            .map_err(|e| cannot_open(db, e))?;
        let path = opts.get_filename();
        let in_memory = path.as_os_str().is_empty() || path.to_string_lossy().contains(":memory:");
        if !in_memory && !path.exists() {
            return Err(anyhow_like::Error(format!(
                "no database at {}: only `stratum serve` and `stratum events import` create one",
                path.display()
            )));
        }
    }
    store::connect_as(&db.database_url, access)
        .await
        .map_err(|e| cannot_open(db, e))
}

/// Opens the database, creating an SQLite file that does not exist yet.
async fn open(db: &Db) -> anyhow_like::Result<Arc<dyn EventStore>> {
    store::connect(&db.database_url)
        .await
        .map_err(|e| cannot_open(db, e))
}

fn cannot_open(db: &Db, e: impl std::fmt::Display) -> anyhow_like::Error {
    anyhow_like::Error(format!("cannot open {}: {e}", redact_url(&db.database_url)))
}

/// Prints a host command's answer, on standard output when it succeeded
/// and on standard error when not, and answers its exit code.
fn emit((code, out): (i32, String)) -> i32 {
    if code == 0 {
        println!("{out}");
    } else {
        eprintln!("{out}");
    }
    code
}

/// A tiny error type for the CLI: a message for a person.
pub mod anyhow_like {
    #[derive(Debug)]
    pub struct Error(pub String);
    impl std::fmt::Display for Error {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl<E: std::error::Error> From<E> for Error {
        fn from(e: E) -> Self {
            Error(e.to_string())
        }
    }
    pub type Result<T> = std::result::Result<T, Error>;
}

/// Runs a command; answers the process exit code.
pub async fn run(cli: Cli) -> anyhow_like::Result<i32> {
    match cli.command {
        Cmd::Serve {
            listen,
            metrics_listen,
            db,
            raft,
            upgrade,
            conn,
        } => serve(listen, metrics_listen, &db, &raft, &upgrade, &conn).await,
        Cmd::Releases {
            command: ReleasesCmd::Import { file, db },
        } => Ok(emit(import_release(&file, &db).await?)),
        Cmd::Token { command } => Ok(emit(token(command).await?)),
        Cmd::Events {
            command: EventsCmd::Import { file, db },
        } => {
            let store = open(&db).await?;
            let n = import(store, &file).await?;
            println!("imported {n} events from {}", file.display());
            Ok(0)
        }
        Cmd::Events {
            command:
                EventsCmd::Verify {
                    file,
                    expect_head,
                    allow_empty,
                    db,
                },
        } => {
            let what = if file.is_some() { "export" } else { "log" };
            let verification = match file {
                Some(path) => verify_file(&path, expect_head)?,
                None => {
                    verify_chain(&*open_existing(&db, Access::ReadOnly).await?, expect_head).await?
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
                    Ok(0)
                }
                Verification::Broken { position, reason } => {
                    println!("broken at position {position}: {reason}");
                    Ok(1)
                }
            }
        }
        Cmd::Events {
            command: EventsCmd::Export { after, until, db },
        } => {
            let store = open_existing(&db, Access::ReadOnly).await?;
            export(&*store, after, until, &mut std::io::stdout().lock()).await?;
            Ok(0)
        }
        Cmd::Replay {
            digest: true,
            until,
            file,
            db,
            ..
        } => {
            let rm = match file {
                Some(path) => replay_file(&path, until)?,
                None => {
                    crate::command::load(open_existing(&db, Access::ReadOnly).await?, until).await?
                }
            };
            println!("{}", rm.membership_digest());
            Ok(0)
        }
        Cmd::Replay { check, rebuild, .. } if !check && !rebuild => Err(anyhow_like::Error(
            "say --check, --rebuild or --digest".into(),
        )),
        Cmd::Replay { check, db, .. } => {
            let access = if check {
                Access::ReadOnly
            } else {
                Access::ReadWrite
            };
            let store = open_existing(&db, access).await?;
            let head = store.head().await?.position;
            let bar = progress(head, if check { "checking" } else { "rebuilding" });
            let moved = bar.clone();
            let rm =
                crate::command::replay(store.clone(), None, move |p| moved.set_position(p)).await?;
            bar.finish_and_clear();
            let rebuilt = rm.all_rows();
            if check {
                let stored = store.read_models().await?;
                let expected = StoredReadModels::from_changes(&rebuilt, rm.state.position);
                let drift = drift(&stored, &expected);
                if drift.is_empty() {
                    println!("read models match a replay of {} events", rm.state.position);
                    Ok(0)
                } else {
                    for d in &drift {
                        println!("drift: {d}");
                    }
                    Ok(1)
                }
            } else {
                store
                    .replace_read_models(&rebuilt, rm.state.position)
                    .await?;
                println!("rebuilt the read models from {} events", rm.state.position);
                Ok(0)
            }
        }
    }
}

async fn serve(
    listen: SocketAddr,
    metrics_listen: Option<SocketAddr>,
    db: &Db,
    raft: &RaftArgs,
    upgrade: &UpgradeArgs,
    conn: &ConnArgs,
) -> anyhow_like::Result<i32> {
    // Every setting is read before anything starts: a malformed one stops
    // the start, naming its variable.
    let adapters = raft.adapters()?;
    let backoff = raft.backoff()?;
    let (mut listener_cfg, mut limits) = conn.config()?;
    let cfg = ServiceConfig {
        bootstrap_token: bootstrap_token_from_env()?,
        release_keys: release_keys_from_env()?,
        adapters,
        backoff,
        upgrade: upgrade.config()?,
        ..Default::default()
    };
    // The address is taken before anything is printed or the database is
    // opened, so a busy port stops the start before a bootstrap token is
    // issued and shown.
    let socket = listener::bind(listen, listener_cfg.backlog)
        .map_err(|e| anyhow_like::Error(format!("cannot listen on {listen}: {e}")))?;
    let metrics_socket = match metrics_listen {
        Some(addr) => Some((
            addr,
            tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                anyhow_like::Error(format!(
                    "cannot listen on {addr} (STRATUM_METRICS_LISTEN): {e}"
                ))
            })?,
        )),
        None => None,
    };
    cfg.adapters.log();
    listener_cfg.max_connections = listener::connection_limit(listener_cfg.max_connections);
    limits.max_watchers =
        listener::watcher_limit(limits.max_watchers, listener_cfg.max_connections);
    let cfg = ServiceConfig { limits, ..cfg };
    let store = open(db).await?;
    let svc = service::start(store, cfg).await?;
    if let Some(token) = &svc.generated_token {
        // Shown once, on standard output, never through the log.
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "stratum: bootstrap token for user/admin (shown once, keep it): {token}"
        )?;
        out.flush()?;
    }
    tracing::info!(
        %listen,
        database = %redact_url(&db.database_url),
        max_connections = listener_cfg.max_connections,
        backlog = listener_cfg.backlog,
        "serving"
    );
    let stopping = svc.state.shutdown.clone();
    if let Some((addr, socket)) = metrics_socket {
        tracing::info!(listen = %addr, "serving metrics");
        let app = crate::metrics::app(svc.state.clone());
        let stop = stopping.clone();
        tokio::spawn(async move {
            let _ = axum::serve(socket, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
        });
    }
    tokio::spawn({
        let stopping = stopping.clone();
        async move {
            shutdown_signal().await;
            // Event streams and long-polls end; requests in flight finish
            // within the grace period.
            stopping.cancel();
        }
    });
    let grace = listener_cfg.shutdown_grace;
    let app = crate::http::app(svc.state.clone());
    if !listener::serve(socket, app, listener_cfg, stopping).await {
        tracing::warn!(grace = ?grace, "requests still open after the grace period; stopping anyway");
    }
    tracing::info!("stopped");
    Ok(0)
}

/// The shortest `STRATUM_BOOTSTRAP_TOKEN` accepted. Only a salted Argon2id
/// hash of it is kept, but a short secret is still a weak one.
pub const MIN_BOOTSTRAP_TOKEN: usize = 32;

fn bootstrap_token_from_env() -> anyhow_like::Result<Option<String>> {
    match std::env::var("STRATUM_BOOTSTRAP_TOKEN") {
        Ok(t) if t.is_empty() => Ok(None),
        Ok(t) if t.chars().count() < MIN_BOOTSTRAP_TOKEN => Err(anyhow_like::Error(format!(
            "STRATUM_BOOTSTRAP_TOKEN must be at least {MIN_BOOTSTRAP_TOKEN} characters; \
             leave it unset and a random token is generated and printed once"
        ))),
        Ok(t) if crate::auth::is_generated(&t) => Err(anyhow_like::Error(
            "STRATUM_BOOTSTRAP_TOKEN must not look like a token stratum generates \
             (stt_ and 43 characters): those are found by a fast hash, a chosen one by a slow one"
                .into(),
        )),
        Ok(t) => Ok(Some(t)),
        Err(_) => Ok(None),
    }
}

/// Who a token change on the command line is recorded as: the host's user.
fn host_principal() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "root".to_owned());
    format!("host/{user}")
}

/// Runs a `stratum token` command; answers the exit code and what to print
/// (JSON: the token record, with its secret right after `create`).
pub async fn token(cmd: TokenCmd) -> anyhow_like::Result<(i32, String)> {
    use stratum_domain::iam::IamCommand;
    use stratum_domain::Command;
    let (db, command) = match cmd {
        TokenCmd::List { db } => {
            let store = open_existing(&db, Access::ReadOnly).await?;
            let docs: Vec<String> = store
                .token_docs()
                .await?
                .into_iter()
                .map(|(_, d)| d)
                .collect();
            return Ok((0, docs.join("\n")));
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
        crate::command::CommandRequest::new(Command::Iam(command), host_principal()),
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
pub async fn import_release(file: &std::path::Path, db: &Db) -> anyhow_like::Result<(i32, String)> {
    use stratum_domain::upgrade::{ReleaseSource, UpgradeCommand};
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow_like::Error(format!("{}: {e}", file.display())))?;
    let manifest: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        anyhow_like::Error(format!("{} is not a JSON manifest: {e}", file.display()))
    })?;
    let keys = release_keys_from_env()?;
    let mut req = crate::command::CommandRequest::new(
        stratum_domain::Command::Upgrade(UpgradeCommand::RegisterRelease {
            manifest: manifest.clone(),
            source: ReleaseSource::Media,
        }),
        host_principal(),
    );
    if let Err(e) = stratum_domain::release::verify_signature(&manifest, &keys) {
        req.input_errors.push(e);
    }
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
) -> anyhow_like::Result<crate::command::Outcome> {
    let bus =
        crate::command::CommandBus::start(open_existing(db, Access::ReadWrite).await?).await?;
    bus.execute(req)
        .await
        .map_err(|e| anyhow_like::Error(e.message))
}

/// The trusted release keys: `STRATUM_RELEASE_KEYS` (`keyId=base64-key`,
/// comma-separated) and the lines of the file `STRATUM_RELEASE_KEYS_FILE`
/// names (one `keyId=base64-key` a line, `#` comments).
fn release_keys_from_env() -> anyhow_like::Result<TrustedKeys> {
    let mut spec = std::env::var("STRATUM_RELEASE_KEYS").unwrap_or_default();
    if let Ok(path) = std::env::var("STRATUM_RELEASE_KEYS_FILE") {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow_like::Error(format!("release keys file {path}: {e}")))?;
        for line in text.lines().map(str::trim) {
            if !line.is_empty() && !line.starts_with('#') {
                spec.push(',');
                spec.push_str(line);
            }
        }
    }
    let keys =
        TrustedKeys::parse(&spec).map_err(|e| anyhow_like::Error(format!("release keys: {e}")))?;
    if keys.0.is_empty() {
        tracing::warn!("no trusted release keys (STRATUM_RELEASE_KEYS): every release registration will be refused");
    }
    Ok(keys)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutting down: finishing requests in flight");
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

/// Reads an export line by line.
fn export_lines(
    path: &std::path::Path,
) -> anyhow_like::Result<impl Iterator<Item = (usize, std::io::Result<String>)>> {
    use std::io::BufRead;
    let f = std::fs::File::open(path)
        .map_err(|e| anyhow_like::Error(format!("{}: {e}", path.display())))?;
    Ok(std::io::BufReader::new(f).lines().enumerate())
}

/// Verifies an export offline (see [`stratum_domain::export::verify`]).
pub fn verify_file(
    path: &std::path::Path,
    recorded: Option<stratum_domain::log::RecordedHead>,
) -> anyhow_like::Result<Verification> {
    let lines = export_lines(path)?.map(|(_, line)| line);
    Ok(stratum_domain::export::verify(lines, recorded)?)
}

/// Replays an export (up to `until`) into read models, without a database.
pub fn replay_file(
    path: &std::path::Path,
    until: Option<u64>,
) -> anyhow_like::Result<stratum_projections::ReadModels> {
    let mut rm = stratum_projections::ReadModels::default();
    rm.set_tracking(false);
    let mut v = stratum_domain::log::ChainVerifier::default();
    for (n, line) in export_lines(path)? {
        let e = stratum_domain::export::parse_line(n, &line?).map_err(anyhow_like::Error)?;
        if until.is_some_and(|u| e.position > u) {
            break;
        }
        v.check(&e)
            .map_err(|b| anyhow_like::Error(format!("line {}: the chain breaks: {b}", n + 1)))?;
        rm.apply_recorded(&e)
            .map_err(|err| anyhow_like::Error(format!("line {}: {err}", n + 1)))?;
    }
    Ok(rm)
}

/// Imports an export into an empty database: the events as they are
/// (positions, hashes), checked line by line, then every read model.
pub async fn import(
    store: Arc<dyn EventStore>,
    path: &std::path::Path,
) -> anyhow_like::Result<u64> {
    if store.head().await?.position != 0 {
        return Err(anyhow_like::Error(
            "import needs an empty database; this one already has events".into(),
        ));
    }
    let mut v = stratum_domain::log::ChainVerifier::default();
    let mut chunk = Vec::with_capacity(READ_CHUNK as usize);
    let mut lines = export_lines(path)?.peekable();
    while let Some((n, line)) = lines.next() {
        let e = stratum_domain::export::parse_line(n, &line?).map_err(anyhow_like::Error)?;
        v.check(&e)
            .map_err(|b| anyhow_like::Error(format!("line {}: the chain breaks: {b}", n + 1)))?;
        chunk.push(e);
        if chunk.len() == READ_CHUNK as usize || lines.peek().is_none() {
            let mut tx = store.begin_write().await?;
            tx.append(&chunk).await?;
            tx.commit().await?;
            chunk.clear();
        }
    }
    let rm = crate::command::load(store.clone(), None).await?;
    store
        .replace_read_models(&rm.all_rows(), rm.state.position)
        .await?;
    Ok(v.position)
}

/// Writes events as JSON lines.
pub async fn export(
    store: &dyn EventStore,
    after: u64,
    until: Option<u64>,
    out: &mut impl Write,
) -> anyhow_like::Result<()> {
    let mut at = after;
    loop {
        let chunk = store.read_after(at, READ_CHUNK).await?;
        if chunk.is_empty() {
            return Ok(());
        }
        for e in &chunk {
            if until.is_some_and(|u| e.position > u) {
                return Ok(());
            }
            let payload =
                stratum_domain::stored::decode(&e.event_type, e.schema_version, &e.payload)
                    .map_err(|err| anyhow_like::Error(format!("position {}: {err}", e.position)))?;
            let line = stratum_domain::log::LogLine::new(
                e,
                serde_json::to_value(payload).expect("events serialize"),
            );
            serde_json::to_writer(&mut *out, &line)?;
            out.write_all(b"\n")?;
            at = e.position;
        }
    }
}
