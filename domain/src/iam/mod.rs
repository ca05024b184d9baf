//! IAM: the action catalog, tokens, custom and resource policies, and
//! principals' policy attachments (SPEC §6). The authorization decision
//! itself is in [`crate::policy`].
//!
//! Tokens are random secrets shown once; the log keeps only their SHA-256.
//! The catalog is the one table of every action the API gates on: the
//! router, the OpenAPI document and policy validation all read it.
//!
//! [`decide`] decides the commands, one function per command.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::policy::{evaluate, managed_policy, PolicyDocument, Verdict};

pub mod catalog;
mod decide;
mod evolve;
mod grant;

pub use catalog::{Action, ResourceType};
pub use grant::{Grant, GrantFinding};

/// The managed policy that allows everything.
pub const ADMINISTRATOR_ACCESS: &str = "AdministratorAccess";
/// The principal of the first operator.
pub const BOOTSTRAP_PRINCIPAL: &str = "user/admin";
/// The principal of the service's own process managers.
pub const SERVICE_PRINCIPAL: &str = "stratum";

/// How a token's secret is recognized; the secret itself is never kept.
///
/// A secret the service generates has 256 random bits: its SHA-256 is the
/// key a presented secret is looked up by, and no guess of it can be tested
/// in any useful time. A secret an operator chose (the bootstrap token) may
/// be guessable, so it is kept only as a salted Argon2id hash: a guess costs
/// what Argon2id costs, for anyone holding the log, an export or the
/// database.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum SecretVerifier {
    /// SHA-256 of a generated secret.
    #[serde(
        rename = "secretSha256",
        serialize_with = "hex_bytes",
        deserialize_with = "hex_bytes_de"
    )]
    Sha256([u8; 32]),
    /// The PHC string of Argon2id over a chosen secret, salt and
    /// parameters included (`$argon2id$v=19$m=...`).
    #[serde(rename = "secretArgon2id")]
    Argon2id(String),
}

impl SecretVerifier {
    /// The SHA-256 a generated secret is looked up by, if it is one.
    pub fn sha256(&self) -> Option<&[u8; 32]> {
        match self {
            SecretVerifier::Sha256(h) => Some(h),
            SecretVerifier::Argon2id(_) => None,
        }
    }

    /// The Argon2id PHC string of a chosen secret, if it is one.
    pub fn argon2id(&self) -> Option<&str> {
        match self {
            SecretVerifier::Sha256(_) => None,
            SecretVerifier::Argon2id(phc) => Some(phc),
        }
    }
}

/// A token, as the log knows it: never its secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Token {
    pub token_id: String,
    pub principal: String,
    pub verifier: SecretVerifier,
    pub policies: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    pub revoked_at: Option<DateTime<Utc>>,
    pub revoked_by: Option<String>,
}

impl Token {
    pub fn valid_at(&self, now: DateTime<Utc>) -> bool {
        token_valid_at(self.revoked_at.is_some(), self.expires_at, now)
    }
}

/// The one rule of token validity: not revoked, and `now` before its
/// expiry. The gate and the domain both ask it.
pub fn token_valid_at(
    revoked: bool,
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    !revoked && expires_at.is_none_or(|e| now < e)
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Iam {
    pub tokens: crate::Map<String, Token>,
    /// Custom policies by name.
    pub policies: crate::Map<String, CustomPolicy>,
    /// The policies attached to each principal (besides its tokens').
    pub principal_policies: crate::Map<String, Attachment>,
    /// Resource policies by resource key (`member/<nodeId>`, `upgrade/<id>`).
    pub resource_policies: crate::Map<String, CustomPolicy>,
}

/// A custom or resource policy: its document as given (canonical JSON) and
/// parsed, and who set it when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CustomPolicy {
    pub name: String,
    pub text: String,
    pub document: PolicyDocument,
    pub set_by: String,
    pub set_at: DateTime<Utc>,
    pub version: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Attachment {
    pub policies: Vec<String>,
    pub set_by: String,
    pub set_at: DateTime<Utc>,
}

/// A resource policy's resource: `member/<nodeId>` or `upgrade/<id>`.
pub fn resource_key(rt: ResourceType, id: &str) -> String {
    format!("{}/{id}", rt.as_str())
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IamCommand {
    /// The first token of an empty log (SPEC §6): `user/admin` with
    /// `AdministratorAccess`. On a log with any event it does nothing.
    Bootstrap {
        token_id: String,
        verifier: SecretVerifier,
    },
    IssueToken {
        token_id: String,
        principal: Option<String>,
        verifier: SecretVerifier,
        policies: Vec<String>,
        expires_at: Option<DateTime<Utc>>,
    },
    RevokeToken {
        token_id: String,
    },
    CreatePolicy {
        name: Option<String>,
        document: Option<serde_json::Value>,
    },
    SetPrincipalPolicies {
        principal: String,
        policies: Option<Vec<String>>,
    },
    /// Attach a resource policy to one member or upgrade (replacing any).
    SetResourcePolicy {
        resource_type: ResourceType,
        id: String,
        document: Option<serde_json::Value>,
    },
}

impl IamCommand {
    pub fn stream_id(&self) -> String {
        match self {
            IamCommand::Bootstrap { token_id, .. }
            | IamCommand::IssueToken { token_id, .. }
            | IamCommand::RevokeToken { token_id } => token_stream(token_id),
            IamCommand::CreatePolicy { name, .. } => {
                policy_stream(name.as_deref().unwrap_or_default())
            }
            IamCommand::SetPrincipalPolicies { principal, .. } => principal_stream(principal),
            IamCommand::SetResourcePolicy {
                resource_type, id, ..
            } => resource_policy_stream(&resource_key(*resource_type, id)),
        }
    }
}

pub fn token_stream(token_id: &str) -> String {
    format!("iam/token/{token_id}")
}

pub fn policy_stream(name: &str) -> String {
    format!("iam/policy/{name}")
}

pub fn principal_stream(principal: &str) -> String {
    format!("iam/principal/{principal}")
}

pub fn resource_policy_stream(key: &str) -> String {
    format!("iam/resource-policy/{key}")
}

/// [`valid_policy_name`] as a regular expression, for the API's schema.
pub const POLICY_NAME_PATTERN: &str = "^[A-Za-z0-9+=,.@_-]{1,128}$";

/// A custom policy name: 1 to 128 of letters, digits and `+=,.@_-`.
pub fn valid_policy_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 128
        && n.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"+=,.@_-".contains(&c))
}

/// What the gate found for one request: every policy name the caller
/// holds (its token's and its principal's), or the refusal's verdict.
pub type Authorization = Result<Vec<String>, Verdict>;

impl Iam {
    /// The one rule of authorization: may `principal`, presenting a token
    /// with `token_policies`, perform `action` on `resource`? Every policy of
    /// the token and of the principal's attachment counts, and the
    /// resource's own policy (`policy_key`); a Deny anywhere wins. Answers
    /// the names of every policy the caller holds when allowed.
    pub fn authorize(
        &self,
        principal: &str,
        token_policies: &[String],
        action: Action,
        resource: &str,
        policy_key: Option<&str>,
    ) -> Authorization {
        let mut names = token_policies.to_vec();
        if let Some(attached) = self.principal_policies.get(principal) {
            names.extend(attached.policies.iter().cloned());
        }
        names.sort();
        names.dedup();
        let docs = names
            .iter()
            .filter_map(|n| managed_policy(n).or_else(|| self.policies.get(n).map(|p| &p.document)))
            .chain(
                policy_key
                    .and_then(|k| self.resource_policies.get(k))
                    .map(|p| &p.document),
            );
        match evaluate(docs, principal, action, resource) {
            Verdict::Allowed => Ok(names),
            refused => Err(refused),
        }
    }

    /// Whether a policy name is a managed or a custom policy.
    pub fn knows_policy(&self, name: &str) -> bool {
        managed_policy(name).is_some() || self.policies.contains_key(name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenIssued {
    pub token_id: String,
    pub principal: String,
    /// `secretSha256` or `secretArgon2id` in JSON, as before v2.
    #[serde(flatten)]
    pub verifier: SecretVerifier,
    pub policies: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRevoked {
    pub token_id: String,
}

/// A custom policy; its document is kept as canonical JSON text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyCreated {
    pub name: String,
    pub document: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrincipalPoliciesSet {
    pub principal: String,
    pub policies: Vec<String>,
}

/// A resource policy (`resource`: `member/<nodeId>` or `upgrade/<id>`);
/// its document is kept as canonical JSON text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePolicySet {
    pub resource: String,
    pub document: String,
}

/// [`valid_principal`] as a regular expression, for the API's schema.
pub const PRINCIPAL_PATTERN: &str =
    "^(user/[A-Za-z0-9._-]{1,63}|node/[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?|stratum-installer)$";

/// `user/<name>`, `node/<nodeId>` or `stratum-installer`.
pub fn valid_principal(p: &str) -> bool {
    p == crate::membership::INSTALLER
        || p.strip_prefix("user/").is_some_and(valid_principal_name)
        || p.strip_prefix("node/")
            .is_some_and(crate::membership::valid_node_id)
}

/// A principal's name after its kind (`user/<name>`, and the host's user
/// in `host/<name>`): 1 to 63 of letters, digits, `-`, `_` and `.`.
pub fn valid_principal_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn hex_bytes<S: serde::Serializer>(b: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(b))
}

fn hex_bytes_de<'de, D: serde::Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
    let text = <String as serde::Deserialize>::deserialize(d)?;
    let mut out = [0u8; 32];
    hex::decode_to_slice(&text, &mut out).map_err(serde::de::Error::custom)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
