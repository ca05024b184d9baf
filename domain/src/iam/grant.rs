//! The one rule of every grant: nobody gives a principal power they do not
//! hold themselves. Whatever gives power (a token, an attachment, a
//! resource policy) is checked here against what the caller holds, once,
//! and a grant the rule cannot prove safe is refused.
//!
//! - A token carries its own policies and its principal's attached ones
//!   (and what resource policies give that principal): creating it needs
//!   all of them held.
//! - An attachment replaces a principal's policies: the caller must hold
//!   the ones it sets and the ones it takes away (taking away a policy that
//!   denies gives power too).
//! - A resource policy may allow, on its object, only what the setter is
//!   allowed there, and only to named principals: a wildcard principal is
//!   an administrator's to grant.
//! - A policy whose resources name `${nodeId}` gives a node power over its
//!   own member: granted to another principal, only by an administrator.
//! - A caller whose policies deny something passes every policy that
//!   denies on with what it grants, so a grant is never a way around a
//!   Deny.
//!
//! An administrator holds `AdministratorAccess` and no policy that denies.
//! The service itself and the host's operator (`held_policies: None`) are
//! not checked.

use serde_json::json;

use crate::error::{ErrorCode, Refusal};
use crate::policy::{
    actions_matching, evaluate, Effect, PolicyDocument, Statement, Verdict, NODE_ID,
};
use crate::state::{CommandContext, State};

use super::*;

/// What a command grants.
pub enum Grant<'a> {
    /// A token for `principal` with `policies` of its own.
    Token {
        principal: &'a str,
        policies: &'a [String],
    },
    /// `principal`'s attached policies replaced by `policies`.
    Attachment {
        principal: &'a str,
        policies: &'a [String],
    },
    /// The resource policy of an object (`member/<id>`, `upgrade/<id>`)
    /// set to `document`.
    ResourcePolicy {
        resource_type: ResourceType,
        id: &'a str,
        document: &'a PolicyDocument,
    },
}

impl Iam {
    fn document(&self, name: &str) -> Option<&PolicyDocument> {
        managed_policy(name).or_else(|| self.policies.get(name).map(|p| &p.document))
    }

    /// Whether the policy named has a Deny statement.
    fn denies(&self, name: &str) -> bool {
        self.document(name)
            .is_some_and(|d| d.statements.iter().any(|s| s.effect == Effect::Deny))
    }

    /// Whether the policy named scopes a resource to the holder's node.
    fn node_scoped(&self, name: &str) -> bool {
        self.document(name).is_some_and(|d| {
            d.statements
                .iter()
                .any(|s| s.resources.iter().any(|r| r.contains(NODE_ID)))
        })
    }

    /// Whether these held policies make their holder an administrator.
    pub fn administers(&self, held: &[String]) -> bool {
        held.iter().any(|p| p == ADMINISTRATOR_ACCESS) && !held.iter().any(|p| self.denies(p))
    }

    /// The policies attached to `principal`.
    fn attached(&self, principal: &str) -> &[String] {
        self.principal_policies
            .get(principal)
            .map_or(&[], |a| a.policies.as_slice())
    }

    /// Refuses a grant that gives more than the caller holds, naming what
    /// it does not hold.
    pub(super) fn check_grant(
        &self,
        state: &State,
        ctx: &CommandContext,
        action: Action,
        grant: Grant<'_>,
    ) -> Result<(), Refusal> {
        let Some(held) = &ctx.held_policies else {
            return Ok(());
        };
        let missing = self.not_held(state, &ctx.principal, held, &grant);
        if missing.is_empty() {
            return Ok(());
        }
        Err(Refusal::new(
            ErrorCode::AccessDenied,
            format!(
                "You can grant only what you hold; you do not hold {}.",
                missing.join(", ")
            ),
        )
        .with_details(json!({
            "action": action.name(),
            "resource": "stratum:install",
            "notHeld": missing,
        })))
    }

    /// What the grant gives that `caller`, holding `held`, does not hold:
    /// policy names, or `action on resource` for resource policies.
    pub fn not_held(
        &self,
        state: &State,
        caller: &str,
        held: &[String],
        grant: &Grant<'_>,
    ) -> Vec<String> {
        if self.administers(held) {
            return Vec::new();
        }
        let mut missing = Vec::new();
        let mut need = |what: String| {
            if !missing.contains(&what) {
                missing.push(what);
            }
        };
        match grant {
            Grant::Token {
                principal,
                policies,
            } => {
                let carried: Vec<&String> =
                    policies.iter().chain(self.attached(principal)).collect();
                self.names_held(caller, principal, held, &carried, &carried, &mut need);
                if principal != &caller {
                    // What resource policies give the principal, the token
                    // carries too.
                    for (key, p) in &self.resource_policies {
                        let Some((rt, id)) = split_key(key) else {
                            continue;
                        };
                        for st in p.document.statements.iter().filter(|s| {
                            s.effect == Effect::Allow && names(s, principal) && !names(s, caller)
                        }) {
                            self.statement_held(state, caller, held, rt, id, st, &mut need);
                        }
                    }
                }
            }
            Grant::Attachment {
                principal,
                policies,
            } => {
                let changed: Vec<&String> =
                    policies.iter().chain(self.attached(principal)).collect();
                let set: Vec<&String> = policies.iter().collect();
                self.names_held(caller, principal, held, &changed, &set, &mut need);
                // Taking a policy that denies away lifts its Deny: an
                // administrator's to do.
                for gone in self.attached(principal) {
                    if self.denies(gone) && !policies.contains(gone) {
                        need(format!(
                            "{ADMINISTRATOR_ACCESS} (taking {gone} away lifts what it denies)"
                        ));
                    }
                }
            }
            Grant::ResourcePolicy {
                resource_type,
                id,
                document,
            } => {
                let old = self
                    .resource_policies
                    .get(&resource_key(*resource_type, id))
                    .map(|p| &p.document);
                // What it allows, and the Denies of the old document it
                // takes away.
                let granted = document
                    .statements
                    .iter()
                    .filter(|s| s.effect == Effect::Allow)
                    .chain(old.into_iter().flat_map(|o| {
                        o.statements.iter().filter(|s| {
                            s.effect == Effect::Deny && !document.statements.contains(s)
                        })
                    }));
                for st in granted {
                    if st.principals.iter().any(|p| crate::policy::is_pattern(p)) {
                        need(format!(
                            "{ADMINISTRATOR_ACCESS} (a statement for every principal: {})",
                            st.principals.join(", ")
                        ));
                        continue;
                    }
                    self.statement_held(state, caller, held, *resource_type, id, st, &mut need);
                }
            }
        }
        missing
    }

    /// Every policy name `granted` (or taken away) must be held; a
    /// node-scoped one granted to another principal only by an
    /// administrator; and every held policy that denies goes on with what
    /// the principal ends up holding (`after`).
    fn names_held(
        &self,
        caller: &str,
        principal: &str,
        held: &[String],
        granted: &[&String],
        after: &[&String],
        need: &mut impl FnMut(String),
    ) {
        for name in granted {
            if !held.contains(name) {
                need((*name).clone());
            } else if principal != caller && self.node_scoped(name) {
                need(format!(
                    "{ADMINISTRATOR_ACCESS} ({name} scopes resources to a node: for another principal it is an administrator's to grant)"
                ));
            }
        }
        for name in held {
            if self.denies(name) && !after.contains(&name) {
                need(format!("{name} (it denies; a grant carries it on)"));
            }
        }
    }

    /// The caller must be allowed every action the statement allows, on
    /// each resource of the object it applies to.
    #[allow(clippy::too_many_arguments)]
    fn statement_held(
        &self,
        state: &State,
        caller: &str,
        held: &[String],
        resource_type: ResourceType,
        id: &str,
        st: &Statement,
        need: &mut impl FnMut(String),
    ) {
        let resources = object_resources(state, resource_type, id);
        // The object's own policy does not vouch for its own grants: its
        // Allows are left out, but its Denies hold against the setter.
        let denies = PolicyDocument {
            statements: self
                .resource_policies
                .get(&resource_key(resource_type, id))
                .map(|p| {
                    p.document
                        .statements
                        .iter()
                        .filter(|s| s.effect == Effect::Deny)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
        };
        for pattern in &st.actions {
            for action in actions_matching(pattern).filter(|a| a.resource_type() == resource_type) {
                for resource in &resources {
                    let docs = held
                        .iter()
                        .filter_map(|n| self.document(n))
                        .chain(std::iter::once(&denies));
                    let allowed =
                        matches!(evaluate(docs, caller, action, resource), Verdict::Allowed);
                    if !allowed {
                        need(format!("{} on {resource}", action.name()));
                    }
                }
            }
        }
    }
}

/// Whether a statement is for `principal`.
fn names(st: &Statement, principal: &str) -> bool {
    st.principals
        .iter()
        .any(|p| wildmatch::WildMatch::new(p).matches(principal))
}

/// A resource policy's key as its type and id.
fn split_key(key: &str) -> Option<(ResourceType, &str)> {
    let (rt, id) = key.split_once('/')?;
    Some((ResourceType::parse(rt)?, id))
}

/// The resources a resource policy of the object applies to: the member,
/// or the upgrade and each of its nodes.
fn object_resources(state: &State, resource_type: ResourceType, id: &str) -> Vec<String> {
    match resource_type {
        ResourceType::Member => vec![format!("stratum:member/{id}")],
        ResourceType::Upgrade => std::iter::once(format!("stratum:upgrade/{id}"))
            .chain(
                state
                    .upgrades
                    .upgrades
                    .get(id)
                    .into_iter()
                    .flat_map(|u| u.nodes.iter())
                    .map(|n| format!("stratum:upgrade/{id}/node/{}", n.node_id)),
            )
            .collect(),
        ResourceType::Release | ResourceType::Install => Vec::new(),
    }
}

/// A grant on record that breaks the rule (made before it was enforced, or
/// by a granter who has since lost what it gave): what it is, whom it
/// gives power, who granted it, and what the granter does not hold.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantFinding {
    /// `token`, `attachment` or `resourcePolicy`.
    pub kind: &'static str,
    /// The token's id, the principal, or the resource policy's key.
    pub id: String,
    pub granted_by: String,
    pub not_held: Vec<String>,
}

impl Iam {
    /// What a principal holds now, at most: its attached policies and
    /// those of every token of its that still works.
    fn holds_now(&self, principal: &str, now: chrono::DateTime<chrono::Utc>) -> Vec<String> {
        let mut held: Vec<String> = self.attached(principal).to_vec();
        for t in self.tokens.values() {
            if t.principal == principal && t.revoked_at.is_none() && t.valid_at(now) {
                held.extend(t.policies.iter().cloned());
            }
        }
        held.sort();
        held.dedup();
        held
    }

    /// Every grant on record that gives more than its granter holds now:
    /// working tokens, attachments and resource policies. Grants by the
    /// service and the host's operator, who hold everything, are not
    /// findings.
    pub fn grant_findings(
        &self,
        state: &State,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Vec<GrantFinding> {
        let checked = |by: &str| by != super::SERVICE_PRINCIPAL && !by.starts_with("host/");
        let mut out = Vec::new();
        for t in self.tokens.values() {
            if t.revoked_at.is_some() || !t.valid_at(now) || !checked(&t.created_by) {
                continue;
            }
            let grant = Grant::Token {
                principal: &t.principal,
                policies: &t.policies,
            };
            let held = self.holds_now(&t.created_by, now);
            let not_held = self.not_held(state, &t.created_by, &held, &grant);
            if !not_held.is_empty() {
                out.push(GrantFinding {
                    kind: "token",
                    id: t.token_id.clone(),
                    granted_by: t.created_by.clone(),
                    not_held,
                });
            }
        }
        for (principal, a) in &self.principal_policies {
            if !checked(&a.set_by) {
                continue;
            }
            let held = self.holds_now(&a.set_by, now);
            // What the attachment gives, judged as the grant it was.
            let mut not_held = Vec::new();
            if !self.administers(&held) {
                let set: Vec<&String> = a.policies.iter().collect();
                self.names_held(&a.set_by, principal, &held, &set, &set, &mut |w| {
                    if !not_held.contains(&w) {
                        not_held.push(w)
                    }
                });
            }
            if !not_held.is_empty() {
                out.push(GrantFinding {
                    kind: "attachment",
                    id: principal.clone(),
                    granted_by: a.set_by.clone(),
                    not_held,
                });
            }
        }
        for (key, p) in &self.resource_policies {
            let Some((resource_type, id)) = split_key(key) else {
                continue;
            };
            if !checked(&p.set_by) {
                continue;
            }
            let held = self.holds_now(&p.set_by, now);
            // Judged as the grant it was: set over itself, it takes no Deny
            // away, and its own Denies hold against its setter.
            let not_held = self.not_held(
                state,
                &p.set_by,
                &held,
                &Grant::ResourcePolicy {
                    resource_type,
                    id,
                    document: &p.document,
                },
            );
            if !not_held.is_empty() {
                out.push(GrantFinding {
                    kind: "resourcePolicy",
                    id: key.clone(),
                    granted_by: p.set_by.clone(),
                    not_held,
                });
            }
        }
        out
    }
}
