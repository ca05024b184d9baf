//! The web console at `/console/`, loaded in headless Chromium against a
//! seeded server: the members and an audit entry are in its DOM, and a
//! screenshot is kept as a test artifact (`target/test-artifacts/`).
//! Without Chromium the test says so loudly, and fails where it is
//! required (`STRATUM_REQUIRE_CHROMIUM=1`, as `.ci/run` sets).

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;

use super::binary::{start, this_replica, Server, ADMIN};

pub(super) fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("command -v {name}"))
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        })
}

/// Where test artifacts are kept.
fn artifacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Chromium, headless, on `url`, with `args`: its standard output.
pub(super) fn headless(
    browser: &PathBuf,
    profile: &std::path::Path,
    args: &[&str],
    url: &str,
) -> String {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1280,800",
            // Lets the page's requests finish before the DOM is dumped,
            // with the event stream still open.
            "--virtual-time-budget=8000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

async fn seeded(dir: &std::path::Path) -> Server {
    let server = start(dir, &[]).await;
    server.admit_three().await;
    for (node, rack) in [("n-1", "r1"), ("n-2", "r2"), ("n-3", "r2")] {
        let (status, body) = server
            .call(
                server
                    .http
                    .patch(server.url(&format!("/v1/admin/cluster/members/{node}")))
                    .json(&json!({"labels": {"topology.rack": rack}})),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    server
        .join_failed("n-3", "join/raft-openbao", "raft join timed out")
        .await;
    server
        .member_post(
            "n-3",
            "decommission",
            json!({"reason": "replaced after the disk in slot 4 failed"}),
        )
        .await;
    server
}

#[tokio::test]
async fn the_console_shows_members_and_the_audit_trail_in_headless_chromium() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var("STRATUM_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "Chromium is required here (STRATUM_REQUIRE_CHROMIUM=1)"
        );
        eprintln!("\n!!! chromium is not installed: the console was NOT tested in a browser\n");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = seeded(dir.path()).await;
    let profile = tempfile::tempdir().unwrap();
    let url = server.url(&format!("/console/#token={ADMIN}"));
    let dom = headless(&browser, profile.path(), &["--dump-dom"], &url);
    assert!(dom.contains("data-loaded=\"true\""), "{dom}");
    for node in ["n-1", "n-2", "n-3"] {
        assert!(
            dom.contains(&format!("data-node-id=\"{node}\"")),
            "no row for {node}"
        );
    }
    let decommission = dom
        .split("<tr")
        .find(|row| row.contains("data-audit-entry") && row.contains("MemberDecommissioned"))
        .unwrap_or_else(|| panic!("no audit entry of the decommission:\n{dom}"));
    assert!(
        decommission.contains("replaced after the disk in slot 4 failed"),
        "{decommission}"
    );
    assert!(decommission.contains("user/admin"), "{decommission}");
    // The token never reaches the page's text.
    assert!(!dom.contains(ADMIN));

    let shot = artifacts().join("console.png");
    let _ = std::fs::remove_file(&shot);
    headless(
        &browser,
        profile.path(),
        &[&format!("--screenshot={}", shot.display())],
        &url,
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{}",
        png.len()
    );
    // The audit timeline too.
    let audit = artifacts().join("console-audit.png");
    headless(
        &browser,
        profile.path(),
        &[&format!("--screenshot={}", audit.display())],
        &server.url(&format!("/console/#token={ADMIN}&view=audit")),
    );
    assert!(std::fs::read(&audit).unwrap().starts_with(b"\x89PNG"));

    // The replicas view names this replica, as the registry has it.
    let me = this_replica(&server.replicas().await)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let dom = headless(
        &browser,
        profile.path(),
        &["--dump-dom"],
        &server.url(&format!("/console/#token={ADMIN}&view=replicas")),
    );
    let row = dom
        .split("<tr")
        .find(|row| row.contains(&format!("data-replica=\"{me}\"")))
        .unwrap_or_else(|| panic!("no row for replica {me}:\n{dom}"));
    assert!(row.contains("(this one)") && row.contains("live"), "{row}");

    // Without a token the console asks for one and reads nothing.
    let fresh = tempfile::tempdir().unwrap();
    let dom = headless(
        &browser,
        fresh.path(),
        &["--dump-dom"],
        &server.url("/console/"),
    );
    assert!(!dom.contains("data-node-id=\"n-1\""));
    assert!(dom.contains("id=\"signin\""));
}

#[tokio::test]
async fn the_console_is_embedded_and_reaches_nothing_but_its_own_origin() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    let res = reqwest::Client::new()
        .get(server.url("/console"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.url().path(),
        "/console/",
        "/console redirects to the page"
    );
    let url = regex::Regex::new(r#"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}"#).unwrap();
    for (path, kind) in [
        ("/console/", "text/html"),
        ("/console/console.js", "text/javascript"),
        ("/console/console.css", "text/css"),
    ] {
        let res = reqwest::get(server.url(path)).await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let headers = res.headers().clone();
        assert!(headers["content-type"].to_str().unwrap().starts_with(kind));
        assert!(headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'self'"));
        let text = res.text().await.unwrap();
        assert!(
            !url.is_match(&text),
            "{path} names another host: {:?}",
            url.find(&text)
        );
    }
}
