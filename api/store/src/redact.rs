//! Database URLs and connection strings as logs and errors show them:
//! where and how, never a secret.

/// The settings of a database URL or connection string whose values are
/// shown: they say where and how, never who with which secret. Every other
/// key's value (`password`, however it is spelt or encoded, and any key
/// this list does not know) is hidden.
const SHOWN_KEYS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "application_name",
    "target_session_attrs",
    "connect_timeout",
    "statement-cache-capacity",
    "mode",
    "cache",
    "immutable",
];

/// The one redaction of a database URL (or libpq's `key=value` form, or a
/// backup target's URL) for every output: logs, errors,
/// `--print-config`. The password of the user part is hidden; every query
/// or keyword value but those of [`SHOWN_KEYS`] is hidden, the key
/// compared as the server reads it (percent-decoded, so `pass%77ord` is
/// `password`); a fragment is dropped. Where the user part cannot be told
/// apart from the rest (a `/`, `?` or `#` before the last `@`, as an
/// unencoded password may hold), nothing past the scheme is shown, and a
/// connection string that does not read as `key=value` pairs is not shown.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return if url.contains('=') {
            redact_keywords(url)
        } else if url.contains(['@', ':']) {
            // Not a URL, and it may hold a user part: not shown.
            "(a database address that does not read as a URL; not shown)".to_owned()
        } else {
            // A path (`stratum.db`) or a name: nothing to hide.
            url.to_owned()
        };
    };
    // The user part runs to the last `@`, wherever a `#` stands: a
    // fragment cut first would leave a password's head.
    let (user, rest) = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            if userinfo.contains(['/', '?', '#']) {
                return format!("{scheme}://***");
            }
            let user = match userinfo.split_once(':') {
                Some((u, _)) => format!("{u}:***@"),
                None => format!("{userinfo}@"),
            };
            (user, &rest[at + 1..])
        }
        None => (String::new(), rest),
    };
    let rest = rest.split_once('#').map_or(rest, |(r, _)| r);
    let (base, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let mut out = format!("{scheme}://{user}{base}");
    if let Some(q) = query {
        let pairs: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) if shown(&percent_decode(k)) => format!("{k}={v}"),
                Some((k, _)) => format!("{k}=***"),
                None if shown(&percent_decode(pair)) => pair.to_owned(),
                None => "***".to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

fn shown(key: &str) -> bool {
    SHOWN_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key))
}

/// `%XX` escapes decoded (as a URL's reader decodes a query key); a broken
/// escape is kept as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// libpq's `key = value` form, each value but those of [`SHOWN_KEYS`]
/// hidden (a quoted value up to its closing quote, `\'` and `\\` its
/// escapes); text that does not read as such pairs is not shown at all.
fn redact_keywords(text: &str) -> String {
    const UNREADABLE: &str =
        "(a connection string that does not read as key=value pairs; not shown)";
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else {
            return UNREADABLE.to_owned();
        };
        let key = rest[..eq].trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return UNREADABLE.to_owned();
        }
        let value = rest[eq + 1..].trim_start();
        let (shown_value, after) = if let Some(q) = value.strip_prefix('\'') {
            let mut escaped = false;
            let Some((end, _)) = q.char_indices().find(|&(_, c)| {
                let closes = c == '\'' && !escaped;
                escaped = c == '\\' && !escaped;
                closes
            }) else {
                return UNREADABLE.to_owned();
            };
            (&value[..end + 2], &q[end + 1..])
        } else {
            let end = value.find(char::is_whitespace).unwrap_or(value.len());
            (&value[..end], &value[end..])
        };
        if shown(key) {
            out.push(format!("{key}={shown_value}"));
        } else {
            out.push(format!("{key}=***"));
        }
        rest = after.trim_start();
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_never_reach_logs() {
        assert_eq!(
            redact_url("postgres://app:s3cret@db:5432/stratum"),
            "postgres://app:***@db:5432/stratum"
        );
        assert_eq!(redact_url("sqlite://stratum.db"), "sqlite://stratum.db");
        assert_eq!(
            redact_url("postgres://app@db/stratum?sslmode=require&password=s3cret"),
            "postgres://app@db/stratum?sslmode=require&password=***"
        );
        assert_eq!(
            redact_url("s3://key:s3cret@backups.example/stratum"),
            "s3://key:***@backups.example/stratum"
        );
        assert_eq!(
            redact_url(
                "postgres://app:s3cret@h1:5433,h2:5434/stratum?target_session_attrs=read-write"
            ),
            "postgres://app:***@h1:5433,h2:5434/stratum?target_session_attrs=read-write"
        );
        assert_eq!(
            redact_url("host=h1,h2 password=s3cret dbname=stratum"),
            "host=h1,h2 password=*** dbname=stratum"
        );
        assert_eq!(
            redact_url(r"host=h1 password = 'it\'s s3cret' user=app"),
            "host=h1 password=*** user=app"
        );
    }

    /// Every way a secret was once seen in an output.
    #[test]
    fn no_spelling_of_a_password_is_shown() {
        let cases = [
            // sqlx decodes the key and takes it as the password.
            "postgres://postgres@127.0.0.1/db?pass%77ord=SECRET",
            "postgres://postgres@127.0.0.1/db?PASSWORD=SECRET",
            // A key sqlx does not know: its value is nobody's to print.
            "postgres://postgres@127.0.0.1/db?sslpassword=SECRET",
            // An unencoded ? or / in the password.
            "postgres://app:SEC?RET@db/stratum",
            "postgres://app:SE/CRET@db/stratum",
            "postgres://app:SE#CRET@db/stratum",
            "postgres://app:SECRET@db/stratum#SECRET",
            "host=db pass%77ord=SECRET",
            "host=db passfile=SECRET dbname=x",
            "host=db password='SECRET",
        ];
        let cases = cases
            .into_iter()
            .chain(["postgres:/app:SECRET@db", "postgres:app:SECRET@h"]);
        for url in cases {
            let shown = redact_url(url);
            assert!(
                !shown.contains("SE") && !shown.contains("CRET"),
                "{url} -> {shown}"
            );
        }
        assert_eq!(
            redact_url("postgres://app:SEC?RET@db/stratum"),
            "postgres://***"
        );
        assert_eq!(
            redact_url("postgres://u@h/db?pass%77ord=x&sslmode=require"),
            "postgres://u@h/db?pass%77ord=***&sslmode=require"
        );
        assert_eq!(
            redact_url("sqlite://stratum.db?mode=rwc"),
            "sqlite://stratum.db?mode=rwc"
        );
    }
}
