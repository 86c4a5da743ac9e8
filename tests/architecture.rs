//! The app's module map stays acyclic: no two top-level modules (`src/<area>/` or
//! `src/<file>.rs`, as declared in `src/lib.rs`) may depend on each other, directly or through
//! others. The layer order this keeps is written down in `docs/architecture.md`.
//!
//! The checker reads the source as text: every `crate::x` path (in `use` lines, including
//! `use crate::{a, b::c}` groups, and in code) outside comments and string literals is an edge
//! from the file's top-level module to `x`. It then finds the strongly connected components of
//! that graph; any with more than one module is a cycle, and the test lists each one with the
//! files that make its edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module → (module it uses → files of the first module that use it).
type ModuleGraph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// The top-level modules `src/lib.rs` declares (`mod x;` / `pub mod x;`).
fn top_level_modules(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read src/lib.rs");
    let code = strip_comments_and_strings(&lib);
    let mut modules = Vec::new();
    for line in code.lines() {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ';')
            .filter(|w| !w.is_empty())
            .collect();
        if let Some(at) = words.iter().position(|w| *w == "mod") {
            if let Some(name) = words.get(at + 1) {
                modules.push(name.to_string());
            }
        }
    }
    modules
}

/// Every `.rs` file of a top-level module: `src/x.rs` and everything under `src/x/`.
fn module_files(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let file = src.join(format!("{module}.rs"));
    if file.is_file() {
        files.push(file);
    }
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("read a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The source with comments removed and the contents of string and char literals blanked, so
/// that a `crate::x` in a doc comment, a URL or a message does not count as a dependency.
/// Newlines are kept so line-based scans still work.
fn strip_comments_and_strings(source: &str) -> String {
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
            && !chars[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
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
                // Skip the backslash and the escaped character, then find the closing quote.
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

/// The first path segment after each `crate::` in `code` (already stripped of comments and
/// strings); for a group (`crate::{a, b::c}`) the first segment of each member.
fn crate_references(code: &str) -> BTreeSet<String> {
    let chars: Vec<char> = code.chars().collect();
    let needle: Vec<char> = "crate".chars().collect();
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i + needle.len() <= chars.len() {
        let starts_word = i == 0 || !(is_ident_char(chars[i - 1]) || chars[i - 1] == '$');
        if !(starts_word && chars[i..i + needle.len()] == needle[..]) {
            i += 1;
            continue;
        }
        let mut j = skip_space(&chars, i + needle.len());
        if !(chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':')) {
            i += needle.len();
            continue;
        }
        j = skip_space(&chars, j + 2);
        if chars.get(j) == Some(&'{') {
            // A group: the first segment of every member at the group's own depth.
            let mut depth = 0;
            let mut expecting_member = true;
            while j < chars.len() {
                match chars[j] {
                    '{' => {
                        depth += 1;
                        j += 1;
                    }
                    '}' => {
                        depth -= 1;
                        j += 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => {
                        expecting_member = true;
                        j += 1;
                    }
                    c if depth == 1 && expecting_member && is_ident_char(c) => {
                        let (word, end) = read_ident(&chars, j);
                        found.insert(word);
                        expecting_member = false;
                        j = end;
                    }
                    _ => j += 1,
                }
            }
            i = j;
        } else {
            let (word, end) = read_ident(&chars, j);
            if !word.is_empty() {
                found.insert(word);
            }
            i = end.max(i + needle.len());
        }
    }
    found.remove("self");
    found
}

fn skip_space(chars: &[char], mut at: usize) -> usize {
    while chars.get(at).is_some_and(|c| c.is_whitespace()) {
        at += 1;
    }
    at
}

fn read_ident(chars: &[char], start: usize) -> (String, usize) {
    let mut end = start;
    while chars.get(end).is_some_and(|c| is_ident_char(*c)) {
        end += 1;
    }
    (chars[start..end].iter().collect(), end)
}

/// The dependency graph of the app's top-level modules, with the files behind each edge.
fn module_graph() -> ModuleGraph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = top_level_modules(&src);
    assert!(
        modules.len() > 5 && modules.iter().any(|m| m == "catalog"),
        "src/lib.rs should declare the app's modules, found {modules:?}"
    );
    let known: BTreeSet<&str> = modules.iter().map(String::as_str).collect();
    let mut graph = ModuleGraph::new();
    for module in &modules {
        let edges = graph.entry(module.clone()).or_default();
        let files = module_files(&src, module);
        assert!(!files.is_empty(), "module {module} has no files");
        for file in files {
            let source = std::fs::read_to_string(&file).expect("read a source file");
            let code = strip_comments_and_strings(&source);
            for used in crate_references(&code) {
                if used != *module && known.contains(used.as_str()) {
                    let relative = file.strip_prefix(&src).unwrap_or(&file);
                    edges
                        .entry(used)
                        .or_default()
                        .insert(format!("src/{}", relative.display()));
                }
            }
        }
    }
    graph
}

/// The strongly connected components of `graph` with more than one node (Tarjan's algorithm),
/// each sorted, in a stable order.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<&str>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a str) {
            let at = self.index.len();
            self.index.insert(node, at);
            self.low.insert(node, at);
            self.stack.push(node);
            self.on_stack.insert(node);
            let graph = self.graph;
            for next in graph.get(node).into_iter().flatten() {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.components.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.components.sort();
    walk.components
}

fn edges_only(graph: &ModuleGraph) -> BTreeMap<String, BTreeSet<String>> {
    graph
        .iter()
        .map(|(from, to)| (from.clone(), to.keys().cloned().collect()))
        .collect()
}

#[test]
fn no_two_top_level_modules_depend_on_each_other() {
    let graph = module_graph();
    let edges = edges_only(&graph);
    let found = cycles(&edges);
    let mut report = String::new();
    for component in &found {
        report.push_str(&format!("cycle: {}\n", component.join(", ")));
        for from in component {
            for (to, files) in &graph[*from] {
                if component.contains(&to.as_str()) {
                    let files: Vec<&str> = files.iter().map(String::as_str).collect();
                    report.push_str(&format!("  {from} -> {to}: {}\n", files.join(", ")));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "import cycles between top-level modules (see the layers in docs/architecture.md):\n{report}"
    );
}

/// The layers of docs/architecture.md, top first. A module may use modules of the layers below
/// its own, never one of its own layer or above. A new top-level module must be placed here.
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["startup"],
    &["routes"],
    &["admin"],
    &["demo_data", "seed", "jobs", "health"],
    &["search", "home", "analytics", "discovery"],
    &["checkout"],
    &["cart"],
    &["stock"],
    &["content"],
    &["catalog"],
    &["comments", "media", "backup"],
    &["mail"],
    &["state"],
    &["web"],
    &["config"],
    &["db", "telemetry"],
    &["clock", "metrics", "domain"],
];

#[test]
fn every_module_uses_only_the_layers_below_its_own() {
    let graph = module_graph();
    let layer_of = |module: &str| LAYERS.iter().position(|layer| layer.contains(&module));
    let mut wrong = Vec::new();
    for (module, uses) in &graph {
        let Some(own) = layer_of(module) else {
            wrong.push(format!(
                "{module} is in no layer: add it to LAYERS and the docs"
            ));
            continue;
        };
        for (used, files) in uses {
            match layer_of(used) {
                Some(layer) if layer > own => {}
                _ => {
                    let files: Vec<&str> = files.iter().map(String::as_str).collect();
                    wrong.push(format!("{module} -> {used}: {}", files.join(", ")));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies against the layer order (see docs/architecture.md):\n{}",
        wrong.join("\n")
    );
}

/// Prints the module map (`cargo test --test app -- --nocapture architecture::module_map`), the
/// table docs/architecture.md summarises.
#[test]
fn module_map_lists_every_module_with_what_it_uses() {
    let graph = module_graph();
    for (module, uses) in &graph {
        let names: Vec<&str> = uses.keys().map(String::as_str).collect();
        println!("{module} -> {}", names.join(", "));
    }
    assert!(graph.contains_key("catalog") && graph.contains_key("web"));
    // `web` sits below every area: it knows none of them.
    for area in [
        "admin", "catalog", "cart", "checkout", "content", "comments",
    ] {
        assert!(
            !graph["web"].contains_key(area),
            "web must not use {area}: {:?}",
            graph["web"].get(area)
        );
    }
}

/// Comments sit below the catalog and content, so they name the discussed collections
/// themselves; those names must stay the ones the owning areas use.
#[test]
fn comments_name_the_collections_their_discussions_live_in() {
    use bazaar::comments::DiscussionKind;
    assert_eq!(
        DiscussionKind::Product.collection(),
        bazaar::catalog::products::COLLECTION
    );
    assert_eq!(
        DiscussionKind::Node.collection(),
        bazaar::content::model::COLLECTION
    );
}

fn synthetic(edges: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges {
        graph
            .entry(from.to_string())
            .or_default()
            .insert(to.to_string());
        graph.entry(to.to_string()).or_default();
    }
    graph
}

#[test]
fn the_cycle_finder_reports_each_strongly_connected_group_once() {
    // a → b → c → a is one cycle; d ↔ e another; f → a and c → g hang off them; h stands alone.
    let graph = synthetic(&[
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "g"),
        ("f", "a"),
        ("d", "e"),
        ("e", "d"),
        ("h", "g"),
    ]);
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"], vec!["d", "e"]]);
}

#[test]
fn the_cycle_finder_accepts_a_layered_graph() {
    let graph = synthetic(&[
        ("admin", "catalog"),
        ("admin", "web"),
        ("catalog", "web"),
        ("catalog", "db"),
        ("web", "db"),
    ]);
    assert!(cycles(&graph).is_empty());
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
    let found = crate_references(&strip_comments_and_strings(source));
    let found: Vec<&str> = found.iter().map(String::as_str).collect();
    assert_eq!(
        found,
        vec!["cart", "catalog", "db", "media", "stock", "web"]
    );
}

/// The files of `dir` (one test binary's directory) that its `main.rs` does not declare as
/// modules. Cargo's test discovery is off, so such a file would silently never run.
fn undeclared_test_files(dir: &Path) -> Vec<String> {
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("read tests/main.rs");
    let declared: BTreeSet<String> = main
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the tests directory") {
        let path = entry.expect("directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let module = if path.is_dir() && path.join("mod.rs").exists() {
            name.to_string()
        } else if let Some(stem) = name.strip_suffix(".rs") {
            stem.to_string()
        } else {
            continue;
        };
        if module != "main" && !declared.contains(&module) {
            missing.push(module);
        }
    }
    missing.sort();
    missing
}

#[test]
fn every_test_file_is_a_module_of_its_crates_test_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in [root.join("tests"), root.join("crates/docstore/tests")] {
        let missing = undeclared_test_files(&dir);
        assert!(
            missing.is_empty(),
            "{} has files its main.rs does not declare (they would never run): {missing:?}",
            dir.display()
        );
    }
}
