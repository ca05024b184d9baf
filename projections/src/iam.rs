//! The IAM read models (SPEC §6): custom and resource policies and the
//! policies attached to principals, as the API shows them and as the
//! authorization gate reads them.

use chrono::SecondsFormat;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use stratum_domain::iam::{Attachment, CustomPolicy};

/// A custom or resource policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRecord {
    /// The policy's name, or for a resource policy its resource
    /// (`member/<nodeId>`, `upgrade/<id>`).
    pub name: String,
    /// Built in (`AdministratorAccess`, `ClusterOperator`, `ReadOnly`,
    /// `Auditor`, `NodeAgent`) or custom.
    pub managed: bool,
    /// `{"statements": [{effect, actions, resources, principals?}]}`.
    #[schema(value_type = Object)]
    pub document: Value,
    pub set_by: Option<String>,
    pub set_at: Option<String>,
    pub version: u64,
}

pub fn policy_record(p: &CustomPolicy) -> PolicyRecord {
    PolicyRecord {
        name: p.name.clone(),
        managed: false,
        document: serde_json::from_str(&p.text).unwrap_or(Value::Null),
        set_by: Some(p.set_by.clone()),
        set_at: Some(p.set_at.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
        version: p.version,
    }
}

/// A managed policy, built in.
pub fn managed_policy_record(name: &str) -> Option<PolicyRecord> {
    Some(PolicyRecord {
        name: name.to_owned(),
        managed: true,
        document: stratum_domain::policy::managed_document(name)?,
        set_by: None,
        set_at: None,
        version: 0,
    })
}

/// The policies attached to a principal (besides those of its tokens).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrincipalRecord {
    pub principal: String,
    pub policies: Vec<String>,
    pub set_by: String,
    pub set_at: String,
}

pub fn principal_record(principal: &str, a: &Attachment) -> PrincipalRecord {
    PrincipalRecord {
        principal: principal.to_owned(),
        policies: a.policies.clone(),
        set_by: a.set_by.clone(),
        set_at: a.set_at.to_rfc3339_opts(SecondsFormat::AutoSi, true),
    }
}
