//! Issuing and revoking tokens.

use super::support::iam::*;

// ---------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------

#[test]
fn issuing_a_token_appends_token_issued() {
    let mut s = State::default();
    let expires = t0() + Duration::days(1);
    let d = s
        .when(issue("tok-1", ALICE, 1, &["ReadOnly"], Some(expires)))
        .then_appended(
            &mut s,
            vec![DomainEvent::TokenIssued(TokenIssued {
                token_id: "tok-1".into(),
                principal: ALICE.into(),
                verifier: crate::iam::SecretVerifier::Sha256([1; 32]),
                policies: vec!["ReadOnly".into()],
                expires_at: Some(expires),
            })],
        );
    assert_eq!(d.subject, Subject::Token("tok-1".into()));
    let t = token(&s, "tok-1");
    assert_eq!(
        (t.principal.as_str(), t.created_by.as_str()),
        (ALICE, ADMIN)
    );
    assert!(t.valid_at(t0()));
}

#[test]
fn a_token_with_an_unknown_policy_names_that_policy() {
    let r = State::default()
        .when(issue("tok-1", ALICE, 1, &["Nope"], None))
        .refusal();
    assert_invalid(&r, &["policies[0]"]);
    let r = State::default()
        .when(issue("tok-1", ALICE, 1, &["ReadOnly", "Nope"], None))
        .refusal();
    assert_invalid(&r, &["policies[1]"]);
}

#[test]
fn a_token_may_carry_a_custom_policy_once_it_exists() {
    given(&[policy_created("UpgradeViewers", &good_document())])
        .when(issue("tok-1", ALICE, 1, &["UpgradeViewers"], None))
        .then([issued("tok-1", ALICE, 1, &["UpgradeViewers"], None)]);
}

#[test]
fn a_token_must_expire_in_the_future() {
    for at in [t0() - Duration::seconds(1), t0()] {
        State::default()
            .when(issue("tok-1", ALICE, 1, &["ReadOnly"], Some(at)))
            .then_invalid(&["expiresAt"]);
    }
}

#[test]
fn a_token_needs_a_valid_principal() {
    for p in ["alice", "node/N_1", "user/", "group/ops"] {
        State::default()
            .when(issue("tok-1", p, 1, &["ReadOnly"], None))
            .then_invalid(&["principal"]);
    }
    State::default()
        .when(IamCommand::IssueToken {
            token_id: "tok-1".into(),
            principal: None,
            verifier: crate::iam::SecretVerifier::Sha256([1; 32]),
            policies: vec!["ReadOnly".into()],
            expires_at: None,
        })
        .then_invalid(&["principal"]);
}

#[test]
fn a_token_request_lists_every_bad_field_at_once() {
    let r = State::default()
        .when(issue(
            "tok-1",
            "alice",
            1,
            &["Nope"],
            Some(t0() - Duration::hours(1)),
        ))
        .refusal();
    assert_invalid(&r, &["principal", "expiresAt", "policies[0]"]);
}

#[test]
fn a_token_id_or_secret_cannot_be_reused() {
    let s = given(&[issued("tok-1", ALICE, 1, &["ReadOnly"], None)]);
    s.when(issue("tok-1", ALICE, 2, &["ReadOnly"], None))
        .then_refused(ErrorCode::VersionConflict);
    s.when(issue("tok-2", BOB, 1, &["ReadOnly"], None))
        .then_refused(ErrorCode::VersionConflict);
}

#[test]
fn revoking_an_unknown_token_is_not_found() {
    State::default()
        .when(revoke("tok-1"))
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn revoking_a_token_appends_token_revoked_and_invalidates_it() {
    let mut s = given(&[issued("tok-1", ALICE, 1, &["ReadOnly"], None)]);
    s.when(revoke("tok-1")).then_appended(
        &mut s,
        vec![DomainEvent::TokenRevoked(TokenRevoked {
            token_id: "tok-1".into(),
        })],
    );
    let t = token(&s, "tok-1");
    assert!(t.revoked_at.is_some(), "{t:?}");
    assert_eq!(t.revoked_by.as_deref(), Some(ADMIN));
    assert!(!t.valid_at(t0()));
    assert!(
        !t.valid_at(t0() - Duration::days(1)),
        "revocation is not a date"
    );
}

#[test]
fn revoking_a_token_twice_appends_nothing() {
    let s = given(&[
        issued("tok-1", ALICE, 1, &["ReadOnly"], None),
        revoked("tok-1"),
    ]);
    let revoked_at = token(&s, "tok-1").revoked_at;
    let d = s.when(revoke("tok-1")).then_nothing();
    assert_unchanged(&d, Subject::Token("tok-1".into()));
    assert_eq!(token(&s, "tok-1").revoked_at, revoked_at);
}

#[test]
fn a_token_is_valid_until_it_expires() {
    let expires = t0() + Duration::hours(1);
    let s = given(&[
        issued("tok-1", ALICE, 1, &["ReadOnly"], Some(expires)),
        issued("tok-2", BOB, 2, &["ReadOnly"], None),
    ]);
    let t = token(&s, "tok-1");
    assert!(t.valid_at(t0()));
    assert!(t.valid_at(expires - Duration::seconds(1)));
    assert!(!t.valid_at(expires));
    assert!(!t.valid_at(expires + Duration::days(1)));
    assert!(token(&s, "tok-2").valid_at(t0() + Duration::days(3650)));
}
