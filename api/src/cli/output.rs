//! How the remote CLI prints an answer: a table for people (the default),
//! or the answer's JSON or YAML for scripts.

use comfy_table::{presets::UTF8_BORDERS_ONLY, ContentArrangement, Table};
use serde_json::Value;

/// `-o table|json|yaml`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Yaml,
}

impl Format {
    pub fn parse(s: &str) -> Format {
        match s {
            "json" => Format::Json,
            "yaml" => Format::Yaml,
            _ => Format::Table,
        }
    }
}

/// What an answer is, for its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Members,
    Upgrades,
    Upgrade,
    Releases,
    Tokens,
    Alarms,
    /// The replica list: replicas, storage version, agreement, alarms.
    Replicas,
    /// The log's storage version (a finalization's answer).
    Storage,
    Events,
    Peers,
    /// What `replay --diff` found: an entity or a field a row.
    Diff,
    /// One record: a field a row.
    Record,
}

/// Columns of a list: header and field.
const MEMBERS: &[(&str, &str)] = &[
    ("NODE", "nodeId"),
    ("STATE", "state"),
    ("ROLE", "role"),
    ("RACK", "rack"),
    ("ORDINAL", "ordinal"),
    ("MGMT IP", "mgmtIp"),
    ("APPLIED GEN", "appliedGeneration"),
    ("LAGGING", "lagging"),
];
const UPGRADES: &[(&str, &str)] = &[
    ("ID", "id"),
    ("STATE", "state"),
    ("FROM", "fromRelease"),
    ("TO", "targetRelease"),
    ("MODE", "mode"),
    ("CREATED", "createdAt"),
    ("BY", "createdBy"),
];
const UPGRADE_NODES: &[(&str, &str)] = &[
    ("NODE", "nodeId"),
    ("KIND", "kind"),
    ("PHASE", "phase"),
    ("STATE", "state"),
    ("HOST", "hostState"),
    ("MESSAGE", "message"),
];
const RELEASES: &[(&str, &str)] = &[
    ("VERSION", "version"),
    ("SOURCE", "sourceKind"),
    ("REGISTERED", "registeredAt"),
    ("BY", "registeredBy"),
];
const TOKENS: &[(&str, &str)] = &[
    ("ID", "id"),
    ("PRINCIPAL", "principal"),
    ("POLICIES", "policies"),
    ("CREATED", "createdAt"),
    ("EXPIRES", "expiresAt"),
    ("REVOKED", "revokedAt"),
];
const ALARMS: &[(&str, &str)] = &[
    ("NAME", "name"),
    ("NODE", "nodeId"),
    ("UPGRADE", "upgradeId"),
    ("RAISED", "raisedAt"),
    ("CLEARED", "clearedAt"),
    ("MESSAGE", "message"),
];
const REPLICAS: &[(&str, &str)] = &[
    ("ID", "id"),
    ("STATE", "state"),
    ("HOST", "host"),
    ("LISTEN", "listen"),
    ("VERSION", "version"),
    ("COMMIT", "commit"),
    ("SETTINGS", "settingsDigest"),
    ("HEARTBEAT", "heartbeatAt"),
    ("THIS", "this"),
];
const EVENTS: &[(&str, &str)] = &[
    ("POSITION", "position"),
    ("TIME", "occurredAt"),
    ("TYPE", "type"),
    ("STREAM", "streamId"),
    ("BY", "by"),
    ("WHY", "why"),
];

const DIFF: &[(&str, &str)] = &[
    ("KIND", "kind"),
    ("ID", "id"),
    ("CHANGE", "change"),
    ("FIELD", "field"),
    ("BEFORE", "before"),
    ("AFTER", "after"),
];

/// A field as a cell: text as it is, `-` for none, lists joined.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) if s.is_empty() => "-".to_owned(),
        // A line break inside a value would draw a row of its own.
        Value::String(s) => s.replace('\n', "\\n").replace('\r', "\\r"),
        Value::Array(items) if items.iter().all(|i| !i.is_object()) => {
            items.iter().map(cell).collect::<Vec<_>>().join(", ")
        }
        other => other.to_string(),
    }
}

fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    t
}

fn list(items: &[Value], columns: &[(&str, &str)]) -> String {
    let mut t = table();
    t.set_header(columns.iter().map(|(h, _)| *h));
    for item in items {
        t.add_row(columns.iter().map(|(_, f)| cell(&item[*f])));
    }
    t.to_string()
}

fn fields(v: &Value, skip: &[&str]) -> String {
    let mut t = table();
    t.set_header(["FIELD", "VALUE"]);
    if let Some(m) = v.as_object() {
        for (k, v) in m.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
            t.add_row([k.clone(), cell(v)]);
        }
    }
    t.to_string()
}

/// Why an event happened, when its payload says: a reason or an error;
/// what a raft's removal or a removed peer's return was.
fn why(e: &Value) -> Value {
    let p = &e["payload"];
    let text = |v: &Value| v.as_str().unwrap_or("?").to_owned();
    match e["type"].as_str() {
        Some("RaftPeerReturned") => {
            return Value::String(format!(
                "back in the {} raft after its removal at position {} ({}); removed again",
                text(&p["raft"]),
                p["removedPosition"],
                text(&p["removedAt"]),
            ))
        }
        Some("RaftPeerRemoved") => {
            let mut how = text(&p["adapter"]);
            if p["alreadyGone"] == true {
                how.push_str(", already gone");
            }
            if p["leaderMoved"] == true {
                how.push_str(", leadership moved first");
            }
            return Value::String(format!("out of the {} raft ({how})", text(&p["raft"])));
        }
        _ => {}
    }
    ["reason", "error", "failureReason", "message"]
        .iter()
        .find_map(|k| p[*k].as_str().filter(|s| !s.is_empty()))
        .map_or(Value::Null, |s| Value::String(s.to_owned()))
}

/// Who did it: the initiator, and the service's principal when it acted
/// on the initiator's behalf.
fn by(e: &Value) -> String {
    let principal = cell(&e["principal"]);
    match e["initiator"].as_str() {
        Some(i) if i != principal => format!("{i} (via {principal})"),
        _ => principal,
    }
}

fn events(items: &[Value]) -> Vec<Value> {
    items
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e["why"] = why(&e);
            e["by"] = Value::String(by(&e));
            e
        })
        .collect()
}

/// Text as it may reach a terminal: every character that could change
/// how it reads (the domain's rule of [`stratum_domain::text`]: controls,
/// bidirectional and other format characters), but the output's own line
/// breaks, becomes a visible `\uXXXX` escape, which is also how JSON
/// escapes it. Text already in the record is shown, never obeyed.
pub fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_at = |c: char| {
        c != '\n' && stratum_domain::text::unsafe_char(c.encode_utf8(&mut [0; 4])).is_some()
    };
    if !text.chars().any(unsafe_at) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_at(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04X}"));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Renders an answer.
pub fn render(v: &Value, shape: Shape, format: Format) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(v).expect("JSON values serialize"),
        Format::Yaml => serde_norway::to_string(v)
            .expect("JSON values serialize")
            .trim_end()
            .to_owned(),
        Format::Table => {
            let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
            match shape {
                Shape::Members => list(items, MEMBERS),
                Shape::Upgrades => list(items, UPGRADES),
                Shape::Releases => list(items, RELEASES),
                Shape::Tokens => list(items, TOKENS),
                Shape::Alarms => list(items, ALARMS),
                Shape::Diff => list(items, DIFF),
                Shape::Replicas => {
                    let items = v["items"].as_array().map(Vec::as_slice).unwrap_or_default();
                    let mut out = list(items, REPLICAS);
                    out.push_str(&format!("\n{}", storage_lines(&v["storage"])));
                    out.push_str(&format!(
                        "\nagreed settings {} ({})",
                        cell(&v["agreed"]["digest"]),
                        cell(&v["agreed"]["by"])
                    ));
                    for a in v["alarms"].as_array().into_iter().flatten() {
                        out.push_str(&format!(
                            "\nALARM {}: {}",
                            cell(&a["name"]),
                            cell(&a["message"])
                        ));
                    }
                    out
                }
                Shape::Storage => storage_lines(v),
                Shape::Events => list(&events(items), EVENTS),
                Shape::Upgrade => {
                    let mut out = fields(v, &["nodes", "plan", "warnings"]);
                    if let Some(nodes) = v["nodes"].as_array() {
                        out.push('\n');
                        out.push_str(&list(nodes, UPGRADE_NODES));
                        for n in nodes {
                            if let Some(steps) = n["hostSteps"].as_array().filter(|s| !s.is_empty())
                            {
                                out.push_str(&format!("\nhost steps of {}:\n", cell(&n["nodeId"])));
                                out.push_str(&list(
                                    steps,
                                    &[("STEP", "name"), ("STATE", "state"), ("DETAIL", "detail")],
                                ));
                            }
                        }
                    }
                    if let Some(w) = v["warnings"].as_array().filter(|w| !w.is_empty()) {
                        out.push_str("\nwarnings:\n");
                        out.push_str(&list(
                            w,
                            &[("CODE", "code"), ("NODE", "nodeId"), ("MESSAGE", "message")],
                        ));
                    }
                    out
                }
                Shape::Peers => {
                    let mut t = table();
                    t.set_header(["LIST", "PEERS"]);
                    if let Some(m) = v.as_object() {
                        for (name, peers) in m.iter().filter(|(_, p)| p.is_array()) {
                            let peers = peers
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|p| format!("{} {}", cell(&p["nodeId"]), cell(&p["address"])))
                                .collect::<Vec<_>>()
                                .join("\n");
                            t.add_row([name.clone(), peers]);
                        }
                    }
                    format!("generation {}\n{t}", cell(&v["generation"]))
                }
                Shape::Record => fields(v, &[]),
            }
        }
    }
}

/// The log's storage version, for people: its level, its finalization,
/// and what a finalization would add.
fn storage_lines(s: &Value) -> String {
    let mut out = format!(
        "storage level {} (this build writes up to {})",
        cell(&s["level"]),
        cell(&s["newestLevel"])
    );
    match s["finalized"].as_object() {
        Some(f) => out.push_str(&format!(
            ", finalized at position {} by {} at {}",
            cell(&f["position"]),
            cell(&f["by"]),
            cell(&f["at"])
        )),
        None => out.push_str(", never finalized"),
    }
    for p in s["pending"].as_array().into_iter().flatten() {
        let adds: Vec<String> = p["adds"]
            .as_array()
            .into_iter()
            .flatten()
            .map(cell)
            .collect();
        out.push_str(&format!(
            "\n  level {} waits for stratum replicas finalize: {} ({})",
            cell(&p["level"]),
            cell(&p["summary"]),
            adds.join(", ")
        ));
    }
    out
}

/// One event of `events tail`: a line for people, or its JSON on one line.
pub fn event_line(e: &Value, format: Format) -> String {
    match format {
        Format::Table => format!(
            "{:>8}  {}  {:<28} {:<24} {}{}",
            cell(&e["position"]),
            cell(&e["occurredAt"]),
            cell(&e["type"]),
            cell(&e["streamId"]),
            by(e),
            match why(e) {
                Value::String(w) => format!("  ({w})"),
                _ => String::new(),
            }
        ),
        Format::Json => e.to_string(),
        Format::Yaml => format!(
            "---\n{}",
            serde_norway::to_string(e)
                .expect("JSON values serialize")
                .trim_end()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::for_terminal;

    #[test]
    fn escapes_and_overrides_are_shown_not_obeyed() {
        assert_eq!(
            for_terminal("ok\u{1b}]0;PWNED\u{7}"),
            "ok\\u001B]0;PWNED\\u0007"
        );
        assert_eq!(
            for_terminal("planned maintenance \u{202E}gnp.exe"),
            "planned maintenance \\u202Egnp.exe"
        );
        assert_eq!(for_terminal("tag \u{E0041}"), "tag \\uDB40\\uDC41");
        // Ordinary text and the output's own lines are left as they are.
        let plain = "Zürich – rack 7 ✓ 节点\nnext line";
        assert!(matches!(for_terminal(plain), std::borrow::Cow::Borrowed(_)));
        // In JSON output the escape is JSON's own: it reads back as the text.
        let json = serde_json::to_string(&serde_json::json!({"r": "a\u{202E}b\u{9b}"})).unwrap();
        let shown = for_terminal(&json);
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back["r"], "a\u{202E}b\u{9b}");
    }
}
