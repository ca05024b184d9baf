//! The managed policies.

use super::support::iam::*;

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

#[test]
fn only_an_administrator_acknowledges_a_checkpoint_fork() {
    let a = Action::AcknowledgeFork;
    for (policy, want) in [
        ("AdministratorAccess", Verdict::Allowed),
        ("ClusterOperator", Verdict::NotAllowed),
        ("Auditor", Verdict::NotAllowed),
        ("ReadOnly", Verdict::NotAllowed),
        ("NodeAgent", Verdict::NotAllowed),
    ] {
        assert_eq!(
            verdict(&[managed(policy)], ALICE, a, INSTALL),
            want,
            "{policy}"
        );
    }
    assert_eq!(
        verdict(&[managed("Auditor")], ALICE, Action::ReadEvents, INSTALL),
        Verdict::Allowed
    );
}
