//! Unit tests of the pure IAM domain (SPEC §6): policy validation, the
//! authorization decision, the managed policies, tokens, policy
//! attachments and the action catalog.

use std::collections::HashSet;

use chrono::Duration;
use serde_json::{json, Value};

use crate::error::{ErrorCode, Refusal};
use crate::event::DomainEvent;
use crate::iam::*;
use crate::membership::Role;
use crate::policy::*;
use crate::release::canonical;
use crate::state::{Command, Decision, State, Subject};
use crate::testing::{self, admitted, apply, assert_invalid, given, t0, when};

const ADMIN: &str = "user/admin";
const ALICE: &str = "user/alice";
const BOB: &str = "user/bob";
const NODE_A: &str = "node/n-a";
const UPG: &str = "upg-0123456789";

// ---------------------------------------------------------------------------
// Commands and harness helpers
// ---------------------------------------------------------------------------

fn cmd(c: IamCommand) -> Command {
    Command::Iam(c)
}

/// Decides `c` as the admin and appends what it decided, as the command
/// path does.
fn run(s: &mut State, c: IamCommand) -> Decision {
    let d = when(s, cmd(c.clone())).unwrap_or_else(|r| panic!("{c:?} was refused: {r:?}"));
    apply(s, ADMIN, &d.events);
    d
}

fn refused(s: &State, c: IamCommand) -> Refusal {
    testing::refused(s, cmd(c))
}

fn assert_unchanged(d: &Decision, subject: Subject) {
    assert!(
        d.events.is_empty(),
        "expected no events, got {:?}",
        d.events
    );
    assert_eq!(d.subject, subject);
}

fn create_policy(name: &str, document: Value) -> IamCommand {
    IamCommand::CreatePolicy {
        name: Some(name.into()),
        document: Some(document),
    }
}

fn set_member_policy(node_id: &str, document: Value) -> IamCommand {
    IamCommand::SetResourcePolicy {
        resource_type: ResourceType::Member,
        id: node_id.into(),
        document: Some(document),
    }
}

fn set_principal_policies(principal: &str, policies: &[&str]) -> IamCommand {
    IamCommand::SetPrincipalPolicies {
        principal: principal.into(),
        policies: Some(policies.iter().map(|p| (*p).to_owned()).collect()),
    }
}

/// A token for `principal`; its secret is `secret` repeated.
fn issue(
    token_id: &str,
    principal: &str,
    secret: u8,
    policies: &[&str],
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
) -> IamCommand {
    IamCommand::IssueToken {
        token_id: token_id.into(),
        principal: Some(principal.into()),
        verifier: crate::iam::SecretVerifier::Sha256([secret; 32]),
        policies: policies.iter().map(|p| (*p).to_owned()).collect(),
        expires_at,
    }
}

fn revoke(token_id: &str) -> IamCommand {
    IamCommand::RevokeToken {
        token_id: token_id.into(),
    }
}

fn token<'a>(s: &'a State, token_id: &str) -> &'a Token {
    s.iam
        .tokens
        .get(token_id)
        .unwrap_or_else(|| panic!("no token {token_id}"))
}

/// One admitted member, `n-a`.
fn with_member() -> State {
    given(&[admitted("n-a", Role::Hybrid, 1)])
}

// ---------------------------------------------------------------------------
// Policy documents
// ---------------------------------------------------------------------------

/// A finding as (code, statement, action).
type Finding = (&'static str, i64, Option<String>);

fn findings(doc: &Value, attached_to: Option<ResourceType>) -> Vec<Finding> {
    match validate_document(doc, attached_to) {
        Ok(d) => panic!("{doc} was accepted: {d:?}"),
        Err(issues) => issues
            .into_iter()
            .map(|i| (i.code, i.statement, i.action))
            .collect(),
    }
}

fn invalid(statement: i64) -> Finding {
    ("INVALID_DOCUMENT", statement, None)
}

fn unknown(statement: i64, action: &str) -> Finding {
    ("UNKNOWN_ACTION", statement, Some(action.into()))
}

fn not_applicable(statement: i64, action: &str) -> Finding {
    ("ACTION_NOT_APPLICABLE", statement, Some(action.into()))
}

fn accepted(doc: &Value, attached_to: Option<ResourceType>) -> PolicyDocument {
    validate_document(doc, attached_to).unwrap_or_else(|i| panic!("{doc} was rejected: {i:?}"))
}

/// An identity policy of one statement.
fn identity(effect: &str, actions: &[&str], resources: &[&str]) -> PolicyDocument {
    accepted(
        &json!({"statements": [{"effect": effect, "actions": actions, "resources": resources}]}),
        None,
    )
}

fn allow(actions: &[&str]) -> PolicyDocument {
    identity("Allow", actions, &["*"])
}

fn deny(actions: &[&str]) -> PolicyDocument {
    identity("Deny", actions, &["*"])
}

/// A member resource policy of one statement for `principals`.
fn member_policy(effect: &str, actions: &[&str], principals: &[&str]) -> PolicyDocument {
    accepted(
        &json!({"statements": [{"effect": effect, "actions": actions, "principals": principals}]}),
        Some(ResourceType::Member),
    )
}

/// Statement 0 names an unknown action, statement 1 is malformed and
/// statement 2 names an action that does not apply to a member.
fn three_findings_document() -> Value {
    json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:Nope"], "resources": ["*"], "principals": ["*"]},
        {"effect": "Maybe", "actions": ["cluster:GetMember"], "principals": ["*"]},
        {"effect": "Allow", "actions": ["upgrade:CancelUpgrade"], "principals": ["*"]},
    ]})
}

fn good_document() -> Value {
    json!({"statements": [
        {"effect": "Allow", "actions": ["upgrade:Get*", "upgrade:ListUpgrades"], "resources": ["*"]},
    ]})
}

const INSTALL: &str = "stratum:install";

fn verdict(docs: &[&PolicyDocument], principal: &str, action: Action, resource: &str) -> Verdict {
    evaluate(docs.iter().copied(), principal, action, resource)
}

fn managed(name: &str) -> &'static PolicyDocument {
    managed_policy(name).unwrap_or_else(|| panic!("{name} is not a managed policy"))
}

/// The resource of `action` for node `node` and upgrade [`UPG`].
fn resource_for(action: Action, node: &str) -> String {
    action.resource(|k| match k {
        "nodeId" => Some(node),
        "id" => Some(UPG),
        _ => None,
    })
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

#[test]
fn a_document_is_rejected_with_every_finding_at_once() {
    assert_eq!(
        findings(&three_findings_document(), Some(ResourceType::Member)),
        vec![
            unknown(0, "cluster:Nope"),
            invalid(1),
            not_applicable(2, "upgrade:CancelUpgrade"),
        ]
    );
}

#[test]
fn a_statement_lists_each_bad_action() {
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:GetMember"], "principals": ["*"]},
        {"effect": "Allow", "actions": ["cluster:Nope", "cluster:GetMember", "compute:CreateVpc", "iam:Nope"], "principals": ["*"]},
    ]});
    assert_eq!(
        findings(&doc, Some(ResourceType::Member)),
        vec![
            unknown(1, "cluster:Nope"),
            not_applicable(1, "compute:CreateVpc"),
            unknown(1, "iam:Nope"),
        ]
    );
}

#[test]
fn a_missing_actions_member_is_a_malformed_statement() {
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["*"]},
        {"effect": "Deny"},
        {"effect": "Deny", "actions": []},
        {"effect": "Deny", "actions": "cluster:GetMember"},
        {"effect": "Deny", "actions": [1]},
    ]});
    assert_eq!(
        findings(&doc, None),
        vec![invalid(1), invalid(2), invalid(3), invalid(4)]
    );
}

#[test]
fn an_effect_other_than_allow_or_deny_is_a_malformed_statement() {
    for effect in [json!("Maybe"), json!("allow"), json!(true), Value::Null] {
        let doc = json!({"statements": [{"effect": effect, "actions": ["*"]}]});
        assert_eq!(findings(&doc, None), vec![invalid(0)], "{doc}");
    }
    let doc = json!({"statements": [{"actions": ["*"]}]});
    assert_eq!(findings(&doc, None), vec![invalid(0)], "no effect");
}

#[test]
fn a_document_that_is_not_an_object_is_invalid_as_a_whole() {
    for doc in [json!([]), json!("statements"), json!(null), json!(1)] {
        assert_eq!(findings(&doc, None), vec![invalid(-1)], "{doc}");
    }
}

#[test]
fn a_document_without_statements_is_invalid_as_a_whole() {
    for doc in [
        json!({}),
        json!({"statements": []}),
        json!({"statements": {"effect": "Allow", "actions": ["*"]}}),
        json!({"statements": null}),
    ] {
        assert_eq!(findings(&doc, None), vec![invalid(-1)], "{doc}");
    }
}

#[test]
fn unknown_members_of_the_document_are_invalid_as_a_whole() {
    let doc =
        json!({"version": "2012-10-17", "statements": [{"effect": "Allow", "actions": ["*"]}]});
    assert_eq!(findings(&doc, None), vec![invalid(-1)]);
}

#[test]
fn unknown_members_of_a_statement_are_invalid_at_that_statement() {
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["*"]},
        {"effect": "Allow", "actions": ["*"], "condition": {"ip": "10.0.0.0/8"}},
        {"effect": "Allow", "actions": ["*"], "Resources": ["*"]},
    ]});
    assert_eq!(findings(&doc, None), vec![invalid(1), invalid(2)]);
}

#[test]
fn a_statement_that_is_not_an_object_is_invalid_at_its_index() {
    let doc = json!({"statements": [{"effect": "Allow", "actions": ["*"]}, "Allow *"]});
    assert_eq!(findings(&doc, None), vec![invalid(1)]);
}

#[test]
fn principals_belong_in_resource_policies_only() {
    let doc = json!({"statements": [
        {"effect": "Deny", "actions": ["cluster:DecommissionMember"], "principals": [BOB]},
    ]});
    assert_eq!(findings(&doc, None), vec![invalid(0)]);
    let parsed = accepted(&doc, Some(ResourceType::Member));
    assert_eq!(parsed.statements[0].principals, vec![BOB.to_owned()]);
}

#[test]
fn principals_of_a_resource_policy_must_be_a_non_empty_list() {
    for principals in [json!([]), json!(BOB), json!([1])] {
        let doc = json!({"statements": [
            {"effect": "Allow", "actions": ["cluster:GetMember"], "principals": principals},
        ]});
        assert_eq!(
            findings(&doc, Some(ResourceType::Member)),
            vec![invalid(0)],
            "{doc}"
        );
    }
}

#[test]
fn resources_must_be_star_or_stratum_patterns() {
    for resources in [
        json!(["arn:aws:s3:::bucket"]),
        json!(["member/n-a"]),
        json!(["*", "n-a"]),
        json!([]),
        json!("*"),
        json!([7]),
    ] {
        let doc = json!({"statements": [
            {"effect": "Allow", "actions": ["cluster:GetMember"], "resources": resources},
        ]});
        assert_eq!(findings(&doc, None), vec![invalid(0)], "{doc}");
    }
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:GetMember"], "resources": ["*", "stratum:member/n-*"]},
    ]});
    assert_eq!(
        accepted(&doc, None).statements[0].resources,
        vec!["*".to_owned(), "stratum:member/n-*".to_owned()]
    );
}

#[test]
fn omitted_resources_and_principals_mean_any() {
    let doc = accepted(
        &json!({"statements": [{"effect": "Deny", "actions": ["cluster:GetMember"]}]}),
        None,
    );
    assert_eq!(
        doc,
        PolicyDocument {
            statements: vec![Statement {
                effect: Effect::Deny,
                actions: vec!["cluster:GetMember".into()],
                resources: vec!["*".into()],
                principals: vec!["*".into()],
            }],
        }
    );
}

#[test]
fn wildcard_actions_that_match_an_action_are_accepted() {
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:*", "*:Get*", "*", "upgrade:Get?pgrade"]},
    ]});
    let parsed = accepted(&doc, None);
    assert_eq!(
        parsed.statements[0].actions,
        vec!["cluster:*", "*:Get*", "*", "upgrade:Get?pgrade"]
    );
}

#[test]
fn a_wildcard_that_matches_no_action_is_unknown() {
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:*", "nothing:*", "cluster:Nope*"]},
    ]});
    assert_eq!(
        findings(&doc, None),
        vec![unknown(0, "nothing:*"), unknown(0, "cluster:Nope*")]
    );
}

#[test]
fn other_services_actions_are_known_but_apply_to_no_member() {
    let identity_doc =
        json!({"statements": [{"effect": "Allow", "actions": ["compute:CreateVpc"]}]});
    assert_eq!(
        accepted(&identity_doc, None).statements[0].actions,
        vec!["compute:CreateVpc"]
    );
    let doc = json!({"statements": [{"effect": "Allow", "actions": ["compute:CreateVpc"], "principals": ["*"]}]});
    assert_eq!(
        findings(&doc, Some(ResourceType::Member)),
        vec![not_applicable(0, "compute:CreateVpc")]
    );
    let doc =
        json!({"statements": [{"effect": "Allow", "actions": ["storage:*"], "principals": ["*"]}]});
    assert_eq!(
        findings(&doc, Some(ResourceType::Upgrade)),
        vec![not_applicable(0, "storage:*")]
    );
}

#[test]
fn a_resource_policy_accepts_patterns_matching_one_applicable_action() {
    // `cluster:*` matches install actions too, but also member actions.
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:*", "*", "cluster:GetMember", "cluster:Report*"], "principals": ["*"]},
    ]});
    accepted(&doc, Some(ResourceType::Member));
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:AdmitMember", "upgrade:GetUpgrade", "iam:*"], "principals": ["*"]},
    ]});
    assert_eq!(
        findings(&doc, Some(ResourceType::Member)),
        vec![
            not_applicable(0, "cluster:AdmitMember"),
            not_applicable(0, "upgrade:GetUpgrade"),
            not_applicable(0, "iam:*"),
        ]
    );
}

#[test]
fn an_upgrade_policy_takes_upgrade_actions_only() {
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["upgrade:ReportNodeProgress", "upgrade:GetUpgrade"], "principals": ["*"]},
        {"effect": "Allow", "actions": ["cluster:GetMember"], "principals": ["*"]},
    ]});
    assert_eq!(
        findings(&doc, Some(ResourceType::Upgrade)),
        vec![not_applicable(1, "cluster:GetMember")]
    );
}

// ---------------------------------------------------------------------------
// CreatePolicy
// ---------------------------------------------------------------------------

#[test]
fn create_policy_rejects_a_bad_document_with_its_issues() {
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:Nope"], "resources": ["*"]},
        {"effect": "Maybe", "actions": ["cluster:GetMember"]},
        {"effect": "Allow", "actions": ["cluster:GetMember"], "principals": [BOB]},
    ]});
    let r = refused(&State::default(), create_policy("Readers", doc));
    assert_eq!(r.code, ErrorCode::PolicyRejected, "{r:?}");
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
    let d = run(&mut s, create_policy("UpgradeViewers", good_document()));
    assert_eq!(
        d.events,
        vec![DomainEvent::PolicyCreated(PolicyCreated {
            name: "UpgradeViewers".into(),
            document: canonical(&good_document()),
        })]
    );
    assert_eq!(d.subject, Subject::Policy("UpgradeViewers".into()));
    let p = &s.iam.policies["UpgradeViewers"];
    assert_eq!(p.document, accepted(&good_document(), None));
    assert_eq!((p.set_by.as_str(), p.version), (ADMIN, 1));
    assert!(s.iam.knows_policy("UpgradeViewers"));
}

#[test]
fn create_policy_again_with_the_same_document_appends_nothing() {
    let mut s = State::default();
    run(&mut s, create_policy("UpgradeViewers", good_document()));
    let d = run(&mut s, create_policy("UpgradeViewers", good_document()));
    assert_unchanged(&d, Subject::Policy("UpgradeViewers".into()));
    // The same document with its members in another order is the same.
    let reordered = json!({"statements": [
        {"resources": ["*"], "actions": ["upgrade:Get*", "upgrade:ListUpgrades"], "effect": "Allow"},
    ]});
    let d = run(&mut s, create_policy("UpgradeViewers", reordered));
    assert_unchanged(&d, Subject::Policy("UpgradeViewers".into()));
}

#[test]
fn create_policy_with_another_document_under_a_taken_name_is_policy_exists() {
    let mut s = State::default();
    run(&mut s, create_policy("UpgradeViewers", good_document()));
    let other = json!({"statements": [{"effect": "Allow", "actions": ["upgrade:*"]}]});
    let r = refused(&s, create_policy("UpgradeViewers", other));
    assert_eq!(r.code, ErrorCode::PolicyExists, "{r:?}");
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
        let r = refused(&State::default(), create_policy(name, good_document()));
        assert_invalid(&r, &["name"]);
    }
    let mut s = State::default();
    let d = run(&mut s, create_policy(&"a".repeat(128), good_document()));
    assert_eq!(d.events.len(), 1, "128 characters is a name: {d:?}");
}

#[test]
fn create_policy_requires_a_name_and_a_document() {
    let r = refused(
        &State::default(),
        IamCommand::CreatePolicy {
            name: None,
            document: None,
        },
    );
    assert_invalid(&r, &["name", "document"]);
}

#[test]
fn a_custom_policy_name_of_allowed_characters_is_accepted() {
    let mut s = State::default();
    let d = run(&mut s, create_policy("Ops+=,.@_-1", good_document()));
    assert_eq!(d.events.len(), 1, "{d:?}");
}

// ---------------------------------------------------------------------------
// SetResourcePolicy
// ---------------------------------------------------------------------------

#[test]
fn a_resource_policy_on_an_unknown_member_is_not_found() {
    let doc = json!({"statements": [{"effect": "Allow", "actions": ["cluster:GetMember"]}]});
    let r = refused(&with_member(), set_member_policy("n-zz", doc));
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
}

#[test]
fn a_resource_policy_on_an_unknown_upgrade_is_not_found() {
    let doc = json!({"statements": [{"effect": "Allow", "actions": ["upgrade:GetUpgrade"]}]});
    let r = refused(
        &with_member(),
        IamCommand::SetResourcePolicy {
            resource_type: ResourceType::Upgrade,
            id: UPG.into(),
            document: Some(doc),
        },
    );
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
}

#[test]
fn a_member_policy_is_validated_against_the_member_resource_type() {
    let r = refused(
        &with_member(),
        set_member_policy("n-a", three_findings_document()),
    );
    assert_eq!(r.code, ErrorCode::PolicyRejected, "{r:?}");
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
    let vpc = json!({"statements": [{"effect": "Allow", "actions": ["compute:CreateVpc"], "principals": ["*"]}]});
    let r = refused(&with_member(), set_member_policy("n-a", vpc));
    assert_eq!(r.code, ErrorCode::PolicyRejected, "{r:?}");
    assert_eq!(r.issues[0]["code"], "ACTION_NOT_APPLICABLE", "{r:?}");
    assert_eq!(r.issues[0]["action"], "compute:CreateVpc", "{r:?}");
}

#[test]
fn a_member_policy_is_set_once_and_keeps_its_principals() {
    let mut s = with_member();
    let doc = json!({"statements": [
        {"effect": "Deny", "actions": ["cluster:DecommissionMember"], "principals": [BOB]},
    ]});
    let d = run(&mut s, set_member_policy("n-a", doc.clone()));
    assert_eq!(
        d.events,
        vec![DomainEvent::ResourcePolicySet(ResourcePolicySet {
            resource: "member/n-a".into(),
            document: canonical(&doc),
        })]
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
    let again = run(&mut s, set_member_policy("n-a", doc));
    assert_unchanged(&again, Subject::ResourcePolicy("member/n-a".into()));
}

#[test]
fn a_resource_policy_requires_a_document() {
    let r = refused(
        &with_member(),
        IamCommand::SetResourcePolicy {
            resource_type: ResourceType::Member,
            id: "n-a".into(),
            document: None,
        },
    );
    assert_invalid(&r, &["document"]);
}

// ---------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------

#[test]
fn an_explicit_deny_beats_an_allow_in_the_same_document() {
    let doc = accepted(
        &json!({"statements": [
            {"effect": "Allow", "actions": ["*"]},
            {"effect": "Deny", "actions": ["cluster:DecommissionMember"]},
        ]}),
        None,
    );
    assert_eq!(
        verdict(
            &[&doc],
            ALICE,
            Action::DecommissionMember,
            "stratum:member/n-a"
        ),
        Verdict::Denied
    );
    assert_eq!(
        verdict(&[&doc], ALICE, Action::AdmitMember, INSTALL),
        Verdict::Allowed
    );
}

#[test]
fn an_explicit_deny_beats_an_allow_in_another_document_in_any_order() {
    let (a, d) = (allow(&["cluster:*"]), deny(&["cluster:Decommission*"]));
    let r = "stratum:member/n-a";
    assert_eq!(
        verdict(&[&a, &d], ALICE, Action::DecommissionMember, r),
        Verdict::Denied
    );
    assert_eq!(
        verdict(&[&d, &a], ALICE, Action::DecommissionMember, r),
        Verdict::Denied
    );
    assert_eq!(
        verdict(&[&d, &a], ALICE, Action::GetMember, r),
        Verdict::Allowed
    );
}

#[test]
fn without_an_allow_nothing_is_allowed() {
    assert_eq!(
        verdict(&[], ALICE, Action::GetMember, "stratum:member/n-a"),
        Verdict::NotAllowed
    );
    let other = allow(&["upgrade:*"]);
    assert_eq!(
        verdict(&[&other], ALICE, Action::GetMember, "stratum:member/n-a"),
        Verdict::NotAllowed
    );
    // A deny of something else does not allow anything either.
    let d = deny(&["upgrade:*"]);
    assert_eq!(
        verdict(&[&d], ALICE, Action::GetMember, "stratum:member/n-a"),
        Verdict::NotAllowed
    );
}

#[test]
fn star_matches_every_action_on_every_resource() {
    let all = allow(&["*"]);
    for a in Action::ALL {
        for r in [INSTALL.to_owned(), resource_for(a, "n-a")] {
            assert_eq!(
                verdict(&[&all], ALICE, a, &r),
                Verdict::Allowed,
                "{a:?} on {r}"
            );
        }
    }
}

#[test]
fn a_service_wildcard_matches_that_service_only() {
    let cluster = allow(&["cluster:*"]);
    assert_eq!(
        verdict(&[&cluster], ALICE, Action::AdmitMember, INSTALL),
        Verdict::Allowed
    );
    assert_eq!(
        verdict(&[&cluster], ALICE, Action::CancelUpgrade, INSTALL),
        Verdict::NotAllowed
    );
    for a in Action::ALL {
        let expected = if a.name().starts_with("cluster:") {
            Verdict::Allowed
        } else {
            Verdict::NotAllowed
        };
        assert_eq!(verdict(&[&cluster], ALICE, a, INSTALL), expected, "{a:?}");
    }
}

#[test]
fn a_verb_wildcard_matches_across_services() {
    let getters = allow(&["*:Get*"]);
    let r = "stratum:member/n-a";
    assert_eq!(
        verdict(&[&getters], ALICE, Action::GetMember, r),
        Verdict::Allowed
    );
    assert_eq!(
        verdict(&[&getters], ALICE, Action::GetUpgrade, INSTALL),
        Verdict::Allowed
    );
    assert_eq!(
        verdict(&[&getters], ALICE, Action::GetPolicy, INSTALL),
        Verdict::Allowed
    );
    assert_eq!(
        verdict(&[&getters], ALICE, Action::ListMembers, INSTALL),
        Verdict::NotAllowed
    );
    assert_eq!(
        verdict(&[&getters], ALICE, Action::AdmitMember, INSTALL),
        Verdict::NotAllowed
    );
}

#[test]
fn resource_patterns_restrict_a_statement_to_their_resources() {
    let some = identity("Allow", &["cluster:GetMember"], &["stratum:member/n-*"]);
    let get = Action::GetMember;
    assert_eq!(
        verdict(&[&some], ALICE, get, "stratum:member/n-a"),
        Verdict::Allowed
    );
    assert_eq!(
        verdict(&[&some], ALICE, get, "stratum:member/m-a"),
        Verdict::NotAllowed
    );
    assert_eq!(verdict(&[&some], ALICE, get, INSTALL), Verdict::NotAllowed);
    let exact = identity("Deny", &["*"], &["stratum:member/n-a"]);
    assert_eq!(
        verdict(&[&allow(&["*"]), &exact], ALICE, get, "stratum:member/n-ab"),
        Verdict::Allowed
    );
    assert_eq!(
        verdict(&[&allow(&["*"]), &exact], ALICE, get, "stratum:member/n-a"),
        Verdict::Denied
    );
}

#[test]
fn node_id_stands_for_the_calling_node_only() {
    let own = identity(
        "Allow",
        &["cluster:ReportJoinProgress"],
        &["stratum:member/${nodeId}"],
    );
    let act = Action::ReportJoinProgress;
    assert_eq!(
        verdict(&[&own], NODE_A, act, "stratum:member/n-a"),
        Verdict::Allowed
    );
    assert_eq!(
        verdict(&[&own], NODE_A, act, "stratum:member/n-b"),
        Verdict::NotAllowed
    );
    assert_eq!(
        verdict(&[&own], "node/n-b", act, "stratum:member/n-b"),
        Verdict::Allowed
    );
    // The placeholder matches nothing for a caller that is not a node, even
    // one whose name looks like the node's, and is never taken literally.
    assert_eq!(
        verdict(&[&own], "user/n-a", act, "stratum:member/n-a"),
        Verdict::NotAllowed
    );
    assert_eq!(
        verdict(&[&own], "stratum-installer", act, "stratum:member/n-a"),
        Verdict::NotAllowed
    );
    assert_eq!(
        verdict(&[&own], "user/n-a", act, "stratum:member/${nodeId}"),
        Verdict::NotAllowed
    );
}

#[test]
fn resource_policy_principals_restrict_who_a_statement_applies_to() {
    let admin = allow(&["*"]);
    let no_bob = member_policy("Deny", &["cluster:DecommissionMember"], &[BOB]);
    let r = "stratum:member/n-a";
    assert_eq!(
        verdict(&[&admin, &no_bob], BOB, Action::DecommissionMember, r),
        Verdict::Denied
    );
    assert_eq!(
        verdict(&[&admin, &no_bob], ALICE, Action::DecommissionMember, r),
        Verdict::Allowed
    );
    let ops = member_policy("Allow", &["cluster:GetMember"], &["user/ops-*"]);
    assert_eq!(
        verdict(&[&ops], "user/ops-1", Action::GetMember, r),
        Verdict::Allowed
    );
    assert_eq!(
        verdict(&[&ops], ALICE, Action::GetMember, r),
        Verdict::NotAllowed
    );
}

// ---------------------------------------------------------------------------
// Managed policies
// ---------------------------------------------------------------------------

#[test]
fn every_managed_policy_parses() {
    for n in MANAGED_POLICIES {
        let doc = managed_policy(n).unwrap_or_else(|| panic!("{n} does not parse"));
        assert!(!doc.statements.is_empty(), "{n}");
        assert!(managed_document(n).is_some(), "{n}");
    }
    assert!(managed_policy("Nope").is_none());
    assert!(managed_document("Nope").is_none());
    assert_eq!(
        MANAGED_POLICIES.iter().collect::<HashSet<_>>().len(),
        MANAGED_POLICIES.len()
    );
}

#[test]
fn administrator_access_allows_every_action_on_any_resource() {
    let admin = managed(ADMINISTRATOR_ACCESS);
    for a in Action::ALL {
        for r in [
            INSTALL.to_owned(),
            resource_for(a, "n-a"),
            resource_for(a, "n-b"),
        ] {
            assert_eq!(
                verdict(&[admin], ADMIN, a, &r),
                Verdict::Allowed,
                "{a:?} on {r}"
            );
        }
    }
}

#[test]
fn read_only_allows_reads_and_no_change() {
    let ro = managed("ReadOnly");
    for a in [
        Action::GetMember,
        Action::ListUpgrades,
        Action::ListMembers,
        Action::GetUpgrade,
    ] {
        let r = resource_for(a, "n-a");
        assert_eq!(verdict(&[ro], ALICE, a, &r), Verdict::Allowed, "{a:?}");
    }
    for a in [
        Action::AdmitMember,
        Action::CancelUpgrade,
        Action::DecommissionMember,
        Action::CreateToken,
        Action::ReadEvents,
    ] {
        let r = resource_for(a, "n-a");
        assert_eq!(verdict(&[ro], ALICE, a, &r), Verdict::NotAllowed, "{a:?}");
    }
}

#[test]
fn cluster_operator_runs_the_cluster_but_not_iam() {
    let op = managed("ClusterOperator");
    for a in [
        Action::AdmitMember,
        Action::DecommissionMember,
        Action::CreateUpgrade,
        Action::CancelUpgrade,
        Action::RegisterRelease,
        Action::ReadEvents,
    ] {
        let r = resource_for(a, "n-a");
        assert_eq!(verdict(&[op], ALICE, a, &r), Verdict::Allowed, "{a:?}");
    }
    for a in [Action::CreateToken, Action::CreatePolicy] {
        assert_eq!(
            verdict(&[op], ALICE, a, INSTALL),
            Verdict::NotAllowed,
            "{a:?}"
        );
    }
}

#[test]
fn node_agent_reports_for_its_own_member_only() {
    let agent = managed("NodeAgent");
    for a in [
        Action::ReportJoinProgress,
        Action::ReportJoinFailure,
        Action::ReportAppliedGeneration,
        Action::ReportNodeProgress,
    ] {
        let own = resource_for(a, "n-a");
        let other = resource_for(a, "n-b");
        assert_eq!(
            verdict(&[agent], NODE_A, a, &own),
            Verdict::Allowed,
            "{a:?} on {own}"
        );
        assert_eq!(
            verdict(&[agent], NODE_A, a, &other),
            Verdict::NotAllowed,
            "{a:?} on {other}"
        );
        assert_eq!(
            verdict(&[agent], "node/n-b", a, &other),
            Verdict::Allowed,
            "{a:?}"
        );
    }
    assert_eq!(
        resource_for(Action::ReportNodeProgress, "n-a"),
        format!("stratum:upgrade/{UPG}/node/n-a")
    );
}

#[test]
fn node_agent_reads_the_transport_admission_of_any_node() {
    // The listener on node A asks about peer B, and about nodes that are
    // no member at all: those get the refusal, never a 403.
    let agent = managed("NodeAgent");
    for node in ["n-a", "n-b", "n-never-admitted"] {
        let r = resource_for(Action::GetTransportAdmission, node);
        assert_eq!(
            verdict(&[agent], NODE_A, Action::GetTransportAdmission, &r),
            Verdict::Allowed,
            "{r}"
        );
    }
    // Reading another member's whole record is still not its business.
    let other = resource_for(Action::GetMember, "n-b");
    assert_eq!(
        verdict(&[agent], NODE_A, Action::GetMember, &other),
        Verdict::NotAllowed
    );
}

#[test]
fn node_agent_is_not_an_operator() {
    let agent = managed("NodeAgent");
    for a in [
        Action::AdmitMember,
        Action::UpdateMember,
        Action::DecommissionMember,
        Action::GetMembership,
        Action::GetRunningRelease,
        Action::ListMembers,
        Action::ReportBackup,
        Action::CreateUpgrade,
        Action::CancelUpgrade,
        Action::CreateToken,
    ] {
        let r = resource_for(a, "n-a");
        assert_eq!(
            verdict(&[agent], NODE_A, a, &r),
            Verdict::NotAllowed,
            "{a:?} on {r}"
        );
    }
}

#[test]
fn node_agent_held_by_a_user_reports_for_no_member() {
    let agent = managed("NodeAgent");
    let r = resource_for(Action::ReportJoinProgress, "n-a");
    assert_eq!(
        verdict(&[agent], "user/n-a", Action::ReportJoinProgress, &r),
        Verdict::NotAllowed
    );
}

// ---------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------

#[test]
fn issuing_a_token_appends_token_issued() {
    let mut s = State::default();
    let expires = t0() + Duration::days(1);
    let d = run(
        &mut s,
        issue("tok-1", ALICE, 1, &["ReadOnly"], Some(expires)),
    );
    assert_eq!(
        d.events,
        vec![DomainEvent::TokenIssued(TokenIssued {
            token_id: "tok-1".into(),
            principal: ALICE.into(),
            verifier: crate::iam::SecretVerifier::Sha256([1; 32]),
            policies: vec!["ReadOnly".into()],
            expires_at: Some(expires),
        })]
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
    let r = refused(&State::default(), issue("tok-1", ALICE, 1, &["Nope"], None));
    assert_invalid(&r, &["policies[0]"]);
    let r = refused(
        &State::default(),
        issue("tok-1", ALICE, 1, &["ReadOnly", "Nope"], None),
    );
    assert_invalid(&r, &["policies[1]"]);
}

#[test]
fn a_token_may_carry_a_custom_policy_once_it_exists() {
    let mut s = State::default();
    run(&mut s, create_policy("UpgradeViewers", good_document()));
    let d = run(&mut s, issue("tok-1", ALICE, 1, &["UpgradeViewers"], None));
    assert_eq!(d.events.len(), 1, "{d:?}");
}

#[test]
fn a_token_must_expire_in_the_future() {
    for at in [t0() - Duration::seconds(1), t0()] {
        let r = refused(
            &State::default(),
            issue("tok-1", ALICE, 1, &["ReadOnly"], Some(at)),
        );
        assert_invalid(&r, &["expiresAt"]);
    }
}

#[test]
fn a_token_needs_a_valid_principal() {
    for p in ["alice", "node/N_1", "user/", "group/ops"] {
        let r = refused(&State::default(), issue("tok-1", p, 1, &["ReadOnly"], None));
        assert_invalid(&r, &["principal"]);
    }
    let r = refused(
        &State::default(),
        IamCommand::IssueToken {
            token_id: "tok-1".into(),
            principal: None,
            verifier: crate::iam::SecretVerifier::Sha256([1; 32]),
            policies: vec!["ReadOnly".into()],
            expires_at: None,
        },
    );
    assert_invalid(&r, &["principal"]);
}

#[test]
fn a_token_request_lists_every_bad_field_at_once() {
    let r = refused(
        &State::default(),
        issue(
            "tok-1",
            "alice",
            1,
            &["Nope"],
            Some(t0() - Duration::hours(1)),
        ),
    );
    assert_invalid(&r, &["principal", "expiresAt", "policies[0]"]);
}

#[test]
fn a_token_id_or_secret_cannot_be_reused() {
    let mut s = State::default();
    run(&mut s, issue("tok-1", ALICE, 1, &["ReadOnly"], None));
    let r = refused(&s, issue("tok-1", ALICE, 2, &["ReadOnly"], None));
    assert_eq!(r.code, ErrorCode::VersionConflict, "{r:?}");
    let r = refused(&s, issue("tok-2", BOB, 1, &["ReadOnly"], None));
    assert_eq!(r.code, ErrorCode::VersionConflict, "{r:?}");
}

#[test]
fn revoking_an_unknown_token_is_not_found() {
    let r = refused(&State::default(), revoke("tok-1"));
    assert_eq!(r.code, ErrorCode::NotFound, "{r:?}");
}

#[test]
fn revoking_a_token_appends_token_revoked_and_invalidates_it() {
    let mut s = State::default();
    run(&mut s, issue("tok-1", ALICE, 1, &["ReadOnly"], None));
    let d = run(&mut s, revoke("tok-1"));
    assert_eq!(
        d.events,
        vec![DomainEvent::TokenRevoked(TokenRevoked {
            token_id: "tok-1".into(),
        })]
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
    let mut s = State::default();
    run(&mut s, issue("tok-1", ALICE, 1, &["ReadOnly"], None));
    run(&mut s, revoke("tok-1"));
    let revoked_at = token(&s, "tok-1").revoked_at;
    let d = run(&mut s, revoke("tok-1"));
    assert_unchanged(&d, Subject::Token("tok-1".into()));
    assert_eq!(token(&s, "tok-1").revoked_at, revoked_at);
}

#[test]
fn a_token_is_valid_until_it_expires() {
    let mut s = State::default();
    let expires = t0() + Duration::hours(1);
    run(
        &mut s,
        issue("tok-1", ALICE, 1, &["ReadOnly"], Some(expires)),
    );
    run(&mut s, issue("tok-2", BOB, 2, &["ReadOnly"], None));
    let t = token(&s, "tok-1");
    assert!(t.valid_at(t0()));
    assert!(t.valid_at(expires - Duration::seconds(1)));
    assert!(!t.valid_at(expires));
    assert!(!t.valid_at(expires + Duration::days(1)));
    assert!(token(&s, "tok-2").valid_at(t0() + Duration::days(3650)));
}

// ---------------------------------------------------------------------------
// SetPrincipalPolicies
// ---------------------------------------------------------------------------

#[test]
fn principal_policies_need_a_valid_principal_and_known_policies() {
    let r = refused(
        &State::default(),
        set_principal_policies("alice", &["ReadOnly"]),
    );
    assert_invalid(&r, &["principal"]);
    let r = refused(
        &State::default(),
        set_principal_policies(ALICE, &["ReadOnly", "Nope"]),
    );
    assert_invalid(&r, &["policies[1]"]);
    let r = refused(
        &State::default(),
        IamCommand::SetPrincipalPolicies {
            principal: "alice".into(),
            policies: None,
        },
    );
    assert_invalid(&r, &["principal", "policies"]);
}

#[test]
fn setting_principal_policies_appends_and_attaches_them() {
    let mut s = State::default();
    run(&mut s, create_policy("UpgradeViewers", good_document()));
    let d = run(
        &mut s,
        set_principal_policies(ALICE, &["ReadOnly", "UpgradeViewers"]),
    );
    assert_eq!(
        d.events,
        vec![DomainEvent::PrincipalPoliciesSet(PrincipalPoliciesSet {
            principal: ALICE.into(),
            policies: vec!["ReadOnly".into(), "UpgradeViewers".into()],
        })]
    );
    assert_eq!(d.subject, Subject::Principal(ALICE.into()));
    let a = &s.iam.principal_policies[ALICE];
    assert_eq!(a.policies, vec!["ReadOnly", "UpgradeViewers"]);
    assert_eq!(a.set_by, ADMIN);
}

#[test]
fn setting_the_same_principal_policies_again_appends_nothing() {
    let mut s = State::default();
    run(&mut s, set_principal_policies(NODE_A, &["NodeAgent"]));
    let d = run(&mut s, set_principal_policies(NODE_A, &["NodeAgent"]));
    assert_unchanged(&d, Subject::Principal(NODE_A.into()));
    let d = run(
        &mut s,
        set_principal_policies(NODE_A, &["NodeAgent", "ReadOnly"]),
    );
    assert_eq!(d.events.len(), 1, "a different list is a change: {d:?}");
}

// ---------------------------------------------------------------------------
// The catalog
// ---------------------------------------------------------------------------

#[test]
fn every_action_has_a_unique_name() {
    let names: HashSet<&str> = Action::ALL.iter().map(|a| a.name()).collect();
    assert_eq!(names.len(), Action::ALL.len());
    let actions: HashSet<Action> = Action::ALL.into_iter().collect();
    assert_eq!(actions.len(), Action::ALL.len());
}

#[test]
fn every_action_name_has_a_known_service_prefix() {
    for a in Action::ALL {
        let (svc, verb) = a
            .name()
            .split_once(':')
            .unwrap_or_else(|| panic!("{a:?} has no service"));
        assert!(
            ["cluster", "upgrade", "release", "audit", "iam"].contains(&svc),
            "{a:?}"
        );
        assert!(!verb.is_empty() && !verb.contains(['*', '?', ':']), "{a:?}");
    }
}

#[test]
fn member_actions_act_on_the_member() {
    let member: Vec<Action> = Action::ALL
        .into_iter()
        .filter(|a| a.resource_type() == ResourceType::Member)
        .collect();
    assert!(member.contains(&Action::DecommissionMember));
    assert!(member.contains(&Action::ReportJoinProgress));
    for a in member {
        assert_eq!(resource_for(a, "n-a"), "stratum:member/n-a", "{a:?}");
        assert_eq!(a.resource(|_| None), INSTALL, "{a:?} without a node");
    }
}

#[test]
fn upgrade_actions_act_on_the_upgrade_or_a_node_of_it() {
    assert_eq!(
        resource_for(Action::ReportNodeProgress, "n-a"),
        format!("stratum:upgrade/{UPG}/node/n-a")
    );
    let only_id = |k: &str| (k == "id").then_some(UPG);
    assert_eq!(
        Action::GetUpgrade.resource(only_id),
        format!("stratum:upgrade/{UPG}")
    );
    assert_eq!(
        Action::GetRelease.resource(|k| (k == "version").then_some("1.1.0")),
        "stratum:release/1.1.0"
    );
}

#[test]
fn install_scope_actions_act_on_the_install() {
    // The seed: cancel is install-scope even though its path names an
    // upgrade.
    for a in [
        Action::CancelUpgrade,
        Action::CreateToken,
        Action::AdmitMember,
        Action::CreateUpgrade,
        Action::ListMembers,
    ] {
        assert_eq!(a.resource_type(), ResourceType::Install, "{a:?}");
        assert_eq!(resource_for(a, "n-a"), INSTALL, "{a:?}");
    }
}

#[test]
fn resource_policy_keys_name_the_member_or_the_upgrade() {
    assert_eq!(
        Action::DecommissionMember.resource_policy_key(|k| (k == "nodeId").then_some("n-a")),
        Some("member/n-a".to_owned())
    );
    let both = |k: &str| match k {
        "nodeId" => Some("n-a"),
        "id" => Some(UPG),
        _ => None,
    };
    assert_eq!(
        Action::ReportNodeProgress.resource_policy_key(both),
        Some(format!("upgrade/{UPG}"))
    );
    assert_eq!(Action::CancelUpgrade.resource_policy_key(both), None);
    assert_eq!(Action::CreateToken.resource_policy_key(both), None);
    assert_eq!(Action::GetMember.resource_policy_key(|_| None), None);
    assert_eq!(
        resource_key(ResourceType::Member, "n-a"),
        Action::GetMember.resource_policy_key(both).unwrap()
    );
}

#[test]
fn a_resource_policy_statement_must_name_its_principals() {
    // Otherwise it would apply to every caller, other nodes' agents included.
    let doc =
        json!({"statements": [{"effect": "Allow", "actions": ["cluster:DecommissionMember"]}]});
    assert_eq!(findings(&doc, Some(ResourceType::Member)), vec![invalid(0)]);
}

#[test]
fn nobody_grants_a_policy_they_do_not_hold() {
    use crate::testing::when_holding;
    let s = State::default();
    let grant = |held: &[&str], policies: &[&str]| {
        when_holding(
            &s,
            ALICE,
            held,
            cmd(IamCommand::IssueToken {
                token_id: "tok-9".into(),
                principal: Some(BOB.into()),
                verifier: crate::iam::SecretVerifier::Sha256([9; 32]),
                policies: policies.iter().map(|p| (*p).to_owned()).collect(),
                expires_at: None,
            }),
        )
    };
    let r = grant(&["ClusterOperator"], &["AdministratorAccess"]).unwrap_err();
    assert_eq!(r.code, ErrorCode::AccessDenied);
    assert_eq!(
        r.details.as_ref().unwrap()["notHeld"],
        json!(["AdministratorAccess"])
    );
    assert_eq!(r.details.as_ref().unwrap()["action"], "iam:CreateToken");
    assert!(grant(&["ClusterOperator"], &["ClusterOperator"]).is_ok());
    assert!(grant(&["AdministratorAccess"], &["NodeAgent", "Auditor"]).is_ok());
    let r = when_holding(
        &s,
        ALICE,
        &["ReadOnly"],
        cmd(IamCommand::SetPrincipalPolicies {
            principal: ALICE.into(),
            policies: Some(vec!["AdministratorAccess".into()]),
        }),
    )
    .unwrap_err();
    assert_eq!(
        r.code,
        ErrorCode::AccessDenied,
        "no attaching more to oneself"
    );
}

#[test]
fn a_resource_pattern_names_a_resource_stratum_has() {
    for good in [
        "*",
        "stratum:*",
        "stratum:install",
        "stratum:member/n-*",
        "stratum:upgrade/*/node/n-a",
        "stratum:release/1.*",
    ] {
        let doc =
            json!({"statements": [{"effect": "Allow", "actions": ["*"], "resources": [good]}]});
        assert!(validate_document(&doc, None).is_ok(), "{good}");
    }
    for bad in ["stratum:membr/*", "member/n-a", "stratum:"] {
        let doc = json!({"statements": [{"effect": "Allow", "actions": ["cluster:GetMember"], "resources": [bad]}]});
        assert_eq!(findings(&doc, None), vec![invalid(0)], "{bad}");
    }
}

// ---------------------------------------------------------------------------
// The gate's decision over the state (`Iam::authorize`)
// ---------------------------------------------------------------------------

fn gate(s: &State, principal: &str, token: &[&str], action: Action, node: &str) -> Authorization {
    let token: Vec<String> = token.iter().map(|p| (*p).to_owned()).collect();
    let resource = resource_for(action, node);
    let key = action.resource_policy_key(|k| (k == "nodeId").then_some(node));
    s.iam
        .authorize(principal, &token, action, &resource, key.as_deref())
}

/// Member `n-a` and the custom policy `member-reader` (GetMember on any).
fn with_member_reader_policy() -> State {
    let mut s = with_member();
    run(
        &mut s,
        create_policy(
            "member-reader",
            json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:GetMember"], "resources": ["*"]}]}),
        ),
    );
    s
}

#[test]
fn the_gate_counts_the_token_the_attachment_and_the_resource_policy() {
    let mut s = with_member_reader_policy();
    assert_eq!(
        gate(&s, ALICE, &[], Action::GetMember, "n-a"),
        Err(Verdict::NotAllowed)
    );
    run(&mut s, set_principal_policies(ALICE, &["member-reader"]));
    assert_eq!(
        gate(&s, ALICE, &["ReadOnly"], Action::GetMember, "n-a"),
        Ok(vec!["ReadOnly".to_owned(), "member-reader".to_owned()]),
        "every held name, sorted, once"
    );
    run(
        &mut s,
        set_member_policy(
            "n-a",
            json!({"statements": [
        {"effect": "Deny", "actions": ["cluster:GetMember"], "principals": [ALICE]}]}),
        ),
    );
    assert_eq!(
        gate(&s, ALICE, &["ReadOnly"], Action::GetMember, "n-a"),
        Err(Verdict::Denied),
        "the member's own policy denies, and a Deny wins"
    );
    assert!(gate(&s, BOB, &["ReadOnly"], Action::GetMember, "n-a").is_ok());
}

#[test]
fn a_detached_policy_no_longer_counts_at_the_gate() {
    let mut s = with_member_reader_policy();
    run(&mut s, set_principal_policies(ALICE, &["member-reader"]));
    assert!(gate(&s, ALICE, &[], Action::GetMember, "n-a").is_ok());
    run(&mut s, set_principal_policies(ALICE, &[]));
    assert_eq!(
        gate(&s, ALICE, &[], Action::GetMember, "n-a"),
        Err(Verdict::NotAllowed)
    );
}
