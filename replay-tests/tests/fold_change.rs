//! A projection's fold changed without a new version is caught by the
//! golden dumps. The change (`changes/failed-error-after-step.patch`: a
//! failed member's error shown after its step) is built into a second
//! binary by `.ci/variant-build`, as a developer's tree with the change
//! would be, and that binary's dumps of the recorded logs are held to the
//! golden ones exactly as `every_recorded_log_folds_to_its_golden_dump_at_the_same_projection_versions`
//! holds this build's.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use stratum_projections::dump::{Dump, MEMBER};
use stratum_replay_tests::{against_golden, bless_dump, golden_dump_path, log_names, root, Golden};

/// The `stratum` binary of this tree with the change applied.
fn changed_build() -> PathBuf {
    let out = Command::new(root().join("../.ci/variant-build"))
        .arg("failed-error-after-step")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the changed build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The members the change affects: failed ones with an error and a step.
fn affected(golden: &Dump) -> Vec<(String, String, String)> {
    golden
        .entities
        .iter()
        .filter(|e| e.kind == MEMBER)
        .filter_map(|e| {
            let step = e.record["failedStep"].as_str()?;
            let error = e.record["failedError"].as_str()?;
            Some((e.id.clone(), error.to_owned(), format!("{step}: {error}")))
        })
        .collect()
}

#[test]
fn a_fold_change_without_a_version_bump_fails_the_golden_dumps_naming_what_changed() {
    let changed = changed_build();
    let mut caught = Vec::new();
    let mut same = Vec::new();
    for name in log_names() {
        let log = root().join("logs").join(format!("{name}.jsonl"));
        let out = Command::new(&changed)
            .args(["replay", "--dump", "-", "--file"])
            .arg(&log)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let now = Dump::parse(std::str::from_utf8(&out.stdout).unwrap()).unwrap();
        let golden =
            Dump::parse(&std::fs::read_to_string(golden_dump_path(&name)).unwrap()).unwrap();
        let affected = affected(&golden);
        match against_golden(&name, &golden, &now) {
            Golden::Same => {
                assert!(affected.is_empty(), "{name}: {affected:?} were not caught");
                // Where the two builds' folds agree on a log, their dumps
                // of it are the same bytes.
                assert_eq!(
                    std::str::from_utf8(&out.stdout).unwrap(),
                    std::fs::read_to_string(golden_dump_path(&name)).unwrap(),
                    "{name}: the changed build's dump is not byte for byte this build's"
                );
                same.push(name);
            }
            Golden::ChangedWithoutBump(why) => {
                assert!(!affected.is_empty(), "{name}: {why}");
                assert!(why.contains("projection `members` (version 1)"), "{why}");
                assert!(why.contains("bump the `version` of `members`"), "{why}");
                for (id, before, after) in &affected {
                    let line = format!(
                        "member {id} changed /failedError: {} → {}",
                        Value::from(before.as_str()),
                        Value::from(after.as_str())
                    );
                    assert!(why.contains(&line), "{line} not in:\n{why}");
                }
                // Nothing else: one line per affected member, and no other
                // projection named.
                assert_eq!(why.matches("\n  ").count(), affected.len(), "{why}");
                assert!(
                    !why.contains("`iam`") && !why.contains("`upgrades`"),
                    "{why}"
                );
                // And `bless` refuses to record it.
                let text = std::fs::read_to_string(golden_dump_path(&name)).unwrap();
                assert_eq!(bless_dump(&name, Some(&text), &now), Err(why.clone()));
                caught.push(name);
            }
            Golden::Bumped(why) | Golden::LogChanged(why) => panic!("{name}: {why}"),
        }
    }
    assert!(!caught.is_empty(), "no recorded log has a failed member");
    assert!(!same.is_empty(), "every recorded log has a failed member");
}
