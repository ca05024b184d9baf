//! The raft settings of `stratum serve`: each a flag and an environment
//! variable, turned into one adapter per raft. A malformed setting is an
//! error that names its variable, so the service never starts with a raft
//! it would silently not clean.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::adapters::{
    CommandAdapter, OpenBaoAdapter, OvnKick, OvnKickAdapter, PatroniSyncobj, PatroniSyncobjAdapter,
    RaftAdapter, RaftAdapters, RecordOnly,
};
use crate::backoff::Backoff;
use crate::settings::duration;
pub use crate::settings::ConfigError;

/// The raft adapter settings (see the README's "Raft adapters").
#[derive(Args, Clone, Default)]
pub struct RaftArgs {
    /// OpenBao's address, e.g. `https://10.0.0.1:8200`: its raft is
    /// cleaned over its HTTP API. Unset: record-only.
    #[arg(long, env = "STRATUM_OPENBAO_ADDR")]
    pub openbao_addr: Option<String>,
    /// The token for OpenBao's remove-peer call (needs
    /// `sys/storage/raft/remove-peer`).
    #[arg(long, env = "STRATUM_OPENBAO_TOKEN", hide_env_values = true)]
    pub openbao_token: Option<String>,
    /// A PEM file with the CA that signed OpenBao's certificate.
    #[arg(long, env = "STRATUM_OPENBAO_CACERT")]
    pub openbao_cacert: Option<PathBuf>,

    /// How OVN's rafts are cleaned: `kick` (the built-in `cluster/kick` on
    /// both databases), `commands`, or `record-only`. Default: `commands`
    /// when STRATUM_RAFT_OVN_COMMANDS is set, else `record-only`.
    #[arg(long, env = "STRATUM_RAFT_OVN")]
    pub raft_ovn: Option<String>,
    /// With `commands`: a JSON array of argument vectors with `{nodeId}`,
    /// `{address}` and `{host}` placeholders.
    #[arg(long, env = "STRATUM_RAFT_OVN_COMMANDS")]
    pub raft_ovn_commands: Option<String>,
    /// With `kick`: the program (default `ovs-appctl`).
    #[arg(long, env = "STRATUM_OVS_APPCTL")]
    pub ovs_appctl: Option<String>,
    /// With `kick`: the Northbound database's control socket (default
    /// `/var/run/ovn/ovnnb_db.ctl`).
    #[arg(long, env = "STRATUM_OVN_NB_CTL")]
    pub ovn_nb_ctl: Option<String>,
    /// With `kick`: the Southbound database's control socket (default
    /// `/var/run/ovn/ovnsb_db.ctl`).
    #[arg(long, env = "STRATUM_OVN_SB_CTL")]
    pub ovn_sb_ctl: Option<String>,
    /// With `kick`: how the Northbound raft names a server (default
    /// `ssl:{host}:6643`).
    #[arg(long, env = "STRATUM_OVN_NB_SERVER")]
    pub ovn_nb_server: Option<String>,
    /// With `kick`: how the Southbound raft names a server (default
    /// `ssl:{host}:6644`).
    #[arg(long, env = "STRATUM_OVN_SB_SERVER")]
    pub ovn_sb_server: Option<String>,

    /// How Patroni's raft is cleaned: `syncobj` (the built-in
    /// `syncobj_admin -remove`), `commands`, or `record-only`. Default:
    /// `commands` when STRATUM_RAFT_PATRONI_COMMANDS is set, else
    /// `record-only`.
    #[arg(long, env = "STRATUM_RAFT_PATRONI")]
    pub raft_patroni: Option<String>,
    /// With `commands`: a JSON array of argument vectors with placeholders
    /// (for an etcd DCS, the command that deletes the member's key).
    #[arg(long, env = "STRATUM_RAFT_PATRONI_COMMANDS")]
    pub raft_patroni_commands: Option<String>,
    /// With `syncobj`: the program (default `syncobj_admin`).
    #[arg(long, env = "STRATUM_PATRONI_SYNCOBJ_ADMIN")]
    pub patroni_syncobj_admin: Option<String>,
    /// With `syncobj`: the raft members to talk to, `host:port` separated
    /// by commas (Patroni's `raft.self_addr` of the control nodes; default
    /// `127.0.0.1:5010`). The first that answers and is not the member
    /// being removed is asked.
    #[arg(long, env = "STRATUM_PATRONI_RAFT_CONN")]
    pub patroni_raft_conn: Option<String>,
    /// With `syncobj`: the raft port of the member to remove (default 5010).
    #[arg(long, env = "STRATUM_PATRONI_RAFT_PORT")]
    pub patroni_raft_port: Option<String>,

    /// The longest one call to a raft may take (an HTTP request, a run of
    /// `ovs-appctl` or `syncobj_admin`, whose process is then killed), and
    /// the longest a removal waits for the raft's own listing to stop
    /// naming the peer; past it the removal is retried.
    #[arg(long, env = "STRATUM_RAFT_TIMEOUT", default_value = "10s")]
    pub raft_timeout: String,

    /// How often each raft whose adapter reads a listing (OpenBao, OVN's
    /// `kick`, Patroni's `syncobj`) is read for members whose removal is
    /// recorded but whom it names again; soon again after an election.
    #[arg(long, env = "STRATUM_RAFT_RECHECK", default_value = "10s")]
    pub raft_recheck: String,

    /// The first wait before a failed removal is tried again, e.g. `1s`;
    /// it doubles on each failure.
    #[arg(long, env = "STRATUM_RAFT_RETRY_MIN", default_value = "1s")]
    pub raft_retry_min: String,
    /// The longest wait between tries.
    #[arg(long, env = "STRATUM_RAFT_RETRY_MAX", default_value = "60s")]
    pub raft_retry_max: String,
}

/// Never the OpenBao token, in any log line or panic message.
impl std::fmt::Debug for RaftArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftArgs")
            .field("openbao_addr", &self.openbao_addr)
            .field("openbao_token", &self.openbao_token.as_ref().map(|_| "***"))
            .field("openbao_cacert", &self.openbao_cacert)
            .field("raft_ovn", &self.raft_ovn)
            .field("raft_patroni", &self.raft_patroni)
            .finish_non_exhaustive()
    }
}

/// How one raft is cleaned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    RecordOnly,
    Preset,
    Commands,
}

fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

fn mode(
    var: &str,
    value: &Option<String>,
    preset: &str,
    commands_var: &str,
    commands: &Option<String>,
) -> Result<Mode, ConfigError> {
    let m = match given(value) {
        None if given(commands).is_some() => Mode::Commands,
        None | Some("record-only") => Mode::RecordOnly,
        Some("commands") => Mode::Commands,
        Some(v) if v == preset => Mode::Preset,
        Some(v) => {
            return Err(ConfigError(format!(
                "{var} must be {preset}, commands or record-only, not `{v}`"
            )))
        }
    };
    if m != Mode::Commands && given(commands).is_some() {
        return Err(ConfigError(format!(
            "{commands_var} is set but {var} is not `commands`; unset one of them"
        )));
    }
    Ok(m)
}

/// The placeholders a command or a server form may hold.
const PLACEHOLDERS: [&str; 3] = ["{nodeId}", "{address}", "{host}"];

/// Every `{...}` in `text` is a known placeholder.
fn known_placeholders(var: &str, text: &str) -> Result<(), ConfigError> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let tail = &rest[open..];
        let close = tail.find('}').map_or(tail.len(), |c| c + 1);
        let token = &tail[..close];
        if !PLACEHOLDERS.contains(&token) {
            return Err(ConfigError(format!(
                "{var} holds `{token}`; the placeholders are {{nodeId}}, {{address}} and {{host}}"
            )));
        }
        rest = &tail[close..];
    }
    Ok(())
}

/// A server form or command must name the member, or it would remove the
/// same fixed server on every cleanup.
fn names_the_peer(var: &str, texts: &[&str]) -> Result<(), ConfigError> {
    for t in texts {
        known_placeholders(var, t)?;
    }
    if !texts
        .iter()
        .any(|t| PLACEHOLDERS.iter().any(|p| t.contains(p)))
    {
        return Err(ConfigError(format!(
            "{var} names no peer: use {{nodeId}}, {{address}} or {{host}}"
        )));
    }
    Ok(())
}

/// A setting of a preset must not be given without its preset: it would
/// be silently ignored.
fn only_with(
    var: &str,
    value: &Option<String>,
    mode_var: &str,
    preset: &str,
    mode: Mode,
) -> Result<(), ConfigError> {
    if given(value).is_some() && mode != Mode::Preset {
        return Err(ConfigError(format!(
            "{var} is set but {mode_var} is not `{preset}`; it would be ignored"
        )));
    }
    Ok(())
}

/// Parses a JSON array of argument vectors.
fn commands(var: &str, json: &Option<String>) -> Result<Vec<Vec<String>>, ConfigError> {
    let Some(json) = given(json) else {
        return Err(ConfigError(format!(
            "{var} is required when its raft's mode is `commands`"
        )));
    };
    let commands: Vec<Vec<String>> = serde_json::from_str(json).map_err(|e| {
        ConfigError(format!(
            "{var} must be a JSON array of argument vectors such as [[\"cmd\",\"{{nodeId}}\"]]: {e}"
        ))
    })?;
    if commands.is_empty() || commands.iter().any(|c| c.is_empty() || c[0].is_empty()) {
        return Err(ConfigError(format!("{var} names an empty command")));
    }
    for argv in &commands {
        let texts: Vec<&str> = argv.iter().map(String::as_str).collect();
        for t in &texts {
            known_placeholders(var, t)?;
        }
    }
    let all: Vec<&str> = commands.iter().flatten().map(String::as_str).collect();
    names_the_peer(var, &all)?;
    Ok(commands)
}

/// A preset setting: the value given, or the preset's default.
fn or_default(value: &Option<String>, default: String) -> String {
    given(value).map_or(default, str::to_owned)
}

impl RaftArgs {
    /// One adapter per raft, as these settings configure them.
    pub fn adapters(&self) -> Result<RaftAdapters, ConfigError> {
        let timeout = duration("STRATUM_RAFT_TIMEOUT", &self.raft_timeout)?;
        let recheck = duration("STRATUM_RAFT_RECHECK", &self.raft_recheck)?;
        Ok(RaftAdapters {
            openbao: self.openbao(timeout)?,
            ovn: self.ovn(timeout)?,
            patroni: self.patroni(timeout)?,
            recheck,
        })
    }

    /// The retry timing of failed removals.
    pub fn backoff(&self) -> Result<Backoff, ConfigError> {
        let first = duration("STRATUM_RAFT_RETRY_MIN", &self.raft_retry_min)?;
        let max = duration("STRATUM_RAFT_RETRY_MAX", &self.raft_retry_max)?;
        if max < first {
            return Err(ConfigError(
                "STRATUM_RAFT_RETRY_MAX must not be below STRATUM_RAFT_RETRY_MIN".into(),
            ));
        }
        Ok(Backoff { first, max })
    }

    fn openbao(&self, timeout: Duration) -> Result<Arc<dyn RaftAdapter>, ConfigError> {
        let Some(addr) = given(&self.openbao_addr) else {
            for (var, set) in [
                (
                    "STRATUM_OPENBAO_TOKEN",
                    given(&self.openbao_token).is_some(),
                ),
                ("STRATUM_OPENBAO_CACERT", self.openbao_cacert.is_some()),
            ] {
                if set {
                    return Err(ConfigError(format!(
                        "{var} is set without STRATUM_OPENBAO_ADDR"
                    )));
                }
            }
            return Ok(Arc::new(RecordOnly));
        };
        let https = addr.starts_with("https://");
        if !(addr.starts_with("http://") || https) || reqwest::Url::parse(addr).is_err() {
            return Err(ConfigError(format!(
                "STRATUM_OPENBAO_ADDR must be an http:// or https:// URL such as https://10.0.0.1:8200, not `{addr}`"
            )));
        }
        let token = given(&self.openbao_token).ok_or_else(|| {
            ConfigError("STRATUM_OPENBAO_ADDR is set without STRATUM_OPENBAO_TOKEN".into())
        })?;
        let ca = match &self.openbao_cacert {
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| {
                    ConfigError(format!(
                        "STRATUM_OPENBAO_CACERT names {}, which cannot be read: {e}",
                        path.display()
                    ))
                })?;
                if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                    return Err(ConfigError(format!(
                        "STRATUM_OPENBAO_CACERT names {}, which holds no PEM certificate",
                        path.display()
                    )));
                }
                Some(pem)
            }
            // No public roots are built in: a private cloud's OpenBao is
            // signed by its own CA, which must be named.
            None if https => {
                return Err(ConfigError(
                    "STRATUM_OPENBAO_ADDR is https:// but STRATUM_OPENBAO_CACERT names no CA to trust it with".into(),
                ))
            }
            None => None,
        };
        let adapter = OpenBaoAdapter::new(addr, token.to_owned(), ca.as_deref(), timeout)
            .map_err(|e| ConfigError(format!("STRATUM_OPENBAO_CACERT: {e}")))?;
        Ok(Arc::new(adapter))
    }

    fn ovn(&self, timeout: Duration) -> Result<Arc<dyn RaftAdapter>, ConfigError> {
        let m = mode(
            "STRATUM_RAFT_OVN",
            &self.raft_ovn,
            "kick",
            "STRATUM_RAFT_OVN_COMMANDS",
            &self.raft_ovn_commands,
        )?;
        for (var, value) in [
            ("STRATUM_OVS_APPCTL", &self.ovs_appctl),
            ("STRATUM_OVN_NB_CTL", &self.ovn_nb_ctl),
            ("STRATUM_OVN_SB_CTL", &self.ovn_sb_ctl),
            ("STRATUM_OVN_NB_SERVER", &self.ovn_nb_server),
            ("STRATUM_OVN_SB_SERVER", &self.ovn_sb_server),
        ] {
            only_with(var, value, "STRATUM_RAFT_OVN", "kick", m)?;
        }
        Ok(match m {
            Mode::RecordOnly => Arc::new(RecordOnly),
            Mode::Commands => Arc::new(
                CommandAdapter::new(commands(
                    "STRATUM_RAFT_OVN_COMMANDS",
                    &self.raft_ovn_commands,
                )?)
                .with_timeout(timeout),
            ),
            Mode::Preset => {
                let d = OvnKick::default();
                let k = OvnKick {
                    appctl: or_default(&self.ovs_appctl, d.appctl),
                    nb_ctl: or_default(&self.ovn_nb_ctl, d.nb_ctl),
                    sb_ctl: or_default(&self.ovn_sb_ctl, d.sb_ctl),
                    nb_server: or_default(&self.ovn_nb_server, d.nb_server),
                    sb_server: or_default(&self.ovn_sb_server, d.sb_server),
                };
                names_the_peer("STRATUM_OVN_NB_SERVER", &[&k.nb_server])?;
                names_the_peer("STRATUM_OVN_SB_SERVER", &[&k.sb_server])?;
                Arc::new(OvnKickAdapter::new(k, timeout))
            }
        })
    }

    fn patroni(&self, timeout: Duration) -> Result<Arc<dyn RaftAdapter>, ConfigError> {
        let m = mode(
            "STRATUM_RAFT_PATRONI",
            &self.raft_patroni,
            "syncobj",
            "STRATUM_RAFT_PATRONI_COMMANDS",
            &self.raft_patroni_commands,
        )?;
        for (var, value) in [
            ("STRATUM_PATRONI_SYNCOBJ_ADMIN", &self.patroni_syncobj_admin),
            ("STRATUM_PATRONI_RAFT_CONN", &self.patroni_raft_conn),
            ("STRATUM_PATRONI_RAFT_PORT", &self.patroni_raft_port),
        ] {
            only_with(var, value, "STRATUM_RAFT_PATRONI", "syncobj", m)?;
        }
        Ok(match m {
            Mode::RecordOnly => Arc::new(RecordOnly),
            Mode::Commands => Arc::new(
                CommandAdapter::new(commands(
                    "STRATUM_RAFT_PATRONI_COMMANDS",
                    &self.raft_patroni_commands,
                )?)
                .with_timeout(timeout),
            ),
            Mode::Preset => {
                let d = PatroniSyncobj::default();
                let port = match given(&self.patroni_raft_port) {
                    None => d.port,
                    Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                        ConfigError(format!(
                            "STRATUM_PATRONI_RAFT_PORT must be a port between 1 and 65535, not `{p}`"
                        ))
                    })?,
                };
                let conns = match given(&self.patroni_raft_conn) {
                    None => d.conns,
                    Some(list) => list
                        .split(',')
                        .map(str::trim)
                        .map(|c| {
                            let port_ok = c
                                .rsplit_once(':')
                                .and_then(|(h, p)| (!h.is_empty()).then_some(p))
                                .and_then(|p| p.parse::<u16>().ok())
                                .is_some_and(|p| p > 0);
                            if port_ok {
                                Ok(c.to_owned())
                            } else {
                                Err(ConfigError(format!(
                                    "STRATUM_PATRONI_RAFT_CONN must list raft members as host:port separated by commas, not `{c}`"
                                )))
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                };
                Arc::new(PatroniSyncobjAdapter::new(
                    PatroniSyncobj {
                        program: or_default(&self.patroni_syncobj_admin, d.program),
                        conns,
                        port,
                    },
                    timeout,
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        raft: RaftArgs,
    }

    fn args(flags: &[&str]) -> RaftArgs {
        let mut argv = vec!["stratum"];
        argv.extend(flags);
        Cli::try_parse_from(argv).unwrap().raft
    }

    fn names(a: &RaftAdapters) -> [String; 3] {
        [
            a.patroni.name().to_owned(),
            a.openbao.name().to_owned(),
            a.ovn.name().to_owned(),
        ]
    }

    #[test]
    fn no_settings_mean_record_only_for_every_raft() {
        let a = args(&[]).adapters().unwrap();
        assert_eq!(names(&a), ["record-only", "record-only", "record-only"]);
    }

    #[test]
    fn the_presets_build_the_standard_calls() {
        let a = args(&["--raft-ovn", "kick", "--raft-patroni", "syncobj"])
            .adapters()
            .unwrap();
        assert_eq!(names(&a)[0], "patroni-syncobj");
        assert_eq!(names(&a)[2], "ovn-kick");
        assert_eq!(
            a.ovn.target(),
            "ovs-appctl -t /var/run/ovn/ovnnb_db.ctl cluster/kick OVN_Northbound ssl:{host}:6643; \
             ovs-appctl -t /var/run/ovn/ovnsb_db.ctl cluster/kick OVN_Southbound ssl:{host}:6644"
        );
        assert_eq!(
            a.patroni.target(),
            "syncobj_admin -conn 127.0.0.1:5010 -remove {host}:5010"
        );
    }

    #[test]
    fn commands_alone_select_the_generic_adapter() {
        let a = args(&["--raft-ovn-commands", r#"[["true","{nodeId}"]]"#])
            .adapters()
            .unwrap();
        assert_eq!(names(&a)[2], "command");
    }

    #[test]
    fn each_malformed_setting_names_its_variable() {
        let cases: [(&[&str], &str); 13] = [
            (
                &["--raft-ovn-commands", "not json"],
                "STRATUM_RAFT_OVN_COMMANDS",
            ),
            (&["--raft-ovn", "bogus"], "STRATUM_RAFT_OVN"),
            (
                &["--raft-patroni-commands", "[[]]"],
                "STRATUM_RAFT_PATRONI_COMMANDS",
            ),
            (
                &["--raft-patroni", "commands"],
                "STRATUM_RAFT_PATRONI_COMMANDS",
            ),
            (
                &["--openbao-addr", "http://127.0.0.1:1"],
                "STRATUM_OPENBAO_TOKEN",
            ),
            (
                &["--openbao-addr", "10.0.0.1:8200", "--openbao-token", "t"],
                "STRATUM_OPENBAO_ADDR",
            ),
            (
                &["--raft-patroni", "syncobj", "--patroni-raft-port", "0"],
                "STRATUM_PATRONI_RAFT_PORT",
            ),
            (
                &["--raft-ovn", "kick", "--raft-ovn-commands", "not json"],
                "STRATUM_RAFT_OVN_COMMANDS",
            ),
            (&["--patroni-raft-port", "abc"], "STRATUM_PATRONI_RAFT_PORT"),
            (
                &["--openbao-cacert", "/etc/ssl/ca.pem"],
                "STRATUM_OPENBAO_CACERT",
            ),
            (
                &[
                    "--openbao-addr",
                    "https://10.0.0.1:8200",
                    "--openbao-token",
                    "t",
                ],
                "STRATUM_OPENBAO_CACERT",
            ),
            (
                &["--raft-ovn", "kick", "--ovn-nb-server", "ssl:10.0.0.1:6643"],
                "STRATUM_OVN_NB_SERVER",
            ),
            (
                &["--raft-ovn-commands", r#"[["kick","{nodeid}"]]"#],
                "STRATUM_RAFT_OVN_COMMANDS",
            ),
        ];
        for (flags, var) in cases {
            let err = args(flags).adapters().err().expect("refused");
            assert!(err.0.contains(var), "{flags:?}: {err}");
            assert!(!err.0.contains('\n'), "one line: {err}");
        }
        let err = args(&["--raft-timeout", "0s"])
            .adapters()
            .err()
            .expect("refused");
        assert!(err.0.contains("STRATUM_RAFT_TIMEOUT"), "{err}");
        let err = args(&[
            "--raft-patroni",
            "syncobj",
            "--patroni-raft-conn",
            "10.0.0.1:5010,10.0.0.2",
        ])
        .adapters()
        .err()
        .expect("refused");
        assert!(err.0.contains("STRATUM_PATRONI_RAFT_CONN"), "{err}");
        let err = args(&["--raft-retry-min", "soon"]).backoff().unwrap_err();
        assert!(err.0.contains("STRATUM_RAFT_RETRY_MIN"), "{err}");
    }

    #[test]
    fn the_openbao_token_never_shows_in_debug_output() {
        let a = args(&[
            "--openbao-addr",
            "http://10.0.0.1:8200",
            "--openbao-token",
            "s.very-secret",
        ]);
        assert!(!format!("{a:?}").contains("s.very-secret"));
        let adapters = a.adapters().unwrap();
        assert!(!adapters.openbao.target().contains("s.very-secret"));
        let with_userinfo = args(&[
            "--openbao-addr",
            "http://ops:pw@10.0.0.1:8200",
            "--openbao-token",
            "t",
        ]);
        assert!(!with_userinfo
            .adapters()
            .unwrap()
            .openbao
            .target()
            .contains("pw"));
    }

    #[test]
    fn placeholders_fill_with_the_peer_and_bracket_ipv6_hosts() {
        use super::super::adapters::RaftPeer;
        let v4 = RaftPeer {
            node_id: "n-1".into(),
            address: "192.0.2.1".into(),
        };
        let v6 = RaftPeer {
            node_id: "n-2".into(),
            address: "2001:db8::2".into(),
        };
        assert_eq!(
            v4.fill("{nodeId} ssl:{host}:6643 {address}"),
            "n-1 ssl:192.0.2.1:6643 192.0.2.1"
        );
        assert_eq!(v6.fill("ssl:{host}:6643"), "ssl:[2001:db8::2]:6643");
    }
}
