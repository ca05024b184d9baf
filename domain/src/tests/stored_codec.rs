//! The stored codec: every event round-trips through its newest stored
//! version, every upcaster brings an old version to the shape of the next,
//! and the stored types and enums keep their golden bytes.

use std::collections::BTreeMap;

use crate::event::{DomainEvent, TokenIssued};
use crate::membership::Raft;
use crate::membership::Role;
use crate::stored::v1::*;
use crate::stored::v2::*;
use crate::stored::v3::*;
use crate::stored::v4::*;
use crate::stored::{bytes, decode, decode_exported, encode, upcast, DecodeError, STORED_VERSIONS};
use crate::upgrade::{BackupLocation, NodeKind, NodeStatus, Phase, UpgradeMode, UpgradeState};

#[test]
fn every_event_round_trips() {
    for e in crate::testing::one_of_each() {
        let enc = encode(&e);
        assert_eq!(enc.event_type, e.event_type());
        let back = decode(enc.event_type, enc.schema_version, &enc.payload).unwrap();
        assert_eq!(back, e);
    }
}

#[test]
fn member_join_failed_v1_upcasts_to_the_v2_shape() {
    let v1 = MemberJoinFailedV1 {
        node_id: "n-1".into(),
        step: "join/raft-openbao".into(),
        error: "boom".into(),
        rafts: vec![RaftV1::Patroni, RaftV1::Openbao],
    };
    let v2 = upcast::member_join_failed_v1_to_v2(v1.clone());
    assert_eq!(v2.rafts, 0b011);
    let from_v1 = decode("MemberJoinFailed", 1, &bytes(&v1)).unwrap();
    let from_v2 = decode("MemberJoinFailed", 2, &bytes(&v2)).unwrap();
    assert_eq!(from_v1, from_v2);
    let bad = MemberJoinFailedV2 { rafts: 8, ..v2 };
    assert!(decode("MemberJoinFailed", 2, &bytes(&bad)).is_err());
}

#[test]
fn raft_peer_removed_v1_upcasts_to_v2_with_an_unrecorded_adapter() {
    let v1 = RaftPeerRemovedV1 {
        node_id: "n-1".into(),
        raft: RaftV1::Ovn,
        already_gone: true,
    };
    let v2 = upcast::raft_peer_removed_v1_to_v2(v1.clone());
    assert_eq!(v2.adapter, "unrecorded");
    assert_eq!(
        decode("RaftPeerRemoved", 1, &bytes(&v1)).unwrap(),
        decode("RaftPeerRemoved", 2, &bytes(&v2)).unwrap()
    );
    let DomainEvent::RaftPeerRemoved { adapter, raft, .. } =
        decode("RaftPeerRemoved", 1, &bytes(&v1)).unwrap()
    else {
        panic!("a removal decodes as a removal")
    };
    assert_eq!((adapter.as_str(), raft), ("unrecorded", Raft::Ovn));
}

#[test]
fn raft_peer_removed_v2_upcasts_to_v3_with_no_leader_moved() {
    let v2 = RaftPeerRemovedV2 {
        node_id: "n-1".into(),
        raft: RaftV1::Patroni,
        already_gone: false,
        adapter: "patroni-syncobj".into(),
    };
    let v3 = upcast::raft_peer_removed_v2_to_v3(v2.clone());
    assert!(!v3.leader_moved);
    assert_eq!(
        decode("RaftPeerRemoved", 2, &bytes(&v2)).unwrap(),
        decode("RaftPeerRemoved", 3, &bytes(&v3)).unwrap()
    );
    // What an export showed of a v2 removal before v3 existed reads as
    // its bytes do now.
    let old = serde_json::json!({"nodeId": "n-1", "raft": "patroni", "alreadyGone": false, "adapter": "patroni-syncobj"});
    assert_eq!(
        decode_exported("RaftPeerRemoved", 2, &old),
        Some(decode("RaftPeerRemoved", 2, &bytes(&v2)).unwrap())
    );
    let moved = RaftPeerRemovedV3 {
        leader_moved: true,
        ..v3
    };
    let DomainEvent::RaftPeerRemoved { leader_moved, .. } =
        decode("RaftPeerRemoved", 3, &bytes(&moved)).unwrap()
    else {
        panic!("a removal decodes as a removal")
    };
    assert!(leader_moved);
}

#[test]
fn raft_peer_removed_v3_upcasts_to_v4_naming_no_settings() {
    let v3 = RaftPeerRemovedV3 {
        node_id: "n-1".into(),
        raft: RaftV1::Openbao,
        already_gone: true,
        adapter: "openbao-http".into(),
        leader_moved: true,
    };
    let v4 = upcast::raft_peer_removed_v3_to_v4(v3.clone());
    assert_eq!(v4.settings, None);
    let from_bytes = decode("RaftPeerRemoved", 3, &bytes(&v3)).unwrap();
    assert_eq!(
        from_bytes,
        decode("RaftPeerRemoved", 4, &bytes(&v4)).unwrap()
    );
    // What an export showed of a v3 removal before v4 existed, and what
    // it shows of one now (the decoded event, `settings: null`), read
    // as its bytes do.
    let before = serde_json::json!({"nodeId": "n-1", "raft": "openbao", "alreadyGone": true, "adapter": "openbao-http", "leaderMoved": true});
    let now = serde_json::json!({"nodeId": "n-1", "raft": "openbao", "alreadyGone": true, "adapter": "openbao-http", "leaderMoved": true, "settings": null});
    for shown in [before, now] {
        assert_eq!(
            decode_exported("RaftPeerRemoved", 3, &shown),
            Some(from_bytes.clone())
        );
    }
    let named = RaftPeerRemovedV4 {
        settings: Some("5e".repeat(32)),
        ..v4
    };
    let DomainEvent::RaftPeerRemoved { settings, .. } =
        decode("RaftPeerRemoved", 4, &bytes(&named)).unwrap()
    else {
        panic!("a removal decodes as a removal")
    };
    assert_eq!(settings, Some("5e".repeat(32)));
}

#[test]
fn an_export_made_before_an_upcast_reads_like_one_made_after() {
    // What an export showed of a v1 removal before v2 existed.
    let old = serde_json::json!({"nodeId": "n-1", "raft": "ovn", "alreadyGone": false});
    let v1 = RaftPeerRemovedV1 {
        node_id: "n-1".into(),
        raft: RaftV1::Ovn,
        already_gone: false,
    };
    let from_bytes = decode("RaftPeerRemoved", 1, &bytes(&v1)).unwrap();
    assert_eq!(
        decode_exported("RaftPeerRemoved", 1, &old),
        Some(from_bytes.clone())
    );
    // A changed value still shows as changed.
    let tampered = serde_json::json!({"nodeId": "n-1", "raft": "patroni", "alreadyGone": false});
    assert_ne!(
        decode_exported("RaftPeerRemoved", 1, &tampered),
        Some(from_bytes)
    );
    // A payload that is not the version's shape is read as it is.
    assert_eq!(decode_exported("RaftPeerRemoved", 2, &old), None);
}

#[test]
fn member_updated_refuses_unknown_raft_bits() {
    let e = MemberUpdatedV1 {
        node_id: "n-1".into(),
        role: RoleV1::Compute,
        mgmt_ip: "192.0.2.1".into(),
        bindings: BTreeMap::new(),
        labels: BTreeMap::new(),
        forced: false,
        rafts: 0b1000,
    };
    assert!(decode("MemberUpdated", 1, &bytes(&e)).is_err());
}

#[test]
fn unknown_versions_and_types_are_refused() {
    assert!(matches!(
        decode("MemberJoinCompleted", 99, &[]),
        Err(DecodeError::UnknownVersion(_, 99))
    ));
    assert!(matches!(
        decode("Nope", 1, &[]),
        Err(DecodeError::UnknownType(_))
    ));
}

/// The committed v1 bytes of the event types that were once written as
/// their domain structs; their stored types must write the same bytes.
fn golden_v1(event_type: &str) -> Option<&'static [u8]> {
    macro_rules! golden {
        ($($t:literal),+ $(,)?) => {
            match event_type {
                $($t => Some(include_bytes!(concat!(
                    "../../../replay-tests/fixtures/events/", $t, ".v1.bin"
                )).as_slice()),)+
                _ => None,
            }
        };
    }
    golden!(
        "ReleaseRegistered",
        "RunningReleaseSet",
        "UpgradePlanned",
        "UpgradeStateChanged",
        "UpgradePrechecked",
        "UpgradeNodeTurnStarted",
        "UpgradeNodeReported",
        "UpgradeBackupReported",
        "UpgradeFailed",
        "UpgradeCompleted",
        "UpgradeCanceled",
        "UpgradeRolledBack",
        "UpgradeAcknowledged",
        "TokenRevoked",
        "PolicyCreated",
        "PrincipalPoliciesSet",
        "ResourcePolicySet",
    )
}

#[test]
fn stored_types_write_the_bytes_the_domain_structs_wrote() {
    let mut compared = Vec::new();
    for e in crate::testing::one_of_each() {
        let Some(golden) = golden_v1(e.event_type()) else {
            continue;
        };
        let enc = encode(&e);
        if enc.schema_version == 1 {
            // Still written at v1: the very same bytes.
            assert_eq!(enc.payload, golden, "{}", enc.event_type);
            assert_eq!(decode(enc.event_type, 1, golden).unwrap(), e);
        } else {
            // Upcast since: the old bytes still decode.
            assert!(
                decode(enc.event_type, 1, golden).is_ok(),
                "{}",
                enc.event_type
            );
        }
        compared.push(enc.event_type);
    }
    assert_eq!(compared.len(), 17, "{compared:?}");
}

/// Checks a stored enum against `replay-tests/fixtures/enums/<Enum>.bin`:
/// the postcard bytes of a `Vec` of every variant in declaration order.
/// The match has no catch-all, so a variant added to the enum and not
/// listed here does not compile; the golden bytes catch one inserted or
/// moved. A variant may only ever be appended, and its index then
/// appended to the fixture (with the length in front grown by one).
macro_rules! golden_enum {
    ($v1:ident <=> $domain:ty { $($variant:ident),+ $(,)? }) => {{
        let all = vec![$($v1::$variant),+];
        let golden: &[u8] = include_bytes!(concat!(
            "../../../replay-tests/fixtures/enums/",
            stringify!($v1),
            ".bin"
        ));
        assert_eq!(bytes(&all), golden, "{}", stringify!($v1));
        assert_eq!(postcard::from_bytes::<Vec<$v1>>(golden).unwrap(), all);
        for (index, x) in all.iter().enumerate() {
            let name = match x {
                $($v1::$variant => stringify!($variant)),+
            };
            assert_eq!(format!("{x:?}"), name);
            // Alone, a variant is its index.
            assert_eq!(bytes(x), bytes(&index), "{name}");
            assert_eq!(postcard::from_bytes::<$v1>(&bytes(x)).unwrap(), *x);
            // It converts to the domain's variant of the same name, and back.
            let domain: $domain = (*x).into();
            assert_eq!(format!("{domain:?}"), name);
            assert_eq!($v1::from(domain), *x);
        }
    }};
}

#[test]
fn every_variant_of_every_stored_enum_keeps_its_golden_bytes() {
    use crate::upgrade::{ReleaseSource, StepKind};
    golden_enum!(RoleV1 <=> Role {
        Control,
        Compute,
        Storage,
        Hybrid,
    });
    golden_enum!(RaftV1 <=> Raft {
        Patroni,
        Openbao,
        Ovn,
    });
    golden_enum!(UpgradeStateV1 <=> UpgradeState {
        Planned,
        Prechecking,
        Fetching,
        Staged,
        BackingUp,
        Rolling,
        Verifying,
        Done,
        Failed,
        Canceled,
    });
    golden_enum!(UpgradeModeV1 <=> UpgradeMode { Now, StageOnly });
    golden_enum!(NodeKindV1 <=> NodeKind {
        Containers,
        Host,
        Os,
    });
    golden_enum!(BackupLocationV1 <=> BackupLocation { Node, Target });
    golden_enum!(PhaseV1 <=> Phase {
        Fetch,
        Roll,
        Verify,
    });
    golden_enum!(NodeStatusV2 <=> NodeStatus {
        Pending,
        Running,
        Done,
        Failed,
        RolledBack,
    });
    golden_enum!(ReleaseSourceV2 <=> ReleaseSource { Manifest, Media });
    golden_enum!(StepKindV2 <=> StepKind {
        Cluster,
        EveryNode,
        Node,
    });
    golden_enum!(ComponentKindV1 <=> crate::release::ComponentKind { Image, Package });
    // NodeStatusV1 keeps its own bytes; it reaches the domain through
    // NodeStatusV2, whose first four variants are its four.
    let v1_all = vec![
        NodeStatusV1::Pending,
        NodeStatusV1::Running,
        NodeStatusV1::Done,
        NodeStatusV1::Failed,
    ];
    let golden: &[u8] = include_bytes!("../../../replay-tests/fixtures/enums/NodeStatusV1.bin");
    assert_eq!(bytes(&v1_all), golden);
}

#[test]
fn a_token_of_a_chosen_secret_keeps_only_its_argon2id_hash() {
    use crate::iam::SecretVerifier;
    let phc = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA".to_owned();
    let e = DomainEvent::TokenIssued(TokenIssued {
        token_id: "tok-boot".into(),
        principal: "user/admin".into(),
        verifier: SecretVerifier::Argon2id(phc.clone()),
        policies: vec!["AdministratorAccess".into()],
        expires_at: None,
    });
    let enc = encode(&e);
    assert_eq!((enc.event_type, enc.schema_version), ("TokenIssued", 2));
    assert_eq!(decode("TokenIssued", 2, &enc.payload).unwrap(), e);
    // What auditors read: the slow hash, and no fast one.
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["secretArgon2id"], phc.as_str(), "{json}");
    assert!(json.get("secretSha256").is_none(), "{json}");
    // A v1 token reads as one recognized by its SHA-256, and shows as
    // v1 events always showed.
    let v1 = bytes(&TokenIssuedV1 {
        token_id: "tok-1".into(),
        principal: "user/alice".into(),
        secret_sha256: [7; 32],
        policies: vec![],
        expires_at: None,
    });
    let DomainEvent::TokenIssued(old) = decode("TokenIssued", 1, &v1).unwrap() else {
        panic!()
    };
    assert_eq!(old.verifier, SecretVerifier::Sha256([7; 32]));
    let json = serde_json::to_value(DomainEvent::TokenIssued(old)).unwrap();
    assert_eq!(json["secretSha256"], hex::encode([7; 32]), "{json}");
}

#[test]
#[allow(clippy::disallowed_methods, reason = "a test reads the golden files")]
fn the_stored_versions_are_those_with_golden_bytes() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../replay-tests/fixtures/events");
    let mut golden: Vec<(String, u16)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let stem = name.strip_suffix(".bin").unwrap().to_owned();
            let (t, v) = stem.rsplit_once(".v").unwrap();
            (t.to_owned(), v.parse().unwrap())
        })
        .collect();
    golden.sort();
    let mut listed: Vec<(String, u16)> = STORED_VERSIONS
        .iter()
        .map(|(t, v)| ((*t).to_owned(), *v))
        .collect();
    listed.sort();
    assert_eq!(listed, golden);
}

#[test]
fn every_level_the_table_names_is_a_level_and_every_later_level_adds_something() {
    use crate::storage::{BASE_LEVEL, LEVELS};
    use crate::stored::levels::{adds, level_of};
    let numbers: Vec<u16> = LEVELS.iter().map(|l| l.number).collect();
    assert_eq!(numbers, (1..=numbers.len() as u16).collect::<Vec<_>>());
    for (t, v, level) in crate::stored::FIRST_WRITTEN_AT {
        assert!(numbers.contains(level), "{t} v{v} names level {level}");
        assert_eq!(level_of(t, *v), *level);
        assert!(STORED_VERSIONS.contains(&(*t, *v)), "{t} v{v}");
    }
    // A type's versions are first written at levels that never go down: a
    // version moved into `upcast` keeps the `@ L` it had as the newest.
    for (t, v) in STORED_VERSIONS.iter().filter(|(_, v)| *v > 1) {
        assert!(
            level_of(t, *v - 1) <= level_of(t, *v),
            "{t} v{} is first written at level {}, above v{v}'s {}",
            v - 1,
            level_of(t, *v - 1),
            level_of(t, *v)
        );
    }
    for l in LEVELS.iter().filter(|l| l.number > BASE_LEVEL) {
        assert!(
            !adds(l.number).is_empty(),
            "level {} adds nothing",
            l.number
        );
    }
    assert_eq!(
        adds(2),
        [("RaftPeerRemoved", 4), ("StorageVersionFinalized", 1)]
    );
}
