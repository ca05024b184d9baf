//! The `stratum` command line.
//!
//! `serve` runs the service. Commands given `--server URL` (or
//! `STRATUM_SERVER`) talk to a running server over HTTP or HTTPS
//! ([`remote`]); the host's commands open the database directly
//! ([`host`]): `events verify|import|export`, [`replay`], `token`,
//! `releases import`. `completions` and `man` describe the command line
//! itself.

pub mod config;
pub mod host;
pub mod output;
pub mod release_keys;
pub mod remote;
pub mod replay;
pub mod serve;

use std::path::PathBuf;

use clap::{ArgGroup, Args, CommandFactory, Parser, Subcommand};

pub use host::{export, import, import_release, replay_file, token, verify_file};
pub use replay::drift;
pub use serve::{ServeArgs, UpgradeArgs, MIN_BOOTSTRAP_TOKEN};

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
    #[command(flatten)]
    pub remote: remote::RemoteArgs,
    /// A TOML file of settings: each key is a flag's name (`listen`,
    /// `database-url`...). A flag wins over its environment variable,
    /// which wins over the file, which wins over the default.
    #[arg(long, global = true, env = "STRATUM_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
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
    /// Installs the process's logger, or says why the level is not one;
    /// with `traces`, spans are exported too, with a filter of their own.
    pub fn install(&self, traces: Option<&crate::telemetry::Traces>) -> Result<(), String> {
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        use tracing_subscriber::Layer as _;
        let filter = tracing_subscriber::EnvFilter::try_new(&self.log_level)
            .map_err(|e| format!("STRATUM_LOG (--log-level) {:?}: {e}", self.log_level))?
            // sqlx names a connection setting it does not know with its
            // value (`key=pass%77ord value=...`): never logged, whatever
            // the level.
            .add_directive("sqlx_postgres::options=error".parse().expect("a directive"));
        let json = self.log_format == "json";
        let registry = tracing_subscriber::registry();
        match traces {
            // Each layer its own filter: the log's, and the spans'.
            Some(t) => registry
                .with(fmt_layer(json).with_filter(filter))
                .with(t.layer())
                .try_init(),
            // One filter for the whole subscriber and the log's layer by
            // type, not boxed: no per-layer bookkeeping, no dynamic calls,
            // and a callsite the log does not want is never built.
            None if json => registry.with(filter).with(json_layer()).try_init(),
            None => registry.with(filter).with(text_layer()).try_init(),
        }
        .map_err(|e| format!("cannot install the logger: {e}"))
    }
}

/// The log's lines on standard error: JSON objects, or text (coloured only
/// on a terminal), boxed for a subscriber with more than one layer.
fn fmt_layer<S>(json: bool) -> Box<dyn tracing_subscriber::Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer as _;
    if json {
        json_layer().boxed()
    } else {
        text_layer().boxed()
    }
}

/// One JSON object a line, with the current span's fields.
fn json_layer<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
}

/// Text, coloured only on a terminal.
fn text_layer<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use std::io::IsTerminal;
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
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
    Serve(Box<ServeArgs>),
    /// Members of the cluster (needs `--server`).
    Members {
        #[command(subcommand)]
        command: remote::MembersCmd,
    },
    /// The six peer lists at the current generation (needs `--server`).
    Peers {
        /// Keep printing the lists each time the generation moves.
        #[arg(long, conflicts_with = "as_of")]
        watch: bool,
        /// Read as of this log position (`asOf`).
        #[arg(long)]
        as_of: Option<String>,
    },
    /// The membership generation, digest and counts (needs `--server`).
    Membership {
        /// Read as of this log position (`asOf`).
        #[arg(long)]
        as_of: Option<String>,
    },
    /// Upgrades (needs `--server`).
    Upgrades {
        #[command(subcommand)]
        command: remote::UpgradesCmd,
    },
    /// Releases: list and register them on a server, or import one from
    /// install media on the host.
    Releases {
        #[command(subcommand)]
        command: ReleasesCmd,
    },
    /// The replicas on the server's database: each `stratum serve`, its
    /// build, formats, settings and heartbeat (needs `--server`).
    Replicas {
        #[command(subcommand)]
        command: remote::ReplicasCmd,
    },
    /// The alarms (needs `--server`).
    Alarms {
        /// Only the alarms not cleared.
        #[arg(long)]
        active: bool,
        /// Read as of this log position (`asOf`).
        #[arg(long)]
        as_of: Option<String>,
    },
    /// API tokens: through a server with `--server`, or on the host with
    /// direct access to the database (e.g. to recover access).
    #[command(visible_alias = "tokens")]
    Token {
        #[command(subcommand)]
        command: TokenCmd,
    },
    /// The event log: verify, export and import on the host; list, tail
    /// and export through a server.
    Events {
        #[command(subcommand)]
        command: EventsCmd,
    },
    /// Folds the read models again from the log with this build's
    /// projections: checks them against the stored ones, rebuilds them,
    /// prints the membership digest at a position, writes them out entity
    /// by entity, or shows what differs from another build's.
    #[command(group(ArgGroup::new("fold").args(["digest", "dump", "diff"]).multiple(true)))]
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
        /// Writes every read model, one entity per line (canonical JSON,
        /// stable order), to FILE (`-`: standard output): what another
        /// build compares with `--diff --against FILE`.
        #[arg(long, group = "mode", value_name = "FILE")]
        dump: Option<PathBuf>,
        /// Shows what this build's projections make of the log that differs,
        /// entity by entity and field by field, from the database's read
        /// models (or from a dump, --against); exits 1 when anything does.
        #[arg(long, group = "mode")]
        diff: bool,
        /// With --diff: compares with a dump written by `replay --dump`
        /// instead of the database's read models.
        #[arg(long, requires = "diff", value_name = "FILE")]
        against: Option<PathBuf>,
        /// With --digest, --dump or --diff: folds only up to this position.
        #[arg(long, requires = "fold")]
        until: Option<u64>,
        /// With --digest, --dump or --diff: folds an export instead of the
        /// database's log.
        #[arg(long, requires = "fold")]
        file: Option<PathBuf>,
        #[command(flatten)]
        db: Db,
    },
    /// The log as a transparency log: make a checkpoint signing key, and
    /// watch a server's checkpoints as an auditor's witness.
    Log {
        #[command(subcommand)]
        command: LogCmd,
    },
    /// Be a witness of transparency logs (C2SP tlog-witness): make a
    /// witness key, and serve the witness.
    Witness {
        #[command(subcommand)]
        command: WitnessCmd,
    },
    /// Prints a shell completion script: `stratum completions bash >
    /// /etc/bash_completion.d/stratum`.
    Completions { shell: clap_complete::Shell },
    /// Prints the man page (roff): `stratum man > stratum.1`.
    Man,
}

#[derive(Subcommand, Debug)]
pub enum ReleasesCmd {
    /// Registers a release manifest loaded from install media (its
    /// `sourceKind` is `media`), on the host; the signature is checked
    /// against the trusted release keys like any registration.
    Import {
        #[arg(long)]
        file: std::path::PathBuf,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        keys: release_keys::ReleaseKeyArgs,
    },
    /// Lists the registered releases (needs `--server`).
    List,
    /// Registers a signed release manifest through a server.
    Register {
        #[arg(long)]
        file: std::path::PathBuf,
    },
}

/// A time on the command line, as the record keeps it.
fn request_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    stratum_domain::log::request_time(text).map_err(str::to_owned)
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
        #[arg(long, value_parser = request_time)]
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
pub enum LogCmd {
    /// Writes a checkpoint signing key pair in Go's note format:
    /// `NAME.key` (the private key, for STRATUM_LOG_SIGNING_KEY_FILE; mode
    /// 0600) and `NAME.pub` (the verifier key, for auditors).
    Keygen {
        /// The key's name, also the checkpoints' origin by default: no
        /// space, no `+` (e.g. `stratum.example.com/log`, with `/` as `-`
        /// where a file name needs it).
        name: String,
        /// Where to write the two files.
        #[arg(long, default_value = ".")]
        dir: std::path::PathBuf,
    },
    /// The auditor's witness (needs `--server`): fetches the checkpoint,
    /// checks its signature, that it is not smaller than the one kept,
    /// and that it extends it (a consistency proof); keeps it. Exits 1
    /// naming what broke: a bad signature, a shrink, a fork.
    Watch {
        /// The log's note verifier key: a file, or the key itself.
        #[arg(long)]
        key: String,
        /// Where the newest verified checkpoint is kept between runs.
        #[arg(long)]
        state: std::path::PathBuf,
        /// A witness policy (`witness NAME VKEY [URL]` lines, `quorum K`):
        /// a checkpoint without a quorum of valid cosignatures is refused,
        /// naming the witnesses that signed and those that did not.
        #[arg(long, value_name = "FILE")]
        witness_policy: Option<std::path::PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum WitnessCmd {
    /// Writes a witness key pair: `NAME.key` (the private key; mode 0600)
    /// and `NAME.pub` (its cosignature/v1 verifier key, type 0x04), with
    /// any `/` in NAME written as `_` in the file names.
    Keygen {
        /// The witness's name, e.g. `witness.example.com/w1`: no space, no `+`.
        name: String,
        /// Where to write the two files.
        #[arg(long, default_value = ".")]
        dir: std::path::PathBuf,
    },
    /// Serves C2SP tlog-witness (`POST /add-checkpoint`, `GET
    /// /<origin hash>/checkpoint`) for the logs it is given: cosigns a
    /// checkpoint only if it is consistent with the newest it cosigned.
    Serve {
        /// The address to listen on, e.g. `127.0.0.1:7380`.
        #[arg(long)]
        listen: String,
        /// The witness's private key (`stratum witness keygen`).
        #[arg(long, value_name = "FILE")]
        key: std::path::PathBuf,
        /// Where the newest checkpoint cosigned for each log is kept.
        #[arg(long, value_name = "DIR")]
        state: std::path::PathBuf,
        /// A log's note verifier key (a file or the key itself); its name is
        /// the log's origin. Repeat it for each log witnessed.
        #[arg(long = "log-key", value_name = "VKEY", required = true)]
        log_keys: Vec<String>,
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
        /// With --file: the log's note verifier key (a file or the key
        /// itself, `<name>+<hash>+<base64>`): the export must end with a
        /// checkpoint signed by it, of the export's size and its events'
        /// Merkle root.
        #[arg(long, requires = "file", value_name = "KEY")]
        key: Option<String>,
        /// With --key: a signed checkpoint kept earlier (`stratum log
        /// watch`'s state): the export must reach its size with its root,
        /// so a log cut back or rewritten since is caught.
        #[arg(long, requires = "key", value_name = "FILE")]
        checkpoint: Option<std::path::PathBuf>,
        /// With --checkpoint: a witness policy (`witness NAME VKEY [URL]`
        /// lines, `quorum K`); the checkpoint kept must carry a quorum of
        /// its witnesses' valid cosignatures.
        #[arg(long, requires = "checkpoint", value_name = "FILE")]
        witness_policy: Option<std::path::PathBuf>,
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
    /// Writes the log as JSON lines, payloads decoded, to standard output;
    /// with `--server`, the same lines from a running server.
    Export {
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long)]
        until: Option<u64>,
        #[command(flatten)]
        db: Db,
    },
    /// Lists events from a server, oldest first, filtered.
    List {
        /// Only events after this position.
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// At most this many events.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Only this stream, e.g. `member/n-1`.
        #[arg(long)]
        stream: Option<String>,
        /// Only this event type, e.g. `MemberDecommissioned`.
        #[arg(long = "type")]
        event_type: Option<String>,
        /// Only events of this principal, e.g. `user/alice`.
        #[arg(long)]
        actor: Option<String>,
    },
    /// Follows a server's event stream (Server-Sent Events), reconnecting
    /// from the last event seen.
    Tail {
        /// Start after this position (default: the head, only new events).
        #[arg(long)]
        after: Option<u64>,
    },
}
/// Whether an error is standard output's reader having gone (`| head`):
/// the output ends there, and that is no failure.
pub fn closed_pipe(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::BrokenPipe
}

/// Writes `bytes` to standard output.
fn out(bytes: &[u8]) -> anyhow::Result<i32> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if !closed_pipe(&e) => Err(e.into()),
        _ => Ok(0),
    }
}

/// A key pair written as `DIR/FILE.key` (the private key, readable by its
/// owner only) and `DIR/FILE.pub`, never overwriting either.
fn write_key_pair(
    dir: &std::path::Path,
    file: &str,
    private: &str,
    public: &str,
) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let write = |ext: &str, text: &str, mode: u32| -> anyhow::Result<std::path::PathBuf> {
        let path = dir.join(format!("{file}.{ext}"));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        writeln!(f, "{text}")?;
        f.sync_all()?;
        Ok(path)
    };
    Ok((write("key", private, 0o600)?, write("pub", public, 0o644)?))
}

/// `stratum log keygen NAME`: a checkpoint signing key pair.
fn keygen(name: &str, dir: &std::path::Path) -> anyhow::Result<i32> {
    let (private, public) = crate::checkpoint::generate_key(name)?;
    let (key, public_path) = write_key_pair(dir, &name.replace('/', "-"), &private, &public)?;
    println!(
        "wrote {} (the signing key: STRATUM_LOG_SIGNING_KEY_FILE) and {} (the verifier key, for auditors):\n{public}",
        key.display(),
        public_path.display()
    );
    Ok(0)
}

/// `stratum witness keygen NAME`: a witness's cosignature/v1 key pair.
fn witness_keygen(name: &str, dir: &std::path::Path) -> anyhow::Result<i32> {
    let (private, public) =
        crate::witness::Cosigner::generate(name).map_err(|e| anyhow::anyhow!(e))?;
    let (key, public_path) = write_key_pair(dir, &name.replace('/', "_"), &private, &public)?;
    println!(
        "wrote {} (the witness's key: stratum witness serve --key) and {} (its verifier key, for logs' and auditors' witness policies):\n{public}",
        key.display(),
        public_path.display()
    );
    Ok(0)
}

/// Runs a command; answers the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    let Cli {
        command,
        mut remote,
        ..
    } = cli;
    // An empty STRATUM_SERVER names no server.
    remote.server = remote.server.filter(|s| !s.trim().is_empty());
    match command {
        Cmd::Serve(args) => serve::run(*args).await,
        Cmd::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "stratum", &mut script);
            out(&script)
        }
        Cmd::Man => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut page)?;
            out(&page)
        }
        Cmd::Releases {
            command: ReleasesCmd::Import { file, db, keys },
        } => Ok(host::emit(import_release(&file, &db, &keys).await?)),
        Cmd::Log {
            command: LogCmd::Keygen { name, dir },
        } => keygen(&name, &dir),
        Cmd::Witness {
            command: WitnessCmd::Keygen { name, dir },
        } => witness_keygen(&name, &dir),
        Cmd::Witness {
            command:
                WitnessCmd::Serve {
                    listen,
                    key,
                    state,
                    log_keys,
                },
        } => crate::witness::serve::run(&listen, &key, state, &log_keys).await,
        Cmd::Token { command } if remote.server.is_none() => Ok(host::emit(
            token(command, output::Format::parse(&remote.output)).await?,
        )),
        // An export named with --file is checked offline, wherever it came
        // from; everything else of the log goes to --server when it is set.
        Cmd::Events {
            command:
                command @ (EventsCmd::Verify { .. }
                | EventsCmd::Import { .. }
                | EventsCmd::Export { .. }),
        } if remote.server.is_none()
            || matches!(command, EventsCmd::Verify { file: Some(_), .. }) =>
        {
            host::events(command).await
        }
        Cmd::Replay {
            check,
            rebuild,
            digest,
            dump,
            diff,
            against,
            until,
            file,
            db,
        } if remote.server.is_none() || file.is_some() => {
            let mode = match (check, rebuild, digest, dump, diff) {
                (true, ..) => replay::Mode::Check,
                (_, true, ..) => replay::Mode::Rebuild,
                (_, _, true, ..) => replay::Mode::Digest,
                (_, _, _, Some(to), _) => replay::Mode::Dump(to),
                (.., true) => replay::Mode::Diff { against },
                _ => {
                    return Err(anyhow::anyhow!(
                        "say --check, --rebuild, --digest, --dump FILE or --diff"
                    ))
                }
            };
            let format = output::Format::parse(&remote.output);
            replay::run(mode, until, file, db, format).await
        }
        command => remote::run(&remote, command).await,
    }
}
