//! The IAM module's own rules (bootstrap, principals, actions), tested on its
//! values alone.

use super::*;
use crate::event::DomainEvent;
use crate::state::{CommandContext, Decision, State};

fn bootstrap(state: &Iam, log_is_empty: bool) -> Decision {
    let whole = State {
        position: if log_is_empty { 0 } else { 1 },
        ..State::default()
    };
    state
        .decide(
            &whole,
            &IamCommand::Bootstrap {
                token_id: "tok-1".into(),
                verifier: SecretVerifier::Sha256([1; 32]),
            },
            &CommandContext {
                now: crate::testing::t0(),
                principal: SERVICE_PRINCIPAL.into(),
                held_policies: None,
            },
        )
        .unwrap()
}

#[test]
fn bootstrap_issues_the_admin_token_only_on_an_empty_log() {
    let d = bootstrap(&Iam::default(), true);
    let [DomainEvent::TokenIssued(t)] = d.events.as_slice() else {
        panic!("one token: {d:?}")
    };
    assert_eq!(t.principal, BOOTSTRAP_PRINCIPAL);
    assert_eq!(t.policies, vec![ADMINISTRATOR_ACCESS.to_owned()]);
    assert!(bootstrap(&Iam::default(), false).events.is_empty());
}

#[test]
fn principals_are_users_nodes_or_the_installer() {
    assert!(valid_principal("user/alice"));
    assert!(valid_principal("node/n-msst0002"));
    assert!(valid_principal("stratum-installer"));
    assert!(!valid_principal("alice"));
    assert!(!valid_principal("node/N_1"));
}

#[test]
fn every_action_names_its_service() {
    for a in Action::ALL {
        let (svc, name) = a.name().split_once(':').unwrap();
        assert!(["cluster", "audit", "upgrade", "release", "iam", "system"].contains(&svc));
        assert!(name.chars().next().unwrap().is_ascii_uppercase());
    }
}
