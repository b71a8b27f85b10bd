//! The shape of the code, kept by tests that read it as Rust (parsed with `syn`, not searched as
//! text, so that a comment naming `std::fs` is not an offence and `use std::{fs as f}` is):
//!
//! - The core (`src/transcript/`) does no IO, reads no clock and knows no paths: the rule that
//!   keeps it testable and shared by the batch verbs and the daemon.
//! - The top-level modules import each other without a circle: each layer can be read, and
//!   tested, without the ones above it.
//! - No CLI verb imports another verb: what two verbs share lives in a module of `cli/` that is
//!   no verb (or below `cli/`).
//! - The daemon serves what stages and sinks say they need (`StageConfig::needs`,
//!   `SinkConfig::needs`) without naming a stage or a sink.

use super::support::root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Paths the core must not reach, as path prefixes (segment by segment).
const FORBIDDEN: &[&str] = &[
    "std::fs",
    "std::net",
    "std::io::stdin",
    "std::io::stdout",
    "std::io::stderr",
    "std::process",
    "std::env",
    "std::path",
    "std::os",
    "std::time::Instant",
    "std::time::SystemTime",
    "tokio",
    "notify",
    "metrics",
    "tracing",
    "rayon",
];

/// Macros that do IO.
const FORBIDDEN_MACROS: &[&str] = &["println", "eprintln", "print", "eprint", "dbg"];

/// Every path a file names, with the names its `use` items bring in resolved to what they
/// stand for. Items under `#[cfg(test)]` are left out: unit tests may use the file system.
#[derive(Default)]
struct Paths {
    /// `use` items: the full paths (`a::b::c`; a glob as `a::b::*`).
    uses: Vec<Vec<String>>,
    /// Other paths: in expressions, types, patterns, macro names.
    named: Vec<Vec<String>>,
    macros: Vec<String>,
    /// The tokens of each macro call, as text (`matches!(s, A::B { .. })`: paths inside a
    /// macro are not parsed).
    macro_tokens: Vec<String>,
}

fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut full = prefix.clone();
            full.push(n.ident.to_string());
            let alias = if n.ident == "self" { prefix.last().cloned().unwrap_or_default() } else { n.ident.to_string() };
            if n.ident == "self" {
                full.pop();
            }
            out.push((full, alias));
        }
        syn::UseTree::Rename(r) => {
            let mut full = prefix.clone();
            if r.ident != "self" {
                full.push(r.ident.to_string());
            }
            out.push((full, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => {
            let mut full = prefix.clone();
            full.push("*".into());
            out.push((full, String::new()));
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten(t, prefix, out);
            }
        }
    }
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.meta.require_list().is_ok_and(|l| l.tokens.to_string().split(|c: char| !c.is_alphanumeric()).any(|w| w == "test"))
    })
}

#[derive(Default)]
struct Collector {
    aliases: Vec<(Vec<String>, String)>,
    paths: Paths,
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs = match i {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Macro(m) => &m.attrs,
            _ => return syn::visit::visit_item(self, i),
        };
        if is_test_only(attrs) {
            return;
        }
        syn::visit::visit_item(self, i);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut out = Vec::new();
        flatten(&u.tree, &mut Vec::new(), &mut out);
        for (full, alias) in out {
            self.paths.uses.push(full.clone());
            if !alias.is_empty() {
                self.aliases.push((full, alias));
            }
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.paths.named.push(segs);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if let Some(last) = m.path.segments.last() {
            self.paths.macros.push(last.ident.to_string());
        }
        self.paths.macro_tokens.push(m.tokens.to_string());
        syn::visit::visit_macro(self, m);
    }
}

/// The paths of a source text; named paths are resolved through the file's `use` aliases.
fn paths_of(text: &str) -> Paths {
    let file = syn::parse_file(text).expect("the source parses");
    let mut c = Collector::default();
    c.visit_file(&file);
    let aliases = c.aliases;
    let mut paths = c.paths;
    paths.named = paths
        .named
        .into_iter()
        .map(|segs| match aliases.iter().find(|(_, a)| Some(a) == segs.first()) {
            Some((full, _)) => full.iter().cloned().chain(segs.into_iter().skip(1)).collect(),
            None => segs,
        })
        .collect();
    paths
}

fn starts_with(path: &[String], prefix: &str) -> bool {
    let pre: Vec<&str> = prefix.split("::").collect();
    path.len() >= pre.len() && path.iter().zip(&pre).all(|(a, b)| a == b)
}

/// What in `text` breaks the core's rule.
fn offences(text: &str) -> Vec<String> {
    let paths = paths_of(text);
    let mut found = BTreeSet::new();
    for p in paths.uses.iter().chain(&paths.named) {
        // `::std::fs` is `std::fs`.
        let p: Vec<String> = p.iter().filter(|s| !s.is_empty()).cloned().collect();
        for f in FORBIDDEN {
            if starts_with(&p, f) {
                found.insert(p.join("::"));
            }
        }
    }
    for m in &paths.macros {
        if FORBIDDEN_MACROS.contains(&m.as_str()) {
            found.insert(format!("{m}!"));
        }
    }
    found.into_iter().collect()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir).into_iter().filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "rs")).map(|e| e.into_path()).collect()
}

#[test]
fn core_does_no_io_and_reads_no_clock() {
    let files = rust_files(&root().join("src/transcript"));
    assert!(files.len() >= 10, "src/transcript should hold the core's modules");
    let mut all = Vec::new();
    for f in files {
        for o in offences(&std::fs::read_to_string(&f).unwrap()) {
            all.push(format!("{}: {o}", f.display()));
        }
    }
    assert!(all.is_empty(), "the core must stay pure:\n{}", all.join("\n"));
}

#[test]
fn the_purity_guard_reads_rust_not_text() {
    // Caught however spelled.
    for code in [
        "use std::fs; fn f() { fs::read(\"x\").unwrap(); }",
        "use std::{io, fs as disk}; fn f() { disk::read(\"x\").unwrap(); }",
        "fn f() { let _ = std :: time :: Instant :: now(); }",
        "fn f() { ::std::process::exit(1) }",
        "use std::time::{Duration, SystemTime}; fn f() -> Duration { SystemTime::UNIX_EPOCH.elapsed().unwrap() }",
        "use std::io::{self}; fn f() { io::stdout(); }",
        "fn f() { println!(\"x\") }",
        "use tokio::sync::mpsc;",
    ] {
        assert!(!offences(code).is_empty(), "not caught: {code}");
    }
    // Not offences: comments, strings, pure std, test-only code, a name of our own.
    for code in [
        "// reads std::fs in the shell\nfn f() -> &'static str { \"std::fs\" }",
        "use std::time::Duration; use std::io::Write; fn f(_: Duration) {}",
        "#[cfg(test)] mod tests { use std::fs; fn t() { fs::read(\"x\").unwrap(); } }",
        "mod metrics_free { pub fn path() {} } fn f() { metrics_free::path() }",
    ] {
        assert!(offences(code).is_empty(), "false alarm: {code}: {:?}", offences(code));
    }
}

/// The top-level module of a file under `src/`.
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy().into_owned();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
    (name != "main" && name != "lib").then_some(name)
}

/// Which top-level module imports which: every `crate::m` path (in `use` items and in code)
/// of a module's files, test-only code left out.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in rust_files(&src) {
        let Some(m) = top_module(&src, &f) else { continue };
        let paths = paths_of(&std::fs::read_to_string(&f).unwrap());
        let deps = graph.entry(m.clone()).or_default();
        for p in paths.uses.iter().chain(&paths.named) {
            if p.len() >= 2 && p[0] == "crate" && p[1] != m {
                deps.insert(p[1].clone());
            }
        }
    }
    graph
}

/// A circle in `graph`, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(n: &str, g: &BTreeMap<String, BTreeSet<String>>, stack: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|s| s == n) {
            let mut c = stack[i..].to_vec();
            c.push(n.to_owned());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_owned());
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, g, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

/// Edges that close a circle today, each to be removed by the change named: the test fails when
/// one disappears (then delete it here) and when a new circle appears.
const KNOWN: &[(&str, &str, &str)] = &[];

#[test]
fn no_import_circles_between_top_level_modules() {
    let mut graph = module_graph();
    assert!(graph.len() >= 6, "{graph:?}");
    for (from, to, why) in KNOWN {
        let edges = graph.get_mut(*from).expect("a module");
        assert!(edges.remove(*to), "{from} -> {to} is gone ({why}): remove it from KNOWN");
    }
    // The core imports no other module of the crate.
    assert_eq!(graph.get("transcript").cloned().unwrap_or_default(), BTreeSet::new(), "the core imports the shell");
    if let Some(c) = circle(&graph) {
        panic!("import circle: {}\nthe graph: {graph:#?}", c.join(" -> "));
    }
}

#[test]
fn the_circle_finder_finds_circles() {
    let g = |edges: &[(&str, &str)]| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            m.entry((*a).into()).or_default().insert((*b).into());
            m.entry((*b).into()).or_default();
        }
        m
    };
    assert_eq!(circle(&g(&[("cli", "daemon"), ("daemon", "sinks"), ("sinks", "transcript")])), None);
    assert_eq!(circle(&g(&[("cli", "daemon"), ("daemon", "config"), ("config", "cli")])).unwrap(), ["cli", "daemon", "config", "cli"]);
}

/// The module path of a file under `src/` (`a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` and
/// `main.rs` the crate root, empty).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut segs: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let last = segs.pop().unwrap();
    let stem = last.strip_suffix(".rs").unwrap_or(&last);
    if !(stem == "mod" || (segs.is_empty() && (stem == "lib" || stem == "main"))) {
        segs.push(stem.to_owned());
    }
    segs
}

/// Every module-to-module import of the crate: (importing module, imported module), both
/// absolute. A path is resolved through `crate::`, `super::` and `self::` and through the
/// importing module's children, then cut to the longest module it names.
fn module_edges() -> BTreeSet<(Vec<String>, Vec<String>)> {
    let src = root().join("src");
    let files: Vec<(Vec<String>, PathBuf)> = rust_files(&src).into_iter().map(|f| (module_of(&src, &f), f)).collect();
    let known: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut edges = BTreeSet::new();
    for (module, file) in &files {
        let paths = paths_of(&std::fs::read_to_string(file).unwrap());
        for p in paths.uses.iter().chain(&paths.named) {
            let mut abs: Vec<String> = match p.first().map(String::as_str) {
                Some("crate") => p[1..].to_vec(),
                Some("super") | Some("self") => {
                    let mut base = module.clone();
                    let mut rest = &p[..];
                    while let Some(first) = rest.first() {
                        match first.as_str() {
                            "super" => {
                                base.pop();
                            }
                            "self" => {}
                            _ => break,
                        }
                        rest = &rest[1..];
                    }
                    base.extend(rest.iter().cloned());
                    base
                }
                Some(first) => {
                    let mut child = module.clone();
                    child.push(first.to_owned());
                    if !known.contains(&child) {
                        continue;
                    }
                    module.iter().cloned().chain(p.iter().cloned()).collect()
                }
                None => continue,
            };
            while !abs.is_empty() && !known.contains(&abs) {
                abs.pop();
            }
            if !abs.is_empty() && &abs != module {
                edges.insert((module.clone(), abs));
            }
        }
    }
    edges
}

/// For each folder (a module with children), the graph of its children: an import from
/// anywhere under child `a` to anywhere under sibling `b` is an edge `a -> b`. Imports of a
/// folder's own `mod.rs` are not edges of it (a child may use what its parent declares).
fn folder_graphs() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, to) in module_edges() {
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        if common >= from.len() || common >= to.len() {
            continue;
        }
        let folder = if common == 0 { "crate".to_owned() } else { from[..common].join("::") };
        let g = graphs.entry(folder).or_default();
        g.entry(from[common].clone()).or_default().insert(to[common].clone());
        g.entry(to[common].clone()).or_default();
    }
    graphs
}

/// Edges inside a folder that close a circle today, each with the move that removes it: the
/// test fails when one disappears (then delete it here) and when a new circle appears.
const KNOWN_INNER: &[(&str, &str, &str, &str)] = &[];

#[test]
fn no_import_circles_inside_any_folder() {
    let mut graphs = folder_graphs();
    for (folder, from, to, why) in KNOWN_INNER {
        let edges = graphs.get_mut(*folder).and_then(|g| g.get_mut(*from)).expect("a module");
        assert!(edges.remove(*to), "in {folder}: {from} -> {to} is gone ({why}): remove it from KNOWN_INNER");
    }
    for folder in ["crate", "transcript", "daemon", "cli", "transcript::repair"] {
        assert!(graphs.contains_key(folder), "no graph for {folder}: {:?}", graphs.keys());
    }
    let circles: Vec<String> = graphs.iter().filter_map(|(folder, g)| circle(g).map(|c| format!("in {folder}: {}", c.join(" -> ")))).collect();
    assert!(circles.is_empty(), "import circles:\n{}", circles.join("\n"));
}

#[test]
fn the_folder_graphs_resolve_super_self_and_children() {
    let edges = module_edges();
    let has = |from: &str, to: &str| edges.contains(&(from.split("::").map(String::from).collect(), to.split("::").map(String::from).collect()));
    // `use super::health::Health` in daemon/http.rs; `crate::transcript::…` from the shell.
    assert!(has("daemon::http", "daemon::health"));
    assert!(edges.iter().any(|(f, t)| f[0] == "cli" && t[0] == "transcript"));
}

/// The verbs: the module of each `Command` variant's arguments (`Check(check::Args)` is `check`).
fn verbs() -> BTreeSet<String> {
    let file = syn::parse_file(&std::fs::read_to_string(root().join("src/cli/mod.rs")).unwrap()).unwrap();
    let mut verbs = BTreeSet::new();
    for item in &file.items {
        let syn::Item::Enum(e) = item else { continue };
        if e.ident != "Command" {
            continue;
        }
        for v in &e.variants {
            for f in &v.fields {
                if let syn::Type::Path(t) = &f.ty {
                    if t.path.segments.len() > 1 {
                        verbs.insert(t.path.segments[0].ident.to_string());
                    }
                }
            }
        }
    }
    verbs
}

#[test]
fn no_verb_imports_another_verb() {
    let verbs = verbs();
    for v in ["check", "repair", "show", "sessions", "history", "usage", "report"] {
        assert!(verbs.contains(v), "{v} is a verb: {verbs:?}");
    }
    let verb = |m: &[String]| (m.len() >= 2 && m[0] == "cli" && verbs.contains(&m[1])).then(|| m[1].clone());
    let crossings: Vec<String> = module_edges()
        .iter()
        .filter_map(|(from, to)| match (verb(from), verb(to)) {
            (Some(a), Some(b)) if a != b => Some(format!("{} -> {}", from.join("::"), to.join("::"))),
            _ => None,
        })
        .collect();
    assert!(crossings.is_empty(), "a verb imports another verb (move what they share into a module of cli/ that is no verb):\n{}", crossings.join("\n"));
}

/// The config enums whose variants the daemon and the sinks must not name.
const CONFIG_ENUMS: &[&str] = &["StageConfig", "SinkConfig"];

/// The variants of [`CONFIG_ENUMS`] a source text names (`StageConfig::Orphans`), in paths,
/// `use` items and macro calls, test-only code left out.
fn config_variants_named(text: &str) -> BTreeSet<String> {
    let paths = paths_of(text);
    let mut found = BTreeSet::new();
    for p in paths.uses.iter().chain(&paths.named) {
        if let Some(i) = p.iter().position(|s| CONFIG_ENUMS.contains(&s.as_str())) {
            if let Some(v) = p.get(i + 1) {
                found.insert(format!("{}::{v}", p[i]));
            }
        }
    }
    for tokens in &paths.macro_tokens {
        let t: String = tokens.chars().filter(|c| !c.is_whitespace()).collect();
        for e in CONFIG_ENUMS {
            for (at, _) in t.match_indices(&format!("{e}::")) {
                let rest = &t[at + e.len() + 2..];
                let v: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                found.insert(format!("{e}::{v}"));
            }
        }
    }
    found
}

#[test]
fn the_daemon_and_the_sinks_name_no_stage_or_sink_variant() {
    let mut all = Vec::new();
    for dir in ["src/daemon", "src/sinks"] {
        let files = rust_files(&root().join(dir));
        assert!(files.len() >= 5, "{dir}");
        for f in files {
            for v in config_variants_named(&std::fs::read_to_string(&f).unwrap()) {
                all.push(format!("{}: {v}", f.display()));
            }
        }
    }
    assert!(all.is_empty(), "the shell peeks at a stage or sink instead of serving what it needs (StageConfig::needs, SinkConfig::needs):\n{}", all.join("\n"));
    // The finder finds the peeks this replaced: in a macro, a pattern, through an alias.
    for peek in [
        "fn f(s: &[crate::config::StageConfig]) -> bool { s.iter().any(|s| matches!(s, crate::config::StageConfig::Orphans { .. })) }",
        "use crate::config::SinkConfig; fn f(s: &SinkConfig) { if let SinkConfig::RepairedFiles { dir } = s { drop(dir) } }",
        "use crate::config::StageConfig as S; fn f(s: &S) -> bool { match s { S::Repair { .. } => true, _ => false } }",
    ] {
        assert_eq!(config_variants_named(peek).len(), 1, "missed in {peek}");
    }
    assert!(config_variants_named("#[cfg(test)] mod tests { fn f() { let _ = crate::config::SinkConfig::stdout(); } }").is_empty());
    assert!(config_variants_named("fn f(s: &crate::config::StageConfig) -> crate::config::Needs { s.needs() }").is_empty());
}
