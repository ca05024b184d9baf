//! The remote CLI: commands that talk to a running server over HTTP or
//! HTTPS (`--server URL`, `STRATUM_SERVER`), with a token from
//! `STRATUM_TOKEN` or `--token-file`.
//!
//! Answers print as a table, or as JSON or YAML (`-o json|yaml`). The exit
//! code follows the answer's HTTP class: 0 for 2xx, 3, 4 or 5 for 3xx, 4xx
//! or 5xx; 1 when the server cannot be reached; 2 for usage. An error
//! prints its code, message, every field error and the request id.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{json, Map, Value};

mod client;
mod stream;
mod watch;

pub use client::{exit_code, Client, Failure, Reply};
use client::{pairs, params, read, say, seg, usage, Result};
use stream::{export, tail, watch_peers};

use super::output::{self, Shape};
use super::{Cmd, EventsCmd, LogCmd, ReleasesCmd, TokenCmd};

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
pub enum ReplicasCmd {
    /// Lists every replica registered on the database: live, silent (no
    /// heartbeat for 15 s) or stopped; the log's storage level; the agreed
    /// process-manager settings and the replicas whose settings differ.
    List,
    /// Finalizes an upgrade of stratum itself: the log moves to the newest
    /// storage level of the build answering, and its settings become the
    /// agreed ones. Refused, naming them, while a live replica cannot read
    /// the level or has other settings. Until it, the previous build can
    /// be started again on the database; after it, it refuses it.
    Finalize {
        /// The level to finalize (the answering build's newest by default).
        #[arg(long)]
        level: Option<u16>,
    },
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

/// Runs a remote command; answers its exit code.
pub async fn run(args: &RemoteArgs, command: Cmd) -> anyhow::Result<i32> {
    let outcome = match Client::new(args) {
        Ok(client) => exchange(&client, command).await,
        Err(f) => Err(f),
    };
    match outcome {
        Ok(code) => Ok(code),
        Err(Failure::Usage(e)) => Err(anyhow::Error::msg(e)),
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
        Cmd::Replicas { command } => match command {
            ReplicasCmd::List => (
                c.get("/v1/admin/replicas", &[]).await?,
                Shape::Replicas,
            ),
            ReplicasCmd::Finalize { level } => (
                c.post(
                    "/v1/admin/replicas/finalize",
                    Some(match level {
                        Some(l) => serde_json::json!({ "level": l }),
                        None => serde_json::json!({}),
                    }),
                )
                .await?,
                Shape::Storage,
            ),
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
        Cmd::Log {
            command:
                LogCmd::Watch {
                    key,
                    state,
                    witness_policy,
                },
        } => return watch::watch(c, &key, &state, witness_policy.as_deref()).await,
        Cmd::Log {
            command: LogCmd::Keygen { .. },
        }
        | Cmd::Witness { .. }
        | Cmd::Serve(_)
        | Cmd::Completions { .. }
        | Cmd::Man => {
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
