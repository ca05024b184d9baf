//! The edge of the membership commands: each command's fields, as the
//! request gave them, parsed into the typed value its decision takes, or
//! refused naming every bad field at once. Nothing here reads the state;
//! the rules are in [`super::decide`]. A change or an approval keeps what
//! the request leaves out from the record, so those two are parsed against
//! the record's values once the decision has found it.

use std::net::IpAddr;

use crate::error::{Findings, Refusal};
use crate::event::StringMap;
use crate::text::check_line;

use super::*;

/// A member to admit, as an admission or an approved join request gives
/// it: every field checked.
pub(super) struct Admission {
    pub node_id: String,
    pub role: Role,
    pub mgmt_ip: String,
    pub bindings: StringMap,
    pub labels: StringMap,
}

/// The fields of [`MemberCommand::Admit`].
pub(super) fn admission(
    node_id: &Option<String>,
    role: &Option<String>,
    mgmt_ip: &Option<String>,
    bindings: &StringMap,
    labels: &StringMap,
) -> Result<Admission, Refusal> {
    let mut f = Findings::default();
    let id = f.required("nodeId", node_id).cloned();
    if let Some(id) = &id {
        check_node_id(&mut f, "nodeId", id);
    }
    let role = check_role(&mut f, role);
    let ip = f
        .required("mgmtIp", mgmt_ip)
        .and_then(|ip| check_ip(&mut f, "mgmtIp", ip));
    let bindings = check_bindings(&mut f, bindings);
    check_labels(&mut f, "labels", labels);
    let ((node_id, role), mgmt_ip) = f.conclude(id.zip(role).zip(ip))?;
    Ok(Admission {
        node_id,
        role,
        mgmt_ip,
        bindings,
        labels: labels.clone(),
    })
}

/// The fields of [`MemberCommand::ApproveJoin`] for the request's node,
/// what the approval leaves out taken from the request: `mgmt_ip` and
/// `labels` the approval's or the request's, `bindings` the approval's or
/// none.
pub(super) fn approval(
    node_id: &str,
    role: &Option<String>,
    mgmt_ip: &str,
    bindings: &StringMap,
    labels: StringMap,
) -> Result<Admission, Refusal> {
    let mut f = Findings::default();
    let role = check_role(&mut f, role);
    let ip = check_ip(&mut f, "mgmtIp", mgmt_ip);
    let bindings = check_bindings(&mut f, bindings);
    check_labels(&mut f, "labels", &labels);
    let (role, mgmt_ip) = f.conclude(role.zip(ip))?;
    Ok(Admission {
        node_id: node_id.to_owned(),
        role,
        mgmt_ip,
        bindings,
        labels,
    })
}

/// A member change over what the member keeps: each field the request's
/// (checked) or the member's. A field that does not parse is `None` (role,
/// address) or left out (a binding), with its finding; the decision adds
/// the findings the cluster makes before it refuses them all at once.
pub(super) struct MemberChange {
    pub role: Option<Role>,
    pub mgmt_ip: Option<String>,
    pub bindings: StringMap,
    pub labels: StringMap,
}

/// The fields of [`MemberCommand::Update`], over `kept`.
pub(super) fn member_change(
    role: &Option<String>,
    mgmt_ip: &Option<String>,
    bindings: &Option<StringMap>,
    labels: &Option<StringMap>,
    kept: &Member,
) -> (MemberChange, Findings) {
    let mut f = Findings::default();
    let role = match role {
        Some(_) => check_role(&mut f, role),
        None => Some(kept.role),
    };
    let mgmt_ip = match mgmt_ip {
        Some(ip) => check_ip(&mut f, "mgmtIp", ip),
        None => Some(kept.mgmt_ip.clone()),
    };
    let bindings = match bindings {
        Some(b) => check_bindings(&mut f, b),
        None => kept.bindings.clone(),
    };
    let labels = labels.clone().unwrap_or_else(|| kept.labels.clone());
    check_labels(&mut f, "labels", &labels);
    let change = MemberChange {
        role,
        mgmt_ip,
        bindings,
        labels,
    };
    (change, f)
}

/// The step of [`MemberCommand::ReportJoinProgress`].
pub(super) fn join_step(step: &Option<String>) -> Result<String, Refusal> {
    let mut f = Findings::default();
    let step = check_step(&mut f, step);
    f.conclude(step)
}

/// A failed join: the step it failed at, and its error (one line).
pub(super) struct JoinFailure {
    pub step: String,
    pub error: String,
}

/// The fields of [`MemberCommand::ReportJoinFailure`].
pub(super) fn join_failure(
    step: &Option<String>,
    error: &Option<String>,
) -> Result<JoinFailure, Refusal> {
    let mut f = Findings::default();
    let step = check_step(&mut f, step);
    let error = check_line(&mut f, "error", error, MAX_ERROR_LINE);
    let (step, error) = f.conclude(step.zip(error))?;
    Ok(JoinFailure { step, error })
}

/// The reason of a decommission or a rejected join request: required,
/// one line.
pub(super) fn reason(reason: &Option<String>) -> Result<String, Refusal> {
    let mut f = Findings::default();
    let reason = check_line(&mut f, "reason", reason, MAX_REASON);
    f.conclude(reason)
}

/// The generation of [`MemberCommand::ReportAppliedGeneration`]: required.
pub(super) fn generation(generation: &Option<u64>) -> Result<u64, Refusal> {
    let mut f = Findings::default();
    f.required("generation", generation);
    f.conclude(*generation)
}

/// A node's request to join, checked.
pub(super) struct JoinAsk<'a> {
    pub node_id: String,
    pub mgmt_ip: String,
    pub labels: &'a StringMap,
    pub facts: &'a str,
}

/// The fields of [`MemberCommand::RequestJoin`] but its id.
pub(super) fn join_ask<'a>(
    node_id: &Option<String>,
    mgmt_ip: &Option<String>,
    labels: &'a StringMap,
    facts: &'a str,
) -> Result<JoinAsk<'a>, Refusal> {
    let mut f = Findings::default();
    let id = f.required("nodeId", node_id).cloned();
    if let Some(id) = &id {
        check_node_id(&mut f, "nodeId", id);
    }
    let ip = f
        .required("mgmtIp", mgmt_ip)
        .and_then(|ip| check_ip(&mut f, "mgmtIp", ip));
    check_labels(&mut f, "labels", labels);
    if facts.len() > MAX_JOIN_FACTS {
        f.push(
            "facts",
            format!("must be at most {MAX_JOIN_FACTS} bytes as JSON"),
        );
    } else if let Ok(v) = serde_json::from_str::<serde_json::Value>(facts) {
        crate::text::check_json_safe(&mut f, "facts", &v);
    }
    let (node_id, mgmt_ip) = f.conclude(id.zip(ip))?;
    Ok(JoinAsk {
        node_id,
        mgmt_ip,
        labels,
        facts,
    })
}

fn check_step(f: &mut Findings, step: &Option<String>) -> Option<String> {
    let step = f.required("step", step)?;
    if !valid_step(step) {
        f.push("step", "must be a join step name such as join/raft-openbao");
        return None;
    }
    Some(step.clone())
}

/// An address as the record keeps it: parsed, an IPv4-mapped IPv6 address
/// as the IPv4 address it is, in its one written form; an address no
/// peer can be reached at (unspecified, multicast, broadcast) is refused.
/// Loopback stays allowed, for tests and single-host setups.
fn check_ip(f: &mut Findings, field: &str, value: &str) -> Option<String> {
    match value.parse::<IpAddr>().map(|ip| ip.to_canonical()) {
        Ok(ip) if ip.is_unspecified() || ip.is_multicast() => {
            f.push(
                field,
                "must be a unicast address: not unspecified (0.0.0.0, ::) or multicast",
            );
            None
        }
        Ok(IpAddr::V4(v4)) if v4.is_broadcast() => {
            f.push(field, "must be a unicast address, not broadcast");
            None
        }
        Ok(ip) => Some(ip.to_string()),
        Err(_) => {
            f.push(field, "must be an IPv4 or IPv6 address");
            None
        }
    }
}

fn check_node_id(f: &mut Findings, field: &str, value: &str) {
    if !valid_node_id(value) {
        f.push(
            field,
            "must be 1 to 63 lowercase letters, digits or inner hyphens",
        );
    }
}

fn check_labels(f: &mut Findings, field: &str, labels: &StringMap) {
    crate::text::check_labels(f, field, labels);
}

fn check_bindings(f: &mut Findings, bindings: &StringMap) -> StringMap {
    let mut out = StringMap::new();
    for (class, addr) in bindings {
        let field = format!("bindings.{class}");
        if !BINDING_CLASSES.contains(&class.as_str()) {
            f.push(&field, "is not a traffic class (storage or overlay)");
        } else if let Some(ip) = check_ip(f, &field, addr) {
            out.insert(class.clone(), ip);
        }
    }
    out
}

fn check_role(f: &mut Findings, role: &Option<String>) -> Option<Role> {
    let role = f.required("role", role)?;
    let parsed = Role::parse(role);
    if parsed.is_none() {
        f.push("role", "must be control, compute, storage or hybrid");
    }
    parsed
}
