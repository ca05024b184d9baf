//! Deciding the IAM commands: one function per command.

use chrono::{DateTime, Utc};

use crate::error::{ErrorCode, Findings, Refusal};
use crate::event::DomainEvent;
use crate::policy::{managed_policy, validate_document};
use crate::state::{CommandContext, Decision, State, Subject};

use super::grant::Grant;
use super::*;

fn policy_rejected(issues: Vec<crate::policy::PolicyIssue>) -> Refusal {
    Refusal::new(
        ErrorCode::PolicyRejected,
        format!(
            "The policy document has {} finding{}; each is listed in issues.",
            issues.len(),
            if issues.len() == 1 { "" } else { "s" }
        ),
    )
    .with_issues(
        issues
            .iter()
            .map(|i| serde_json::to_value(i).expect("issues serialize"))
            .collect(),
    )
}

impl Iam {
    fn check_policy_names(&self, f: &mut Findings, field: &str, names: &[String]) {
        for (i, n) in names.iter().enumerate() {
            if !self.knows_policy(n) {
                f.push(
                    &format!("{field}[{i}]"),
                    format!("`{n}` is neither a managed nor a custom policy"),
                );
            }
        }
    }

    /// Decides an IAM command: each has its own function below.
    pub fn decide(
        &self,
        state: &State,
        cmd: &IamCommand,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        match cmd {
            IamCommand::Bootstrap { token_id, verifier } => {
                self.bootstrap(state, token_id, verifier, ctx)
            }
            IamCommand::IssueToken {
                token_id,
                principal,
                verifier,
                policies,
                expires_at,
            } => self.issue_token(
                state,
                token_id,
                principal,
                verifier,
                policies,
                *expires_at,
                ctx,
            ),
            IamCommand::RevokeToken { token_id } => self.revoke_token(token_id),
            IamCommand::CreatePolicy { name, document } => self.create_policy(name, document),
            IamCommand::SetPrincipalPolicies {
                principal,
                policies,
            } => self.set_principal_policies(state, principal, policies, ctx),
            IamCommand::SetResourcePolicy {
                resource_type,
                id,
                document,
            } => self.set_resource_policy(state, *resource_type, id, document, ctx),
        }
    }

    /// The first token of an empty log; on a log with any event, nothing.
    fn bootstrap(
        &self,
        state: &State,
        token_id: &str,
        verifier: &SecretVerifier,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        if state.position != 0 {
            return Ok(Decision::none(Subject::Token(token_id.to_owned())));
        }
        self.decide(
            state,
            &IamCommand::IssueToken {
                token_id: token_id.to_owned(),
                principal: Some(BOOTSTRAP_PRINCIPAL.to_owned()),
                verifier: verifier.clone(),
                policies: vec![ADMINISTRATOR_ACCESS.to_owned()],
                expires_at: None,
            },
            ctx,
        )
    }

    /// A token: a valid principal, a time still to come, policies that exist
    /// and that the caller holds, and an id and secret not taken.
    #[allow(clippy::too_many_arguments)]
    fn issue_token(
        &self,
        state: &State,
        token_id: &str,
        principal: &Option<String>,
        verifier: &SecretVerifier,
        policies: &[String],
        expires_at: Option<DateTime<Utc>>,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        if let Some(p) = f.required("principal", principal) {
            if !valid_principal(p) {
                f.push(
                    "principal",
                    "must be user/<name>, node/<nodeId> or stratum-installer",
                );
            }
        }
        // At the log's precision, as it will be read back.
        let expires_at = expires_at.map(crate::log::log_precision);
        // A token that would not be valid now is refused.
        if expires_at.is_some() && !token_valid_at(false, expires_at, ctx.now) {
            f.push("expiresAt", "must be in the future");
        }
        self.check_policy_names(&mut f, "policies", policies);
        f.into_result()?;
        self.check_grant(
            state,
            ctx,
            Action::CreateToken,
            Grant::Token {
                principal: principal.as_deref().unwrap_or_default(),
                policies,
            },
        )?;
        if self.tokens.contains_key(token_id)
            || self.tokens.values().any(|t| t.verifier == *verifier)
        {
            return Err(Refusal::new(
                ErrorCode::VersionConflict,
                "A token with this id or secret already exists.",
            ));
        }
        Ok(Decision {
            events: vec![DomainEvent::TokenIssued(TokenIssued {
                token_id: token_id.to_owned(),
                principal: principal.clone().unwrap_or_default(),
                verifier: verifier.clone(),
                policies: policies.to_vec(),
                expires_at,
            })],
            subject: Subject::Token(token_id.to_owned()),
        })
    }

    /// A token revoked; one revoked already is answered unchanged.
    fn revoke_token(&self, token_id: &str) -> Result<Decision, Refusal> {
        let t = self
            .tokens
            .get(token_id)
            .ok_or_else(|| Refusal::not_found(format!("Token {token_id}")))?;
        let events = if t.revoked_at.is_some() {
            Vec::new()
        } else {
            vec![DomainEvent::TokenRevoked(TokenRevoked {
                token_id: token_id.to_owned(),
            })]
        };
        Ok(Decision {
            events,
            subject: Subject::Token(token_id.to_owned()),
        })
    }

    /// A custom policy: a name no managed policy has, a valid document; the
    /// same document again is answered unchanged.
    fn create_policy(
        &self,
        name: &Option<String>,
        document: &Option<serde_json::Value>,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        if let Some(n) = f.required("name", name) {
            if !valid_policy_name(n) {
                f.push("name", "must be 1 to 128 of letters, digits and +=,.@_-");
            } else if managed_policy(n).is_some() {
                f.push("name", format!("`{n}` is a managed policy"));
            }
        }
        let document = f.required("document", document).cloned();
        f.into_result()?;
        let (name, document) = (
            name.clone().unwrap_or_default(),
            document.unwrap_or_default(),
        );
        validate_document(&document, None).map_err(policy_rejected)?;
        let text = crate::release::canonical(&document);
        let subject = Subject::Policy(name.clone());
        match self.policies.get(&name) {
            Some(p) if p.text == text => Ok(Decision::none(subject)),
            Some(_) => Err(Refusal::new(
                ErrorCode::PolicyExists,
                format!("Policy {name} exists with another document."),
            )),
            None => Ok(Decision {
                events: vec![DomainEvent::PolicyCreated(PolicyCreated {
                    name,
                    document: text,
                })],
                subject,
            }),
        }
    }

    /// The policies a principal holds, replaced: only policies that exist and
    /// that the caller holds.
    fn set_principal_policies(
        &self,
        state: &State,
        principal: &str,
        policies: &Option<Vec<String>>,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        if !valid_principal(principal) {
            f.push(
                "principal",
                "must be user/<name>, node/<nodeId> or stratum-installer",
            );
        }
        if let Some(p) = f.required("policies", policies) {
            self.check_policy_names(&mut f, "policies", p);
        }
        f.into_result()?;
        let policies = policies.clone().unwrap_or_default();
        self.check_grant(
            state,
            ctx,
            Action::SetPrincipalPolicies,
            Grant::Attachment {
                principal,
                policies: &policies,
            },
        )?;
        let subject = Subject::Principal(principal.to_owned());
        if self
            .principal_policies
            .get(principal)
            .is_some_and(|a| a.policies == policies)
        {
            return Ok(Decision::none(subject));
        }
        Ok(Decision {
            events: vec![DomainEvent::PrincipalPoliciesSet(PrincipalPoliciesSet {
                principal: principal.to_owned(),
                policies,
            })],
            subject,
        })
    }

    /// A resource policy attached to a member or an upgrade that exists.
    fn set_resource_policy(
        &self,
        state: &State,
        resource_type: ResourceType,
        id: &str,
        document: &Option<serde_json::Value>,
        ctx: &CommandContext,
    ) -> Result<Decision, Refusal> {
        let mut f = Findings::default();
        let document = f.required("document", document).cloned();
        f.into_result()?;
        let (exists, what, action) = match resource_type {
            ResourceType::Member => (
                state.membership.members.contains_key(id),
                "Member",
                Action::SetMemberPolicy,
            ),
            ResourceType::Upgrade => (
                state.upgrades.upgrades.contains_key(id),
                "Upgrade",
                Action::SetUpgradePolicy,
            ),
            // Policies attach to members and upgrades only.
            ResourceType::Release | ResourceType::Install => {
                return Err(Refusal::invalid(vec![crate::error::FieldError::new(
                    "resourceType",
                    "a resource policy attaches to a member or an upgrade",
                )]))
            }
        };
        if !exists {
            return Err(Refusal::not_found(format!("{what} {id}")));
        }
        let document = document.unwrap_or_default();
        validate_document(&document, Some(resource_type)).map_err(policy_rejected)?;
        self.check_grant(
            state,
            ctx,
            action,
            Grant::ResourcePolicy {
                resource_type,
                id,
                document: &crate::policy::read_recorded(&document),
            },
        )?;
        let key = resource_key(resource_type, id);
        let text = crate::release::canonical(&document);
        let subject = Subject::ResourcePolicy(key.clone());
        if self
            .resource_policies
            .get(&key)
            .is_some_and(|p| p.text == text)
        {
            return Ok(Decision::none(subject));
        }
        Ok(Decision {
            events: vec![DomainEvent::ResourcePolicySet(ResourcePolicySet {
                resource: key,
                document: text,
            })],
            subject,
        })
    }
}
