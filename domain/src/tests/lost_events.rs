//! The loss of acknowledged events in a database failover: recorded once
//! per loss as the `log-events-lost` alarm, whoever reports it, during a
//! write freeze too, and refused when the report does not add up.

use super::support::upgrade::*;
use crate::upgrade::{events_lost_key, EventsLost, LostEvent, LOG_EVENTS_LOST_ALARM};

fn hash(c: char) -> String {
    c.to_string().repeat(64)
}

fn loss(first: u64, last: u64) -> EventsLost {
    EventsLost {
        first,
        last,
        database_position: first - 1,
        database_hash: hash('d'),
        lost: (first..=last)
            .map(|position| LostEvent {
                position,
                hash: hash('a'),
            })
            .collect(),
    }
}

#[test]
fn a_loss_raises_its_alarm_with_the_range_and_is_recorded_once() {
    let mut s = cluster();
    let lost = loss(7, 9);
    let d = s
        .when(UpgradeCommand::RecordLostEvents(lost.clone()))
        .then_appended(&mut s, vec![DomainEvent::EventsLost(lost.clone())]);
    assert_eq!(d.subject, Subject::Alarm(events_lost_key(7)));
    let alarm = &s.upgrades.alarms[&events_lost_key(7)];
    assert_eq!(alarm.name, LOG_EVENTS_LOST_ALARM);
    assert!(alarm.cleared_at.is_none());
    assert!(
        alarm.message.contains("events 7 to 9 were lost")
            && alarm.message.contains(&hash('d'))
            && alarm.message.contains("3 lost events"),
        "{}",
        alarm.message
    );

    // Another replica that held less of the lost tail reports the same loss.
    let again = s
        .when(UpgradeCommand::RecordLostEvents(loss(7, 8)))
        .decided();
    assert_unchanged(&again, Subject::Alarm(events_lost_key(7)));

    // A later, different loss is an alarm of its own.
    s.when(UpgradeCommand::RecordLostEvents(loss(20, 20)))
        .then_appended(&mut s, [DomainEvent::EventsLost(loss(20, 20))]);
    assert_eq!(
        s.upgrades
            .alarms
            .values()
            .filter(|a| a.name == LOG_EVENTS_LOST_ALARM)
            .count(),
        2
    );
}

#[test]
fn a_loss_is_recorded_during_the_write_freeze() {
    assert!(UpgradeCommand::RecordLostEvents(loss(7, 9)).passes_write_freeze());
}

#[test]
fn a_report_that_does_not_add_up_is_refused_naming_its_fields() {
    let s = cluster();
    let mut bad = loss(7, 9);
    bad.last = 5;
    bad.database_hash = "XYZ".into();
    bad.lost[1].position = 7;
    bad.lost[2].hash = hash('G');
    let r = s
        .when(UpgradeCommand::RecordLostEvents(bad))
        .then_refused(ErrorCode::InvalidInput);
    let fields: Vec<&str> = r.field_errors.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "last",
            "databaseHash",
            "lost[0].position",
            "lost[1].position",
            "lost[2].position",
            "lost[2].hash"
        ]
    );
    assert!(s.upgrades.alarms.is_empty());
}
