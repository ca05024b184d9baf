//! Custom policies, resource policies and principals' policies.

use super::support::iam::*;

// ---------------------------------------------------------------------------
// CreatePolicy
// ---------------------------------------------------------------------------

#[test]
fn create_policy_rejects_a_bad_document_with_its_issues() {
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:Nope"], "resources": ["*"]},
        {"effect": "Maybe", "actions": ["cluster:GetMember"], "resources": ["*"]},
        {"effect": "Allow", "actions": ["cluster:GetMember"], "principals": [BOB], "resources": ["*"]},
    ]});
    let r = State::default()
        .when(create_policy("Readers", doc))
        .then_refused(ErrorCode::PolicyRejected);
    assert!(r.field_errors.is_empty(), "{r:?}");
    let shown: Vec<Value> = r
        .issues
        .iter()
        .map(|i| json!({"code": i["code"], "statement": i["statement"], "action": i.get("action")}))
        .collect();
    assert_eq!(
        shown,
        vec![
            json!({"code": "UNKNOWN_ACTION", "statement": 0, "action": "cluster:Nope"}),
            json!({"code": "INVALID_DOCUMENT", "statement": 1, "action": null}),
            json!({"code": "INVALID_DOCUMENT", "statement": 2, "action": null}),
        ]
    );
    assert!(
        r.issues[1].get("action").is_none(),
        "no action member: {r:?}"
    );
    assert!(r.issues.iter().all(|i| i["message"].is_string()), "{r:?}");
    assert!(r.message.contains('3'), "{}", r.message);
}

#[test]
fn create_policy_appends_policy_created_and_keeps_the_parsed_document() {
    let mut s = State::default();
    let d = s
        .when(create_policy("UpgradeViewers", good_document()))
        .then_appended(
            &mut s,
            vec![DomainEvent::PolicyCreated(PolicyCreated {
                name: "UpgradeViewers".into(),
                document: canonical(&good_document()),
            })],
        );
    assert_eq!(d.subject, Subject::Policy("UpgradeViewers".into()));
    let p = &s.iam.policies["UpgradeViewers"];
    assert_eq!(p.document, accepted(&good_document(), None));
    assert_eq!((p.set_by.as_str(), p.version), (ADMIN, 1));
    assert!(s.iam.knows_policy("UpgradeViewers"));
}

#[test]
fn create_policy_again_with_the_same_document_appends_nothing() {
    let s = given(&[policy_created("UpgradeViewers", &good_document())]);
    let d = s
        .when(create_policy("UpgradeViewers", good_document()))
        .then_nothing();
    assert_unchanged(&d, Subject::Policy("UpgradeViewers".into()));
    // The same document with its members in another order is the same.
    let reordered = json!({"statements": [
        {"resources": ["*"], "actions": ["upgrade:Get*", "upgrade:ListUpgrades"], "effect": "Allow"},
    ]});
    let d = s
        .when(create_policy("UpgradeViewers", reordered))
        .then_nothing();
    assert_unchanged(&d, Subject::Policy("UpgradeViewers".into()));
}

#[test]
fn create_policy_with_another_document_under_a_taken_name_is_policy_exists() {
    let s = given(&[policy_created("UpgradeViewers", &good_document())]);
    let other =
        json!({"statements": [{"effect": "Allow", "actions": ["upgrade:*"], "resources": ["*"]}]});
    s.when(create_policy("UpgradeViewers", other))
        .then_refused(ErrorCode::PolicyExists);
}

#[test]
fn create_policy_refuses_managed_and_malformed_names() {
    let long = "a".repeat(129);
    for name in [
        "ReadOnly",
        "AdministratorAccess",
        "bad name",
        "a/b",
        "",
        long.as_str(),
    ] {
        State::default()
            .when(create_policy(name, good_document()))
            .then_invalid(&["name"]);
    }
    let long = "a".repeat(128);
    State::default()
        .when(create_policy(&long, good_document()))
        .then([policy_created(&long, &good_document())]);
}

#[test]
fn create_policy_requires_a_name_and_a_document() {
    State::default()
        .when(IamCommand::CreatePolicy {
            name: None,
            document: None,
        })
        .then_invalid(&["name", "document"]);
}

#[test]
fn a_custom_policy_name_of_allowed_characters_is_accepted() {
    State::default()
        .when(create_policy("Ops+=,.@_-1", good_document()))
        .then([policy_created("Ops+=,.@_-1", &good_document())]);
}

// ---------------------------------------------------------------------------
// SetResourcePolicy
// ---------------------------------------------------------------------------

#[test]
fn a_resource_policy_on_an_unknown_member_is_not_found() {
    let doc = json!({"statements": [{"effect": "Allow", "actions": ["cluster:GetMember"], "resources": ["*"]}]});
    with_member()
        .when(set_member_policy("n-zz", doc))
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn a_resource_policy_on_an_unknown_upgrade_is_not_found() {
    let doc = json!({"statements": [{"effect": "Allow", "actions": ["upgrade:GetUpgrade"], "resources": ["*"]}]});
    with_member()
        .when(IamCommand::SetResourcePolicy {
            resource_type: ResourceType::Upgrade,
            id: UPG.into(),
            document: Some(doc),
        })
        .then_refused(ErrorCode::NotFound);
}

#[test]
fn a_member_policy_is_validated_against_the_member_resource_type() {
    let r = with_member()
        .when(set_member_policy("n-a", three_findings_document()))
        .then_refused(ErrorCode::PolicyRejected);
    let shown: Vec<Value> = r
        .issues
        .iter()
        .map(|i| json!({"code": i["code"], "statement": i["statement"], "action": i.get("action")}))
        .collect();
    assert_eq!(
        shown,
        vec![
            json!({"code": "UNKNOWN_ACTION", "statement": 0, "action": "cluster:Nope"}),
            json!({"code": "INVALID_DOCUMENT", "statement": 1, "action": null}),
            json!({"code": "ACTION_NOT_APPLICABLE", "statement": 2, "action": "upgrade:CancelUpgrade"}),
        ]
    );
    let vpc = json!({"statements": [{"effect": "Allow", "actions": ["compute:CreateVpc"], "principals": ["*"], "resources": ["*"]}]});
    let r = with_member()
        .when(set_member_policy("n-a", vpc))
        .then_refused(ErrorCode::PolicyRejected);
    assert_eq!(r.issues[0]["code"], "ACTION_NOT_APPLICABLE", "{r:?}");
    assert_eq!(r.issues[0]["action"], "compute:CreateVpc", "{r:?}");
}

#[test]
fn a_member_policy_is_set_once_and_keeps_its_principals() {
    let mut s = with_member();
    let doc = json!({"statements": [
        {"effect": "Deny", "actions": ["cluster:DecommissionMember"], "principals": [BOB], "resources": ["*"]},
    ]});
    let d = s.when(set_member_policy("n-a", doc.clone())).then_appended(
        &mut s,
        vec![DomainEvent::ResourcePolicySet(ResourcePolicySet {
            resource: "member/n-a".into(),
            document: canonical(&doc),
        })],
    );
    assert_eq!(d.subject, Subject::ResourcePolicy("member/n-a".into()));
    // Folded with the member resource type: a document with principals
    // parses (as an identity policy it would not).
    let p = &s.iam.resource_policies["member/n-a"];
    assert_eq!(p.document, accepted(&doc, Some(ResourceType::Member)));
    assert_eq!(
        verdict(
            &[&allow(&["*"]), &p.document],
            BOB,
            Action::DecommissionMember,
            "stratum:member/n-a"
        ),
        Verdict::Denied
    );
    let again = s.when(set_member_policy("n-a", doc)).then_nothing();
    assert_unchanged(&again, Subject::ResourcePolicy("member/n-a".into()));
}

#[test]
fn a_resource_policy_requires_a_document() {
    with_member()
        .when(IamCommand::SetResourcePolicy {
            resource_type: ResourceType::Member,
            id: "n-a".into(),
            document: None,
        })
        .then_invalid(&["document"]);
}

// ---------------------------------------------------------------------------
// SetPrincipalPolicies
// ---------------------------------------------------------------------------

#[test]
fn principal_policies_need_a_valid_principal_and_known_policies() {
    State::default()
        .when(set_principal_policies("alice", &["ReadOnly"]))
        .then_invalid(&["principal"]);
    let r = State::default()
        .when(set_principal_policies(ALICE, &["ReadOnly", "Nope"]))
        .refusal();
    assert_invalid(&r, &["policies[1]"]);
    State::default()
        .when(IamCommand::SetPrincipalPolicies {
            principal: "alice".into(),
            policies: None,
        })
        .then_invalid(&["principal", "policies"]);
}

#[test]
fn setting_principal_policies_appends_and_attaches_them() {
    let mut s = given(&[policy_created("UpgradeViewers", &good_document())]);
    let d = s
        .when(set_principal_policies(
            ALICE,
            &["ReadOnly", "UpgradeViewers"],
        ))
        .then_appended(
            &mut s,
            vec![DomainEvent::PrincipalPoliciesSet(PrincipalPoliciesSet {
                principal: ALICE.into(),
                policies: vec!["ReadOnly".into(), "UpgradeViewers".into()],
            })],
        );
    assert_eq!(d.subject, Subject::Principal(ALICE.into()));
    let a = &s.iam.principal_policies[ALICE];
    assert_eq!(a.policies, vec!["ReadOnly", "UpgradeViewers"]);
    assert_eq!(a.set_by, ADMIN);
}

#[test]
fn setting_the_same_principal_policies_again_appends_nothing() {
    let s = given(&[DomainEvent::PrincipalPoliciesSet(PrincipalPoliciesSet {
        principal: NODE_A.into(),
        policies: vec!["NodeAgent".into()],
    })]);
    let d = s
        .when(set_principal_policies(NODE_A, &["NodeAgent"]))
        .then_nothing();
    assert_unchanged(&d, Subject::Principal(NODE_A.into()));
    // A different list is a change.
    s.when(set_principal_policies(NODE_A, &["NodeAgent", "ReadOnly"]))
        .then([DomainEvent::PrincipalPoliciesSet(PrincipalPoliciesSet {
            principal: NODE_A.into(),
            policies: vec!["NodeAgent".into(), "ReadOnly".into()],
        })]);
}
