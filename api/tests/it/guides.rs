//! The guides in `docs/` run as written: every ```sh block of a guide, in
//! order, is one bash script (`-euo pipefail`), run in an empty directory
//! with the built `stratum` first on `PATH` and no `STRATUM_*` variables.
//! Ports 8080, 9464 and 8443 become free ones, and the guides' PostgreSQL
//! database (`postgres://postgres@127.0.0.1:5432/stratum`) a fresh one.
//! A tool a guide uses that is missing (openssl, promtool, curl, jq,
//! sqlite3, pg_dump) skips it
//! loudly, and fails it where the guides are required
//! (`STRATUM_REQUIRE_GUIDES=1`, as `.ci/run` sets).

use std::path::Path;
use std::time::Duration;

use super::binary::free_port;

const GUIDE_PG: &str = "postgres://postgres@127.0.0.1:5432/stratum";

/// The ```sh blocks of a Markdown text, in order.
fn sh_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line.trim_start() == "```sh" => current = Some(String::new()),
            Some(block) if line.trim_start() == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    assert!(current.is_none(), "a ```sh block is not closed");
    blocks
}

fn has(tool: &str) -> bool {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

fn skip(guide: &str, why: &str) {
    assert!(
        std::env::var("STRATUM_REQUIRE_GUIDES").as_deref() != Ok("1"),
        "{guide} must run here (STRATUM_REQUIRE_GUIDES=1), but {why}"
    );
    eprintln!("\n!!! {guide} was NOT run: {why}\n");
}

async fn run(guide: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(guide);
    let text = std::fs::read_to_string(&path).unwrap();
    let blocks = sh_blocks(&text);
    assert!(!blocks.is_empty(), "{guide} has no ```sh block");
    let mut script = blocks.join("\n");
    for tool in [
        "openssl",
        "promtool",
        "curl",
        "python3",
        "sqlite3",
        "jq",
        "pg_dump",
        "pg_restore",
    ] {
        if script.contains(tool) && !has(tool) {
            return skip(guide, &format!("{tool} is not installed"));
        }
    }
    let _db = if script.contains(GUIDE_PG) {
        let Some(db) = stratum_api::testing::postgres().await else {
            return skip(guide, "PostgreSQL does not answer");
        };
        script = script.replace(GUIDE_PG, &db.url);
        Some(db)
    } else {
        None
    };
    for port in ["8080", "9464", "8443"] {
        let re = regex::Regex::new(&format!(r"\b{port}\b")).unwrap();
        script = re
            .replace_all(&script, free_port().to_string().as_str())
            .into_owned();
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("guide.sh");
    std::fs::write(&file, &script).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_stratum")).parent().unwrap();
    let mut cmd = tokio::process::Command::new("bash");
    for key in super::binary::stratum_vars() {
        cmd.env_remove(key);
    }
    cmd.args(["-euo", "pipefail"])
        .arg(&file)
        .current_dir(dir.path())
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(300), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{guide} did not finish within 300 s"))
        .unwrap();
    assert!(
        out.status.success(),
        "{guide}: its commands failed ({:?})\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn the_operator_guide_runs_as_written() {
    run("operator-guide.md").await;
}

#[tokio::test]
async fn the_auditor_guide_runs_as_written() {
    run("auditor-guide.md").await;
}

#[tokio::test]
async fn the_api_guide_runs_as_written() {
    run("api-guide.md").await;
}

#[test]
fn sh_blocks_are_found_in_order_and_other_blocks_are_not() {
    let md = "a\n```sh\necho 1\n```\n```text\nnot run\n```\n```sh\necho 2\n```\n";
    assert_eq!(sh_blocks(md), ["echo 1\n", "echo 2\n"]);
}
