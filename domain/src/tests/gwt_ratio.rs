//! How the domain's decision tests read: at least [`MIN_PERCENT`] of them
//! given/when/then (issue 36), and no new one written the old way.
//!
//! A *decision test* is a `#[test]` in `domain/src/tests/*.rs` whose body
//! decides a command: it calls `.when(`/`.when_by(` or one of the old
//! drivers ([`OLD_WAY`]: `run(`, `decide_ok(`, `refused(`, a free
//! `when(`, `advance(`, ...). It *reads given/when/then* when every
//! decision it makes goes through `.when(...)`/`.when_by(...)` and a
//! `then` (`then`, `then_refused`, `then_invalid`, `then_nothing`,
//! `then_appended`, ...), that is, when it calls `.when` and none of
//! [`OLD_WAY`]. A test that only folds events or reads a state (`given`,
//! `apply`, a validator, `evaluate`) decides nothing and is not counted.
//!
//! `cargo test -p stratum-domain gwt -- --nocapture` prints the counts and
//! the decision tests still written the old way.

use std::path::Path;

/// The share of decision tests that must read given/when/then: issue 36's
/// 80, a ratchet to raise as more tests are converted.
const MIN_PERCENT: usize = 80;

/// The calls that decide a command the old way: driving the state by
/// commands (`run`, `step`, `drive`, the driver's `advance`), or deciding
/// outside a `when ... then` (`decide_ok`, `refused`, a free `when`).
const OLD_WAY: &[&str] = &[
    "run",
    "run_by",
    "run_checking_generation",
    "decide",
    "decide_ok",
    "refused",
    "when",
    "when_by",
    "when_holding",
    "advance",
    "advance_at",
    "step",
    "drive",
    "plan_of",
    "prechecks_in",
];

/// The decision tests still written the old way when the ratio was set:
/// any other decision test must read given/when/then. Convert one, and
/// take it off this list (a name left here that reads given/when/then is
/// no failure; the ratio is what it keeps).
const OLD_WAY_ALLOWED: &[&str] = &[
    "generation::the_generation_is_the_position_of_the_latest_topology_event",
    "membership_invariants::each_event_bumps_its_members_stream_version",
    "membership_invariants::no_sequence_of_commands_breaks_an_invariant",
    "storage_version::record_only_removals_are_kept_and_rows_hold_them_from_the_finalization_on",
    "storage_version::the_settings_alarm_is_raised_while_replicas_differ_and_cleared_once_none_do",
    "storage_version::the_witness_alarm_names_the_failing_witnesses_and_clears_once_none_fails",
    "upgrade_node_reports::a_roll_report_from_a_node_that_already_rolled_is_not_node_turn",
    "upgrade_node_reports::a_failed_report_fails_the_upgrade_with_the_nodes_message",
    "upgrade_node_reports::a_failed_fetch_or_verify_fails_the_upgrade_too",
    "upgrade_node_reports::rebooted_at_sets_the_last_restart",
    "upgrade_node_reports::a_node_that_reports_rolled_back_in_its_roll_fails_the_upgrade_naming_it",
    "upgrade_node_reports::a_node_that_reports_rolled_back_while_verifying_or_fetching_fails_the_upgrade_naming_it",
    "upgrade_node_reports::a_host_helper_report_with_its_unit_lists_and_intent_is_recorded_on_the_node",
    "upgrade_node_reports::verify_done_of_a_rebooted_node_counts_only_once_its_instances_run_again",
    "upgrade_reboots::after_a_restart_the_next_nodes_turn_waits_for_the_settle_time",
    "upgrade_reboots::a_roll_that_restarts_containers_settles_from_when_it_was_reported",
    "upgrade_reboots::a_reported_reboot_time_in_the_future_counts_from_when_it_was_heard",
    "upgrade_reboots::a_security_upgrade_that_was_never_staged_has_no_reboot_warnings",
    "upgrade_reboots::the_reboot_pending_alarm_is_raised_seven_days_after_staging_and_only_once",
    "upgrade_reboots::a_nodes_reboot_clears_its_alarm_in_the_same_decision",
    "upgrade_reboots::canceling_a_staged_upgrade_clears_its_reboot_alarms",
    "upgrade_reboots::an_upgrade_that_ends_clears_the_alarms_its_nodes_still_hold",
    "upgrade_reboots::a_reported_reboot_is_decided_at_the_precision_the_log_keeps",
    "upgrade_start::a_node_failing_in_any_state_from_the_prechecks_on_fails_the_upgrade",
    "upgrade_start::an_upgrade_whose_rollback_failed_or_was_canceled_may_be_rolled_back_again",
    "upgrade_walk::a_three_node_upgrade_walks_from_planned_to_done",
    "upgrade_walk::every_move_the_driver_makes_is_an_edge_of_the_state_machine",
    "upgrade_write_freeze::during_the_freeze_the_upgrades_own_reports_pass",
];

/// One `#[test]`: its file, name, and body without its comment lines.
struct TestFn {
    file: String,
    name: String,
    body: String,
}

#[allow(
    clippy::disallowed_methods,
    reason = "a test reads the test sources it counts"
)]
fn test_fns(dir: &Path) -> Vec<TestFn> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("domain/src/tests is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if file == "gwt_ratio.rs" {
            continue;
        }
        let text: String = std::fs::read_to_string(&path)
            .expect("a test file is readable")
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .map(|l| format!("{l}\n"))
            .collect();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("#[test]") {
            rest = &rest[at + "#[test]".len()..];
            let f = rest.find("fn ").expect("a #[test] is a fn");
            let after = &rest[f + 3..];
            let name = after[..after.find('(').expect("fn name(")]
                .trim()
                .to_owned();
            let open = rest.find('{').expect("a fn body");
            let mut depth = 0usize;
            let mut end = open;
            for (i, c) in rest[open..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            out.push(TestFn {
                file: file.clone(),
                name,
                body: rest[open..=end].to_owned(),
            });
            rest = &rest[end..];
        }
    }
    out
}

/// Whether `body` calls `name(` as a free function (`dot` false) or as a
/// method (`dot` true), or either (`dot` None).
fn calls(body: &str, name: &str, dot: Option<bool>) -> bool {
    let pat = format!("{name}(");
    body.match_indices(&pat).any(|(at, _)| {
        let before = body[..at].chars().next_back();
        let ident = before.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let is_dot = before == Some('.');
        !ident
            && match dot {
                None => true,
                Some(d) => d == is_dot,
            }
    })
}

fn old_way(body: &str) -> bool {
    OLD_WAY.iter().any(|name| match *name {
        // `.when(` and `.when_by(` are the given/when/then.
        "when" | "when_by" | "when_holding" => calls(body, name, Some(false)),
        _ => calls(body, name, None),
    })
}

fn decides(body: &str) -> bool {
    calls(body, "when", Some(true)) || calls(body, "when_by", Some(true)) || old_way(body)
}

#[test]
fn gwt_decision_tests_read_given_when_then() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tests");
    let tests = test_fns(&dir);
    let decision: Vec<&TestFn> = tests.iter().filter(|t| decides(&t.body)).collect();
    let old: Vec<&TestFn> = decision
        .iter()
        .copied()
        .filter(|t| old_way(&t.body))
        .collect();
    let gwt = decision.len() - old.len();
    eprintln!(
        "{} tests, {} decision tests, {} read given/when/then ({}%), {} the old way:",
        tests.len(),
        decision.len(),
        gwt,
        gwt * 100 / decision.len().max(1),
        old.len()
    );
    for t in &old {
        eprintln!("  {}::{}", t.file.trim_end_matches(".rs"), t.name);
    }
    assert!(
        tests.len() > 300,
        "the counter found only {} tests: it lost its way",
        tests.len()
    );
    assert!(
        gwt * 100 >= MIN_PERCENT * decision.len(),
        "{gwt} of {} decision tests read given/when/then, under {MIN_PERCENT}%",
        decision.len()
    );
    let new_old: Vec<String> = old
        .iter()
        .map(|t| format!("{}::{}", t.file.trim_end_matches(".rs"), t.name))
        .filter(|n| !OLD_WAY_ALLOWED.contains(&n.as_str()))
        .collect();
    assert!(
        new_old.is_empty(),
        "decision tests written the old way (write them given(events).when(command).then(events)): {new_old:#?}"
    );
}
