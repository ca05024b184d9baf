//! Replays every recorded log through the projections and compares the read
//! models with the committed snapshots; decodes every stored event version.

use std::path::Path;

use stratum_domain::stored::decode;
use stratum_projections::dump::Dump;
use stratum_replay_tests::{
    against_golden, golden_dump_path, log_names, read_log, render, replay, root, verify, Golden,
};

#[test]
fn every_recorded_log_replays_to_its_snapshot() {
    insta::glob!("../logs", "*.{jsonl,postcard}", |path| {
        let events = read_log(path).unwrap();
        verify(&events).unwrap();
        let rm = replay(&events);
        // Both forms of a log share one snapshot.
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        insta::with_settings!({ snapshot_suffix => "", prepend_module_to_snapshot => false }, {
            insta::assert_json_snapshot!(name, render(&rm));
        });
    });
}

#[test]
fn both_forms_of_a_log_hold_the_same_events() {
    let logs = root().join("logs");
    let mut checked = 0;
    for entry in std::fs::read_dir(&logs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let json = read_log(&path).unwrap();
        let postcard = read_log(&path.with_extension("postcard")).unwrap();
        assert_eq!(json, postcard, "{}", path.display());
        checked += 1;
    }
    assert!(checked > 0, "no recorded log in {}", logs.display());
}

#[test]
fn replaying_a_log_twice_gives_byte_identical_read_models() {
    let events = read_log(&root().join("logs/membership.postcard")).unwrap();
    let a = replay(&events).all_rows();
    let b = replay(&events).all_rows();
    assert_eq!(a, b);
}

/// The golden bytes of every stored version of every event type decode,
/// and to the event they were written from.
#[test]
fn every_stored_version_of_every_event_type_decodes() {
    let dir = root().join("fixtures/events");
    let expected = stratum_domain::testing::one_of_each();
    for event in &expected {
        let newest = stratum_domain::stored::schema_version(event);
        for version in 1..=newest {
            let path = dir.join(format!("{}.v{version}.bin", event.event_type()));
            assert!(
                path.exists(),
                "no golden bytes for {} v{version}: run the bless example",
                event.event_type()
            );
        }
    }
    let mut decoded = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let (event_type, version) = type_and_version(&path);
        let bytes = std::fs::read(&path).unwrap();
        let event = decode(&event_type, version, &bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Every version of a type holds the same example event: old bytes
        // upcast to exactly what the newest bytes say, but for the fields
        // an upcaster fills with its documented default.
        let original = expected
            .iter()
            .find(|e| e.event_type() == event_type)
            .unwrap();
        let want = stratum_domain::testing::as_decoded_from(original, version);
        assert_eq!(event, want, "{}", path.display());
        decoded += 1;
    }
    assert!(
        decoded > expected.len(),
        "at least one type has two versions"
    );
}

fn type_and_version(path: &Path) -> (String, u16) {
    let name = path.file_name().unwrap().to_str().unwrap();
    let stem = name.strip_suffix(".bin").unwrap();
    let (t, v) = stem.rsplit_once(".v").unwrap();
    (t.to_owned(), v.parse().unwrap())
}

/// What this build's projections make of every recorded log is its golden
/// dump, at the versions that made it: a fold that changes its output
/// fails here until its projection has a new version (and `bless` has
/// recorded the new dump).
#[test]
fn every_recorded_log_folds_to_its_golden_dump_at_the_same_projection_versions() {
    let names = log_names();
    assert!(!names.is_empty());
    for name in names {
        let events = read_log(&root().join("logs").join(format!("{name}.jsonl"))).unwrap();
        let now = replay(&events).dump();
        let path = golden_dump_path(&name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}: run `cargo run -p stratum-replay-tests --example bless`",
                path.display()
            )
        });
        // The golden dump is the text a dump of this fold writes, byte for
        // byte: the form is canonical.
        let golden = Dump::parse(&text).unwrap();
        match against_golden(&name, &golden, &now) {
            Golden::Same => assert_eq!(text, now.to_text(), "{}", path.display()),
            Golden::Bumped(why) | Golden::ChangedWithoutBump(why) | Golden::LogChanged(why) => {
                panic!("{why}")
            }
        }
    }
}
