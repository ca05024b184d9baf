//! Evaluating policies, and the gate's decision over the state.

use super::support::iam::*;

// ---------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------

#[test]
fn an_explicit_deny_beats_an_allow_in_the_same_document() {
    let doc = accepted(
        &json!({"statements": [
            {"effect": "Allow", "actions": ["*"], "resources": ["*"]},
            {"effect": "Deny", "actions": ["cluster:DecommissionMember"], "resources": ["*"]},
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
    with_member().and(&[policy_created(
        "member-reader",
        &json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:GetMember"], "resources": ["*"]}]}),
    )])
}

#[test]
fn the_gate_counts_the_token_the_attachment_and_the_resource_policy() {
    let mut s = with_member_reader_policy();
    assert_eq!(
        gate(&s, ALICE, &[], Action::GetMember, "n-a"),
        Err(Verdict::NotAllowed)
    );
    apply(&mut s, ADMIN, &[attached(ALICE, &["member-reader"])]);
    assert_eq!(
        gate(&s, ALICE, &["ReadOnly"], Action::GetMember, "n-a"),
        Ok(vec!["ReadOnly".to_owned(), "member-reader".to_owned()]),
        "every held name, sorted, once"
    );
    apply(
        &mut s,
        ADMIN,
        &[DomainEvent::ResourcePolicySet(ResourcePolicySet {
            resource: "member/n-a".into(),
            document: canonical(&json!({"statements": [
        {"effect": "Deny", "actions": ["cluster:GetMember"], "principals": [ALICE], "resources": ["*"]}]})),
        })],
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
    let s = with_member_reader_policy().and(&[attached(ALICE, &["member-reader"])]);
    assert!(gate(&s, ALICE, &[], Action::GetMember, "n-a").is_ok());
    let s = s.and(&[attached(ALICE, &[])]);
    assert_eq!(
        gate(&s, ALICE, &[], Action::GetMember, "n-a"),
        Err(Verdict::NotAllowed)
    );
}
