//! The helpers of the upgrade tests: command builders, the clusters they
//! are decided in, and walking an upgrade on. One meaning per name: `run`
//! decides and appends as the admin, `step` takes the one action that
//! moves an upgrade on, `drive` steps until a state, `upgrade_in` is the
//! cluster with [`UPG`] in a state; `report` reports a node of [`UPG`] and
//! `report_to` one of any upgrade. For a given/when/then, `walked` is the
//! history `drive` would append (`walked_on` folds it into a state) and
//! `prechecking` the cluster with [`UPG`] waiting for its precheck tick.

pub use super::*;
pub use crate::membership::{Role, RACK_LABEL};
pub use crate::release::{canonical, sign, Component, ComponentKind};
pub use crate::upgrade::*;

pub const DRIVER: &str = crate::iam::SERVICE_PRINCIPAL;
pub const UPG: &str = "upg-0000000001";
pub const UPG2: &str = "upg-0000000002";
pub const UNKNOWN: &str = "upg-zzzzzzzzzz";

/// The members, in ordinal order: not their names' order, so a roll that
/// went by name (or by map order) would show.
pub const NODES: [&str; 3] = ["n-charlie", "n-alpha", "n-bravo"];

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

pub fn create_with(id: &str, target: &str, mode: &str) -> UpgradeCommand {
    UpgradeCommand::Create {
        upgrade_id: id.into(),
        target_release: Some(target.into()),
        mode: Some(mode.into()),
        backup_location: Some("node".into()),
        backup_encrypted: Some(false),
        config: UpgradeConfig::default(),
    }
}

pub fn create(id: &str, target: &str) -> UpgradeCommand {
    create_with(id, target, "now")
}

pub fn report_full(
    id: &str,
    node: &str,
    phase: &str,
    state: &str,
    message: Option<&str>,
) -> UpgradeCommand {
    UpgradeCommand::ReportNode {
        upgrade_id: id.into(),
        node_id: node.into(),
        phase: Some(phase.into()),
        state: Some(state.into()),
        message: message.map(Into::into),
        host_steps: None,
        rebooted_at: None,
        instances: None,
        host_state: None,
        running_instances: None,
    }
}

pub fn report(node: &str, phase: &str, state: &str) -> UpgradeCommand {
    report_full(UPG, node, phase, state, None)
}

pub fn backup_report(id: &str) -> UpgradeCommand {
    UpgradeCommand::ReportBackup {
        upgrade_id: id.into(),
        location: Some("node".into()),
        bundle: Some(format!("/var/lib/stratum/backup/{id}.tar")),
        encrypted: Some(false),
    }
}

pub fn cancel(id: &str) -> UpgradeCommand {
    UpgradeCommand::Cancel {
        upgrade_id: id.into(),
    }
}

pub fn apply_staged(id: &str) -> UpgradeCommand {
    UpgradeCommand::Apply {
        upgrade_id: id.into(),
    }
}

pub fn rollback(id: &str, new_id: &str, restore_backup: bool) -> UpgradeCommand {
    UpgradeCommand::Rollback {
        upgrade_id: id.into(),
        new_upgrade_id: new_id.into(),
        restore_backup,
        config: UpgradeConfig::default(),
    }
}

/// A plan's steps as text: `roll n-1` for a node's step.
pub fn step_names(p: &Plan) -> Vec<String> {
    p.steps
        .iter()
        .map(|s| match &s.node_id {
            Some(n) => format!("{} {n}", s.name),
            None => s.name.clone(),
        })
        .collect()
}

pub fn acknowledge(id: &str) -> UpgradeCommand {
    UpgradeCommand::Acknowledge {
        upgrade_id: id.into(),
    }
}

pub fn admit_member(node: &str, ip: &str) -> Command {
    Command::Member(MemberCommand::Admit {
        node_id: Some(node.into()),
        role: Some("control".into()),
        mgmt_ip: Some(ip.into()),
        bindings: StringMap::new(),
        labels: [(RACK_LABEL.to_owned(), "r1".to_owned())].into(),
    })
}

pub fn create_configured(
    id: &str,
    target: &str,
    mode: &str,
    config: UpgradeConfig,
) -> UpgradeCommand {
    UpgradeCommand::Create {
        upgrade_id: id.into(),
        target_release: Some(target.into()),
        mode: Some(mode.into()),
        backup_location: Some("node".into()),
        backup_encrypted: Some(false),
        config,
    }
}

/// The optional parts of a node report.
#[derive(Default)]
pub struct Extra {
    pub host_steps: Option<Vec<HostStep>>,
    pub rebooted_at: Option<DateTime<Utc>>,
    pub instances: Option<Vec<String>>,
    pub host_state: Option<String>,
    pub running_instances: Option<Vec<String>>,
}

pub fn report_with(id: &str, node: &str, phase: &str, state: &str, x: Extra) -> UpgradeCommand {
    UpgradeCommand::ReportNode {
        upgrade_id: id.into(),
        node_id: node.into(),
        phase: Some(phase.into()),
        state: Some(state.into()),
        message: None,
        host_steps: x.host_steps,
        rebooted_at: x.rebooted_at,
        instances: x.instances,
        host_state: x.host_state,
        running_instances: x.running_instances,
    }
}

pub fn report_to(id: &str, node: &str, phase: &str, state: &str) -> UpgradeCommand {
    report_with(id, node, phase, state, Extra::default())
}

pub fn rebooted(at: DateTime<Utc>) -> Extra {
    Extra {
        rebooted_at: Some(at),
        ..Default::default()
    }
}

pub fn report_facts(node: &str, facts: NodeFacts) -> UpgradeCommand {
    UpgradeCommand::ReportFacts {
        node_id: node.into(),
        facts,
    }
}

pub fn alarm_cleared(id: &str, node_id: &str) -> DomainEvent {
    DomainEvent::AlarmCleared(AlarmCleared {
        name: NODE_REBOOT_PENDING_ALARM.into(),
        node_id: Some(node_id.into()),
        upgrade_id: Some(id.into()),
    })
}

/// The nodes whose reboot alarm of [`UPG`] `events` clear (and no other
/// alarm is cleared).
pub fn cleared_nodes(events: &[DomainEvent]) -> BTreeSet<String> {
    events
        .iter()
        .filter_map(|e| match e {
            DomainEvent::AlarmCleared(a) => {
                assert_eq!(a.name, NODE_REBOOT_PENDING_ALARM, "{a:?}");
                assert_eq!(a.upgrade_id.as_deref(), Some(UPG), "{a:?}");
                Some(a.node_id.clone().unwrap_or_default())
            }
            _ => None,
        })
        .collect()
}

pub fn node_set(nodes: &[&str]) -> BTreeSet<String> {
    nodes.iter().map(|n| (*n).to_owned()).collect()
}

pub fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|x| (*x).to_owned()).collect()
}

pub fn host_step_names(n: &UpgradeNode) -> Vec<&str> {
    n.host_steps.iter().map(|h| h.name.as_str()).collect()
}

/// The plan event of a decision.
pub fn planned(d: &Decision) -> &UpgradePlanned {
    d.events
        .iter()
        .find_map(|e| match e {
            DomainEvent::UpgradePlanned(p) => Some(p),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no UpgradePlanned in {d:?}"))
}

pub fn image(name: &str, version: &str, digest: char) -> Component {
    Component {
        kind: ComponentKind::Image,
        name: name.into(),
        version: version.into(),
        digest: format!("sha256:{}", digest.to_string().repeat(64)),
        epoch: 0,
        release: String::new(),
        arch: String::new(),
    }
}

/// Whether `message` states `bytes` as a number: plain or grouped digits
/// (`500000000`, `500,000,000`), or in MB, GB, MiB or GiB (`500 MB`,
/// `0.5 GB`, `476.8 MiB`), not as part of a larger number.
pub fn names_amount(message: &str, bytes: u64) -> bool {
    let digits = bytes.to_string();
    let grouped = |sep: char| {
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(sep);
            }
            out.push(c);
        }
        out
    };
    let mut forms = vec![digits.clone(), grouped(','), grouped('_'), grouped(' ')];
    for (unit, size) in [
        ("MB", 1e6),
        ("GB", 1e9),
        ("MiB", 1_048_576.0),
        ("GiB", 1_073_741_824.0),
    ] {
        let v = bytes as f64 / size;
        for decimals in 0usize..=2 {
            let text = format!("{v:.decimals$}");
            let back: f64 = text.parse().unwrap_or(0.0);
            if (back - v).abs() <= v * 0.05 {
                forms.push(format!("{text} {unit}"));
                forms.push(format!("{text}{unit}"));
            }
        }
    }
    forms.iter().any(|form| {
        message.match_indices(form.as_str()).any(|(at, _)| {
            let before = message[..at].chars().next_back();
            let mut after = message[at + form.len()..].chars();
            let starts_clean = before.is_none_or(|c| !c.is_ascii_digit() && c != '.');
            let ends_clean = !form.ends_with(|c: char| c.is_ascii_digit())
                || match after.next() {
                    Some(c) if c.is_ascii_digit() => false,
                    Some('.' | ',' | '_') => after.next().is_none_or(|c| !c.is_ascii_digit()),
                    _ => true,
                };
            starts_clean && ends_clean
        })
    })
}

// ---------------------------------------------------------------------------
// Harness helpers
// ---------------------------------------------------------------------------

/// The driver's tick at `now` (the clock is an input of `decide`): the
/// step that is due, appended.
pub fn advance_at(s: &mut State, now: DateTime<Utc>) -> Vec<DomainEvent> {
    let ctx = CommandContext {
        now,
        principal: DRIVER.to_owned(),
        held_policies: None,
    };
    let d = s
        .decide(&cmd(UpgradeCommand::Advance), &ctx)
        .unwrap_or_else(|r| panic!("Advance at {now} was refused: {r:?}"));
    apply(s, DRIVER, &d.events);
    d.events
}

/// The upgrade driver's tick at [`t0`]: the step that is due, appended.
pub fn advance(s: &mut State) -> Vec<DomainEvent> {
    advance_at(s, t0())
}

pub fn assert_state_conflict(r: &Refusal, state: &str) {
    assert_eq!(r.code, ErrorCode::UpgradeStateConflict, "{r:?}");
    assert_eq!(r.details, Some(json!({ "state": state })), "{r:?}");
}

#[track_caller]
pub fn assert_upgrade_unchanged(d: &Decision, id: &str) {
    assert_unchanged(d, Subject::Upgrade(id.into()));
}

pub fn upgrade<'a>(s: &'a State, id: &str) -> &'a Upgrade {
    s.upgrades
        .upgrades
        .get(id)
        .unwrap_or_else(|| panic!("no upgrade {id}"))
}

pub fn state_of(s: &State, id: &str) -> UpgradeState {
    upgrade(s, id).state
}

pub fn node<'a>(s: &'a State, id: &str, node_id: &str) -> &'a UpgradeNode {
    upgrade(s, id)
        .nodes
        .iter()
        .find(|n| n.node_id == node_id)
        .unwrap_or_else(|| panic!("{node_id} is not in upgrade {id}"))
}

/// The node whose roll turn it is.
pub fn turn(s: &State, id: &str) -> String {
    let u = upgrade(s, id);
    let i = u.turn.unwrap_or_else(|| panic!("no turn in {u:?}"));
    u.nodes[i].node_id.clone()
}

pub fn precheck<'a>(checks: &'a [Precheck], name: &str) -> &'a Precheck {
    checks
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no precheck {name} in {checks:?}"))
}

pub fn moved(id: &str, from: UpgradeState, to: UpgradeState) -> DomainEvent {
    DomainEvent::UpgradeStateChanged(UpgradeStateChanged {
        upgrade_id: id.into(),
        from,
        to,
    })
}

pub fn turn_started(id: &str, node_id: &str) -> DomainEvent {
    DomainEvent::UpgradeNodeTurnStarted(UpgradeNodeTurnStarted {
        upgrade_id: id.into(),
        node_id: node_id.into(),
    })
}

/// The same manifest, signed again after a change.
pub fn resigned(mut m: Value) -> Value {
    sign(&mut m, RELEASE_KEY_ID, &release_key());
    m
}

// ---------------------------------------------------------------------------
// Givens
// ---------------------------------------------------------------------------

/// Every member reports the cluster's generation: none is lagging.
pub fn make_current(s: &mut State) {
    let generation = s.membership.generation;
    let reports: Vec<DomainEvent> = s
        .membership
        .members
        .keys()
        .map(|n| DomainEvent::AppliedGenerationReported {
            node_id: n.clone(),
            generation,
        })
        .collect();
    apply(s, ADMIN, &reports);
}

/// Three active, current control members (ordinals 1, 2, 3 as [`NODES`]),
/// the releases registered by `registrations`, and 1.0.0 running.
pub fn cluster_with(registrations: &[DomainEvent]) -> State {
    let mut s = State::default();
    for (i, n) in NODES.iter().enumerate() {
        apply(
            &mut s,
            ADMIN,
            &[
                admitted(n, Role::Control, i as u32 + 1),
                DomainEvent::MemberJoinCompleted {
                    node_id: (*n).into(),
                },
            ],
        );
    }
    make_current(&mut s);
    apply(&mut s, ADMIN, registrations);
    apply(
        &mut s,
        ADMIN,
        &[DomainEvent::RunningReleaseSet(RunningReleaseSet {
            version: "1.0.0".into(),
        })],
    );
    s
}

/// Three active, current control members, these releases registered, and
/// 1.0.0 running.
pub fn cluster_with_releases(releases: &[Value]) -> State {
    let registrations: Vec<DomainEvent> = releases.iter().map(registered).collect();
    cluster_with(&registrations)
}

/// Releases 1.0.0 (running) and 1.1.0, which changes the `api` image only.
pub fn cluster() -> State {
    cluster_with_releases(&[
        manifest("1.0.0", "13.1", None),
        manifest("1.1.0", "13.1", None),
    ])
}

/// Takes the one action that moves upgrade `id` on from where it is (the
/// reports it waits for, or apply), then lets the driver advance.
pub fn step(s: &mut State, id: &str) {
    match state_of(s, id) {
        UpgradeState::Planned | UpgradeState::Prechecking => {}
        UpgradeState::Fetching => {
            for n in NODES {
                run(s, report_full(id, n, "fetch", "done", None));
            }
        }
        UpgradeState::Staged => {
            run(s, apply_staged(id));
            return;
        }
        UpgradeState::BackingUp => {
            run(s, backup_report(id));
        }
        UpgradeState::Rolling => {
            let n = turn(s, id);
            run(s, report_full(id, &n, "roll", "done", None));
        }
        UpgradeState::Verifying => {
            for n in NODES {
                run(s, report_full(id, n, "verify", "done", None));
            }
        }
        end => panic!("upgrade {id} is {end:?}: it moves no more"),
    }
    advance(s);
}

/// Walks upgrade `id` on until it is in `to`.
pub fn drive(s: &mut State, id: &str, to: UpgradeState) {
    for _ in 0..20 {
        if state_of(s, id) == to {
            return;
        }
        step(s, id);
    }
    panic!("upgrade {id} never reached {to:?}: {:?}", upgrade(s, id));
}

/// The cluster with upgrade [`UPG`] to 1.1.0 in `target`: a stage-only
/// upgrade for staged, one whose node failed its fetch for failed, and one
/// canceled while planned for canceled.
pub fn upgrade_in(target: UpgradeState) -> State {
    let mut s = cluster();
    match target {
        UpgradeState::Staged => {
            run(&mut s, create_with(UPG, "1.1.0", "stage-only"));
            drive(&mut s, UPG, UpgradeState::Staged);
        }
        UpgradeState::Failed => {
            run(&mut s, create(UPG, "1.1.0"));
            drive(&mut s, UPG, UpgradeState::Fetching);
            run(
                &mut s,
                report_full(UPG, NODES[1], "fetch", "failed", Some("disk full")),
            );
        }
        UpgradeState::Canceled => {
            run(&mut s, create(UPG, "1.1.0"));
            run(&mut s, cancel(UPG));
        }
        other => {
            run(&mut s, create(UPG, "1.1.0"));
            drive(&mut s, UPG, other);
        }
    }
    assert_eq!(state_of(&s, UPG), target, "setup of {target:?}");
    s
}

/// The prechecks an upgrade to `target` finds in `s` (the upgrade is
/// created and advanced through prechecking).
pub fn prechecks_in(mut s: State, target: &str) -> (State, Vec<Precheck>) {
    run(&mut s, create(UPG, target));
    advance(&mut s);
    advance(&mut s);
    let checks = upgrade(&s, UPG).prechecks.clone();
    (s, checks)
}

/// What [`report_full`] of [`UPG`] records: `node` in `phase`, `state`,
/// with `message`, and none of a report's optional parts.
pub fn node_reported(node: &str, phase: Phase, state: NodeStatus, message: &str) -> DomainEvent {
    DomainEvent::UpgradeNodeReported(UpgradeNodeReported {
        upgrade_id: UPG.into(),
        node_id: node.into(),
        phase,
        state,
        message: message.into(),
        host_steps: None,
        rebooted_at: None,
        instances: None,
        host_state: None,
        running_instances: None,
    })
}

/// The driver's tick.
pub const ADVANCE: UpgradeCommand = UpgradeCommand::Advance;

/// The history of walking upgrade `id` on from where it is in `s` until it
/// is in `to`, as [`drive`] walks it: the events each [`step`] appends,
/// with who appended them, for a `given(...).and_history(...)`.
pub fn walked(s: &State, id: &str, to: UpgradeState) -> Vec<Appended> {
    let mut s = s.clone();
    let mut out = Vec::new();
    for _ in 0..20 {
        if state_of(&s, id) == to {
            return out;
        }
        let mut steps: Vec<(&'static str, Command)> = match state_of(&s, id) {
            UpgradeState::Planned | UpgradeState::Prechecking => vec![],
            UpgradeState::Fetching => NODES
                .iter()
                .map(|n| (ADMIN, cmd(report_full(id, n, "fetch", "done", None))))
                .collect(),
            UpgradeState::Staged => vec![(ADMIN, cmd(apply_staged(id)))],
            UpgradeState::BackingUp => vec![(ADMIN, cmd(backup_report(id)))],
            UpgradeState::Rolling => {
                let n = turn(&s, id);
                vec![(ADMIN, cmd(report_full(id, &n, "roll", "done", None)))]
            }
            UpgradeState::Verifying => NODES
                .iter()
                .map(|n| (ADMIN, cmd(report_full(id, n, "verify", "done", None))))
                .collect(),
            end => panic!("upgrade {id} is {end:?}: it moves no more"),
        };
        if state_of(&s, id) != UpgradeState::Staged {
            steps.push((DRIVER, cmd(ADVANCE)));
        }
        let h = history(&s, &steps);
        s = s.and_history(&h);
        out.extend(h);
    }
    panic!("upgrade {id} never reached {to:?}: {:?}", upgrade(&s, id));
}

/// `s` and the history of walking upgrade `id` on until it is in `to`
/// ([`walked`]), folded.
pub fn walked_on(s: State, id: &str, to: UpgradeState) -> State {
    let h = walked(&s, id, to);
    s.and_history(&h)
}

/// `s` with upgrade [`UPG`] to `target` created and taken by the driver
/// into prechecking, folded from the events that decides: the given of a
/// precheck, which the driver's next tick runs.
pub fn prechecking(s: State, target: &str) -> State {
    let h = history(
        &s,
        &[(ADMIN, cmd(create(UPG, target))), (DRIVER, cmd(ADVANCE))],
    );
    s.and_history(&h)
}

/// The prechecks a decision records (its `UpgradePrechecked`).
pub fn prechecks_of(d: &Decision) -> &[Precheck] {
    d.events
        .iter()
        .find_map(|e| match e {
            DomainEvent::UpgradePrechecked(p) => Some(p.prechecks.as_slice()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no UpgradePrechecked in {d:?}"))
}

/// What [`report_facts`] records.
pub fn facts_reported(node: &str, facts: NodeFacts) -> DomainEvent {
    DomainEvent::NodeFactsReported(NodeFactsReported {
        node_id: node.into(),
        facts,
    })
}
