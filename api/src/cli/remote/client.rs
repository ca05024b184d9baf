//! The remote CLI's connection: requests with the token, answers by HTTP
//! class, errors printed in full, exit codes.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Map, Value};

use super::super::output::{self, Format};
use super::RemoteArgs;

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
pub(super) fn say(line: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", output::for_terminal(line))?;
    out.flush()?;
    Ok(())
}

pub(super) type Result<T> = std::result::Result<T, Failure>;

pub(super) fn usage(msg: impl Into<String>) -> Failure {
    Failure::Usage(msg.into())
}

pub(super) fn read(path: &PathBuf, what: &str) -> Result<Vec<u8>> {
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

    pub(super) fn request(
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

    pub(super) fn unreachable(&self, e: &reqwest::Error) -> Failure {
        Failure::Unreachable(format!("cannot reach {}: {}", self.base, chain(e)))
    }

    /// Sends a request; an answer outside 2xx is printed as the error it
    /// is and answered as its exit code.
    pub(super) async fn send(
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
    pub(super) async fn json(&self, req: reqwest::RequestBuilder) -> Result<Reply> {
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
    pub(super) async fn position_at(&self, time: &str) -> Result<String> {
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

    pub(super) async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Reply> {
        self.call(Method::GET, path, query, None).await
    }

    pub(super) async fn post(&self, path: &str, body: Option<Value>) -> Result<Reply> {
        self.call(Method::POST, path, &[], body).await
    }

    /// Every page of a list, following `nextCursor`.
    pub(super) async fn all(
        &self,
        path: &str,
        query: Vec<(&'static str, String)>,
    ) -> Result<Reply> {
        self.all_of(path, query, "items").await
    }

    /// Every page of an answer whose pages hold their items under `key`,
    /// following `nextCursor`.
    pub(super) async fn all_of(
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
pub(super) fn chain(e: &dyn std::error::Error) -> String {
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
pub(super) fn print_error(status: reqwest::StatusCode, body: &Value) {
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

pub(super) fn pairs(flag: &str, items: &[String]) -> Result<Option<Value>> {
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
pub(super) fn params(given: Vec<(&'static str, Option<String>)>) -> Vec<(&'static str, String)> {
    given
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

/// A path segment, percent-encoded.
pub(super) fn seg(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}
