//! Lists and query parameters: paging and its cursors, whole numbers,
//! `asOf`, the findings a query collects, and stored documents as JSON.

use std::collections::HashMap;

use serde_json::Value;
use stratum_domain::{ErrorCode, FieldError};

use crate::error::ApiError;

/// `?limit=&cursor=` of a list.
#[derive(Clone, Debug)]
pub struct Page {
    pub limit: u32,
    pub cursor: Option<String>,
}

pub const DEFAULT_LIMIT: u32 = 100;
pub const MAX_LIMIT: u32 = 1000;

/// Parses `limit` (default 100, max 1000) and the opaque `cursor`.
pub fn page(limit: Option<&str>, cursor: Option<&str>, errors: &mut Vec<FieldError>) -> Page {
    let limit = match limit.map(str::parse::<u32>) {
        None => DEFAULT_LIMIT,
        Some(Ok(n)) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(_) => {
            errors.push(FieldError::new(
                "limit",
                format!("must be a whole number from 1 to {MAX_LIMIT}"),
            ));
            DEFAULT_LIMIT
        }
    };
    let cursor = match cursor.map(decode_cursor) {
        None => None,
        Some(Some(c)) => Some(c),
        Some(None) => {
            errors.push(FieldError::new(
                "cursor",
                "is not a cursor this service answered",
            ));
            None
        }
    };
    Page { limit, cursor }
}

/// One page of a list in key order: the items after the cursor's key, at
/// most `limit`, and the next page's cursor (the last key, as `cursor`
/// spells it) when this page is full. Every list pages through this.
pub fn page_of<K: Ord, T: serde::Serialize>(
    pg: &Page,
    after: Option<&K>,
    items: impl IntoIterator<Item = (K, T)>,
    cursor: impl Fn(&K) -> String,
) -> Value {
    let items: Vec<(K, T)> = items
        .into_iter()
        .filter(|(k, _)| after.is_none_or(|a| k > a))
        .take(pg.limit as usize)
        .collect();
    let next = (items.len() == pg.limit as usize)
        .then(|| items.last().map(|(k, _)| encode_cursor(&cursor(k))))
        .flatten();
    let items: Vec<Value> = items
        .iter()
        .map(|(_, v)| serde_json::to_value(v).expect("records serialize"))
        .collect();
    serde_json::json!({ "items": items, "nextCursor": next })
}

/// [`page_of`] for a list keyed by id, in id order (the cursor is the last
/// id).
pub fn id_page<'a, T: serde::Serialize>(
    pg: &Page,
    items: impl IntoIterator<Item = (&'a str, T)>,
) -> Value {
    let after = pg.cursor.as_deref();
    let listed = items
        .into_iter()
        .filter(move |(id, _)| after.is_none_or(|a| *id > a));
    page_of(pg, None, listed, |id| (*id).to_owned())
}

/// A query parameter read with `parse`, or a finding naming it.
pub fn parsed<T>(
    name: &str,
    raw: Option<&str>,
    parse: impl Fn(&str) -> Option<T>,
    expected: &str,
    errors: &mut Vec<FieldError>,
) -> Option<T> {
    let value = parse(raw?);
    if value.is_none() {
        errors.push(FieldError::new(name, expected));
    }
    value
}

/// The key of a document list's cursor: the last item's sort key and id.
pub fn doc_cursor(pg: &Page, errors: &mut Vec<FieldError>) -> Option<(i64, String)> {
    let c = pg.cursor.as_deref()?;
    let parsed = c
        .split_once(':')
        .and_then(|(k, id)| Some((whole_number(k)? as i64, id.to_owned())));
    if parsed.is_none() {
        errors.push(FieldError::new(
            "cursor",
            "is not a cursor this service answered",
        ));
    }
    parsed
}

/// How a document list's cursor spells its key.
pub fn doc_cursor_text(k: &(i64, String)) -> String {
    format!("{}:{}", k.0, k.1)
}

/// The documents of one kind as a page, in (sort key, id) order.
pub fn doc_page(
    rows: Vec<stratum_projections::DocRow>,
    pg: &Page,
    after: Option<&(i64, String)>,
) -> Value {
    page_of(
        pg,
        after,
        rows.into_iter()
            .map(|d| ((d.sort_key, d.id), parse_doc(&d.doc))),
        doc_cursor_text,
    )
}

pub fn encode_cursor(key: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
}

fn decode_cursor(c: &str) -> Option<String> {
    use base64::Engine;
    // Every cursor this service answers names a key; an empty one names none.
    if c.is_empty() {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// Parses an optional whole-number query parameter: 0 to 2^63-1, the
/// range of a position (the log stores positions as signed 64-bit
/// integers, so a larger one must never wrap into a small one).
pub fn number(name: &str, value: Option<&str>, errors: &mut Vec<FieldError>) -> Option<u64> {
    let v = value?;
    match whole_number(v) {
        Some(n) => Some(n),
        None => {
            errors.push(FieldError::new(
                name,
                "must be a whole number from 0 to 2^63-1 (9223372036854775807)",
            ));
            None
        }
    }
}

/// A whole number as this service writes one: ASCII digits, no sign, no
/// leading zero, at most 2^63-1 (what the databases store). Anything else
/// (`+5`, `05`, 2^64-1, which `str::parse` would take or wrap) is not one.
pub fn whole_number(text: &str) -> Option<u64> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (text.len() > 1 && text.starts_with('0')) {
        return None;
    }
    text.parse::<u64>()
        .ok()
        .filter(|n| i64::try_from(*n).is_ok())
}

/// Answers 400 with every collected finding, if there is any.
pub fn finish(errors: Vec<FieldError>) -> Result<(), ApiError> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(errors))
    }
}

/// Rejects query parameters a route does not take, and answers the rest.
pub fn query<'a>(
    q: &'a HashMap<String, String>,
    allowed: &[&str],
    errors: &mut Vec<FieldError>,
) -> impl Fn(&str) -> Option<&'a str> {
    let mut unknown: Vec<&String> = q
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    unknown.sort();
    for k in unknown {
        errors.push(FieldError::new(
            k.as_str(),
            "is not a query parameter of this route",
        ));
    }
    move |name| q.get(name).map(String::as_str)
}

/// `asOf`: the position a read answers as of, checked against the head.
pub fn as_of(
    view: &crate::reads::View,
    raw: Option<&str>,
    errors: &mut Vec<FieldError>,
) -> crate::error::ApiResult<Option<u64>> {
    let Some(p) = number("asOf", raw, errors) else {
        return Ok(None);
    };
    // The view includes at least the log as it stood when the request
    // arrived: a position beyond it was not in the log then.
    let head = view.position();
    if p > head {
        // A well-formed position the log has not reached: the state "right
        // after P" does not exist yet. With other bad fields, say it among
        // them.
        if !errors.is_empty() {
            errors.push(FieldError::new(
                "asOf",
                format!("is beyond the log's last position {head}"),
            ));
        } else {
            return Err(ApiError::new(
                ErrorCode::NotFound,
                format!("Position {p} is not in the log yet; it ends at {head}."),
            ));
        }
    }
    Ok(Some(p))
}

/// A stored read-model document as JSON (`null` if it is not: the store
/// holds only what the projections wrote).
pub fn parse_doc(doc: &str) -> Value {
    serde_json::from_str(doc).unwrap_or(Value::Null)
}
