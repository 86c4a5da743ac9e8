//! The module-map checker behind both crates' architecture tests (`tests/architecture.rs` of
//! the app, `tests/module_cycles.rs` of docstore): one reader of the source tree, one cycle
//! finder, one layer check, so the two crates are held to the same rules by the same code.
//!
//! The source is read as text. Every path one module writes to another (`use crate::a::b`,
//! `use super::x`, `use crate::{a, b::c}` groups, a declared child's `child::f`, and the same
//! paths written inline in code) is an edge between *units*: the modules down to a chosen depth
//! (depth 1: `catalog`, `web`; depth 2: `catalog::cache`, `web::csrf`), anything deeper counting
//! as its ancestor at that depth. Comments, string and char literals, and the test modules that
//! end a file (`#[cfg(test)] mod tests { … }`, `tests.rs` files) are left out. A module using
//! its own ancestor (`catalog::cache` naming `super::Product`) is not an edge: the parent is the
//! composition of its children (its `mod.rs` declares and re-exports them).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One reference from a unit to another, with where it is written (`src/x.rs:12 \`path\``).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub at: String,
}

/// The units of a crate at one depth and the references between them.
#[derive(Debug, Default)]
pub struct ModuleMap {
    pub units: BTreeSet<String>,
    pub edges: Vec<Edge>,
}

/// A source file and the module path it defines (`src/catalog/cache.rs` → `["catalog",
/// "cache"]`, `src/web/mod.rs` → `["web"]`).
struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
}

impl ModuleMap {
    /// Reads `crate_root/src` (the library: `src/main.rs` and `src/bin/` are left out) and
    /// collects the units at `depth` and the edges between them.
    pub fn read(crate_root: &Path, depth: usize) -> ModuleMap {
        let mut files = Vec::new();
        source_files(&crate_root.join("src"), &[], &mut files);
        let modules: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
        let mut map = ModuleMap::default();
        for file in &files {
            let mut from = file.module.clone();
            from.truncate(depth);
            if from.is_empty() {
                continue;
            }
            let from_name = from.join("::");
            map.units.insert(from_name.clone());
            let text = fs::read_to_string(&file.path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", file.path.display()));
            let code = without_tests(&strip_comments_and_strings(&text));
            let rel = file.path.strip_prefix(crate_root).unwrap_or(&file.path);
            for (number, line) in code.lines().enumerate() {
                for path in paths_in(line) {
                    let Some(to) = resolve(&path, &file.module, &modules, depth) else {
                        continue;
                    };
                    // The same unit, or the unit's own ancestor: not an edge (see the header).
                    if to == from || from.starts_with(&to) {
                        continue;
                    }
                    map.edges.push(Edge {
                        from: from_name.clone(),
                        to: to.join("::"),
                        at: format!("{}:{} `{}`", rel.display(), number + 1, path.join("::")),
                    });
                }
            }
        }
        map
    }

    /// Unit → (unit it uses → where), every unit present even if it uses nothing.
    pub fn uses(&self) -> BTreeMap<&str, BTreeMap<&str, Vec<&str>>> {
        let mut out: BTreeMap<&str, BTreeMap<&str, Vec<&str>>> = self
            .units
            .iter()
            .map(|u| (u.as_str(), BTreeMap::new()))
            .collect();
        for e in &self.edges {
            out.entry(e.from.as_str())
                .or_default()
                .entry(e.to.as_str())
                .or_default()
                .push(e.at.as_str());
        }
        out
    }

    /// The groups of units that depend on each other (strongly connected components with more
    /// than one unit), each sorted, the list sorted.
    pub fn cycles(&self) -> Vec<Vec<String>> {
        cycles(&self.units, &self.edges)
    }

    /// Each cycle with one written reference per pair of units inside it, one per line.
    pub fn cycle_report(&self, cycles: &[Vec<String>]) -> String {
        let mut text = String::new();
        for cycle in cycles {
            text.push_str(&format!("cycle: {}\n", cycle.join(" <-> ")));
            let mut seen = BTreeSet::new();
            for e in &self.edges {
                if cycle.contains(&e.from) && cycle.contains(&e.to) && seen.insert((&e.from, &e.to))
                {
                    text.push_str(&format!("  {} -> {}  ({})\n", e.from, e.to, e.at));
                }
            }
        }
        text
    }

    /// The edges against `layers` (top first): a unit may use units of the layers below its
    /// own, never its own layer or one above. A unit in no layer is reported too.
    pub fn layer_violations(&self, layers: &[&[&str]]) -> Vec<String> {
        let layer_of = |unit: &str| layers.iter().position(|layer| layer.contains(&unit));
        let mut wrong = Vec::new();
        for (unit, uses) in self.uses() {
            let Some(own) = layer_of(unit) else {
                wrong.push(format!("{unit} is in no layer: add it to the layer table"));
                continue;
            };
            for (used, at) in uses {
                if layer_of(used).is_none_or(|layer| layer <= own) {
                    wrong.push(format!("{unit} -> {used}: {}", at.join(", ")));
                }
            }
        }
        wrong
    }
}

fn source_files(dir: &Path, module: &[String], out: &mut Vec<SourceFile>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if path.is_dir() {
            // `src/bin` holds separate binaries, not modules of the library.
            if module.is_empty() && name == "bin" {
                continue;
            }
            let mut child = module.to_vec();
            child.push(name);
            source_files(&path, &child, out);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if stem == "tests" || (module.is_empty() && (stem == "lib" || stem == "main")) {
                continue;
            }
            let mut m = module.to_vec();
            if stem != "mod" {
                m.push(stem.to_string());
            }
            out.push(SourceFile { path, module: m });
        }
    }
}

/// The code up to the test module that ends a file (by convention `#[cfg(test)]` followed by
/// `mod name {`); `mod tests;` names a `tests.rs`, which is not read.
fn without_tests(code: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = String::with_capacity(code.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim() == "#[cfg(test)]"
            && lines.get(i + 1).is_some_and(|next| {
                next.trim_start().starts_with("mod ") && next.trim_end().ends_with('{')
            })
        {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The source with comments removed and the contents of string and char literals blanked, so
/// that a `crate::x` in a doc comment, a URL or a message is not a reference. Newlines are kept,
/// so line numbers stay right.
pub fn strip_comments_and_strings(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // Block comments nest in Rust.
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !chars[..i].last().is_some_and(|p| is_ident_char(*p))
        {
            // Raw string: r"…", r#"…"#, with as many hashes at the end as at the start.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('"') if (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some('\n') => out.push('\n'),
                    Some(_) => {}
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                } else if chars[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a): only the former is
            // skipped.
            if next == Some('\\') {
                let mut j = i + 3;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every `a::b::c` path in `code`, `use` trees expanded (`crate::{a::b, c}` gives `crate::a::b`
/// and `crate::c`). Generic arguments and the like end a path; `$crate::` (a macro's) is not
/// this crate's path.
pub fn paths_in(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_ident = is_ident_char(chars[i])
            && !chars[i].is_ascii_digit()
            && (i == 0 || !(is_ident_char(chars[i - 1]) || chars[i - 1] == ':'));
        if starts_ident && !(i > 0 && chars[i - 1] == '$') {
            i = read_path(&chars, i, Vec::new(), &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Reads a path (or `use` tree) starting at `i` under `prefix`; returns the index after it.
fn read_path(
    chars: &[char],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut segments = prefix;
    loop {
        let start = i;
        while i < chars.len() && is_ident_char(chars[i]) {
            i += 1;
        }
        if start == i {
            break;
        }
        segments.push(chars[start..i].iter().collect());
        let mut j = i;
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        if chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') {
            j += 2;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            if chars.get(j) == Some(&'{') {
                // A use tree: each comma-separated branch continues the prefix.
                j += 1;
                loop {
                    while j < chars.len() && (chars[j].is_whitespace() || chars[j] == ',') {
                        j += 1;
                    }
                    match chars.get(j) {
                        None => return j,
                        Some('}') => return j + 1,
                        Some(c) if is_ident_char(*c) => {
                            j = read_path(chars, j, segments.clone(), out);
                        }
                        // `*` or anything unexpected: the prefix itself is the reference.
                        Some(_) => {
                            out.push(segments.clone());
                            j += 1;
                        }
                    }
                }
            }
            i = j;
            continue;
        }
        break;
    }
    if segments.len() > 1 {
        out.push(segments);
    }
    i
}

/// The unit (at `depth`) a path written in `module` names: `None` for paths outside the crate
/// (`bson::Document`, `std::fmt`) and for names that are not modules.
fn resolve(
    path: &[String],
    module: &[String],
    modules: &BTreeSet<Vec<String>>,
    depth: usize,
) -> Option<Vec<String>> {
    let mut absolute: Vec<String> = match path.first().map(String::as_str)? {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => module[..module.len().checked_sub(1)?].to_vec(),
        first => {
            // A relative path must start with a child module of the current one.
            let mut child = module.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            module.to_vec()
        }
    };
    let mut rest = &path[usize::from(matches!(path[0].as_str(), "crate" | "self" | "super"))..];
    while rest.first().map(String::as_str) == Some("super") {
        absolute.pop()?;
        rest = &rest[1..];
    }
    for segment in rest {
        let mut next = absolute.clone();
        next.push(segment.clone());
        if !modules.contains(&next) {
            break;
        }
        absolute = next;
    }
    absolute.truncate(depth);
    (!absolute.is_empty()).then_some(absolute)
}

/// The strongly connected components with more than one unit (Tarjan's algorithm).
fn cycles(units: &BTreeSet<String>, edges: &[Edge]) -> Vec<Vec<String>> {
    let names: Vec<&String> = units.iter().collect();
    let index_of: BTreeMap<&String, usize> =
        names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut next: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); names.len()];
    for e in edges {
        if let (Some(&a), Some(&b)) = (index_of.get(&e.from), index_of.get(&e.to)) {
            next[a].insert(b);
        }
    }
    struct Tarjan<'a> {
        next: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        components: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.counter);
            self.low[v] = self.counter;
            self.counter += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in self.next[v].iter() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut component = Vec::new();
                loop {
                    let w = self.stack.pop().expect("on the stack");
                    self.on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                self.components.push(component);
            }
        }
    }
    let mut t = Tarjan {
        next: &next,
        index: vec![None; names.len()],
        low: vec![0; names.len()],
        on_stack: vec![false; names.len()],
        stack: Vec::new(),
        counter: 0,
        components: Vec::new(),
    };
    for v in 0..names.len() {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    let mut out: Vec<Vec<String>> = t
        .components
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut c: Vec<String> = c.into_iter().map(|i| names[i].clone()).collect();
            c.sort();
            c
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: &str, to: &str) -> Edge {
        Edge {
            from: from.into(),
            to: to.into(),
            at: String::new(),
        }
    }

    fn map(edges: &[(&str, &str)]) -> ModuleMap {
        let mut m = ModuleMap::default();
        for (from, to) in edges {
            m.units.insert(from.to_string());
            m.units.insert(to.to_string());
            m.edges.push(edge(from, to));
        }
        m
    }

    #[test]
    fn the_cycle_finder_reports_each_strongly_connected_group_once() {
        // a → b → c → a is one cycle; d ↔ e another; f → a and c → g hang off them.
        let m = map(&[
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
            ("c", "g"),
            ("f", "a"),
            ("d", "e"),
            ("e", "d"),
            ("h", "g"),
        ]);
        assert_eq!(m.cycles(), vec![vec!["a", "b", "c"], vec!["d", "e"]]);
    }

    #[test]
    fn the_cycle_finder_accepts_a_layered_graph() {
        let m = map(&[
            ("admin", "catalog"),
            ("admin", "web"),
            ("catalog", "web"),
            ("catalog", "db"),
            ("web", "db"),
        ]);
        assert!(m.cycles().is_empty());
        let layers: &[&[&str]] = &[&["admin"], &["catalog"], &["web"], &["db"]];
        assert!(m.layer_violations(layers).is_empty());
        let upside_down: &[&[&str]] = &[&["admin"], &["web"], &["catalog"], &["db"]];
        assert_eq!(m.layer_violations(upside_down), vec!["catalog -> web: "]);
    }

    #[test]
    fn paths_are_resolved_to_units_relative_to_the_writing_module() {
        let modules: BTreeSet<Vec<String>> = [
            vec!["aggregation"],
            vec!["aggregation", "stages"],
            vec!["aggregation", "stages", "lookup"],
            vec!["aggregation", "dates"],
            vec!["value"],
        ]
        .into_iter()
        .map(|m| m.into_iter().map(String::from).collect())
        .collect();
        let here: Vec<String> = ["aggregation", "stages", "lookup"].map(String::from).into();
        let unit = |p: &str, depth: usize| {
            let path: Vec<String> = paths_in(p).remove(0);
            resolve(&path, &here, &modules, depth).map(|u| u.join("::"))
        };
        assert_eq!(
            unit("super::super::dates::Part", 2),
            Some("aggregation::dates".into())
        );
        assert_eq!(
            unit("super::super::dates::Part", 1),
            Some("aggregation".into())
        );
        assert_eq!(unit("crate::value::compare", 2), Some("value".into()));
        assert_eq!(unit("bson::Document", 2), None);
    }

    #[test]
    fn references_are_read_from_paths_and_groups_but_not_comments_or_strings() {
        let source = r##"
            use crate::catalog::products::{self, Product};
            use crate::{cart, web::{errors::AppError, layout}, db::Db};
            // use crate::admin;
            /// See [`crate::startup`].
            /* crate::jobs /* nested */ crate::search */
            fn f() -> crate :: stock::Ledger {
                let url = "http://x/crate::routes";
                let raw = r#"crate::health "quoted""#;
                let c = '"'; let d = '\''; let e: &'static str = "";
                $crate::ignored;
                crate::media::serve(c)
            }
        "##;
        let firsts: BTreeSet<String> = paths_in(&strip_comments_and_strings(source))
            .into_iter()
            .filter(|p| p[0] == "crate")
            .map(|p| p[1].clone())
            .collect();
        let firsts: Vec<&str> = firsts.iter().map(String::as_str).collect();
        assert_eq!(
            firsts,
            vec!["cart", "catalog", "db", "media", "stock", "web"]
        );
    }

    #[test]
    fn test_modules_at_the_end_of_a_file_are_left_out() {
        let code = "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n";
        assert_eq!(without_tests(code), "use crate::a;\n");
    }
}
