//! Replicas of two builds on one database (issue 32), with the real
//! binaries of earlier revisions, built by `.ci/previous-build`:
//!
//! - [`PREVIOUS`], the commit the storage version started from: it knows
//!   no registry and no storage level;
//! - [`REGISTERED`], the first build that registers itself (its stored
//!   formats and settings) but knows no storage level;
//! - `BEFORE_THE_TREE` (in `tree.rs`), a build that keeps no Merkle tree.
//!
//! Until `stratum replicas finalize`, the previous build runs again on a
//! database this build wrote, with nothing lost; after it, it refuses the
//! database, naming the finalization. Finalizing is refused while a live
//! replica cannot read the new formats. Only a replica with the agreed
//! process-manager settings runs the raft cleanup; the other raises the
//! `replica-settings-differ` alarm.

mod finalize;
mod rolling;
mod settings;
mod tree;
mod way_back;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::binary::on_host_with as on_host;
use crate::binary::*;

/// The commit the storage version started from (before issue 32).
const PREVIOUS: &str = "b5a94171cebe5ad09a193df42088875e345f1d73";
/// The first build that registers itself in the replica registry.
const REGISTERED: &str = "59539ab566aaa8c6975b3643e34652c86fb51032";

/// The `stratum` binary of `rev`, built once per target directory by
/// `.ci/previous-build` (which CI runs before the tests).
fn previous(rev: &str) -> PathBuf {
    let target = Path::new(THIS_BUILD)
        .parent()
        .and_then(Path::parent)
        .expect("the binary is in TARGET/debug");
    let kept = target.join("previous").join(rev).join("stratum");
    if kept.exists() {
        return kept;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/previous-build");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(rev)
        .env("CARGO_TARGET_DIR", target)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "building stratum at {rev} failed");
    assert!(kept.exists(), "{} was not built", kept.display());
    kept
}

/// `base` with Patroni's raft removed through the `syncobj_admin` at
/// `program`, whose raft's leader answers at 10.0.0.1:2222.
fn with_syncobj(base: &[(&'static str, String)], program: &Path) -> Vec<(&'static str, String)> {
    let mut env = base.to_vec();
    env.extend([
        ("STRATUM_RAFT_PATRONI", "syncobj".to_owned()),
        (
            "STRATUM_PATRONI_SYNCOBJ_ADMIN",
            program.display().to_string(),
        ),
        ("STRATUM_PATRONI_RAFT_CONN", "10.0.0.1:2222".to_owned()),
        ("STRATUM_PATRONI_RAFT_PORT", "2222".to_owned()),
    ]);
    env
}

/// `stratum <args>` of this build against a served API, as the admin.
fn remote(server: &Server, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(THIS_BUILD);
    for key in stratum_vars() {
        cmd.env_remove(key);
    }
    cmd.args(["--server", &server.base])
        .args(args)
        .env("STRATUM_TOKEN", ADMIN)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// `stratum replicas finalize` against `server` with `token`, again while
/// (and only while) it is refused for sessions of a stopped build from
/// before the registry that PostgreSQL has not yet ended.
async fn finalize_once_stopped_sessions_end(server: &Server, token: &str) -> std::process::Output {
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let mut cmd = std::process::Command::new(THIS_BUILD);
        for key in stratum_vars() {
            cmd.env_remove(key);
        }
        let out = cmd
            .args(["--server", &server.base, "replicas", "finalize"])
            .env("STRATUM_TOKEN", token)
            .output()
            .unwrap();
        let lingering =
            String::from_utf8_lossy(&out.stderr).contains("from before the replica registry");
        if !lingering || std::time::Instant::now() > deadline {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The log verifies and replays to the rows the database holds, by `bin`.
fn clean(bin: &Path, url: &str) {
    let out = on_host(bin, url, &["events", "verify"]);
    assert_eq!(out.status.code(), Some(0), "events verify: {}", text(&out));
    let out = on_host(bin, url, &["replay", "--check"]);
    assert_eq!(out.status.code(), Some(0), "replay --check: {}", text(&out));
}

/// Stops a server as its service manager would, and waits for it: it must
/// still be running (no crash went unnoticed) and stop cleanly.
async fn stop(mut server: Server) {
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "{} exited before it was stopped:\n{}",
        server.base,
        server.log()
    );
    server.terminate();
    let status = tokio::time::timeout(DEADLINE, server.child.wait())
        .await
        .expect("stopped in time")
        .unwrap();
    assert!(
        status.success(),
        "{} stopped with {status}:\n{}",
        server.base,
        server.log()
    );
}

/// A fresh directory for one server's files under `dir`.
fn place(dir: &Path, name: &str) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A member that reached Patroni's raft and failed at OpenBao's: the raft
/// cleanup owes both rafts a removal.
async fn failed_join(server: &Server, node_id: &str, ip: &str) {
    server.admit(node_id, ip).await;
    server.progress(node_id, "join/raft-patroni").await;
    let m = server
        .join_failed(node_id, "join/raft-openbao", "bao: connection refused")
        .await;
    assert_eq!(m["state"], "failed", "{m}");
}

/// `bin serve` on a database finalized since `bin` was built: it stops by
/// itself, failing and naming the finalization.
async fn refuses_finalized(bin: &Path, dir: &Path, env: &[(&str, String)]) {
    let ran = serve_program(bin, dir, free_port(), None, &[], env)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    let ran = tokio::time::timeout(DEADLINE, ran)
        .await
        .expect("it stops")
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(!ran.status.success(), "{stderr}");
    assert!(stderr.contains("StorageVersionFinalized"), "{stderr}");
}
