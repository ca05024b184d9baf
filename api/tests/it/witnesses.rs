//! Witnessed checkpoints through the built binaries (C2SP tlog-witness,
//! tlog-cosignature): a log with two `stratum witness serve` and PyPI's
//! `aics-witness` (an implementation not written here) collects their
//! cosignatures, which Go's `sumdb/note` verifies with each witness's key;
//! a second database presented as the same log is refused by every
//! witness and by `stratum log watch` with a quorum; witnesses that are
//! down, slow or answer garbage delay no commit, are counted and named by
//! the alarm, and cosign once back; a witness killed with SIGKILL never
//! cosigns a smaller size after its restart.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
use tokio::process::{Child, Command};

use crate::binary::{free_port, start, stratum_vars, Server, ADMIN, THIS_BUILD};
use crate::support::tools_available;
use crate::transparency::{checkpoint_at_head, go_verifier, keygen, stratum, watch_with};
pub(crate) use crate::transparency::{head, text};

pub(crate) const ORIGIN: &str = "stratum.test-log";

/// `stratum witness keygen NAME`: the key file (0600) and the verifier key's.
pub(crate) fn witness_keygen(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let o = stratum(
        &["witness", "keygen", name, "--dir", dir.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let file = name.replace('/', "_");
    let (key, public) = (
        dir.join(format!("{file}.key")),
        dir.join(format!("{file}.pub")),
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let vkey = std::fs::read_to_string(&public).unwrap();
    assert!(vkey.starts_with(&format!("{name}+")), "{vkey}");
    // A cosignature/v1 verifier key: type 0x04.
    let b64 = vkey.trim().splitn(3, '+').nth(2).unwrap();
    assert_eq!(
        base64::prelude::BASE64_STANDARD.decode(b64).unwrap()[0],
        0x04
    );
    (key, public)
}

/// Waits until something accepts connections on `port`.
pub(crate) async fn listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A `stratum witness serve` on `port`.
pub(crate) struct StratumWitness {
    pub(crate) child: Child,
    pub(crate) key: PathBuf,
    pub(crate) public: PathBuf,
    pub(crate) state: PathBuf,
    pub(crate) port: u16,
    pub(crate) log_key: PathBuf,
}

impl StratumWitness {
    pub(crate) async fn start(dir: &Path, name: &str, log_key: &Path, port: u16) -> Self {
        let (key, public) = witness_keygen(dir, name);
        let state = dir.join(format!("{}-state", name.replace('/', "_")));
        let child = Self::spawn(&key, &state, log_key, port).await;
        Self {
            child,
            key,
            public,
            state,
            port,
            log_key: log_key.to_owned(),
        }
    }

    pub(crate) async fn spawn(key: &Path, state: &Path, log_key: &Path, port: u16) -> Child {
        let mut cmd = Command::new(THIS_BUILD);
        for k in stratum_vars() {
            cmd.env_remove(k);
        }
        let child = cmd
            .args([
                "witness",
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--key",
            ])
            .arg(key)
            .arg("--state")
            .arg(state)
            .arg("--log-key")
            .arg(log_key)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        listening(port, "stratum witness serve").await;
        child
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn vkey(&self) -> String {
        std::fs::read_to_string(&self.public)
            .unwrap()
            .trim()
            .to_owned()
    }

    /// SIGKILL, then the same witness again on its state.
    pub(crate) async fn kill_and_restart(&mut self) {
        self.child.kill().await.unwrap();
        self.child = Self::spawn(&self.key, &self.state, &self.log_key, self.port).await;
    }

    /// The size of the newest checkpoint it keeps for the log.
    pub(crate) async fn kept_size(&self) -> Option<u64> {
        let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(ORIGIN.as_bytes()));
        let res = reqwest::get(format!("{}/{hash}/checkpoint", self.url()))
            .await
            .unwrap();
        if res.status() == 404 {
            return None;
        }
        assert_eq!(res.status(), 200);
        res.text().await.unwrap().lines().nth(1)?.parse().ok()
    }
}

/// PyPI's aics-witness, witnessing the log of `log_key`.
async fn aics_witness(dir: &Path, log_key: &Path, port: u16) -> (Child, String, PathBuf) {
    let config = dir.join("aics").join("witness.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let init = std::process::Command::new("aics-witness")
        .args(["init", "--config"])
        .arg(&config)
        .args([
            "--name",
            "aics.test/w",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", text(&init));
    let vkey = String::from_utf8(init.stdout).unwrap().trim().to_owned();
    let public = dir.join("aics.pub");
    std::fs::write(&public, format!("{vkey}\n")).unwrap();
    let log_vkey = std::fs::read_to_string(log_key).unwrap();
    let add = std::process::Command::new("aics-witness")
        .args(["add-log", "--config"])
        .arg(&config)
        .args(["--origin", ORIGIN, "--vkey", log_vkey.trim()])
        .output()
        .unwrap();
    assert!(add.status.success(), "{}", text(&add));
    let child = Command::new("aics-witness")
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("aics.log")).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    listening(port, "aics-witness").await;
    (child, format!("http://127.0.0.1:{port}"), public)
}

fn aics_available() -> bool {
    tools_available(
        &["aics-witness"],
        "STRATUM_REQUIRE_WITNESSES",
        "the witness tests against PyPI's aics-witness",
    )
}

/// The settings of a server that signs as `ORIGIN` and asks the witnesses
/// of `policy`.
pub(crate) fn witnessed(dir: &Path, key: &Path, policy: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("STRATUM_LOG_SIGNING_KEY_FILE", key.display().to_string()),
        (
            "STRATUM_LOG_STATE_FILE",
            dir.join("log.checkpoint").display().to_string(),
        ),
        ("STRATUM_LOG_WITNESS_POLICY", policy.display().to_string()),
    ]
}

pub(crate) async fn served(s: &Server) -> String {
    s.http
        .get(s.url("/v1/log/checkpoint"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The served checkpoint's size and the names of its cosigners (every
/// signature line but the log's).
pub(crate) fn size_and_cosigners(note: &str) -> (u64, Vec<String>) {
    let size = note
        .lines()
        .nth(1)
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut names: Vec<String> = note
        .lines()
        .filter_map(|l| l.strip_prefix("— "))
        .filter_map(|l| l.split(' ').next())
        .filter(|n| *n != ORIGIN)
        .map(str::to_owned)
        .collect();
    names.sort();
    (size, names)
}

/// Waits until the served checkpoint covers the head and carries the
/// cosignatures of `names`; answers it and how long that took.
pub(crate) async fn cosigned_at_head(
    s: &Server,
    names: &[&str],
    within: Duration,
) -> (String, Duration) {
    let since = Instant::now();
    let want = head(s).await;
    loop {
        let note = served(s).await;
        let (size, cosigners) = size_and_cosigners(&note);
        if size >= want && names.iter().all(|n| cosigners.iter().any(|c| c == n)) {
            return (note, since.elapsed());
        }
        assert!(
            since.elapsed() < within,
            "the checkpoint of {want} events was not cosigned by {names:?} within {within:?}: \
             served {note}\nthe service logged:\n{}",
            s.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn policy(
    dir: &Path,
    name: &str,
    witnesses: &[(&str, String, String)],
    quorum: usize,
) -> PathBuf {
    let mut text = "# the log's witnesses\n".to_owned();
    for (name, vkey, url) in witnesses {
        text.push_str(&format!("witness {name} {vkey} {url}\n"));
    }
    text.push_str(&format!("quorum {quorum}\n"));
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn watch(s: &Server, public: &Path, state: &Path, policy: &Path) -> Output {
    watch_with(
        s,
        public,
        state,
        &["--witness-policy", policy.to_str().unwrap()],
    )
}

/// Submits a checkpoint of `s` to a witness as the spec says: the status
/// and the body.
pub(crate) async fn submit(s: &Server, witness: &str, old: u64, note: &str) -> (u16, String) {
    let (size, _) = size_and_cosigners(note);
    let mut body = format!("old {old}\n");
    if old > 0 && old < size {
        let (status, p) = s
            .get(&format!("/v1/log/consistency?from={old}&to={size}"))
            .await;
        assert_eq!(status, 200, "{p}");
        for h in p["proof"].as_array().unwrap() {
            let bytes = hex::decode(h.as_str().unwrap()).unwrap();
            body.push_str(&base64::prelude::BASE64_STANDARD.encode(bytes));
            body.push('\n');
        }
    }
    body.push('\n');
    // The log's own note, without the cosignatures.
    let own: String = note
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("— ") || l.starts_with(&format!("— {ORIGIN} ")))
        .collect();
    body.push_str(&own);
    let res = reqwest::Client::new()
        .post(format!("{witness}/add-checkpoint"))
        .body(body)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_witnesses_cosign_and_a_second_history_under_the_same_key_is_refused() {
    let Some(go) = go_verifier() else { return };
    if !aics_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (log_key, log_public) = keygen(d, ORIGIN);
    let w1 = StratumWitness::start(d, "w1.test/w", &log_public, free_port()).await;
    let w2 = StratumWitness::start(d, "w2.test/w", &log_public, free_port()).await;
    let (_aics, aics_url, aics_public) = aics_witness(d, &log_public, free_port()).await;
    let aics_vkey = std::fs::read_to_string(&aics_public)
        .unwrap()
        .trim()
        .to_owned();
    let all = [
        ("w1", w1.vkey(), w1.url()),
        ("w2", w2.vkey(), w2.url()),
        ("aics", aics_vkey.clone(), aics_url.clone()),
    ];
    let log_policy = policy(d, "log.policy", &all, 2);
    let a_dir = d.join("a");
    std::fs::create_dir_all(&a_dir).unwrap();
    let a = start(&a_dir, &witnessed(&a_dir, &log_key, &log_policy)).await;

    // 1. A commit is cosigned by all three within 2 s.
    a.admit("n-1", "10.9.0.1").await;
    let (note, took) = cosigned_at_head(
        &a,
        &["aics.test/w", "w1.test/w", "w2.test/w"],
        Duration::from_secs(10),
    )
    .await;
    assert!(took < Duration::from_secs(2), "cosigned in {took:?}");
    for _ in 0..3 {
        let i = head(&a).await;
        a.admit(&format!("n-{i}"), &format!("10.9.1.{}", i % 250 + 1))
            .await;
        let (_, took) = cosigned_at_head(
            &a,
            &["aics.test/w", "w1.test/w", "w2.test/w"],
            Duration::from_secs(10),
        )
        .await;
        assert!(took < Duration::from_secs(2), "cosigned in {took:?}");
    }
    // Go's sumdb/note verifies each witness's cosignature with its key.
    let w1_pub = w1.public.to_str().unwrap().to_owned();
    let w2_pub = w2.public.to_str().unwrap().to_owned();
    let aics_pub = aics_public.to_str().unwrap().to_owned();
    let o = std::process::Command::new(&go)
        .args(["-server", &a.base, "-token", ADMIN, "-vkey"])
        .arg(&log_public)
        .args([
            "-witness", &w1_pub, "-witness", &w2_pub, "-witness", &aics_pub,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        summary["cosignedBy"].as_array().unwrap().len(),
        3,
        "{summary}"
    );
    // ... and refuses a key that did not cosign.
    let (_, stranger) = witness_keygen(d, "stranger.test/w");
    let o = std::process::Command::new(&go)
        .args(["-server", &a.base, "-token", ADMIN, "-vkey"])
        .arg(&log_public)
        .args(["-witness", stranger.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("no valid cosignature by the witness stranger.test/w"));
    assert!(note.starts_with(&format!("{ORIGIN}\n")), "{note}");

    // The auditor with a 2-of-3 policy (no URLs: it only checks).
    let auditor = {
        let text = format!(
            "witness w1 {}\nwitness w2 {}\nwitness aics {aics_vkey}\nquorum 2\n",
            w1.vkey(),
            w2.vkey()
        );
        let p = d.join("auditor.policy");
        std::fs::write(&p, text).unwrap();
        p
    };
    let watched = d.join("watch-a");
    let o = watch(&a, &log_public, &watched, &auditor);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("cosigned by the witnesses"),
        "{}",
        text(&o)
    );

    // 2. A second database under the same key and origin, with another,
    // longer history: a split view. Each witness refuses it.
    let b_dir = d.join("b");
    std::fs::create_dir_all(&b_dir).unwrap();
    let b_metrics = free_port();
    let mut b_env = witnessed(&b_dir, &log_key, &log_policy);
    b_env.push(("STRATUM_METRICS_LISTEN", format!("127.0.0.1:{b_metrics}")));
    let b = start(&b_dir, &b_env).await;
    for i in 0..10 {
        b.admit(&format!("other-{i}"), &format!("10.8.0.{}", i + 1))
            .await;
    }
    let b_note = b
        .eventually("the second log's checkpoint", || async {
            let n = served(&b).await;
            (size_and_cosigners(&n).0 >= 10).then_some(n)
        })
        .await;
    let held = w1.kept_size().await.expect("w1 cosigned the first log");
    let (b_size, b_cosigners) = size_and_cosigners(&b_note);
    assert!(b_size > held, "{b_size} > {held}");
    assert!(
        b_cosigners.is_empty(),
        "a witness cosigned the split view: {b_note}"
    );
    for url in [w1.url(), w2.url(), aics_url.clone()] {
        let (status, body) = submit(&b, &url, held, &b_note).await;
        assert!(matches!(status, 409 | 422), "{url}: {status} {body}");
        let (status, body) = submit(&b, &url, 0, &b_note).await;
        assert!(matches!(status, 409 | 422), "{url}: {status} {body}");
    }
    // Its own submissions are counted as refused by each witness, and its
    // alarm names them.
    b.eventually("the second log's refusals, counted", || async {
        let m = metrics(b_metrics).await;
        ["w1", "w2", "aics"]
            .iter()
            .all(|w| {
                ["inconsistent", "conflict", "ahead"].iter().any(|r| {
                    metric(
                        &m,
                        &format!(
                            "stratum_witness_failures_total{{reason=\"{r}\",witness=\"{w}\"}}"
                        ),
                    ) >= 1.0
                })
            })
            .then_some(())
    })
    .await;
    b.eventually("the second log's alarm naming every witness", || async {
        let a = witness_alarm(&b).await?;
        let m = a["message"].as_str()?.to_owned();
        (a["clearedAt"].is_null() && m.contains("aics; w1; w2")).then_some(())
    })
    .await;
    // The auditor with
    // the quorum policy refuses its checkpoint, naming why.
    let o = watch(&b, &log_public, &d.join("watch-b"), &auditor);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = String::from_utf8_lossy(&o.stderr).to_string() + &String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("cosigned by 0 of the 2 witnesses")
            && said.contains("not signed: w1, w2, aics"),
        "{said}"
    );
    // The first log's own auditor, kept from before, refuses it too (a fork).
    let o = watch(&b, &log_public, &watched, &auditor);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // The witnesses still hold the first log.
    assert_eq!(w1.kept_size().await, Some(held));
}

pub(crate) async fn metrics(port: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

pub(crate) fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

pub(crate) async fn witness_alarm(s: &Server) -> Option<Value> {
    let (status, alarms) = s.get("/v1/admin/alarms").await;
    assert_eq!(status, 200, "{alarms}");
    let items = alarms["items"]
        .as_array()
        .or(alarms.as_array())
        .cloned()
        .unwrap_or_default();
    items
        .into_iter()
        .find(|a| a["name"] == "log-witness-failing")
}

/// A C2SP tlog-witness client not written here (aics-witness's
/// `WitnessClient`): it submits `s`'s checkpoint to `witness`, with
/// consistency proofs from `s`, and checks the cosignature with its own
/// code. Its answer: `ok <line>` or the name of what it raised.
fn aics_client(s: &Server, witness: &str, vkey: &str) -> String {
    const SCRIPT: &str = r#"
import json, sys, urllib.request
from aics_witness.feeder import WitnessClient
witness, vkey, server, token = sys.argv[1:5]
def get(path):
    req = urllib.request.Request(server + path, headers={"Authorization": "Bearer " + token})
    return urllib.request.urlopen(req).read()
def proof(old, new):
    p = json.loads(get(f"/v1/log/consistency?from={old}&to={new}"))
    return [bytes.fromhex(h) for h in p["proof"]]
note = get("/v1/log/checkpoint").decode()
try:
    print("ok", WitnessClient(witness, vkey).submit(note, proof).strip())
except Exception as e:
    print(type(e).__name__, e)
"#;
    let o = std::process::Command::new("python3")
        .args(["-c", SCRIPT, witness, vkey, &s.base, ADMIN])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8(o.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stratum_s_witness_answers_a_client_not_written_here() {
    if !aics_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (log_key, log_public) = keygen(d, ORIGIN);
    let w = StratumWitness::start(d, "w.test/w", &log_public, free_port()).await;
    let a_dir = d.join("a");
    std::fs::create_dir_all(&a_dir).unwrap();
    let signing = |dir: &Path| {
        vec![
            (
                "STRATUM_LOG_SIGNING_KEY_FILE",
                log_key.display().to_string(),
            ),
            (
                "STRATUM_LOG_STATE_FILE",
                dir.join("log.checkpoint").display().to_string(),
            ),
        ]
    };
    let a = start(&a_dir, &signing(&a_dir)).await;
    // Its cosignature verifies with the client's own code, from size 0
    // and then with a consistency proof from the size it holds.
    for round in 0..3u32 {
        for i in 0..5 {
            a.admit(
                &format!("n-{round}-{i}"),
                &format!("10.5.{round}.{}", i + 1),
            )
            .await;
        }
        let want = head(&a).await;
        checkpoint_at_head(&a, Instant::now()).await;
        let said = aics_client(&a, &w.url(), &w.vkey());
        assert!(said.starts_with("ok — w.test/w "), "{said}");
        assert_eq!(w.kept_size().await, Some(want));
    }
    // Another history under the same key: the client is refused (the
    // witness holds more, or the proof does not lead to it).
    let b_dir = d.join("b");
    std::fs::create_dir_all(&b_dir).unwrap();
    let b = start(&b_dir, &signing(&b_dir)).await;
    for i in 0..20 {
        b.admit(&format!("other-{i}"), &format!("10.4.0.{}", i + 1))
            .await;
    }
    checkpoint_at_head(&b, Instant::now()).await;
    let said = aics_client(&b, &w.url(), &w.vkey());
    assert!(
        said.starts_with("WitnessRejected") || said.starts_with("WitnessConflict"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_witness_takes_a_log_s_own_origin_and_more_than_one_key() {
    // The log's origin is not its key's name (STRATUM_LOG_ORIGIN), and the
    // witness knows two keys for it (`--log-key ORIGIN=VKEY`, twice): the
    // one the log signs with now, and another.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let origin = "example.test/tree";
    let (_, old_public) = keygen(d, "old.test-log");
    let (log_key, log_public) = keygen(d, "new.test-log");
    let (w_key, w_public) = witness_keygen(d, "w.test/w");
    let port = free_port();
    let mut cmd = Command::new(crate::binary::THIS_BUILD);
    for k in stratum_vars() {
        cmd.env_remove(k);
    }
    let _w = cmd
        .args([
            "witness",
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--key",
        ])
        .arg(&w_key)
        .arg("--state")
        .arg(d.join("w-state"))
        .arg("--log-key")
        .arg(format!("{origin}={}", old_public.display()))
        .arg("--log-key")
        .arg(format!("{origin}={}", log_public.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    listening(port, "stratum witness serve").await;
    let vkey = std::fs::read_to_string(&w_public)
        .unwrap()
        .trim()
        .to_owned();
    let p = policy(
        d,
        "log.policy",
        &[("w", vkey, format!("http://127.0.0.1:{port}"))],
        1,
    );
    let mut env = witnessed(d, &log_key, &p);
    env.push(("STRATUM_LOG_ORIGIN", origin.to_owned()));
    let s = start(d, &env).await;
    s.admit("n-1", "10.3.0.1").await;
    let (note, _) = cosigned_at_head(&s, &["w.test/w"], Duration::from_secs(10)).await;
    assert!(note.starts_with(&format!("{origin}\n")), "{note}");
    // Its monitoring path is the origin's hash.
    let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(origin.as_bytes()));
    let kept = reqwest::get(format!("http://127.0.0.1:{port}/{hash}/checkpoint"))
        .await
        .unwrap();
    assert_eq!(kept.status(), 200);
    assert!(kept.text().await.unwrap().contains("— w.test/w "));
}
