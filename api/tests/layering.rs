//! The modules of `domain`, `projections`, `api` and `api/store` form no
//! cycle: in each crate, no module names an item of another module that
//! names one of its items back, directly or through others. Only a crate's
//! own paths in code count (`crate::`, `super::`; not those in comments,
//! where rustdoc links may point anywhere), and test code does not
//! (`#[cfg(test)]` modules, inline or in their own files).
//!
//! Two rules, by crate ([`Rule`]):
//! - `api`, `api/store` and `projections` are layered by module tree: a
//!   module depends on whatever it and its descendants name, and its own
//!   ancestors and descendants do not count (a parent declares its
//!   children and a child may use what its parent shares).
//! - `domain` is layered by file: a context's parent module (`iam`,
//!   `membership`, `upgrade`, `storage`) holds its vocabulary, below the
//!   union `event` and the `state` of every context, and its children
//!   (`decide`, `evolve`) hold the rules above them. So a child counts on
//!   its own, and its use of its parent counts too; only a parent's
//!   declaring (and re-exporting) its children does not.
//!
//! A `pub use` is no way around the layers: an item named through a
//! re-export counts as the module that defines it. A glob import
//! (`use super::*`) counts as naming the modules of the items the code
//! uses from it (what the opened module defines, and what it re-exports,
//! followed to where it is defined); a function counts as used where it
//! is called. A parent's own naming of its children (declaring,
//! re-exporting, dispatching to them) does not count.
//!
//! `docs/architecture.md` draws the layers this keeps. Run it alone with
//! `cargo test -p stratum-api --test layering`.

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

/// The test modules a file declares: `#[cfg(test)] mod name;` and
/// `#[cfg(test)] mod name { ... }`, as (name, byte range of the item).
fn test_modules(text: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let re = regex::Regex::new(
        r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*([;{])",
    )
    .unwrap();
    let mut out = Vec::new();
    for c in re.captures_iter(text) {
        let whole = c.get(0).unwrap();
        let end = if &c[2] == ";" {
            whole.end()
        } else {
            // The matching closing brace (braces in strings and comments
            // of test code are rare enough; an unbalanced block runs to
            // the end of the file, which only hides test code).
            let mut depth = 0usize;
            let mut end = text.len();
            for (i, ch) in text[whole.end() - 1..].char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = whole.end() - 1 + i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            end
        };
        out.push((c[1].to_owned(), whole.start()..end));
    }
    out
}

/// The non-test modules of the crate whose sources are in `src`, each with
/// its code less its inline test modules.
fn crate_modules(src: &Path) -> Vec<(String, String)> {
    let mut all = Vec::new();
    files(src, &mut all);
    let mut texts: BTreeMap<String, String> = all
        .iter()
        .map(|f| (module_of(src, f), std::fs::read_to_string(f).unwrap()))
        .collect();
    let mut test_only = BTreeSet::new();
    for (module, text) in &mut texts {
        let found = test_modules(text);
        for (name, range) in found.iter().rev() {
            test_only.insert(format!("{module}::{name}"));
            text.replace_range(range.clone(), "");
        }
    }
    texts
        .into_iter()
        .filter(|(m, _)| {
            !test_only
                .iter()
                .any(|t| m == t || m.starts_with(&format!("{t}::")))
        })
        .collect()
}

/// Every path a module's code names that starts at `crate::` or `super::`,
/// as an absolute path (`use` groups are opened one level).
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
    // A glob import (`use super::*`) names the module it opens, marked
    // `::*`: what it brings in is read where the edges are drawn.
    let glob =
        regex::Regex::new(r"\b(crate|super)((?:::super)*)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\*")
            .unwrap();
    for c in glob.captures_iter(text) {
        let base: Vec<&str> = if &c[1] == "crate" {
            vec!["crate"]
        } else {
            let ups = 1 + c[2].matches("super").count();
            here[..here.len().saturating_sub(ups)].to_vec()
        };
        out.push(format!("{}{}::*", base.join("::"), &c[3]));
    }
    out
}

/// The absolute module a `use` path names from `module` (`crate::`,
/// `self::`, `super::` or a child's name first).
fn absolute(module: &str, path: &str) -> String {
    let mut base: Vec<&str> = module.split("::").collect();
    let mut segs = path.split("::").peekable();
    match segs.peek() {
        Some(&"crate") => {
            base = vec!["crate"];
            segs.next();
        }
        Some(&"self") => {
            segs.next();
        }
        _ => {}
    }
    while segs.peek() == Some(&"super") {
        base.pop();
        segs.next();
    }
    base.extend(segs);
    base.join("::")
}

/// What each module re-exports (`pub use`): names to the module they come
/// from, and the modules it re-exports whole (`*`).
type Reexports = BTreeMap<String, (BTreeMap<String, String>, Vec<String>)>;

fn reexports(modules: &[(String, String)]) -> Reexports {
    let re = regex::Regex::new(
        r"pub\s+use\s+((?:[A-Za-z_][A-Za-z0-9_]*::)+)(\*|\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)\s*;",
    )
    .unwrap();
    let mut out = Reexports::new();
    for (module, code) in modules {
        let (names, globs) = out.entry(module.clone()).or_default();
        for c in re.captures_iter(code) {
            let from = absolute(module, c[1].trim_end_matches(':'));
            match &c[2] {
                "*" => globs.push(from),
                group => {
                    for item in group.trim_matches(['{', '}']).split(',') {
                        let item = item.split_whitespace().next().unwrap_or("");
                        let (sub, name) = item.rsplit_once("::").unwrap_or(("", item));
                        if name.is_empty() || name == "self" {
                            continue;
                        }
                        let at = if sub.is_empty() {
                            from.clone()
                        } else {
                            format!("{from}::{sub}")
                        };
                        names.insert(name.to_owned(), at);
                    }
                }
            }
        }
    }
    out
}

/// How a crate's modules are layered; see the top of this file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// A module with its descendants is one layer.
    Trees,
    /// Each module is a layer of its own, above its ancestors.
    Files,
}

/// A cycle among `modules` (module path, code), as the modules along it
/// from the first to the one that reaches back to it, or `None` when they
/// are layered.
fn find_cycle(rule: Rule, modules: &[(String, String)]) -> Option<Vec<String>> {
    let known: BTreeSet<&str> = modules.iter().map(|(m, _)| m.as_str()).collect();
    let code: BTreeMap<&str, String> = modules
        .iter()
        .map(|(m, text)| {
            let code = text
                .lines()
                .map(|l| l.find("//").map_or(l, |i| &l[..i]))
                .collect::<Vec<_>>()
                .join("\n");
            (m.as_str(), code)
        })
        .collect();
    let reexported = reexports(
        &code
            .iter()
            .map(|(m, c)| (m.to_string(), c.clone()))
            .collect::<Vec<_>>(),
    );
    let defines = |module: &str, name: &str| {
        regex::Regex::new(&format!(
            r"\bpub\s+(?:struct|enum|fn|const|static|type|trait|mod)\s+{name}\b"
        ))
        .unwrap()
        .is_match(code.get(module).map_or("", |c| c.as_str()))
    };
    // The module an item named `module::name...` is defined in, through
    // re-exports: a `pub use` is no way around the layers.
    let defined_in = |mut module: String, name: Option<&str>| -> String {
        let Some(name) = name else { return module };
        for _ in 0..8 {
            let Some((names, globs)) = reexported.get(module.as_str()) else {
                break;
            };
            if let Some(from) = names.get(name).filter(|m| known.contains(m.as_str())) {
                module = from.clone();
            } else if let Some(from) = globs.iter().find(|g| {
                defines(g, name)
                    || reexported
                        .get(g.as_str())
                        .is_some_and(|(n, _)| n.contains_key(name))
            }) {
                module = from.clone();
            } else {
                break;
            }
        }
        module
    };
    let related = |a: &str, b: &str| {
        a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
    };
    // Whether `a` may name `b` without it counting.
    let exempt = |a: &str, b: &str| match rule {
        Rule::Trees => related(a, b),
        Rule::Files => a == b || b.starts_with(&format!("{a}::")),
    };
    // What each module defines, by name, for the items a glob brings in.
    let item = regex::Regex::new(
        r"\bpub(?:\([a-z]+\))?\s+(?:struct|enum|fn|const|static|type|trait)\s+([A-Za-z_][A-Za-z0-9_]*)",
    )
    .unwrap();
    // A function counts as used where it is called; anything else where
    // it is named (so a field named like a function is no use of it).
    let ident = regex::Regex::new(r"\b([A-Za-z_][A-Za-z0-9_]*)\b(\s*(?:\(|::<))?").unwrap();
    let used_in = |c: &str| -> BTreeSet<String> {
        ident
            .captures_iter(c)
            .map(|x| {
                let name = &x[1];
                if x.get(2).is_some() {
                    format!("{name}()")
                } else {
                    name.to_owned()
                }
            })
            .collect()
    };
    let defs: BTreeMap<&str, BTreeSet<String>> = code
        .iter()
        .map(|(m, c)| {
            let names = item
                .captures_iter(c)
                .map(|x| {
                    let name = x.get(1).unwrap().as_str();
                    if x.get(0).unwrap().as_str().contains(" fn ") {
                        format!("{name}()")
                    } else {
                        name.to_owned()
                    }
                })
                .collect();
            (*m, names)
        })
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in &code {
        let module = module.to_string();
        for path in named_paths(&module, code) {
            // A glob brings in what the module defines and what it
            // re-exports: it names the modules of the items this code uses.
            if let Some(opened) = path.strip_suffix("::*") {
                let used = used_in(code);
                let mut reached = BTreeSet::new();
                let mut seen = BTreeSet::from([opened.to_owned()]);
                let mut todo = vec![opened.to_owned()];
                while let Some(m) = todo.pop() {
                    if defs.get(m.as_str()).is_some_and(|d| !d.is_disjoint(&used)) {
                        reached.insert(m.clone());
                    }
                    let Some((names, globs)) = reexported.get(m.as_str()) else {
                        continue;
                    };
                    for (name, from) in names {
                        if !known.contains(from.as_str()) {
                            continue;
                        }
                        let at = defined_in(from.clone(), Some(name));
                        let call = format!("{name}()");
                        let is_fn = defs.get(at.as_str()).is_some_and(|d| d.contains(&call));
                        if used.contains(if is_fn { &call } else { name }) {
                            reached.insert(at);
                        }
                    }
                    for g in globs {
                        if known.contains(g.as_str()) && seen.insert(g.clone()) {
                            todo.push(g.clone());
                        }
                    }
                }
                for t in reached {
                    if !exempt(&module, &t) {
                        edges.entry(module.clone()).or_default().insert(t);
                    }
                }
                continue;
            }
            // The longest prefix of the path that is a module, then where
            // the item after it is defined.
            let parts: Vec<&str> = path.split("::").collect();
            let target = (1..=parts.len())
                .rev()
                .find(|k| known.contains(parts[..*k].join("::").as_str()))
                .map(|k| defined_in(parts[..k].join("::"), parts.get(k).copied()));
            if let Some(t) = target {
                if !exempt(&module, &t) {
                    edges.entry(module.clone()).or_default().insert(t);
                }
            }
        }
    }
    // A module's dependencies: by tree, its own and its descendants'.
    let of = |m: &str| -> BTreeSet<String> {
        match rule {
            Rule::Trees => edges
                .iter()
                .filter(|(k, _)| related(k, m) && k.starts_with(m))
                .flat_map(|(_, v)| v.iter().cloned())
                .filter(|t| !related(t, m))
                .collect(),
            Rule::Files => edges.get(m).cloned().unwrap_or_default(),
        }
    };
    let back = |next: &str, start: &str| match rule {
        Rule::Trees => related(next, start),
        Rule::Files => next == start,
    };
    // Any path from a module back to itself is a cycle.
    for start in known.iter().filter(|m| **m != "crate") {
        let mut stack = vec![(start.to_string(), vec![start.to_string()])];
        let mut seen = BTreeSet::new();
        while let Some((m, path)) = stack.pop() {
            for next in of(&m) {
                if back(&next, start) {
                    let mut cycle = path.clone();
                    cycle.push(next);
                    return Some(cycle);
                }
                if seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next, p));
                }
            }
        }
    }
    None
}

/// The sources of a crate of the workspace, from `api`'s manifest dir.
fn src_of(krate: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(krate)
        .join("src")
}

fn assert_layered(name: &str, rule: Rule, src: &Path, expect: &[&str]) {
    let modules = crate_modules(src);
    for m in expect {
        assert!(
            modules.iter().any(|(k, _)| k == m),
            "{name}: no module {m} in {}",
            src.display()
        );
    }
    if let Some(cycle) = find_cycle(rule, &modules) {
        panic!(
            "a cycle among the modules of {name}: {}",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn the_modules_of_api_form_no_cycle() {
    assert_layered(
        "api",
        Rule::Trees,
        &src_of("."),
        &["crate::command", "crate::http::members"],
    );
}

#[test]
fn the_modules_of_the_store_form_no_cycle() {
    assert_layered(
        "api/store",
        Rule::Trees,
        &src_of("store"),
        &["crate::postgres", "crate::sqlite"],
    );
}

#[test]
fn the_modules_of_projections_form_no_cycle() {
    assert_layered(
        "projections",
        Rule::Trees,
        &src_of("../projections"),
        &["crate::members", "crate::iam"],
    );
}

#[test]
fn the_modules_of_domain_form_no_cycle() {
    let src = src_of("../domain");
    // Test code is not checked: the `tests` tree is declared `#[cfg(test)]`.
    // `testing` (one event of each type, a signing key) is: other crates'
    // tests compile it through the `testing` feature, and nothing below
    // it may name it.
    let modules = crate_modules(&src);
    assert!(!modules.iter().any(|(m, _)| m.starts_with("crate::tests")));
    assert_layered(
        "domain",
        Rule::Files,
        &src,
        &[
            "crate::event",
            "crate::membership::decide",
            "crate::iam",
            "crate::policy",
            "crate::testing",
        ],
    );
}

fn m(path: &str, text: &str) -> (String, String) {
    (path.to_owned(), text.to_owned())
}

/// The checker is not vacuous: two modules naming each other are a cycle
/// by either rule, found through a `use` group and a `super::` path.
#[test]
fn two_modules_naming_each_other_are_a_cycle() {
    let modules = [
        m("crate", "mod a; mod b;"),
        m("crate::a", "use crate::b::{Thing, other};"),
        m(
            "crate::b",
            "pub struct Thing; fn f() -> super::a::Other { todo!() }",
        ),
    ];
    for rule in [Rule::Trees, Rule::Files] {
        let cycle = find_cycle(rule, &modules).expect("a <-> b is a cycle");
        assert_eq!(cycle, ["crate::a", "crate::b", "crate::a"], "{rule:?}");
    }
    // A path in a comment is no dependency.
    let commented = [
        m("crate::a", "use crate::b::Thing;"),
        m(
            "crate::b",
            "/// Used by [`crate::a::f`].\npub struct Thing; // see super::a",
        ),
    ];
    assert_eq!(find_cycle(Rule::Trees, &commented), None);
}

/// Through a third module and a child: by tree, `a` depends on what its
/// child `a::x` names, so a::x -> b -> c -> a is a cycle; by file it is
/// not (`a` itself names nothing), until `a::x` is what `c` names.
#[test]
fn a_cycle_through_a_child() {
    let mut modules = vec![
        m("crate::a", "pub mod x; pub struct A;"),
        m("crate::a::x", "use crate::b::B;"),
        m("crate::b", "use crate::c::C;"),
        m("crate::c", "use crate::a::A;"),
    ];
    assert!(find_cycle(Rule::Trees, &modules).is_some());
    assert_eq!(find_cycle(Rule::Files, &modules), None);
    modules[3] = m("crate::c", "use crate::a::x::X;");
    assert_eq!(
        find_cycle(Rule::Files, &modules),
        Some(vec![
            "crate::a::x".into(),
            "crate::b".into(),
            "crate::c".into(),
            "crate::a::x".into()
        ])
    );
    // By file a child's use of its parent counts: a -> b -> a::x -> a.
    let modules = [
        m("crate::a", "pub mod x; use crate::b::B;"),
        m("crate::a::x", "use super::A;"),
        m("crate::b", "use crate::a::x::X;"),
    ];
    assert!(find_cycle(Rule::Files, &modules).is_some());
}

/// A re-export is no way around the layers: `event` naming an item of
/// `ctx::model` through `ctx`'s `pub use` depends on `ctx::model`, whether
/// `ctx` names the item or re-exports the module whole.
#[test]
fn a_cycle_behind_a_re_export() {
    for reexport in ["pub use model::Thing;", "pub use self::model::*;"] {
        let modules = [
            m("crate::ctx", &format!("pub mod model; {reexport}")),
            m(
                "crate::ctx::model",
                "use crate::event::Event; pub struct Thing;",
            ),
            m("crate::event", "use crate::ctx::Thing; pub enum Event {}"),
        ];
        assert_eq!(
            find_cycle(Rule::Files, &modules),
            Some(vec![
                "crate::ctx::model".into(),
                "crate::event".into(),
                "crate::ctx::model".into()
            ]),
            "{reexport}"
        );
    }
}

/// A glob import (`use super::*`) names the modules of the items the code
/// uses from it, through the opened module's re-exports; a function counts
/// where it is called, so a field named like one is no use of it.
#[test]
fn a_cycle_behind_a_glob_import() {
    let modules = [
        m(
            "crate::up",
            "pub mod model; pub mod commands; pub use model::*; pub use commands::check;",
        ),
        m(
            "crate::up::model",
            "pub use super::commands::Command; pub struct Source;",
        ),
        m(
            "crate::up::commands",
            "use super::*; pub enum Command { Register(Source) } pub fn check() {}",
        ),
    ];
    assert_eq!(
        find_cycle(Rule::Files, &modules),
        Some(vec![
            "crate::up::commands".into(),
            "crate::up::model".into(),
            "crate::up::commands".into()
        ])
    );
    // Without the re-export back, one way only; and a field named `check`
    // in the model is no call of `commands::check`.
    let modules = [
        modules[0].clone(),
        m(
            "crate::up::model",
            "use super::*; pub struct Source { check: bool }",
        ),
        modules[2].clone(),
    ];
    assert_eq!(find_cycle(Rule::Files, &modules), None);
}

/// One way only, and a parent with its child, are not cycles; neither is
/// a test module naming back, inline or in its own file.
#[test]
fn no_cycle_without_one() {
    let modules = [
        m("crate::a", "use crate::b::B; use self::x::X;"),
        m("crate::a::x", "use super::A; use crate::b::B;"),
        m("crate::b", "pub struct B;"),
    ];
    assert_eq!(find_cycle(Rule::Trees, &modules), None);
    assert_eq!(find_cycle(Rule::Files, &modules), None);

    let dir = std::env::temp_dir().join(format!("layering-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("lib.rs"),
        "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("a.rs"),
        "use crate::b::B;\n#[cfg(test)]\nmod tests {\n    use crate::b::{B};\n    fn f() { if true { } }\n}\npub struct A;\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "pub struct B;\n#[cfg(test)]\nmod t {\n    use crate::a::A;\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("tests.rs"), "use crate::a::A; use crate::b::B;\n").unwrap();
    let modules = crate_modules(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        modules.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        ["crate", "crate::a", "crate::b"]
    );
    assert!(modules[1].1.contains("pub struct A;"), "{:?}", modules[1]);
    assert_eq!(find_cycle(Rule::Trees, &modules), None);
    // The same code with `b`'s test module in plain code is a cycle.
    let mut without_cfg = modules.clone();
    without_cfg[2].1.push_str("use crate::a::A;");
    assert!(find_cycle(Rule::Trees, &without_cfg).is_some());
}
