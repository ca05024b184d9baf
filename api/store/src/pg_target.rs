//! Connecting to a PostgreSQL cluster rather than a host: libpq's host
//! lists (`postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write`
//! and `host=h1,h2 port=5432 dbname=db ...`) with `target_session_attrs`
//! as libpq defines them. sqlx connects to one host; this module probes the
//! hosts in order, each within a short connect timeout, and names the one
//! whose session has the attributes asked for. [`crate::postgres`] points
//! its pool, its writer's connection, `LISTEN` and the advisory lock at it,
//! and moves them when it stops being it.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};

use super::{StoreError, StoreResult};

/// How long a probe waits for a host that does not answer, unless the URL
/// says otherwise (`connect_timeout`, in seconds, as libpq reads it).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// libpq's `target_session_attrs`: which session a connection must land on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionAttrs {
    /// The first host that accepts the connection.
    Any,
    /// A session that accepts writes (`transaction_read_only` is off).
    ReadWrite,
    /// A session that refuses writes.
    ReadOnly,
    /// A server not in recovery.
    Primary,
    /// A server in recovery (a standby).
    Standby,
    /// A standby if one answers, else any.
    PreferStandby,
}

impl SessionAttrs {
    fn parse(v: &str) -> StoreResult<Self> {
        Ok(match v {
            "any" => Self::Any,
            "read-write" => Self::ReadWrite,
            "read-only" => Self::ReadOnly,
            "primary" => Self::Primary,
            "standby" => Self::Standby,
            "prefer-standby" => Self::PreferStandby,
            other => {
                return Err(StoreError::Unavailable(format!(
                    "target_session_attrs={other} is not one of any, read-write, read-only, \
                     primary, standby, prefer-standby"
                )))
            }
        })
    }

    /// Whether a session of a server (in recovery or not, read-only or
    /// not) has these attributes; `PreferStandby` takes a standby here and
    /// anything on the second pass.
    pub fn accepts(self, in_recovery: bool, read_only: bool) -> bool {
        match self {
            Self::Any => true,
            Self::ReadWrite => !read_only,
            Self::ReadOnly => read_only,
            Self::Primary => !in_recovery,
            Self::Standby | Self::PreferStandby => in_recovery,
        }
    }

    /// What the chosen host must go on being: what was asked for, and for
    /// `prefer-standby` (where any host will do when no standby answers)
    /// only that it answers.
    pub fn to_keep(self) -> Self {
        match self {
            Self::PreferStandby => Self::Any,
            a => a,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::ReadWrite => "read-write",
            Self::ReadOnly => "read-only",
            Self::Primary => "primary",
            Self::Standby => "standby",
            Self::PreferStandby => "prefer-standby",
        }
    }
}

/// What a database URL names: its hosts in order, the session wanted, and
/// every other setting, for one host at a time.
/// Its `Debug` names the hosts and the session, never the options (they
/// hold the password).
#[derive(Clone)]
pub struct Target {
    pub hosts: Vec<(String, u16)>,
    pub attrs: SessionAttrs,
    base: PgConnectOptions,
    timeout: Duration,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("hosts", &self.hosts)
            .field("attrs", &self.attrs)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// Reads a `postgres://` URL or libpq's `key=value` form. A URL with one
    /// host and no `target_session_attrs` is what it always was.
    pub fn parse(url: &str) -> StoreResult<Self> {
        let url = if url.contains("://") {
            url.to_owned()
        } else {
            keywords_to_url(url)?
        };
        // What a host list's error quotes may be a password's piece when
        // the user part holds an unencoded `/` or `?`: then it is not quoted.
        let has_password = url
            .split_once("://")
            .is_some_and(|(_, r)| r.rfind('@').is_some_and(|at| r[..at].contains(':')));
        let bad = |why: String| {
            let why = if has_password {
                "the host list does not read as host[:port],...; percent-encode '/', '?', '#' and '@' in the user name and password".to_owned()
            } else {
                why
            };
            StoreError::Unavailable(format!("{}: {why}", super::redact_url(&url)))
        };
        let (scheme, rest) = url.split_once("://").expect("a URL");
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (userinfo, hostlist) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let mut hosts = Vec::new();
        for h in hostlist.split(',') {
            hosts.push(split_host(h).map_err(bad)?);
        }
        let (path, query) = match tail.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (tail, None),
        };
        let mut attrs = SessionAttrs::Any;
        let mut timeout = PROBE_TIMEOUT;
        let mut kept = Vec::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            match pair.split_once('=') {
                Some(("target_session_attrs", v)) => attrs = SessionAttrs::parse(v)?,
                Some(("connect_timeout", v)) => {
                    let secs: u64 = v
                        .parse()
                        .map_err(|_| bad(format!("connect_timeout={v} is not whole seconds")))?;
                    timeout = Duration::from_secs(secs.max(1));
                }
                _ => kept.push(pair),
            }
        }
        let (first_host, first_port) = hosts[0].clone();
        let one = format!(
            "{scheme}://{}{}{path}{}",
            userinfo.map(|u| format!("{u}@")).unwrap_or_default(),
            host_port(&first_host, first_port),
            if kept.is_empty() {
                String::new()
            } else {
                format!("?{}", kept.join("&"))
            }
        );
        // One host and no session asked for: the URL as sqlx reads it
        // (Unix sockets, `?host=`, `PGHOST` and all), as it always was.
        let base = if hosts.len() == 1 && attrs == SessionAttrs::Any {
            PgConnectOptions::from_str(&url)?
        } else {
            PgConnectOptions::from_str(&one)?
        };
        Ok(Self {
            hosts,
            attrs,
            base,
            timeout,
        })
    }

    /// Whether there is anything to choose: more than one host, or a
    /// session asked for.
    pub fn chooses(&self) -> bool {
        self.hosts.len() > 1 || self.attrs != SessionAttrs::Any
    }

    /// The settings of the connection to host `i`.
    pub fn options(&self, i: usize) -> PgConnectOptions {
        if !self.chooses() {
            return self.base.clone();
        }
        let (host, port) = &self.hosts[i];
        self.base.clone().host(host).port(*port)
    }

    /// What a store that writes connects to: a host list without
    /// `target_session_attrs` means the read-write host (libpq's default,
    /// `any`, would let a standby be chosen and every write fail), and a
    /// standby or read-only session is refused.
    pub fn for_writing(mut self) -> StoreResult<Self> {
        match self.attrs {
            SessionAttrs::Any if self.hosts.len() > 1 => self.attrs = SessionAttrs::ReadWrite,
            SessionAttrs::Any | SessionAttrs::ReadWrite | SessionAttrs::Primary => {}
            a @ (SessionAttrs::ReadOnly | SessionAttrs::Standby | SessionAttrs::PreferStandby) => {
                return Err(StoreError::Unavailable(format!(
                    "target_session_attrs={} cannot take writes; `serve` and the host's writing \
                     commands need read-write or primary (the auditor's read-only tools may use {0})",
                    a.as_str()
                )))
            }
        }
        Ok(self)
    }

    pub fn describe(&self, i: usize) -> String {
        let (host, port) = &self.hosts[i];
        host_port(host, *port)
    }

    /// Whether host `i` answers, within the probe timeout, with a session
    /// of the attributes asked for; `Err` says what it answered instead.
    pub async fn probe(&self, i: usize, attrs: SessionAttrs) -> Result<(), String> {
        let mut c = None;
        let found = self.probe_on(&mut c, i, attrs).await;
        if let Some(c) = c {
            c.close().await.ok();
        }
        found
    }

    /// [`Self::probe`] on a session kept between probes: `conn` is opened
    /// when it is `None`, and dropped when it fails, so a host that goes on
    /// answering costs one query a probe, not a new session.
    pub async fn probe_on(
        &self,
        conn: &mut Option<PgConnection>,
        i: usize,
        attrs: SessionAttrs,
    ) -> Result<(), String> {
        let no_answer = || format!("no answer within {}s", self.timeout.as_secs());
        if conn.is_none() {
            let connect = self
                .options(i)
                .log_statements(tracing::log::LevelFilter::Off);
            *conn = Some(
                tokio::time::timeout(self.timeout, connect.connect())
                    .await
                    .map_err(|_| no_answer())?
                    .map_err(|e| e.to_string())?,
            );
        }
        let c = conn.as_mut().expect("opened above");
        let found = match tokio::time::timeout(self.timeout, check(c)).await {
            Ok(found) => found,
            Err(_) => Err(no_answer()),
        };
        if found.is_err() {
            *conn = None;
        }
        let (in_recovery, read_only) = found?;
        if attrs.accepts(in_recovery, read_only) {
            Ok(())
        } else {
            Err(format!(
                "{}{}",
                if in_recovery {
                    "a standby"
                } else {
                    "a primary"
                },
                if read_only { ", read-only" } else { "" }
            ))
        }
    }

    /// The first host, in the list's order, that answers with the session
    /// asked for (a standby first for `prefer-standby`, then any). The
    /// error names what every host answered.
    pub async fn locate(&self) -> StoreResult<usize> {
        let passes: &[SessionAttrs] = match self.attrs {
            SessionAttrs::PreferStandby => &[SessionAttrs::Standby, SessionAttrs::Any],
            a => &[a][..],
        };
        let mut said = Vec::new();
        for &attrs in passes {
            said.clear();
            for i in 0..self.hosts.len() {
                match self.probe(i, attrs).await {
                    Ok(()) => return Ok(i),
                    Err(e) => said.push(format!("{}: {e}", self.describe(i))),
                }
            }
        }
        Err(StoreError::Unavailable(format!(
            "no PostgreSQL host answers with a {} session (target_session_attrs): {}",
            self.attrs.as_str(),
            said.join("; ")
        )))
    }
}

/// Whether a session's server is in recovery, and whether the session is
/// read-only, as libpq asks (`SHOW transaction_read_only`).
pub async fn check(c: &mut PgConnection) -> Result<(bool, bool), String> {
    let (in_recovery, read_only): (bool, String) =
        sqlx::query_as("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')")
            .fetch_one(&mut *c)
            .await
            .map_err(|e| e.to_string())?;
    Ok((in_recovery, read_only == "on"))
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` (libpq's default port 5432).
fn split_host(h: &str) -> Result<(String, u16), String> {
    let port = |p: &str| {
        p.parse::<u16>()
            .map_err(|_| format!("invalid port number {p:?} in the host list"))
    };
    if let Some(v6) = h.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("an unclosed [ in the host list: {h:?}"))?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((addr.to_owned(), port(p)?)),
            None if after.is_empty() => Ok((addr.to_owned(), 5432)),
            None => Err(format!("a bad host in the host list: {h:?}")),
        };
    }
    if h.is_empty() {
        return Err("an empty host in the host list".into());
    }
    match h.rsplit_once(':') {
        Some((host, p)) => Ok((host.to_owned(), port(p)?)),
        None => Ok((h.to_owned(), 5432)),
    }
}

/// libpq's `key=value` connection string (values may be single-quoted,
/// with `\'` and `\\` inside) as the URL that says the same. `host` and
/// `port` may be lists; one port serves every host.
fn keywords_to_url(s: &str) -> StoreResult<String> {
    let bad = |why: &str| {
        StoreError::Unavailable(format!(
            "not a database URL or libpq connection string ({why}); use sqlite://, postgres:// \
             or host=... dbname=..."
        ))
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            // The word itself is not repeated: it may be part of a secret.
            return Err(bad(&format!(
                "a word of {} characters has no =",
                key.chars().count()
            )));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    Some('\\') => value.extend(chars.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => return Err(bad("an unclosed quote")),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        pairs.push((key, value));
    }
    let get = |k: &str| {
        pairs
            .iter()
            .rev()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let hosts: Vec<&str> = get("host").unwrap_or("localhost").split(',').collect();
    let ports: Vec<&str> = get("port").map_or_else(Vec::new, |p| p.split(',').collect());
    if ports.len() > 1 && ports.len() != hosts.len() {
        return Err(bad("port lists as many ports as host lists hosts, or one"));
    }
    let hostlist: Vec<String> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let h = if h.contains(':') {
                format!("[{h}]")
            } else {
                (*h).to_owned()
            };
            match ports.get(i).or(ports.first()) {
                Some(p) => format!("{h}:{p}"),
                None => h,
            }
        })
        .collect();
    let userinfo = match (get("user"), get("password")) {
        (Some(u), Some(p)) => format!("{}:{}@", encode(u), encode(p)),
        (Some(u), None) => format!("{}@", encode(u)),
        (None, Some(p)) => format!(":{}@", encode(p)),
        (None, None) => String::new(),
    };
    let query: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "host" | "port" | "user" | "password" | "dbname"))
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    Ok(format!(
        "postgres://{userinfo}{}/{}{}",
        hostlist.join(","),
        encode(get("dbname").unwrap_or("")),
        if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        }
    ))
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_list_with_ports_and_the_session_asked_for() {
        let t = Target::parse(
            "postgres://app:s3cret@10.0.0.1:5433,db2,[::1]:5435/stratum?target_session_attrs=read-write&sslmode=disable",
        )
        .unwrap();
        assert_eq!(
            t.hosts,
            [
                ("10.0.0.1".to_owned(), 5433),
                ("db2".to_owned(), 5432),
                ("::1".to_owned(), 5435)
            ]
        );
        assert_eq!(t.attrs, SessionAttrs::ReadWrite);
        assert!(t.chooses());
        let o = t.options(2);
        assert_eq!((o.get_host(), o.get_port()), ("::1", 5435));
        assert_eq!(o.get_database(), Some("stratum"));
        assert_eq!(o.get_username(), "app");
        assert_eq!(t.describe(2), "[::1]:5435");
    }

    #[test]
    fn one_host_without_attributes_chooses_nothing() {
        let t = Target::parse("postgres://postgres@127.0.0.1:5432/test").unwrap();
        assert!(!t.chooses());
        assert_eq!(t.hosts, [("127.0.0.1".to_owned(), 5432)]);
    }

    #[test]
    fn libpq_keywords_say_the_same_as_the_url() {
        let t = Target::parse(
            r"host=h1,h2,h3 port=5433,5434,5435 dbname=stratum user=postgres password='it\'s a secret' target_session_attrs=primary connect_timeout=3",
        )
        .unwrap();
        assert_eq!(t.hosts.len(), 3);
        assert_eq!(t.hosts[1], ("h2".to_owned(), 5434));
        assert_eq!(t.attrs, SessionAttrs::Primary);
        assert_eq!(t.timeout, Duration::from_secs(3));
        let o = t.options(0);
        assert_eq!(o.get_database(), Some("stratum"));
        let one_port = Target::parse("host=a,b port=6000 dbname=x").unwrap();
        assert_eq!(
            one_port.hosts,
            [("a".to_owned(), 6000), ("b".to_owned(), 6000)]
        );
    }

    #[test]
    fn bad_lists_and_attributes_are_named() {
        for (url, says) in [
            ("postgres://u@h1:5432,h2:x/db", "invalid port number"),
            ("postgres://u@h1,,h2/db", "an empty host"),
            (
                "postgres://u@h1/db?target_session_attrs=leader",
                "target_session_attrs=leader",
            ),
            ("host=a,b,c port=1,2 dbname=x", "as many ports"),
            ("dbname", "has no ="),
            (
                "host=a password=my secret",
                "a word of 6 characters has no =",
            ),
        ] {
            let Err(e) = Target::parse(url) else {
                panic!("{url} was taken")
            };
            let e = e.to_string();
            assert!(e.contains(says), "{url}: {e}");
        }
    }

    #[test]
    fn sessions_are_accepted_as_libpq_accepts_them() {
        use SessionAttrs::*;
        // (in recovery, read-only): a primary, a read-only primary, a standby
        let servers = [(false, false), (false, true), (true, true)];
        for (attrs, want) in [
            (Any, [true, true, true]),
            (ReadWrite, [true, false, false]),
            (ReadOnly, [false, true, true]),
            (Primary, [true, true, false]),
            (Standby, [false, false, true]),
        ] {
            let got = servers.map(|(r, ro)| attrs.accepts(r, ro));
            assert_eq!(got, want, "{attrs:?}");
        }
    }
}
