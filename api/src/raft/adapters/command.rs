//! Running a raft's tool: argument vectors (never shell strings), bounded
//! by the timeout, without the service's own settings in its environment;
//! and the generic adapter of configured commands.

use std::process::Output;
use std::time::Duration;

use async_trait::async_trait;

use super::{whole_message, AdapterError, Failure, RaftAdapter, RaftPeer, Removal};

/// What one run of a tool answered.
pub(super) struct Ran {
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
}

impl Ran {
    pub fn succeeded(&self) -> bool {
        self.code == Some(0)
    }

    /// The tool's whole message, for an error or a log line.
    pub fn message(&self) -> String {
        whole_message(&self.stdout, &self.stderr)
    }
}

/// Runs `argv` once. The child is killed when it has not finished within
/// `timeout` (a hung `ovs-appctl` on a stopped server, a `syncobj_admin`
/// that waits for an answer). A program that cannot be started, or exits
/// 126 or 127 (a shell's "cannot run"), is unreachable.
pub(super) async fn run(argv: &[String], timeout: Duration) -> Result<Ran, AdapterError> {
    let Some((program, rest)) = argv.split_first() else {
        return Err(AdapterError::new(
            Failure::Unreachable,
            "an empty command is configured",
        ));
    };
    let mut command = tokio::process::Command::new(program);
    // The service's own settings (a database password, the OpenBao
    // token) are nothing a raft's tool needs.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("STRATUM_") {
            command.env_remove(key);
        }
    }
    // Its own process group, so that a wrapper's children are killed
    // with it at the timeout.
    command
        .args(rest)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = command
        .spawn()
        .map_err(|e| AdapterError::new(Failure::Unreachable, format!("{program}: {e}")))?;
    let group = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32));
    let out: Output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Err(_) => {
            if let Some(group) = group {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            return Err(AdapterError::new(
                Failure::Timeout,
                format!(
                    "{program} did not finish within {}; it was killed",
                    humantime::format_duration(timeout)
                ),
            ));
        }
        Ok(Err(e)) => {
            return Err(AdapterError::new(
                Failure::Unreachable,
                format!("{program}: {e}"),
            ))
        }
        Ok(Ok(out)) => out,
    };
    let ran = Ran {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    };
    use std::os::unix::process::ExitStatusExt;
    // `ovs-appctl --timeout` ends itself with SIGALRM when its server does
    // not answer.
    if out.status.signal() == Some(14) {
        return Err(AdapterError::new(
            Failure::Timeout,
            format!("{program} timed out: {}", ran.message()),
        ));
    }
    if matches!(ran.code, Some(126 | 127) | None) {
        return Err(AdapterError::new(
            Failure::Unreachable,
            format!(
                "{program} could not run ({}): {}",
                out.status,
                ran.message()
            ),
        ));
    }
    Ok(ran)
}

/// Runs commands configured as argument vectors with the placeholders of
/// [`RaftPeer::fill`], for setups the built-in adapters do not cover. There
/// is no listing to read, so this adapter trusts the exit status: every
/// command must exit 0. Output saying the server is unknown or not a
/// member means the peer was already gone, so a retry after a partial
/// success finishes instead of failing on the part already done.
#[derive(Clone, Debug)]
pub struct CommandAdapter {
    pub name: String,
    pub commands: Vec<Vec<String>>,
    pub timeout: Duration,
}

impl CommandAdapter {
    pub fn new(commands: Vec<Vec<String>>) -> Self {
        Self {
            name: "command".into(),
            commands,
            timeout: super::DEFAULT_TIMEOUT,
        }
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

#[async_trait]
impl RaftAdapter for CommandAdapter {
    fn name(&self) -> &str {
        &self.name
    }

    /// Configured commands may carry a password: only their programs are
    /// shown.
    fn target(&self) -> String {
        self.commands
            .iter()
            .map(|argv| format!("{} (arguments not shown)", argv[0]))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn remove_peer(&self, peer: &RaftPeer) -> Result<Removal, AdapterError> {
        let mut outcome = Removal::AlreadyGone;
        for argv in &self.commands {
            let args: Vec<String> = argv.iter().map(|a| peer.fill(a)).collect();
            let ran = run(&args, self.timeout).await?;
            if ran.succeeded() {
                outcome = Removal::Removed;
                continue;
            }
            if says_gone(&ran.stderr) || says_gone(&ran.stdout) {
                continue;
            }
            return Err(AdapterError::new(
                Failure::Refused,
                format!(
                    "{} exited with {}: {}",
                    args[0],
                    ran.code
                        .map_or("a signal".into(), |c| format!("exit status: {c}")),
                    ran.message()
                ),
            ));
        }
        Ok(outcome)
    }
}

/// Whether a raft tool says the server is not in its raft. A bare "not
/// found" is not enough: a shell says it of a missing program.
fn says_gone(output: &str) -> bool {
    let text = output.to_lowercase();
    ["unknown server", "no such server", "not a member"]
        .iter()
        .any(|p| text.contains(p))
}
