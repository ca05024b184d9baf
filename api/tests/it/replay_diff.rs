//! `stratum replay --dump` and `--diff`: a projection change reviewed on
//! real history. This build's binary and a second one built from this tree
//! with one projection's fold changed (`.ci/variant-build
//! failed-error-after-step`: a failed member's error shown after its step)
//! are run on a database this build wrote, on both backends.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::membership::scenario;
use crate::support::{each_backend, spawn_app};

const THIS_BUILD: &str = env!("CARGO_BIN_EXE_stratum");

/// The `stratum` binary of this tree with the changed fold.
fn changed_build() -> PathBuf {
    variant("failed-error-after-step")
}

/// The `stratum` binary of this tree with `replay-tests/changes/NAME.patch`
/// applied, built by `.ci/variant-build NAME`.
pub(crate) fn variant(name: &str) -> PathBuf {
    let target = Path::new(THIS_BUILD)
        .parent()
        .and_then(Path::parent)
        .expect("the binary is in TARGET/debug");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/variant-build");
    let out = Command::new("bash")
        .arg(&script)
        .arg(name)
        .env("CARGO_TARGET_DIR", target)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "building the changed fold failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Runs `bin` with `args` on the database: exit code, stdout, stderr.
fn run(bin: &Path, args: &[&str], db_url: &str) -> (i32, String, String) {
    crate::cli::run(Command::new(bin), args, db_url)
}

/// A database holding the membership scenario; its head.
async fn recorded(db: &crate::support::TestDb) -> u64 {
    let app = spawn_app(db).await;
    scenario(&app).await;
    app.head().await
}

/// What the changed fold changes, computed from this build's dump: the
/// `failedError` of every failed member with a step, and nothing else.
fn expected_differences(dump: &str) -> Vec<Value> {
    dump.lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "member")
        .filter_map(|e| {
            let step = e["record"]["failedStep"].as_str()?;
            let error = e["record"]["failedError"].as_str()?;
            Some(json!({
                "kind": "member",
                "id": e["id"],
                "change": "changed",
                "field": "/failedError",
                "before": error,
                "after": format!("{step}: {error}"),
            }))
        })
        .collect()
}

#[tokio::test]
async fn a_changed_fold_is_reviewed_on_the_database_entity_by_entity_and_field_by_field() {
    let changed = changed_build();
    let this = Path::new(THIS_BUILD);
    for db in each_backend().await {
        let head = recorded(&db).await;
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();

        // This build against the rows it wrote: nothing, exit 0.
        let (code, out, err) = run(this, &["replay", "--diff"], &db.url);
        assert_eq!((code, out.as_str()), (0, ""), "{}: {err}", db.backend);

        // Its dump, of the database and of an export of it: one text.
        let (code, _, err) = run(this, &["replay", "--dump", &path("this.jsonl")], &db.url);
        assert_eq!(code, 0, "{err}");
        let this_dump = std::fs::read_to_string(path("this.jsonl")).unwrap();
        let header: Value = serde_json::from_str(this_dump.lines().next().unwrap()).unwrap();
        assert_eq!(header["position"], head);
        assert_eq!(
            header["projections"],
            json!({"iam": 1, "members": 1, "upgrades": 1})
        );
        let (_, export, _) = run(this, &["events", "export"], &db.url);
        std::fs::write(path("log.jsonl"), export).unwrap();
        let (code, _, err) = run(
            this,
            &[
                "replay",
                "--dump",
                &path("export.jsonl"),
                "--file",
                &path("log.jsonl"),
            ],
            &db.url,
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            std::fs::read_to_string(path("export.jsonl")).unwrap(),
            this_dump
        );

        let expected = expected_differences(&this_dump);
        assert_eq!(
            expected.len(),
            1,
            "the scenario fails one join: {expected:?}"
        );

        // The changed fold against the database's rows, in JSON: exactly
        // the affected members and field, with both values.
        let (code, out, err) = run(&changed, &["replay", "--diff", "-o", "json"], &db.url);
        assert_eq!(code, 1, "{}: {out}{err}", db.backend);
        let got: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(got, Value::Array(expected.clone()), "{}", db.backend);
        // In YAML, the same rows.
        let (code, out, _) = run(&changed, &["replay", "--diff", "-o", "yaml"], &db.url);
        assert_eq!(code, 1);
        let got: Value = serde_norway::from_str(&out).unwrap();
        assert_eq!(got, Value::Array(expected.clone()));
        // As a table, one row naming the entity and the field.
        let (code, out, _) = run(&changed, &["replay", "--diff"], &db.url);
        assert_eq!(code, 1);
        let row = out
            .lines()
            .find(|l| l.contains("/failedError"))
            .unwrap_or_default();
        for cell in ["member", "n-2", "changed"] {
            assert!(row.contains(cell), "{cell} not in {row:?}:\n{out}");
        }
        // BEFORE, the rows' value, then AFTER, the changed fold's.
        let before = row.find("permission denied").unwrap_or(usize::MAX);
        let after = row.find("join/raft-openbao: permission denied");
        assert!(after.is_some_and(|a| before < a), "{row:?}");

        // The same rows against this build's dump, from an export, and
        // an export folded against the database's rows.
        let (this_json, log) = (path("this.jsonl"), path("log.jsonl"));
        for args in [
            &["--against", this_json.as_str(), "--file", log.as_str()][..],
            &["--file", log.as_str()],
        ] {
            let args: Vec<&str> = ["replay", "--diff", "-o", "json"]
                .into_iter()
                .chain(args.iter().copied())
                .collect();
            let (code, out, err) = run(&changed, &args, &db.url);
            assert_eq!(code, 1, "{args:?}: {err}");
            let got: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(got, Value::Array(expected.clone()), "{args:?}");
        }
        // And this build against its own dump: nothing.
        let (code, out, err) = run(
            this,
            &["replay", "--diff", "--against", &path("this.jsonl")],
            &db.url,
        );
        assert_eq!((code, out.as_str()), (0, ""), "{err}");

        // The changed build's dump is this build's, but for the lines of
        // the affected members.
        let (code, _, err) = run(
            &changed,
            &["replay", "--dump", &path("changed.jsonl")],
            &db.url,
        );
        assert_eq!(code, 0, "{err}");
        let changed_dump = std::fs::read_to_string(path("changed.jsonl")).unwrap();
        let (a, b): (Vec<&str>, Vec<&str>) =
            (this_dump.lines().collect(), changed_dump.lines().collect());
        assert_eq!(a.len(), b.len());
        let differing: Vec<Value> = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| x != y)
            .map(|(x, _)| serde_json::from_str::<Value>(x).unwrap()["id"].clone())
            .collect();
        let affected: Vec<Value> = expected.iter().map(|e| e["id"].clone()).collect();
        assert_eq!(differing, affected);
    }
}

#[tokio::test]
async fn a_diff_compares_read_models_at_one_position_and_names_a_changed_row() {
    let this = Path::new(THIS_BUILD);
    for db in each_backend().await {
        let head = recorded(&db).await;
        let dir = tempfile::tempdir().unwrap();
        let at = |p: u64| {
            dir.path()
                .join(format!("at-{p}.jsonl"))
                .to_str()
                .unwrap()
                .to_owned()
        };

        // A dump at an earlier position, and a diff there.
        let p = head - 3;
        let (code, _, err) = run(
            this,
            &["replay", "--dump", &at(p), "--until", &p.to_string()],
            &db.url,
        );
        assert_eq!(code, 0, "{err}");
        let (code, out, err) = run(
            this,
            &[
                "replay",
                "--diff",
                "--against",
                &at(p),
                "--until",
                &p.to_string(),
            ],
            &db.url,
        );
        assert_eq!((code, out.as_str()), (0, ""), "{err}");
        // The tables stand at the head: another position is refused,
        // naming both.
        let (code, _, err) = run(
            this,
            &["replay", "--diff", "--until", &p.to_string()],
            &db.url,
        );
        assert_eq!(code, 2);
        assert!(err.contains(&format!("stand at position {head}")), "{err}");
        let (code, _, err) = run(
            this,
            &[
                "replay",
                "--diff",
                "--against",
                &at(p),
                "--until",
                &(p + 1).to_string(),
            ],
            &db.url,
        );
        assert_eq!(code, 2);
        assert!(err.contains(&format!("stand at position {p}")), "{err}");

        // A row another build wrote differently is named with its field.
        let (code, out, _) = run(this, &["replay", "--dump", "-"], &db.url);
        assert_eq!(code, 0);
        let n1: Value = out
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["kind"] == "member" && e["id"] == "n-1")
            .unwrap();
        let mut doc = n1["record"].clone();
        doc["mgmtIp"] = json!("192.0.2.99");
        crate::cli::exec(
            &db.url,
            &format!(
                "UPDATE rm_members SET doc = '{}' WHERE node_id = 'n-1'",
                doc.to_string().replace('\'', "''")
            ),
        )
        .await;
        let (code, out, _) = run(this, &["replay", "--diff", "-o", "json"], &db.url);
        assert_eq!(code, 1);
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            json!([{"kind": "member", "id": "n-1", "change": "changed", "field": "/mgmtIp",
                    "before": "192.0.2.99", "after": "192.0.2.11"}]),
            "{}",
            db.backend
        );
        // A dump that is not one is refused naming its line.
        std::fs::write(
            at(0),
            "{\"dump\":\"stratum-read-models/1\",\"position\":1,\"projections\":{}}\nnot json\n",
        )
        .unwrap();
        let (code, _, err) = run(this, &["replay", "--diff", "--against", &at(0)], &db.url);
        assert_eq!(code, 2);
        assert!(err.contains("line 2"), "{err}");
    }
}
