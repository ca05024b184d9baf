//! Text that is safe to show: the one rule for every free-text field that
//! ends up in the record (error lines, reasons, messages, label keys and
//! values), and the label syntax.
//!
//! The record is read on terminals, in the console and in exports, for
//! years. A character that changes how text reads rather than what it
//! says has no place in it: C0 and C1 controls (a terminal escape, a bell,
//! a carriage return), the bidirectional embeddings, overrides and isolates
//! (U+202A–U+202E, U+2066–U+2069: "Trojan Source", CVE-2021-42574) and
//! every other format character (Unicode category Cf: invisible tags,
//! zero-width spaces, the byte-order mark), and the line and paragraph
//! separators. The zero-width joiner and non-joiner stay allowed: emoji
//! sequences and several scripts need them. Everything else of UTF-8 is
//! ordinary text (accents, CJK, emoji, `–`, `✓`).

use unicode_general_category::{get_general_category, GeneralCategory};

use crate::error::Findings;

/// The first character that changes how text reads, with its position
/// (in characters, from 1).
pub fn unsafe_char(text: &str) -> Option<(usize, char)> {
    text.chars()
        .enumerate()
        .find(|(_, c)| !safe(*c))
        .map(|(i, c)| (i + 1, c))
}

fn safe(c: char) -> bool {
    use GeneralCategory as G;
    match get_general_category(c) {
        G::Control | G::LineSeparator | G::ParagraphSeparator | G::Surrogate => false,
        // Zero-width non-joiner and joiner.
        G::Format => matches!(c, '\u{200C}' | '\u{200D}'),
        G::UppercaseLetter
        | G::LowercaseLetter
        | G::TitlecaseLetter
        | G::ModifierLetter
        | G::OtherLetter
        | G::NonspacingMark
        | G::SpacingMark
        | G::EnclosingMark
        | G::DecimalNumber
        | G::LetterNumber
        | G::OtherNumber
        | G::ConnectorPunctuation
        | G::DashPunctuation
        | G::OpenPunctuation
        | G::ClosePunctuation
        | G::InitialPunctuation
        | G::FinalPunctuation
        | G::OtherPunctuation
        | G::MathSymbol
        | G::CurrencySymbol
        | G::ModifierSymbol
        | G::OtherSymbol
        | G::SpaceSeparator
        | G::PrivateUse
        | G::Unassigned => true,
        // The crate's enum is non-exhaustive: a category it adds one day
        // is refused until it is decided here.
        _ => false,
    }
}

/// The characters [`unsafe_char`] refuses, as the body of a regular
/// expression's character class (`\uXXXX` escapes in the BMP, the
/// characters themselves beyond it), derived from the rule itself so the
/// API's schema can never say otherwise.
pub fn unsafe_class() -> &'static str {
    static CLASS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CLASS.get_or_init(|| {
        let mut ranges: Vec<(char, char)> = Vec::new();
        for c in (0..=0x10FFFF_u32)
            .filter_map(char::from_u32)
            .filter(|c| !safe(*c))
        {
            match ranges.last_mut() {
                Some((_, end)) if *end as u32 + 1 == c as u32 => *end = c,
                _ => ranges.push((c, c)),
            }
        }
        let one = |c: char| {
            if (c as u32) < 0x10000 {
                format!("\\u{:04X}", c as u32)
            } else {
                c.to_string()
            }
        };
        ranges
            .into_iter()
            .map(|(a, b)| {
                if a == b {
                    one(a)
                } else {
                    format!("{}-{}", one(a), one(b))
                }
            })
            .collect()
    })
}

/// Text of any length that [`unsafe_char`] accepts, as a regular
/// expression for the API's schema.
pub fn safe_text_pattern() -> String {
    format!("^[^{}]*$", unsafe_class())
}

/// One line with at least one character that is not a space, that
/// [`unsafe_char`] accepts (line breaks are controls), as a regular
/// expression for the API's schema.
pub fn safe_line_pattern() -> String {
    let u = unsafe_class();
    format!("^[^{u}]*[^\\s{u}][^{u}]*$")
}

/// What a refusal says of an unsafe character.
fn describe(at: usize, c: char) -> String {
    let what = match c {
        '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{061C}' => "a bidirectional control",
        c if c.is_control() => "a control character",
        // Only words for the refusal: `safe` decided it.
        _ => "an invisible format character or separator",
    };
    format!(
        "must not hold {what} (U+{:04X} at character {at}); text in the record is shown on terminals and in the console",
        c as u32
    )
}

/// The most bytes a node's free text may have: an upgrade report's
/// message, a host step's detail, a backup's bundle.
pub const MAX_MESSAGE: usize = 4096;
/// The most bytes a name a node reports may have: a host step, a unit, an
/// instance, an image or package and its version.
pub const MAX_NAME: usize = 256;
/// The most items of a list a node reports: host steps and their units,
/// instances, images, packages.
pub const MAX_ITEMS: usize = 1024;

/// [`check_safe`], and at most `max` bytes: what a node sends is bounded,
/// so no report can fill the log.
pub fn check_text(f: &mut Findings, field: &str, value: &str, max: usize) -> bool {
    if value.len() > max {
        f.push(field, format!("must be at most {max} bytes"));
        return false;
    }
    check_safe(f, field, value)
}

/// A finding when a list a node reports has more than [`MAX_ITEMS`].
pub fn check_items<T>(f: &mut Findings, field: &str, items: &[T]) -> bool {
    if items.len() > MAX_ITEMS {
        f.push(field, format!("must have at most {MAX_ITEMS} items"));
        return false;
    }
    true
}

/// Pushes a finding for `field` when `value` holds a character that
/// changes how text reads.
pub fn check_safe(f: &mut Findings, field: &str, value: &str) -> bool {
    match unsafe_char(value) {
        Some((at, c)) => {
            f.push(field, describe(at, c));
            false
        }
        None => true,
    }
}

/// Pushes a finding for `field` when any string of `value` (a key or a
/// leaf, at any depth) holds a character that changes how text reads.
pub fn check_json_safe(f: &mut Findings, field: &str, value: &serde_json::Value) -> bool {
    fn first_unsafe(v: &serde_json::Value) -> Option<(usize, char)> {
        match v {
            serde_json::Value::String(s) => unsafe_char(s),
            serde_json::Value::Array(items) => items.iter().find_map(first_unsafe),
            serde_json::Value::Object(m) => m
                .iter()
                .find_map(|(k, v)| unsafe_char(k).or_else(|| first_unsafe(v))),
            serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
                None
            }
        }
    }
    match first_unsafe(value) {
        Some((at, c)) => {
            f.push(field, describe(at, c));
            false
        }
        None => true,
    }
}

/// The most labels a member may carry.
pub const MAX_LABELS: usize = 64;
/// The most bytes of all label keys and values of one member together.
pub const MAX_LABEL_BYTES: usize = 16 * 1024;
/// A label name (a key's part after the prefix) and a label value: at most
/// this many characters.
pub const LABEL_NAME_MAX: usize = 63;
/// A label key's prefix, a DNS subdomain: at most this many characters.
pub const LABEL_PREFIX_MAX: usize = 253;

/// The label key syntax of Kubernetes, as a regular expression for the
/// API's schema: an optional DNS-subdomain prefix and `/`, then a name.
pub const LABEL_KEY_PATTERN: &str = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";
/// The label value syntax: empty, or a name.
pub const LABEL_VALUE_PATTERN: &str = "^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$";

/// A label name or value: alphanumerics at both ends, `-`, `_` and `.`
/// between, at most 63 characters.
fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= LABEL_NAME_MAX
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A DNS subdomain: lowercase labels of alphanumerics and inner hyphens,
/// joined by dots, at most 253 characters.
fn valid_subdomain(s: &str) -> bool {
    s.len() <= LABEL_PREFIX_MAX
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// A label key: `[prefix/]name`.
pub fn valid_label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => valid_subdomain(prefix) && valid_name(name),
        None => valid_name(key),
    }
}

/// A label value: empty or a name.
pub fn valid_label_value(value: &str) -> bool {
    value.is_empty() || valid_name(value)
}

/// Labels: each key and value in the Kubernetes syntax, at most
/// [`MAX_LABELS`] of them and [`MAX_LABEL_BYTES`] together.
pub fn check_labels(
    f: &mut Findings,
    field: &str,
    labels: &std::collections::BTreeMap<String, String>,
) {
    if labels.len() > MAX_LABELS {
        f.push(field, format!("must hold at most {MAX_LABELS} labels"));
    }
    let total: usize = labels.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > MAX_LABEL_BYTES {
        f.push(
            field,
            format!("must hold at most {MAX_LABEL_BYTES} bytes of keys and values together"),
        );
    }
    // The first few bad keys and values are named, not every one of
    // thousands.
    let mut named = 0;
    for (k, v) in labels {
        if named >= 8 {
            break;
        }
        if !valid_label_key(k) {
            f.push(
                field,
                format!(
                    "key {:?} must be a name of at most 63 letters, digits, '-', '_' or '.' (starting and ending with a letter or digit), optionally after a DNS subdomain prefix and '/'",
                    k.escape_default().to_string()
                ),
            );
            named += 1;
        } else if !valid_label_value(v) {
            f.push(
                &format!("{field}.{k}"),
                "must be empty or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
            );
            named += 1;
        }
    }
}

/// A required one-line text (a reason): not blank, at most `max` bytes,
/// and safe to show on a terminal.
pub(crate) fn check_line(
    f: &mut Findings,
    field: &str,
    value: &Option<String>,
    max: usize,
) -> Option<String> {
    let value = f.required(field, value)?;
    if value.trim().is_empty() {
        f.push(field, "must not be empty");
    } else if value.contains(['\n', '\r']) {
        f.push(field, "must be one line");
    } else if value.len() > max {
        f.push(field, format!("must be at most {max} bytes"));
    } else if crate::text::check_safe(f, field, value) {
        return Some(value.clone());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_text_in_any_script_is_safe() {
        for t in [
            "ovsdb-server: connection refused",
            "Zürich – rack 7 ✓",
            "节点加入失败",
            "مرحبا",
            "disk 🔥 on fire",
            "family 👨\u{200D}👩\u{200D}👧",
            "tab\u{200C}joiner",
        ] {
            assert_eq!(unsafe_char(t), None, "{t}");
        }
    }

    #[test]
    fn controls_bidi_and_invisible_characters_are_not() {
        for (t, c) in [
            ("ok\u{1b}]0;PWNED\u{7}", '\u{1b}'),
            ("\u{1b}[1A\u{1b}[2Kplanned", '\u{1b}'),
            ("planned maintenance \u{202E}gnp.exe", '\u{202E}'),
            ("a\u{2066}b", '\u{2066}'),
            ("c1 \u{9b}31m", '\u{9b}'),
            ("del\u{7f}", '\u{7f}'),
            ("tab\there", '\t'),
            ("cr\rhere", '\r'),
            ("zero\u{200B}width", '\u{200B}'),
            ("bom\u{FEFF}", '\u{FEFF}'),
            ("tag\u{E0041}", '\u{E0041}'),
            ("line\u{2028}sep", '\u{2028}'),
            ("rlm\u{200F}", '\u{200F}'),
        ] {
            assert_eq!(unsafe_char(t).map(|(_, c)| c), Some(c), "{t:?}");
        }
        let mut f = Findings::default();
        assert!(!check_safe(
            &mut f,
            "reason",
            "planned maintenance \u{202E}gnp.exe"
        ));
        assert_eq!(f.0[0].field, "reason");
        assert!(
            f.0[0].message.contains("U+202E at character 21"),
            "{}",
            f.0[0].message
        );
        assert!(
            f.0[0].message.contains("bidirectional"),
            "{}",
            f.0[0].message
        );
    }

    #[test]
    fn the_class_lists_exactly_what_the_rule_refuses() {
        let class = unsafe_class();
        assert!(class.starts_with("\\u0000-\\u001F"), "{class}");
        assert!(class.contains("\\u2028-\\u202E"), "{class}");
        assert!(
            !class.contains("\\u200C"),
            "the joiners stay allowed: {class}"
        );
        assert!(class.contains('\u{E0001}'), "{class}");
    }

    #[test]
    fn every_string_of_a_json_value_is_held_to_the_rule() {
        let mut f = Findings::default();
        let ok = serde_json::json!({"os": "Debian 12 – bookworm", "n": [1, "✓"]});
        assert!(check_json_safe(&mut f, "facts", &ok));
        let deep = serde_json::json!({"a": [{"b": "x\u{202e}y"}]});
        assert!(!check_json_safe(&mut f, "facts", &deep));
        let key = serde_json::json!({"k\u{1b}": 1});
        assert!(!check_json_safe(&mut f, "facts", &key));
        assert_eq!(f.0.len(), 2);
    }

    #[test]
    fn label_keys_and_values_follow_the_kubernetes_syntax() {
        for k in [
            "topology.rack",
            "rack",
            "example.com/zone",
            "stratum.io/a_b-c.d",
            "A1",
            &"a".repeat(63),
        ] {
            assert!(valid_label_key(k), "{k}");
        }
        for k in [
            "",
            "x\"><script>",
            "-rack",
            "rack-",
            "Example.com/zone",
            "a/b/c",
            "/name",
            "prefix/",
            &"a".repeat(64),
            "topology.rack\u{1b}",
            "zone name",
        ] {
            assert!(!valid_label_key(k), "{k}");
        }
        for v in ["", "r1", "eu-west-1a", "v1.2_3"] {
            assert!(valid_label_value(v), "{v}");
        }
        for v in ["\u{1b}[31mred", "has space", "-x", &"v".repeat(64)] {
            assert!(!valid_label_value(v), "{v}");
        }
    }

    #[test]
    fn label_counts_and_sizes_are_capped() {
        let many: std::collections::BTreeMap<String, String> =
            (0..10_000).map(|i| (format!("k{i}"), "v".into())).collect();
        let mut f = Findings::default();
        check_labels(&mut f, "labels", &many);
        assert!(
            f.0.iter().any(|e| e.message.contains("at most 64 labels")),
            "{:?}",
            f.0
        );
        let ok: std::collections::BTreeMap<String, String> = (0..MAX_LABELS)
            .map(|i| (format!("k{i}"), "v".into()))
            .collect();
        let mut f = Findings::default();
        check_labels(&mut f, "labels", &ok);
        assert!(f.0.is_empty(), "{:?}", f.0);
    }
}
