//! The read models as entities, one per line: what `stratum replay --dump`
//! writes and `stratum replay --diff` compares.
//!
//! An entity is one row of a read-model table (a member, a join request, a
//! token, an upgrade, a release, a policy, ...) as its document, named by
//! its kind and id. A dump is canonical (RFC 8785) JSON, a header line and
//! then one entity per line, in a stable order (by kind, in [`KINDS`]'
//! order, then by id), so two builds whose folds agree write the same
//! bytes, and a line-based diff of two dumps reads as what changed.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::{doc_kind, Changes, PROJECTIONS};

/// The kinds of entity, in the order a dump lists them, each with the
/// projection whose fold makes it.
pub const KINDS: &[(&str, &str)] = &[
    (MEMBER, "members"),
    (JOIN_REQUEST, "members"),
    (GENERATION, "members"),
    (TOKEN, "iam"),
    (doc_kind::POLICY, "iam"),
    (doc_kind::PRINCIPAL, "iam"),
    (doc_kind::RESOURCE_POLICY, "iam"),
    (doc_kind::UPGRADE, "upgrades"),
    (doc_kind::RELEASE, "upgrades"),
    (doc_kind::CLUSTER, "upgrades"),
    (doc_kind::ALARM, "upgrades"),
    (doc_kind::FACTS, "upgrades"),
];

/// A member (`rm_members`), by node id.
pub const MEMBER: &str = "member";
/// A join request (`rm_join_requests`), by request id.
pub const JOIN_REQUEST: &str = "join-request";
/// A token (`rm_tokens`, never its secret), by token id.
pub const TOKEN: &str = "token";
/// The membership generation: one entity, id `membership`.
pub const GENERATION: &str = "generation";

/// The projection that makes entities of `kind`.
pub fn projection_of(kind: &str) -> Option<&'static str> {
    KINDS.iter().find(|(k, _)| *k == kind).map(|(_, p)| *p)
}

/// A dump's order: by kind as [`KINDS`] lists them (a kind it does not
/// list after them, by name), then by id.
fn order(a: &Entity, b: &Entity) -> std::cmp::Ordering {
    (rank(&a.kind), &a.kind, &a.id).cmp(&(rank(&b.kind), &b.kind, &b.id))
}

fn rank(kind: &str) -> usize {
    KINDS
        .iter()
        .position(|(k, _)| *k == kind)
        .unwrap_or(KINDS.len())
}

/// One entity: a read model's row as its document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entity {
    pub kind: String,
    pub id: String,
    pub record: Value,
}

/// The read models at a position, entity by entity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dump {
    /// The position the read models stand at.
    pub position: u64,
    /// The version of each projection that made them: a dump's header
    /// names them; the database's rows do not record them yet, and are
    /// read with none.
    pub versions: BTreeMap<String, u32>,
    /// In [`KINDS`]' order, then by id.
    pub entities: Vec<Entity>,
}

/// What the header line of a dump says it is.
const DUMP_FORMAT: &str = "stratum-read-models/1";

impl Dump {
    /// The entities of read-model rows, as a rebuild writes them or a
    /// database holds them: `(kind, id, document)` with documents as JSON
    /// text. A document that is not JSON is kept as a string, so a diff
    /// still shows it.
    pub fn of_rows<'a>(
        rows: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
        generation: u64,
        position: u64,
        versions: BTreeMap<String, u32>,
    ) -> Dump {
        let mut entities: Vec<Entity> = rows
            .into_iter()
            .map(|(kind, id, doc)| Entity {
                kind: kind.to_owned(),
                id: id.to_owned(),
                record: serde_json::from_str(doc).unwrap_or_else(|_| Value::String(doc.into())),
            })
            .chain(std::iter::once(Entity {
                kind: GENERATION.to_owned(),
                id: "membership".to_owned(),
                record: json!(generation),
            }))
            .collect();
        entities.sort_by(order);
        Dump {
            position,
            versions,
            entities,
        }
    }

    /// The entities of a fold's rows ([`crate::ReadModels::all_rows`]),
    /// made by this build's projections.
    pub fn of_changes(rows: &Changes, position: u64) -> Dump {
        let members = rows
            .members
            .iter()
            .map(|r| (MEMBER, r.node_id.as_str(), r.doc.as_str()));
        let requests = rows
            .join_requests
            .iter()
            .map(|r| (JOIN_REQUEST, r.request_id.as_str(), r.doc.as_str()));
        let tokens = rows
            .tokens
            .iter()
            .map(|r| (TOKEN, r.token_id.as_str(), r.doc.as_str()));
        let docs = rows
            .docs
            .iter()
            .map(|r| (r.kind, r.id.as_str(), r.doc.as_str()));
        Dump::of_rows(
            members.chain(requests).chain(tokens).chain(docs),
            rows.generation.unwrap_or(0),
            position,
            this_build(),
        )
    }

    /// The dump's text: a header line, then one entity per line, each
    /// canonical JSON (RFC 8785), each line ending in `\n`.
    pub fn to_text(&self) -> String {
        let mut out = canonical(&json!({
            "dump": DUMP_FORMAT,
            "position": self.position,
            "projections": self.versions,
        }));
        out.push('\n');
        for e in &self.entities {
            out.push_str(&canonical(&json!({
                "kind": e.kind,
                "id": e.id,
                "record": e.record,
            })));
            out.push('\n');
        }
        out
    }

    /// Reads a dump's text, naming the line that is not one.
    pub fn parse(text: &str) -> Result<Dump, String> {
        let mut lines = text.lines().enumerate();
        let header: Value = match lines.next() {
            Some((_, l)) => serde_json::from_str(l).map_err(|e| format!("line 1: {e}"))?,
            None => return Err("it is empty: a dump starts with its header line".into()),
        };
        if header["dump"] != DUMP_FORMAT {
            return Err(format!(
                "line 1: not a dump of read models (its header has no \"dump\": \"{DUMP_FORMAT}\")"
            ));
        }
        let position = header["position"]
            .as_u64()
            .ok_or("line 1: the header names no position")?;
        let versions = serde_json::from_value(header["projections"].clone())
            .map_err(|e| format!("line 1: projections: {e}"))?;
        let mut entities = Vec::new();
        for (i, l) in lines {
            let v: Value = serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1))?;
            let field = |name: &str| -> Result<String, String> {
                v[name]
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("line {}: no \"{name}\"", i + 1))
            };
            entities.push(Entity {
                kind: field("kind")?,
                id: field("id")?,
                record: v.get("record").cloned().unwrap_or(Value::Null),
            });
        }
        entities.sort_by(order);
        Ok(Dump {
            position,
            versions,
            entities,
        })
    }
}

/// The version of every projection of this build.
pub fn this_build() -> BTreeMap<String, u32> {
    PROJECTIONS
        .iter()
        .map(|p| (p.name.to_owned(), p.version))
        .collect()
}

fn canonical(v: &Value) -> String {
    serde_json_canonicalizer::to_string(v).expect("a JSON value canonicalizes")
}

/// How an entity differs between two dumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Only the second (this build's fold) has it.
    Added,
    /// Only the first has it.
    Removed,
    /// Both have it, with other fields.
    Changed,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Removed => "removed",
            Change::Changed => "changed",
        }
    }
}

/// One difference: of a whole entity (added or removed, `field` empty), or
/// of one field of it, named by its JSON Pointer (RFC 6901) in the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub kind: String,
    pub id: String,
    pub change: Change,
    pub field: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

impl Difference {
    /// As `replay --diff` prints it in JSON or YAML.
    /// A side that has no value (an entity or field it lacks) has no
    /// `before` or `after` key, so it reads apart from a JSON `null`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "kind": self.kind,
            "id": self.id,
            "change": self.change.as_str(),
            "field": self.field,
        });
        if let Some(before) = &self.before {
            v["before"] = before.clone();
        }
        if let Some(after) = &self.after {
            v["after"] = after.clone();
        }
        v
    }
}

/// What differs from `before` to `after`, entity by entity and field by
/// field, in the dumps' order. Nothing when the read models agree.
pub fn diff(before: &Dump, after: &Dump) -> Vec<Difference> {
    let key = |e: &Entity| (rank(&e.kind), e.kind.clone(), e.id.clone());
    let a: BTreeMap<_, _> = before.entities.iter().map(|e| (key(e), e)).collect();
    let b: BTreeMap<_, _> = after.entities.iter().map(|e| (key(e), e)).collect();
    let mut keys: Vec<_> = a.keys().chain(b.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for k in keys {
        let (_, kind, id) = k.clone();
        let whole = |change, before: Option<&Value>, after: Option<&Value>| Difference {
            kind: kind.clone(),
            id: id.clone(),
            change,
            field: String::new(),
            before: before.cloned(),
            after: after.cloned(),
        };
        match (a.get(&k), b.get(&k)) {
            (Some(x), None) => out.push(whole(Change::Removed, Some(&x.record), None)),
            (None, Some(y)) => out.push(whole(Change::Added, None, Some(&y.record))),
            (Some(x), Some(y)) => {
                let mut fields = Vec::new();
                fields_that_differ(&x.record, &y.record, &mut String::new(), &mut fields);
                out.extend(fields.into_iter().map(|(field, before, after)| Difference {
                    kind: kind.clone(),
                    id: id.clone(),
                    change: Change::Changed,
                    field,
                    before,
                    after,
                }));
            }
            (None, None) => {}
        }
    }
    out
}

/// The leaves where `a` and `b` differ: objects by key, arrays by index,
/// anything else whole. A field only one side has is `None` on the other.
fn fields_that_differ(
    a: &Value,
    b: &Value,
    at: &mut String,
    out: &mut Vec<(String, Option<Value>, Option<Value>)>,
) {
    if a == b {
        return;
    }
    let mut descend = |step: &str, x: Option<&Value>, y: Option<&Value>, out: &mut Vec<_>| {
        let len = at.len();
        at.push('/');
        // RFC 6901: `~` and `/` in a key are escaped.
        at.push_str(&step.replace('~', "~0").replace('/', "~1"));
        match (x, y) {
            (Some(x), Some(y)) => fields_that_differ(x, y, at, out),
            (x, y) => out.push((at.clone(), x.cloned(), y.cloned())),
        }
        at.truncate(len);
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                descend(k, x.get(k), y.get(k), out);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                descend(&i.to_string(), x.get(i), y.get(i), out);
            }
        }
        _ => out.push((at.clone(), Some(a.clone()), Some(b.clone()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(entities: &[(&str, &str, Value)]) -> Dump {
        let docs: Vec<(String, String, String)> = entities
            .iter()
            .map(|(k, i, v)| (k.to_string(), i.to_string(), v.to_string()))
            .collect();
        Dump::of_rows(
            docs.iter()
                .map(|(k, i, d)| (k.as_str(), i.as_str(), d.as_str())),
            3,
            7,
            this_build(),
        )
    }

    #[test]
    fn a_dump_reads_back_as_written_and_its_text_is_canonical() {
        let d = dump(&[
            (
                doc_kind::UPGRADE,
                "u1",
                json!({"z": 1, "a": [1, {"y": "é", "b": null}]}),
            ),
            (MEMBER, "node-b", json!({"nodeId": "node-b"})),
            (MEMBER, "node-a", json!({"nodeId": "node-a"})),
        ]);
        let text = d.to_text();
        assert_eq!(Dump::parse(&text).unwrap(), d);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].contains("node-a") && lines[2].contains("node-b"));
        assert!(lines[3].starts_with(r#"{"id":"membership","kind":"generation""#));
        assert_eq!(
            lines[4],
            r#"{"id":"u1","kind":"upgrade","record":{"a":[1,{"b":null,"y":"é"}],"z":1}}"#
        );
    }

    #[test]
    fn the_same_read_models_differ_in_nothing() {
        let d = dump(&[(MEMBER, "node-a", json!({"nodeId": "node-a", "rack": "r1"}))]);
        assert!(diff(&d, &d.clone()).is_empty());
    }

    #[test]
    fn a_diff_names_each_entity_and_field_that_changed() {
        let before = dump(&[
            (
                MEMBER,
                "node-a",
                json!({"nodeId": "node-a", "rack": "r1", "rafts": [{"n": 1}]}),
            ),
            (MEMBER, "node-b", json!({"nodeId": "node-b"})),
            (TOKEN, "t1", json!({"id": "t1", "a/b": 1})),
        ]);
        let after = dump(&[
            (
                MEMBER,
                "node-a",
                json!({"nodeId": "node-a", "rack": "R1", "rafts": [{"n": 1}, {"n": 2}]}),
            ),
            (MEMBER, "node-c", json!({"nodeId": "node-c"})),
            (TOKEN, "t1", json!({"id": "t1", "a/b": 2, "new": true})),
        ]);
        let got: Vec<(String, String, &str, String)> = diff(&before, &after)
            .into_iter()
            .map(|d| (d.kind, d.id, d.change.as_str(), d.field))
            .collect();
        let want = [
            (MEMBER, "node-a", "changed", "/rack"),
            (MEMBER, "node-a", "changed", "/rafts/1"),
            (MEMBER, "node-b", "removed", ""),
            (MEMBER, "node-c", "added", ""),
            (TOKEN, "t1", "changed", "/a~1b"),
            (TOKEN, "t1", "changed", "/new"),
        ]
        .map(|(k, i, c, f)| (k.to_owned(), i.to_owned(), c, f.to_owned()));
        assert_eq!(got, want);
        let rack = &diff(&before, &after)[0];
        assert_eq!(
            (rack.before.clone(), rack.after.clone()),
            (Some(json!("r1")), Some(json!("R1")))
        );
        // A field only one side has shows no value for the other, which
        // reads apart from a JSON null.
        let new = diff(&before, &after)
            .into_iter()
            .find(|d| d.field == "/new")
            .unwrap()
            .to_json();
        assert_eq!(new.get("before"), None);
        assert_eq!(new["after"], json!(true));
    }

    #[test]
    fn every_kind_a_fold_writes_belongs_to_a_projection() {
        let rows = [MEMBER, JOIN_REQUEST, TOKEN, GENERATION];
        for kind in crate::DOC_KINDS.into_iter().chain(rows) {
            let p = projection_of(kind).unwrap_or_else(|| panic!("{kind} has no projection"));
            assert!(PROJECTIONS.iter().any(|q| q.name == p), "{p}");
        }
    }
}
