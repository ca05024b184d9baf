//! Request extraction that answers in the spec's error shape: JSON bodies
//! that report every bad field at once, the write headers (`Idempotency-Key`,
//! `If-Match`), paging, and the authenticated caller.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use stratum_domain::{ErrorCode, FieldError};

use crate::command::IdempotencyKey;
use crate::error::ApiError;

/// One field of a request body: absent, null, a value of the right type,
/// or a value of the wrong type (with what was expected).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Field<T> {
    #[default]
    Absent,
    Null,
    Given(T),
    Invalid(String),
}

impl<T> Field<T> {
    pub fn into_option(self) -> Option<T> {
        match self {
            Field::Given(t) => Some(t),
            _ => None,
        }
    }

    pub fn invalid(&self) -> Option<&str> {
        match self {
            Field::Invalid(why) => Some(why),
            _ => None,
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut v = Value::deserialize(d)?;
        if v.is_null() {
            return Ok(Field::Null);
        }
        whole_numbers(&mut v);
        Ok(match serde_json::from_value::<T>(v) {
            Ok(t) => Field::Given(t),
            Err(e) => Field::Invalid(type_message(&e.to_string())),
        })
    }
}

/// JSON has one number type: `2022.0` is the whole number 2022, as JSON
/// Schema's `integer` says. Whole floats become integers, at any depth, so
/// an integer field takes them.
fn whole_numbers(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0) {
                if f >= 0.0 && f <= u64::MAX as f64 {
                    *v = Value::from(f as u64);
                } else if f < 0.0 && f >= i64::MIN as f64 {
                    *v = Value::from(f as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers),
        _ => {}
    }
}

fn type_message(serde_msg: &str) -> String {
    // serde says "invalid type: integer `5`, expected a string"; keep the
    // part a person needs.
    match serde_msg.split_once(", expected ") {
        Some((_, expected)) => format!("must be {}", for_people(expected)),
        None => serde_msg.to_owned(),
    }
}

/// A request body type: its JSON field names, and its fields' type errors.
pub trait BodyFields: DeserializeOwned {
    const FIELDS: &'static [&'static str];
    fn type_errors(&self) -> Vec<FieldError>;
}

/// Declares a request body whose every field is a [`Field`], so that one
/// answer names every bad field.
/// Its OpenAPI schema is written here from the same declaration, so the
/// document names each field as the server reads it (camelCase), says
/// which are required (`@required`), refuses what the server refuses
/// (unknown fields; `null` where a value is required), and carries each
/// field's doc comment as its description.
#[macro_export]
macro_rules! request_body {
    ($(#[doc = $sdoc:literal])* pub struct $name:ident {
        $($(#[doc = $fdoc:literal])* $field:ident : $ty:ty = $json:literal $(@ $req:ident)? $(~ $shape:expr)?),* $(,)?
    }) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Default, serde::Deserialize)]
        pub struct $name {
            $(
                $(#[doc = $fdoc])*
                #[serde(rename = $json, default)]
                pub $field: $crate::http::extract::Field<$ty>,
            )*
        }

        impl $crate::http::extract::BodyFields for $name {
            const FIELDS: &'static [&'static str] = &[$($json),*];
            fn type_errors(&self) -> Vec<stratum_domain::FieldError> {
                let mut out = Vec::new();
                $(
                    if let Some(why) = self.$field.invalid() {
                        out.push(stratum_domain::FieldError::new($json, why));
                    }
                )*
                out
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder};
                let text = |lines: &[&str]| -> Option<String> {
                    let t = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
                    (!t.is_empty()).then_some(t)
                };
                #[allow(unused_mut)]
                let mut object = ObjectBuilder::new()
                    .description(text(&[$($sdoc),*]))
                    .additional_properties(Some(AdditionalProperties::<utoipa::openapi::schema::Schema>::FreeForm(false)));
                $(
                    let mut field = <$ty as utoipa::PartialSchema>::schema();
                    $( field = $shape(field); )?
                    if let (Some(d), utoipa::openapi::RefOr::T(s)) = (text(&[$($fdoc),*]), &mut field) {
                        $crate::http::extract::describe(s, d);
                    }
                    #[allow(unused_mut, unused_assignments)]
                    let mut required = false;
                    $( let _ = stringify!($req); required = true; )?
                    if required {
                        object = object.required($json);
                    } else {
                        // An optional field may be sent as null: the server
                        // takes it as left out.
                        field = $crate::http::extract::nullable(field);
                    }
                    object = object.property($json, field);
                )*
                utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::Object(object.build()))
            }
        }

        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }
    };
}

/// An RFC 3339 time in a request body, as the record keeps it (see
/// [`stratum_domain::log::request_time`]: microseconds, no leap second,
/// years 0001 to 9999).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timestamp(pub chrono::DateTime<chrono::Utc>);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        stratum_domain::log::request_time(&text)
            .map(Timestamp)
            .map_err(serde::de::Error::custom)
    }
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .examples([serde_json::json!("2026-11-30T12:00:00Z")])
            .into()
    }
}

mod lists;
pub mod shape;

pub use lists::{
    as_of, doc_cursor, doc_cursor_text, doc_page, encode_cursor, finish, id_page, number, page,
    page_of, parse_doc, parsed, query, whole_number, Page, DEFAULT_LIMIT, MAX_LIMIT,
};

/// serde names Rust types ("u64"); a person reads what they allow.
fn for_people(expected: &str) -> String {
    match expected.trim() {
        "u64" => "a whole number from 0 to 18446744073709551615".to_owned(),
        "u32" => "a whole number from 0 to 4294967295".to_owned(),
        "u16" => "a whole number from 0 to 65535".to_owned(),
        "i64" => "a whole number".to_owned(),
        "a boolean" => "true or false".to_owned(),
        other => other.to_owned(),
    }
}

/// A schema that also takes null.
pub fn nullable(
    s: utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
    let description = match &s {
        utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::Object(o)) => {
            o.description.clone()
        }
        _ => None,
    };
    OneOfBuilder::new()
        .item(s)
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(description)
        .into()
}

/// Sets the description of a field's schema, whatever kind it is.
pub fn describe(s: &mut utoipa::openapi::schema::Schema, d: String) {
    use utoipa::openapi::schema::Schema;
    match s {
        Schema::Object(o) => o.description = Some(d),
        Schema::Array(a) => a.description = Some(d),
        Schema::OneOf(o) => o.description = Some(d),
        Schema::AllOf(o) => o.description = Some(d),
        Schema::AnyOf(o) => o.description = Some(d),
        _ => {}
    }
}

/// A JSON body: the value, the field errors found while reading it (unknown
/// fields, wrong types), and the raw bytes (for the idempotency hash).
#[derive(Debug)]
pub struct JsonBody<T> {
    pub value: T,
    pub errors: Vec<FieldError>,
    pub raw: Bytes,
}

impl<S: Send + Sync, T: BodyFields> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let raw = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    ErrorCode::PayloadTooLarge,
                    "The request body is larger than 1 MiB.",
                )
            } else {
                ApiError::new(
                    ErrorCode::InvalidInput,
                    "The request body could not be read.",
                )
            }
        })?;
        if raw.iter().all(u8::is_ascii_whitespace) {
            return parse(b"{}", raw);
        }
        if let Some(ct) = content_type {
            let mime = ct.split(';').next().unwrap_or("").trim();
            if !(mime == "application/json" || mime.ends_with("+json")) {
                return Err(ApiError::new(
                    ErrorCode::UnsupportedMediaType,
                    "Send the request body as application/json.",
                ));
            }
        }
        let bytes = raw.clone();
        parse(&bytes, raw)
    }
}

pub(crate) fn parse<T: BodyFields>(bytes: &[u8], raw: Bytes) -> Result<JsonBody<T>, ApiError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::invalid(vec![FieldError::new("", format!("is not valid JSON: {e}"))])
    })?;
    // serde_json keeps the last of repeated keys; another reader may keep
    // the first, so a body with one is ambiguous and refused.
    if let Some(path) = first_duplicate_key(bytes) {
        return Err(ApiError::invalid(vec![FieldError::new(
            path,
            "appears more than once in its object",
        )]));
    }
    let Value::Object(map) = &value else {
        return Err(ApiError::invalid(vec![FieldError::new(
            "",
            "must be a JSON object",
        )]));
    };
    let mut errors: Vec<FieldError> = map
        .keys()
        .filter(|k| !T::FIELDS.contains(&k.as_str()))
        .map(|k| FieldError::new(k.as_str(), "is not a known field"))
        .collect();
    let value: T = serde_json::from_value(value)
        .map_err(|e| ApiError::invalid(vec![FieldError::new("", e.to_string())]))?;
    errors.extend(value.type_errors());
    Ok(JsonBody { value, errors, raw })
}

/// The path of the first key that appears twice in one object of a JSON
/// document (`labels.rack`, `links[1].interface`), if any.
pub fn first_duplicate_key(bytes: &[u8]) -> Option<String> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    FirstDuplicate(String::new())
        .deserialize(&mut de)
        .ok()
        .flatten()
}

/// Walks a JSON value, answering the path of its first repeated key.
struct FirstDuplicate(String);

impl FirstDuplicate {
    fn key(&self, k: &str) -> String {
        if self.0.is_empty() {
            k.to_owned()
        } else {
            format!("{}.{k}", self.0)
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for FirstDuplicate {
    type Value = Option<String>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for FirstDuplicate {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = std::collections::HashSet::new();
        let mut found = None;
        while let Some(k) = map.next_key::<String>()? {
            let path = self.key(&k);
            let inner = map.next_value_seed(FirstDuplicate(path.clone()))?;
            if !seen.insert(k) {
                found = found.or(Some(path));
            }
            found = found.or(inner);
        }
        Ok(found)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        let mut i = 0;
        while let Some(inner) = seq.next_element_seed(FirstDuplicate(format!("{}[{i}]", self.0)))? {
            found = found.or(inner);
            i += 1;
        }
        Ok(found)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// What a write needs of its request besides the body: `Idempotency-Key`
/// and `If-Match`, parsed, and the method and path the idempotency hash
/// covers.
#[derive(Clone, Debug, Default)]
pub struct WriteHeaders {
    pub idempotency_key: Option<String>,
    pub if_match: Option<u64>,
    pub method: String,
    pub path: String,
}

impl<S: Send + Sync> FromRequestParts<S> for WriteHeaders {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let mut w = write_headers(&parts.headers)?;
        w.method = parts.method.to_string();
        w.path = parts.uri.path().to_owned();
        Ok(w)
    }
}

pub fn write_headers(h: &HeaderMap) -> Result<WriteHeaders, ApiError> {
    let mut errors = Vec::new();
    let idempotency_key = match h.get("idempotency-key").map(|v| v.to_str()) {
        None => None,
        Some(Ok(k))
            if !k.is_empty() && k.len() <= 255 && k.bytes().all(|c| (0x21..=0x7e).contains(&c)) =>
        {
            Some(k.to_owned())
        }
        Some(_) => {
            errors.push(FieldError::new(
                "Idempotency-Key",
                "must be 1 to 255 visible ASCII characters",
            ));
            None
        }
    };
    let if_match = match h.get(header::IF_MATCH).map(|v| v.to_str()) {
        None => None,
        Some(Ok(v)) => {
            // `"N"`, `W/"N"` or a bare N: a stream version this service
            // answered as an ETag, nothing looser.
            let v = v.trim();
            let v = v.strip_prefix("W/").unwrap_or(v);
            let tag = v
                .strip_prefix('"')
                .and_then(|t| t.strip_suffix('"'))
                .unwrap_or(v);
            let digits =
                !tag.is_empty() && tag.len() <= 18 && tag.bytes().all(|c| c.is_ascii_digit());
            match tag.parse::<u64>() {
                Ok(n) if digits => Some(n),
                _ => {
                    errors.push(FieldError::new(
                        "If-Match",
                        "must be an ETag this service answered, such as \"3\"",
                    ));
                    None
                }
            }
        }
        Some(Err(_)) => {
            errors.push(FieldError::new("If-Match", "must be visible ASCII"));
            None
        }
    };
    if errors.is_empty() {
        Ok(WriteHeaders {
            idempotency_key,
            if_match,
            ..Default::default()
        })
    } else {
        Err(ApiError::invalid(errors))
    }
}

impl WriteHeaders {
    /// The idempotency key with the hash of this request and `body`.
    pub fn idempotency(&self, body: &[u8]) -> Option<IdempotencyKey> {
        self.idempotency_key
            .clone()
            .map(|k| IdempotencyKey::new(k, &self.method, &self.path, body))
    }
}

#[cfg(test)]
mod tests {
    use super::first_duplicate_key;
    use proptest::prelude::*;

    /// The schema's patterns are the domain's rules: a string matches one
    /// exactly when the domain accepts it.
    fn agree(pattern: &str, rule: impl Fn(&str) -> bool, s: &str) -> Result<(), TestCaseError> {
        let re = regex::Regex::new(pattern).unwrap();
        prop_assert_eq!(re.is_match(s), rule(s), "{:?} against {}", s, pattern);
        Ok(())
    }

    proptest! {
        #[test]
        fn the_schemas_patterns_are_the_domains_rules(
            id in "[a-z0-9-]{0,66}",
            tail in "[a-zA-Z0-9_./-]{0,70}",
            prefix in prop::sample::select(vec!["", "user/", "node/", "join/", "stratum-installer"]),
            label in "[a-zA-Z0-9_. /-]{0,40}",
            free in "\\PC{0,8}|[\\x00-\\x{FFFF}]{0,8}|.{0,8}",
        ) {
            agree(stratum_domain::text::LABEL_KEY_PATTERN, stratum_domain::text::valid_label_key, &label)?;
            agree(stratum_domain::text::LABEL_VALUE_PATTERN, stratum_domain::text::valid_label_value, &label)?;
            agree(&stratum_domain::text::safe_text_pattern(), |s| stratum_domain::text::unsafe_char(s).is_none(), &free)?;
            let s = format!("{prefix}{id}");
            agree(stratum_domain::membership::NODE_ID_PATTERN, stratum_domain::membership::valid_node_id, &id)?;
            agree(stratum_domain::membership::NODE_ID_PATTERN, stratum_domain::membership::valid_node_id, &tail)?;
            agree(stratum_domain::membership::STEP_PATTERN, stratum_domain::membership::valid_step, &s)?;
            agree(stratum_domain::iam::PRINCIPAL_PATTERN, stratum_domain::iam::valid_principal, &s)?;
            agree(stratum_domain::iam::POLICY_NAME_PATTERN, stratum_domain::iam::valid_policy_name, &id)?;
            agree(stratum_domain::iam::POLICY_NAME_PATTERN, stratum_domain::iam::valid_policy_name, &s)?;
        }
    }

    #[test]
    fn a_repeated_key_is_found_at_any_depth_with_its_path() {
        assert_eq!(first_duplicate_key(br#"{"a": 1, "b": 2}"#), None);
        assert_eq!(
            first_duplicate_key(br#"{"a": 1, "a": 2}"#).as_deref(),
            Some("a")
        );
        assert_eq!(
            first_duplicate_key(br#"{"labels": {"r": "1", "r": "2"}}"#).as_deref(),
            Some("labels.r")
        );
        assert_eq!(
            first_duplicate_key(br#"{"links": [{"x": 1}, {"x": 1, "x": 2}]}"#).as_deref(),
            Some("links[1].x")
        );
        // The same key in sibling objects is no repeat.
        assert_eq!(first_duplicate_key(br#"[{"x": 1}, {"x": 2}]"#), None);
        assert_eq!(first_duplicate_key(b"not json"), None);
    }
}
