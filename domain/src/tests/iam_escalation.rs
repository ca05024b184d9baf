//! Privilege escalation, tried as the IAM escalation catalogues try it
//! (one permission that creates, attaches or grants, and every sequence of
//! grants it allows): a principal that starts with one such action never
//! ends with power it did not start with.
//!
//! The world: `user/ops-lead` with `AdministratorAccess` attached, member
//! `n-1`, and `user/eve` holding a token whose only policy allows one
//! action. Each round, every identity the attacker holds (eve's token, and
//! every token it made since) tries every move of the catalogue that its
//! policies authorize (as the gate would), decided as the API decides it
//! (the caller's held policies in the context). A token it makes is a new
//! identity for the next round. After three rounds, no identity may be
//! allowed an action on a resource that eve's first token was not.

use std::collections::BTreeSet;

use super::support::iam::*;

const EVE: &str = "user/eve";
const OPS_LEAD: &str = "user/ops-lead";
const OTHER: &str = "user/eve2";
const NODE: &str = "node/n-1";
const PRINCIPALS: [&str; 4] = [EVE, OPS_LEAD, OTHER, NODE];
const RESOURCES: [&str; 3] = [
    "stratum:install",
    "stratum:member/n-1",
    "stratum:release/2026.11.1",
];

/// Someone holding these token policies as this principal.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Identity {
    principal: String,
    policies: Vec<String>,
}

/// The policy that allows one action on everything.
fn only(action: Action) -> String {
    format!("Only-{}", action.name().replace(':', "-"))
}

fn world(action: Action) -> State {
    // The administrator, as the bootstrap makes it.
    with_member_n1().and(&[
        issued("tok-admin", ADMIN, 200, &["AdministratorAccess"], None),
        DomainEvent::PrincipalPoliciesSet(PrincipalPoliciesSet {
            principal: OPS_LEAD.into(),
            policies: vec!["AdministratorAccess".into()],
        }),
        policy_created(
            &only(action),
            &json!({"statements": [{"effect": "Allow", "actions": [action.name()], "resources": ["*"]}]}),
        ),
    ])
}

fn with_member_n1() -> State {
    given(&[admitted("n-1", Role::Hybrid, 1)])
}

/// Every move of the catalogue, with the action that gates it and the
/// path parameter it names.
fn moves(round: usize) -> Vec<(Action, Option<&'static str>, IamCommand)> {
    let lists: [&[&str]; 6] = [
        &[],
        &["AdministratorAccess"],
        &["ClusterOperator"],
        &["NodeAgent"],
        &["Everything"],
        &["AdministratorAccess", "ReadOnly"],
    ];
    let mut out = Vec::new();
    for (i, principal) in PRINCIPALS.iter().enumerate() {
        for (j, list) in lists.iter().enumerate() {
            out.push((
                Action::CreateToken,
                None,
                IamCommand::IssueToken {
                    token_id: format!("tok-{round}-{i}-{j}"),
                    principal: Some((*principal).into()),
                    verifier: SecretVerifier::Sha256([(round * 64 + i * 8 + j) as u8; 32]),
                    policies: list.iter().map(|p| (*p).to_owned()).collect(),
                    expires_at: None,
                },
            ));
            out.push((
                Action::SetPrincipalPolicies,
                None,
                set_principal_policies(principal, list),
            ));
        }
    }
    // Detaching the administrator's policy is a grant of nothing, and must
    // not be a way to change who administers either.
    out.push((
        Action::CreatePolicy,
        None,
        create_policy(
            "Everything",
            json!({"statements": [{"effect": "Allow", "actions": ["*"], "resources": ["*"]}]}),
        ),
    ));
    for principals in [
        json!(["*"]),
        json!([EVE]),
        json!([OTHER]),
        json!(["user/*"]),
    ] {
        out.push((
            Action::SetMemberPolicy,
            Some("n-1"),
            set_member_policy(
                "n-1",
                json!({"statements": [{"effect": "Allow", "actions": ["*"], "resources": ["*"], "principals": principals}]}),
            ),
        ));
    }
    out
}

/// What an identity may do, on the resources of the world.
fn power(s: &State, who: &Identity) -> BTreeSet<(&'static str, &'static str)> {
    let mut p = BTreeSet::new();
    for action in Action::ALL {
        for resource in RESOURCES {
            let key = resource
                .strip_prefix("stratum:member/")
                .map(|n| format!("member/{n}"));
            if s.iam
                .authorize(
                    &who.principal,
                    &who.policies,
                    action,
                    resource,
                    key.as_deref(),
                )
                .is_ok()
            {
                p.insert((action.name(), resource));
            }
        }
    }
    p
}

/// Plays three rounds for the attacker that starts with `action` alone;
/// answers the state and every identity it ended up holding.
fn play(action: Action) -> (State, BTreeSet<Identity>) {
    let mut s = world(action);
    let mut held = BTreeSet::from([Identity {
        principal: EVE.into(),
        policies: vec![only(action)],
    }]);
    for round in 0..3 {
        for who in held.clone() {
            for (gate, param, command) in moves(round) {
                let resource = gate.resource(|k| (k == "nodeId").then_some(param).flatten());
                let key = gate.resource_policy_key(|k| (k == "nodeId").then_some(param).flatten());
                let Ok(names) = s.iam.authorize(
                    &who.principal,
                    &who.policies,
                    gate,
                    &resource,
                    key.as_deref(),
                ) else {
                    continue;
                };
                let issued = match &command {
                    IamCommand::IssueToken {
                        principal,
                        policies,
                        ..
                    } => Some(Identity {
                        principal: principal.clone().unwrap_or_default(),
                        policies: policies.clone(),
                    }),
                    _ => None,
                };
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                if let Ok(d) =
                    crate::testing::when_holding(&s, &who.principal, &names, cmd(command))
                {
                    for e in &d.events {
                        apply(&mut s, &who.principal, std::slice::from_ref(e));
                    }
                    held.extend(issued);
                }
            }
        }
    }
    (s, held)
}

#[test]
fn no_single_grant_action_reaches_more_power_than_it_starts_with() {
    let grants = [
        Action::CreateToken,
        Action::SetPrincipalPolicies,
        Action::SetMemberPolicy,
        Action::SetUpgradePolicy,
        Action::CreatePolicy,
    ];
    for action in grants {
        let start = Identity {
            principal: EVE.into(),
            policies: vec![only(action)],
        };
        let before = power(&world(action), &start);
        let (s, held) = play(action);
        for who in &held {
            let gained: Vec<_> = power(&s, who).difference(&before).cloned().collect();
            assert!(
                gained.is_empty(),
                "starting with {} alone, {who:?} reached {gained:?}",
                action.name()
            );
        }
    }
}

#[test]
fn a_token_for_another_principal_needs_every_policy_that_principal_holds() {
    // The finding: eve, holding only iam:CreateToken, asks for a token of
    // ops-lead, whose attached AdministratorAccess it would carry.
    let s = world(Action::CreateToken);
    let r = s
        .when_holding(
            EVE,
            &[&only(Action::CreateToken)],
            issue("tok-x", OPS_LEAD, 7, &[], None),
        )
        .then_refused(ErrorCode::AccessDenied);
    assert_eq!(
        r.details.as_ref().unwrap()["notHeld"],
        json!(["AdministratorAccess"])
    );
    // Its own token, with what it holds, is fine.
    s.when_holding(
        EVE,
        &[&only(Action::CreateToken)],
        issue("tok-y", EVE, 8, &[&only(Action::CreateToken)], None),
    )
    .decided();
    // An administrator makes ops-lead's token.
    s.when_holding(
        "user/admin",
        &["AdministratorAccess"],
        issue("tok-z", OPS_LEAD, 9, &[], None),
    )
    .decided();
}

#[test]
fn a_resource_policy_gives_only_what_its_setter_holds_there_and_never_to_everyone() {
    let s = world(Action::SetMemberPolicy);
    let setter = only(Action::SetMemberPolicy);
    let set = |principals: Value, actions: Value| {
        s.when_holding(EVE, &[&setter], set_member_policy(
                "n-1",
                json!({"statements": [{"effect": "Allow", "actions": actions, "resources": ["*"], "principals": principals}]}),
            ))
    };
    // The finding: everything to everyone.
    set(json!(["*"]), json!(["*"])).then_refused(ErrorCode::AccessDenied);
    // To one principal, only what the setter holds on n-1.
    let r = set(json!([OTHER]), json!(["cluster:DecommissionMember"])).refusal();
    assert_eq!(
        r.details.as_ref().unwrap()["notHeld"],
        json!(["cluster:DecommissionMember on stratum:member/n-1"])
    );
    set(json!([OTHER]), json!(["cluster:SetMemberPolicy"])).decided();
    // An administrator may allow everyone.
    s.when_holding("user/admin", &["AdministratorAccess"], set_member_policy(
            "n-1",
            json!({"statements": [{"effect": "Allow", "actions": ["cluster:GetMember"], "resources": ["*"], "principals": ["*"]}]}),
        )).decided();
}

#[test]
fn a_grant_carries_the_denies_of_its_granter_and_node_scoped_policies_stay_the_nodes() {
    let s = world(Action::CreateToken).and(&[policy_created(
        "NoDecommission",
        &json!({"statements": [{"effect": "Deny", "actions": ["cluster:DecommissionMember"], "resources": ["*"]}]}),
    )]);
    let held = ["AdministratorAccess", "NoDecommission"];
    // Without the Deny, the administrator's token would escape it.
    let r = s
        .when_holding(
            "user/lead",
            &held,
            issue("tok-a", OTHER, 1, &["AdministratorAccess"], None),
        )
        .refusal();
    assert!(
        r.message.contains("NoDecommission"),
        "the Deny is named: {r:?}"
    );
    s.when_holding(
        "user/lead",
        &held,
        issue(
            "tok-b",
            OTHER,
            2,
            &["AdministratorAccess", "NoDecommission"],
            None,
        ),
    )
    .decided();
    // A user holding NodeAgent holds no node's power: it cannot give it.
    s.when_holding(
        EVE,
        &["NodeAgent", &only(Action::CreateToken)],
        issue("tok-c", NODE, 3, &["NodeAgent"], None),
    )
    .then_refused(ErrorCode::AccessDenied);
}

#[test]
fn grants_on_record_that_break_the_rule_are_findings() {
    let mut s = world(Action::CreateToken);
    // What the old rule let eve make: ops-lead's token.
    apply(
        &mut s,
        EVE,
        &[DomainEvent::TokenIssued(TokenIssued {
            token_id: "tok-old".into(),
            principal: OPS_LEAD.into(),
            verifier: SecretVerifier::Sha256([42; 32]),
            policies: vec![],
            expires_at: None,
        })],
    );
    // And a resource policy for everyone, set by a member-policy setter.
    apply(
        &mut s,
        ADMIN,
        &[DomainEvent::PrincipalPoliciesSet(PrincipalPoliciesSet {
            principal: "user/mallory".into(),
            policies: vec![],
        })],
    );
    apply(
        &mut s,
        "user/mallory",
        &[DomainEvent::ResourcePolicySet(ResourcePolicySet {
            resource: "member/n-1".into(),
            document: canonical(
                &json!({"statements": [{"effect": "Allow", "actions": ["*"], "resources": ["*"], "principals": ["*"]}]}),
            ),
        })],
    );
    let findings = s.iam.grant_findings(&s, t0());
    let kinds: Vec<(&str, &str, &str)> = findings
        .iter()
        .map(|f| (f.kind, f.id.as_str(), f.granted_by.as_str()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("token", "tok-old", EVE),
            ("resourcePolicy", "member/n-1", "user/mallory")
        ],
        "{findings:?}"
    );
    assert_eq!(findings[0].not_held, vec!["AdministratorAccess".to_owned()]);
    // What an administrator granted is no finding.
    assert!(!findings.iter().any(|f| f.id == OPS_LEAD));
}
