//! The app's module map, checked with the same reader and cycle finder as docstore's
//! (`crates/layering`, which says how source is read):
//!
//! - **top level**: no two top-level modules (`src/<area>/` or `src/<file>.rs`) depend on each
//!   other, directly or through others, and each uses only the layers below its own (`LAYERS`,
//!   the table of `docs/architecture.md`);
//! - **inside each area**: no two files of an area (`catalog::cache`, `web::csrf`) depend on
//!   each other either.
//!
//! Each failure lists the cycle or the wrong dependency with the lines that make it.

use std::collections::BTreeSet;
use std::path::Path;

use layering::ModuleMap;

fn app_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The top-level modules and what each uses.
fn top_level() -> ModuleMap {
    let map = ModuleMap::read(app_root(), 1);
    assert!(
        map.units.len() > 5 && map.units.contains("catalog"),
        "src/ should hold the app's modules, found {:?}",
        map.units
    );
    map
}

#[test]
fn no_two_top_level_modules_depend_on_each_other() {
    let map = top_level();
    let found = map.cycles();
    assert!(
        found.is_empty(),
        "import cycles between top-level modules (see the layers in docs/architecture.md):\n{}",
        map.cycle_report(&found)
    );
}

#[test]
fn no_two_files_of_an_area_depend_on_each_other() {
    let map = ModuleMap::read(app_root(), 2);
    assert!(map.units.contains("catalog::cache") && map.units.contains("web::csrf"));
    let found = map.cycles();
    assert!(
        found.is_empty(),
        "import cycles between the files of an area (see docs/architecture.md):\n{}",
        map.cycle_report(&found)
    );
}

/// The layers of docs/architecture.md, top first. A module may use modules of the layers below
/// its own, never one of its own layer or above. A new top-level module must be placed here.
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["startup"],
    &["routes"],
    &["admin"],
    &["demo", "jobs", "health"],
    &["search", "home", "analytics", "discovery"],
    &["accounts"],
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
    let wrong = top_level().layer_violations(LAYERS);
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
    let map = top_level();
    let graph = map.uses();
    for (module, uses) in &graph {
        let names: Vec<&str> = uses.keys().copied().collect();
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
        bazaar::content::store::COLLECTION
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
