//! The remote CLI: commands that talk to a running server over HTTP or
//! HTTPS (`--server URL`, `STRATUM_SERVER`), with a token from
//! `STRATUM_TOKEN` or `--token-file`.
//!
//! Answers print as a table, or as JSON or YAML (`-o json|yaml`). The exit
//! code follows the answer's HTTP class: 0 for 2xx, 3, 4 or 5 for 3xx, 4xx
//! or 5xx; 1 when the server cannot be reached; 2 for usage. An error
//! prints its code, message, every field error and the request id.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use futures::StreamExt;
use reqwest::Method;
use serde_json::{json, Map, Value};

use super::output::{self, Format, Shape};
use super::{anyhow_like, Cmd, EventsCmd, ReleasesCmd, TokenCmd};

/// How the remote CLI reaches a server.
#[derive(Args, Debug, Clone)]
pub struct RemoteArgs {
    /// A running server, e.g. `https://stratum.example:8443`: the command
    /// talks to it instead of opening the database. The token is read from
    /// `STRATUM_TOKEN` or `--token-file`.
    #[arg(long, global = true, env = "STRATUM_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// A file holding the bearer token (instead of `STRATUM_TOKEN`).
    #[arg(long, global = true, env = "STRATUM_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// PEM CA certificates to trust for the server's certificate, on top
    /// of none: give the CA that signed it.
    #[arg(long, global = true, env = "STRATUM_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// A PEM client certificate (a node agent's), with `--client-key`.
    #[arg(long, global = true, env = "STRATUM_CLIENT_CERT", value_name = "FILE")]
    pub client_cert: Option<PathBuf>,
    /// The PEM key of `--client-cert`.
    #[arg(long, global = true, env = "STRATUM_CLIENT_KEY", value_name = "FILE")]
    pub client_key: Option<PathBuf>,
    /// How answers print: `table`, `json` or `yaml`.
    #[arg(short = 'o', long, global = true, env = "STRATUM_OUTPUT", default_value = "table",
          value_parser = ["table", "json", "yaml"])]
    pub output: String,
}

#[derive(Subcommand, Debug)]
pub enum MembersCmd {
    /// Lists the members, filtered.
    List {
        /// joining, active, failed, removing or decommissioned.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        role: Option<String>,
        #[arg(long)]
        rack: Option<String>,
        /// Read as of this log position (`asOf`), or as of an RFC 3339
        /// time (the last event at or before it).
        #[arg(long)]
        as_of: Option<String>,
    },
    /// Shows one member.
    Get {
        node_id: String,
        /// Read as of this log position (`asOf`), or as of an RFC 3339
        /// time (the last event at or before it).
        #[arg(long)]
        as_of: Option<String>,
    },
    /// Changes a member's role, address, bindings or labels.
    Update {
        node_id: String,
        #[arg(long)]
        role: Option<String>,
        #[arg(long)]
        mgmt_ip: Option<String>,
        /// `key=value`; repeat for more. Replaces every label.
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        /// `class=address`; repeat for more. Replaces every binding.
        #[arg(long = "binding", value_name = "CLASS=ADDRESS")]
        bindings: Vec<String>,
        /// Demote one of the last two active voters.
        #[arg(long)]
        force: bool,
        /// Change it only if it is still at this version (its ETag).
        #[arg(long)]
        if_match: Option<String>,
    },
    /// Records that a node's join failed, at a step, with the last error.
    JoinFailed {
        node_id: String,
        /// The join step that failed, e.g. `join/raft-openbao`.
        #[arg(long)]
        step: String,
        /// The last error line.
        #[arg(long)]
        error: String,
    },
    /// Decommissions a member, recording why.
    Decommission {
        node_id: String,
        #[arg(long)]
        reason: String,
        /// Even when fewer than two active voters would remain.
        #[arg(long)]
        force: bool,
    },
    /// A member's events, oldest first.
    History { node_id: String },
}

#[derive(Subcommand, Debug)]
pub enum UpgradesCmd {
    /// Lists the upgrades, in the order they were planned.
    List {
        /// Read as of this log position (`asOf`), or as of an RFC 3339
        /// time (the last event at or before it).
        #[arg(long)]
        as_of: Option<String>,
    },
    /// Shows one upgrade, node by node.
    Get {
        id: String,
        /// Read as of this log position (`asOf`), or as of an RFC 3339
        /// time (the last event at or before it).
        #[arg(long)]
        as_of: Option<String>,
    },
    /// Plans an upgrade to a registered release.
    Create {
        #[arg(long)]
        target_release: String,
        /// `now` (default) or `stage-only`.
        #[arg(long)]
        mode: Option<String>,
        /// Where the pre-upgrade backup goes: `node` or `target`.
        #[arg(long)]
        backup: Option<String>,
    },
    /// Applies a staged upgrade.
    Apply { id: String },
    /// Cancels an upgrade.
    Cancel { id: String },
    /// Rolls a done or failed upgrade back.
    Rollback {
        id: String,
        /// Restore its pre-upgrade backup first.
        #[arg(long)]
        restore_backup: bool,
    },
    /// Acknowledges a failed upgrade, clearing the write freeze.
    Acknowledge { id: String },
}

/// A connection to a server.
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    pub format: Format,
}

/// What an exchange ended with: the answer, or, for one outside 2xx, its
/// exit code (the error is printed already).
pub enum Reply {
    Ok(Value),
    Failed(i32),
}

/// Why a command did not get to an answer.
#[derive(Debug)]
pub enum Failure {
    /// The command line or a file it names is wrong: exit 2.
    Usage(String),
    /// The server cannot be reached, or an answer broke off: exit 1.
    Unreachable(String),
    /// Whoever read the output stopped reading (`| head`): exit 0.
    Closed,
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::BrokenPipe => Failure::Closed,
            _ => Failure::Unreachable(e.to_string()),
        }
    }
}

/// Prints a line on standard output.
/// Prints a line of output. Whatever the record holds, no character of it
/// reaches the terminal raw if it could change how the text reads.
fn say(line: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", output::for_terminal(line))?;
    out.flush()?;
    Ok(())
}

type Result<T> = std::result::Result<T, Failure>;

fn usage(msg: impl Into<String>) -> Failure {
    Failure::Usage(msg.into())
}

fn read(path: &PathBuf, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| usage(format!("{what} {}: {e}", path.display())))
}

impl Client {
    pub fn new(args: &RemoteArgs) -> Result<Client> {
        let Some(server) = &args.server else {
            return Err(usage(
                "this command talks to a running server: give --server URL (or STRATUM_SERVER)",
            ));
        };
        let base = server.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(usage(format!(
                "--server {server}: must start with http:// or https://"
            )));
        }
        let token = match &args.token_file {
            Some(path) => Some(
                String::from_utf8(read(path, "--token-file")?)
                    .map_err(|_| usage("--token-file does not hold text"))?
                    .trim()
                    .to_owned(),
            ),
            None => std::env::var("STRATUM_TOKEN")
                .ok()
                .map(|t| t.trim().to_owned()),
        }
        .filter(|t| !t.is_empty());
        let mut http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // A redirect is the answer (exit 3), never followed: a POST
            // must not turn into a GET somewhere else.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("stratum-cli/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &args.ca_cert {
            let certs = reqwest::Certificate::from_pem_bundle(&read(ca, "--ca-cert")?)
                .map_err(|e| usage(format!("--ca-cert {}: {e}", ca.display())))?;
            if certs.is_empty() {
                return Err(usage(format!(
                    "--ca-cert {}: no PEM certificate in it",
                    ca.display()
                )));
            }
            for cert in certs {
                http = http.add_root_certificate(cert);
            }
        }
        match (&args.client_cert, &args.client_key) {
            (Some(cert), Some(key)) => {
                let mut pem = read(cert, "--client-cert")?;
                pem.push(b'\n');
                pem.extend(read(key, "--client-key")?);
                http = http.identity(
                    reqwest::Identity::from_pem(&pem)
                        .map_err(|e| usage(format!("--client-cert and --client-key: {e}")))?,
                );
            }
            (None, None) => {}
            _ => return Err(usage("--client-cert and --client-key go together")),
        }
        Ok(Client {
            http: http.build().map_err(|e| usage(e.to_string()))?,
            base,
            token,
            format: Format::parse(&args.output),
        })
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
    ) -> reqwest::RequestBuilder {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        req
    }

    fn unreachable(&self, e: &reqwest::Error) -> Failure {
        Failure::Unreachable(format!("cannot reach {}: {}", self.base, chain(e)))
    }

    /// Sends a request; an answer outside 2xx is printed as the error it
    /// is and answered as its exit code.
    async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<std::result::Result<reqwest::Response, i32>> {
        let res = req.send().await.map_err(|e| self.unreachable(&e))?;
        let status = res.status();
        if status.is_success() {
            return Ok(Ok(res));
        }
        let text = res.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        print_error(status, &body);
        Ok(Err(exit_code(status)))
    }

    /// One exchange with a JSON answer.
    async fn json(&self, req: reqwest::RequestBuilder) -> Result<Reply> {
        Ok(match self.send(req).await? {
            Ok(res) => Reply::Ok(res.json().await.map_err(|e| self.unreachable(&e))?),
            Err(code) => Reply::Failed(code),
        })
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<Value>,
    ) -> Result<Reply> {
        let mut query = query.to_vec();
        for (k, v) in query.iter_mut() {
            if *k == "asOf" && !v.bytes().all(|c| c.is_ascii_digit()) {
                *v = self.position_at(v).await?;
            }
        }
        let mut req = self.request(method, path, &query);
        if let Some(body) = body {
            req = req.json(&body);
        }
        self.json(req).await
    }

    /// `--as-of` given as an RFC 3339 time: the position of the last event
    /// at or before it, found by bisecting the log through `GET
    /// /v1/admin/events` (which needs `audit:ReadEvents`), as the console
    /// does.
    async fn position_at(&self, time: &str) -> Result<String> {
        let t = chrono::DateTime::parse_from_rfc3339(time).map_err(|_| {
            usage(format!(
                "--as-of must be a log position or an RFC 3339 time such as 2026-12-01T10:00:00Z, not `{time}`"
            ))
        })?;
        let occurred = |p: u64| async move {
            let q = [("after", (p - 1).to_string()), ("limit", "1".to_owned())];
            match self
                .json(self.request(Method::GET, "/v1/admin/events", &q))
                .await?
            {
                Reply::Ok(v) => Ok(v["events"][0]["occurredAt"]
                    .as_str()
                    .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())),
                Reply::Failed(code) => Err(Failure::Usage(format!(
                    "--as-of {time}: the log could not be read to find its position (exit {code})"
                ))),
            }
        };
        let head = match self.json(self.request(Method::GET, "/readyz", &[])).await? {
            Reply::Ok(v) => v["position"].as_u64().unwrap_or(0),
            Reply::Failed(_) => 0,
        };
        // The last position at or before the time: [lo, hi] holds it.
        let (mut lo, mut hi) = (0u64, head);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match occurred(mid).await? {
                Some(at) if at <= t => lo = mid,
                _ => hi = mid - 1,
            }
        }
        if lo == 0 {
            return Err(usage(format!(
                "--as-of {time}: the log holds no event at or before it"
            )));
        }
        Ok(lo.to_string())
    }

    async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Reply> {
        self.call(Method::GET, path, query, None).await
    }

    async fn post(&self, path: &str, body: Option<Value>) -> Result<Reply> {
        self.call(Method::POST, path, &[], body).await
    }

    /// Every page of a list, following `nextCursor`.
    async fn all(&self, path: &str, query: Vec<(&'static str, String)>) -> Result<Reply> {
        self.all_of(path, query, "items").await
    }

    /// Every page of an answer whose pages hold their items under `key`,
    /// following `nextCursor`.
    async fn all_of(
        &self,
        path: &str,
        mut query: Vec<(&'static str, String)>,
        key: &str,
    ) -> Result<Reply> {
        query.push(("limit", "1000".to_owned()));
        let mut items = Vec::new();
        let mut seen = std::collections::HashSet::new();
        loop {
            let page = match self.get(path, &query).await? {
                Reply::Ok(v) => v,
                failed => return Ok(failed),
            };
            items.extend(page[key].as_array().cloned().unwrap_or_default());
            match page["nextCursor"].as_str() {
                Some(c) if !c.is_empty() && seen.insert(c.to_owned()) => {
                    query.retain(|(k, _)| *k != "cursor");
                    query.push(("cursor", c.to_owned()));
                }
                _ => return Ok(Reply::Ok(Value::Array(items))),
            }
        }
    }
}

/// An error and its causes, in one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// The exit code of an answer's status: its HTTP class.
pub fn exit_code(status: reqwest::StatusCode) -> i32 {
    match status.as_u16() / 100 {
        2 => 0,
        3 => 3,
        4 => 4,
        _ => 5,
    }
}

/// Prints an error answer: code, message, each field error, request id.
fn print_error(status: reqwest::StatusCode, body: &Value) {
    let say = |line: String| eprintln!("{}", output::for_terminal(&line));
    match (body["code"].as_str(), body["message"].as_str()) {
        (Some(code), Some(message)) => say(format!("error: {} {code}: {message}", status.as_u16())),
        _ if status.is_redirection() => say(format!(
            "error: {status}: the server redirects; give --server the address it answers on"
        )),
        _ => say(format!("error: {status}: {body}")),
    }
    for f in body["fieldErrors"].as_array().into_iter().flatten() {
        say(format!(
            "  {}: {}",
            f["field"].as_str().unwrap_or("?"),
            f["message"].as_str().unwrap_or("")
        ));
    }
    if let Some(id) = body["requestId"].as_str() {
        say(format!("  request id: {id}"));
    }
}

fn pairs(flag: &str, items: &[String]) -> Result<Option<Value>> {
    if items.is_empty() {
        return Ok(None);
    }
    let mut m = Map::new();
    for item in items {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| usage(format!("{flag} {item}: must be KEY=VALUE")))?;
        m.insert(k.to_owned(), Value::String(v.to_owned()));
    }
    Ok(Some(Value::Object(m)))
}

/// Query parameters: the ones given.
fn params(given: Vec<(&'static str, Option<String>)>) -> Vec<(&'static str, String)> {
    given
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

/// A path segment, percent-encoded.
fn seg(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// Runs a remote command; answers its exit code.
pub async fn run(args: &RemoteArgs, command: Cmd) -> anyhow_like::Result<i32> {
    let outcome = match Client::new(args) {
        Ok(client) => exchange(&client, command).await,
        Err(f) => Err(f),
    };
    match outcome {
        Ok(code) => Ok(code),
        Err(Failure::Usage(e)) => Err(anyhow_like::Error(e)),
        Err(Failure::Closed) => Ok(0),
        Err(Failure::Unreachable(e)) => {
            eprintln!("stratum: {e}");
            Ok(1)
        }
    }
}

const MEMBERS: &str = "/v1/admin/cluster/members";
const UPGRADES: &str = "/v1/admin/upgrades";

async fn exchange(c: &Client, command: Cmd) -> Result<i32> {
    let (reply, shape) = match command {
        Cmd::Members { command } => members(c, command).await?,
        Cmd::Upgrades { command } => upgrades(c, command).await?,
        Cmd::Peers { watch: true, .. } => return watch_peers(c).await,
        Cmd::Peers { as_of, .. } => (
            c.get("/v1/admin/cluster/peers", &params(vec![("asOf", as_of)]))
                .await?,
            Shape::Peers,
        ),
        Cmd::Membership { as_of } => (
            c.get(
                "/v1/admin/cluster/membership",
                &params(vec![("asOf", as_of)]),
            )
            .await?,
            Shape::Record,
        ),
        Cmd::Releases { command } => match command {
            ReleasesCmd::List => (
                c.all("/v1/admin/releases", Vec::new()).await?,
                Shape::Releases,
            ),
            ReleasesCmd::Register { file } => {
                let manifest: Value =
                    serde_json::from_slice(&read(&file, "--file")?).map_err(|e| {
                        usage(format!("{} is not a JSON manifest: {e}", file.display()))
                    })?;
                (
                    c.post("/v1/admin/releases", Some(manifest)).await?,
                    Shape::Record,
                )
            }
            ReleasesCmd::Import { .. } => unreachable!("a host command"),
        },
        Cmd::Alarms { active, as_of } => (
            c.all(
                "/v1/admin/alarms",
                params(vec![
                    ("active", active.then(|| "true".to_owned())),
                    ("asOf", as_of),
                ]),
            )
            .await?,
            Shape::Alarms,
        ),
        Cmd::Token { command } => tokens(c, command).await?,
        Cmd::Events { command } => match command {
            EventsCmd::List {
                after,
                limit,
                stream,
                event_type,
                actor,
            } => {
                let filters = params(vec![
                    ("stream", stream),
                    ("type", event_type),
                    ("actor", actor),
                ]);
                (list_events(c, after, limit, filters).await?, Shape::Events)
            }
            EventsCmd::Tail { after } => return tail(c, after).await,
            EventsCmd::Export { after, until, .. } => return export(c, after, until).await,
            EventsCmd::Verify {
                expect_head,
                allow_empty,
                ..
            } => return verify(c, expect_head, allow_empty).await,
            EventsCmd::Import { .. } => {
                return Err(usage(
                    "events import loads an export into a database on this host: it takes --database-url, not --server",
                ))
            }
        },
        Cmd::Replay { .. } => {
            return Err(usage(
                "replay reads a database on this host or an export: with a server, write its log with `stratum events export --server … > log.jsonl` and run `stratum replay --file log.jsonl`",
            ))
        }
        Cmd::Serve(_) | Cmd::Completions { .. } | Cmd::Man => {
            unreachable!("not remote commands")
        }
    };
    Ok(match reply {
        Reply::Ok(v) => {
            say(&output::render(&v, shape, c.format))?;
            0
        }
        Reply::Failed(code) => code,
    })
}

/// `events verify --server`: the server recomputes its own chain (its
/// word: for a check of one's own, `events export` and `verify --file`),
/// and a head written down earlier must still be in it. Prints what the
/// host's verify prints.
async fn verify(
    c: &Client,
    expect: Option<stratum_domain::log::RecordedHead>,
    allow_empty: bool,
) -> Result<i32> {
    let v = match c.get("/v1/admin/events/verify", &[]).await? {
        Reply::Ok(v) => v,
        Reply::Failed(code) => return Ok(code),
    };
    let position = v["position"].as_u64().unwrap_or(0);
    if v["verified"] != true {
        say(&format!(
            "broken at position {position}: {}",
            v["reason"]
                .as_str()
                .unwrap_or("the server says the chain breaks there")
        ))?;
        return Ok(1);
    }
    if position == 0 && !allow_empty {
        say("broken at position 1: the log holds no events, and an empty log proves nothing (say --allow-empty to accept one)")?;
        return Ok(1);
    }
    if let Some(head) = expect {
        let at = match c
            .get(
                "/v1/admin/events",
                &[
                    ("after", head.position.saturating_sub(1).to_string()),
                    ("limit", "1".to_owned()),
                ],
            )
            .await?
        {
            Reply::Ok(v) => v["events"][0]["hash"].as_str().map(str::to_owned),
            Reply::Failed(code) => return Ok(code),
        };
        let want = hex::encode(head.hash);
        match at {
            Some(h) if h == want => {}
            Some(h) => {
                say(&format!(
                    "broken at position {}: its hash is {h}, not the {want} written down",
                    head.position
                ))?;
                return Ok(1);
            }
            None => {
                say(&format!(
                    "broken at position {}: the log no longer reaches the head written down (it ends at {position})",
                    head.position
                ))?;
                return Ok(1);
            }
        }
    }
    say(&format!(
        "verified: {position} events, head {position}:{}",
        v["hash"].as_str().unwrap_or_default()
    ))?;
    Ok(0)
}

async fn members(c: &Client, command: MembersCmd) -> Result<(Reply, Shape)> {
    let member = |id: &str, then: &str| format!("{MEMBERS}/{}{then}", seg(id));
    Ok(match command {
        MembersCmd::List {
            state,
            role,
            rack,
            as_of,
        } => (
            c.all(
                MEMBERS,
                params(vec![
                    ("state", state),
                    ("role", role),
                    ("rack", rack),
                    ("asOf", as_of),
                ]),
            )
            .await?,
            Shape::Members,
        ),
        MembersCmd::Get { node_id, as_of } => (
            c.get(&member(&node_id, ""), &params(vec![("asOf", as_of)]))
                .await?,
            Shape::Record,
        ),
        MembersCmd::Update {
            node_id,
            role,
            mgmt_ip,
            labels,
            bindings,
            force,
            if_match,
        } => {
            let mut body = Map::new();
            if let Some(r) = role {
                body.insert("role".into(), r.into());
            }
            if let Some(ip) = mgmt_ip {
                body.insert("mgmtIp".into(), ip.into());
            }
            if let Some(l) = pairs("--label", &labels)? {
                body.insert("labels".into(), l);
            }
            if let Some(b) = pairs("--binding", &bindings)? {
                body.insert("bindings".into(), b);
            }
            if force {
                body.insert("force".into(), true.into());
            }
            let mut req = c
                .request(Method::PATCH, &member(&node_id, ""), &[])
                .json(&body);
            if let Some(tag) = if_match {
                req = req.header(reqwest::header::IF_MATCH, tag);
            }
            (c.json(req).await?, Shape::Record)
        }
        MembersCmd::JoinFailed {
            node_id,
            step,
            error,
        } => (
            c.post(
                &member(&node_id, "/join-failed"),
                Some(json!({"step": step, "error": error})),
            )
            .await?,
            Shape::Record,
        ),
        MembersCmd::Decommission {
            node_id,
            reason,
            force,
        } => {
            let mut body = json!({"reason": reason});
            if force {
                body["force"] = true.into();
            }
            (
                c.post(&member(&node_id, "/decommission"), Some(body))
                    .await?,
                Shape::Record,
            )
        }
        MembersCmd::History { node_id } => (
            c.all_of(&member(&node_id, "/history"), Vec::new(), "events")
                .await?,
            Shape::Events,
        ),
    })
}

async fn upgrades(c: &Client, command: UpgradesCmd) -> Result<(Reply, Shape)> {
    let action = |id: &str, action: &str| format!("{UPGRADES}/{}/{action}", seg(id));
    Ok(match command {
        UpgradesCmd::List { as_of } => (
            c.all(UPGRADES, params(vec![("asOf", as_of)])).await?,
            Shape::Upgrades,
        ),
        UpgradesCmd::Get { id, as_of } => (
            c.get(
                &format!("{UPGRADES}/{}", seg(&id)),
                &params(vec![("asOf", as_of)]),
            )
            .await?,
            Shape::Upgrade,
        ),
        UpgradesCmd::Create {
            target_release,
            mode,
            backup,
        } => {
            let mut body = json!({"targetRelease": target_release});
            if let Some(m) = mode {
                body["mode"] = m.into();
            }
            if let Some(b) = backup {
                body["backup"] = json!({"location": b});
            }
            (c.post(UPGRADES, Some(body)).await?, Shape::Upgrade)
        }
        UpgradesCmd::Apply { id } => (c.post(&action(&id, "apply"), None).await?, Shape::Upgrade),
        UpgradesCmd::Cancel { id } => (c.post(&action(&id, "cancel"), None).await?, Shape::Upgrade),
        UpgradesCmd::Rollback { id, restore_backup } => (
            c.post(
                &action(&id, "rollback"),
                Some(json!({"restoreBackup": restore_backup})),
            )
            .await?,
            Shape::Upgrade,
        ),
        UpgradesCmd::Acknowledge { id } => (
            c.post(&action(&id, "acknowledge"), None).await?,
            Shape::Upgrade,
        ),
    })
}

async fn tokens(c: &Client, command: TokenCmd) -> Result<(Reply, Shape)> {
    Ok(match command {
        TokenCmd::Create {
            principal,
            policies,
            expires_at,
            ..
        } => {
            let mut body = json!({"principal": principal, "policies": policies});
            if let Some(t) = expires_at {
                body["expiresAt"] = t.to_rfc3339().into();
            }
            (
                c.post("/v1/admin/iam/tokens", Some(body)).await?,
                Shape::Record,
            )
        }
        TokenCmd::List { .. } => (
            c.all("/v1/admin/iam/tokens", Vec::new()).await?,
            Shape::Tokens,
        ),
        TokenCmd::Revoke { id, .. } => (
            c.post(&format!("/v1/admin/iam/tokens/{}/revoke", seg(&id)), None)
                .await?,
            Shape::Record,
        ),
    })
}

/// Up to `limit` events after `after` that pass the filters: the server
/// scans `limit` positions a page, so pages are followed (`nextAfter`)
/// until enough events or the head.
async fn list_events(
    c: &Client,
    mut after: u64,
    limit: u32,
    filters: Vec<(&'static str, String)>,
) -> Result<Reply> {
    let mut events = Vec::new();
    while events.len() < limit as usize {
        let mut q = filters.clone();
        q.push(("after", after.to_string()));
        // The most positions a page covers: fewest requests.
        q.push(("limit", "1000".to_owned()));
        let page = match c.get("/v1/admin/events", &q).await? {
            Reply::Ok(v) => v,
            failed => return Ok(failed),
        };
        events.extend(page["events"].as_array().cloned().unwrap_or_default());
        let next = page["nextAfter"].as_u64().unwrap_or(after);
        if next == after {
            break;
        }
        after = next;
    }
    events.truncate(limit as usize);
    Ok(Reply::Ok(Value::Array(events)))
}

/// Waits before trying a server again.
async fn pause(what: &str, why: &str) {
    eprintln!("stratum: {what} ({why}); trying again");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// `peers --watch`: the lists, then again each time the generation moves
/// (the API's long-poll), through server restarts.
async fn watch_peers(c: &Client) -> Result<i32> {
    let mut after: Option<u64> = None;
    loop {
        let mut q = Vec::new();
        if let Some(g) = after {
            q.push(("after", g.to_string()));
            q.push(("waitSeconds", "60".to_owned()));
        }
        match c.get("/v1/admin/cluster/peers", &q).await {
            Ok(Reply::Ok(v)) => {
                let generation = v["generation"].as_u64();
                if generation != after {
                    say(&output::render(&v, Shape::Peers, c.format))?;
                }
                after = generation.or(after);
            }
            Ok(Reply::Failed(5)) => pause("the server is unavailable", "5xx").await,
            Ok(Reply::Failed(code)) => return Ok(code),
            Err(Failure::Unreachable(e)) => pause("the server cannot be reached", &e).await,
            Err(f) => return Err(f),
        }
    }
}

/// `events tail`: follows the event stream from `after` (default: the
/// head), resuming from the last event id seen when the stream breaks.
async fn tail(c: &Client, after: Option<u64>) -> Result<i32> {
    use eventsource_stream::Eventsource;
    let mut last = match after {
        Some(a) => a,
        None => loop {
            // Only what comes next: the head, as `/readyz` tells it.
            match c.get("/readyz", &[]).await {
                Ok(Reply::Ok(v)) => break v["position"].as_u64().unwrap_or(0),
                Ok(Reply::Failed(5)) => pause("the server is not ready", "5xx").await,
                Ok(Reply::Failed(code)) => return Ok(code),
                Err(Failure::Unreachable(e)) => pause("the server cannot be reached", &e).await,
                Err(f) => return Err(f),
            }
        },
    };
    loop {
        let req = c
            .request(
                Method::GET,
                "/v1/admin/events/stream",
                &[("after", last.to_string())],
            )
            .header("Last-Event-ID", last.to_string());
        let res = match c.send(req).await {
            Ok(Ok(res)) => res,
            Ok(Err(5)) => {
                pause("the stream is unavailable", "5xx").await;
                continue;
            }
            Ok(Err(code)) => return Ok(code),
            Err(Failure::Unreachable(e)) => {
                pause("the server cannot be reached", &e).await;
                continue;
            }
            Err(f) => return Err(f),
        };
        let mut events = res.bytes_stream().eventsource();
        while let Some(ev) = events.next().await {
            match ev {
                Ok(ev) => {
                    // The id is the event's position: where to resume.
                    let Ok(position) = ev.id.parse::<u64>() else {
                        continue;
                    };
                    if position <= last {
                        continue;
                    }
                    let Ok(doc) = serde_json::from_str::<Value>(&ev.data) else {
                        continue;
                    };
                    last = position;
                    say(&output::event_line(&doc, c.format))?;
                }
                Err(e) => {
                    pause("the stream broke", &e.to_string()).await;
                    break;
                }
            }
        }
    }
}

/// `events export --server`: the lines the host's export writes, from the
/// server's `GET /v1/admin/events/export`.
async fn export(c: &Client, after: u64, until: Option<u64>) -> Result<i32> {
    use std::io::Write;
    let mut q = vec![("after", after.to_string())];
    if let Some(u) = until {
        q.push(("until", u.to_string()));
    }
    let res = match c
        .send(c.request(Method::GET, "/v1/admin/events/export", &q))
        .await?
    {
        Ok(res) => res,
        Err(code) => return Ok(code),
    };
    let mut out = std::io::stdout().lock();
    let mut body = res.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk
            .map_err(|e| Failure::Unreachable(format!("the export broke off: {}", chain(&e))))?;
        out.write_all(&chunk)?;
    }
    out.flush()?;
    Ok(0)
}
