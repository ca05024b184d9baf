//! The action catalog.

use super::support::iam::*;

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
            ["cluster", "upgrade", "release", "audit", "iam", "system"].contains(&svc),
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
    let doc = json!({"statements": [{"effect": "Allow", "actions": ["cluster:DecommissionMember"], "resources": ["*"]}]});
    assert_eq!(findings(&doc, Some(ResourceType::Member)), vec![invalid(0)]);
}

#[test]
fn nobody_grants_a_policy_they_do_not_hold() {
    let s = State::default();
    let grant = |held: &[&str], policies: &[&str]| {
        s.when_holding(
            ALICE,
            held,
            IamCommand::IssueToken {
                token_id: "tok-9".into(),
                principal: Some(BOB.into()),
                verifier: crate::iam::SecretVerifier::Sha256([9; 32]),
                policies: policies.iter().map(|p| (*p).to_owned()).collect(),
                expires_at: None,
            },
        )
    };
    let r =
        grant(&["ClusterOperator"], &["AdministratorAccess"]).then_refused(ErrorCode::AccessDenied);
    assert_eq!(
        r.details.as_ref().unwrap()["notHeld"],
        json!(["AdministratorAccess"])
    );
    assert_eq!(r.details.as_ref().unwrap()["action"], "iam:CreateToken");
    grant(&["ClusterOperator"], &["ClusterOperator"]).decided();
    grant(&["AdministratorAccess"], &["NodeAgent", "Auditor"]).decided();
    s.when_holding(
        ALICE,
        &["ReadOnly"],
        IamCommand::SetPrincipalPolicies {
            principal: ALICE.into(),
            policies: Some(vec!["AdministratorAccess".into()]),
        },
    )
    .then_refused(ErrorCode::AccessDenied);
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
