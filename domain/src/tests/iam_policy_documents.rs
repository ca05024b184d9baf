//! Validating policy documents (SPEC §6).

use super::support::iam::*;

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
        {"effect": "Allow", "actions": ["cluster:GetMember"], "principals": ["*"], "resources": ["*"]},
        {"effect": "Allow", "actions": ["cluster:Nope", "cluster:GetMember", "compute:CreateVpc", "iam:Nope"], "principals": ["*"], "resources": ["*"]},
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
        {"effect": "Allow", "actions": ["*"], "resources": ["*"]},
        {"effect": "Deny", "resources": ["*"]},
        {"effect": "Deny", "actions": [], "resources": ["*"]},
        {"effect": "Deny", "actions": "cluster:GetMember", "resources": ["*"]},
        {"effect": "Deny", "actions": [1], "resources": ["*"]},
    ]});
    assert_eq!(
        findings(&doc, None),
        vec![invalid(1), invalid(2), invalid(3), invalid(4)]
    );
}

#[test]
fn an_effect_other_than_allow_or_deny_is_a_malformed_statement() {
    for effect in [json!("Maybe"), json!("allow"), json!(true), Value::Null] {
        let doc = json!({"statements": [{"effect": effect, "actions": ["*"], "resources": ["*"]}]});
        assert_eq!(findings(&doc, None), vec![invalid(0)], "{doc}");
    }
    let doc = json!({"statements": [{"actions": ["*"], "resources": ["*"]}]});
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
        json!({"statements": {"effect": "Allow", "actions": ["*"], "resources": ["*"]}}),
        json!({"statements": null}),
    ] {
        assert_eq!(findings(&doc, None), vec![invalid(-1)], "{doc}");
    }
}

#[test]
fn unknown_members_of_the_document_are_invalid_as_a_whole() {
    let doc = json!({"version": "2012-10-17", "statements": [{"effect": "Allow", "actions": ["*"], "resources": ["*"]}]});
    assert_eq!(findings(&doc, None), vec![invalid(-1)]);
}

#[test]
fn unknown_members_of_a_statement_are_invalid_at_that_statement() {
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["*"], "resources": ["*"]},
        {"effect": "Allow", "actions": ["*"], "condition": {"ip": "10.0.0.0/8"}, "resources": ["*"]},
        {"effect": "Allow", "actions": ["*"], "Resources": ["*"], "resources": ["*"]},
    ]});
    assert_eq!(findings(&doc, None), vec![invalid(1), invalid(2)]);
}

#[test]
fn a_statement_that_is_not_an_object_is_invalid_at_its_index() {
    let doc = json!({"statements": [{"effect": "Allow", "actions": ["*"], "resources": ["*"]}, "Allow *"]});
    assert_eq!(findings(&doc, None), vec![invalid(1)]);
}

#[test]
fn principals_belong_in_resource_policies_only() {
    let doc = json!({"statements": [
        {"effect": "Deny", "actions": ["cluster:DecommissionMember"], "principals": [BOB], "resources": ["*"]},
    ]});
    assert_eq!(findings(&doc, None), vec![invalid(0)]);
    let parsed = accepted(&doc, Some(ResourceType::Member));
    assert_eq!(parsed.statements[0].principals, vec![BOB.to_owned()]);
}

#[test]
fn principals_of_a_resource_policy_must_be_a_non_empty_list() {
    for principals in [json!([]), json!(BOB), json!([1])] {
        let doc = json!({"statements": [
            {"effect": "Allow", "actions": ["cluster:GetMember"], "principals": principals, "resources": ["*"]},
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
fn omitted_principals_mean_any() {
    // `resources` may not be left out (see
    // `policy::tests::a_statement_must_name_its_resources_yet_a_recorded_one_without_them_reads_as_written`).
    let doc = accepted(
        &json!({"statements": [{"effect": "Deny", "actions": ["cluster:GetMember"], "resources": ["*"]}]}),
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
        {"effect": "Allow", "actions": ["cluster:*", "*:Get*", "*", "upgrade:Get?pgrade"], "resources": ["*"]},
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
        {"effect": "Allow", "actions": ["cluster:*", "nothing:*", "cluster:Nope*"], "resources": ["*"]},
    ]});
    assert_eq!(
        findings(&doc, None),
        vec![unknown(0, "nothing:*"), unknown(0, "cluster:Nope*")]
    );
}

#[test]
fn other_services_actions_are_known_but_apply_to_no_member() {
    let identity_doc = json!({"statements": [{"effect": "Allow", "actions": ["compute:CreateVpc"], "resources": ["*"]}]});
    assert_eq!(
        accepted(&identity_doc, None).statements[0].actions,
        vec!["compute:CreateVpc"]
    );
    let doc = json!({"statements": [{"effect": "Allow", "actions": ["compute:CreateVpc"], "principals": ["*"], "resources": ["*"]}]});
    assert_eq!(
        findings(&doc, Some(ResourceType::Member)),
        vec![not_applicable(0, "compute:CreateVpc")]
    );
    let doc = json!({"statements": [{"effect": "Allow", "actions": ["storage:*"], "principals": ["*"], "resources": ["*"]}]});
    assert_eq!(
        findings(&doc, Some(ResourceType::Upgrade)),
        vec![not_applicable(0, "storage:*")]
    );
}

#[test]
fn a_resource_policy_accepts_patterns_matching_one_applicable_action() {
    // `cluster:*` matches install actions too, but also member actions.
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:*", "*", "cluster:GetMember", "cluster:Report*"], "principals": ["*"], "resources": ["*"]},
    ]});
    accepted(&doc, Some(ResourceType::Member));
    let doc = json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:AdmitMember", "upgrade:GetUpgrade", "iam:*"], "principals": ["*"], "resources": ["*"]},
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
        {"effect": "Allow", "actions": ["upgrade:ReportNodeProgress", "upgrade:GetUpgrade"], "principals": ["*"], "resources": ["*"]},
        {"effect": "Allow", "actions": ["cluster:GetMember"], "principals": ["*"], "resources": ["*"]},
    ]});
    assert_eq!(
        findings(&doc, Some(ResourceType::Upgrade)),
        vec![not_applicable(1, "cluster:GetMember")]
    );
}
