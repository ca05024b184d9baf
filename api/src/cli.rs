//! The `stratum` command line: `serve`, `events verify|export`, `replay`.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::command::READ_CHUNK;
use crate::http::events::{verify_chain, Verification};
use crate::service::{self, ServiceConfig};
use crate::store::{self, redact_url, EventStore, StoredReadModels};

#[derive(Parser, Debug)]
#[command(
    name = "stratum",
    version,
    about = "The control plane's record of cluster membership and upgrades."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
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
        #[command(flatten)]
        db: Db,
    },
    /// Reads the event log.
    Events {
        #[command(subcommand)]
        command: EventsCmd,
    },
    /// Rebuilds the read models from the log, or checks them against it.
    Replay {
        /// Compares a rebuild with the stored read models; exits 1 on drift.
        #[arg(long, conflicts_with = "rebuild", required_unless_present = "rebuild")]
        check: bool,
        /// Rebuilds every read model from position 0.
        #[arg(long)]
        rebuild: bool,
        #[command(flatten)]
        db: Db,
    },
}

#[derive(Subcommand, Debug)]
pub enum EventsCmd {
    /// Recomputes the hash chain; exits 1 naming the first bad position.
    Verify {
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

async fn open(db: &Db) -> anyhow_like::Result<Arc<dyn EventStore>> {
    store::connect(&db.database_url).await.map_err(|e| {
        anyhow_like::Error(format!("cannot open {}: {e}", redact_url(&db.database_url)))
    })
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
        Cmd::Serve { listen, db } => serve(listen, &db).await,
        Cmd::Events {
            command: EventsCmd::Verify { db },
        } => {
            let store = open(&db).await?;
            match verify_chain(&*store).await? {
                Verification::Intact { position, hash } => {
                    println!(
                        "verified: {position} events, head hash {}",
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
            let store = open(&db).await?;
            export(&*store, after, until, &mut std::io::stdout().lock()).await?;
            Ok(0)
        }
        Cmd::Replay { check, db, .. } => {
            let store = open(&db).await?;
            let head = store.head().await?.position;
            let bar = progress(head, if check { "checking" } else { "rebuilding" });
            let rm = crate::command::replay(store.clone(), None, |p| bar.set_position(p)).await?;
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

async fn serve(listen: SocketAddr, db: &Db) -> anyhow_like::Result<i32> {
    let store = open(db).await?;
    let cfg = ServiceConfig {
        bootstrap_token: std::env::var("STRATUM_BOOTSTRAP_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
        ..Default::default()
    };
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
    let listener = tokio::net::TcpListener::bind(listen).await?;
    tracing::info!(%listen, database = %redact_url(&db.database_url), "serving");
    axum::serve(listener, crate::http::app(svc.state.clone()))
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    tracing::info!("stopped");
    Ok(0)
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
