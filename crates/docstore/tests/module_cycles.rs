//! No import cycles between docstore's modules. Reads `src/` as text, collects every path one
//! module uses from another (`use crate::a::b`, `use super::x`, a declared child's `child::f`,
//! and the same paths written inline), and fails listing each cycle with the lines that close
//! it.
//!
//! The units compared are the modules down to the second level (`aggregation::expression`,
//! `query::matcher`, `value`); anything deeper counts as its second-level ancestor. A module
//! using its own ancestor (`stages` naming `super::Pipeline`) is not an edge: the parent is
//! the composition of its children, and a recursive structure such as a pipeline holding
//! `$lookup` sub-pipelines could not be written otherwise. Test code (`tests.rs` files and the
//! `#[cfg(test)]` modules at the end of a file) and comments are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// How many path segments name a unit (`aggregation::expression` has two).
const UNIT_DEPTH: usize = 2;

/// One reference from a module to another, with where it is written.
#[derive(Debug, Clone)]
struct Edge {
    from: String,
    to: String,
    at: String,
}

/// A source file and the module path it defines (`src/aggregation/operators/mod.rs` →
/// `["aggregation", "operators"]`).
struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
}

fn source_files(dir: &Path, module: &[String], out: &mut Vec<SourceFile>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            // `src/bin` holds separate binaries, not modules of the library.
            if module.is_empty() && name == "bin" {
                continue;
            }
            let mut child = module.to_vec();
            child.push(name);
            source_files(&path, &child, out);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if stem == "tests" || (module.is_empty() && stem == "lib") {
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

/// The file's code without comments and without the test modules that end it.
fn code_of(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut in_block_comment = false;
    let all: Vec<&str> = text.lines().collect();
    for (i, line) in all.iter().enumerate() {
        let trimmed = line.trim();
        // An inline test module: by convention the rest of the file is tests. (`mod tests;`
        // names a `tests.rs`, which is not read.)
        if trimmed == "#[cfg(test)]"
            && all.get(i + 1).is_some_and(|next| {
                next.trim_start().starts_with("mod ") && next.trim_end().ends_with('{')
            })
        {
            break;
        }
        let mut code = String::new();
        let mut rest = *line;
        loop {
            if in_block_comment {
                match rest.find("*/") {
                    Some(end) => {
                        rest = &rest[end + 2..];
                        in_block_comment = false;
                    }
                    None => break,
                }
            } else {
                let line_comment = rest.find("//");
                let block = rest.find("/*");
                match (line_comment, block) {
                    (Some(l), Some(b)) if b < l => {
                        code.push_str(&rest[..b]);
                        rest = &rest[b + 2..];
                        in_block_comment = true;
                    }
                    (Some(l), _) => {
                        code.push_str(&rest[..l]);
                        break;
                    }
                    (None, Some(b)) => {
                        code.push_str(&rest[..b]);
                        rest = &rest[b + 2..];
                        in_block_comment = true;
                    }
                    (None, None) => {
                        code.push_str(rest);
                        break;
                    }
                }
            }
        }
        lines.push((i + 1, code));
    }
    lines
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every `a::b::c` path in `code`, `use` trees expanded (`crate::{a::b, c}` gives `crate::a::b`
/// and `crate::c`). Generic arguments and the like end a path.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_ident = is_ident_char(chars[i])
            && !chars[i].is_ascii_digit()
            && (i == 0 || !(is_ident_char(chars[i - 1]) || chars[i - 1] == ':'));
        if starts_ident {
            i = read_path(&chars, i, Vec::new(), &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Read a path (or `use` tree) starting at `i` under `prefix`; returns the index after it.
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
        while j < chars.len() && chars[j] == ' ' {
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

/// The module a path written in `module` names, as a unit: `None` for paths outside the crate
/// (`bson::Document`, `std::fmt`) and for names that are not modules.
fn resolve(
    path: &[String],
    module: &[String],
    modules: &BTreeSet<Vec<String>>,
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
    absolute.truncate(UNIT_DEPTH);
    (!absolute.is_empty()).then_some(absolute)
}

fn edges_of(root: &Path) -> (BTreeSet<String>, Vec<Edge>) {
    let mut files = Vec::new();
    source_files(&root.join("src"), &[], &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
    let mut units = BTreeSet::new();
    let mut edges = Vec::new();
    for file in &files {
        let mut from = file.module.clone();
        from.truncate(UNIT_DEPTH);
        let from_name = from.join("::");
        units.insert(from_name.clone());
        let text = fs::read_to_string(&file.path).expect("source file");
        for (line, code) in code_of(&text) {
            for path in paths_in(&code) {
                let Some(to) = resolve(&path, &file.module, &modules) else {
                    continue;
                };
                // Same unit, or the unit's own ancestor: not an edge (see the module comment).
                if to == from || from.starts_with(&to) {
                    continue;
                }
                let rel = file.path.strip_prefix(root).unwrap_or(&file.path);
                edges.push(Edge {
                    from: from_name.clone(),
                    to: to.join("::"),
                    at: format!("{}:{line} `{}`", rel.display(), path.join("::")),
                });
            }
        }
    }
    (units, edges)
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

/// Each cycle with the references inside it, one per line.
fn report(cycles: &[Vec<String>], edges: &[Edge]) -> String {
    let mut text = String::new();
    for cycle in cycles {
        text.push_str(&format!("cycle: {}\n", cycle.join(" <-> ")));
        let mut seen = BTreeSet::new();
        for e in edges {
            if cycle.contains(&e.from) && cycle.contains(&e.to) && seen.insert((&e.from, &e.to)) {
                text.push_str(&format!("  {} -> {}  ({})\n", e.from, e.to, e.at));
            }
        }
    }
    text
}

#[test]
fn docstore_modules_import_each_other_without_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (units, edges) = edges_of(root);
    assert!(
        units.contains("aggregation::expression") && units.contains("value"),
        "the source tree was not read: {units:?}"
    );
    let found = cycles(&units, &edges);
    assert!(
        found.is_empty(),
        "import cycles between docstore modules:\n{}",
        report(&found, &edges)
    );
}

#[test]
fn the_checker_finds_a_cycle_and_ignores_uses_of_an_ancestor() {
    let edge = |from: &str, to: &str| Edge {
        from: from.into(),
        to: to.into(),
        at: String::new(),
    };
    let units: BTreeSet<String> = ["a::x", "a::y", "b", "c"].map(String::from).into();
    let edges = [
        edge("a::x", "a::y"),
        edge("a::y", "b"),
        edge("b", "a::x"),
        edge("c", "b"),
    ];
    assert_eq!(cycles(&units, &edges), vec![vec!["a::x", "a::y", "b"]]);

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
    let unit = |p: &str| {
        let path: Vec<String> = paths_in(p).remove(0);
        resolve(&path, &here, &modules).map(|u| u.join("::"))
    };
    assert_eq!(
        unit("super::super::dates::Part"),
        Some("aggregation::dates".into())
    );
    assert_eq!(unit("crate::value::compare"), Some("value".into()));
    assert_eq!(unit("bson::Document"), None);
    let used: Vec<Vec<String>> =
        paths_in("use crate::{value::{self, Number}, aggregation::dates};");
    assert_eq!(
        used,
        vec![
            vec!["crate", "value", "self"],
            vec!["crate", "value", "Number"],
            vec!["crate", "aggregation", "dates"]
        ]
    );
}
