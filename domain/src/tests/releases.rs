//! Releases and the running release.

use super::support::upgrade::*;

// ---------------------------------------------------------------------------
// Releases and the running release
// ---------------------------------------------------------------------------

#[test]
fn register_release_records_its_canonical_manifest() {
    let s = cluster();
    let m = manifest("1.2.0", "13.1", None);
    let d = s
        .when(UpgradeCommand::RegisterRelease {
            manifest: signed(m.clone()),
            source: ReleaseSource::Manifest,
        })
        .decided();
    assert_eq!(d.subject, Subject::Release("1.2.0".into()));
    assert_eq!(
        d.events,
        [DomainEvent::ReleaseRegistered(ReleaseRegistered {
            version: "1.2.0".into(),
            manifest: canonical(&m),
            source: ReleaseSource::Manifest,
        })]
    );
}

#[test]
fn a_valid_manifest_reads_the_same_as_recorded_and_as_parsed() {
    let mut m = manifest("1.2.0", "13.1", Some("kernel-6.1"));
    m["requiredStops"] = json!(["1.1.0"]);
    m["knownBroken"] = json!([{"from": "1.0.1", "reason": "r", "wayRound": "w"}]);
    m["cves"] = json!(["CVE-2026-0001"]);
    m["os"]["kernelArgs"] = json!(["quiet"]);
    assert_eq!(
        crate::release::read_recorded(&canonical(&m)),
        crate::release::parse_manifest(&m).unwrap()
    );
}

#[test]
fn a_recorded_release_is_read_as_recorded_even_where_todays_parser_refuses_it() {
    // A manifest recorded by an older service, with a field and a digest
    // today's parser refuses: replay must still hold the release.
    let mut m = manifest("1.2.0", "13.1", None);
    m["futureField"] = json!({"anything": true});
    m["components"] = json!([
        {"kind": "image", "name": "api", "version": "1.2.0", "digest": "md5:abc"},
        {"kind": "helm-chart", "name": "later-kind", "version": "1"}
    ]);
    assert!(crate::release::parse_manifest(&m).is_err());
    let s = given(&[crate::testing::registered(&m)]);
    let r = &s.upgrades.releases["1.2.0"];
    assert_eq!(r.release.version, "1.2.0");
    assert_eq!(r.release.os.version, "13.1");
    assert_eq!(r.release.components.len(), 1, "an unknown kind is left out");
    assert_eq!(r.release.components[0].digest, "md5:abc");
    assert_eq!(r.manifest, canonical(&m), "the recorded text is kept as is");
}

#[test]
fn registering_the_same_manifest_twice_appends_nothing() {
    let mut s = cluster();
    let m = manifest("1.2.0", "13.1", None);
    let c = UpgradeCommand::RegisterRelease {
        manifest: signed(m.clone()),
        source: ReleaseSource::Manifest,
    };
    s.when(c.clone()).then_appended(&mut s, [registered(&m)]);
    assert!(s.upgrades.releases.contains_key("1.2.0"));
    let d = s.when(c).decided();
    assert!(d.events.is_empty(), "{d:?}");
    assert_eq!(d.subject, Subject::Release("1.2.0".into()));
    // The same manifest with its members in another order is the same.
    let reordered: Value =
        serde_json::from_str(&serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let d = s
        .when(UpgradeCommand::RegisterRelease {
            manifest: signed(reordered),
            source: ReleaseSource::Manifest,
        })
        .decided();
    assert!(d.events.is_empty(), "{d:?}");
}

#[test]
fn another_manifest_under_a_registered_version_is_release_exists() {
    let s = cluster();
    let r = s
        .when(UpgradeCommand::RegisterRelease {
            manifest: signed(manifest("1.1.0", "13.2", None)),
            source: ReleaseSource::Manifest,
        })
        .then_refused(ErrorCode::ReleaseExists);
    assert!(r.message.contains("1.1.0"), "{}", r.message);
}

#[test]
fn an_invalid_manifest_is_invalid_input() {
    let mut m = manifest("1.2.0", "", None);
    m["version"] = json!("two");
    cluster()
        .when(UpgradeCommand::RegisterRelease {
            manifest: signed(m),
            source: ReleaseSource::Manifest,
        })
        .then_invalid(&["version", "os.version"]);
}

#[test]
fn set_running_release_sets_it_once() {
    let mut s = given(&[registered(&manifest("1.0.0", "13.1", None))]);
    let c = UpgradeCommand::SetRunningRelease {
        version: Some("1.0.0".into()),
    };
    let d = s.when(c.clone()).then_appended(
        &mut s,
        [DomainEvent::RunningReleaseSet(RunningReleaseSet {
            version: "1.0.0".into(),
        })],
    );
    assert_eq!(d.subject, Subject::RunningRelease);
    assert_eq!(s.upgrades.running.as_ref().unwrap().version, "1.0.0");
    assert!(s.when(c).decided().events.is_empty());
}

#[test]
fn set_running_release_of_an_unregistered_version_is_invalid() {
    let s = given(&[registered(&manifest("1.0.0", "13.1", None))]);
    let r = s
        .when(UpgradeCommand::SetRunningRelease {
            version: Some("2.0.0".into()),
        })
        .then_invalid(&["version"]);
    assert_eq!(message_of(&r, "version"), "release 2.0.0 is not registered");
    s.when(UpgradeCommand::SetRunningRelease { version: None })
        .then_invalid(&["version"]);
}

#[test]
fn a_second_running_release_is_running_release_already_set() {
    let s = cluster();
    let r = s
        .when(UpgradeCommand::SetRunningRelease {
            version: Some("1.1.0".into()),
        })
        .then_refused(ErrorCode::RunningReleaseAlreadySet);
    assert_eq!(r.details, Some(json!({ "version": "1.0.0" })));
    // After an upgrade moved it, the install-time release is refused too.
    let s = upgrade_in(UpgradeState::Done);
    let r = s
        .when(UpgradeCommand::SetRunningRelease {
            version: Some("1.0.0".into()),
        })
        .then_refused(ErrorCode::RunningReleaseAlreadySet);
    assert_eq!(r.details, Some(json!({ "version": "1.1.0" })));
}

#[test]
fn a_release_is_refused_unless_its_signature_holds() {
    use crate::release::{SignedManifest, TrustedKeys};
    // Unsigned, signed by an unknown key, or changed after signing: each is
    // refused naming the signature, and nothing is appended.
    let mut unsigned = manifest("1.2.0", "13.1", None);
    unsigned.as_object_mut().unwrap().remove("signature");
    let mut changed = manifest("1.2.0", "13.1", None);
    changed["cves"] = json!(["CVE-2026-0001"]);
    let cases = [
        // A manifest without a signature is not a manifest either.
        (
            SignedManifest::verify(unsigned, &release_keys()),
            &["signature", ""][..],
        ),
        (
            SignedManifest::verify(manifest("1.2.0", "13.1", None), &TrustedKeys::default()),
            &["signature.keyId"][..],
        ),
        (
            SignedManifest::verify(changed, &release_keys()),
            &["signature"][..],
        ),
    ];
    for (signed, fields) in cases {
        assert!(signed.signed_by().is_err());
        cluster()
            .when(UpgradeCommand::RegisterRelease {
                manifest: signed,
                source: ReleaseSource::Media,
            })
            .then_invalid(fields);
    }
}

#[test]
fn a_bad_signature_is_named_first_then_what_else_is_wrong() {
    use crate::release::SignedManifest;
    let mut m = manifest("1.2.0", "", None);
    m["version"] = json!("two");
    cluster()
        .when(UpgradeCommand::RegisterRelease {
            manifest: SignedManifest::verify(m, &release_keys()),
            source: ReleaseSource::Manifest,
        })
        .then_invalid(&["signature", "version", "os.version"]);
}

#[test]
fn a_signed_manifest_names_its_key() {
    let s = signed(manifest("1.2.0", "13.1", None));
    assert_eq!(s.signed_by(), Ok(crate::testing::RELEASE_KEY_ID));
}
