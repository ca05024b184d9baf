//! IAM: the action catalog, tokens and the authorization decision.
//!
//! Tokens are random secrets shown once; the log keeps only their SHA-256.
//! The catalog is the one table of every action the API gates on.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::{ErrorCode, Findings, Refusal};
use crate::event::DomainEvent;
use crate::state::{Decision, EventCtx, Subject};

/// The managed policy that allows everything.
pub const ADMINISTRATOR_ACCESS: &str = "AdministratorAccess";
/// The principal of the first operator.
pub const BOOTSTRAP_PRINCIPAL: &str = "user/admin";
/// The principal of the service's own process managers.
pub const SERVICE_PRINCIPAL: &str = "stratum";

/// What an action is performed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ResourceType {
    Install,
    Member,
    Upgrade,
    Release,
}

/// Every action of the API, with the resource type it applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    AdmitMember,
    ApproveNodeJoin,
    RequestJoin,
    ListJoinRequests,
    RejectNodeJoin,
    ReportJoinProgress,
    CompleteJoin,
    ReportJoinFailure,
    DecommissionMember,
    ReportAppliedGeneration,
    ListMembers,
    GetMember,
    GetMembership,
    GetPeers,
    GetTransportAdmission,
    ReadEvents,
    RebuildReadModels,
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
}

impl Action {
    pub const ALL: [Action; 31] = [
        Action::AdmitMember,
        Action::ApproveNodeJoin,
        Action::RequestJoin,
        Action::ListJoinRequests,
        Action::RejectNodeJoin,
        Action::ReportJoinProgress,
        Action::CompleteJoin,
        Action::ReportJoinFailure,
        Action::DecommissionMember,
        Action::ReportAppliedGeneration,
        Action::ListMembers,
        Action::GetMember,
        Action::GetMembership,
        Action::GetPeers,
        Action::GetTransportAdmission,
        Action::ReadEvents,
        Action::RebuildReadModels,
        Action::RegisterRelease,
        Action::ListReleases,
        Action::GetRelease,
        Action::SetRunningRelease,
        Action::GetRunningRelease,
        Action::CreateUpgrade,
        Action::ListUpgrades,
        Action::GetUpgrade,
        Action::ApplyUpgrade,
        Action::CancelUpgrade,
        Action::RollbackUpgrade,
        Action::AcknowledgeUpgrade,
        Action::ReportNodeProgress,
        Action::ReportBackup,
    ];

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
            Action::ReportAppliedGeneration => "cluster:ReportAppliedGeneration",
            Action::ListMembers => "cluster:ListMembers",
            Action::GetMember => "cluster:GetMember",
            Action::GetMembership => "cluster:GetMembership",
            Action::GetPeers => "cluster:GetPeers",
            Action::GetTransportAdmission => "cluster:GetTransportAdmission",
            Action::ReadEvents => "audit:ReadEvents",
            Action::RebuildReadModels => "audit:RebuildReadModels",
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
        }
    }

    pub fn resource_type(self) -> ResourceType {
        match self {
            Action::ReportJoinProgress
            | Action::CompleteJoin
            | Action::ReportJoinFailure
            | Action::DecommissionMember
            | Action::ReportAppliedGeneration
            | Action::GetMember
            | Action::GetTransportAdmission => ResourceType::Member,
            // The seed: cancel is install-scope.
            Action::GetUpgrade
            | Action::ApplyUpgrade
            | Action::RollbackUpgrade
            | Action::AcknowledgeUpgrade
            | Action::ReportNodeProgress
            | Action::ReportBackup => ResourceType::Upgrade,
            Action::GetRelease => ResourceType::Release,
            _ => ResourceType::Install,
        }
    }

    /// The resource string for policies and `ACCESS_DENIED` details.
    pub fn resource(self, id: Option<&str>) -> String {
        match (self.resource_type(), id) {
            (ResourceType::Member, Some(id)) => format!("stratum:member/{id}"),
            (ResourceType::Upgrade, Some(id)) => format!("stratum:upgrade/{id}"),
            (ResourceType::Release, Some(id)) => format!("stratum:release/{id}"),
            _ => "stratum:install".to_owned(),
        }
    }
}

/// A token, as the log knows it: never its secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Token {
    pub token_id: String,
    pub principal: String,
    pub secret_sha256: [u8; 32],
    pub policies: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    pub revoked_at: Option<DateTime<Utc>>,
    pub revoked_by: Option<String>,
}

impl Token {
    pub fn valid_at(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| now < e)
    }
}

/// The authorization decision, until custom policies exist: policies that
/// include `AdministratorAccess` allow everything, and nothing else does.
pub fn allows(policies: &[String], _action: Action, _resource: &str) -> bool {
    policies.iter().any(|p| p == ADMINISTRATOR_ACCESS)
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Iam {
    pub tokens: BTreeMap<String, Token>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IamCommand {
    /// The first token of an empty log (SPEC §6): `user/admin` with
    /// `AdministratorAccess`. On a log with any event it does nothing.
    Bootstrap {
        token_id: String,
        secret_sha256: [u8; 32],
    },
    IssueToken {
        token_id: String,
        principal: Option<String>,
        secret_sha256: [u8; 32],
        policies: Vec<String>,
        expires_at: Option<DateTime<Utc>>,
    },
}

impl IamCommand {
    pub fn stream_id(&self) -> String {
        match self {
            IamCommand::Bootstrap { token_id, .. } | IamCommand::IssueToken { token_id, .. } => {
                token_stream(token_id)
            }
        }
    }
}

pub fn token_stream(token_id: &str) -> String {
    format!("iam/token/{token_id}")
}

impl Iam {
    /// `log_is_empty`: whether the log holds no event yet (for bootstrap).
    pub fn decide(
        &self,
        cmd: &IamCommand,
        now: DateTime<Utc>,
        log_is_empty: bool,
    ) -> Result<Decision, Refusal> {
        match cmd {
            IamCommand::Bootstrap {
                token_id,
                secret_sha256,
            } => {
                if !log_is_empty {
                    return Ok(Decision::none(Subject::Token(token_id.clone())));
                }
                self.decide(
                    &IamCommand::IssueToken {
                        token_id: token_id.clone(),
                        principal: Some(BOOTSTRAP_PRINCIPAL.to_owned()),
                        secret_sha256: *secret_sha256,
                        policies: vec![ADMINISTRATOR_ACCESS.to_owned()],
                        expires_at: None,
                    },
                    now,
                    log_is_empty,
                )
            }
            IamCommand::IssueToken {
                token_id,
                principal,
                secret_sha256,
                policies,
                expires_at,
            } => {
                let mut f = Findings::default();
                if let Some(p) = f.required("principal", principal) {
                    if !valid_principal(p) {
                        f.push(
                            "principal",
                            "must be user/<name>, node/<nodeId> or stratum-installer",
                        );
                    }
                }
                if expires_at.is_some_and(|e| e <= now) {
                    f.push("expiresAt", "must be in the future");
                }
                f.into_result()?;
                if self.tokens.contains_key(token_id)
                    || self
                        .tokens
                        .values()
                        .any(|t| t.secret_sha256 == *secret_sha256)
                {
                    return Err(Refusal::new(
                        ErrorCode::VersionConflict,
                        "A token with this id or secret already exists.",
                    ));
                }
                Ok(Decision {
                    events: vec![DomainEvent::TokenIssued(TokenIssued {
                        token_id: token_id.clone(),
                        principal: principal.clone().unwrap_or_default(),
                        secret_sha256: *secret_sha256,
                        policies: policies.clone(),
                        expires_at: *expires_at,
                    })],
                    subject: Subject::Token(token_id.clone()),
                })
            }
        }
    }

    pub fn evolve(&mut self, ctx: &EventCtx, event: &DomainEvent) {
        if let DomainEvent::TokenIssued(t) = event {
            self.tokens.insert(
                t.token_id.clone(),
                Token {
                    token_id: t.token_id.clone(),
                    principal: t.principal.clone(),
                    secret_sha256: t.secret_sha256,
                    policies: t.policies.clone(),
                    expires_at: t.expires_at,
                    created_at: ctx.occurred_at,
                    created_by: ctx.principal.to_owned(),
                    revoked_at: None,
                    revoked_by: None,
                },
            );
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenIssued {
    pub token_id: String,
    pub principal: String,
    #[serde(serialize_with = "hex_bytes")]
    pub secret_sha256: [u8; 32],
    pub policies: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// `user/<name>`, `node/<nodeId>` or `stratum-installer`.
pub fn valid_principal(p: &str) -> bool {
    let named = |rest: &str| {
        !rest.is_empty()
            && rest.len() <= 63
            && rest
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    };
    p == crate::membership::INSTALLER
        || p.strip_prefix("user/").is_some_and(named)
        || p.strip_prefix("node/")
            .is_some_and(crate::membership::valid_node_id)
}

fn hex_bytes<S: serde::Serializer>(b: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bootstrap(state: &Iam, log_is_empty: bool) -> Decision {
        state
            .decide(
                &IamCommand::Bootstrap {
                    token_id: "tok-1".into(),
                    secret_sha256: [1; 32],
                },
                crate::testing::t0(),
                log_is_empty,
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
            assert!(["cluster", "audit", "upgrade", "release"].contains(&svc));
            assert!(name.chars().next().unwrap().is_ascii_uppercase());
        }
    }
}
