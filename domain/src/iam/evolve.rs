//! Folding the IAM events into [`Iam`].

use crate::event::DomainEvent;
use crate::policy::read_recorded;
use crate::state::EventCtx;

use super::*;

impl Iam {
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
