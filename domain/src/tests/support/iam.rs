//! The helpers of the IAM tests: command builders, and policy documents
//! to validate and evaluate.

pub use super::*;
pub use crate::iam::*;
pub use crate::membership::Role;
pub use crate::policy::*;
pub use crate::release::canonical;

pub const BOB: &str = "user/bob";
pub const NODE_A: &str = "node/n-a";
pub const UPG: &str = "upg-0123456789";

// ---------------------------------------------------------------------------
// Commands and harness helpers
// ---------------------------------------------------------------------------

pub fn create_policy(name: &str, document: Value) -> IamCommand {
    IamCommand::CreatePolicy {
        name: Some(name.into()),
        document: Some(document),
    }
}

pub fn set_member_policy(node_id: &str, document: Value) -> IamCommand {
    IamCommand::SetResourcePolicy {
        resource_type: ResourceType::Member,
        id: node_id.into(),
        document: Some(document),
    }
}

pub fn set_principal_policies(principal: &str, policies: &[&str]) -> IamCommand {
    IamCommand::SetPrincipalPolicies {
        principal: principal.into(),
        policies: Some(policies.iter().map(|p| (*p).to_owned()).collect()),
    }
}

/// A token for `principal`; its secret is `secret` repeated.
pub fn issue(
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

pub fn revoke(token_id: &str) -> IamCommand {
    IamCommand::RevokeToken {
        token_id: token_id.into(),
    }
}

pub fn token<'a>(s: &'a State, token_id: &str) -> &'a Token {
    s.iam
        .tokens
        .get(token_id)
        .unwrap_or_else(|| panic!("no token {token_id}"))
}

/// One admitted member, `n-a`.
pub fn with_member() -> State {
    given(&[admitted("n-a", Role::Hybrid, 1)])
}

// ---------------------------------------------------------------------------
// Policy documents
// ---------------------------------------------------------------------------

/// A finding as (code, statement, action).
pub type Finding = (&'static str, i64, Option<String>);

pub fn findings(doc: &Value, attached_to: Option<ResourceType>) -> Vec<Finding> {
    match validate_document(doc, attached_to) {
        Ok(d) => panic!("{doc} was accepted: {d:?}"),
        Err(issues) => issues
            .into_iter()
            .map(|i| (i.code, i.statement, i.action))
            .collect(),
    }
}

pub fn invalid(statement: i64) -> Finding {
    ("INVALID_DOCUMENT", statement, None)
}

pub fn unknown(statement: i64, action: &str) -> Finding {
    ("UNKNOWN_ACTION", statement, Some(action.into()))
}

pub fn not_applicable(statement: i64, action: &str) -> Finding {
    ("ACTION_NOT_APPLICABLE", statement, Some(action.into()))
}

pub fn accepted(doc: &Value, attached_to: Option<ResourceType>) -> PolicyDocument {
    validate_document(doc, attached_to).unwrap_or_else(|i| panic!("{doc} was rejected: {i:?}"))
}

/// An identity policy of one statement.
pub fn identity(effect: &str, actions: &[&str], resources: &[&str]) -> PolicyDocument {
    accepted(
        &json!({"statements": [{"effect": effect, "actions": actions, "resources": resources}]}),
        None,
    )
}

pub fn allow(actions: &[&str]) -> PolicyDocument {
    identity("Allow", actions, &["*"])
}

pub fn deny(actions: &[&str]) -> PolicyDocument {
    identity("Deny", actions, &["*"])
}

/// A member resource policy of one statement for `principals`.
pub fn member_policy(effect: &str, actions: &[&str], principals: &[&str]) -> PolicyDocument {
    accepted(
        &json!({"statements": [{"effect": effect, "actions": actions, "principals": principals, "resources": ["*"]}]}),
        Some(ResourceType::Member),
    )
}

/// Statement 0 names an unknown action, statement 1 is malformed and
/// statement 2 names an action that does not apply to a member.
pub fn three_findings_document() -> Value {
    json!({"statements": [
        {"effect": "Allow", "actions": ["cluster:Nope"], "resources": ["*"], "principals": ["*"]},
        {"effect": "Maybe", "actions": ["cluster:GetMember"], "principals": ["*"], "resources": ["*"]},
        {"effect": "Allow", "actions": ["upgrade:CancelUpgrade"], "principals": ["*"], "resources": ["*"]},
    ]})
}

pub fn good_document() -> Value {
    json!({"statements": [
        {"effect": "Allow", "actions": ["upgrade:Get*", "upgrade:ListUpgrades"], "resources": ["*"]},
    ]})
}

pub const INSTALL: &str = "stratum:install";

pub fn verdict(
    docs: &[&PolicyDocument],
    principal: &str,
    action: Action,
    resource: &str,
) -> Verdict {
    evaluate(docs.iter().copied(), principal, action, resource)
}

pub fn managed(name: &str) -> &'static PolicyDocument {
    managed_policy(name).unwrap_or_else(|| panic!("{name} is not a managed policy"))
}

/// The resource of `action` for node `node` and upgrade [`UPG`].
pub fn resource_for(action: Action, node: &str) -> String {
    action.resource(|k| match k {
        "nodeId" => Some(node),
        "id" => Some(UPG),
        _ => None,
    })
}

// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------

/// The token [`issue`] issues.
pub fn issued(
    token_id: &str,
    principal: &str,
    secret: u8,
    policies: &[&str],
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
) -> DomainEvent {
    DomainEvent::TokenIssued(TokenIssued {
        token_id: token_id.into(),
        principal: principal.into(),
        verifier: crate::iam::SecretVerifier::Sha256([secret; 32]),
        policies: policies.iter().map(|p| (*p).to_owned()).collect(),
        expires_at,
    })
}

pub fn revoked(token_id: &str) -> DomainEvent {
    DomainEvent::TokenRevoked(TokenRevoked {
        token_id: token_id.into(),
    })
}

/// The policy [`create_policy`] creates: its document in canonical form.
pub fn policy_created(name: &str, document: &Value) -> DomainEvent {
    DomainEvent::PolicyCreated(PolicyCreated {
        name: name.into(),
        document: canonical(document),
    })
}

/// The policies [`set_principal_policies`] attaches to `principal`.
pub fn attached(principal: &str, policies: &[&str]) -> DomainEvent {
    DomainEvent::PrincipalPoliciesSet(PrincipalPoliciesSet {
        principal: principal.into(),
        policies: policies.iter().map(|p| (*p).to_owned()).collect(),
    })
}
