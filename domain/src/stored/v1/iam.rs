//! Version 1 of the stored IAM types: tokens and policies. Frozen: see [`super`].

use serde::{Deserialize, Serialize};

use crate::iam::{PolicyCreated, PrincipalPoliciesSet, ResourcePolicySet, TokenRevoked};

// ------------------------------------------------------------------- IAM

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenIssuedV1 {
    pub token_id: String,
    pub principal: String,
    pub secret_sha256: [u8; 32],
    pub policies: Vec<String>,
    /// Microseconds since the epoch.
    pub expires_at: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRevokedV1 {
    pub token_id: String,
}

/// A custom policy; its document is canonical JSON text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyCreatedV1 {
    pub name: String,
    pub document: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrincipalPoliciesSetV1 {
    pub principal: String,
    pub policies: Vec<String>,
}

/// A resource policy; its document is canonical JSON text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourcePolicySetV1 {
    pub resource: String,
    pub document: String,
}

impl From<&TokenRevoked> for TokenRevokedV1 {
    fn from(e: &TokenRevoked) -> Self {
        TokenRevokedV1 {
            token_id: e.token_id.clone(),
        }
    }
}

impl From<TokenRevokedV1> for TokenRevoked {
    fn from(e: TokenRevokedV1) -> Self {
        TokenRevoked {
            token_id: e.token_id,
        }
    }
}

impl From<&PolicyCreated> for PolicyCreatedV1 {
    fn from(e: &PolicyCreated) -> Self {
        PolicyCreatedV1 {
            name: e.name.clone(),
            document: e.document.clone(),
        }
    }
}

impl From<PolicyCreatedV1> for PolicyCreated {
    fn from(e: PolicyCreatedV1) -> Self {
        PolicyCreated {
            name: e.name,
            document: e.document,
        }
    }
}

impl From<&PrincipalPoliciesSet> for PrincipalPoliciesSetV1 {
    fn from(e: &PrincipalPoliciesSet) -> Self {
        PrincipalPoliciesSetV1 {
            principal: e.principal.clone(),
            policies: e.policies.clone(),
        }
    }
}

impl From<PrincipalPoliciesSetV1> for PrincipalPoliciesSet {
    fn from(e: PrincipalPoliciesSetV1) -> Self {
        PrincipalPoliciesSet {
            principal: e.principal,
            policies: e.policies,
        }
    }
}

impl From<&ResourcePolicySet> for ResourcePolicySetV1 {
    fn from(e: &ResourcePolicySet) -> Self {
        ResourcePolicySetV1 {
            resource: e.resource.clone(),
            document: e.document.clone(),
        }
    }
}

impl From<ResourcePolicySetV1> for ResourcePolicySet {
    fn from(e: ResourcePolicySetV1) -> Self {
        ResourcePolicySet {
            resource: e.resource,
            document: e.document,
        }
    }
}
