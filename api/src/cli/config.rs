//! The `--config` file: a TOML table whose keys are flag names
//! (`listen = "0.0.0.0:8443"`, `database-url = "postgres://..."`).
//!
//! A setting is taken from its flag, else its environment variable, else
//! the file, else its default. The file is read before the command line is
//! parsed, and each key the environment does not already set becomes its
//! variable, so clap's own order (flag, variable, default) gives that
//! order with the file in its place.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

use clap::parser::ValueSource;
use clap::CommandFactory;

use super::Cli;
use stratum_store::redact_url;

/// The variables the file set (for `--print-config`).
static FROM_FILE: OnceLock<(PathBuf, BTreeSet<String>)> = OnceLock::new();

/// `serve --print-config`'s text, made before the file's variables are
/// taken out of the environment again.
static EFFECTIVE: OnceLock<Result<String, String>> = OnceLock::new();

/// Every flag that is a setting, by its long name: its variable.
fn settings() -> BTreeMap<String, String> {
    fn walk(cmd: &clap::Command, out: &mut BTreeMap<String, String>) {
        for arg in cmd.get_arguments() {
            if let (Some(long), Some(env)) = (arg.get_long(), arg.get_env()) {
                out.insert(long.to_owned(), env.to_string_lossy().into_owned());
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = BTreeMap::new();
    walk(&Cli::command(), &mut out);
    out.remove("config");
    out
}

/// The file `--config FILE`, `--config=FILE` or `STRATUM_CONFIG` names.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let a = a.to_string_lossy();
        if a == "--" {
            break;
        }
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(v) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(v));
        }
    }
    std::env::var_os("STRATUM_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Reads the config file the arguments name, if any, and sets the
/// variable of each of its keys that the environment does not set. Call it
/// before the command line is parsed and before any thread starts.
pub fn apply(args: &[OsString]) -> Result<(), String> {
    let Some(path) = config_path(args) else {
        return Ok(());
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("config file {}: {e}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("config file {}: {e}", path.display()))?;
    let known = settings();
    let mut set = BTreeSet::new();
    for (key, value) in &table {
        let name = key.replace('_', "-");
        let Some(var) = known.get(&name) else {
            return Err(format!(
                "config file {}: `{key}` is not a setting (the keys are flag names, such as `listen` or `database-url`)",
                path.display()
            ));
        };
        let value = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Float(n) => n.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => items
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s.clone()),
                    toml::Value::Integer(n) => Ok(n.to_string()),
                    _ => Err(()),
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|()| {
                    format!(
                        "config file {}: `{key}` must be a string, a number or a list of them",
                        path.display()
                    )
                })?
                .join(","),
            _ => {
                return Err(format!(
                    "config file {}: `{key}` must be a string, a number, a boolean or a list",
                    path.display()
                ))
            }
        };
        // A variable that is set, even empty, is the environment's: clap
        // reads it, and refuses an empty value where one is needed.
        if std::env::var_os(var).is_none() {
            // Before any thread runs: nothing else reads the environment.
            std::env::set_var(var, value);
            set.insert(var.clone());
        }
    }
    let _ = FROM_FILE.set((path, set));
    Ok(())
}

/// Once the command line is parsed: keeps what `--print-config` prints
/// when it was asked for, then takes the variables the file set out of the
/// environment, so that no secret of the file reaches a child process
/// (a raft adapter's command) through it. Call it before any thread starts.
pub fn settle(print_config: bool) {
    if print_config {
        let _ = EFFECTIVE.set(render("serve"));
    }
    if let Some((_, set)) = FROM_FILE.get() {
        for var in set {
            std::env::remove_var(var);
        }
    }
}

/// What `--print-config` prints (see [`settle`]).
pub fn effective() -> Result<String, String> {
    EFFECTIVE.get().cloned().unwrap_or_else(|| render("serve"))
}

/// The settings of `subcommand` in effect, as a config file: each with
/// where it came from; secrets redacted.
fn render(subcommand: &str) -> Result<String, String> {
    let matches = Cli::command()
        .try_get_matches_from(std::env::args_os())
        .map_err(|e| e.to_string())?;
    let Some(sub) = matches.subcommand_matches(subcommand) else {
        return Err(format!("not a `{subcommand}` command line"));
    };
    let root = Cli::command();
    let cmd = root
        .find_subcommand(subcommand)
        .ok_or_else(|| format!("no command `{subcommand}`"))?;
    let from_file = FROM_FILE.get();
    let mut out = String::from("# The settings in effect, with where each came from");
    if let Some((path, _)) = from_file {
        out.push_str(&format!(" (config file {})", path.display()));
    }
    out.push_str(".\n");
    // The logging settings, then the command's own (the remote CLI's
    // global ones do not concern it).
    let args = root
        .get_arguments()
        .filter(|a| a.is_global_set() && a.get_long().is_some_and(|l| l.starts_with("log-")))
        .chain(cmd.get_arguments());
    for arg in args {
        let (Some(long), Some(env)) = (arg.get_long(), arg.get_env()) else {
            continue;
        };
        if long == "config" {
            continue;
        }
        let env = env.to_string_lossy();
        let id = arg.get_id().as_str();
        let matches = if arg.is_global_set() { &matches } else { sub };
        let raw: Option<Vec<String>> = matches.get_raw(id).map(|vals| {
            vals.map(|v| v.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        });
        let source = match matches.value_source(id) {
            Some(ValueSource::CommandLine) => "flag".to_owned(),
            Some(ValueSource::EnvVariable)
                if from_file.is_some_and(|(_, set)| set.contains(env.as_ref())) =>
            {
                "config file".to_owned()
            }
            Some(ValueSource::EnvVariable) => format!("env {env}"),
            Some(ValueSource::DefaultValue) => "default".to_owned(),
            _ => String::new(),
        };
        match raw {
            Some(vals) => {
                let value = vals.join(",");
                let value = if arg.is_hide_env_values_set() {
                    "<redacted>".to_owned()
                } else if long == "database-url" || value.contains("://") {
                    // A database (a URL, or libpq's key=value form), backup
                    // target or OpenBao address may carry a password.
                    redact_url(&value)
                } else {
                    value
                };
                out.push_str(&format!(
                    "{long} = {}  # {source}\n",
                    toml::Value::String(value)
                ));
            }
            None => out.push_str(&format!("# {long} is not set ({env})\n")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config file's key is a flag's long name, so one name must mean one
    /// setting in every command: a second flag of the same name with
    /// another variable would take the key from the first.
    #[test]
    fn every_setting_s_name_means_one_variable() {
        fn walk(
            cmd: &clap::Command,
            seen: &mut BTreeMap<String, String>,
            clashes: &mut Vec<String>,
        ) {
            for arg in cmd.get_arguments() {
                if let (Some(long), Some(env)) = (arg.get_long(), arg.get_env()) {
                    let env = env.to_string_lossy().into_owned();
                    if let Some(other) = seen.insert(long.to_owned(), env.clone()) {
                        if other != env {
                            clashes.push(format!("--{long}: {other} and {env}"));
                        }
                    }
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, seen, clashes);
            }
        }
        let mut clashes = Vec::new();
        walk(&Cli::command(), &mut BTreeMap::new(), &mut clashes);
        assert!(clashes.is_empty(), "{clashes:?}");
        assert_eq!(settings()["listen"], "STRATUM_LISTEN");
    }
}
