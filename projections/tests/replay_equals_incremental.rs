//! Property: replaying the log from zero gives exactly the read model rows
//! that were maintained incrementally, batch by batch, as the command path
//! writes them.

use std::collections::BTreeMap;

use proptest::prelude::*;
use stratum_domain::log::{EventMeta, Recorded, GENESIS_HASH};
use stratum_domain::membership::{MemberCommand, Raft};
use stratum_domain::state::stream_of;
use stratum_domain::stored::encode_at;
use stratum_domain::{Command, CommandContext};
use stratum_projections::{Changes, MemberDocs, ReadModels};

const NODES: [&str; 4] = ["n-a", "n-b", "n-c", "n-d"];
const ROLES: [&str; 4] = ["control", "compute", "storage", "hybrid"];
const STEPS: [&str; 4] = [
    "join/packages",
    "join/raft-patroni",
    "join/raft-openbao",
    "join/raft-ovn",
];

fn command() -> impl Strategy<Value = MemberCommand> {
    let node = (0..NODES.len()).prop_map(|i| NODES[i].to_owned());
    prop_oneof![
        (0..NODES.len(), 0..ROLES.len(), 0..6u8).prop_map(|(n, r, ip)| MemberCommand::Admit {
            node_id: Some(NODES[n].to_owned()),
            role: Some(ROLES[r].to_owned()),
            mgmt_ip: Some(format!("192.0.2.{ip}")),
            bindings: Default::default(),
            labels: [("topology.rack".to_owned(), "r1".to_owned())].into(),
        }),
        (node.clone(), 0..STEPS.len()).prop_map(|(node_id, s)| MemberCommand::ReportJoinProgress {
            node_id,
            step: Some(STEPS[s].to_owned()),
        }),
        node.clone()
            .prop_map(|node_id| MemberCommand::CompleteJoin { node_id }),
        (node.clone(), 0..STEPS.len()).prop_map(|(node_id, s)| MemberCommand::ReportJoinFailure {
            node_id,
            step: Some(STEPS[s].to_owned()),
            error: Some("boom".to_owned()),
        }),
        node.clone()
            .prop_map(|node_id| MemberCommand::RetryJoin { node_id }),
        (node.clone(), any::<bool>()).prop_map(|(node_id, force)| MemberCommand::Decommission {
            node_id,
            reason: Some("gone".to_owned()),
            force,
        }),
        (node.clone(), 0..40u64).prop_map(|(node_id, g)| MemberCommand::ReportAppliedGeneration {
            node_id,
            generation: Some(g),
        }),
        (node.clone(), 0..3usize).prop_map(|(node_id, r)| MemberCommand::RecordRaftRemoval {
            node_id,
            raft: Raft::ALL[r],
            already_gone: false,
            leader_moved: false,
            adapter: "record-only".to_owned(),
            settings: None,
        }),
        (node, 0..ROLES.len(), 0..6u8, any::<bool>()).prop_map(|(node_id, r, ip, force)| {
            MemberCommand::Update {
                node_id,
                role: Some(ROLES[r].to_owned()),
                mgmt_ip: Some(format!("192.0.2.{ip}")),
                bindings: None,
                labels: None,
                force,
            }
        }),
    ]
}

/// A membership command, or now and then the finalization of the log's
/// storage version (which changes member rows: record-only removals show
/// from it on).
fn any_command() -> impl Strategy<Value = Command> {
    prop_oneof![
        12 => command().prop_map(Command::Member),
        1 => Just(Command::Finalize(stratum_domain::storage::Finalize {
            level: None,
            settings: "5e".repeat(32),
            replicas: Vec::new(),
            unregistered: Vec::new(),
        })),
    ]
}

/// The rows as a table holds them after upserts.
#[derive(Debug, Default, PartialEq)]
struct Tables {
    members: BTreeMap<String, String>,
    join_requests: BTreeMap<String, String>,
    tokens: BTreeMap<String, String>,
    generation: u64,
}

impl Tables {
    fn write(&mut self, c: Changes) {
        for r in c.members {
            self.members.insert(r.node_id, r.doc);
        }
        for r in c.join_requests {
            self.join_requests.insert(r.request_id, r.doc);
        }
        for r in c.tokens {
            self.tokens.insert(r.token_id, r.doc);
        }
        if let Some(g) = c.generation {
            self.generation = g;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn replay_from_zero_equals_the_incremental_read_models(
        batches in prop::collection::vec(prop::collection::vec(any_command(), 1..6), 1..25)
    ) {
        let mut rm = ReadModels::default();
        let mut tables = Tables::default();
        let mut log: Vec<Recorded> = Vec::new();
        let mut prev = GENESIS_HASH;
        // The digest a server keeps between its summaries.
        let mut docs = MemberDocs::default();
        let t0 = stratum_domain::testing::t0();
        for batch in batches {
            for cmd in batch {
                let ctx = CommandContext {
                    now: t0 + chrono::Duration::seconds(log.len() as i64),
                    principal: "user/admin".into(),
                    held_policies: None,
                };
                let Ok(decision) = rm.state.decide(&cmd, &ctx) else { continue };
                for event in decision.events {
                    let stream_id = stream_of(&event);
                    // In the version the log's storage level writes, as the
                    // command path does.
                    let enc = encode_at(&event, rm.state.storage.level).unwrap();
                    let mut rec = Recorded {
                        position: log.len() as u64 + 1,
                        stream_version: rm.state.stream_version(&stream_id) + 1,
                        stream_id,
                        event_type: enc.event_type.to_owned(),
                        schema_version: enc.schema_version,
                        event_id: uuid::Uuid::from_u128(log.len() as u128),
                        occurred_at: ctx.now,
                        meta: EventMeta { principal: ctx.principal.clone(), ..Default::default() },
                        payload: enc.payload,
                        prev_hash: [0; 32],
                        hash: [0; 32],
                    };
                    rec.seal(prev);
                    prev = rec.hash;
                    rm.apply(&rec, &event);
                    log.push(rec);
                }
            }
            // One commit: the rows the batch changed.
            tables.write(rm.take_changes());
            // The kept documents give the digest rendered whole.
            prop_assert_eq!(docs.membership_digest(&rm), rm.membership_digest());
        }
        let replayed = ReadModels::replay(&log).unwrap();
        let mut rebuilt = Tables::default();
        rebuilt.write(replayed.all_rows());
        prop_assert_eq!(&rebuilt, &tables);
        prop_assert_eq!(replayed.state, rm.state);
    }
}
