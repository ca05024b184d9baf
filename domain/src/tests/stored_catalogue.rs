//! The stored-event catalogue: every event type of [`DomainEvent`] has a
//! stored form in every place the log needs one. An event type added to
//! the domain does not compile until it is named in [`every_event_type`],
//! (nor until it has an entry in the event table of [`crate::stored`]),
//! and once named, [`stored_catalogue_is_complete`] fails until its
//! versions in [`STORED_VERSIONS`] run from 1 to the newest, with golden
//! bytes of each version in `replay-tests/fixtures/events`, and an example
//! in [`one_of_each`].

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::event::DomainEvent;
use crate::stored::{decode, encode, schema_version, DecodeError, STORED_VERSIONS};
use crate::testing::{as_decoded_from, one_of_each};

/// Names every variant of [`DomainEvent`] in a match without a wildcard
/// (so a variant not named here does not compile), and answers the names,
/// and the name of a given event's variant.
macro_rules! every_event_type {
    ($($variant:ident $fields:tt),+ $(,)?) => {
        /// Every event type the domain knows, by its variant's name.
        const EVERY_EVENT_TYPE: &[&str] = &[$(stringify!($variant)),+];

        /// The name of `event`'s variant.
        fn variant_name(event: &DomainEvent) -> &'static str {
            match event {
                $(DomainEvent::$variant $fields => stringify!($variant)),+
            }
        }
    };
}

every_event_type!(
    MemberAdmitted(_),
    JoinProgressReported { .. },
    MemberJoinCompleted { .. },
    MemberJoinFailed(_),
    RaftPeerRemoved { .. },
    RaftCleanupCompleted { .. },
    RaftPeerReturned(_),
    MemberJoinRetried { .. },
    MemberRemovalStarted(_),
    MemberDecommissioned { .. },
    MemberUpdated(_),
    AppliedGenerationReported { .. },
    JoinRequested(_),
    JoinRequestApproved { .. },
    JoinRequestRejected { .. },
    TokenIssued(_),
    ReleaseRegistered(_),
    RunningReleaseSet(_),
    UpgradePlanned(_),
    UpgradeStateChanged(_),
    UpgradePrechecked(_),
    UpgradeNodeTurnStarted(_),
    UpgradeNodeReported(_),
    UpgradeBackupReported(_),
    UpgradeFailed(_),
    UpgradeCompleted(_),
    UpgradeCanceled(_),
    UpgradeRolledBack(_),
    UpgradeAcknowledged(_),
    TokenRevoked(_),
    PolicyCreated(_),
    PrincipalPoliciesSet(_),
    ResourcePolicySet(_),
    NodeFactsReported(_),
    AlarmRaised(_),
    AlarmCleared(_),
    EventsLost(_),
    CheckpointForkFound(_),
    CheckpointForkAcknowledged(_),
    StorageVersionFinalized(_),
);

fn fixture(event_type: &str, version: u16) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../replay-tests/fixtures/events")
        .join(format!("{event_type}.v{version}.bin"))
}

/// For every event type: its example in [`one_of_each`] (the type the log
/// records is its variant's name), a decode arm, every version from 1 to
/// the one `encode` writes listed in [`STORED_VERSIONS`] and no other, and
/// golden bytes of each version that decode to the example. And nothing in
/// [`STORED_VERSIONS`] or [`one_of_each`] of a type the domain does not
/// know.
#[test]
#[allow(clippy::disallowed_methods)] // a test reads its golden fixtures
fn stored_catalogue_is_complete() {
    let known: BTreeSet<&str> = EVERY_EVENT_TYPE.iter().copied().collect();
    assert_eq!(known.len(), EVERY_EVENT_TYPE.len(), "a type named twice");
    let examples = one_of_each();
    for e in &examples {
        assert_eq!(e.event_type(), variant_name(e), "{e:?}");
    }
    let listed: BTreeSet<&str> = STORED_VERSIONS.iter().map(|(t, _)| *t).collect();
    assert!(
        listed.is_subset(&known),
        "STORED_VERSIONS names types the domain does not know: {:?}",
        listed.difference(&known).collect::<Vec<_>>()
    );
    let mut missing = Vec::new();
    for &t in EVERY_EVENT_TYPE {
        let Some(example) = examples.iter().find(|e| e.event_type() == t) else {
            missing.push(format!("{t}: no example in testing::one_of_each"));
            continue;
        };
        // The decode table knows the type: a version it never had is an
        // unknown version, not an unknown type.
        match decode(t, u16::MAX, &[]) {
            Err(DecodeError::UnknownVersion(..)) => {}
            other => missing.push(format!("{t}: no decode arm ({other:?})")),
        }
        let newest = schema_version(example);
        assert_eq!(encode(example).schema_version, newest, "{t}");
        let versions: Vec<u16> = STORED_VERSIONS
            .iter()
            .filter(|(s, _)| *s == t)
            .map(|(_, v)| *v)
            .collect();
        let expected: Vec<u16> = (1..=newest).collect();
        if versions != expected {
            missing.push(format!(
                "{t}: STORED_VERSIONS lists {versions:?}, not {expected:?}"
            ));
        }
        for v in 1..=newest {
            let path = fixture(t, v);
            let Ok(bytes) = std::fs::read(&path) else {
                missing.push(format!("{t}: no golden bytes at {}", path.display()));
                continue;
            };
            match decode(t, v, &bytes) {
                Ok(back) => assert_eq!(back, as_decoded_from(example, v), "{}", path.display()),
                Err(e) => missing.push(format!("{t} v{v}: the golden bytes do not decode: {e}")),
            }
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}
