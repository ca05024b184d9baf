//! The raft settings of `stratum serve`: each a flag and an environment
//! variable, turned into one adapter per raft. A malformed setting is an
//! error that names its variable, so the service never starts with a raft
//! it would silently not clean.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::adapters::{
    CommandAdapter, OpenBaoAdapter, OvnKick, PatroniSyncobj, RaftAdapter, RaftAdapters, RecordOnly,
};
use super::Backoff;

/// A setting that cannot be used, as one sentence naming its variable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The raft adapter settings (see the README's "Raft adapters").
#[derive(Args, Debug, Clone, Default)]
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
    /// With `kick`: the program.
    #[arg(long, env = "STRATUM_OVS_APPCTL", default_value = "ovs-appctl")]
    pub ovs_appctl: String,
    /// With `kick`: the Northbound database's control socket.
    #[arg(
        long,
        env = "STRATUM_OVN_NB_CTL",
        default_value = "/var/run/ovn/ovnnb_db.ctl"
    )]
    pub ovn_nb_ctl: String,
    /// With `kick`: the Southbound database's control socket.
    #[arg(
        long,
        env = "STRATUM_OVN_SB_CTL",
        default_value = "/var/run/ovn/ovnsb_db.ctl"
    )]
    pub ovn_sb_ctl: String,
    /// With `kick`: how the Northbound raft names a server.
    #[arg(long, env = "STRATUM_OVN_NB_SERVER", default_value = "ssl:{host}:6643")]
    pub ovn_nb_server: String,
    /// With `kick`: how the Southbound raft names a server.
    #[arg(long, env = "STRATUM_OVN_SB_SERVER", default_value = "ssl:{host}:6644")]
    pub ovn_sb_server: String,

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
    /// With `syncobj`: the program.
    #[arg(
        long,
        env = "STRATUM_PATRONI_SYNCOBJ_ADMIN",
        default_value = "syncobj_admin"
    )]
    pub patroni_syncobj_admin: String,
    /// With `syncobj`: the raft member to talk to (`raft.self_addr`).
    #[arg(
        long,
        env = "STRATUM_PATRONI_RAFT_CONN",
        default_value = "127.0.0.1:5010"
    )]
    pub patroni_raft_conn: String,
    /// With `syncobj`: the raft port of the member to remove.
    #[arg(long, env = "STRATUM_PATRONI_RAFT_PORT", default_value = "5010")]
    pub patroni_raft_port: String,

    /// The first wait before a failed removal is tried again, e.g. `1s`;
    /// it doubles on each failure.
    #[arg(long, env = "STRATUM_RAFT_RETRY_MIN", default_value = "1s")]
    pub raft_retry_min: String,
    /// The longest wait between tries.
    #[arg(long, env = "STRATUM_RAFT_RETRY_MAX", default_value = "60s")]
    pub raft_retry_max: String,
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
    Ok(m)
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
    Ok(commands)
}

fn non_empty(var: &str, v: &str) -> Result<String, ConfigError> {
    if v.trim().is_empty() {
        return Err(ConfigError(format!("{var} must not be empty")));
    }
    Ok(v.to_owned())
}

fn duration(var: &str, v: &str) -> Result<Duration, ConfigError> {
    let d = humantime::parse_duration(v.trim()).map_err(|e| {
        ConfigError(format!(
            "{var} must be a duration such as 500ms, 1s or 2m, not `{v}`: {e}"
        ))
    })?;
    if d.is_zero() {
        return Err(ConfigError(format!("{var} must be above zero")));
    }
    Ok(d)
}

impl RaftArgs {
    /// One adapter per raft, as these settings configure them.
    pub fn adapters(&self) -> Result<RaftAdapters, ConfigError> {
        Ok(RaftAdapters {
            openbao: self.openbao()?,
            ovn: self.ovn()?,
            patroni: self.patroni()?,
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

    fn openbao(&self) -> Result<Arc<dyn RaftAdapter>, ConfigError> {
        let Some(addr) = given(&self.openbao_addr) else {
            if given(&self.openbao_token).is_some() {
                return Err(ConfigError(
                    "STRATUM_OPENBAO_TOKEN is set without STRATUM_OPENBAO_ADDR".into(),
                ));
            }
            return Ok(Arc::new(RecordOnly));
        };
        if !(addr.starts_with("http://") || addr.starts_with("https://"))
            || reqwest::Url::parse(addr).is_err()
        {
            return Err(ConfigError(format!(
                "STRATUM_OPENBAO_ADDR must be an http:// or https:// URL such as https://10.0.0.1:8200, not `{addr}`"
            )));
        }
        let token = given(&self.openbao_token).ok_or_else(|| {
            ConfigError("STRATUM_OPENBAO_ADDR is set without STRATUM_OPENBAO_TOKEN".into())
        })?;
        let ca = match &self.openbao_cacert {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                ConfigError(format!(
                    "STRATUM_OPENBAO_CACERT names {}, which cannot be read: {e}",
                    path.display()
                ))
            })?),
            None => None,
        };
        let adapter = OpenBaoAdapter::new(addr, token.to_owned(), ca.as_deref())
            .map_err(|e| ConfigError(format!("STRATUM_OPENBAO_CACERT: {e}")))?;
        Ok(Arc::new(adapter))
    }

    fn ovn(&self) -> Result<Arc<dyn RaftAdapter>, ConfigError> {
        Ok(
            match mode(
                "STRATUM_RAFT_OVN",
                &self.raft_ovn,
                "kick",
                &self.raft_ovn_commands,
            )? {
                Mode::RecordOnly => Arc::new(RecordOnly),
                Mode::Commands => Arc::new(CommandAdapter::new(commands(
                    "STRATUM_RAFT_OVN_COMMANDS",
                    &self.raft_ovn_commands,
                )?)),
                Mode::Preset => Arc::new(CommandAdapter::ovn_kick(&OvnKick {
                    appctl: non_empty("STRATUM_OVS_APPCTL", &self.ovs_appctl)?,
                    nb_ctl: non_empty("STRATUM_OVN_NB_CTL", &self.ovn_nb_ctl)?,
                    sb_ctl: non_empty("STRATUM_OVN_SB_CTL", &self.ovn_sb_ctl)?,
                    nb_server: non_empty("STRATUM_OVN_NB_SERVER", &self.ovn_nb_server)?,
                    sb_server: non_empty("STRATUM_OVN_SB_SERVER", &self.ovn_sb_server)?,
                })),
            },
        )
    }

    fn patroni(&self) -> Result<Arc<dyn RaftAdapter>, ConfigError> {
        Ok(
            match mode(
                "STRATUM_RAFT_PATRONI",
                &self.raft_patroni,
                "syncobj",
                &self.raft_patroni_commands,
            )? {
                Mode::RecordOnly => Arc::new(RecordOnly),
                Mode::Commands => Arc::new(CommandAdapter::new(commands(
                    "STRATUM_RAFT_PATRONI_COMMANDS",
                    &self.raft_patroni_commands,
                )?)),
                Mode::Preset => {
                    let port = self
                        .patroni_raft_port
                        .trim()
                        .parse::<u16>()
                        .ok()
                        .filter(|p| *p > 0)
                        .ok_or_else(|| {
                            ConfigError(format!(
                                "STRATUM_PATRONI_RAFT_PORT must be a port between 1 and 65535, not `{}`",
                                self.patroni_raft_port
                            ))
                        })?;
                    Arc::new(CommandAdapter::patroni_syncobj(&PatroniSyncobj {
                        program: non_empty(
                            "STRATUM_PATRONI_SYNCOBJ_ADMIN",
                            &self.patroni_syncobj_admin,
                        )?,
                        conn: non_empty("STRATUM_PATRONI_RAFT_CONN", &self.patroni_raft_conn)?,
                        port,
                    }))
                }
            },
        )
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
        let cases: [(&[&str], &str); 7] = [
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
        ];
        for (flags, var) in cases {
            let err = args(flags).adapters().err().expect("refused");
            assert!(err.0.contains(var), "{flags:?}: {err}");
            assert!(!err.0.contains('\n'), "one line: {err}");
        }
        let err = args(&["--raft-retry-min", "soon"]).backoff().unwrap_err();
        assert!(err.0.contains("STRATUM_RAFT_RETRY_MIN"), "{err}");
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
