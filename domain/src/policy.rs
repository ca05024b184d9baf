//! IAM policies (SPEC §6): documents of Allow/Deny statements, their
//! validation (every finding of a document in one answer), the managed
//! policies, and the authorization decision.
//!
//! A statement applies to a request when one of its action patterns
//! matches the action's name, one of its resource patterns matches the
//! resource, and, in a resource policy, one of its principal patterns
//! matches the caller. `*` matches any run of characters (`*`, `cluster:*`,
//! `*:Get*`). `${nodeId}` in a resource pattern stands for the caller's node
//! id when the caller is a node (`node/<id>`), and matches nothing for any
//! other caller. An explicit Deny wins over any Allow; without an Allow,
//! nothing is allowed.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use wildmatch::WildMatch;

use crate::iam::catalog::{Action, ResourceType};

string_enum! {
    pub enum Effect {
        Allow = "Allow",
        Deny = "Deny",
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement {
    pub effect: Effect,
    pub actions: Vec<String>,
    pub resources: Vec<String>,
    /// Who a resource policy's statement is for; `["*"]` in identity
    /// policies, whose principal is whoever holds them.
    pub principals: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDocument {
    pub statements: Vec<Statement>,
}

/// One finding of a rejected policy document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyIssue {
    /// `INVALID_DOCUMENT`, `UNKNOWN_ACTION` or `ACTION_NOT_APPLICABLE`.
    pub code: &'static str,
    /// The index of the statement at fault; -1 for the whole document.
    pub statement: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    pub message: String,
}

impl PolicyIssue {
    fn invalid(statement: i64, message: impl Into<String>) -> Self {
        Self {
            code: "INVALID_DOCUMENT",
            statement,
            action: None,
            message: message.into(),
        }
    }
}

/// Actions of the private cloud's other services. They share this policy
/// language, so one document may name them, but stratum gates nothing on
/// them: they are known (not `UNKNOWN_ACTION`) and apply to resources of
/// their own (so never to a member or an upgrade).
pub const OTHER_SERVICES_ACTIONS: [&str; 6] = [
    "compute:CreateVpc",
    "compute:DeleteVpc",
    "compute:RunInstances",
    "compute:TerminateInstances",
    "storage:CreateVolume",
    "storage:DeleteVolume",
];

/// Whether a pattern matches more than the one text it spells: it holds a
/// wildcard (`*` or `?`) of the matching [`evaluate`] does.
pub fn is_pattern(p: &str) -> bool {
    p.contains(WILDCARDS)
}

/// The wildcards of the matching [`evaluate`] does.
const WILDCARDS: [char; 2] = ['*', '?'];

/// Whether `text` matches `pattern` (`*` any run of characters, `?` one).
/// Every statement of every request's authorization asks this, and
/// building a matcher allocates: the patterns policies are written with
/// (a literal, `*`, a literal and a trailing `*`) are decided without one,
/// as the matcher decides them (`fast_matching_agrees_with_wildmatch`).
fn matches(pattern: &str, text: &str) -> bool {
    match pattern.find(WILDCARDS) {
        None => pattern == text,
        Some(at) if at + 1 == pattern.len() && pattern.ends_with('*') => {
            text.starts_with(&pattern[..at])
        }
        Some(_) => WildMatch::new(pattern).matches(text),
    }
}

/// The catalog actions an action pattern matches.
pub fn actions_matching(pattern: &str) -> impl Iterator<Item = Action> + '_ {
    Action::ALL
        .into_iter()
        .filter(move |a| matches(pattern, a.name()))
}

fn names_a_known_action(pattern: &str) -> bool {
    actions_matching(pattern).next().is_some()
        || OTHER_SERVICES_ACTIONS.iter().any(|a| matches(pattern, a))
}

/// `*`, or a pattern of one of the resources stratum names (so a typo such
/// as `stratum:membr/*` is a finding, not a statement that never applies).
fn valid_resource_pattern(r: &str) -> bool {
    let Some(rest) = r.strip_prefix("stratum:") else {
        return r == "*";
    };
    rest.starts_with('*')
        || rest == "install"
        || ["member/", "upgrade/", "release/"]
            .iter()
            .any(|t| rest.starts_with(t))
}

/// The resource type a resource pattern names; `None` when it may name
/// any (`*`, `stratum:*`).
fn resource_type_of(pattern: &str) -> Option<ResourceType> {
    let rest = pattern.strip_prefix("stratum:")?;
    if rest == "install" {
        Some(ResourceType::Install)
    } else if rest.starts_with("member/") {
        Some(ResourceType::Member)
    } else if rest.starts_with("upgrade/") {
        Some(ResourceType::Upgrade)
    } else if rest.starts_with("release/") {
        Some(ResourceType::Release)
    } else {
        None
    }
}

fn string_list(v: Option<&Value>) -> Result<Option<Vec<String>>, ()> {
    match v {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or(()))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(()),
    }
}

/// Validates a policy document. `attached_to` is the resource type a
/// resource policy is attached to (`None` for a policy attached to
/// principals). Every finding is returned at once.
pub fn validate_document(
    doc: &Value,
    attached_to: Option<ResourceType>,
) -> Result<PolicyDocument, Vec<PolicyIssue>> {
    let mut issues = Vec::new();
    let Some(obj) = doc.as_object() else {
        return Err(vec![PolicyIssue::invalid(
            -1,
            "the document must be a JSON object",
        )]);
    };
    let mut unsafe_text = crate::error::Findings::default();
    if !crate::text::check_json_safe(&mut unsafe_text, "document", doc) {
        return Err(vec![PolicyIssue::invalid(
            -1,
            format!("the document {}", unsafe_text.0[0].message),
        )]);
    }
    for k in obj.keys().filter(|k| k.as_str() != "statements") {
        issues.push(PolicyIssue::invalid(
            -1,
            format!("`{k}` is not a member of a policy document"),
        ));
    }
    let statements = match obj.get("statements") {
        Some(Value::Array(s)) if !s.is_empty() => s.as_slice(),
        Some(Value::Array(_)) => {
            issues.push(PolicyIssue::invalid(-1, "`statements` must not be empty"));
            &[]
        }
        _ => {
            issues.push(PolicyIssue::invalid(
                -1,
                "`statements` must be an array of statements",
            ));
            &[]
        }
    };
    let mut out = Vec::new();
    for (i, st) in statements.iter().enumerate() {
        let at = i as i64;
        let Some(st) = st.as_object() else {
            issues.push(PolicyIssue::invalid(
                at,
                "a statement must be a JSON object",
            ));
            continue;
        };
        let before = issues.len();
        for k in st.keys() {
            match k.as_str() {
                "effect" | "actions" | "resources" => {}
                "principals" if attached_to.is_some() => {}
                "principals" => issues.push(PolicyIssue::invalid(
                    at,
                    "`principals` belongs in resource policies; an identity policy applies to whoever holds it",
                )),
                other => issues.push(PolicyIssue::invalid(at, format!("`{other}` is not a member of a statement"))),
            }
        }
        let effect = st
            .get("effect")
            .and_then(Value::as_str)
            .and_then(Effect::parse);
        if effect.is_none() {
            issues.push(PolicyIssue::invalid(at, "`effect` must be Allow or Deny"));
        }
        let actions = match string_list(st.get("actions")) {
            Ok(Some(a)) if !a.is_empty() => a,
            _ => {
                issues.push(PolicyIssue::invalid(
                    at,
                    "`actions` must be a non-empty array of action names",
                ));
                Vec::new()
            }
        };
        // Fails closed: a statement says what it applies to, `*` included,
        // as AWS IAM requires `Resource` (policies recorded before this
        // rule read as they were written: see `read_recorded`).
        let resources = match string_list(st.get("resources")) {
            Ok(None) => {
                issues.push(PolicyIssue::invalid(
                    at,
                    "`resources` is missing: a statement names the resources it applies to \
                     (`[\"*\"]` for every one)",
                ));
                Vec::new()
            }
            Ok(Some(r)) if !r.is_empty() && r.iter().all(|r| valid_resource_pattern(r)) => r,
            _ => {
                issues.push(PolicyIssue::invalid(
                    at,
                    "`resources` must be a non-empty array of `*` or patterns of \
                     `stratum:install`, `stratum:member/...`, `stratum:upgrade/...` or `stratum:release/...`",
                ));
                Vec::new()
            }
        };
        let principals = match string_list(st.get("principals")) {
            Ok(None) if attached_to.is_some() => {
                issues.push(PolicyIssue::invalid(
                    at,
                    "a resource policy's statement names the `principals` it applies to",
                ));
                Vec::new()
            }
            Ok(None) => vec!["*".to_owned()],
            Ok(Some(p)) if !p.is_empty() => p,
            _ => {
                issues.push(PolicyIssue::invalid(
                    at,
                    "`principals` must be a non-empty array of principals",
                ));
                Vec::new()
            }
        };
        // The resource types the statement can apply to: the one it is
        // attached to, or those its resource patterns name (any, for `*`).
        let types: Option<Vec<ResourceType>> = match attached_to {
            Some(rt) => Some(vec![rt]),
            None if resources.is_empty() => None,
            None => resources
                .iter()
                .map(|r| resource_type_of(r))
                .collect::<Option<Vec<_>>>(),
        };
        for a in &actions {
            if !names_a_known_action(a) {
                issues.push(PolicyIssue {
                    code: "UNKNOWN_ACTION",
                    statement: at,
                    action: Some(a.clone()),
                    message: format!("`{a}` names no action of the catalog"),
                });
            } else if let Some(types) = &types {
                if !actions_matching(a).any(|x| types.contains(&x.resource_type())) {
                    let names: Vec<&str> = types.iter().map(|t| t.as_str()).collect();
                    issues.push(PolicyIssue {
                        code: "ACTION_NOT_APPLICABLE",
                        statement: at,
                        action: Some(a.clone()),
                        message: format!("`{a}` does not apply to a {}", names.join(" or ")),
                    });
                }
            }
        }
        if issues.len() == before {
            out.push(Statement {
                effect: effect.expect("checked"),
                actions,
                resources,
                principals,
            });
        }
    }
    if issues.is_empty() {
        Ok(PolicyDocument { statements: out })
    } else {
        Err(issues)
    }
}

/// Reads a document that was validated when it was recorded, without
/// validating it again: the catalog may have changed since (an action named
/// then and gone now simply matches nothing), and a recorded policy must
/// never stop being read. A statement whose effect cannot be read is left
/// out; a `Deny` is always kept.
pub fn read_recorded(doc: &Value) -> PolicyDocument {
    let list = |v: Option<&Value>| -> Option<Vec<String>> { string_list(v).ok().flatten() };
    let statements = doc
        .get("statements")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|st| {
            let effect = Effect::parse(st.get("effect").and_then(Value::as_str)?)?;
            Some(Statement {
                effect,
                actions: list(st.get("actions")).unwrap_or_default(),
                resources: list(st.get("resources")).unwrap_or_else(|| vec!["*".to_owned()]),
                principals: list(st.get("principals")).unwrap_or_else(|| vec!["*".to_owned()]),
            })
        })
        .collect();
    PolicyDocument { statements }
}

/// The managed policy of node agents (what a node's client certificate
/// holds).
pub const NODE_AGENT: &str = "NodeAgent";

/// The managed policies, built in.
pub const MANAGED_POLICIES: [&str; 5] = [
    "AdministratorAccess",
    "ClusterOperator",
    "ReadOnly",
    "Auditor",
    NODE_AGENT,
];

/// A managed policy's document as JSON (what `GET /iam/policies` shows).
pub fn managed_document(name: &str) -> Option<Value> {
    Some(match name {
        "AdministratorAccess" => json!({"statements": [
            {"effect": "Allow", "actions": ["*"], "resources": ["*"]}
        ]}),
        "ClusterOperator" => json!({"statements": [
            {"effect": "Allow", "actions": ["cluster:*", "upgrade:*", "release:*", "audit:ReadEvents"], "resources": ["*"]}
        ]}),
        "ReadOnly" => json!({"statements": [
            {"effect": "Allow",
             "actions": ["cluster:Get*", "cluster:List*", "upgrade:Get*", "upgrade:List*",
                         "release:Get*", "release:List*"],
             "resources": ["*"]}
        ]}),
        // Reads only: acknowledging a checkpoint fork (`audit:AcknowledgeFork`)
        // is an administrator's word, not an auditor's.
        "Auditor" => json!({"statements": [
            {"effect": "Allow", "actions": ["audit:ReadEvents", "*:Get*", "*:List*"], "resources": ["*"]}
        ]}),
        // What a per-node reconciler, a `firstboot --config` joiner and an
        // upgrade host helper need, and no more (docs/node-agent.md has
        // the table): changes only to its own member and its own part of
        // an upgrade; reads of the peers, of any node's transport
        // admission (a listener asks about its peers) and of upgrades.
        "NodeAgent" => json!({"statements": [
            {"effect": "Allow",
             "actions": ["cluster:ReportJoinProgress", "cluster:ReportJoinFailure", "cluster:CompleteJoin",
                         "cluster:ReportAppliedGeneration", "cluster:ReportNodeFacts", "cluster:GetMember"],
             "resources": ["stratum:member/${nodeId}"]},
            {"effect": "Allow", "actions": ["cluster:GetTransportAdmission"],
             "resources": ["stratum:member/*"]},
            {"effect": "Allow", "actions": ["upgrade:ReportNodeProgress"],
             "resources": ["stratum:upgrade/*/node/${nodeId}"]},
            {"effect": "Allow",
             "actions": ["cluster:GetPeers", "cluster:RequestJoin", "upgrade:GetUpgrade", "upgrade:ListUpgrades"],
             "resources": ["*"]}
        ]}),
        _ => return None,
    })
}

/// A managed policy's parsed document.
pub fn managed_policy(name: &str) -> Option<&'static PolicyDocument> {
    static DOCS: OnceLock<Vec<(&'static str, PolicyDocument)>> = OnceLock::new();
    let docs = DOCS.get_or_init(|| {
        MANAGED_POLICIES
            .iter()
            .map(|n| {
                let doc = managed_document(n).expect("listed");
                (
                    *n,
                    validate_document(&doc, None).expect("managed policies are valid"),
                )
            })
            .collect()
    });
    docs.iter().find(|(n, _)| *n == name).map(|(_, d)| d)
}

/// What the policies say of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// A statement denies it (it wins over any Allow).
    Denied,
    /// No statement allows it.
    NotAllowed,
}

fn resource_matches(pattern: &str, principal: &str, resource: &str) -> bool {
    let Some((before, after)) = pattern.split_once(NODE_ID) else {
        return matches(pattern, resource);
    };
    let Some(node) = principal.strip_prefix("node/") else {
        return false;
    };
    // One placeholder between literals (as the managed policies write it):
    // the node's own resource, compared without a pattern made for it.
    if !is_pattern(before) && !is_pattern(after) && !is_pattern(node) && !after.contains(NODE_ID) {
        return resource
            .strip_prefix(before)
            .and_then(|r| r.strip_suffix(after))
            == Some(node);
    }
    matches(&pattern.replace(NODE_ID, node), resource)
}

/// What a resource pattern writes for the calling node's id.
pub(crate) const NODE_ID: &str = "${nodeId}";

/// Decides a request against every policy that applies to it: the caller's
/// identity policies and the resource's policy.
pub fn evaluate<'a>(
    policies: impl IntoIterator<Item = &'a PolicyDocument>,
    principal: &str,
    action: Action,
    resource: &str,
) -> Verdict {
    let mut allowed = false;
    for doc in policies {
        for st in &doc.statements {
            let applies = st.actions.iter().any(|a| matches(a, action.name()))
                && st
                    .resources
                    .iter()
                    .any(|r| resource_matches(r, principal, resource))
                && st.principals.iter().any(|p| matches(p, principal));
            if !applies {
                continue;
            }
            match st.effect {
                Effect::Deny => return Verdict::Denied,
                Effect::Allow => allowed = true,
            }
        }
    }
    if allowed {
        Verdict::Allowed
    } else {
        Verdict::NotAllowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_matching_agrees_with_wildmatch() {
        let patterns = [
            "",
            "*",
            "**",
            "?",
            "a",
            "ab",
            "a*",
            "*a",
            "a*b",
            "a?",
            "?a",
            "a?*",
            "cluster:*",
            "cluster:Get*",
            "*:Get*",
            "cluster:GetMember",
            "stratum:member/*",
            "stratum:upgrade/*/node/n-1",
            "node/*",
            "user/alice",
        ];
        let texts = [
            "",
            "a",
            "ab",
            "abc",
            "b",
            "ba",
            "cluster:GetMember",
            "cluster:ListMembers",
            "iam:GetToken",
            "stratum:member/n-1",
            "stratum:member/",
            "stratum:upgrade/u-1/node/n-1",
            "node/n-1",
            "user/alice",
            "user/alice2",
        ];
        for p in patterns {
            for t in texts {
                assert_eq!(
                    matches(p, t),
                    WildMatch::new(p).matches(t),
                    "pattern {p:?}, text {t:?}"
                );
            }
        }
    }

    #[test]
    fn a_node_placeholder_matches_as_the_pattern_it_stands_for() {
        let patterns = [
            "stratum:member/${nodeId}",
            "stratum:upgrade/*/node/${nodeId}",
            "stratum:member/${nodeId}*",
            "stratum:${nodeId}/${nodeId}",
            "${nodeId}",
        ];
        let resources = [
            "stratum:member/n-1",
            "stratum:member/n-12",
            "stratum:member/n-",
            "stratum:member/",
            "stratum:upgrade/u-1/node/n-1",
            "stratum:upgrade/u-1/node/n-2",
            "stratum:n-1/n-1",
            "stratum:n-1/n-2",
            "n-1",
        ];
        for principal in ["node/n-1", "node/n-2", "user/n-1"] {
            for p in patterns {
                for r in resources {
                    let expected = principal
                        .strip_prefix("node/")
                        .is_some_and(|node| WildMatch::new(&p.replace(NODE_ID, node)).matches(r));
                    assert_eq!(
                        resource_matches(p, principal, r),
                        expected,
                        "pattern {p:?}, principal {principal:?}, resource {r:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_statement_must_name_its_resources_yet_a_recorded_one_without_them_reads_as_written() {
        let without = json!({"statements": [
            {"effect": "Allow", "actions": ["cluster:GetMember"]},
        ]});
        for attached_to in [None, Some(ResourceType::Member)] {
            let mut doc = without.clone();
            if attached_to.is_some() {
                doc["statements"][0]["principals"] = json!(["user/bob"]);
            }
            let issues = validate_document(&doc, attached_to).unwrap_err();
            assert_eq!(issues.len(), 1, "{issues:?}");
            assert_eq!(issues[0].code, "INVALID_DOCUMENT");
            assert_eq!(issues[0].statement, 0);
            assert!(issues[0].message.contains("`resources`"), "{issues:?}");
        }
        let with = json!({"statements": [
            {"effect": "Allow", "actions": ["cluster:GetMember"], "resources": ["*"]},
        ]});
        let validated = validate_document(&with, None).unwrap();
        // What an older build recorded without `resources` meant every
        // resource, and still does.
        assert_eq!(read_recorded(&without), validated);
        assert_eq!(read_recorded(&without).statements[0].resources, ["*"]);
    }

    #[test]
    fn a_recorded_document_is_read_even_when_the_catalog_no_longer_knows_an_action() {
        let doc = json!({"statements": [
            {"effect": "Deny", "actions": ["cluster:Retired", "cluster:GetMember"], "principals": ["user/bob"]},
            {"effect": "Allow", "actions": ["cluster:*"]},
        ]});
        assert!(
            validate_document(&doc, None).is_err(),
            "today it would be refused"
        );
        let read = read_recorded(&doc);
        assert_eq!(read.statements.len(), 2);
        let get = Action::GetMember;
        assert_eq!(
            evaluate([&read], "user/bob", get, "stratum:member/n-1"),
            Verdict::Denied
        );
        assert_eq!(
            evaluate([&read], "user/eve", get, "stratum:member/n-1"),
            Verdict::Allowed
        );
    }

    #[test]
    fn an_identity_statement_s_actions_must_apply_to_the_resources_it_names() {
        let doc = json!({"statements": [
            {"effect": "Allow", "actions": ["cluster:GetMember", "upgrade:CancelUpgrade"],
             "resources": ["stratum:member/n-*"]},
            {"effect": "Allow", "actions": ["upgrade:GetUpgrade", "cluster:GetMember"],
             "resources": ["stratum:upgrade/*", "stratum:member/*"]},
            {"effect": "Allow", "actions": ["upgrade:CancelUpgrade"], "resources": ["*"]},
        ]});
        let issues = validate_document(&doc, None).unwrap_err();
        let found: Vec<_> = issues
            .iter()
            .map(|i| (i.code, i.statement, i.action.as_deref()))
            .collect();
        assert_eq!(
            found,
            [("ACTION_NOT_APPLICABLE", 0, Some("upgrade:CancelUpgrade"))]
        );
    }
}
