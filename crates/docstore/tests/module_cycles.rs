//! No import cycles between docstore's modules, checked by the same reader and cycle finder as
//! the app's architecture test (`crates/layering`): every path one module uses from another
//! (`use crate::a::b`, `use super::x`, a declared child's `child::f`, inline paths) outside
//! comments, strings and test modules is an edge, and a group of modules that reach each other
//! fails the test, listing the lines that close it.
//!
//! The map is read twice. Down to the second level (`expression::operators`, `query::matcher`,
//! `value`), anything deeper counting as its second-level ancestor, it must have no cycle. At
//! the top level (`aggregation`, `query`, `value`), where a whole directory is one unit, it must
//! have none either, and each module must use only modules of the layers below its own
//! ([`LAYERS`]), so the order the crate README describes is the order the code keeps. A module
//! using its own ancestor (`stages` naming `super::Pipeline`) is not an edge: the parent is the
//! composition of its children, and a recursive structure such as a pipeline holding `$lookup`
//! sub-pipelines could not be written otherwise.

use layering::ModuleMap;
use std::path::Path;

#[test]
fn docstore_modules_import_each_other_without_cycles() {
    let map = ModuleMap::read(Path::new(env!("CARGO_MANIFEST_DIR")), 2);
    assert!(
        map.units.contains("expression::operators") && map.units.contains("value"),
        "the source tree was not read: {:?}",
        map.units
    );
    let found = map.cycles();
    assert!(
        found.is_empty(),
        "import cycles between docstore modules:\n{}",
        map.cycle_report(&found)
    );
}

#[test]
fn docstore_top_level_modules_import_each_other_without_cycles() {
    let map = ModuleMap::read(Path::new(env!("CARGO_MANIFEST_DIR")), 1);
    assert!(
        map.units.contains("expression") && map.units.contains("value"),
        "the source tree was not read: {:?}",
        map.units
    );
    let found = map.cycles();
    assert!(
        found.is_empty(),
        "import cycles between docstore's top-level modules:\n{}",
        map.cycle_report(&found)
    );
}

/// docstore's top-level modules, top first: a module may use modules of the layers below its
/// own, never one of its own layer or above. A new top-level module must be placed here (and in
/// the README's table). Why the middle is in this order: pipelines run inside updates
/// (`update` over `aggregation`); indexes hold partial filters (`index` over `query`); queries
/// evaluate `$expr` and pipelines evaluate expressions (`expression` under both); expressions
/// read the text score, and text indexes encode their entries as index keys read from dotted
/// paths (`text` under `expression`, over `keystring` and `path`). Collations are parsed and
/// keyed beside text (over `keystring`), and installed as `value`'s string order, which
/// `value` defines without knowing of them.
const LAYERS: &[&[&str]] = &[
    &["server"],
    &["commands"],
    &["dump", "repair"],
    &["state"],
    &["catalog", "cursor", "config"],
    &["collection"],
    &["update"],
    &["aggregation", "index"],
    &["query"],
    &["expression"],
    &["text", "geospatial", "collation"],
    &[
        "auth",
        "keystring",
        "path",
        "pattern",
        "printing",
        "sessions",
        "stats",
        "storage",
        "wire",
    ],
    &["deadline", "stored", "support"],
    &["bson_depth", "error", "login_throttle", "value"],
];

#[test]
fn docstore_top_level_modules_use_only_the_layers_below_their_own() {
    let map = ModuleMap::read(Path::new(env!("CARGO_MANIFEST_DIR")), 1);
    let wrong = map.layer_violations(LAYERS);
    assert!(
        wrong.is_empty(),
        "dependencies against docstore's layer order (LAYERS in tests/module_cycles.rs):\n{}",
        wrong.join("\n")
    );
}
