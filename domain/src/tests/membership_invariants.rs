//! Streams, and a property test that no sequence of membership commands
//! breaks an invariant.

use proptest::prelude::*;

use super::support::membership::*;

// ---------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------

#[test]
fn commands_address_their_streams() {
    assert_eq!(admit("n-3", "control", "x").stream_id(), "member/n-3");
    assert_eq!(complete("n-3").stream_id(), "member/n-3");
    assert_eq!(removal("n-3", Raft::Ovn).stream_id(), "member/n-3");
    assert_eq!(request("jr-1", "n-3", "x").stream_id(), "joinrequest/jr-1");
    assert_eq!(approve("jr-1", "compute").stream_id(), "joinrequest/jr-1");
    assert_eq!(cmd(reject("jr-1", None)).stream_id(), "joinrequest/jr-1");
}

#[test]
fn each_event_bumps_its_members_stream_version() {
    let mut s = cluster_with(MemberState::Joining);
    assert_eq!(s.stream_version("member/n-3"), 1);
    run_by(&mut s, ADMIN, progress("n-3", "join/raft-patroni"));
    run_by(&mut s, ADMIN, fail("n-3", "join/raft-ovn", "x"));
    assert_eq!(s.stream_version("member/n-3"), 3);
    assert_eq!(member(&s, "n-3").version, 3);
    assert_eq!(member(&s, "n-3").last_position, s.position);
}

// ---------------------------------------------------------------------------
// Property: no sequence of commands breaks an invariant
// ---------------------------------------------------------------------------

const NODES: [&str; 4] = ["n-1", "n-2", "n-3", "n-4"];
const IPS: [&str; 4] = ["192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1"];
const ROLES: [&str; 4] = ["control", "compute", "storage", "hybrid"];
const STEPS: [&str; 8] = [
    "join/raft-patroni",
    "join/raft-patroni",
    "join/raft-openbao",
    "join/raft-openbao",
    "join/raft-ovn",
    "join/raft-ovn",
    "join/install",
    "bad-step",
];
const REQUESTS: [&str; 3] = ["jr-1", "jr-2", "jr-3"];
const PRINCIPALS: [&str; 3] = [ADMIN, ALICE, CLEANER];

fn pick(of: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(of).prop_map(String::from)
}

fn labels_strategy() -> impl Strategy<Value = StringMap> {
    prop_oneof![Just(StringMap::new()), Just(rack("r1")), Just(rack("r2"))]
}

fn admit_strategy() -> impl Strategy<Value = MemberCommand> {
    (pick(&NODES), pick(&ROLES), pick(&IPS), labels_strategy()).prop_map(
        |(node, role, ip, labels)| MemberCommand::Admit {
            node_id: Some(node),
            role: Some(role),
            mgmt_ip: Some(ip),
            bindings: StringMap::new(),
            labels,
        },
    )
}

fn command_strategy() -> impl Strategy<Value = MemberCommand> {
    prop_oneof![
        3 => admit_strategy(),
        2 => (pick(&NODES), pick(&STEPS)).prop_map(|(node_id, step)| {
            MemberCommand::ReportJoinProgress {
                node_id,
                step: Some(step),
            }
        }),
        2 => pick(&NODES).prop_map(|node_id| MemberCommand::CompleteJoin { node_id }),
        2 => (pick(&NODES), pick(&STEPS), prop::option::weighted(0.9, Just("boom".to_owned())))
            .prop_map(|(node_id, step, error)| MemberCommand::ReportJoinFailure {
                node_id,
                step: Some(step),
                error,
            }),
        2 => pick(&NODES).prop_map(|node_id| MemberCommand::RetryJoin { node_id }),
        2 => (pick(&NODES), prop::option::weighted(0.9, Just("retired".to_owned())), any::<bool>())
            .prop_map(|(node_id, reason, force)| MemberCommand::Decommission {
                node_id,
                reason,
                force,
            }),
        1 => (pick(&NODES), 0u64..16).prop_map(|(node_id, g)| {
            MemberCommand::ReportAppliedGeneration {
                node_id,
                generation: Some(g),
            }
        }),
        6 => (pick(&NODES), prop::sample::select(Raft::ALL.to_vec()), any::<bool>())
            .prop_map(|(node_id, raft, already_gone)| MemberCommand::RecordRaftRemoval {
                node_id,
                raft,
                already_gone,
                adapter: ADAPTER.into(),
                leader_moved: false,
                settings: None,
            }),
        1 => (pick(&REQUESTS), pick(&NODES), pick(&IPS), labels_strategy()).prop_map(
            |(request_id, node, ip, labels)| MemberCommand::RequestJoin {
                request_id,
                node_id: Some(node),
                mgmt_ip: Some(ip),
                labels,
                facts: "{}".into(),
            }
        ),
        1 => (pick(&REQUESTS), pick(&ROLES), prop::option::of(pick(&IPS))).prop_map(
            |(request_id, role, mgmt_ip)| MemberCommand::ApproveJoin {
                request_id,
                role: Some(role),
                mgmt_ip,
                bindings: None,
                labels: None,
            }
        ),
        1 => pick(&REQUESTS).prop_map(|request_id| MemberCommand::RejectJoin {
            request_id,
            reason: Some("no".into()),
        }),
    ]
}

/// What the property remembers across steps.
#[derive(Default)]
struct Seen {
    /// Every ordinal ever given, by node.
    ordinals: BTreeMap<String, u32>,
    max_ordinal: u32,
    decommissioned: BTreeSet<String>,
    last_topology: u64,
}

fn check_invariants(s: &State, seen: &mut Seen) -> Result<(), TestCaseError> {
    let members = &s.membership.members;

    // The generation is the position of the latest topology event.
    prop_assert!(s.membership.generation <= s.position);
    prop_assert_eq!(s.membership.generation, seen.last_topology);

    // Ordinals: a node keeps its ordinal; a new one is above every ordinal
    // ever given; no two members share one.
    for m in members.values() {
        match seen.ordinals.get(&m.node_id) {
            Some(o) => prop_assert_eq!(*o, m.ordinal, "{} changed ordinal", m.node_id),
            None => {
                prop_assert!(
                    m.ordinal > seen.max_ordinal,
                    "{} got ordinal {} after {}",
                    m.node_id,
                    m.ordinal,
                    seen.max_ordinal
                );
                seen.ordinals.insert(m.node_id.clone(), m.ordinal);
                seen.max_ordinal = m.ordinal;
            }
        }
    }
    for gone in members.values().filter(|m| {
        matches!(
            m.state,
            MemberState::Failed | MemberState::Removing | MemberState::Decommissioned
        )
    }) {
        let reusers: Vec<_> = members
            .values()
            .filter(|m| m.node_id != gone.node_id && m.ordinal == gone.ordinal)
            .map(|m| m.node_id.clone())
            .collect();
        prop_assert!(
            reusers.is_empty(),
            "ordinal {} of {} reused by {:?}",
            gone.ordinal,
            gone.node_id,
            reusers
        );
    }
    let ordinals: BTreeSet<u32> = members.values().map(|m| m.ordinal).collect();
    prop_assert_eq!(ordinals.len(), members.len());
    prop_assert_eq!(
        s.membership.max_ordinal,
        members.values().map(|m| m.ordinal).max().unwrap_or(0)
    );

    // Management addresses of members not decommissioned are unique.
    let mut ips = BTreeMap::new();
    for m in members
        .values()
        .filter(|m| m.state != MemberState::Decommissioned)
    {
        if let Some(other) = ips.insert(m.mgmt_ip.clone(), m.node_id.clone()) {
            prop_assert!(
                false,
                "{} and {} share mgmt ip {}",
                other,
                m.node_id,
                m.mgmt_ip
            );
        }
    }

    // Decommissioned is for good; removing always has a raft still to
    // remove; a failed member's cleanup is done exactly when nothing is
    // pending.
    for m in members.values() {
        if seen.decommissioned.contains(&m.node_id) {
            prop_assert_eq!(m.state, MemberState::Decommissioned);
        }
        match m.state {
            MemberState::Decommissioned => {
                seen.decommissioned.insert(m.node_id.clone());
                prop_assert!(m.decommissioned_by.is_some());
                prop_assert!(m.decommission_reason.is_some());
            }
            MemberState::Removing => {
                prop_assert!(
                    !m.pending_cleanup().is_empty(),
                    "{} stuck removing",
                    m.node_id
                )
            }
            MemberState::Failed => prop_assert_eq!(
                m.raft_cleanup_at.is_some(),
                m.pending_cleanup().is_empty(),
                "{}",
                m.node_id
            ),
            MemberState::Joining | MemberState::Active => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_sequence_of_commands_breaks_an_invariant(
        admissions in prop::collection::vec(admit_strategy(), 0..6),
        steps in prop::collection::vec(
            (command_strategy(), prop::sample::select(PRINCIPALS.to_vec())),
            1..80,
        )
    ) {
        let mut s = State::default();
        let mut seen = Seen::default();
        // Most sequences start with a few admissions, so that the commands
        // after them mostly find a member to act on.
        let steps = admissions
            .into_iter()
            .map(|c| (c, INSTALLER))
            .chain(steps);
        for (c, principal) in steps {
            let before = s.clone();
            match when_by(&s, principal, cmd(c.clone())) {
                Ok(d) => {
                    let start = s.position;
                    apply(&mut s, principal, &d.events);
                    prop_assert_eq!(s.position, start + d.events.len() as u64);
                    if let Some(i) = d.events.iter().rposition(DomainEvent::is_topology_change) {
                        seen.last_topology = start + i as u64 + 1;
                    }
                    if d.events.is_empty() {
                        prop_assert_eq!(&s, &before);
                    }
                }
                Err(r) => {
                    prop_assert!(r.code != ErrorCode::Internal, "{:?}", r);
                }
            }
            check_invariants(&s, &mut seen)?;
        }
    }
}
