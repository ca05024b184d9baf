//! The log's storage version: finalization's rules, the formats each level
//! writes, and what a member's record shows from which level.

use super::support::membership::*;
use crate::storage::{Finalize, ReplicaView, StorageVersionFinalized, BASE_LEVEL, NEWEST_LEVEL};
use crate::stored::levels::{level_of, version_at, writes_at};
use crate::stored::{decode, encode_at, NotWritable};

const MINE: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const OTHER: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

impl IntoCommand for Finalize {
    fn into_command(self) -> Command {
        Command::Finalize(self)
    }
}

/// A replica of this build (it reads every level) with `settings`.
fn this_build(id: &str, settings: &str) -> ReplicaView {
    ReplicaView {
        id: id.into(),
        host: "cp-1".into(),
        version: "0.9.0".into(),
        commit: "new".into(),
        reads: crate::stored::newest_versions()
            .into_iter()
            .map(|(t, v)| (t.to_owned(), v))
            .collect(),
        settings: settings.into(),
    }
}

/// A replica of the previous build: it reads what level 1 writes.
fn previous_build(id: &str, settings: &str) -> ReplicaView {
    ReplicaView {
        reads: writes_at(BASE_LEVEL)
            .into_iter()
            .map(|(t, v)| (t.to_owned(), v))
            .collect(),
        commit: "old".into(),
        ..this_build(id, settings)
    }
}

fn finalize(replicas: Vec<ReplicaView>) -> Finalize {
    Finalize {
        level: None,
        settings: MINE.into(),
        replicas,
        unregistered: Vec::new(),
    }
}

fn finalized(level: u16, replicas: &[&str]) -> DomainEvent {
    DomainEvent::StorageVersionFinalized(StorageVersionFinalized {
        level,
        writes: writes_at(level)
            .into_iter()
            .map(|(t, v)| format!("{t}/{v}"))
            .collect(),
        settings: MINE.into(),
        replicas: replicas.iter().map(|r| (*r).to_owned()).collect(),
    })
}

#[test]
fn a_log_that_records_no_finalization_is_at_the_base_level() {
    let s = State::default();
    assert_eq!(s.storage.level, BASE_LEVEL);
    assert_eq!(s.storage.finalized, None);
    // Level 1 writes what every build before levels wrote.
    assert_eq!(version_at("RaftPeerRemoved", 1), Some(3));
    assert_eq!(version_at("StorageVersionFinalized", 1), None);
    assert_eq!(version_at("RaftPeerRemoved", 2), Some(4));
    assert_eq!(level_of("RaftPeerRemoved", 4), 2);
    assert_eq!(level_of("MemberAdmitted", 1), 1);
}

#[test]
fn finalizing_with_every_live_replica_able_to_read_records_the_level_and_settings() {
    let s = State::default();
    let d = s
        .when(finalize(vec![
            this_build("r-1", MINE),
            this_build("r-2", MINE),
        ]))
        .then([finalized(NEWEST_LEVEL, &["r-1", "r-2"])]);
    assert_eq!(d.subject, Subject::StorageVersion);
}

#[test]
fn finalizing_again_with_the_same_settings_appends_nothing() {
    let s = given(&[finalized(NEWEST_LEVEL, &["r-1"])]);
    assert_eq!(s.storage.level, NEWEST_LEVEL);
    assert_eq!(s.storage.agreed_settings(), Some(MINE));
    s.when(finalize(vec![this_build("r-1", MINE)]))
        .then_nothing();
}

#[test]
fn finalizing_is_refused_naming_each_live_replica_that_cannot_read_the_level() {
    let r = State::default()
        .when(finalize(vec![
            this_build("r-new", MINE),
            previous_build("r-old", MINE),
        ]))
        .then_refused(ErrorCode::VersionConflict);
    assert!(r.message.contains("r-old"), "{}", r.message);
    assert!(!r.message.contains("r-new"), "{}", r.message);
    assert!(r.message.contains("RaftPeerRemoved/4"), "{}", r.message);
    assert!(
        r.message.contains("StorageVersionFinalized/1"),
        "{}",
        r.message
    );
    let named = r.details.as_ref().unwrap()["replicas"].clone();
    assert_eq!(named[0]["id"], "r-old");
    assert_eq!(named[0]["commit"], "old");
}

#[test]
fn finalizing_is_refused_while_a_build_that_registers_nothing_has_sessions_open() {
    let session = "pid 4242 from 192.0.2.7 since 2026-12-03T10:00:00Z";
    let r = State::default()
        .when(Finalize {
            unregistered: vec![session.into()],
            ..finalize(vec![this_build("r-1", MINE)])
        })
        .then_refused(ErrorCode::VersionConflict);
    assert!(r.message.contains(session), "{}", r.message);
    assert_eq!(r.details.as_ref().unwrap()["unregistered"][0], session);
}

#[test]
fn finalizing_is_refused_naming_each_live_replica_with_other_settings() {
    let r = State::default()
        .when(finalize(vec![
            this_build("r-1", MINE),
            this_build("r-2", OTHER),
        ]))
        .then_refused(ErrorCode::VersionConflict);
    assert!(r.message.contains("r-2"), "{}", r.message);
    assert!(r.message.contains("settings"), "{}", r.message);
    assert_eq!(
        r.details.as_ref().unwrap()["replicas"][0]["settings"],
        OTHER
    );
}

#[test]
fn a_level_is_never_taken_back_and_none_beyond_this_build_is_finalized() {
    let s = given(&[finalized(NEWEST_LEVEL, &["r-1"])]);
    let back = Finalize {
        level: Some(BASE_LEVEL),
        ..finalize(vec![this_build("r-1", MINE)])
    };
    // Level 1 is below every level a finalization records: never back.
    s.when(back).then_refused(ErrorCode::InvalidInput);
    let beyond = Finalize {
        level: Some(NEWEST_LEVEL + 1),
        ..finalize(vec![this_build("r-1", MINE)])
    };
    State::default()
        .when(beyond)
        .then_refused(ErrorCode::InvalidInput);
    // Level 1 is the unrecorded base: nothing records it.
    let base = Finalize {
        level: Some(BASE_LEVEL),
        ..finalize(vec![this_build("r-1", MINE)])
    };
    State::default()
        .when(base)
        .then_refused(ErrorCode::InvalidInput);
}

#[test]
fn new_settings_are_agreed_by_finalizing_again() {
    let s = given(&[finalized(NEWEST_LEVEL, &["r-1"])]);
    let d = s
        .when(Finalize {
            settings: OTHER.into(),
            ..finalize(vec![this_build("r-3", OTHER)])
        })
        .decided();
    let [DomainEvent::StorageVersionFinalized(f)] = d.events.as_slice() else {
        panic!("{:?}", d.events);
    };
    assert_eq!(f.settings, OTHER);
}

fn removal_event(settings: Option<&str>) -> DomainEvent {
    DomainEvent::RaftPeerRemoved {
        node_id: "n-3".into(),
        raft: Raft::Patroni,
        already_gone: false,
        adapter: "patroni-syncobj".into(),
        leader_moved: false,
        settings: settings.map(str::to_owned),
    }
}

#[test]
fn before_finalization_a_removal_is_written_in_the_version_the_previous_build_reads() {
    let e = removal_event(Some(MINE));
    let enc = encode_at(&e, BASE_LEVEL).unwrap();
    assert_eq!(enc.schema_version, 3);
    // What v3 cannot say is left out, as the previous build left it.
    assert_eq!(
        decode(enc.event_type, enc.schema_version, &enc.payload).unwrap(),
        removal_event(None)
    );
    let enc = encode_at(&e, 2).unwrap();
    assert_eq!(enc.schema_version, 4);
    assert_eq!(
        decode(enc.event_type, enc.schema_version, &enc.payload).unwrap(),
        e
    );
}

#[test]
fn a_type_newer_than_the_level_is_not_written_except_the_finalization_itself() {
    // The finalization is its level's first event: written at its level.
    let f = finalized(2, &["r-1"]);
    assert_eq!(encode_at(&f, BASE_LEVEL).unwrap().schema_version, 1);
    // A level-2 type written by anything else at level 1 is refused.
    let DomainEvent::StorageVersionFinalized(mut inner) = f else {
        unreachable!()
    };
    inner.level = 1;
    assert_eq!(
        encode_at(&DomainEvent::StorageVersionFinalized(inner), BASE_LEVEL),
        Err(NotWritable::NotYet {
            event_type: "StorageVersionFinalized",
            needs: 2,
            level: 1
        })
    );
}

#[test]
fn every_type_written_at_every_level_decodes() {
    for level in BASE_LEVEL..=NEWEST_LEVEL {
        for e in one_of_each() {
            let Ok(enc) = encode_at(&e, level) else {
                continue;
            };
            decode(enc.event_type, enc.schema_version, &enc.payload)
                .unwrap_or_else(|err| panic!("{} at level {level}: {err}", e.event_type()));
            // A finalization is written at its own level; the rest at `level`.
            let at = match &e {
                DomainEvent::StorageVersionFinalized(f) => f.level.max(level),
                _ => level,
            };
            assert_eq!(version_at(enc.event_type, at), Some(enc.schema_version));
        }
    }
}

#[test]
fn record_only_removals_are_kept_and_rows_hold_them_from_the_finalization_on() {
    let mut s = cluster_with(MemberState::Failed);
    run_by(
        &mut s,
        CLEANER,
        MemberCommand::RecordRaftRemoval {
            node_id: "n-3".into(),
            raft: Raft::Patroni,
            already_gone: false,
            adapter: crate::membership::RECORD_ONLY_ADAPTER.into(),
            leader_moved: false,
            settings: None,
        },
    );
    run_by(
        &mut s,
        CLEANER,
        MemberCommand::RecordRaftRemoval {
            node_id: "n-3".into(),
            raft: Raft::Openbao,
            already_gone: false,
            adapter: "openbao-http".into(),
            leader_moved: false,
            settings: None,
        },
    );
    // Only the removal no raft was called for is record-only.
    assert_eq!(
        member(&s, "n-3").rafts_recorded_only,
        BTreeSet::from([Raft::Patroni])
    );
    assert!(!s.membership.record_only_shown);
    run(&mut s, finalize(vec![this_build("r-1", MINE)]));
    assert!(s.membership.record_only_shown);
}

#[test]
fn the_settings_alarm_is_raised_while_replicas_differ_and_cleared_once_none_do() {
    use crate::upgrade::{alarm_key, REPLICA_SETTINGS_DIFFER_ALARM};
    let keep = |differing: &[&str]| UpgradeCommand::KeepReplicaSettingsAlarm {
        differing: differing.iter().map(|d| (*d).to_owned()).collect(),
    };
    let mut s = State::default();
    // Nothing differs, nothing raised: nothing to say.
    s.when(keep(&[])).then_nothing();
    let d = run(&mut s, keep(&["replica r-2 on cp-2 has settings bbb"]));
    let [DomainEvent::AlarmRaised(raised)] = d.events.as_slice() else {
        panic!("{:?}", d.events);
    };
    assert_eq!(raised.name, REPLICA_SETTINGS_DIFFER_ALARM);
    assert!(raised.message.contains("r-2 on cp-2"), "{}", raised.message);
    // Raised once, however often it is said again.
    s.when(keep(&["replica r-2 on cp-2 has settings bbb"]))
        .then_nothing();
    run(&mut s, keep(&[]));
    let key = alarm_key(REPLICA_SETTINGS_DIFFER_ALARM, None, None);
    assert!(s.upgrades.alarms[&key].cleared_at.is_some());
    s.when(keep(&[])).then_nothing();
}

#[test]
fn the_witness_alarm_names_the_failing_witnesses_and_clears_once_none_fails() {
    use crate::upgrade::{alarm_key, LOG_WITNESS_FAILING_ALARM};
    let keep = |failing: &[&str]| UpgradeCommand::KeepWitnessAlarm {
        replica: "cp-1/10.0.0.1:8080".into(),
        failing: failing.iter().map(|d| (*d).to_owned()).collect(),
    };
    let mut s = State::default();
    s.when(keep(&[])).then_nothing();
    let d = run(&mut s, keep(&["w2"]));
    let [DomainEvent::AlarmRaised(raised)] = d.events.as_slice() else {
        panic!("{:?}", d.events);
    };
    assert_eq!(raised.name, LOG_WITNESS_FAILING_ALARM);
    assert!(raised.message.contains(": w2."), "{}", raised.message);
    s.when(keep(&["w2"])).then_nothing();
    // Another witness fails too: raised again, naming both.
    let d = run(&mut s, keep(&["w2", "w3"]));
    let [DomainEvent::AlarmRaised(raised)] = d.events.as_slice() else {
        panic!("{:?}", d.events);
    };
    assert!(raised.message.contains(": w2; w3."), "{}", raised.message);
    assert_eq!(raised.node_id.as_deref(), Some("cp-1/10.0.0.1:8080"));
    // Another replica's view is its own alarm: it clears nothing of this one.
    let other = UpgradeCommand::KeepWitnessAlarm {
        replica: "cp-2/10.0.0.2:8080".into(),
        failing: vec![],
    };
    s.when(other).then_nothing();
    run(&mut s, keep(&[]));
    let key = alarm_key(LOG_WITNESS_FAILING_ALARM, None, Some("cp-1/10.0.0.1:8080"));
    assert!(s.upgrades.alarms[&key].cleared_at.is_some());
}
