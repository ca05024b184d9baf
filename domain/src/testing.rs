//! Test support: a given/when/then harness over the pure domain, and one
//! example of every event type (for codec tests and golden fixtures).

use chrono::{DateTime, TimeZone, Utc};

use crate::error::Refusal;
use crate::event::{
    DomainEvent, JoinRequested, MemberAdmitted, MemberJoinFailed, MemberRemovalStarted,
};
use crate::membership::{Raft, Role};
use crate::state::{stream_of, Command, CommandContext, Decision, EventCtx, State};

/// A fixed instant, so tests never read the clock.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

/// Folds `events` (all by `principal`) into a fresh state, positions 1..n.
pub fn given_by(principal: &str, events: &[DomainEvent]) -> State {
    let mut state = State::default();
    apply(&mut state, principal, events);
    state
}

pub fn given(events: &[DomainEvent]) -> State {
    given_by("user/admin", events)
}

/// Folds more events into `state`, as if appended after its position.
pub fn apply(state: &mut State, principal: &str, events: &[DomainEvent]) {
    for e in events {
        let stream = stream_of(e);
        let ctx = EventCtx {
            position: state.position + 1,
            stream_version: state.stream_version(&stream) + 1,
            occurred_at: t0() + chrono::Duration::seconds(state.position as i64 + 1),
            principal,
        };
        state.evolve(&ctx, &stream, e);
    }
}

pub fn when(state: &State, cmd: Command) -> Result<Decision, Refusal> {
    when_by(state, "user/admin", cmd)
}

pub fn when_by(state: &State, principal: &str, cmd: Command) -> Result<Decision, Refusal> {
    state.decide(
        &cmd,
        &CommandContext {
            now: t0(),
            principal: principal.to_owned(),
            held_policies: None,
        },
    )
}

/// The refusal of `cmd`; panics if it is decided.
pub fn refused(state: &State, cmd: Command) -> Refusal {
    match when(state, cmd.clone()) {
        Ok(d) => panic!("{cmd:?} was decided, not refused: {d:?}"),
        Err(r) => r,
    }
}

/// The fields a refusal names, in order.
pub fn fields(r: &Refusal) -> Vec<&str> {
    r.field_errors.iter().map(|f| f.field.as_str()).collect()
}

/// The message of a refusal's finding at `field`.
pub fn message_of<'a>(r: &'a Refusal, field: &str) -> &'a str {
    r.field_errors
        .iter()
        .find(|f| f.field == field)
        .map(|f| f.message.as_str())
        .unwrap_or_else(|| panic!("no field error at {field}: {r:?}"))
}

/// An `INVALID_INPUT` refusal naming exactly `expected`, in order.
pub fn assert_invalid(r: &Refusal, expected: &[&str]) {
    assert_eq!(r.code, crate::ErrorCode::InvalidInput, "{r:?}");
    assert_eq!(fields(r), expected, "{r:?}");
}

/// Decides `cmd` as a caller holding only `held` policies.
pub fn when_holding(
    state: &State,
    principal: &str,
    held: &[&str],
    cmd: Command,
) -> Result<Decision, Refusal> {
    state.decide(
        &cmd,
        &CommandContext {
            now: t0(),
            principal: principal.to_owned(),
            held_policies: Some(held.iter().map(|p| (*p).to_owned()).collect()),
        },
    )
}

pub fn admitted(node_id: &str, role: Role, ordinal: u32) -> DomainEvent {
    DomainEvent::MemberAdmitted(MemberAdmitted {
        node_id: node_id.into(),
        role,
        mgmt_ip: format!("192.0.2.{}", 10 + ordinal),
        bindings: Default::default(),
        labels: [("topology.rack".to_owned(), "r1".to_owned())].into(),
        ordinal,
        join_request: None,
    })
}

/// One example of every event type, in the newest shape.
pub fn one_of_each() -> Vec<DomainEvent> {
    let n = || "n-msst0002".to_owned();
    let mut events = vec![
        admitted("n-msst0002", Role::Hybrid, 2),
        DomainEvent::JoinProgressReported {
            node_id: n(),
            step: "join/raft-patroni".into(),
        },
        DomainEvent::MemberJoinCompleted { node_id: n() },
        DomainEvent::MemberJoinFailed(MemberJoinFailed {
            node_id: n(),
            step: "join/raft-openbao".into(),
            error: "connection refused".into(),
            rafts: vec![Raft::Patroni, Raft::Openbao],
        }),
        DomainEvent::RaftPeerRemoved {
            node_id: n(),
            raft: Raft::Ovn,
            already_gone: true,
            adapter: "ovn-kick".into(),
            leader_moved: true,
            settings: Some("5e".repeat(32)),
        },
        DomainEvent::RaftCleanupCompleted { node_id: n() },
        DomainEvent::RaftPeerReturned(crate::event::RaftPeerReturned {
            node_id: n(),
            raft: Raft::Openbao,
            removed_position: 41,
            removed_at: chrono::DateTime::from_timestamp_micros(1_780_000_000_123_456).unwrap(),
        }),
        DomainEvent::MemberJoinRetried { node_id: n() },
        DomainEvent::MemberRemovalStarted(MemberRemovalStarted {
            node_id: n(),
            reason: "disk failed".into(),
            forced: false,
            rafts: vec![Raft::Patroni, Raft::Openbao, Raft::Ovn],
        }),
        DomainEvent::MemberDecommissioned {
            node_id: n(),
            reason: "disk failed".into(),
            by: "user/alice".into(),
        },
        DomainEvent::AppliedGenerationReported {
            node_id: n(),
            generation: 42,
        },
        DomainEvent::MemberUpdated(crate::event::MemberUpdated {
            node_id: n(),
            role: Role::Compute,
            mgmt_ip: "192.0.2.22".into(),
            bindings: [("storage".to_owned(), "10.1.0.22".to_owned())].into(),
            labels: [("topology.rack".to_owned(), "r2".to_owned())].into(),
            forced: true,
            rafts: vec![Raft::Patroni, Raft::Ovn],
        }),
        DomainEvent::JoinRequested(JoinRequested {
            request_id: "jr-0000000001".into(),
            node_id: "n-msst0003".into(),
            mgmt_ip: "192.0.2.13".into(),
            labels: [("topology.rack".to_owned(), "r2".to_owned())].into(),
            facts: r#"{"cpus":8}"#.into(),
        }),
        DomainEvent::JoinRequestApproved {
            request_id: "jr-0000000001".into(),
            node_id: "n-msst0003".into(),
        },
        DomainEvent::JoinRequestRejected {
            request_id: "jr-0000000002".into(),
            reason: "unknown hardware".into(),
        },
        DomainEvent::TokenIssued(crate::iam::TokenIssued {
            token_id: "tok-0000000001".into(),
            principal: "user/admin".into(),
            verifier: crate::iam::SecretVerifier::Sha256([7; 32]),
            policies: vec!["AdministratorAccess".into()],
            expires_at: Some(t0() + chrono::Duration::days(30)),
        }),
    ];
    events.extend(upgrade_examples());
    events.extend([
        DomainEvent::TokenRevoked(crate::iam::TokenRevoked {
            token_id: "tok-0000000001".into(),
        }),
        DomainEvent::PolicyCreated(crate::iam::PolicyCreated {
            name: "UpgradeViewers".into(),
            document: r#"{"statements":[{"actions":["upgrade:Get*"],"effect":"Allow"}]}"#.into(),
        }),
        DomainEvent::PrincipalPoliciesSet(crate::iam::PrincipalPoliciesSet {
            principal: "user/alice".into(),
            policies: vec!["ReadOnly".into(), "UpgradeViewers".into()],
        }),
        DomainEvent::ResourcePolicySet(crate::iam::ResourcePolicySet {
            resource: "member/n-msst0002".into(),
            document: r#"{"statements":[{"actions":["cluster:DecommissionMember"],"effect":"Deny","principals":["user/bob"]}]}"#.into(),
        }),
    ]);
    events
}

/// The key id of the test release key.
pub const RELEASE_KEY_ID: &str = "test-release-key";

/// A fixed Ed25519 key for signing test releases (never a real key).
pub fn release_key() -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[42; 32])
}

/// `STRATUM_RELEASE_KEYS` text trusting [`release_key`].
pub fn release_keys_spec() -> String {
    use base64::Engine;
    format!(
        "{RELEASE_KEY_ID}={}",
        base64::engine::general_purpose::STANDARD.encode(release_key().verifying_key().to_bytes())
    )
}

/// The keys that trust [`release_key`].
pub fn release_keys() -> crate::release::TrustedKeys {
    crate::release::TrustedKeys::parse(&release_keys_spec()).expect("the test key parses")
}

/// Signs `manifest` (again, after a change a test made) with the test key.
pub fn resign(manifest: &mut serde_json::Value) {
    crate::release::sign(manifest, RELEASE_KEY_ID, &release_key());
}

/// `manifest` as the release tooling hands it over: signed with the test
/// key (again, after any change a test made), and checked.
pub fn signed(mut manifest: serde_json::Value) -> crate::release::SignedManifest {
    resign(&mut manifest);
    crate::release::SignedManifest::verify(manifest, &release_keys())
}

/// A signed manifest of `version`: one image `api` whose digest is the
/// version's, one package if `package` is set, and the OS `os`.
pub fn manifest(version: &str, os: &str, package: Option<&str>) -> serde_json::Value {
    let digest = format!(
        "sha256:{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(version.as_bytes()))
    );
    let mut components = vec![serde_json::json!({
        "kind": "image", "name": "api", "version": version, "digest": digest,
    })];
    if let Some(p) = package {
        components.push(serde_json::json!({
            "kind": "package", "name": "stratum-host", "epoch": 0, "version": p,
            "release": "1", "arch": "x86_64",
        }));
    }
    let mut m = serde_json::json!({
        "version": version,
        "components": components,
        "os": {"version": os, "kernel": "6.12", "kernelArgs": []},
        "requiredStops": [],
        "knownBroken": [],
        "cves": [],
    });
    resign(&mut m);
    m
}

/// The event registering `manifest`.
pub fn registered(manifest: &serde_json::Value) -> DomainEvent {
    DomainEvent::ReleaseRegistered(crate::upgrade::ReleaseRegistered {
        version: manifest["version"].as_str().unwrap_or_default().to_owned(),
        manifest: crate::release::canonical(manifest),
        source: crate::upgrade::ReleaseSource::Manifest,
    })
}

/// One example of every upgrade event.
pub fn upgrade_examples() -> Vec<DomainEvent> {
    use crate::release::ComponentChange;
    use crate::upgrade::*;
    let id = || "upg-0123456789".to_owned();
    let m = manifest("1.1.0", "13.1", Some("1.1"));
    vec![
        DomainEvent::ReleaseRegistered(ReleaseRegistered {
            version: "1.1.0".into(),
            manifest: crate::release::canonical(&m),
            source: ReleaseSource::Media,
        }),
        DomainEvent::RunningReleaseSet(RunningReleaseSet {
            version: "1.0.0".into(),
        }),
        DomainEvent::UpgradePlanned(UpgradePlanned {
            upgrade_id: id(),
            mode: UpgradeMode::StageOnly,
            target_release: "1.1.0".into(),
            from_release: "1.0.0".into(),
            backup_location: BackupLocation::Target,
            backup_encrypted: true,
            backup_target: Some("s3://backups.example/stratum".into()),
            rollback_of: Some("upg-abcdefghij".into()),
            restore_backup: true,
            plan: Plan {
                summary: "Upgrade from 1.0.0 to 1.1.0 on 1 node.".into(),
                signed_by: RELEASE_KEY_ID.into(),
                source_kind: ReleaseSource::Media,
                kind: NodeKind::Os,
                reboot_reason: Some("security".into()),
                cves: vec!["CVE-2026-0001".into()],
                component_changes: vec![ComponentChange {
                    kind: "image".into(),
                    name: "api".into(),
                    from: "1.0.0@aaaaaaaaaaaa".into(),
                    to: "1.1.0@bbbbbbbbbbbb".into(),
                    from_id: "sha256:aa".into(),
                    to_id: "sha256:bb".into(),
                }],
                components_from: "release".into(),
                nodes: vec![PlanNode {
                    node_id: "n-msst0002".into(),
                    ordinal: 2,
                    kind: NodeKind::Os,
                    restarts: vec!["api".into(), "node (reboot)".into()],
                    changes: vec!["os".into(), "kernel".into()],
                    fetched: true,
                }],
                // The v1 example's steps, as objects.
                steps: vec![
                    PlanStep::new("prechecks", StepKind::Cluster),
                    PlanStep::new("fetch", StepKind::EveryNode),
                ],
                previous_os_bootable: true,
                restore_required: true,
                settle_seconds: 60,
            },
        }),
        DomainEvent::UpgradeStateChanged(UpgradeStateChanged {
            upgrade_id: id(),
            from: UpgradeState::Staged,
            to: UpgradeState::BackingUp,
        }),
        DomainEvent::UpgradePrechecked(UpgradePrechecked {
            upgrade_id: id(),
            prechecks: vec![Precheck {
                name: "upgrade-path".into(),
                passed: false,
                message: "upgrade to 1.0.5 first".into(),
            }],
        }),
        DomainEvent::UpgradeNodeTurnStarted(UpgradeNodeTurnStarted {
            upgrade_id: id(),
            node_id: "n-msst0002".into(),
        }),
        DomainEvent::UpgradeNodeReported(UpgradeNodeReported {
            upgrade_id: id(),
            node_id: "n-msst0002".into(),
            phase: Phase::Roll,
            state: NodeStatus::Done,
            message: "rolled".into(),
            host_steps: Some(
                host_steps(NodeKind::Host, true)
                    .into_iter()
                    .map(|mut h| {
                        h.pending_units = vec!["nginx.service".into()];
                        h.restarted_units = vec!["stratum-api.service".into()];
                        h.stopped_units = vec!["patroni.service".into()];
                        h.switched_sysexts = vec!["stratum-host".into()];
                        h
                    })
                    .collect(),
            ),
            rebooted_at: Some(t0()),
            instances: Some(vec!["vm-1".into()]),
            host_state: Some("rendering".into()),
            running_instances: Some(vec!["vm-1".into()]),
        }),
        DomainEvent::UpgradeBackupReported(UpgradeBackupReported {
            upgrade_id: id(),
            location: BackupLocation::Node,
            bundle: "/var/lib/stratum/backup/upg-0123456789.tar".into(),
            encrypted: false,
        }),
        DomainEvent::UpgradeFailed(UpgradeFailed {
            upgrade_id: id(),
            reason: "n-msst0002 failed verify: api did not start".into(),
        }),
        DomainEvent::UpgradeCompleted(UpgradeCompleted {
            upgrade_id: id(),
            release: "1.1.0".into(),
        }),
        DomainEvent::UpgradeCanceled(UpgradeRef { upgrade_id: id() }),
        DomainEvent::UpgradeRolledBack(UpgradeRolledBack {
            upgrade_id: id(),
            by: "upg-abcdefghij".into(),
        }),
        DomainEvent::UpgradeAcknowledged(UpgradeRef { upgrade_id: id() }),
        DomainEvent::NodeFactsReported(NodeFactsReported {
            node_id: "n-msst0002".into(),
            facts: NodeFacts {
                images: vec![crate::release::Component {
                    kind: crate::release::ComponentKind::Image,
                    name: "api".into(),
                    version: "1.0.0".into(),
                    digest: "sha256:aa".into(),
                    epoch: 0,
                    release: String::new(),
                    arch: String::new(),
                }],
                packages: vec![crate::release::Component {
                    kind: crate::release::ComponentKind::Package,
                    name: "stratum-host".into(),
                    version: "1.0".into(),
                    digest: String::new(),
                    epoch: 1,
                    release: "1".into(),
                    arch: "x86_64".into(),
                }],
                bundle_free_bytes: Some(5 << 30),
                backup_free_bytes: Some(9 << 30),
                backup_bytes: Some(2 << 30),
                schema_version: Some(41),
                ready: Some(true),
                shut_down: Some(false),
            },
        }),
        DomainEvent::AlarmRaised(AlarmRaised {
            name: NODE_REBOOT_PENDING_ALARM.into(),
            node_id: Some("n-msst0002".into()),
            upgrade_id: Some(id()),
            message: "n-msst0002 has waited 7 days for its security reboot.".into(),
        }),
        DomainEvent::AlarmCleared(AlarmCleared {
            name: NODE_REBOOT_PENDING_ALARM.into(),
            node_id: Some("n-msst0002".into()),
            upgrade_id: Some(id()),
        }),
        DomainEvent::EventsLost(EventsLost {
            first: 2153,
            last: 2154,
            database_position: 2152,
            database_hash: "9f".repeat(32),
            lost: vec![
                LostEvent {
                    position: 2153,
                    hash: "a1".repeat(32),
                },
                LostEvent {
                    position: 2154,
                    hash: "b2".repeat(32),
                },
            ],
        }),
        DomainEvent::CheckpointForkFound(CheckpointForkFound {
            signed_size: 2154,
            signed_root: "c3".repeat(32),
            log_size: 2152,
            log_root: "d4".repeat(32),
        }),
        DomainEvent::CheckpointForkAcknowledged(CheckpointForkAcknowledged {
            signed_size: 2154,
            signed_root: "c3".repeat(32),
            reason: "restored the pre-upgrade backup after the failed upgrade".into(),
        }),
        DomainEvent::StorageVersionFinalized(crate::storage::StorageVersionFinalized {
            level: 2,
            writes: vec![
                "RaftPeerRemoved/4".into(),
                "StorageVersionFinalized/1".into(),
            ],
            settings: "5e".repeat(32),
            replicas: vec![
                "0193a1c2-7d4e-7000-8000-000000000001".into(),
                "0193a1c2-7d4e-7000-8000-000000000002".into(),
            ],
        }),
    ]
}

/// An example event as the bytes of stored `version` of its type decode:
/// the fields that version did not have hold the upcasters' documented
/// defaults.
pub fn as_decoded_from(event: &DomainEvent, version: u16) -> DomainEvent {
    if version >= crate::stored::schema_version(event) {
        return event.clone();
    }
    if version == 1 {
        return with_v1_defaults(event);
    }
    let mut e = event.clone();
    // Versions 2 and 3 of a type that has a version 4.
    if let DomainEvent::RaftPeerRemoved {
        leader_moved,
        settings,
        ..
    } = &mut e
    {
        *settings = None;
        if version <= 2 {
            *leader_moved = false;
        }
    }
    e
}

/// An example event as its version-1 bytes decode: the fields v1 did not
/// have hold the upcasters' documented defaults.
pub fn with_v1_defaults(event: &DomainEvent) -> DomainEvent {
    use crate::upgrade::*;
    let mut e = event.clone();
    match &mut e {
        DomainEvent::RaftPeerRemoved {
            adapter,
            leader_moved,
            settings,
            ..
        } => {
            *adapter = crate::stored::upcast::UNRECORDED_ADAPTER.into();
            *leader_moved = false;
            *settings = None;
        }
        DomainEvent::ReleaseRegistered(r) => r.source = ReleaseSource::Manifest,
        DomainEvent::UpgradePlanned(u) => {
            u.backup_target = None;
            let p = &mut u.plan;
            p.summary = format!(
                "Upgrade from {} to {} on {} node(s), one at a time.",
                u.from_release,
                u.target_release,
                p.nodes.len()
            );
            p.signed_by = String::new();
            p.source_kind = ReleaseSource::Manifest;
            for n in &mut p.nodes {
                n.restarts.clear();
                n.changes = match n.kind {
                    NodeKind::Os => vec!["os".into()],
                    NodeKind::Host => vec!["hostBinaries".into()],
                    NodeKind::Containers => Vec::new(),
                };
                n.fetched = false;
            }
            p.previous_os_bootable = p.kind != NodeKind::Os;
            p.restore_required = false;
            p.settle_seconds = 0;
        }
        DomainEvent::UpgradeNodeReported(r) => {
            for h in r.host_steps.iter_mut().flatten() {
                h.pending_units.clear();
                h.restarted_units.clear();
                h.stopped_units.clear();
                h.switched_sysexts.clear();
            }
            r.host_state = None;
            r.running_instances = None;
        }
        _ => {}
    }
    e
}
