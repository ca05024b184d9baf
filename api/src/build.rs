//! What this binary is: its version and the commit it was built from
//! (`api/build.rs` has vergen read it), as the metrics and the replica
//! registry show it.

/// The build's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit this binary was built from (with `-dirty` when the tree had
/// changes), or `unknown` when it was not built from a git checkout.
pub fn commit() -> String {
    let sha = env!("VERGEN_GIT_SHA");
    if sha.is_empty() || sha.starts_with("VERGEN_") {
        return "unknown".into();
    }
    match option_env!("VERGEN_GIT_DIRTY") {
        Some("true") => format!("{sha}-dirty"),
        _ => sha.to_owned(),
    }
}
