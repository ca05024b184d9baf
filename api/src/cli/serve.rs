//! `stratum serve`: its settings, and the start and stop of the service.

use std::io::Write;
use std::net::SocketAddr;

use clap::Args;

use super::Db;
use crate::listener::{self, ConnArgs};
use crate::raft::RaftArgs;
use crate::service::{self, ServiceConfig};
use stratum_store::redact_url;

/// Every setting of `serve`; each is a flag, an environment variable and a
/// key of the `--config` file.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    #[arg(long, env = "STRATUM_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Where Prometheus scrapes `GET /metrics` (no token; bind it to
    /// the monitoring network). Off unless set.
    #[arg(long, env = "STRATUM_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// The first start's token for `user/admin` (32 characters at least);
    /// without it a random one is generated and printed once.
    #[arg(long, env = "STRATUM_BOOTSTRAP_TOKEN", hide_env_values = true)]
    pub bootstrap_token: Option<String>,
    /// Prints the settings in effect (secrets redacted), as a `--config`
    /// file, and exits.
    #[arg(long)]
    pub print_config: bool,
    /// At most this many read-model rows a second are written again when
    /// the database's rows were made by projections of other versions
    /// than this build's (after an upgrade whose release changed a fold).
    #[arg(long, env = "STRATUM_REBUILD_ROWS_PER_SECOND", default_value_t = std::num::NonZeroU32::new(crate::rebuild::DEFAULT_RATE).expect("not zero"))]
    pub rebuild_rows_per_second: std::num::NonZeroU32,
    #[command(flatten)]
    pub db: Db,
    #[command(flatten)]
    pub tls: crate::tls::TlsArgs,
    #[command(flatten)]
    pub keys: super::release_keys::ReleaseKeyArgs,
    #[command(flatten)]
    pub raft: Box<RaftArgs>,
    #[command(flatten)]
    pub upgrade: UpgradeArgs,
    #[command(flatten)]
    pub conn: Box<ConnArgs>,
    #[command(flatten)]
    pub log: crate::checkpoint::CheckpointArgs,
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
    pub fn config(&self) -> anyhow::Result<stratum_domain::upgrade::UpgradeConfig> {
        let settle = humantime::parse_duration(self.upgrade_settle.trim()).map_err(|e| {
            anyhow::anyhow!(
                "STRATUM_UPGRADE_SETTLE must be a duration such as 60s or 2m, not `{}`: {e}",
                self.upgrade_settle
            )
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
            return Err(anyhow::anyhow!(
                "STRATUM_BACKUP_RECIPIENT is set without STRATUM_BACKUP_TARGET"
            ));
        }
        Ok(stratum_domain::upgrade::UpgradeConfig {
            backup_target: target
                .map(|url| stratum_domain::upgrade::BackupTarget { url, recipient }),
            settle_seconds: settle.as_secs(),
        })
    }
}

/// Runs the service until SIGTERM or Ctrl-C.
pub async fn run(args: ServeArgs) -> anyhow::Result<i32> {
    if args.print_config {
        // What is printed is what would start: each setting is checked as
        // a start checks it (its files read), and a bad one exits 2.
        check(&args)?;
        print!(
            "{}",
            super::config::effective().map_err(anyhow::Error::msg)?
        );
        return Ok(0);
    }
    // Every setting is read before anything starts: a malformed one stops
    // the start, naming its variable.
    let (listen, metrics_listen, db, raft, upgrade, conn) = (
        args.listen,
        args.metrics_listen,
        &args.db,
        &args.raft,
        &args.upgrade,
        &args.conn,
    );
    let tls = crate::tls::Tls::from_args(&args.tls)?;
    let adapters = raft.adapters()?;
    let backoff = raft.backoff()?;
    let (mut listener_cfg, mut limits) = conn.config()?;
    let cfg = ServiceConfig {
        bootstrap_token: bootstrap_token(&args.bootstrap_token)?,
        release_keys: args.keys.keys()?,
        adapters,
        backoff,
        upgrade: upgrade.config()?,
        log_key: args.log.key()?,
        log_public: args.log.log_public,
        rebuild_rows_per_second: Some(args.rebuild_rows_per_second),
        ..Default::default()
    };
    // The address is taken before anything is printed or the database is
    // opened, so a busy port stops the start before a bootstrap token is
    // issued and shown.
    let socket = listener::bind(listen, listener_cfg.backlog)
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let metrics_socket = match metrics_listen {
        Some(addr) => Some((
            addr,
            tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                anyhow::anyhow!("cannot listen on {addr} (STRATUM_METRICS_LISTEN): {e}")
            })?,
        )),
        None => None,
    };
    cfg.adapters.log();
    listener_cfg.max_connections = listener::connection_limit(listener_cfg.max_connections);
    limits.max_watchers =
        listener::watcher_limit(limits.max_watchers, listener_cfg.max_connections);
    let cfg = ServiceConfig {
        limits,
        listen: listen.to_string(),
        ..cfg
    };
    let store = super::host::open(db).await?;
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
        tls = tls.is_some(),
        client_certificates = tls.as_ref().is_some_and(|t| t.client_certificates()),
        database = %redact_url(&db.database_url),
        max_connections = listener_cfg.max_connections,
        backlog = listener_cfg.backlog,
        "serving"
    );
    let stopping = svc.state.shutdown.clone();
    if let Some((addr, socket)) = metrics_socket {
        tracing::info!(listen = %addr, "serving metrics");
        let app = crate::http::metrics::app(svc.state.clone());
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
            crate::systemd::stopping();
            // Event streams and long-polls end; requests in flight finish
            // within the grace period.
            stopping.cancel();
        }
    });
    let grace = listener_cfg.shutdown_grace;
    let app = crate::http::app(svc.state.clone());
    crate::tls::on_hangup(tls.clone());
    // Every listener is bound (connections wait in its backlog until the
    // accept loop below runs): systemd hears READY=1 once `/readyz` would
    // answer 200.
    tokio::spawn({
        let state = svc.state.clone();
        let stop = stopping.clone();
        async move {
            let mut said = String::new();
            loop {
                match crate::http::system::readiness(&state).await {
                    Ok(_) => break,
                    // Once per reason: the check runs five times a second.
                    Err(e) if e.message != said => {
                        tracing::info!(reason = %e.message, "not ready yet");
                        said = e.message.clone();
                    }
                    Err(_) => {}
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
                }
            }
            crate::systemd::ready(state, stop).await;
        }
    });
    if !listener::serve(socket, app, listener_cfg, tls, stopping).await {
        tracing::warn!(grace = ?grace, "requests still open after the grace period; stopping anyway");
    }
    svc.deregister().await;
    tracing::info!("stopped");
    Ok(0)
}

/// Reads every setting as a start does, without starting.
fn check(args: &ServeArgs) -> anyhow::Result<()> {
    args.raft.adapters()?;
    args.raft.backoff()?;
    args.conn.config()?;
    args.upgrade.config()?;
    args.keys.keys()?;
    args.log.key()?;
    bootstrap_token(&args.bootstrap_token)?;
    crate::tls::Tls::from_args(&args.tls)?;
    Ok(())
}

/// The shortest `STRATUM_BOOTSTRAP_TOKEN` accepted. Only a salted Argon2id
/// hash of it is kept, but a short secret is still a weak one.
pub const MIN_BOOTSTRAP_TOKEN: usize = 32;

fn bootstrap_token(given: &Option<String>) -> anyhow::Result<Option<String>> {
    match given.clone().ok_or(()) {
        Ok(t) if t.is_empty() => Ok(None),
        Ok(t) if t.chars().count() < MIN_BOOTSTRAP_TOKEN => Err(anyhow::anyhow!(
            "STRATUM_BOOTSTRAP_TOKEN must be at least {MIN_BOOTSTRAP_TOKEN} characters; \
             leave it unset and a random token is generated and printed once"
        )),
        Ok(t) if crate::auth::is_generated(&t) => Err(anyhow::anyhow!(
            "STRATUM_BOOTSTRAP_TOKEN must not look like a token stratum generates \
             (stt_ and 43 characters): those are found by a fast hash, a chosen one by a slow one"
        )),
        Ok(t) => Ok(Some(t)),
        Err(_) => Ok(None),
    }
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
