//! A harness for tests that start the built `stratum` binary as an
//! operator would: a fresh database and a free port per server, settings
//! in the environment or as flags, stderr kept in a file, bounded waits.

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use stratum_store::testing::{postgres, TestDb};
use tokio::process::{Child, Command};
use tokio::time::{sleep, Instant};

/// The admin bearer token: `STRATUM_BOOTSTRAP_TOKEN` (32 characters or more).
pub(crate) const ADMIN: &str = "raft-serve-bootstrap-token-0123456789abcdef";
pub(crate) const MEMBERS: &str = "/v1/admin/cluster/members";
/// The longest any wait may take.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);
/// How often a wait looks again.
pub(crate) const STEP: Duration = Duration::from_millis(50);

pub(crate) use stratum_api::testing::free_port;

/// The test process's own `STRATUM_*` variables, which no `stratum` a test
/// starts may inherit.
pub(crate) fn stratum_vars() -> Vec<std::ffi::OsString> {
    std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| k.to_string_lossy().starts_with("STRATUM_"))
        .collect()
}

/// `stratum serve` on `port` with a fresh SQLite database in `dir`: none of
/// the test's own `STRATUM_*` variables, only the base settings and `env`.
pub(crate) fn serve_command(dir: &Path, port: u16, env: &[(&str, String)]) -> Command {
    serve_command_with(dir, port, &[], env)
}

/// `stratum serve` with flags as well as settings in the environment.
pub(crate) fn serve_command_with(
    dir: &Path,
    port: u16,
    flags: &[String],
    env: &[(&str, String)],
) -> Command {
    serve_command_under(dir, port, None, flags, env)
}

/// `stratum serve`, started by `sh` after the shell command `prelude`
/// (`ulimit -n 256`, say) when one is given.
pub(crate) fn serve_command_under(
    dir: &Path,
    port: u16,
    prelude: Option<&str>,
    flags: &[String],
    env: &[(&str, String)],
) -> Command {
    serve_program(Path::new(THIS_BUILD), dir, port, prelude, flags, env)
}

/// This build's `stratum`.
pub(crate) const THIS_BUILD: &str = env!("CARGO_BIN_EXE_stratum");

/// The host's command that makes a token of `user/operator` with
/// `ClusterOperator` (its JSON answer has the secret and the id).
pub(crate) const OPERATOR_TOKEN: &[&str] = &[
    "token",
    "create",
    "--principal",
    "user/operator",
    "--policy",
    "ClusterOperator",
];

/// [`serve_command_under`] with the `stratum` binary at `bin` (another
/// build's).
pub(crate) fn serve_program(
    bin: &Path,
    dir: &Path,
    port: u16,
    prelude: Option<&str>,
    flags: &[String],
    env: &[(&str, String)],
) -> Command {
    let mut cmd = match prelude {
        // A prelude that mounts runs in a mount namespace of its own, as an
        // unprivileged user may make one.
        Some(prelude) if prelude.starts_with("mount ") => {
            let mut c = Command::new("unshare");
            c.args(["--user", "--map-root-user", "--mount", "sh", "-c"])
                .arg(format!("{prelude} && exec \"$0\" serve \"$@\""))
                .arg(bin);
            c
        }
        Some(prelude) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("{prelude} && exec \"$0\" serve \"$@\""))
                .arg(bin);
            c
        }
        None => {
            let mut c = Command::new(bin);
            c.arg("serve");
            c
        }
    };
    cmd.args(flags);
    for key in stratum_vars() {
        cmd.env_remove(key);
    }
    cmd.env("STRATUM_LISTEN", format!("127.0.0.1:{port}"))
        .env(
            "STRATUM_DATABASE_URL",
            format!("sqlite://{}", dir.join("stratum.db").display()),
        )
        .env("STRATUM_BOOTSTRAP_TOKEN", ADMIN)
        .env("STRATUM_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd
}

/// `bin <args>` (this build's or another's) on the host against the
/// database at `url`, as the machine's operator, with none of the test's
/// own `STRATUM_*` variables.
pub(crate) fn on_host_with(bin: &Path, url: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(bin);
    for key in stratum_vars() {
        cmd.env_remove(key);
    }
    cmd.args(args)
        .env("STRATUM_DATABASE_URL", url)
        .env("USER", "root")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// `stratum <args>` on the host, against the SQLite database of a server
/// started in `dir`.
pub(crate) fn host(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_stratum"))
        .args(args)
        .env(
            "STRATUM_DATABASE_URL",
            format!("sqlite://{}", dir.join("stratum.db").display()),
        )
        .output()
        .unwrap()
}

/// [`host`], which must succeed; its standard output as JSON.
pub(crate) fn host_json(dir: &Path, args: &[&str]) -> Value {
    let out = host(dir, args);
    assert!(
        out.status.success(),
        "stratum {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// An executable bash script `name` in `dir`.
pub(crate) fn program(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A program that appends its arguments to `calls` as one line and succeeds.
pub(crate) fn recorder(dir: &Path, name: &str, calls: &Path) -> PathBuf {
    program(
        dir,
        name,
        &format!("printf '%s\\n' \"$*\" >> '{}'\nexit 0", calls.display()),
    )
}

/// A stand-in `ovs-appctl` for faults the real one cannot be made to
/// show: each call is appended to `calls`; `cluster/status DB` lists the
/// servers in `<dir>/<DB>.servers` as the real one does; `cluster/kick DB
/// SERVER` prints `started removal` and, unless `<dir>/kick-is-lost`
/// exists (a leader that lost leadership in between), takes SERVER out.
pub(crate) fn fake_ovs_appctl(dir: &Path, calls: &Path, nb: &[&str], sb: &[&str]) -> PathBuf {
    for (db, servers) in [("OVN_Northbound", nb), ("OVN_Southbound", sb)] {
        let text: String = servers.iter().map(|s| format!("{s}\n")).collect();
        std::fs::write(dir.join(format!("{db}.servers")), text).unwrap();
    }
    program(
        dir,
        "ovs-appctl",
        &format!(
            r#"printf '%s\n' "$*" >> '{calls}'
[ "${{1#--timeout=}}" != "$1" ] && shift
shift 2
state='{dir}'/"$2".servers
case "$1" in
  cluster/status)
    printf 'a1b2\nName: %s\nStatus: cluster member\nRole: leader\nLeader: self\nServers:\n' "$2"
    while read -r s; do printf '    a1b2 (a1b2 at %s)\n' "$s"; done < "$state"
    ;;
  cluster/kick)
    echo 'started removal'
    if [ ! -e '{dir}/kick-is-lost' ]; then grep -vxF -- "$3" "$state" > "$state.new" || true; mv "$state.new" "$state"; fi
    ;;
esac
exit 0"#,
            calls = calls.display(),
            dir = dir.display(),
        ),
    )
}

/// A stand-in `syncobj_admin`: each call is appended to `calls`;
/// `-status` lists `self` and the members in `<dir>/syncobj.members`
/// (the first line is the leader), `-remove ADDR` prints `FAIL REMOVE
/// ADDR` while `<dir>/syncobj.fail` exists, and otherwise `SUCCESS REMOVE
/// ADDR` and takes ADDR out (and then, while `<dir>/syncobj.slow` exists,
/// takes that file away and hangs for 30 s, as a call that is applied but
/// answers too late); `-transfer` moves the leadership to the next member
/// (the first line goes last); the time of each `-remove` is appended to
/// `<calls>.times`. It exits 0 whatever happened, as the real one
/// does.
pub(crate) fn fake_syncobj_admin(dir: &Path, calls: &Path, members: &[&str]) -> PathBuf {
    let text: String = members.iter().map(|s| format!("{s}\n")).collect();
    std::fs::write(dir.join("syncobj.members"), text).unwrap();
    program(
        dir,
        "syncobj_admin",
        &format!(
            r#"printf '%s\n' "$*" >> '{calls}'
state='{dir}/syncobj.members'
conn="$2"
case "$3" in
  -status)
    echo "leader: $(head -n1 "$state")"
    echo "self: $conn"
    while read -r m; do [ "$m" != "$conn" ] && echo "partner_node_status_server_$m: 2"; done < "$state"
    echo "state: 2"
    ;;
  -remove)
    date +%s%N >> '{calls}.times'
    if [ -e '{dir}/syncobj.fail' ]; then echo "FAIL REMOVE $4"; exit 0; fi
    grep -vxF -- "$4" "$state" > "$state.new" || true; mv "$state.new" "$state"
    if [ -e '{dir}/syncobj.slow' ]; then rm -f '{dir}/syncobj.slow'; sleep 30; fi
    echo "SUCCESS REMOVE $4"
    ;;
  -transfer)
    {{ tail -n +2 "$state"; head -n1 "$state"; }} > "$state.new"; mv "$state.new" "$state"
    echo "SUCCESS TRANSFER"
    ;;
esac
exit 0"#,
            calls = calls.display(),
            dir = dir.display(),
        ),
    )
}

/// The value of one series of `/metrics` at `addr` (its name with its
/// labels, as Prometheus' text format spells them), 0 when it is absent.
pub(crate) async fn metric(addr: &str, series: &str) -> u64 {
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0)
}

/// The lines of a file; none when it does not exist (yet).
pub(crate) fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The events of a history of one type, oldest first.
pub(crate) fn of_type<'a>(history: &'a [Value], event_type: &str) -> Vec<&'a Value> {
    history.iter().filter(|e| e["type"] == event_type).collect()
}

pub(crate) fn position(event: &Value) -> u64 {
    event["position"].as_u64().unwrap()
}

/// A running `stratum serve`, killed when dropped; its standard error goes
/// to a file.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) base: String,
    pub(crate) stderr: PathBuf,
    pub(crate) http: reqwest::Client,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Starts `stratum serve` with `env` and waits until it answers `/healthz`.
pub(crate) async fn start(dir: &Path, env: &[(&str, String)]) -> Server {
    start_with(dir, &[], env).await
}

/// Starts `stratum serve` trusting the test release keys.
pub(crate) async fn start_trusting_releases(dir: &Path) -> Server {
    start(
        dir,
        &[(
            "STRATUM_RELEASE_KEYS",
            stratum_domain::testing::release_keys_spec(),
        )],
    )
    .await
}

/// Starts `stratum serve` with `flags` and `env`.
pub(crate) async fn start_with(dir: &Path, flags: &[String], env: &[(&str, String)]) -> Server {
    start_under(dir, None, flags, env).await
}

/// Starts `stratum serve` after the shell command `prelude`.
pub(crate) async fn start_under(
    dir: &Path,
    prelude: Option<&str>,
    flags: &[String],
    env: &[(&str, String)],
) -> Server {
    start_program(Path::new(THIS_BUILD), dir, prelude, flags, env).await
}

/// Starts `serve` of the `stratum` binary at `bin` (another build's).
pub(crate) async fn start_program(
    bin: &Path,
    dir: &Path,
    prelude: Option<&str>,
    flags: &[String],
    env: &[(&str, String)],
) -> Server {
    let port = free_port();
    let stderr = dir.join("stderr.log");
    let child = serve_program(bin, dir, port, prelude, flags, env)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        base: format!("http://127.0.0.1:{port}"),
        stderr,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
    };
    server.wait_healthy().await;
    server
}

impl Server {
    /// Sends SIGTERM, as a service manager stops it.
    pub(crate) fn terminate(&self) {
        let pid = self.child.id().expect("the server is running");
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// The `host:port` it listens on.
    pub(crate) fn addr(&self) -> String {
        self.base.trim_start_matches("http://").to_owned()
    }

    /// What the service logged so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) async fn wait_healthy(&mut self) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "stratum serve exited ({status}) before answering /healthz:\n{}",
                    self.log()
                );
            }
            let up = self
                .http
                .get(self.url("/healthz"))
                .send()
                .await
                .is_ok_and(|r| r.status() == reqwest::StatusCode::OK);
            if up {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "stratum serve did not answer /healthz within {DEADLINE:?}:\n{}",
                self.log()
            );
            sleep(STEP).await;
        }
    }

    /// Asks `probe` every `STEP` until it answers, for at most `DEADLINE`.
    pub(crate) async fn eventually<T, F, Fut>(&self, what: &str, mut probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(v) = probe().await {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {DEADLINE:?}; the service logged:\n{}",
                self.log()
            );
            sleep(STEP).await;
        }
    }

    /// Waits until the service has logged `text`.
    pub(crate) async fn logs(&self, text: &str) {
        self.eventually(&format!("a log line with {text:?}"), || async {
            self.log().contains(text).then_some(())
        })
        .await;
    }

    /// Waits for a log line naming `raft` and its `adapter`.
    pub(crate) async fn announces(&self, raft: &str, adapter: &str) {
        self.eventually(
            &format!("a start-up line naming raft {raft} with adapter {adapter}"),
            || async {
                self.log()
                    .lines()
                    .any(|l| l.contains("raft") && l.contains(raft) && l.contains(adapter))
                    .then_some(())
            },
        )
        .await;
    }

    /// A request as the admin: the status and the body as JSON (`Null`
    /// when it is not).
    pub(crate) async fn call(&self, req: reqwest::RequestBuilder) -> (u16, Value) {
        let req = req.bearer_auth(ADMIN).build().unwrap();
        let method = axum::http::Method::from_bytes(req.method().as_str().as_bytes()).unwrap();
        let path = req.url().path().to_owned();
        let res = self.http.execute(req).await.unwrap();
        let status = res.status().as_u16();
        crate::support::assert_documented(
            &method,
            &path,
            axum::http::StatusCode::from_u16(status).unwrap(),
        );
        let text = res.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        self.call(self.http.get(self.url(path))).await
    }

    /// The replicas of the server's database as it lists them (their
    /// storage, agreed settings and alarms too), which it must answer.
    pub(crate) async fn replicas(&self) -> Value {
        let (status, body) = self.get("/v1/admin/replicas").await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// A new token's secret for `principal` with one policy, made as the
    /// admin.
    pub(crate) async fn token_for(&self, principal: &str, policy: &str) -> String {
        let (status, t) = self
            .post(
                "/v1/admin/iam/tokens",
                json!({"principal": principal, "policies": [policy]}),
            )
            .await;
        assert_eq!(status, 201, "{t}");
        t["token"].as_str().unwrap().to_owned()
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(self.http.post(self.url(path)).json(&body)).await
    }

    /// `POST /v1/admin/cluster/members/{nodeId}/{action}`; panics unless 200.
    pub(crate) async fn member_post(&self, node_id: &str, action: &str, body: Value) -> Value {
        let (status, body) = self
            .post(&format!("{MEMBERS}/{node_id}/{action}"), body)
            .await;
        assert_eq!(status, 200, "{action} of {node_id}: {body}");
        body
    }

    pub(crate) async fn admit(&self, node_id: &str, mgmt_ip: &str) {
        let (status, body) = self
            .post(
                MEMBERS,
                json!({"nodeId": node_id, "role": "hybrid", "mgmtIp": mgmt_ip}),
            )
            .await;
        assert_eq!(status, 201, "admit {node_id}: {body}");
    }

    /// Registers test manifests of `versions` (signed by the test keys).
    pub(crate) async fn register_releases(&self, versions: &[&str]) {
        for v in versions {
            let (status, body) = self
                .post(
                    "/v1/admin/releases",
                    stratum_domain::testing::manifest(v, "13.1", None),
                )
                .await;
            assert_eq!(status, 201, "release {v}: {body}");
        }
    }

    /// Sets the release the cluster runs (once, as at install).
    pub(crate) async fn set_running_release(&self, version: &str) {
        let (status, body) = self
            .call(
                self.http
                    .put(self.url("/v1/admin/cluster/release"))
                    .json(&json!({ "version": version })),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }

    /// Plans an upgrade to `target` with a backup on the nodes; its id.
    pub(crate) async fn plan_upgrade(&self, target: &str) -> String {
        let (status, u) = self
            .post(
                "/v1/admin/upgrades",
                json!({"targetRelease": target, "backup": {"location": "node"}}),
            )
            .await;
        assert_eq!(status, 201, "{u}");
        u["id"].as_str().unwrap().to_owned()
    }

    /// Two active voters, so quorum holds, and `n-3` joining.
    pub(crate) async fn admit_three(&self) {
        for (node_id, ip) in [("n-1", "192.0.2.11"), ("n-2", "192.0.2.12")] {
            self.admit(node_id, ip).await;
            let m = self.member_post(node_id, "join-complete", json!({})).await;
            assert_eq!(m["state"], "active", "{m}");
        }
        self.admit("n-3", "192.0.2.13").await;
    }

    /// Each of `nodes` reports the current generation applied, as its
    /// reconciler would, so none lags.
    pub(crate) async fn caught_up(&self, nodes: &[&str]) {
        let (_, m) = self.get("/v1/admin/cluster/membership").await;
        for node in nodes {
            self.member_post(
                node,
                "applied-generation",
                json!({"generation": m["generation"]}),
            )
            .await;
        }
    }

    pub(crate) async fn progress(&self, node_id: &str, step: &str) {
        self.member_post(node_id, "join-progress", json!({ "step": step }))
            .await;
    }

    /// `node_id`'s agent reports its join failed at `step`, saying `error`:
    /// the member as it then stands.
    pub(crate) async fn join_failed(&self, node_id: &str, step: &str, error: &str) -> Value {
        self.member_post(
            node_id,
            "join-failed",
            json!({ "step": step, "error": error }),
        )
        .await
    }

    pub(crate) async fn member(&self, node_id: &str) -> Value {
        let (status, body) = self.get(&format!("{MEMBERS}/{node_id}")).await;
        assert_eq!(status, 200, "member {node_id}: {body}");
        body
    }

    pub(crate) async fn history(&self, node_id: &str) -> Vec<Value> {
        let (status, body) = self.get(&format!("{MEMBERS}/{node_id}/history")).await;
        assert_eq!(status, 200, "history of {node_id}: {body}");
        body["events"].as_array().unwrap().clone()
    }

    /// Waits until the member's raft cleanup is recorded; answers the record.
    pub(crate) async fn cleaned(&self, node_id: &str) -> Value {
        self.eventually(&format!("the raft cleanup of {node_id}"), || async {
            let m = self.member(node_id).await;
            (!m["raftCleanupAt"].is_null()).then_some(m)
        })
        .await
    }
}

/// The backend of a database URL, as a test's messages name it.
pub(crate) fn backend_of(url: &str) -> &'static str {
    if url.starts_with("sqlite:") {
        "sqlite"
    } else {
        "postgres"
    }
}

/// The backends a test runs on: SQLite in `dir`, and a fresh PostgreSQL
/// database where one answers (a failure where it is required).
pub(crate) async fn backends(dir: &Path) -> Vec<(Vec<(&'static str, String)>, Option<TestDb>)> {
    let mut out = vec![(
        vec![(
            "STRATUM_DATABASE_URL",
            format!("sqlite://{}", dir.join("stratum.db").display()),
        )],
        None,
    )];
    if let Some(db) = postgres().await {
        out.push((vec![("STRATUM_DATABASE_URL", db.url.clone())], Some(db)));
    }
    out
}

/// The replica that answered a listing of [`Server::replicas`].
pub(crate) fn this_replica(listing: &Value) -> &Value {
    listing["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["this"] == true)
        .unwrap_or_else(|| panic!("no replica is the one that answered: {listing}"))
}
