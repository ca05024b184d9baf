//! The log as a transparency log, through the built binary: checkpoints
//! signed with a key `stratum log keygen` made, checked by an independent
//! verifier built from Go's `golang.org/x/mod/sumdb/note` and `tlog`
//! (`api/tests/tlog-verify`) on both backends, across a restart and two
//! replicas; every refusal of `stratum log watch` and `events verify
//! --file --key`; and the fork alarm after an older database is restored.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::binary::{start, Server, ADMIN};
use crate::support::tools_available;

/// The Go verifier, built once (GOPATH mode, Debian's golang.org/x/mod).
pub(crate) fn go_verifier() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !tools_available(
                &["go", "/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog"],
                "STRATUM_REQUIRE_GO",
                "the Go checkpoint verifier's tests (golang-go, golang-golang-x-mod-dev)",
            ) {
                return None;
            }
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tlog-verify");
            let out =
                std::env::temp_dir().join(format!("stratum-tlog-verify-{}", std::process::id()));
            std::fs::create_dir_all(&out).unwrap();
            let bin = out.join("tlog-verify");
            let built = std::process::Command::new("go")
                .args(["build", "-o"])
                .arg(&bin)
                .arg(".")
                .current_dir(&src)
                .env("GO111MODULE", "off")
                .env("GOPATH", "/usr/share/gocode")
                .env("GOCACHE", out.join("cache"))
                .env("GOFLAGS", "")
                .output()
                .unwrap();
            assert!(
                built.status.success(),
                "building the Go verifier: {}",
                String::from_utf8_lossy(&built.stderr)
            );
            Some(bin)
        })
        .clone()
}

#[test]
fn the_go_verifier_accepts_good_logs_and_refuses_tampered_ones() {
    // Its own test first: a verifier that accepts anything proves nothing.
    if go_verifier().is_none() {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tlog-verify/selftest.sh");
    let o = std::process::Command::new("sh")
        .arg(script)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

/// `stratum <args>` with the test's own settings removed.
pub(crate) fn stratum(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_stratum"));
    for k in crate::binary::stratum_vars() {
        cmd.env_remove(k);
    }
    cmd.args(args).envs(env.iter().copied()).output().unwrap()
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A key pair made by `stratum log keygen NAME` in `dir`: the two files.
pub(crate) fn keygen(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let o = stratum(
        &["log", "keygen", name, "--dir", dir.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let key = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    let private = std::fs::read_to_string(&key).unwrap();
    assert!(
        private.starts_with(&format!("PRIVATE+KEY+{name}+")),
        "{private}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    (key, public)
}

/// The settings of a server that signs with `key`, remembering what it
/// signed in `state`, on `db` (SQLite in the server's directory if none).
fn signing(key: &Path, state: &Path, db: Option<&str>) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("STRATUM_LOG_SIGNING_KEY_FILE", key.display().to_string()),
        ("STRATUM_LOG_STATE_FILE", state.display().to_string()),
    ];
    if let Some(url) = db {
        env.push(("STRATUM_DATABASE_URL", url.to_owned()));
    }
    env
}

pub(crate) async fn head(s: &Server) -> u64 {
    let (status, r) = s.get("/readyz").await;
    assert_eq!(status, 200, "{r}");
    r["position"].as_u64().unwrap()
}

/// Admits `n` members named `prefix-i`.
async fn admit_many(s: &Server, prefix: &str, n: u32) {
    // Addresses of their own per prefix.
    let net = prefix.bytes().map(u32::from).sum::<u32>() % 200 + 20;
    for i in 0..n {
        s.admit(
            &format!("{prefix}-{i}"),
            &format!("10.{net}.{}.{}", i / 250, i % 250 + 1),
        )
        .await;
    }
}

/// The signed checkpoint's text, once it covers the head, and how long it
/// took from `since`.
pub(crate) async fn checkpoint_at_head(s: &Server, since: Instant) -> (String, Duration) {
    let want = head(s).await;
    s.eventually("a checkpoint of the head", || async {
        let res = s
            .http
            .get(s.url("/v1/log/checkpoint"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .ok()?;
        let ct = res.headers()[reqwest::header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        let note = res.text().await.ok()?;
        let size: u64 = note.lines().nth(1)?.parse().ok()?;
        assert_eq!(ct, "text/plain; charset=utf-8");
        (size >= want).then(|| (note, since.elapsed()))
    })
    .await
}

/// The Go verifier against a server; its summary, or its failure.
fn verify(bin: &Path, s: &Server, vkey: &Path, extra: &[&str]) -> Result<Value, String> {
    let o = std::process::Command::new(bin)
        .args(["-server", &s.base, "-token", ADMIN, "-vkey"])
        .arg(vkey)
        .args(extra)
        .output()
        .unwrap();
    if o.status.success() {
        Ok(serde_json::from_slice(&o.stdout).unwrap())
    } else {
        Err(text(&o))
    }
}

/// The whole contract on one backend: a first server, a restart, and (on
/// PostgreSQL) a second replica.
async fn verified_by_go(db_url: Option<String>, bin: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = keygen(dir.path(), "stratum.test-log");
    let state_a = dir.path().join("a.checkpoint");
    let env = signing(&key, &state_a, db_url.as_deref());
    let a = start(dir.path(), &env).await;
    assert!(a.log().contains("checkpoints are signed"), "{}", a.log());
    // Past one full tile of leaves, in commits of one event each.
    admit_many(&a, "n", 300).await;
    let since = Instant::now();
    let (note, took) = checkpoint_at_head(&a, since).await;
    assert!(
        took < Duration::from_secs(1),
        "the checkpoint took {took:?}"
    );
    assert!(note.starts_with("stratum.test-log\n"), "{note}");
    let tile = a
        .http
        .get(a.url("/v1/log/tile/0/000"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(tile.status(), 200);
    assert_eq!(
        tile.headers()[reqwest::header::CACHE_CONTROL],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(
        tile.headers()[reqwest::header::CONTENT_TYPE],
        "application/octet-stream"
    );
    let old = dir.path().join("go-1.checkpoint");
    let first = verify(
        bin,
        &a,
        &public,
        &["-save", old.to_str().unwrap(), "-samples", "12"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first["size"], head(&a).await, "{first}");
    assert!(first["tiles"].as_u64().unwrap() >= 2, "{first}");
    // The same checkpoint, line for line, is what the export ends with and
    // what `events verify --file --key` holds the export to.
    let export = dir.path().join("export.jsonl");
    let o = stratum(
        &["--server", &a.base, "events", "export"],
        &[("STRATUM_TOKEN", ADMIN)],
    );
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(&export, &o.stdout).unwrap();
    let last = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .to_owned();
    assert!(last.starts_with("{\"checkpoint\":"), "{last}");
    let o = stratum(
        &[
            "events",
            "verify",
            "--file",
            export.to_str().unwrap(),
            "--key",
            public.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));

    // An export up to an earlier position carries the checkpoint of its
    // own size, signed for it.
    let until = head(&a).await - 5;
    let o = stratum(
        &[
            "--server",
            &a.base,
            "events",
            "export",
            "--until",
            &until.to_string(),
        ],
        &[("STRATUM_TOKEN", ADMIN)],
    );
    assert!(o.status.success(), "{}", text(&o));
    let part = dir.path().join("until.jsonl");
    std::fs::write(&part, &o.stdout).unwrap();
    let last = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let note = serde_json::from_str::<Value>(&last).unwrap()["checkpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        note.lines().nth(1),
        Some(until.to_string().as_str()),
        "{note}"
    );
    let o = stratum(
        &[
            "events",
            "verify",
            "--file",
            part.to_str().unwrap(),
            "--key",
            public.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));

    // More events, a restart, and the Go verifier proves the new tree
    // extends the old checkpoint.
    admit_many(&a, "m", 20).await;
    drop(a);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let a = start(dir.path(), &env).await;
    admit_many(&a, "k", 3).await;
    checkpoint_at_head(&a, Instant::now()).await;
    let second = dir.path().join("go-2.checkpoint");
    let after_restart = verify(
        bin,
        &a,
        &public,
        &[
            "-old",
            old.to_str().unwrap(),
            "-save",
            second.to_str().unwrap(),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        after_restart["consistentFrom"], first["size"],
        "{after_restart}"
    );

    // A second replica on the same PostgreSQL database: it serves the same
    // bytes for the same size, and its tree extends the first's checkpoint.
    if let Some(url) = &db_url {
        let state_b = dir.path().join("b.checkpoint");
        let bdir = tempfile::tempdir().unwrap();
        let b = start(bdir.path(), &signing(&key, &state_b, Some(url))).await;
        admit_many(&b, "b", 5).await;
        let size = head(&b).await;
        let (from_b, _) = checkpoint_at_head(&b, Instant::now()).await;
        let (from_a, _) = a
            .eventually("replica a signs the size b wrote", || async {
                let (n, t) = checkpoint_at_head(&a, Instant::now()).await;
                n.lines()
                    .nth(1)?
                    .parse::<u64>()
                    .ok()
                    .filter(|s| *s == size)?;
                Some((n, t))
            })
            .await;
        assert_eq!(from_a, from_b, "two replicas, one size, one text");
        let across = verify(bin, &b, &public, &["-old", second.to_str().unwrap()])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(across["size"], size, "{across}");
        assert_eq!(across["consistentFrom"], after_restart["size"], "{across}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_independent_go_verifier_checks_checkpoints_tiles_and_proofs_on_both_backends() {
    let Some(bin) = go_verifier() else { return };
    verified_by_go(None, &bin).await;
    if let Some(pg) = crate::support::postgres().await {
        verified_by_go(Some(pg.url.clone()), &bin).await;
    }
}

/// `stratum log watch` against a server, as an auditor runs it.
fn watch(s: &Server, public: &Path, state: &Path) -> Output {
    watch_with(s, public, state, &[])
}

/// `stratum log watch` with more flags (`--witness-policy FILE`).
pub(crate) fn watch_with(s: &Server, public: &Path, state: &Path, more: &[&str]) -> Output {
    let mut args = vec![
        "--server",
        &s.base,
        "log",
        "watch",
        "--key",
        public.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    stratum(&args, &[("STRATUM_TOKEN", ADMIN)])
}

fn refused(o: &Output, why: &str) {
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(why)
            || String::from_utf8_lossy(&o.stdout).contains(why),
        "wanted {why:?}: {}",
        text(o)
    );
}

fn export_of(s: &Server, path: &Path) {
    let o = stratum(
        &["--server", &s.base, "events", "export"],
        &[("STRATUM_TOKEN", ADMIN)],
    );
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(path, &o.stdout).unwrap();
}

fn verify_file(file: &Path, public: &Path, held: Option<&Path>) -> Output {
    let mut args = vec![
        "events".to_owned(),
        "verify".into(),
        "--file".into(),
        file.display().to_string(),
        "--key".into(),
        public.display().to_string(),
    ];
    if let Some(h) = held {
        args.extend(["--checkpoint".into(), h.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    stratum(&args, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_witness_and_an_export_s_verify_refuse_a_shrunk_rewritten_or_foreign_log() {
    let root = tempfile::tempdir().unwrap();
    let (key, public) = keygen(root.path(), "stratum.witness-test");
    let (other_key, _) = keygen(root.path(), "stratum.other");
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let state = |i: usize| root.path().join(format!("{i}.signed"));
    // The log; the same key on a log of fewer events; on a log of as
    // many, other events; and another key.
    let a = start(dirs[0].path(), &signing(&key, &state(0), None)).await;
    let shrunk = start(dirs[1].path(), &signing(&key, &state(1), None)).await;
    let rewritten = start(dirs[2].path(), &signing(&key, &state(2), None)).await;
    let foreign = start(dirs[3].path(), &signing(&other_key, &state(3), None)).await;
    admit_many(&a, "n", 6).await;
    admit_many(&shrunk, "n", 3).await;
    admit_many(&rewritten, "x", 6).await;
    admit_many(&foreign, "n", 6).await;
    for s in [&a, &shrunk, &rewritten, &foreign] {
        checkpoint_at_head(s, Instant::now()).await;
    }
    assert_eq!(head(&a).await, head(&rewritten).await);

    let witness = root.path().join("witness");
    let o = watch(&a, &public, &witness);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("kept as the first checkpoint"),
        "{}",
        text(&o)
    );
    admit_many(&a, "more", 2).await;
    checkpoint_at_head(&a, Instant::now()).await;
    let o = watch(&a, &public, &witness);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("consistent with the kept size"),
        "{}",
        text(&o)
    );
    let kept = std::fs::read_to_string(witness.join("checkpoint")).unwrap();

    refused(&watch(&shrunk, &public, &witness), "the log shrank");
    // The same size with another root: grow the rewritten log to it.
    admit_many(&rewritten, "y", 2).await;
    checkpoint_at_head(&rewritten, Instant::now()).await;
    refused(
        &watch(&rewritten, &public, &witness),
        "fork: the log was rewritten",
    );
    // Bigger and not an extension of what was kept.
    admit_many(&rewritten, "z", 3).await;
    checkpoint_at_head(&rewritten, Instant::now()).await;
    refused(
        &watch(&rewritten, &public, &witness),
        "does not extend the kept one",
    );
    refused(&watch(&foreign, &public, &witness), "signed by another key");
    // A refusal keeps what was kept.
    assert_eq!(
        std::fs::read_to_string(witness.join("checkpoint")).unwrap(),
        kept
    );

    // `events verify --file --key`: the export of the log passes alone and
    // against the kept checkpoint...
    let held = witness.join("checkpoint");
    let good = root.path().join("good.jsonl");
    export_of(&a, &good);
    let o = verify_file(&good, &public, Some(&held));
    assert!(o.status.success(), "{}", text(&o));
    // ...a cut tail under the same checkpoint, or a log cut back before the
    // kept one, is refused...
    let lines: Vec<String> = std::fs::read_to_string(&good)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let (trailer, events) = lines.split_last().unwrap();
    let cut = root.path().join("cut.jsonl");
    std::fs::write(
        &cut,
        format!("{}\n{trailer}\n", events[..events.len() - 1].join("\n")),
    )
    .unwrap();
    refused(
        &verify_file(&cut, &public, None),
        "its checkpoint is of a log of",
    );
    let small = root.path().join("small.jsonl");
    export_of(&shrunk, &small);
    assert!(verify_file(&small, &public, None).status.success());
    refused(
        &verify_file(&small, &public, Some(&held)),
        "the log was cut back",
    );
    // ...and so are other events under the log's checkpoint, or a log
    // signed afresh that does not extend the kept checkpoint.
    let other = root.path().join("other.jsonl");
    export_of(&rewritten, &other);
    assert!(verify_file(&other, &public, None).status.success());
    refused(
        &verify_file(&other, &public, Some(&held)),
        "the log was rewritten",
    );
    let other_lines = std::fs::read_to_string(&other).unwrap();
    let swapped = root.path().join("swapped.jsonl");
    let n = events.len();
    let other_events: Vec<&str> = other_lines.lines().take(n).collect();
    std::fs::write(
        &swapped,
        format!("{}\n{trailer}\n", other_events.join("\n")),
    )
    .unwrap();
    refused(
        &verify_file(&swapped, &public, None),
        "not the one its checkpoint signed",
    );
    let foreign_export = root.path().join("foreign.jsonl");
    export_of(&foreign, &foreign_export);
    refused(
        &verify_file(&foreign_export, &public, None),
        "signed by another key",
    );
}

/// Copies a stopped server's SQLite database (with its WAL) aside, or back.
fn copy_db(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in ["stratum.db", "stratum.db-wal", "stratum.db-shm"] {
        let _ = std::fs::remove_file(to.join(f));
        if from.join(f).exists() {
            std::fs::copy(from.join(f), to.join(f)).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_older_database_raises_the_fork_alarm_and_nothing_is_signed_until_acknowledged()
{
    let dir = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = keygen(keys.path(), "stratum.fork-test");
    let env = signing(&key, &keys.path().join("signed"), None);
    let s = start(dir.path(), &env).await;
    admit_many(&s, "n", 4).await;
    checkpoint_at_head(&s, Instant::now()).await;
    // The pre-upgrade backup.
    s.terminate();
    drop(s);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let backup = keys.path().join("backup");
    copy_db(dir.path(), &backup);
    let s = start(dir.path(), &env).await;
    admit_many(&s, "after", 5).await;
    let (signed, _) = checkpoint_at_head(&s, Instant::now()).await;
    let witness = keys.path().join("witness");
    assert!(watch(&s, &public, &witness).status.success());
    s.terminate();
    drop(s);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The rollback restores the backup; the service starts on it.
    copy_db(&backup, dir.path());
    let s = start(dir.path(), &env).await;
    let signed_size: u64 = signed.lines().nth(1).unwrap().parse().unwrap();
    let alarm = s
        .eventually("the log-checkpoint-fork alarm", || async {
            let (_, alarms) = s.get("/v1/admin/alarms?active=true").await;
            alarms["items"]
                .as_array()?
                .iter()
                .find(|a| a["name"] == "log-checkpoint-fork")
                .cloned()
        })
        .await;
    let message = alarm["message"].as_str().unwrap();
    assert!(message.contains(&format!("size {signed_size}")), "{alarm}");
    // It keeps serving reads, and tiles; it signs nothing.
    assert_eq!(s.get("/v1/admin/cluster/members/n-0").await.0, 200);
    assert_eq!(s.get("/v1/log/tile/entries/000.p/2").await.0, 200);
    let (status, body) = s.get("/v1/log/checkpoint").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("withheld"),
        "{body}"
    );
    admit_many(&s, "during", 2).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(s.get("/v1/log/checkpoint").await.0, 503);
    let export = keys.path().join("during.jsonl");
    export_of(&s, &export);
    assert!(!std::fs::read_to_string(&export)
        .unwrap()
        .contains("\"checkpoint\""));
    // The fork is an event naming both heads.
    let (_, events) = s.get("/v1/admin/events?type=CheckpointForkFound").await;
    let found = &events["events"][0]["payload"];
    assert_eq!(found["signedSize"], signed_size, "{events}");
    let signed_root = found["signedRoot"].as_str().unwrap().to_owned();
    assert_ne!(found["logRoot"], found["signedRoot"]);

    // Another process with the key and no record of its own (a new
    // replica, its state file empty) signs nothing either while the log
    // holds a fork no one acknowledged.
    let other_dir = tempfile::tempdir().unwrap();
    let mut other_env = signing(&key, &other_dir.path().join("signed"), None);
    other_env.push((
        "STRATUM_DATABASE_URL",
        format!("sqlite://{}", dir.path().join("stratum.db").display()),
    ));
    let other = start(other_dir.path(), &other_env).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (status, body) = other.get("/v1/log/checkpoint").await;
    assert_eq!(status, 503, "{body}");
    drop(other);

    // Only an administrator acknowledges it, naming the checkpoint.
    let auditor = s.token_for("user/audrey", "Auditor").await;
    let body = json!({"signedSize": signed_size, "signedRoot": signed_root, "reason": "restored the pre-upgrade backup after the failed upgrade"});
    let res = s
        .http
        .post(s.url("/v1/admin/log/fork/acknowledge"))
        .bearer_auth(&auditor)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let (status, err) = s
        .post(
            "/v1/admin/log/fork/acknowledge",
            json!({"signedSize": signed_size + 1, "signedRoot": signed_root, "reason": "x"}),
        )
        .await;
    assert_eq!(status, 404, "{err}");
    let (status, cleared) = s.post("/v1/admin/log/fork/acknowledge", body).await;
    assert_eq!(status, 200, "{cleared}");
    assert!(cleared["clearedAt"].is_string(), "{cleared}");
    // The answer is the record: a restart reads the alarm as answered
    // (`answers::every_write_answers_what_a_restart_reads` leaves this
    // route to here).
    s.terminate();
    drop(s);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let s = start(dir.path(), &env).await;
    let (_, alarms) = s.get("/v1/admin/alarms").await;
    let read = alarms["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "log-checkpoint-fork")
        .unwrap_or_else(|| panic!("the cleared alarm in {alarms}"));
    for (field, answered) in cleared.as_object().unwrap() {
        assert_eq!(&read[field], answered, "{field} after a restart: {read}");
    }
    let (_, acks) = s
        .get("/v1/admin/events?type=CheckpointForkAcknowledged")
        .await;
    assert_eq!(acks["events"][0]["principal"], "user/admin", "{acks}");

    // Signing resumes from the log as it is, and a witness that kept the
    // forked checkpoint sees the fork.
    let (resumed, _) = checkpoint_at_head(&s, Instant::now()).await;
    assert_ne!(resumed, signed);
    refused(&watch(&s, &public, &witness), "");
}

#[tokio::test]
async fn without_a_key_tiles_are_served_and_checkpoints_are_not_and_the_log_may_be_public() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[("STRATUM_LOG_PUBLIC", "true".into())]).await;
    assert!(s.log().contains("checkpoints are unsigned"), "{}", s.log());
    admit_many(&s, "n", 2).await;
    let (status, body) = s.get("/v1/log/checkpoint").await;
    assert_eq!(status, 404, "{body}");
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("STRATUM_LOG_SIGNING_KEY_FILE"));
    // Public: the log's reads need no token; the audit API still does.
    let anon = |path: &str| s.http.get(s.url(path)).send();
    let tile = anon("/v1/log/tile/entries/000.p/3").await.unwrap();
    assert_eq!(tile.status(), 200);
    // No checkpoint covers it: it may not be cached as immutable.
    assert_eq!(tile.headers()[reqwest::header::CACHE_CONTROL], "no-cache");
    let bytes = tile.bytes().await.unwrap();
    assert_eq!(bytes.len(), 3 * 34);
    assert_eq!(&bytes[..2], &[0, 32]);
    let (_, first) = s.get("/v1/admin/events/1").await;
    assert_eq!(hex::encode(&bytes[2..34]), first["hash"].as_str().unwrap());
    assert_eq!(anon("/v1/log/tile/0/000.p/3").await.unwrap().status(), 200);
    assert_eq!(anon("/v1/log/tile/0/000").await.unwrap().status(), 404);
    assert_eq!(anon("/v1/log/tile/0/0").await.unwrap().status(), 404);
    assert_eq!(
        anon("/v1/log/consistency?from=1&to=3")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(anon("/v1/admin/events/1").await.unwrap().status(), 401);
    assert_eq!(
        anon("/v1/admin/events/1/proof?size=3")
            .await
            .unwrap()
            .status(),
        401
    );
    let (status, proof) = s.get("/v1/admin/events/2/proof?size=3").await;
    assert_eq!(status, 200, "{proof}");
    assert_eq!(proof["checkpoint"], Value::Null);

    // Not public: a token is needed.
    drop(s);
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]).await;
    let anon = s
        .http
        .get(s.url("/v1/log/tile/entries/000.p/1"))
        .send()
        .await
        .unwrap();
    assert_eq!(anon.status(), 401);

    // STRATUM_LOG_ORIGIN names the checkpoints' first line.
    let keys = tempfile::tempdir().unwrap();
    let (key, _) = keygen(keys.path(), "stratum.origin-test");
    let mut env = signing(&key, &keys.path().join("signed"), None);
    env.push(("STRATUM_LOG_ORIGIN", "stratum.example.com/log".into()));
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &env).await;
    let (note, _) = checkpoint_at_head(&s, Instant::now()).await;
    assert!(note.starts_with("stratum.example.com/log\n"), "{note}");
    assert!(note.contains("\u{2014} stratum.origin-test "), "{note}");
    drop(s);

    // An origin that cannot be one stops the start.
    let o = stratum(
        &["serve", "--print-config"],
        &[
            ("STRATUM_LOG_SIGNING_KEY_FILE", key.to_str().unwrap()),
            ("STRATUM_LOG_ORIGIN", "two words"),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("STRATUM_LOG_ORIGIN"),
        "{}",
        text(&o)
    );
}
