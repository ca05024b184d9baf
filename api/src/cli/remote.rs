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

use super::output::{self, Format, View};
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
        /// joining, active, failed, decommissioning or decommissioned.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        role: Option<String>,
        #[arg(long)]
        rack: Option<String>,
        /// Read as of a log position or an RFC 3339 time.
        #[arg(long)]
        as_of: Option<String>,
    },
    /// Shows one member.
    Get {
        node_id: String,
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
    /// Lists the upgrades, newest first.
    List {
        #[arg(long)]
        as_of: Option<String>,
    },
    /// Shows one upgrade, node by node.
    Get {
        id: String,
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

/// What an HTTP exchange ended with: the answer, or why there is none.
pub enum Reply {
    Ok(Value),
    /// An answer outside 2xx: its exit code is printed already.
    Failed(i32),
}

fn err(msg: impl Into<String>) -> anyhow_like::Error {
    anyhow_like::Error(msg.into())
}

fn read(path: &PathBuf, what: &str) -> anyhow_like::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| err(format!("{what} {}: {e}", path.display())))
}

impl Client {
    pub fn new(args: &RemoteArgs) -> anyhow_like::Result<Client> {
        let Some(server) = &args.server else {
            return Err(err(
                "this command talks to a running server: give --server URL (or STRATUM_SERVER)",
            ));
        };
        let base = server.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(err(format!(
                "--server {server}: must start with http:// or https://"
            )));
        }
        let token = match &args.token_file {
            Some(path) => Some(
                String::from_utf8(read(path, "--token-file")?)
                    .map_err(|_| err("--token-file does not hold text"))?
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
            .user_agent(concat!("stratum-cli/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &args.ca_cert {
            for cert in reqwest::Certificate::from_pem_bundle(&read(ca, "--ca-cert")?)
                .map_err(|e| err(format!("--ca-cert {}: {e}", ca.display())))?
            {
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
                        .map_err(|e| err(format!("--client-cert and --client-key: {e}")))?,
                );
            }
            (None, None) => {}
            _ => return Err(err("--client-cert and --client-key go together")),
        }
        Ok(Client {
            http: http.build().map_err(|e| err(e.to_string()))?,
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

    /// One exchange; an answer outside 2xx is printed as the error it is.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<Value>,
    ) -> anyhow_like::Result<Reply> {
        let mut req = self.request(method, path, query);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let res = req
            .send()
            .await
            .map_err(|e| err(format!("cannot reach {}: {}", self.base, chain(&e))))?;
        let status = res.status();
        let text = res
            .text()
            .await
            .map_err(|e| err(format!("{}: {}", self.base, chain(&e))))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            Ok(Reply::Ok(value))
        } else {
            print_error(status, &value);
            Ok(Reply::Failed(exit_code(status)))
        }
    }

    /// Every page of a list, following `nextCursor`.
    async fn all(&self, path: &str, mut query: Vec<(&str, String)>) -> anyhow_like::Result<Reply> {
        let mut items = Vec::new();
        loop {
            let page = match self.call(Method::GET, path, &query, None).await? {
                Reply::Ok(v) => v,
                failed => return Ok(failed),
            };
            items.extend(page["items"].as_array().cloned().unwrap_or_default());
            match page["nextCursor"].as_str() {
                Some(c) if !c.is_empty() => {
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
    let e = &body["error"];
    let e = if e.is_object() { e } else { body };
    match (e["code"].as_str(), e["message"].as_str()) {
        (Some(code), Some(message)) => eprintln!("error: {} {code}: {message}", status.as_u16()),
        _ => eprintln!("error: {status}: {body}"),
    }
    for f in e["fieldErrors"].as_array().into_iter().flatten() {
        eprintln!(
            "  {}: {}",
            f["field"].as_str().unwrap_or("?"),
            f["message"].as_str().unwrap_or("")
        );
    }
    if let Some(id) = e["requestId"].as_str() {
        eprintln!("  request id: {id}");
    }
}

fn pairs(flag: &str, items: &[String]) -> anyhow_like::Result<Option<Value>> {
    if items.is_empty() {
        return Ok(None);
    }
    let mut m = Map::new();
    for item in items {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| err(format!("{flag} {item}: must be KEY=VALUE")))?;
        m.insert(k.to_owned(), Value::String(v.to_owned()));
    }
    Ok(Some(Value::Object(m)))
}

fn as_of(q: &mut Vec<(&'static str, String)>, as_of: Option<String>) {
    if let Some(a) = as_of {
        q.push(("asOf", a));
    }
}

/// A path segment, percent-encoded.
fn seg(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// Runs a remote command; answers its exit code: a server that cannot
/// be reached, or an answer that broke off, is 1.
pub async fn run(args: &RemoteArgs, command: Cmd) -> anyhow_like::Result<i32> {
    let client = Client::new(args)?;
    match exchange(&client, command).await {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("stratum: {e}");
            Ok(1)
        }
    }
}

async fn exchange(c: &Client, command: Cmd) -> anyhow_like::Result<i32> {
    const MEMBERS: &str = "/v1/admin/cluster/members";
    const UPGRADES: &str = "/v1/admin/upgrades";
    let (reply, view) = match command {
        Cmd::Members { command } => match command {
            MembersCmd::List {
                state,
                role,
                rack,
                as_of: at,
            } => {
                let mut q = Vec::new();
                for (k, v) in [("state", state), ("role", role), ("rack", rack)] {
                    if let Some(v) = v {
                        q.push((k, v));
                    }
                }
                as_of(&mut q, at);
                (c.all(MEMBERS, q).await?, View::Members)
            }
            MembersCmd::Get { node_id, as_of: at } => {
                let mut q = Vec::new();
                as_of(&mut q, at);
                let path = format!("{MEMBERS}/{}", seg(&node_id));
                (c.call(Method::GET, &path, &q, None).await?, View::Object)
            }
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
                let path = format!("{MEMBERS}/{}", seg(&node_id));
                let mut req = c.request(Method::PATCH, &path, &[]).json(&body);
                if let Some(tag) = if_match {
                    req = req.header(reqwest::header::IF_MATCH, tag);
                }
                (send(c, req).await?, View::Object)
            }
            MembersCmd::JoinFailed {
                node_id,
                step,
                error,
            } => {
                let path = format!("{MEMBERS}/{}/join-failed", seg(&node_id));
                let body = json!({"step": step, "error": error});
                (
                    c.call(Method::POST, &path, &[], Some(body)).await?,
                    View::Object,
                )
            }
            MembersCmd::Decommission {
                node_id,
                reason,
                force,
            } => {
                let path = format!("{MEMBERS}/{}/decommission", seg(&node_id));
                let mut body = json!({"reason": reason});
                if force {
                    body["force"] = true.into();
                }
                (
                    c.call(Method::POST, &path, &[], Some(body)).await?,
                    View::Object,
                )
            }
            MembersCmd::History { node_id } => {
                let path = format!("{MEMBERS}/{}/history", seg(&node_id));
                let reply = match c.call(Method::GET, &path, &[], None).await? {
                    Reply::Ok(v) => Reply::Ok(v["events"].clone()),
                    failed => failed,
                };
                (reply, View::Events)
            }
        },
        Cmd::Peers { watch, as_of: at } => {
            let mut q = Vec::new();
            as_of(&mut q, at);
            if watch {
                return watch_peers(c, q).await;
            }
            (
                c.call(Method::GET, "/v1/admin/cluster/peers", &q, None)
                    .await?,
                View::Peers,
            )
        }
        Cmd::Membership { as_of: at } => {
            let mut q = Vec::new();
            as_of(&mut q, at);
            (
                c.call(Method::GET, "/v1/admin/cluster/membership", &q, None)
                    .await?,
                View::Object,
            )
        }
        Cmd::Upgrades { command } => match command {
            UpgradesCmd::List { as_of: at } => {
                let mut q = Vec::new();
                as_of(&mut q, at);
                (c.all(UPGRADES, q).await?, View::Upgrades)
            }
            UpgradesCmd::Get { id, as_of: at } => {
                let mut q = Vec::new();
                as_of(&mut q, at);
                let path = format!("{UPGRADES}/{}", seg(&id));
                (c.call(Method::GET, &path, &q, None).await?, View::Upgrade)
            }
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
                (
                    c.call(Method::POST, UPGRADES, &[], Some(body)).await?,
                    View::Upgrade,
                )
            }
            UpgradesCmd::Apply { id } => {
                (upgrade_action(c, &id, "apply", None).await?, View::Upgrade)
            }
            UpgradesCmd::Cancel { id } => {
                (upgrade_action(c, &id, "cancel", None).await?, View::Upgrade)
            }
            UpgradesCmd::Rollback { id, restore_backup } => (
                upgrade_action(
                    c,
                    &id,
                    "rollback",
                    Some(json!({"restoreBackup": restore_backup})),
                )
                .await?,
                View::Upgrade,
            ),
            UpgradesCmd::Acknowledge { id } => (
                upgrade_action(c, &id, "acknowledge", None).await?,
                View::Upgrade,
            ),
        },
        Cmd::Releases { command } => match command {
            ReleasesCmd::List => (
                c.all("/v1/admin/releases", Vec::new()).await?,
                View::Releases,
            ),
            ReleasesCmd::Register { file } => {
                let manifest: Value = serde_json::from_slice(&read(&file, "--file")?)
                    .map_err(|e| err(format!("{} is not a JSON manifest: {e}", file.display())))?;
                (
                    c.call(Method::POST, "/v1/admin/releases", &[], Some(manifest))
                        .await?,
                    View::Object,
                )
            }
            ReleasesCmd::Import { .. } => unreachable!("a host command"),
        },
        Cmd::Alarms { active } => {
            let q = if active {
                vec![("active", "true".to_owned())]
            } else {
                Vec::new()
            };
            (c.all("/v1/admin/alarms", q).await?, View::Alarms)
        }
        Cmd::Token { command } => match command {
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
                    c.call(Method::POST, "/v1/admin/iam/tokens", &[], Some(body))
                        .await?,
                    View::Object,
                )
            }
            TokenCmd::List { .. } => (
                c.all("/v1/admin/iam/tokens", Vec::new()).await?,
                View::Tokens,
            ),
            TokenCmd::Revoke { id, .. } => {
                let path = format!("/v1/admin/iam/tokens/{}/revoke", seg(&id));
                (c.call(Method::POST, &path, &[], None).await?, View::Object)
            }
        },
        Cmd::Events { command } => match command {
            EventsCmd::List {
                after,
                limit,
                stream,
                event_type,
                actor,
            } => {
                let mut q = vec![("after", after.to_string()), ("limit", limit.to_string())];
                for (k, v) in [("stream", stream), ("type", event_type), ("actor", actor)] {
                    if let Some(v) = v {
                        q.push((k, v));
                    }
                }
                let reply = match c.call(Method::GET, "/v1/admin/events", &q, None).await? {
                    Reply::Ok(v) => Reply::Ok(v["events"].clone()),
                    failed => failed,
                };
                (reply, View::Events)
            }
            EventsCmd::Tail { after } => return tail(c, after).await,
            EventsCmd::Export { after, until, .. } => return export(c, after, until).await,
            EventsCmd::Verify { .. } | EventsCmd::Import { .. } => {
                unreachable!("host commands")
            }
        },
        Cmd::Serve(_) | Cmd::Replay { .. } | Cmd::Completions { .. } | Cmd::Man => {
            unreachable!("not remote commands")
        }
    };
    Ok(match reply {
        Reply::Ok(v) => {
            println!("{}", output::render(&v, view, c.format));
            0
        }
        Reply::Failed(code) => code,
    })
}

async fn send(c: &Client, req: reqwest::RequestBuilder) -> anyhow_like::Result<Reply> {
    let res = req
        .send()
        .await
        .map_err(|e| err(format!("cannot reach {}: {}", c.base, chain(&e))))?;
    let status = res.status();
    let value: Value = res.json().await.unwrap_or(Value::Null);
    if status.is_success() {
        Ok(Reply::Ok(value))
    } else {
        print_error(status, &value);
        Ok(Reply::Failed(exit_code(status)))
    }
}

async fn upgrade_action(
    c: &Client,
    id: &str,
    action: &str,
    body: Option<Value>,
) -> anyhow_like::Result<Reply> {
    let path = format!("/v1/admin/upgrades/{}/{action}", seg(id));
    c.call(Method::POST, &path, &[], body).await
}

/// `peers --watch`: the lists, then again each time the generation moves
/// (the API's long-poll).
async fn watch_peers(c: &Client, q: Vec<(&'static str, String)>) -> anyhow_like::Result<i32> {
    let mut after: Option<u64> = None;
    loop {
        let mut q = q.clone();
        if let Some(g) = after {
            q.push(("after", g.to_string()));
            q.push(("waitSeconds", "60".to_owned()));
        }
        match c
            .call(Method::GET, "/v1/admin/cluster/peers", &q, None)
            .await?
        {
            Reply::Ok(v) => {
                let generation = v["generation"].as_u64();
                if generation != after {
                    println!("{}", output::render(&v, View::Peers, c.format));
                }
                after = generation.or(after);
            }
            Reply::Failed(code) => return Ok(code),
        }
    }
}

/// `events tail`: follows the event stream, reconnecting from the last
/// event seen.
async fn tail(c: &Client, after: Option<u64>) -> anyhow_like::Result<i32> {
    use eventsource_stream::Eventsource;
    let mut last = match after {
        Some(a) => a,
        // Only what comes next: start at the head.
        None => match c.call(Method::GET, "/readyz", &[], None).await? {
            Reply::Ok(v) => v["position"].as_u64().unwrap_or(0),
            Reply::Failed(code) => return Ok(code),
        },
    };
    loop {
        let res = c
            .request(
                Method::GET,
                "/v1/admin/events/stream",
                &[("after", last.to_string())],
            )
            .header("Last-Event-ID", last.to_string())
            .send()
            .await;
        let res = match res {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                let status = r.status();
                let body = r.json().await.unwrap_or(Value::Null);
                print_error(status, &body);
                if status.is_server_error() {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                return Ok(exit_code(status));
            }
            Err(e) => {
                eprintln!("stratum: the stream broke ({}); reconnecting", chain(&e));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut events = res.bytes_stream().eventsource();
        while let Some(ev) = events.next().await {
            match ev {
                Ok(ev) if ev.event == "message" || ev.event.is_empty() || !ev.data.is_empty() => {
                    let Ok(doc) = serde_json::from_str::<Value>(&ev.data) else {
                        continue;
                    };
                    if let Some(p) = doc["position"].as_u64() {
                        last = last.max(p);
                    }
                    println!("{}", output::event_line(&doc, c.format));
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!("stratum: the stream broke ({e}); reconnecting");
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `events export --server`: the export lines the host command writes, from
/// the server's `GET /v1/admin/events/export`.
async fn export(c: &Client, after: u64, until: Option<u64>) -> anyhow_like::Result<i32> {
    use std::io::Write;
    let mut q = vec![("after", after.to_string())];
    if let Some(u) = until {
        q.push(("until", u.to_string()));
    }
    let res = c
        .request(Method::GET, "/v1/admin/events/export", &q)
        .send()
        .await
        .map_err(|e| err(format!("cannot reach {}: {}", c.base, chain(&e))))?;
    let status = res.status();
    if !status.is_success() {
        let body = res.json().await.unwrap_or(Value::Null);
        print_error(status, &body);
        return Ok(exit_code(status));
    }
    let mut out = std::io::stdout().lock();
    let mut body = res.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| err(format!("the export broke off: {}", chain(&e))))?;
        out.write_all(&chunk)?;
    }
    out.flush()?;
    Ok(0)
}
