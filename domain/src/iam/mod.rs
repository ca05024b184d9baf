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

use crate::event::DomainEvent;
use crate::policy::{evaluate, managed_policy, read_recorded, PolicyDocument, Verdict};
use crate::state::EventCtx;

mod decide;
mod grant;

pub use grant::{Grant, GrantFinding};

/// The managed policy that allows everything.
pub const ADMINISTRATOR_ACCESS: &str = "AdministratorAccess";
/// The principal of the first operator.
pub const BOOTSTRAP_PRINCIPAL: &str = "user/admin";
/// The principal of the service's own process managers.
pub const SERVICE_PRINCIPAL: &str = "stratum";

string_enum! {
    /// What an action is performed on.
    pub enum ResourceType {
        Install = "install",
        Member = "member",
        Upgrade = "upgrade",
        Release = "release",
    }
}

/// Every action of the API, with the resource type it applies to.
/// Declares the actions and [`Action::ALL`] from one list, so `ALL` can
/// never leave one out.
macro_rules! actions {
    ($($variant:ident),* $(,)?) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Action {
            $($variant),*
        }

        impl Action {
            /// Every action, in declaration order.
            pub const ALL: [Action; [$(Action::$variant),*].len()] = [$(Action::$variant),*];
        }
    };
}

actions! {
    AdmitMember,
    ApproveNodeJoin,
    RequestJoin,
    ListJoinRequests,
    RejectNodeJoin,
    ReportJoinProgress,
    CompleteJoin,
    ReportJoinFailure,
    DecommissionMember,
    UpdateMember,
    ReportNodeFacts,
    ListAlarms,
    ListReplicas,
    FinalizeStorageVersion,
    ReportAppliedGeneration,
    ListMembers,
    GetMember,
    GetMembership,
    GetPeers,
    GetTransportAdmission,
    ReadEvents,
    AcknowledgeFork,
    RegisterRelease,
    ListReleases,
    GetRelease,
    SetRunningRelease,
    GetRunningRelease,
    CreateUpgrade,
    ListUpgrades,
    GetUpgrade,
    ApplyUpgrade,
    CancelUpgrade,
    RollbackUpgrade,
    AcknowledgeUpgrade,
    ReportNodeProgress,
    ReportBackup,
    CreateToken,
    ListTokens,
    RevokeToken,
    CreatePolicy,
    ListPolicies,
    GetPolicy,
    SetPrincipalPolicies,
    GetPrincipalPolicies,
    SetMemberPolicy,
    GetMemberPolicy,
    SetUpgradePolicy,
    GetUpgradePolicy,
}

impl Action {
    /// The action's name in policies, e.g. `cluster:ReportJoinFailure`.
    pub fn name(self) -> &'static str {
        match self {
            Action::AdmitMember => "cluster:AdmitMember",
            Action::ApproveNodeJoin => "cluster:ApproveNodeJoin",
            Action::RequestJoin => "cluster:RequestJoin",
            Action::ListJoinRequests => "cluster:ListJoinRequests",
            Action::RejectNodeJoin => "cluster:RejectNodeJoin",
            Action::ReportJoinProgress => "cluster:ReportJoinProgress",
            Action::CompleteJoin => "cluster:CompleteJoin",
            Action::ReportJoinFailure => "cluster:ReportJoinFailure",
            Action::DecommissionMember => "cluster:DecommissionMember",
            Action::UpdateMember => "cluster:UpdateMember",
            Action::ReportNodeFacts => "cluster:ReportNodeFacts",
            Action::ListAlarms => "cluster:ListAlarms",
            Action::ListReplicas => "cluster:ListReplicas",
            // Finalizing an upgrade of stratum itself is an administrator's
            // word: outside `cluster:*`, which ClusterOperator holds.
            Action::FinalizeStorageVersion => "system:FinalizeStorageVersion",
            Action::ReportAppliedGeneration => "cluster:ReportAppliedGeneration",
            Action::ListMembers => "cluster:ListMembers",
            Action::GetMember => "cluster:GetMember",
            Action::GetMembership => "cluster:GetMembership",
            Action::GetPeers => "cluster:GetPeers",
            Action::GetTransportAdmission => "cluster:GetTransportAdmission",
            Action::ReadEvents => "audit:ReadEvents",
            Action::AcknowledgeFork => "audit:AcknowledgeFork",
            Action::RegisterRelease => "release:RegisterRelease",
            Action::ListReleases => "release:ListReleases",
            Action::GetRelease => "release:GetRelease",
            Action::SetRunningRelease => "cluster:SetRunningRelease",
            Action::GetRunningRelease => "cluster:GetRunningRelease",
            Action::CreateUpgrade => "upgrade:CreateUpgrade",
            Action::ListUpgrades => "upgrade:ListUpgrades",
            Action::GetUpgrade => "upgrade:GetUpgrade",
            Action::ApplyUpgrade => "upgrade:ApplyUpgrade",
            Action::CancelUpgrade => "upgrade:CancelUpgrade",
            Action::RollbackUpgrade => "upgrade:RollbackUpgrade",
            Action::AcknowledgeUpgrade => "upgrade:AcknowledgeUpgrade",
            Action::ReportNodeProgress => "upgrade:ReportNodeProgress",
            Action::ReportBackup => "upgrade:ReportBackup",
            Action::CreateToken => "iam:CreateToken",
            Action::ListTokens => "iam:ListTokens",
            Action::RevokeToken => "iam:RevokeToken",
            Action::CreatePolicy => "iam:CreatePolicy",
            Action::ListPolicies => "iam:ListPolicies",
            Action::GetPolicy => "iam:GetPolicy",
            Action::SetPrincipalPolicies => "iam:SetPrincipalPolicies",
            Action::GetPrincipalPolicies => "iam:GetPrincipalPolicies",
            Action::SetMemberPolicy => "cluster:SetMemberPolicy",
            Action::GetMemberPolicy => "cluster:GetMemberPolicy",
            Action::SetUpgradePolicy => "upgrade:SetUpgradePolicy",
            Action::GetUpgradePolicy => "upgrade:GetUpgradePolicy",
        }
    }

    pub fn resource_type(self) -> ResourceType {
        match self {
            Action::ReportJoinProgress
            | Action::CompleteJoin
            | Action::ReportJoinFailure
            | Action::DecommissionMember
            | Action::UpdateMember
            | Action::ReportNodeFacts
            | Action::ReportAppliedGeneration
            | Action::GetMember
            | Action::GetTransportAdmission
            | Action::SetMemberPolicy
            | Action::GetMemberPolicy => ResourceType::Member,
            // The seed: cancel is install-scope.
            Action::GetUpgrade
            | Action::ApplyUpgrade
            | Action::RollbackUpgrade
            | Action::AcknowledgeUpgrade
            | Action::ReportNodeProgress
            | Action::ReportBackup
            | Action::SetUpgradePolicy
            | Action::GetUpgradePolicy => ResourceType::Upgrade,
            Action::GetRelease => ResourceType::Release,
            // Every action left is install-wide. Named one by one, so a new
            // action is a compile error until its scope is decided, never
            // a quiet install scope that member-scoped Deny statements miss.
            Action::AdmitMember
            | Action::ApproveNodeJoin
            | Action::RequestJoin
            | Action::ListJoinRequests
            | Action::RejectNodeJoin
            | Action::ListAlarms
            | Action::ListReplicas
            | Action::FinalizeStorageVersion
            | Action::ListMembers
            | Action::GetMembership
            | Action::GetPeers
            | Action::ReadEvents
            | Action::AcknowledgeFork
            | Action::RegisterRelease
            | Action::ListReleases
            | Action::SetRunningRelease
            | Action::GetRunningRelease
            | Action::CreateUpgrade
            | Action::ListUpgrades
            | Action::CancelUpgrade
            | Action::CreateToken
            | Action::ListTokens
            | Action::RevokeToken
            | Action::CreatePolicy
            | Action::ListPolicies
            | Action::GetPolicy
            | Action::SetPrincipalPolicies
            | Action::GetPrincipalPolicies => ResourceType::Install,
        }
    }

    /// The resource a request acts on, from its path parameters (`nodeId`,
    /// `id`, `version`), for policies and `ACCESS_DENIED` details: e.g.
    /// `stratum:member/n-1`, `stratum:upgrade/upg-…`, a node's own part of
    /// an upgrade `stratum:upgrade/upg-…/node/n-1`, or `stratum:install`.
    pub fn resource<'a>(self, param: impl Fn(&str) -> Option<&'a str>) -> String {
        match self.resource_type() {
            ResourceType::Member => match param("nodeId") {
                Some(n) => format!("stratum:member/{n}"),
                None => "stratum:install".to_owned(),
            },
            ResourceType::Upgrade => match (param("id"), param("nodeId")) {
                (Some(u), Some(n)) => format!("stratum:upgrade/{u}/node/{n}"),
                (Some(u), None) => format!("stratum:upgrade/{u}"),
                _ => "stratum:install".to_owned(),
            },
            ResourceType::Release => match param("version") {
                Some(v) => format!("stratum:release/{v}"),
                None => "stratum:install".to_owned(),
            },
            ResourceType::Install => "stratum:install".to_owned(),
        }
    }

    /// The key of the resource policy that applies to a request on this
    /// action (`member/<nodeId>`, `upgrade/<id>`), if any.
    pub fn resource_policy_key<'a>(
        self,
        param: impl Fn(&str) -> Option<&'a str>,
    ) -> Option<String> {
        match self.resource_type() {
            ResourceType::Member => param("nodeId").map(|n| format!("member/{n}")),
            ResourceType::Upgrade => param("id").map(|u| format!("upgrade/{u}")),
            ResourceType::Release | ResourceType::Install => None,
        }
    }
}

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

    pub fn evolve(&mut self, ctx: &EventCtx, event: &DomainEvent) {
        let policy = |name: &str, text: &str| {
            // Validated when it was set; read as recorded since.
            let document = serde_json::from_str(text)
                .map(|v: serde_json::Value| read_recorded(&v))
                .unwrap_or_default();
            CustomPolicy {
                name: name.to_owned(),
                text: text.to_owned(),
                document,
                set_by: ctx.principal.to_owned(),
                set_at: ctx.occurred_at,
                version: ctx.stream_version,
            }
        };
        match event {
            DomainEvent::TokenRevoked(e) => {
                if let Some(t) = self.tokens.get_mut(&e.token_id) {
                    t.revoked_at = Some(ctx.occurred_at);
                    t.revoked_by = Some(ctx.principal.to_owned());
                }
            }
            DomainEvent::PolicyCreated(e) => {
                self.policies
                    .insert(e.name.clone(), policy(&e.name, &e.document));
            }
            DomainEvent::ResourcePolicySet(e) => {
                self.resource_policies
                    .insert(e.resource.clone(), policy(&e.resource, &e.document));
            }
            DomainEvent::PrincipalPoliciesSet(e) => {
                self.principal_policies.insert(
                    e.principal.clone(),
                    Attachment {
                        policies: e.policies.clone(),
                        set_by: ctx.principal.to_owned(),
                        set_at: ctx.occurred_at,
                    },
                );
            }
            DomainEvent::TokenIssued(t) => {
                self.tokens.insert(
                    t.token_id.clone(),
                    Token {
                        token_id: t.token_id.clone(),
                        principal: t.principal.clone(),
                        verifier: t.verifier.clone(),
                        policies: t.policies.clone(),
                        expires_at: t.expires_at,
                        created_at: ctx.occurred_at,
                        created_by: ctx.principal.to_owned(),
                        revoked_at: None,
                        revoked_by: None,
                    },
                );
            }
            // Named, not a wildcard: a new event type must be decided here.
            DomainEvent::MemberAdmitted(_)
            | DomainEvent::JoinProgressReported { .. }
            | DomainEvent::MemberJoinCompleted { .. }
            | DomainEvent::MemberJoinFailed(_)
            | DomainEvent::RaftPeerRemoved { .. }
            | DomainEvent::RaftPeerReturned(_)
            | DomainEvent::RaftCleanupCompleted { .. }
            | DomainEvent::MemberJoinRetried { .. }
            | DomainEvent::MemberRemovalStarted(_)
            | DomainEvent::MemberDecommissioned { .. }
            | DomainEvent::MemberUpdated(_)
            | DomainEvent::AppliedGenerationReported { .. }
            | DomainEvent::JoinRequested(_)
            | DomainEvent::JoinRequestApproved { .. }
            | DomainEvent::JoinRequestRejected { .. }
            | DomainEvent::ReleaseRegistered(_)
            | DomainEvent::RunningReleaseSet(_)
            | DomainEvent::UpgradePlanned(_)
            | DomainEvent::UpgradeStateChanged(_)
            | DomainEvent::UpgradePrechecked(_)
            | DomainEvent::UpgradeNodeTurnStarted(_)
            | DomainEvent::UpgradeNodeReported(_)
            | DomainEvent::UpgradeBackupReported(_)
            | DomainEvent::UpgradeFailed(_)
            | DomainEvent::UpgradeCompleted(_)
            | DomainEvent::UpgradeCanceled(_)
            | DomainEvent::UpgradeRolledBack(_)
            | DomainEvent::UpgradeAcknowledged(_)
            | DomainEvent::NodeFactsReported(_)
            | DomainEvent::AlarmRaised(_)
            | DomainEvent::AlarmCleared(_)
            | DomainEvent::EventsLost(_)
            | DomainEvent::CheckpointForkFound(_)
            | DomainEvent::CheckpointForkAcknowledged(_)
            | DomainEvent::StorageVersionFinalized(_) => {}
        }
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
mod tests {
    use super::*;
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
}
