//! A projection change shipped without downtime: a server of a newer
//! projection version (`.ci/variant-build failed-error-after-step-v2`: the
//! members projection shows a failed member's error after its step, at
//! version 2) started on a database whose rows this build (version 1)
//! wrote answers from its own fold at once, rebuilds the rows beside the
//! old ones at the rate it is given while writes go on, and leaves
//! `replay --check` clean; `replay --check` of either build compares like
//! with like meanwhile; `replay --rebuild` runs under writes; and this
//! build, started again on the database (the way back), rebuilds the rows
//! to its own version. A rebuild the database interrupts goes on from
//! its last chunk. Both backends, through the binaries.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::binary::*;
use crate::replay_diff::variant;

/// Failed members the first build records, each one row of the members
/// projection.
const FAILED: usize = 30;
/// The rate the newer build rebuilds at, rows a second.
const RATE: u32 = 10;
const ERROR: &str = "permission denied";
const STEP: &str = "join/raft-openbao";

async fn admit_and_fail(http: &reqwest::Client, base: &str, node: &str, ip: &str) -> u16 {
    let admit = http
        .post(format!("{base}{MEMBERS}"))
        .bearer_auth(ADMIN)
        .json(&json!({"nodeId": node, "role": "hybrid", "mgmtIp": ip}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    if admit != 201 {
        return admit;
    }
    http.post(format!("{base}{MEMBERS}/{node}/join-failed"))
        .bearer_auth(ADMIN)
        .json(&json!({"step": STEP, "error": ERROR}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Writes until `stop`: a member admitted and failed, or a token issued,
/// by turns. Answers the members whose writes were acknowledged and every
/// status seen. `round` tells the writers of one test apart (node ids and
/// addresses).
fn writing(
    server: &Server,
    stop: Arc<AtomicBool>,
    round: u32,
) -> tokio::task::JoinHandle<(Vec<String>, Vec<u16>)> {
    let http = server.http.clone();
    let base = server.base.clone();
    tokio::spawn(async move {
        let (mut acked, mut statuses) = (Vec::new(), Vec::new());
        let mut i = 0;
        while !stop.load(Ordering::Acquire) {
            i += 1;
            let node = format!("n-w{round}-{i}");
            let s = admit_and_fail(
                &http,
                &base,
                &node,
                &format!("10.{round}.{}.{}", i / 250, i % 250 + 1),
            )
            .await;
            statuses.push(s);
            if s == 200 {
                acked.push(node);
            }
            let t = http
                .post(format!("{base}/v1/admin/iam/tokens"))
                .bearer_auth(ADMIN)
                .json(&json!({"principal": format!("user/w{round}-{i}"), "policies": ["ReadOnly"]}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            statuses.push(t);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (acked, statuses)
    })
}

/// Stops the writer; every write it made was answered 2xx (or, where a
/// write `may_wait` for a repair's lock, 503; never another 5xx), it made
/// some, and each member it was told was written reads back with the
/// newer fold.
async fn written_meanwhile(
    server: &Server,
    stop: &AtomicBool,
    writer: tokio::task::JoinHandle<(Vec<String>, Vec<u16>)>,
    may_wait: bool,
    backend: &str,
) {
    stop.store(true, Ordering::Release);
    let (acked, statuses) = writer.await.unwrap();
    assert!(
        !acked.is_empty(),
        "{backend}: nothing was written meanwhile"
    );
    assert!(
        statuses
            .iter()
            .all(|s| (200..300).contains(s) || (may_wait && *s == 503)),
        "{backend}: {statuses:?}"
    );
    for node in &acked {
        let m = server.member(node).await;
        assert_eq!(
            m["failedError"],
            format!("{STEP}: {ERROR}"),
            "{backend}: {m}"
        );
    }
}

fn said(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `replay --check` by `bin`: exit 0; answers what it said on stderr.
fn check_clean(bin: &Path, url: &str, who: &str) -> String {
    let out = on_host_with(bin, url, &["replay", "--check"]);
    assert_eq!(out.status.code(), Some(0), "{who}: {}", said(&out));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The `written=`, `removed=` and `seconds=` of the rebuild's last line.
async fn rebuilt(server: &Server) -> (usize, usize, f64) {
    let line = server
        .eventually("the rebuild's end", || async {
            server
                .log()
                .lines()
                .rev()
                .find(|l| l.contains("rebuilt the read-model rows"))
                .map(str::to_owned)
        })
        .await;
    let field = |name: &str| -> String {
        let at = line
            .find(&format!("{name}="))
            .unwrap_or_else(|| panic!("{name} in {line}"));
        line[at + name.len() + 1..]
            .split_whitespace()
            .next()
            .unwrap()
            .trim_matches('"')
            .to_owned()
    };
    (
        field("written").parse().unwrap(),
        field("removed").parse().unwrap(),
        field("seconds").parse().unwrap(),
    )
}

async fn stop(mut server: Server) {
    server.terminate();
    let _ = tokio::time::timeout(Duration::from_secs(20), server.child.wait()).await;
}

#[tokio::test]
async fn a_newer_projection_version_serves_its_fold_at_once_and_rebuilds_the_rows_online() {
    let newer = variant("failed-error-after-step-v2");
    let this = Path::new(THIS_BUILD);
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let url = env[0].1.clone();
        let backend = backend_of(&url);

        // This build (members at version 1) records failed members.
        let old = start(dir.path(), &env).await;
        for i in 0..FAILED {
            let s = admit_and_fail(
                &old.http,
                &old.base,
                &format!("n-f{i}"),
                &format!("192.0.2.{}", i + 10),
            )
            .await;
            assert_eq!(s, 200, "{backend}: n-f{i}");
        }
        let before = old.member("n-f0").await;
        assert_eq!(before["failedError"], ERROR, "{backend}: {before}");
        stop(old).await;
        check_clean(this, &url, backend);

        // The newer build, at a rate low enough to watch.
        let mut flags_env = env.clone();
        flags_env.push(("STRATUM_REBUILD_ROWS_PER_SECOND", RATE.to_string()));
        let started = Instant::now();
        let new = start_program(&newer, dir.path(), None, &[], &flags_env).await;
        // Its answers come from its own fold at once.
        let m = new.member("n-f0").await;
        assert_eq!(
            m["failedError"],
            format!("{STEP}: {ERROR}"),
            "{backend}: {m}"
        );
        let stop_writing = Arc::new(AtomicBool::new(false));
        let writer = writing(&new, stop_writing.clone(), 1);

        // Meanwhile each build's check compares the rows of its versions
        // and sets the others aside, clean.
        let during = check_clean(&newer, &url, "the newer build's check during the rebuild");
        assert!(
            during.contains("not compared")
                && during.contains("members version 1 (this build folds 2)"),
            "{backend}: {during}"
        );
        check_clean(this, &url, "this build's check during the rebuild");

        let (written, removed, seconds) = rebuilt(&new).await;
        assert!(written >= FAILED, "{backend}: {written} rows");
        assert_eq!(removed, 0, "{backend}");
        // The rate holds: the rows took at least as long as the rate allows
        // (less the first chunk, written before any wait).
        let least = (written.saturating_sub(RATE as usize)) as f64 / f64::from(RATE);
        assert!(
            seconds >= least,
            "{backend}: {written} rows in {seconds} s at {RATE}/s"
        );
        assert!(started.elapsed().as_secs_f64() >= least);

        // Every write was answered 2xx, nothing acknowledged is lost, and
        // the rows the rebuild left are whole and of the newer version: its
        // check compares them all, and its diff against them finds nothing.
        written_meanwhile(&new, &stop_writing, writer, false, backend).await;
        let after = check_clean(&newer, &url, "the newer build's check after the rebuild");
        assert!(!after.contains("not compared"), "{backend}: {after}");
        let out = on_host_with(&newer, &url, &["replay", "--diff"]);
        assert_eq!(
            (out.status.code(), out.stdout.len()),
            (Some(0), 0),
            "{backend}: {}",
            said(&out)
        );
        let out = on_host_with(this, &url, &["replay", "--check"]);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("members version 2 (this build folds 1)"),
            "{backend}: {}",
            said(&out)
        );

        // `replay --rebuild` repairs with the server still writing: writes
        // wait for its one write (a 503 at worst, never a 500), and what
        // they committed meanwhile is in the rows.
        let stop_writing = Arc::new(AtomicBool::new(false));
        let writer = writing(&new, stop_writing.clone(), 2);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let out = on_host_with(&newer, &url, &["replay", "--rebuild"]);
        assert_eq!(out.status.code(), Some(0), "{backend}: {}", said(&out));
        tokio::time::sleep(Duration::from_millis(300)).await;
        written_meanwhile(&new, &stop_writing, writer, true, backend).await;
        let after = check_clean(
            &newer,
            &url,
            "the newer build's check after replay --rebuild",
        );
        assert!(!after.contains("not compared"), "{backend}: {after}");
        let verify = on_host_with(this, &url, &["events", "verify"]);
        assert_eq!(
            verify.status.code(),
            Some(0),
            "{backend}: {}",
            said(&verify)
        );
        stop(new).await;

        // The way back: this build again, alone, rebuilds the rows to its
        // version, and answers from its fold.
        let back = start(dir.path(), &env).await;
        let m = back.member("n-f0").await;
        assert_eq!(m["failedError"], ERROR, "{backend}: {m}");
        let (written, _, _) = rebuilt(&back).await;
        assert!(written >= FAILED, "{backend}");
        let again = check_clean(this, &url, "this build's check after the way back");
        assert!(!again.contains("not compared"), "{backend}: {again}");
        stop(back).await;
    }
}

/// Rows of members the first build records for the interrupted rebuild.
const INTERRUPTED: usize = 50;
/// Its rate: chunks of 20 rows a second.
const INTERRUPTED_RATE: u32 = 20;

/// A rebuild interrupted by the database: test triggers count the rows it
/// writes, and refuse every write after its first chunk until told to
/// stop refusing.
fn refusing_triggers(backend: &str) -> Vec<String> {
    let tables = [
        "CREATE TABLE t_rewritten (n BIGINT NOT NULL)".to_owned(),
        "INSERT INTO t_rewritten VALUES (0)".to_owned(),
        "CREATE TABLE t_refusing (on_ INTEGER NOT NULL)".to_owned(),
        "INSERT INTO t_refusing VALUES (1)".to_owned(),
    ];
    let refuse = format!(
        "(SELECT on_ FROM t_refusing) = 1 AND (SELECT n FROM t_rewritten) >= {INTERRUPTED_RATE}"
    );
    let triggers = if backend == "sqlite" {
        vec![
            format!(
                "CREATE TRIGGER t_refuse BEFORE UPDATE ON rm_members WHEN {refuse} \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            ),
            "CREATE TRIGGER t_count AFTER UPDATE ON rm_members \
             BEGIN UPDATE t_rewritten SET n = n + 1; END"
                .to_owned(),
        ]
    } else {
        vec![
            format!(
                "CREATE FUNCTION t_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF {refuse} THEN RAISE EXCEPTION 'refused by the test'; END IF; \
                 RETURN NEW; END $$"
            ),
            "CREATE TRIGGER t_refuse BEFORE UPDATE ON rm_members \
             FOR EACH ROW EXECUTE FUNCTION t_refuse()"
                .to_owned(),
            "CREATE FUNCTION t_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             UPDATE t_rewritten SET n = n + 1; RETURN NULL; END $$"
                .to_owned(),
            "CREATE TRIGGER t_count AFTER UPDATE ON rm_members \
             FOR EACH ROW EXECUTE FUNCTION t_count()"
                .to_owned(),
        ]
    };
    tables.into_iter().chain(triggers).collect()
}

#[tokio::test]
async fn a_rebuild_the_database_interrupts_goes_on_from_its_last_chunk() {
    let dir = tempfile::tempdir().unwrap();
    for (env, _db) in backends(dir.path()).await {
        let url = env[0].1.clone();
        let backend = backend_of(&url);
        let old = start(dir.path(), &env).await;
        for i in 0..INTERRUPTED {
            old.admit(&format!("n-i{i:02}"), &format!("192.0.2.{}", i + 10))
                .await;
        }
        stop(old).await;
        // Rows of a projection version no build folds, and the triggers.
        crate::cli::exec(&url, "UPDATE rm_members SET projection_version = 7").await;
        for sql in refusing_triggers(backend) {
            crate::cli::exec(&url, &sql).await;
        }

        let mut flags_env = env.clone();
        flags_env.push((
            "STRATUM_REBUILD_ROWS_PER_SECOND",
            INTERRUPTED_RATE.to_string(),
        ));
        let server = start(dir.path(), &flags_env).await;
        // The first chunk is in (a chunk is the rate's rows, members come
        // first, and an admission makes no join request); the database
        // refuses the second, and the rebuild says when it tries again.
        let rewritten = "SELECT n FROM t_rewritten";
        let left = "SELECT count(*) FROM rm_members WHERE projection_version = 7";
        let warned = server
            .eventually("a refused chunk", || async {
                server
                    .log()
                    .lines()
                    .find(|l| l.contains("could not rebuild the read-model rows"))
                    .map(str::to_owned)
            })
            .await;
        assert!(
            warned.contains("trying again from where it stopped")
                && warned.contains("again_in_ms=500")
                && warned.contains(&format!("written={INTERRUPTED_RATE}")),
            "{backend}: {warned}"
        );
        assert_eq!(
            crate::cli::scalar(&url, rewritten).await,
            i64::from(INTERRUPTED_RATE),
            "{backend}"
        );
        assert_eq!(
            crate::cli::scalar(&url, left).await,
            (INTERRUPTED - INTERRUPTED_RATE as usize) as i64,
            "{backend}"
        );
        crate::cli::exec(&url, "UPDATE t_refusing SET on_ = 0").await;

        // It goes on from the second chunk: each row written once.
        let (written, removed, _) = rebuilt(&server).await;
        assert_eq!((written, removed), (INTERRUPTED, 0), "{backend}");
        assert_eq!(
            crate::cli::scalar(&url, rewritten).await,
            INTERRUPTED as i64,
            "{backend}: a row written twice"
        );
        assert_eq!(crate::cli::scalar(&url, left).await, 0, "{backend}");
        stop(server).await;
    }
}
