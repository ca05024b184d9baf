//! The shapes the domain checks a body's text fields for, as OpenAPI
//! schemas: what a generated client or a fuzzer may send and be accepted.
//! Each takes the field's type schema and answers the constrained one.

use stratum_domain::membership;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};

fn text(pattern: Option<&str>, min: usize, max: usize) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(pattern.map(str::to_owned))
        .min_length(Some(min))
        .max_length(Some(max))
}

/// A node id: a DNS label.
pub fn node_id(_: RefOr<Schema>) -> RefOr<Schema> {
    text(Some(membership::NODE_ID_PATTERN), 1, 63)
        .examples([serde_json::json!("n-msst0002")])
        .into()
}

/// A join step: `join/<name>`.
pub fn join_step(_: RefOr<Schema>) -> RefOr<Schema> {
    text(Some(membership::STEP_PATTERN), 6, 128)
        .examples([serde_json::json!("join/raft-openbao")])
        .into()
}

/// One non-empty line of at most 2,048 bytes (an error line, a
/// reason), safe to show: no control, bidirectional or other format
/// character (the domain's rule, `stratum_domain::text`).
pub fn line(_: RefOr<Schema>) -> RefOr<Schema> {
    text(Some(&stratum_domain::text::safe_line_pattern()), 1, 2048).into()
}

/// One short line, safe to show: a host-helper intent.
pub fn short_line(_: RefOr<Schema>) -> RefOr<Schema> {
    text(Some(&stratum_domain::text::safe_text_pattern()), 1, 64).into()
}

/// A text, possibly empty, safe to show, of at most 4,096 bytes.
pub fn safe_text(_: RefOr<Schema>) -> RefOr<Schema> {
    text(
        Some(&stratum_domain::text::safe_text_pattern()),
        0,
        stratum_domain::text::MAX_MESSAGE,
    )
    .into()
}

/// A non-empty text, safe to show.
pub fn non_empty(_: RefOr<Schema>) -> RefOr<Schema> {
    text(
        Some(&stratum_domain::text::safe_text_pattern()),
        1,
        stratum_domain::text::MAX_MESSAGE,
    )
    .into()
}

/// A SHA-256 as the API shows it: 64 lowercase hex digits.
pub fn hash_hex(_: RefOr<Schema>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^[0-9a-f]{64}$"))
        .into()
}

/// An IPv4 or IPv6 address a peer can be reached at: not unspecified
/// (`0.0.0.0`, `::`), multicast or broadcast, which the domain refuses.
pub fn ip(_: RefOr<Schema>) -> RefOr<Schema> {
    let v = |f, not: &str| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(f)))
            .pattern(Some(not))
    };
    OneOfBuilder::new()
        .item(v(
            KnownFormat::Ipv4,
            r"^(?!0+\.0+\.0+\.0+$)(?!0*2(2[4-9]|3[0-9])\.)(?!0*255\.0*255\.0*255\.0*255$)",
        ))
        .item(v(
            KnownFormat::Ipv6,
            r"^(?![0:]+$)(?![fF]{2}[0-9a-fA-F]{0,2}:)",
        ))
        .examples([serde_json::json!("192.0.2.12")])
        .into()
}

/// A principal: `user/<name>`, `node/<nodeId>` or `stratum-installer`.
pub fn principal(_: RefOr<Schema>) -> RefOr<Schema> {
    text(Some(stratum_domain::iam::PRINCIPAL_PATTERN), 1, 80)
        .examples([serde_json::json!("node/n-msst0002")])
        .into()
}

/// A policy name.
pub fn policy_name(_: RefOr<Schema>) -> RefOr<Schema> {
    text(Some(stratum_domain::iam::POLICY_NAME_PATTERN), 1, 128).into()
}

/// Bindings: an address per traffic class (storage, overlay).
pub fn bindings(_: RefOr<Schema>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("storage", ip(RefOr::T(Schema::default())))
        .property("overlay", ip(RefOr::T(Schema::default())))
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::<Schema>::FreeForm(false),
        ))
        .examples([serde_json::json!({"storage": "10.1.0.12", "overlay": "10.2.0.12"})])
        .into()
}

/// Labels in the Kubernetes syntax: keys `[prefix/]name`, values empty
/// or a name; at most 64 of them and 16 KiB of keys and values.
pub fn labels(_: RefOr<Schema>) -> RefOr<Schema> {
    use stratum_domain::text;
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(format!(
            "Labels as Kubernetes spells them: a key is an optional DNS-subdomain prefix and `/`, then a name of at most {n} letters, digits, `-`, `_` or `.` that starts and ends with a letter or digit; a value is empty or such a name. At most {count} labels, and {bytes} bytes of keys and values together.",
            n = text::LABEL_NAME_MAX,
            count = text::MAX_LABELS,
            bytes = text::MAX_LABEL_BYTES,
        )))
        .property_names(Some(text(
            Some(text::LABEL_KEY_PATTERN),
            1,
            text::LABEL_PREFIX_MAX + 1 + text::LABEL_NAME_MAX,
        )))
        .max_properties(Some(text::MAX_LABELS))
        .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::RefOr(
            RefOr::T(Schema::Object(
                text(Some(text::LABEL_VALUE_PATTERN), 0, text::LABEL_NAME_MAX).build(),
            )),
        )))
        .examples([serde_json::json!({"topology.rack": "r1"})])
        .into()
}

/// A policy document: statements of Allow or Deny over actions and the
/// resources they name (and, in a resource policy, principals).
pub fn policy_document(_: RefOr<Schema>) -> RefOr<Schema> {
    let strings = |min: usize| {
        utoipa::openapi::schema::ArrayBuilder::new()
            .items(text(Some("^\\S+$"), 1, 256))
            .min_items(Some(min))
    };
    let statement = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "effect",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["Allow", "Deny"])),
        )
        .required("effect")
        .property("actions", strings(1))
        .required("actions")
        .property("resources", strings(1))
        .required("resources")
        .property("principals", strings(1))
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::<Schema>::FreeForm(false),
        ));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "statements",
            utoipa::openapi::schema::ArrayBuilder::new().items(statement),
        )
        .required("statements")
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::<Schema>::FreeForm(false),
        ))
        .examples([serde_json::json!({"statements": [
            {"effect": "Allow", "actions": ["upgrade:Get*"], "resources": ["*"]}
        ]})])
        .into()
}

/// A JSON object.
pub fn object(_: RefOr<Schema>) -> RefOr<Schema> {
    ObjectBuilder::new().schema_type(Type::Object).into()
}

/// A storage level this build finalizes.
pub fn storage_level(_: RefOr<Schema>) -> RefOr<Schema> {
    let levels = stratum_domain::stored::levels::finalizable();
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(f64::from(*levels.start())))
        .maximum(Some(f64::from(*levels.end())))
        .into()
}

/// One of a closed set of words.
pub fn one_of(values: &'static [&'static str]) -> impl Fn(RefOr<Schema>) -> RefOr<Schema> {
    move |_| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(values.iter().copied()))
            .into()
    }
}
