//! Settling after a restart, reboot warnings and the 7-day alarm, and a
//! reported reboot's precision.

use super::support::upgrade::*;

// ---------------------------------------------------------------------------
// 6. Settling after a restart
// ---------------------------------------------------------------------------

fn settling_upgrade_rolling() -> State {
    let mut s = cluster();
    run(
        &mut s,
        create_configured(
            UPG,
            "1.1.0",
            "now",
            UpgradeConfig {
                settle_seconds: 60,
                ..Default::default()
            },
        ),
    );
    assert_eq!(upgrade(&s, UPG).plan.settle_seconds, 60);
    drive(&mut s, UPG, UpgradeState::Rolling);
    s
}

#[test]
fn after_a_restart_the_next_nodes_turn_waits_for_the_settle_time() {
    let mut s = settling_upgrade_rolling();
    let first = turn(&s, UPG);
    assert_eq!(first, NODES[0]);
    // The node rebooted a minute before it reported (the report comes in
    // at t0): a reboot time is never later than when it was heard of.
    let t = t0() - Duration::minutes(1);
    run(
        &mut s,
        report_with(UPG, &first, "roll", "done", rebooted(t)),
    );
    assert_eq!(upgrade(&s, UPG).last_restart_at, Some(t));
    assert_eq!(s.upgrade_wake_at(t), Some(t + Duration::seconds(60)));
    assert_eq!(
        s.upgrade_wake_at(t + Duration::seconds(60)),
        None,
        "a moment already past is no wake time"
    );

    assert!(advance_at(&mut s, t + Duration::seconds(30)).is_empty());
    assert_eq!(turn(&s, UPG), first, "still the first node's turn");

    assert_eq!(
        advance_at(&mut s, t + Duration::seconds(61)),
        [turn_started(UPG, NODES[1])]
    );
    assert_eq!(turn(&s, UPG), NODES[1]);
}

#[test]
fn a_roll_that_restarts_containers_settles_from_when_it_was_reported() {
    let mut s = settling_upgrade_rolling();
    let first = turn(&s, UPG);
    assert!(!upgrade(&s, UPG).plan.nodes[0].restarts.is_empty());
    run(&mut s, report_to(UPG, &first, "roll", "done"));
    let heard = upgrade(&s, UPG).updated_at;
    assert_eq!(upgrade(&s, UPG).last_restart_at, Some(heard));
    assert!(advance_at(&mut s, heard + Duration::seconds(30)).is_empty());
    assert_eq!(
        advance_at(&mut s, heard + Duration::seconds(61)),
        [turn_started(UPG, NODES[1])]
    );
}

#[test]
fn a_reported_reboot_time_in_the_future_counts_from_when_it_was_heard() {
    let mut s = settling_upgrade_rolling();
    let first = turn(&s, UPG);
    run(
        &mut s,
        report_with(
            UPG,
            &first,
            "roll",
            "done",
            rebooted(t0() + Duration::hours(5)),
        ),
    );
    let heard = upgrade(&s, UPG).updated_at;
    assert_eq!(upgrade(&s, UPG).last_restart_at, Some(heard));
}

// ---------------------------------------------------------------------------
// 7. Reboot warnings and the 7-day alarm
// ---------------------------------------------------------------------------

/// A stage-only upgrade to 1.1.0, an OS change fixing a CVE, staged.
fn staged_security_upgrade() -> State {
    let mut security = manifest("1.1.0", "13.2", None);
    security["cves"] = json!(["CVE-2026-0001"]);
    let mut s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(security)]);
    run(
        &mut s,
        create_configured(UPG, "1.1.0", "stage-only", UpgradeConfig::default()),
    );
    assert_eq!(
        upgrade(&s, UPG).plan.reboot_reason.as_deref(),
        Some("security")
    );
    drive(&mut s, UPG, UpgradeState::Staged);
    s
}

fn staged_at(s: &State) -> DateTime<Utc> {
    upgrade(s, UPG).staged_at.expect("the upgrade was staged")
}

/// The `(name, node, upgrade)` of each alarm raised in `events`.
fn raised(events: &[DomainEvent]) -> Vec<(String, Option<String>, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            DomainEvent::AlarmRaised(a) => {
                Some((a.name.clone(), a.node_id.clone(), a.upgrade_id.clone()))
            }
            _ => None,
        })
        .collect()
}

fn reboot_alarms_for(nodes: &[&str]) -> Vec<(String, Option<String>, Option<String>)> {
    nodes
        .iter()
        .map(|n| {
            (
                "node-reboot-pending".to_owned(),
                Some((*n).to_owned()),
                Some(UPG.to_owned()),
            )
        })
        .collect()
}

/// The staged security upgrade with its alarms raised 7 days after staging.
fn staged_with_alarms() -> (State, DateTime<Utc>) {
    let mut s = staged_security_upgrade();
    let at = staged_at(&s) + Duration::days(7);
    let events = advance_at(&mut s, at);
    assert_eq!(raised(&events), reboot_alarms_for(&NODES));
    (s, at)
}

#[test]
fn a_staged_security_upgrade_warns_that_each_node_waits_for_its_reboot() {
    let s = staged_security_upgrade();
    let staged = staged_at(&s);
    let warnings = upgrade(&s, UPG).warnings();
    let seen: Vec<(&str, &str, DateTime<Utc>)> = warnings
        .iter()
        .map(|w| (w.code.as_str(), w.node_id.as_str(), w.since))
        .collect();
    assert_eq!(
        seen,
        NODES
            .iter()
            .map(|n| ("NodeRebootPending", *n, staged))
            .collect::<Vec<_>>()
    );
    assert!(warnings.iter().all(|w| !w.message.is_empty()));
    assert_eq!(s.upgrade_wake_at(staged), Some(staged + Duration::days(7)));
}

#[test]
fn a_security_upgrade_that_was_never_staged_has_no_reboot_warnings() {
    let mut security = manifest("1.1.0", "13.2", None);
    security["cves"] = json!(["CVE-2026-0001"]);
    let mut s = cluster_with_releases(&[manifest("1.0.0", "13.1", None), resigned(security)]);
    run(&mut s, create(UPG, "1.1.0"));
    drive(&mut s, UPG, UpgradeState::Rolling);
    assert!(upgrade(&s, UPG).warnings().is_empty());
}

#[test]
fn the_reboot_pending_alarm_is_raised_seven_days_after_staging_and_only_once() {
    let mut s = staged_security_upgrade();
    let staged = staged_at(&s);
    assert!(advance_at(&mut s, staged + Duration::days(6)).is_empty());
    assert!(s.upgrades.alarms.is_empty());

    let events = advance_at(&mut s, staged + Duration::days(7));
    assert_eq!(raised(&events), reboot_alarms_for(&NODES));
    assert_eq!(events.len(), NODES.len(), "{events:?}");
    let active: Vec<&Alarm> = s
        .upgrades
        .alarms
        .values()
        .filter(|a| a.cleared_at.is_none())
        .collect();
    assert_eq!(active.len(), NODES.len(), "{active:?}");
    assert!(active.iter().all(|a| a.name == NODE_REBOOT_PENDING_ALARM));

    assert!(advance_at(&mut s, staged + Duration::days(8)).is_empty());
    assert_eq!(s.upgrades.alarms.len(), NODES.len());
    assert_eq!(state_of(&s, UPG), UpgradeState::Staged);
}

#[test]
fn a_nodes_reboot_clears_its_alarm_in_the_same_decision() {
    let (mut s, at) = staged_with_alarms();
    let later = at + Duration::hours(1);
    run(&mut s, apply_staged(UPG));
    run(&mut s, backup_report(UPG));
    advance_at(&mut s, later);
    let first = turn(&s, UPG);
    assert_eq!(first, NODES[0]);
    let d = run(
        &mut s,
        report_with(UPG, &first, "roll", "done", rebooted(later)),
    );
    assert!(
        matches!(d.events.first(), Some(DomainEvent::UpgradeNodeReported(_))),
        "{:?}",
        d.events
    );
    assert_eq!(d.events[1..], [alarm_cleared(UPG, &first)]);
    for a in s.upgrades.alarms.values() {
        assert_eq!(
            a.cleared_at.is_some(),
            a.node_id.as_deref() == Some(first.as_str()),
            "{a:?}"
        );
    }
    let waiting: Vec<String> = upgrade(&s, UPG)
        .warnings()
        .into_iter()
        .map(|w| w.node_id)
        .collect();
    assert_eq!(waiting, strings(&NODES[1..]));
}

#[test]
fn canceling_a_staged_upgrade_clears_its_reboot_alarms() {
    let (mut s, _) = staged_with_alarms();
    let d = run(&mut s, cancel(UPG));
    assert_eq!(
        d.events[0],
        DomainEvent::UpgradeCanceled(UpgradeRef {
            upgrade_id: UPG.into()
        })
    );
    assert_eq!(cleared_nodes(&d.events), node_set(&NODES));
    assert_eq!(d.events.len(), 1 + NODES.len(), "{:?}", d.events);
    assert!(s.upgrades.alarms.values().all(|a| a.cleared_at.is_some()));
    assert!(upgrade(&s, UPG).warnings().is_empty());
}

#[test]
fn an_upgrade_that_ends_clears_the_alarms_its_nodes_still_hold() {
    let (mut s, at) = staged_with_alarms();
    let later = at + Duration::hours(1);
    run(&mut s, apply_staged(UPG));
    run(&mut s, backup_report(UPG));
    advance_at(&mut s, later);
    run(
        &mut s,
        report_with(UPG, NODES[0], "roll", "done", rebooted(later)),
    );
    assert_eq!(advance_at(&mut s, later), [turn_started(UPG, NODES[1])]);
    let d = run(&mut s, report_to(UPG, NODES[1], "roll", "failed"));
    assert!(
        d.events
            .iter()
            .any(|e| matches!(e, DomainEvent::UpgradeFailed(_))),
        "{:?}",
        d.events
    );
    assert_eq!(cleared_nodes(&d.events), node_set(&NODES[1..]));
    assert!(s.upgrades.alarms.values().all(|a| a.cleared_at.is_some()));
}

#[test]
fn a_reported_reboot_is_decided_at_the_precision_the_log_keeps() {
    let mut s = upgrade_in(UpgradeState::Rolling);
    let first = turn(&s, UPG);
    let precise = t0() - Duration::nanoseconds(1_234_567);
    let d = run(
        &mut s,
        report_with(UPG, &first, "roll", "done", rebooted(precise)),
    );
    for e in &d.events {
        let enc = crate::stored::encode(e);
        let back = crate::stored::decode(enc.event_type, enc.schema_version, &enc.payload).unwrap();
        assert_eq!(&back, e, "what replay reads is what was decided");
    }
    // The same report again appends nothing.
    let again = run(
        &mut s,
        report_with(UPG, &first, "roll", "done", rebooted(precise)),
    );
    assert!(again.events.is_empty(), "{:?}", again.events);
}
