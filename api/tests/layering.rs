//! The modules of `api` form no cycle: no module names an item of another
//! module that names one of its items back, directly or through others.
//! A module's own ancestors and descendants do not count (a parent declares
//! its children and a child may use what its parent shares); every other
//! pair of modules depends one way at most. `docs/architecture.md` draws
//! the layers this keeps.
//!
//! Run it alone with `cargo test -p stratum-api --test layering`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `crate::a::b` for `src/a/b.rs` and `src/a/b/mod.rs`; `crate` for lib.rs.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    std::iter::once("crate".to_owned())
        .chain(parts)
        .collect::<Vec<_>>()
        .join("::")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its test modules (`#[cfg(test)] mod ...`,
/// which by this crate's habit close the file).
fn without_tests(text: &str) -> &str {
    let re = regex::Regex::new(r"#\[cfg\(test\)\]\s*(pub\s+)?mod\s").unwrap();
    re.find(text).map_or(text, |m| &text[..m.start()])
}

/// Every path a file names that starts at `crate::` or `super::`, as an
/// absolute path (`use` groups are opened one level).
fn named_paths(module: &str, text: &str) -> Vec<String> {
    let re = regex::Regex::new(
        r"\b(crate|super)((?:::super)*)::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)",
    )
    .unwrap();
    let here: Vec<&str> = module.split("::").collect();
    let mut out = Vec::new();
    for c in re.captures_iter(text) {
        let base: Vec<&str> = if &c[1] == "crate" {
            vec!["crate"]
        } else {
            // `super` is the module's parent, whether it is `foo.rs` or
            // `foo/mod.rs`.
            let ups = 1 + c[2].matches("super").count();
            here[..here.len().saturating_sub(ups)].to_vec()
        };
        let rest = &c[3];
        let tails: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
            group
                .trim_end_matches('}')
                .split(',')
                .map(|s| s.trim().split([' ', '{']).next().unwrap_or("").to_owned())
                .filter(|s| !s.is_empty() && s != "self")
                .collect()
        } else {
            vec![rest.to_owned()]
        };
        for t in tails {
            out.push(format!("{}::{t}", base.join("::")));
        }
    }
    out
}

#[test]
fn the_modules_of_api_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let modules: BTreeMap<String, PathBuf> = all
        .iter()
        .map(|f| (module_of(&src, f), f.clone()))
        .collect();
    assert!(modules.contains_key("crate::command") && modules.contains_key("crate::http::members"));

    let related = |a: &str, b: &str| {
        a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        for path in named_paths(module, without_tests(&text)) {
            // The longest prefix of the path that is a module.
            let parts: Vec<&str> = path.split("::").collect();
            let target = (1..=parts.len())
                .rev()
                .map(|k| parts[..k].join("::"))
                .find(|p| modules.contains_key(p));
            if let Some(t) = target {
                if !related(module, &t) {
                    edges.entry(module.clone()).or_default().insert(t);
                }
            }
        }
    }
    // A module's dependencies are its own and its descendants'.
    let of = |m: &str| -> BTreeSet<String> {
        edges
            .iter()
            .filter(|(k, _)| related(k, m) && k.starts_with(m))
            .flat_map(|(_, v)| v.iter().cloned())
            .filter(|t| !related(t, m))
            .collect()
    };
    // Any path from a module back to itself is a cycle.
    for start in modules.keys().filter(|m| *m != "crate") {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((m, path)) = stack.pop() {
            for next in of(&m) {
                if related(&next, start) && path.len() > 1 {
                    panic!(
                        "a cycle among the modules of api: {} -> {next}",
                        path.join(" -> ")
                    );
                }
                if seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next, p));
                }
            }
        }
    }
}
