//! A fork of the signed checkpoints: recorded once as the
//! `log-checkpoint-fork` alarm, acknowledged only by naming the signed
//! checkpoint it forks from, with a reason safe to show.

use super::support::upgrade::*;
use crate::upgrade::{
    checkpoint_fork_key, CheckpointForkAcknowledged, CheckpointForkFound, CHECKPOINT_FORK_ALARM,
};

fn fork(size: u64) -> CheckpointForkFound {
    CheckpointForkFound {
        signed_size: size,
        signed_root: "a".repeat(64),
        log_size: size - 2,
        log_root: "b".repeat(64),
    }
}

fn acknowledge(size: u64, reason: &str) -> UpgradeCommand {
    UpgradeCommand::AcknowledgeCheckpointFork {
        signed_size: size,
        signed_root: "a".repeat(64),
        reason: Some(reason.into()),
    }
}

#[test]
fn a_fork_raises_its_alarm_once_and_an_acknowledgement_clears_it() {
    let mut s = cluster();
    s.when(UpgradeCommand::RecordCheckpointFork(fork(40)))
        .then_appended(&mut s, vec![DomainEvent::CheckpointForkFound(fork(40))]);
    let key = checkpoint_fork_key(40, &"a".repeat(64));
    let alarm = &s.upgrades.alarms[&key];
    assert_eq!(alarm.name, CHECKPOINT_FORK_ALARM);
    assert!(alarm.cleared_at.is_none());
    assert!(
        alarm.message.contains("size 40") && alarm.message.contains(&"b".repeat(64)),
        "{}",
        alarm.message
    );
    // Every replica that finds it reports the same fork.
    let again = s
        .when(UpgradeCommand::RecordCheckpointFork(fork(40)))
        .decided();
    assert_unchanged(&again, Subject::Alarm(key.clone()));

    // The acknowledgement names the checkpoint: another one is not found.
    s.when(acknowledge(41, "restored the backup"))
        .then_refused(ErrorCode::NotFound);
    s.when(acknowledge(40, "restored the pre-upgrade backup"))
        .then_appended(
            &mut s,
            vec![DomainEvent::CheckpointForkAcknowledged(
                CheckpointForkAcknowledged {
                    signed_size: 40,
                    signed_root: "a".repeat(64),
                    reason: "restored the pre-upgrade backup".into(),
                },
            )],
        );
    assert!(s.upgrades.alarms[&key].cleared_at.is_some());
    let k = s.upgrades.checkpoint_fork(40, &"a".repeat(64)).unwrap();
    assert_eq!(
        k.acknowledged.as_ref().map(|(_, why)| why.as_str()),
        Some("restored the pre-upgrade backup")
    );
    // Twice is once.
    assert_unchanged(
        &s.when(acknowledge(40, "again")).decided(),
        Subject::Alarm(key.clone()),
    );
    // A fork from another signed checkpoint (another replica's, or a
    // later one) is an alarm of its own, acknowledged on its own.
    s.when(UpgradeCommand::RecordCheckpointFork(fork(90)))
        .then_appended(&mut s, [DomainEvent::CheckpointForkFound(fork(90))]);
    let later = checkpoint_fork_key(90, &"a".repeat(64));
    assert!(s.upgrades.alarms[&later].cleared_at.is_none());
    assert!(s.upgrades.alarms[&key].cleared_at.is_some());
}

#[test]
fn an_acknowledgement_needs_a_reason_safe_to_show_and_passes_the_write_freeze() {
    let s = cluster().and(&[DomainEvent::CheckpointForkFound(fork(40))]);
    for bad in ["", "   ", "two\nlines", "red \u{1b}[31m"] {
        let r = s
            .when(acknowledge(40, bad))
            .then_refused(ErrorCode::InvalidInput);
        assert_eq!(r.field_errors[0].field, "reason", "{bad:?}");
    }
    assert!(acknowledge(40, "x").passes_write_freeze());
    assert!(UpgradeCommand::RecordCheckpointFork(fork(40)).passes_write_freeze());
    let mut bad = fork(40);
    bad.log_root = "XYZ".into();
    let r = s.when(UpgradeCommand::RecordCheckpointFork(bad)).refusal();
    assert_eq!(r.field_errors[0].field, "logRoot");
}
