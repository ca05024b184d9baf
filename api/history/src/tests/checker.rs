//! The algorithm, on registers: what it accepts, what it rejects, what it
//! reports, and what it costs.

use super::*;
use crate::{check, Options, Report, Verdict};

fn checked(history: &[RegOperation]) -> Report<&'static str> {
    check(&Register, history, &Options::default())
}

fn assert_linearizable(history: &[RegOperation]) {
    let report = checked(history);
    assert_eq!(report.verdict(), Verdict::Linearizable, "{report}");
}

/// The one violation of `history`, at key `k`.
fn assert_violation(history: &[RegOperation], k: &str) -> crate::Violation<&'static str> {
    let report = checked(history);
    assert_eq!(report.verdict(), Verdict::Violation, "{report}");
    assert_eq!(report.violations.len(), 1, "{report}");
    let v = report.violations.into_iter().next().unwrap();
    assert_eq!(v.key, k);
    v
}

#[test]
fn a_sequential_history_that_follows_the_model_is_linearizable() {
    assert_linearizable(&[
        write(1, "x", 1, 0, 10),
        read(2, "x", 1, 20, 30),
        write(1, "x", 2, 40, 50),
        read(2, "x", 2, 60, 70),
    ]);
}

#[test]
fn reads_concurrent_with_a_write_may_see_the_old_or_the_new_value() {
    assert_linearizable(&[
        write(1, "x", 1, 0, 100),
        read(2, "x", 0, 10, 20),
        read(2, "x", 1, 30, 40),
        read(3, "x", 1, 50, 150),
        // Began before the write answered and ended after it: it may
        // have taken effect before the write did.
        read(4, "x", 0, 5, 200),
    ]);
}

#[test]
fn operations_that_touch_count_as_concurrent() {
    // The read began at the instant the write answered.
    assert_linearizable(&[write(1, "x", 1, 0, 10), read(2, "x", 0, 10, 20)]);
}

#[test]
fn a_stale_read_after_a_completed_write_is_a_violation() {
    let v = assert_violation(&[write(1, "x", 1, 0, 10), read(2, "x", 0, 20, 30)], "x");
    assert_eq!(v.longest_prefix, [0], "the write alone can take effect");
    assert_eq!(v.blocked, 1, "the read cannot follow it");
    assert_eq!(v.operations, [0, 1]);
}

#[test]
fn a_read_of_a_value_never_written_is_a_violation() {
    assert_violation(&[write(1, "x", 1, 0, 10), read(2, "x", 7, 5, 15)], "x");
}

#[test]
fn a_read_that_goes_back_in_time_is_a_violation() {
    // Both reads overlap the write, but the second began after the first
    // saw the new value.
    assert_violation(
        &[
            write(1, "x", 1, 0, 100),
            read(2, "x", 1, 10, 20),
            read(2, "x", 0, 30, 40),
        ],
        "x",
    );
}

#[test]
fn a_write_of_unknown_outcome_may_take_effect_late_or_never() {
    // Never seen: it may never have taken effect.
    assert_linearizable(&[write_unknown(1, "x", 1, 0), read(2, "x", 0, 10, 20)]);
    // Seen: it took effect before the read.
    assert_linearizable(&[write_unknown(1, "x", 1, 0), read(2, "x", 1, 10, 20)]);
    // Not seen, then seen: it took effect between the reads, long after
    // it was sent (the server was still carrying it out).
    assert_linearizable(&[
        write_unknown(1, "x", 1, 0),
        read(2, "x", 0, 10, 20),
        read(2, "x", 1, 30, 40),
        read(3, "x", 1, 1000, 1010),
    ]);
}

#[test]
fn a_write_of_unknown_outcome_once_seen_stays_seen() {
    assert_violation(
        &[
            write_unknown(1, "x", 1, 0),
            read(2, "x", 1, 10, 20),
            read(2, "x", 0, 30, 40),
        ],
        "x",
    );
}

#[test]
fn a_write_of_unknown_outcome_cannot_take_effect_before_it_was_sent() {
    assert_violation(&[read(2, "x", 1, 0, 10), write_unknown(1, "x", 1, 20)], "x");
}

#[test]
fn operations_of_unknown_outcome_need_not_take_effect_at_all() {
    // Even one that could never take effect: only the operations that
    // answered must be linearized.
    let impossible = || Operation::unknown(1, RegOp::Impossible("x"), 0);
    assert_linearizable(&[impossible(), read(2, "x", 0, 10, 20)]);
    assert_linearizable(&[impossible(), write_unknown(2, "x", 1, 5), impossible()]);
    // Answered, it must.
    let answered = Operation::returned(1, RegOp::Impossible("x"), 0, RegRet::Done, 10);
    assert_violation(&[answered], "x");
}

#[test]
fn writes_of_unknown_outcome_may_take_effect_in_any_order() {
    assert_linearizable(&[
        write_unknown(1, "x", 1, 0),
        write_unknown(2, "x", 2, 0),
        read(3, "x", 2, 10, 20),
        read(3, "x", 1, 30, 40),
    ]);
    // But each at most once: 1, 2, then 1 again is not a history.
    assert_violation(
        &[
            write_unknown(1, "x", 1, 0),
            write_unknown(2, "x", 2, 0),
            read(3, "x", 1, 10, 20),
            read(3, "x", 2, 30, 40),
            read(3, "x", 1, 50, 60),
        ],
        "x",
    );
}

#[test]
fn keys_are_checked_independently_and_the_violation_names_its_key() {
    let history = [
        write(1, "a", 1, 0, 10),
        write(2, "b", 1, 0, 10),
        // A stale read on "a" would be a violation; on "b" it is not
        // stale: "b"'s write is another key's.
        read(3, "a", 1, 20, 30),
        read(3, "b", 0, 40, 50),
    ];
    let report = checked(&history);
    assert_eq!(report.stats.partitions, 2);
    assert_eq!(report.verdict(), Verdict::Violation, "{report}");
    assert_eq!(report.violations.len(), 1);
    let v = &report.violations[0];
    assert_eq!(v.key, "b");
    assert_eq!(
        v.operations,
        [1, 3],
        "the history indices of b's operations"
    );
    let text = report.to_string();
    assert!(text.contains(r#"key "b""#), "{text}");
    assert!(
        text.contains("#3 client 3 [40 .. 50] Read(\"b\") -> Value(0)"),
        "{text}"
    );
    assert!(!text.contains(r#"key "a""#), "{text}");
}

#[test]
fn the_report_shows_the_longest_prefix_with_its_states_and_the_operations_that_could_not_follow() {
    let history = [
        write(1, "x", 1, 0, 10),
        write(2, "x", 2, 20, 30),
        read(3, "x", 1, 25, 40),
        read(4, "x", 5, 35, 45),
    ];
    let report = checked(&history);
    let v = &report.violations[0];
    // w1, then the read of 1 (before w2), then w2: the read of 5 fits
    // nowhere.
    assert_eq!(v.longest_prefix, [0, 2, 1]);
    assert_eq!(v.blocked, 3);
    let text = v.to_string();
    assert!(
        text.contains("longest linearizable prefix (3 of 4)"),
        "{text}"
    );
    assert!(text.contains("Write(\"x\", 2) -> Done  => 2"), "{text}");
    assert!(
        text.contains("then #3 client 4 [35 .. 45] Read(\"x\") -> Value(5) answered"),
        "{text}"
    );
}

/// A write of 1 concurrent with `n` reads of 0 and `n` reads of 1, all
/// concurrent with each other, then a read of 2 (never written). Every
/// order of the reads must be ruled out: `n!²` orders, but only `2^n +
/// 4^n` configurations.
fn concurrent_reads(n: u64) -> Vec<RegOperation> {
    let mut h = vec![write(0, "x", 1, 0, 1000)];
    for i in 0..n {
        h.push(read(1 + i as usize, "x", 0, 1 + i, 900));
        h.push(read(100 + i as usize, "x", 1, 1 + i, 900));
    }
    h.push(read(999, "x", 2, 2000, 2001));
    h
}

#[test]
fn memoization_keeps_concurrent_reads_from_blowing_up() {
    let n = 7;
    let history = concurrent_reads(n);
    let report = checked(&history);
    assert_eq!(report.verdict(), Verdict::Violation, "{report}");
    let s = &report.stats;
    let bound = (1 << n) + (1 << (2 * n));
    assert!(s.configurations <= bound, "{s:?}");
    // Each state and operation is stepped once: 3 states (0, 1, and the
    // write's) by 16 operations at most.
    assert!(s.model_steps <= 3 * history.len() as u64, "{s:?}");

    // Without the cache the same search runs out of a million steps
    // (7!² = 25 million orders of the reads).
    let plain = check(
        &Register,
        &history,
        &Options::default().without_memoization(),
    );
    assert_eq!(plain.verdict(), Verdict::Inconclusive, "{plain}");
    assert!(
        s.steps * 4 < plain.stats.steps,
        "{s:?} vs {:?}",
        plain.stats
    );
}

#[test]
fn running_out_of_steps_is_inconclusive_not_a_hang() {
    let history = concurrent_reads(7);
    let report = check(&Register, &history, &Options::default().with_max_steps(100));
    assert_eq!(report.verdict(), Verdict::Inconclusive, "{report}");
    assert_eq!(report.inconclusive, ["x"]);
    assert_eq!(report.stats.steps, 100);
    // A violation elsewhere is still a violation.
    let mut history = history;
    history.extend([write(1, "y", 1, 0, 10), read(2, "y", 0, 20, 30)]);
    let report = check(&Register, &history, &Options::default().with_max_steps(100));
    assert_eq!(report.verdict(), Verdict::Violation, "{report}");
    assert_eq!(report.inconclusive, ["x"]);
}

/// A linearizable history by construction: each operation takes effect
/// at a point drawn inside its interval, and answers what a register
/// answers at that point. About a fifth of the writes never hear back,
/// and half of those never took effect.
fn generated(rng: &mut Lcg, keys: &[&'static str], per_key: u64) -> Vec<RegOperation> {
    let mut out = Vec::new();
    for &k in keys {
        let mut ops = Vec::new();
        for i in 0..per_key {
            let invoked = i * 5 + rng.below(5);
            let len = 1 + rng.below(40);
            let point = invoked + rng.below(len);
            let v = 1 + rng.below(5) as u8;
            let kind = match rng.below(10) {
                0..=2 => 1, // a write
                3 => 2,     // a write of unknown outcome
                _ => 0,     // a read
            };
            let applied = kind != 2 || rng.below(2) == 0;
            ops.push((point, invoked, invoked + len, kind, v, applied));
        }
        ops.sort();
        let mut state = 0;
        for (n, (_, invoked, returned, kind, v, applied)) in ops.into_iter().enumerate() {
            let client = n % 4;
            out.push(match kind {
                0 => read(client, k, state, invoked, returned),
                1 => write(client, k, v, invoked, returned),
                _ => write_unknown(client, k, v, invoked),
            });
            if kind != 0 && applied {
                state = v;
            }
        }
    }
    out
}

#[test]
fn thousands_of_operations_over_hundreds_of_keys_are_checked_cheaply() {
    let keys: Vec<&'static str> = (0..300)
        .map(|i| &*Box::leak(format!("k{i}").into_boxed_str()))
        .collect();
    let mut history = generated(&mut Lcg(7), &keys, 30);
    let report = checked(&history);
    assert_eq!(report.verdict(), Verdict::Linearizable, "{report}");
    let s = &report.stats;
    assert_eq!((s.partitions, s.operations), (300, 9000));
    assert!(s.unknown > 500, "{s:?}");
    assert!(s.steps < 50 * 9000, "{s:?}");

    // One read of k7 changed to a value never written: k7 alone fails.
    let i = history
        .iter()
        .position(|o| o.op == RegOp::Read("k7"))
        .unwrap();
    history[i].outcome = crate::Outcome::Returned {
        ret: RegRet::Value(99),
        at: history[i].returned_at().unwrap(),
    };
    let report = checked(&history);
    assert_eq!(report.verdict(), Verdict::Violation, "{report}");
    assert_eq!(report.violations.len(), 1, "{report}");
    assert_eq!(report.violations[0].key, "k7");
    assert!(report.violations[0].operations.contains(&i));
}

#[test]
#[should_panic(expected = "answered (5) before it was invoked (10)")]
fn an_answer_before_the_invocation_is_a_recording_error() {
    checked(&[write(1, "x", 1, 10, 5)]);
}
